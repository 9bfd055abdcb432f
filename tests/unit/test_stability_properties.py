"""Every transformation's declared stability holds on random neighbouring datasets.

For a random small table D and a neighbour D' (one privacy unit added: one row, or every row
of one new user), the outputs of a plan on D and on D' must differ by at most the stability
that the stability visitor declares, counted as the size of the multiset symmetric
difference. Randomized transformations (truncation) run under the same test seed on both
sides; their per-row priorities depend only on each row's own values, which couples the runs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.engines.registry import executor_for

# Each property runs on every engine (the `engine` fixture wraps DataFrames on it); Spark
# jobs take a fraction of a second each, so it gets fewer examples.
# Polars runs fewer than DuckDB to keep its CI cost near 2 CPU minutes: its expressions are
# also checked value by value against pandas (tests/unit/test_polars_expressions.py).
EXAMPLES = {"pandas": 60, "duckdb": 25, "spark": 4, "polars": 12, "postgres": 15}

row = st.fixed_dictionaries(
    {
        "k": st.integers(0, 3),
        "v": st.one_of(st.integers(-5, 5), st.none()),
        "s": st.sampled_from(["a", "b", "c"]),
        "items": st.lists(st.integers(0, 4), max_size=4),
    }
)
rows = st.lists(row, max_size=12)
user_rows = st.lists(st.integers(0, 3), min_size=1, max_size=5)  # k values of one user's rows


def to_df(records: list[dict]) -> pd.DataFrame:
    # "s" is a string column ("str"): an object column is type any, which DuckDB and Spark
    # cannot hold undeclared.
    cols = {"k": "int64", "v": "float64", "s": "str", "items": "object"}
    df = pd.DataFrame(records, columns=list(cols))
    return df.astype({c: t for c, t in cols.items() if c != "items"})


def as_multiset(df: pd.DataFrame) -> Counter:
    def norm(x: object) -> object:
        if isinstance(x, list | tuple | np.ndarray):  # engines return lists as arrays
            return tuple(norm(i) for i in x)
        if isinstance(x, float) and math.isnan(x):
            return "<NULL>"
        if x is None or x is pd.NA:
            return "<NULL>"
        return x

    cols = sorted(df.columns)
    return Counter(tuple(norm(x) for x in r) for r in df[cols].itertuples(index=False))


def sym_diff(a: pd.DataFrame, b: pd.DataFrame) -> int:
    ma, mb = as_multiset(a), as_multiset(b)
    return sum(((ma - mb) + (mb - ma)).values())


def run(frame: pq.PrivateFrame, seed: int) -> pd.DataFrame:
    with pq.testing.seed(seed):
        ex = executor_for(frame._plan, frame._rel.catalog)
        return ex.rows(frame._plan)  # type: ignore[attr-defined]


def declared(frame: pq.PrivateFrame, budget: pq.Budget) -> float:
    return float(frame.stabilities.get(budget, 0))


def check_unary(
    base: list[dict], extra: dict, build: Callable[[pq.PrivateFrame], pq.PrivateFrame], seed: int
) -> None:
    budget = pq.Budget(epsilon=1)
    d = to_df(base)
    d2 = to_df([*base, extra])
    f = build(pq.PrivateFrame(d, budget))
    f2 = build(pq.PrivateFrame(d2, budget))
    k = declared(f, budget)
    assert sym_diff(run(f, seed), run(f2, seed)) <= k


def fast(engine: str) -> settings:
    return settings(
        max_examples=EXAMPLES[engine],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


UNARY = {
    "where": lambda f: f.where("v > 0 OR s = 'a'"),
    "where_null_logic": lambda f: f.where("NOT (v < 2)"),
    "select": lambda f: f.select("k", w="v * 2 + k"),
    "assign": lambda f: f.assign(v="COALESCE(v, 0) / (k - 1)"),
    "distinct_all": lambda f: f.select("k", "s").distinct(),
    "distinct_cols": lambda f: f.distinct("s"),
    "explode": lambda f: f.explode("items", max_items=2),
    "groupby": lambda f: f.groupby("k").agg(n="COUNT(*)", t="SUM(v)", m="MAX(v)"),
    "groupby_two_keys": lambda f: f.groupby("k", "s").agg(n="COUNT(v)"),
    "public_join_unique": lambda f: f.join(
        pd.DataFrame({"k": [0, 1, 2], "name": ["x", "y", "z"]}), on="k"
    ),
    "public_join_multi": lambda f: f.join(
        pd.DataFrame({"k": [0, 0, 1, 1, 1, 3], "tag": list("pqrstu")}), on="k"
    ),
    "public_join_left": lambda f: f.join(
        pd.DataFrame({"k": [0, 0, 2], "tag": list("pqr")}), on="k", how="left"
    ),
    "self_concat": lambda f: f.concat(f),
    "self_union": lambda f: f.select("k", "s").union(f.select("k", "s")),
    "chain": lambda f: (
        f.where("k < 3").explode("items", max_items=3).groupby("k").agg(n="COUNT(*)")
    ),
    # PINQ's BoundDegree: a new row joins its key and may evict one kept row (stability 2).
    "bound_degree": lambda f: f.bound_degree("k", max_rows=2),
    "bound_degree_one": lambda f: f.bound_degree("s", max_rows=1),
    "bound_degree_two_columns": lambda f: f.bound_degree(["k", "s"], max_rows=1),
    "bound_degree_null_keys": lambda f: f.bound_degree("v", max_rows=1),  # v may be NULL
    "bound_degree_then_where": lambda f: f.bound_degree("k", max_rows=1).where("v > 0"),
}


def _unary_test(name: str):
    build = UNARY[name]

    def test(engine: str) -> None:
        @fast(engine)
        @given(base=rows, extra=row, seed=st.integers(0, 2**16))
        def prop(base, extra, seed):
            check_unary(base, extra, build, seed)

        prop()

    test.__name__ = f"test_stability_{name}"
    return test


for _name in UNARY:
    globals()[f"test_stability_{_name}"] = _unary_test(_name)


BINARY = {
    "concat": lambda a, b: a.concat(b),
    "union": lambda a, b: a.union(b),
    "intersect": lambda a, b: a.intersect(b),
    "difference": lambda a, b: a.difference(b),
    "difference_rev": lambda a, b: b.difference(a),
    "join_bounded": lambda a, b: a.join(b, on="k", max_rows_per_key=(2, 3)),
    "join_unique": lambda a, b: (
        a.groupby("k").agg(n="COUNT(*)").join(b.groupby("k").agg(m="SUM(v)"), on="k")
    ),
}


def _binary_test(name: str):
    build = BINARY[name]

    def test(engine: str) -> None:
        @fast(engine)
        @given(
            left=rows,
            right=rows,
            extra=row,
            side=st.sampled_from(["left", "right"]),
            seed=st.integers(0, 2**16),
        )
        def prop(left, right, extra, side, seed):
            bl, br = pq.Budget(epsilon=1), pq.Budget(epsilon=1)
            cols = ["k", "v", "s"]
            if name.startswith("join"):
                cols = ["k", "v", "s"]
            lf = lambda recs: pq.PrivateFrame(to_df(recs)[cols], bl)  # noqa: E731
            rf = lambda recs: pq.PrivateFrame(to_df(recs)[cols], br)  # noqa: E731
            out = build(lf(left), rf(right))
            if side == "left":
                out2 = build(lf([*left, extra]), rf(right))
                k = declared(out, bl)
            else:
                out2 = build(lf(left), rf([*right, extra]))
                k = declared(out, br)
            assert sym_diff(run(out, seed), run(out2, seed)) <= k

        prop()

    test.__name__ = f"test_stability_binary_{name}"
    return test


for _name in BINARY:
    globals()[f"test_stability_binary_{_name}"] = _binary_test(_name)


# -- user-level frames: the neighbour adds every row of one new user --------------------------
def user_df(users: list[list[int]]) -> pd.DataFrame:
    recs = [
        {"pid": pid, "k": k, "v": float(i)}
        for pid, ks in enumerate(users)
        for i, k in enumerate(ks)
    ]
    return pd.DataFrame(recs, columns=["pid", "k", "v"]).astype(
        {"pid": "int64", "k": "int64", "v": "float64"}
    )


USER = {
    "bound_contributions": lambda f: f.bound_contributions(max_rows=2),
    "bound_then_where": lambda f: f.bound_contributions(max_rows=3).where("k > 0"),
    "where_then_bound": lambda f: f.where("k > 0").bound_contributions(max_rows=1),
    "groupby_unit": lambda f: f.groupby("pid").agg(n="COUNT(*)", t="SUM(v)"),
    "groupby_unit_after_bound": lambda f: (
        f.bound_contributions(max_rows=2).groupby("pid").agg(n="COUNT(*)")
    ),
    "bound_then_groupby": lambda f: (
        f.bound_contributions(max_rows=2).groupby("k").agg(n="COUNT(*)")
    ),
    "self_concat_then_bound": lambda f: f.concat(f).bound_contributions(max_rows=3),
    # bound_groups: a unit changes at most its own kept rows, min(G·k, max_rows).
    "bound_groups": lambda f: f.bound_contributions(max_groups=2, max_rows_per_group=1, by="k"),
    "bound_groups_three": lambda f: f.bound_contributions(
        max_groups=3, max_rows_per_group=2, by="k"
    ),
    "bound_groups_capped": lambda f: f.bound_contributions(
        max_rows=3, max_groups=2, max_rows_per_group=2, by="k"
    ),
    "bound_groups_cap_only": lambda f: f.bound_contributions(max_rows=2, max_groups=1, by="k"),
    "bound_groups_two_by": lambda f: f.bound_contributions(
        max_groups=2, max_rows_per_group=1, by=["k", "v"]
    ),
    "bound_groups_null_by": lambda f: f.assign(w="NULLIF(k, 0)").bound_contributions(
        max_groups=2, max_rows_per_group=1, by="w"
    ),
    "bound_groups_renamed_by": lambda f: f.select("pid", "v", kk="k").bound_contributions(
        max_groups=1, max_rows_per_group=2, by="kk"
    ),
    "bound_groups_reassigned_by": lambda f: f.assign(k="v").bound_contributions(
        max_groups=2, max_rows_per_group=1, by="k"
    ),
    "bound_groups_then_where": lambda f: f.bound_contributions(
        max_groups=2, max_rows_per_group=2, by="k"
    ).where("v > 0"),
    "bound_then_bound_groups": lambda f: f.bound_contributions(max_rows=2).bound_contributions(
        max_groups=3, max_rows_per_group=3, by="k"
    ),
    "bound_groups_then_groupby": lambda f: (
        f.bound_contributions(max_groups=2, max_rows_per_group=1, by="k")
        .groupby("k")
        .agg(n="COUNT(*)")
    ),
}


def _user_test(name: str):
    build = USER[name]

    def test(engine: str) -> None:
        @fast(engine)
        @given(
            users=st.lists(user_rows, max_size=6), new_user=user_rows, seed=st.integers(0, 2**16)
        )
        def prop(users, new_user, seed):
            budget = pq.Budget(epsilon=1)
            f = build(pq.PrivateFrame(user_df(users), budget, privacy_unit="pid"))
            f2 = build(pq.PrivateFrame(user_df([*users, new_user]), budget, privacy_unit="pid"))
            k = declared(f, budget)
            assert k < math.inf
            assert sym_diff(run(f, seed), run(f2, seed)) <= k

        prop()

    test.__name__ = f"test_stability_user_{name}"
    return test


for _name in USER:
    globals()[f"test_stability_user_{_name}"] = _user_test(_name)


def test_stability_partition_parts(engine: str) -> None:
    """Across all parts together, a neighbour changes at most `stability` rows."""

    @fast(engine)
    @given(base=rows, extra=row, seed=st.integers(0, 2**16))
    def prop(base, extra, seed):
        budget = pq.Budget(epsilon=1)
        keys = [0, 1, 2]
        p1 = pq.PrivateFrame(to_df(base), budget).partition("k", keys=keys)
        p2 = pq.PrivateFrame(to_df([*base, extra]), budget).partition("k", keys=keys)
        total = sum(sym_diff(run(p1[key], seed), run(p2[key], seed)) for key in keys)
        assert total <= 1

    prop()


def test_stability_bound_groups_parts(engine: str) -> None:
    """Split on exactly the ``by`` column after bound_groups(G, k): a new user changes at most
    G parts, each by at most k rows (what the partition agent charges for)."""

    @fast(engine)
    @given(
        users=st.lists(user_rows, max_size=6),
        new_user=st.lists(st.integers(0, 5), min_size=1, max_size=12),
        g=st.integers(1, 3),
        k=st.integers(1, 2),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new_user, g, k, seed):
        budget = pq.Budget(epsilon=1)
        keys = list(range(6))

        def parts(data):
            f = pq.PrivateFrame(user_df(data), budget, privacy_unit="pid")
            b = f.bound_contributions(max_groups=g, max_rows_per_group=k, by="k")
            return b.partition("k", keys=keys)

        p1, p2 = parts(users), parts([*users, new_user])
        diffs = [sym_diff(run(p1[key], seed), run(p2[key], seed)) for key in keys]
        assert sum(1 for d in diffs if d) <= g
        assert max(diffs) <= k

    prop()


def test_declared_stabilities(engine: str) -> None:
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame(to_df([]), b)
    assert f.stability == 1
    assert f.explode("items", max_items=4).stability == 4
    assert f.groupby("k").agg(n="COUNT(*)").stability == 2
    assert f.concat(f).stability == 2
    assert f.join(f, on="k", max_rows_per_key=(2, 3)).stability == 2 * 3 + 2 * 2
    pub = pd.DataFrame({"k": [1, 1, 1, 2]})
    assert f.join(pub, on="k").stability == 3
    u = pq.PrivateFrame(user_df([[1, 2]]), b, privacy_unit="pid")
    assert u.stability == math.inf
    assert u.bound_contributions(max_rows=5).stability == 5
    assert u.groupby("pid").agg(n="COUNT(*)").stability == 1
    assert u.groupby("k").agg(n="COUNT(*)").stability == math.inf
    assert set(f._rel.catalog.lineage(f.concat(f)._plan)) == {b}
    assert f.bound_degree("k", max_rows=3).stability == 2
    assert f.explode("items", max_items=2).bound_degree("k", max_rows=1).stability == 4

    def groups(**kw):
        return u.bound_contributions(by="k", **kw).stability

    assert groups(max_groups=3, max_rows_per_group=2) == 6
    assert groups(max_groups=3, max_rows_per_group=2, max_rows=4) == 4
    assert groups(max_groups=3, max_rows_per_group=2, max_rows=9) == 6
    assert groups(max_groups=3, max_rows=4) == 4
    assert groups(max_groups=3) == math.inf
    # After bound_contributions(2), a unit has at most 2 rows to keep.
    assert (
        u.bound_contributions(max_rows=2)
        .bound_contributions(max_groups=3, max_rows_per_group=2, by="k")
        .stability
        == 2
    )
