"""An adversarial stability harness: random chains of transformations, on neighbouring data.

Hypothesis composes chains through the public API (method chaining, and SQL through a
Session): renames and assigns over the privacy unit and key columns, where, distinct,
explode, groupby().agg() (MIN/MAX outputs renamed to key names), private joins with and
without max_rows_per_key, public joins whose table is edited after the plan is built,
concat/union/intersect/difference across TWO budgets whose tables share the unit column
name, bound_contributions (also with max_groups and by), bound_degree, and partitions.

For every chain, on a random small dataset D and a neighbour D' (one privacy unit of one
table added: a row of a row-level table, or every row of one new user of a user-level table,
possibly with an id that the OTHER budget's table also uses), under ``pq.testing.no_noise()``
and one ``pq.testing.seed`` for both runs, every query must either be refused with a
``pq.PinqError`` before anything is charged, on both datasets, or its exact answer must move
by at most the stability charged to the changed table's budget (charge / epsilon). Per-key
counts of a partition are one charge for all keys (parallel composition), so the SUM of the
per-key changes must be within it. The unknown-key histogram (``histogram("k", delta=...)``
in Python, ``GROUP BY k`` with a delta in SQL) is checked the same way on the exact count of
every key its key selection is given, and also against the threshold's assumption: at most
``G`` keys move, each by at most ``k`` rows, for the ``(G, k)`` its threshold was set for.

Public row counts (``public_size=True`` on A): the neighbour is then A with one row changed
(on a user-level A, one person's rows replaced by as many rows of one person), never a row
added, and every answer must move by at most the stability charged, which counts a changed
row twice (one removed, one added). The unknown-key histogram's threshold is checked against
what it needs under that relation: the keys only one neighbour has, on each side.

The same chains also run over tables read back from parquet and CSV files (declared types),
with persons whose unit id is NULL-like (a real NaN, or NULL) in either table and a neighbour
that may add one more (``test_adversarial_*_with_null_like_units_from_files``): rows of no
known person must move nothing beyond the stability charged either.

``PINQPY_HARNESS_EXAMPLES=n`` sets the number of chains per engine (pandas, DuckDB; Spark gets
a tenth); ``-s`` prints the summary (chains tried, refused, answered, violations).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.noise.keyselect import KeySelectionMechanism

EPS = 1
BIG = 10**9

_ENV = os.environ.get("PINQPY_HARNESS_EXAMPLES")
EXAMPLES = (
    {"pandas": int(_ENV), "duckdb": int(_ENV), "spark": max(1, int(_ENV) // 10)}
    if _ENV
    else {"pandas": 300, "duckdb": 150, "spark": 8}
)
SQL_EXAMPLES = {k: max(1, v // 2) for k, v in EXAMPLES.items()}

SUMMARY: dict[str, Counter] = {}
VIOLATIONS: dict[str, Counter] = {}  # kind -> the chains (in plain words) that broke stability


def _tally(kind: str, what: str) -> None:
    SUMMARY.setdefault(kind, Counter())[what] += 1


def _print_summary(kind: str) -> None:
    c = SUMMARY.get(kind, Counter())
    print(
        f"\n[adversarial harness {kind}] chains tried: {c['chains']}, queries: {c['queries']}, "
        f"refused on both: {c['refused']}, answered: {c['answered']}, "
        f"violations: {c['violations']}"
    )
    for chain, n in VIOLATIONS.get(kind, Counter()).most_common(12):
        print(f"    {n} x  {chain}")


# -- data ---------------------------------------------------------------------------------
row = st.fixed_dictionaries(
    {
        "k": st.integers(0, 3),
        "v": st.one_of(st.integers(-5, 5).map(float), st.none()),
        "s": st.sampled_from(["a", "b", "c"]),
        "items": st.lists(st.integers(0, 4), max_size=3),
    }
)
user = st.lists(row, min_size=1, max_size=4)


@dataclass
class World:
    """Both tables: A (budget A, pids 0..4) and B (budget B, pids 3..7)."""

    a_users: list[list[dict]]
    b_users: list[list[dict]]
    a_user_level: bool
    b_user_level: bool


COLS = ["pid", "visit_id", "k", "v", "s", "items", "src"]


def table(users: list[list[dict]], first_pid: int, src: int, extra: tuple | None) -> pd.DataFrame:
    recs = []
    for i, rows in enumerate(users):
        for r in rows:
            recs.append({"pid": first_pid + i, **r})
    if extra is not None:
        pid, rows = extra
        recs += [{"pid": pid, **r} for r in rows]
    df = pd.DataFrame(recs, columns=["pid", "k", "v", "s", "items"])
    df.insert(1, "visit_id", np.arange(len(df), dtype="int64") + 1000 * (src + 1))
    df["src"] = src
    return df.astype({"pid": "int64", "k": "int64", "v": "float64", "s": "str", "src": "int64"})


# -- chain steps ------------------------------------------------------------------------------
@dataclass
class Ctx:
    b: pq.PrivateFrame  # table B, the other budget
    pubs: list[pd.DataFrame] = field(default_factory=list)
    edits: list[Callable[[], None]] = field(default_factory=list)


def _rename(f, new, old):
    keep = [c for c in f.columns if c not in (new, old)]
    return f.select(*keep, **{new: old})


def _groupby(f, key, fn):
    arg = next((c for c in ("pid", "visit_id", "src", "k") if c in f.columns and c != key), None)
    aggs = {"n": "COUNT(*)"}
    if arg is not None:
        aggs["c"] = f"{fn}({arg})"
    return f.groupby(key).agg(**aggs)


def _setop(f, ctx, kind):
    cols = [c for c in f.columns if c != "items"]
    if not cols or not set(cols) <= set(ctx.b.columns):
        return None
    return getattr(f.select(*cols), kind)(ctx.b.select(*cols))


def _join_private(f, ctx, rhs, bounded):
    if "k" not in f.columns:
        return None
    if rhs == "grouped":
        g = ctx.b.groupby("k").agg(bn="COUNT(*)")
    elif rhs == "min_as_k":
        g = ctx.b.groupby("k").agg(bc="MIN(pid)").select(k="bc")
    else:
        g = ctx.b.select("k", bv="v", bpid="pid")
    return f.join(g, on="k", max_rows_per_key=(2, 2) if bounded else None)


def _join_public(f, ctx, variant, edit):
    if "k" not in f.columns:
        return None
    if variant == "unique":
        pub = pd.DataFrame({"k": [0, 1, 2, 3], "lab": list("wxyz")})
    else:
        pub = pd.DataFrame({"k": [0, 0, 1, 2, 2, 2], "lab": list("pqrstu")})
    out = f.join(pub, on="k")
    if edit == "overwrite":
        ctx.edits.append(lambda: pub.__setitem__("k", 1))
    elif edit == "append":

        def grow() -> None:
            for i in range(5):
                pub.loc[len(pub)] = [1, f"n{i}"]

        ctx.edits.append(grow)
    return out


STEPS: dict[str, Callable] = {
    "where k > 0": lambda f, c: f.where("k > 0"),
    "where v IS NULL OR v < 2": lambda f, c: f.where("v IS NULL OR v < 2"),
    "where s = 'a'": lambda f, c: f.where("s = 'a'"),
    "rename pid <- visit_id": lambda f, c: _rename(f, "pid", "visit_id"),
    "rename k <- c": lambda f, c: _rename(f, "k", "c"),
    "rename pid <- c": lambda f, c: _rename(f, "pid", "c"),
    "rename k <- pid": lambda f, c: _rename(f, "k", "pid"),
    "rename uid <- pid": lambda f, c: _rename(f, "uid", "pid"),
    "rename pid <- uid": lambda f, c: _rename(f, "pid", "uid"),
    "assign pid = visit_id": lambda f, c: f.assign(pid="visit_id"),
    "assign pid = k": lambda f, c: f.assign(pid="k"),
    "assign pid = src": lambda f, c: f.assign(pid="src"),
    "assign k = k + 1": lambda f, c: f.assign(k="k + 1"),
    "assign k = c": lambda f, c: f.assign(k="c"),
    "assign k = n": lambda f, c: f.assign(k="n"),
    "assign k = pid": lambda f, c: f.assign(k="pid"),
    "distinct pid, k": lambda f, c: f.distinct("pid", "k"),
    "distinct pid": lambda f, c: f.distinct("pid"),
    "distinct k": lambda f, c: f.distinct("k"),
    "distinct all but items": lambda f, c: f.distinct(*[x for x in f.columns if x != "items"]),
    "explode items (2)": lambda f, c: f.explode("items", max_items=2),
    "groupby k: n, MIN -> c": lambda f, c: _groupby(f, "k", "MIN"),
    "groupby k: n, MAX -> c": lambda f, c: _groupby(f, "k", "MAX"),
    "groupby pid: n, MIN -> c": lambda f, c: _groupby(f, "pid", "MIN"),
    "groupby src: n, MAX -> c": lambda f, c: _groupby(f, "src", "MAX"),
    "join B grouped by k (no bounds)": lambda f, c: _join_private(f, c, "grouped", False),
    "join B grouped by k (bounds 2,2)": lambda f, c: _join_private(f, c, "grouped", True),
    "join B MIN(pid) AS k (no bounds)": lambda f, c: _join_private(f, c, "min_as_k", False),
    "join B rows (no bounds)": lambda f, c: _join_private(f, c, "raw", False),
    "join B rows (bounds 2,2)": lambda f, c: _join_private(f, c, "raw", True),
    "join public unique": lambda f, c: _join_public(f, c, "unique", None),
    "join public multi": lambda f, c: _join_public(f, c, "multi", None),
    "join public unique, then set its k = 1": lambda f, c: _join_public(
        f, c, "unique", "overwrite"
    ),
    "join public unique, then append k = 1 rows": lambda f, c: _join_public(
        f, c, "unique", "append"
    ),
    "concat B": lambda f, c: _setop(f, c, "concat"),
    "union B": lambda f, c: _setop(f, c, "union"),
    "intersect B": lambda f, c: _setop(f, c, "intersect"),
    "difference B": lambda f, c: _setop(f, c, "difference"),
    "B difference": lambda f, c: (
        None
        if _setop(f, c, "concat") is None
        else c.b.select(*[x for x in f.columns if x != "items"]).difference(
            f.select(*[x for x in f.columns if x != "items"])
        )
    ),
    "bound_contributions(1)": lambda f, c: f.bound_contributions(1),
    "bound_contributions(2)": lambda f, c: f.bound_contributions(2),
    "bound_contributions(3)": lambda f, c: f.bound_contributions(3),
    "bound groups of k (G=2, k=1)": lambda f, c: f.bound_contributions(
        max_groups=2, max_rows_per_group=1, by="k"
    ),
    "bound groups of src (G=1, k=2), max_rows=1": lambda f, c: f.bound_contributions(
        1, max_groups=1, max_rows_per_group=2, by="src"
    ),
    "bound degree of k (2)": lambda f, c: f.bound_degree("k", 2),
    "bound degree of pid (1)": lambda f, c: f.bound_degree("pid", 1),
}
NEEDS: dict[str, set[str]] = {
    "where k > 0": {"k"},
    "where v IS NULL OR v < 2": {"v"},
    "where s = 'a'": {"s"},
    "rename pid <- visit_id": {"visit_id"},
    "rename k <- c": {"c"},
    "rename pid <- c": {"c"},
    "rename k <- pid": {"pid"},
    "rename uid <- pid": {"pid"},
    "rename pid <- uid": {"uid"},
    "assign pid = visit_id": {"visit_id"},
    "assign pid = k": {"k"},
    "assign pid = src": {"src"},
    "assign k = k + 1": {"k"},
    "assign k = c": {"c"},
    "assign k = n": {"n"},
    "assign k = pid": {"pid"},
    "distinct pid, k": {"pid", "k"},
    "distinct pid": {"pid"},
    "distinct k": {"k"},
    "explode items (2)": {"items"},
    "groupby k: n, MIN -> c": {"k"},
    "groupby k: n, MAX -> c": {"k"},
    "groupby pid: n, MIN -> c": {"pid"},
    "groupby src: n, MAX -> c": {"src"},
    "bound groups of k (G=2, k=1)": {"k"},
    "bound groups of src (G=1, k=2), max_rows=1": {"src"},
    "bound degree of k (2)": {"k"},
    "bound degree of pid (1)": {"pid"},
}
STEP_NAMES = sorted(STEPS)
# Steps that relabel the unit or key columns, or mix the two budgets, are drawn more often,
# and a chain often ends by bounding contributions, so user-level chains become answerable.
_RISKY = [n for n in STEP_NAMES if n.startswith(("rename", "assign", "concat", "union", "join"))]
_ENDINGS = [
    "bound_contributions(1)",
    "bound_contributions(2)",
    "bound groups of k (G=2, k=1)",
    "groupby pid: n, MIN -> c",
    "join B grouped by k (no bounds)",
    "distinct pid",
]
chains = st.builds(
    lambda body, end: [*body, *([end] if end else [])],
    st.lists(st.sampled_from(STEP_NAMES + _RISKY * 2), min_size=0, max_size=4),
    st.sampled_from([None, *_ENDINGS, *_ENDINGS, *_ENDINGS]),
).filter(bool)


class Skip(Exception):
    """A step that does not apply to the frame's columns (not a refusal)."""


def build_chain(a: pq.PrivateFrame, ctx: Ctx, chain: list[str]) -> pq.PrivateFrame:
    f = a
    for name in chain:
        if not NEEDS.get(name, set()) <= set(f.columns):
            raise Skip(name)
        out = STEPS[name](f, ctx)
        if out is None:
            raise Skip(name)
        f = out
    return f


# -- running one side -------------------------------------------------------------------------
QUERIES = ["count", "partition src", "partition k", "histogram k"]
KEY_DELTA = 1e-3


class KeyCounts:
    """An unknown-key histogram's answer: the exact count of every key its key selection was
    given (noise off releases every key that occurs, with its count), and the contribution
    structure ``(G, k)`` its threshold was set for."""

    def __init__(self, counts: dict, structure: tuple[int, int]):
        self.counts = counts
        self.structure = structure

    def moved(self, other: KeyCounts) -> list[float]:
        keys = set(self.counts) | set(other.counts)
        return [abs(other.counts.get(k, 0) - self.counts.get(k, 0)) for k in keys]

    def only_here(self, other: KeyCounts) -> list[int]:
        """The counts of the keys this side has and ``other`` has not."""
        return [c for k, c in self.counts.items() if k not in other.counts]


def _key_key(v: object) -> object:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else v


def key_counts(run_query: Callable[[], object]) -> KeyCounts:
    """Run a query that selects keys, capturing its key selection's input."""
    seen: list[tuple[KeySelectionMechanism, list, np.ndarray]] = []
    original = KeySelectionMechanism.release

    def release(mech: KeySelectionMechanism, keys: list, counts: np.ndarray):
        seen.append((mech, list(keys), np.asarray(counts)))
        return original(mech, keys, counts)

    with mock.patch.object(KeySelectionMechanism, "release", release):
        run_query()
    (mech, keys, counts), *rest = seen
    assert not rest, "one key selection per query"
    exact = {_key_key(k): int(c) for k, c in zip(keys, counts.tolist(), strict=True)}
    assert len(exact) == len(keys), "two keys given are one key under the engines' equality"
    return KeyCounts(exact, (mech.max_groups, mech.max_rows))


def _as_given(df: pd.DataFrame, table: str) -> object:
    return df


def run_side(
    world: World,
    extra: tuple | None,
    side: str,
    chain: list[str],
    seed: int,
    public_size: bool = False,
    source: Callable[[pd.DataFrame, str], object] = _as_given,
):
    """Build the chain on (A, B) with the extra unit on ``side``; run every query.
    ``public_size`` declares A's row count public; ``source(df, "A" or "B")`` is what each
    table is read from (default: the DataFrame).

    Returns one entry per query: ("refused", msg) or ("ok", values, charged stability).
    """
    ba, bb = pq.Budget(epsilon=BIG, delta=0.5), pq.Budget(epsilon=BIG, delta=0.5)
    a_df = table(world.a_users, 0, 0, extra if side == "A" else None)
    b_df = table(world.b_users, 3, 1, extra if side == "B" else None)
    a_unit = "pid" if world.a_user_level else None
    a = pq.PrivateFrame(source(a_df, "A"), ba, privacy_unit=a_unit, public_size=public_size)
    b = pq.PrivateFrame(
        source(b_df, "B"), bb, privacy_unit="pid" if world.b_user_level else None
    )
    changed = ba if side == "A" else bb
    # Lists cannot be hashed into a row's priority, so truncation of rows holding them draws
    # independent priorities by position, which cannot be coupled across neighbours here:
    # the list column exists only until a leading explode turns it into scalars.
    b = b.select(*[c for c in b.columns if c != "items"])
    if chain and chain[0].startswith("explode"):
        a, chain = a.explode("items", max_items=2), chain[1:]
    else:
        a = a.select(*[c for c in a.columns if c != "items"])
    ctx = Ctx(b)
    out = []
    with pq.testing.no_noise():
        try:
            f = build_chain(a, ctx, chain)
            for edit in ctx.edits:  # public tables edited after the plan was built
                edit()
        except pq.PinqError as err:
            assert changed.spent.epsilon == 0
            return [("refused", f"build: {err}")] * len(QUERIES)
        for q in QUERIES:
            before = Fraction(changed.spent.epsilon)
            sd = pq.testing.seed(seed)  # each query: the same random state on both sides
            try:
                if q == "count":
                    vals = [float(f.count(epsilon=EPS))]
                elif q == "histogram k":
                    if "k" not in f.columns:
                        out.append(("skip",))
                        continue
                    vals = key_counts(lambda: f.histogram("k", EPS, delta=KEY_DELTA))
                else:
                    col = q.split()[1]
                    if col not in f.columns:
                        out.append(("skip",))
                        continue
                    keys = [0, 1] if col == "src" else [0, 1, 2, 3]
                    res = f.partition(col, keys=keys).count(epsilon=EPS)
                    vals = [float(x) for x in res.to_numpy(dtype=float)]
            except pq.BudgetExceededError:  # pragma: no cover
                raise
            except pq.PinqError as err:
                spent = Fraction(changed.spent.epsilon) - before
                if spent:
                    out.append(("charged-then-failed", f"{type(err).__name__}: {err}", spent))
                else:
                    out.append(("refused", f"{type(err).__name__}: {err}"))
                continue
            except Exception as err:
                spent = Fraction(changed.spent.epsilon) - before
                out.append(("crash", f"{type(err).__name__}: {err}", spent))
                continue
            finally:
                sd.__exit__(None, None, None)  # back to the source in place before the query
            out.append(("ok", vals, (Fraction(changed.spent.epsilon) - before) / EPS))
    return out


def compare(r1, r2, what: str, kind: str, changed_row: bool = False) -> list[str]:
    """The ways the two sides' answers break their charge. ``changed_row``: the neighbours
    differ in one changed row (a public row count), so a key selection's threshold needs only
    that the keys each side alone has fit its structure."""
    problems = []
    for q, x, y in zip(QUERIES, r1, r2, strict=True):
        if x[0] == "skip" or y[0] == "skip":
            continue
        _tally(kind, "queries")
        if x[0] == "refused" and y[0] == "refused":
            _tally(kind, "refused")
            continue
        if x[0] != "ok" or y[0] != "ok":
            bad = x if x[0] != "ok" else y
            problems.append(f"{q}: {bad[0]} on one side ({bad[1:]}) and {x[0]}/{y[0]}")
            continue
        _tally(kind, "answered")
        if isinstance(x[1], KeyCounts):
            diff = np.array(x[1].moved(y[1]), dtype=float)
            if x[1].structure != y[1].structure:
                problems.append(f"{q}: thresholds set for {x[1].structure} and {y[1].structure}")
            g, k = x[1].structure
            if changed_row:
                alone = [x[1].only_here(y[1]), y[1].only_here(x[1])]
                if any(len(a) > g or max(a, default=0) > k for a in alone):
                    problems.append(
                        f"{q}: keys one side alone has, {x[1].counts} vs {y[1].counts}, exceed "
                        f"the {g} keys of at most {k} rows its threshold assumes"
                    )
            elif int((diff > 0).sum()) > g or float(diff.max(initial=0)) > k:
                problems.append(
                    f"{q}: a unit moved the counts {x[1].counts} -> {y[1].counts}, more than "
                    f"the {g} keys of at most {k} rows its threshold assumes"
                )
        else:
            diff = np.abs(np.array(x[1]) - np.array(y[1]))
        change = float(diff.sum())  # per-key parts: parallel composition, one charge
        charged = max(x[2], y[2])
        if change > charged:
            problems.append(
                f"{q}: exact answer moved by {change:g} but charged stability {charged} "
                f"({getattr(x[1], 'counts', x[1])} vs {getattr(y[1], 'counts', y[1])})"
            )
    return problems


def describe(world: World, side: str, extra: tuple, chain: list[str]) -> str:
    lvl = lambda u: "user-level (unit pid)" if u else "row-level"  # noqa: E731
    return (
        f"A is {lvl(world.a_user_level)} with {len(world.a_users)} units, B is "
        f"{lvl(world.b_user_level)} with {len(world.b_users)} units; "
        f"chain on A: {' -> '.join(chain)}; neighbour adds to {side} the unit pid={extra[0]} "
        f"with {len(extra[1])} row(s)"
    )


@st.composite
def scenarios(draw):
    world = World(
        a_users=draw(st.lists(user, max_size=4)),
        b_users=draw(st.lists(user, max_size=4)),
        a_user_level=draw(st.booleans()),
        b_user_level=draw(st.booleans()),
    )
    side = draw(st.sampled_from(["A", "B"]))
    level = world.a_user_level if side == "A" else world.b_user_level
    rows = draw(st.lists(row, min_size=2, max_size=5)) if level else [draw(row)]
    taken = set(range(len(world.a_users))) if side == "A" else set(range(3, 3 + len(world.b_users)))
    free = [p for p in range(10) if p not in taken]
    pid = free[draw(st.integers(0, len(free) - 1))]
    return world, side, (pid, rows)


def _settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=False,
        print_blob=True,
    )


def test_adversarial_chains(engine: str) -> None:
    kind = f"python/{engine}"

    @_settings(EXAMPLES[engine])
    @given(sc=scenarios(), chain=chains, seed=st.integers(0, 2**16))
    def prop(sc, chain, seed):
        world, side, extra = sc
        try:
            r1 = run_side(world, None, side, chain, seed)
            r2 = run_side(world, extra, side, chain, seed)
        except Skip:
            return
        _tally(kind, "chains")
        what = describe(world, side, extra, chain)
        note(what)
        problems = compare(r1, r2, what, kind)
        if problems:
            _tally(kind, "violations")
            VIOLATIONS.setdefault(kind, Counter())[" -> ".join(chain)] += 1
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)


# -- SQL ----------------------------------------------------------------------------------------
SQL_COLS = ["pid", "visit_id", "k", "src"]


def _sel(cols: list[str], ren: dict[str, str] | None = None) -> str:
    ren = ren or {}
    return ", ".join(f"t.{ren[c]} AS {c}" if c in ren else f"t.{c}" for c in cols)


# Each wrapper: (name, fn(rel_sql, cols) -> (rel_sql, cols) or None)
def _w_where(r, cols):
    return (f"SELECT {_sel(cols)} FROM ({r}) t WHERE t.k > 0", cols) if "k" in cols else None


def _w_rename_unit(r, cols):
    if not {"pid", "visit_id"} <= set(cols):
        return None
    return f"SELECT {_sel(cols, {'pid': 'visit_id', 'visit_id': 'pid'})} FROM ({r}) t", cols


def _w_group_min(r, cols):
    if "k" not in cols or "pid" not in cols:
        return None
    return f"SELECT t.k, MIN(t.pid) AS c, COUNT(*) AS n FROM ({r}) t GROUP BY t.k", [
        "k",
        "c",
        "n",
    ]


def _w_c_as_k(r, cols):
    if "c" not in cols:
        return None
    rest = [c for c in cols if c not in ("c", "k")]
    return f"SELECT t.c AS k{''.join(', t.' + c for c in rest)} FROM ({r}) t", ["k", *rest]


def _w_min_as_k(r, cols):
    if "k" not in cols:
        return None
    arg = "pid" if "pid" in cols else "n" if "n" in cols else "k"
    return f"SELECT MIN(t.{arg}) AS k FROM ({r}) t GROUP BY t.k", ["k"]


def _w_group_unit(r, cols):
    if "pid" not in cols:
        return None
    return f"SELECT t.pid, COUNT(*) AS n, MAX(t.k) AS k FROM ({r}) t GROUP BY t.pid", [
        "pid",
        "n",
        "k",
    ]


def _w_join_unique(r, cols):
    if "k" not in cols:
        return None
    return (
        f"SELECT {_sel(cols)}, y.bn FROM ({r}) t "
        "JOIN (SELECT k, COUNT(*) AS bn FROM b GROUP BY k) y ON t.k = y.k",
        [*cols, "bn"],
    )


def _w_join_min_as_k(r, cols):
    if "k" not in cols:
        return None
    return (
        f"SELECT {_sel(cols)} FROM ({r}) t "
        "JOIN (SELECT MIN(pid) AS k FROM b GROUP BY k) y ON t.k = y.k",
        cols,
    )


def _w_join_bounded(r, cols):
    if "k" not in cols:
        return None
    return (
        f"SELECT {_sel(cols)}, y.pid AS bpid FROM ({r}) t JOIN b y ON t.k = y.k WITH BOUNDS (2, 2)",
        [*cols, "bpid"],
    )


def _w_public(r, cols):
    if "k" not in cols:
        return None
    return f"SELECT {_sel(cols)}, p.lab FROM ({r}) t JOIN pub p ON t.k = p.k", [*cols, "lab"]


def _w_union_all(r, cols):
    if not set(cols) <= set(SQL_COLS):
        return None
    plain = ", ".join(cols)
    return f"SELECT {_sel(cols)} FROM ({r}) t UNION ALL SELECT {plain} FROM b", cols


def _w_union(r, cols):
    if not set(cols) <= set(SQL_COLS):
        return None
    plain = ", ".join(cols)
    return f"SELECT {_sel(cols)} FROM ({r}) t UNION SELECT {plain} FROM b", cols


SQL_WRAPPERS = {
    "WHERE k > 0": _w_where,
    "swap pid/visit_id aliases": _w_rename_unit,
    "GROUP BY k: MIN(pid) AS c, COUNT(*) AS n": _w_group_min,
    "c AS k": _w_c_as_k,
    "MIN(x) AS k GROUP BY k": _w_min_as_k,
    "GROUP BY pid": _w_group_unit,
    "JOIN (b GROUP BY k) unbounded": _w_join_unique,
    "JOIN (MIN(pid) AS k FROM b GROUP BY k) unbounded": _w_join_min_as_k,
    "JOIN b WITH BOUNDS (2, 2)": _w_join_bounded,
    "JOIN public pub": _w_public,
    "UNION ALL b": _w_union_all,
    "UNION b": _w_union,
}
sql_chains = st.lists(st.sampled_from(sorted(SQL_WRAPPERS)), min_size=1, max_size=4)


def _sql_stability(
    session: pq.Session, query: str, table: str, delta: float | None = None
) -> Fraction:
    text = str(session.sql("EXPLAIN " + query, epsilon=EPS, delta=delta))
    m = re.search(rf"budget of {table} \(stability ([^)]+)\)", text)
    if m is None:
        return Fraction(0)  # the query draws nothing from this table
    s = m.group(1)
    assert s != "inf", f"an unbounded stability was accepted:\n{text}"
    return Fraction(s)


def run_sql_side(world, extra, side, chain, seed, max_rows, public_size=False, source=_as_given):
    a_df = table(world.a_users, 0, 0, extra if side == "A" else None)
    b_df = table(world.b_users, 3, 1, extra if side == "B" else None)
    budgets = {"a": pq.Budget(epsilon=BIG, delta=0.5), "b": pq.Budget(epsilon=BIG, delta=0.5)}
    s = pq.Session()
    for name, df, lvl in (("a", a_df, world.a_user_level), ("b", b_df, world.b_user_level)):
        s.register(
            name,
            source(df[SQL_COLS], name.upper()),
            budget=budgets[name],
            privacy_unit="pid" if lvl else None,
            max_rows=max_rows if lvl else None,
            public_size=public_size and name == "a",
        )
    pub = pd.DataFrame({"k": [0, 1, 2, 3], "lab": list("wxyz")})
    s.register_public("pub", pub)
    rel, cols = "SELECT pid, visit_id, k, src FROM a", list(SQL_COLS)
    for name in chain:
        res = SQL_WRAPPERS[name](rel, cols)
        if res is None:
            raise Skip(name)
        rel, cols = res
    queries = {"count": f"SELECT COUNT(*) AS n FROM ({rel}) r"}
    if "k" in cols:
        queries["partition k"] = (
            f"SELECT r.k, COUNT(*) AS n FROM ({rel}) r GROUP BY r.k IN (0, 1, 2, 3)"
        )
        queries["histogram k"] = f"SELECT r.k, COUNT(*) AS n FROM ({rel}) r GROUP BY r.k"
    changed = budgets["a" if side == "A" else "b"]
    tname = "a" if side == "A" else "b"
    out = []
    for q in QUERIES:
        if q not in queries:
            out.append(("skip",))
            continue
        before = changed.spent.epsilon
        delta = KEY_DELTA if q == "histogram k" else None
        try:
            stab = _sql_stability(s, queries[q], tname, delta)
            with pq.testing.no_noise(), pq.testing.seed(seed):
                if delta is not None:
                    text, dlt = queries[q], delta
                    kc = key_counts(lambda: s.sql(text, epsilon=EPS, delta=dlt))  # noqa: B023
                    out.append(("ok", kc, stab))
                    continue
                res = s.sql(queries[q], epsilon=EPS)
        except pq.BudgetExceededError:  # pragma: no cover
            raise
        except pq.PinqError as err:
            kind = "refused" if changed.spent.epsilon == before else "charged-then-failed"
            out.append((kind, f"{type(err).__name__}: {err}"))
            continue
        except Exception as err:
            out.append(("crash", f"{type(err).__name__}: {err}"))
            continue
        out.append(("ok", [float(x) for x in res["n"].to_numpy(dtype=float)], stab))
    return out, queries


def test_adversarial_sql_chains(engine: str) -> None:
    kind = f"sql/{engine}"

    @_settings(SQL_EXAMPLES[engine])
    @given(
        sc=scenarios(),
        chain=sql_chains,
        seed=st.integers(0, 2**16),
        max_rows=st.integers(1, 3),
    )
    def prop(sc, chain, seed, max_rows):
        world, side, extra = sc
        try:
            r1, queries = run_sql_side(world, None, side, chain, seed, max_rows)
            r2, _ = run_sql_side(world, extra, side, chain, seed, max_rows)
        except Skip:
            return
        _tally(kind, "chains")
        what = describe(world, side, extra, [f"(registered with max_rows={max_rows})", *chain])
        what += "\n  SQL: " + queries["count"]
        note(what)
        problems = compare(r1, r2, what, kind)
        if problems:
            _tally(kind, "violations")
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)


# -- public row counts: one row changed ---------------------------------------------------------
@st.composite
def changed_row_scenarios(draw):
    """A world, and A's changed unit before and after: one row of a row-level A, or a person's
    rows of a user-level A replaced by as many rows of a person (the same one or another)."""
    world = World(
        a_users=draw(st.lists(user, max_size=4)),
        b_users=draw(st.lists(user, max_size=4)),
        a_user_level=draw(st.booleans()),
        b_user_level=draw(st.booleans()),
    )
    size = draw(st.integers(2, 4)) if world.a_user_level else 1
    free = [p for p in range(10) if p >= len(world.a_users)]
    pids = [free[draw(st.integers(0, len(free) - 1))] for _ in range(2)]
    rows = [draw(st.lists(row, min_size=size, max_size=size)) for _ in range(2)]
    return world, (pids[0], rows[0]), (pids[1], rows[1])


def _changed_what(world: World, before: tuple, after: tuple, chain: list[str]) -> str:
    lvl = "user-level (unit pid)" if world.a_user_level else "row-level"
    return (
        f"A is {lvl} with a public row count and {len(world.a_users)} units, B has "
        f"{len(world.b_users)}; chain on A: {' -> '.join(chain)}; the neighbours' changed unit: "
        f"pid={before[0]} {before[1]} -> pid={after[0]} {after[1]}"
    )


def test_adversarial_public_size_chains(engine: str) -> None:
    kind = f"python public_size/{engine}"

    @_settings(max(1, EXAMPLES[engine] // 2))
    @given(sc=changed_row_scenarios(), chain=chains, seed=st.integers(0, 2**16))
    def prop(sc, chain, seed):
        world, before, after = sc
        try:
            r1 = run_side(world, before, "A", chain, seed, public_size=True)
            r2 = run_side(world, after, "A", chain, seed, public_size=True)
        except Skip:
            return
        _tally(kind, "chains")
        what = _changed_what(world, before, after, chain)
        note(what)
        problems = compare(r1, r2, what, kind, changed_row=True)
        if problems:
            _tally(kind, "violations")
            VIOLATIONS.setdefault(kind, Counter())[" -> ".join(chain)] += 1
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)


def test_adversarial_public_size_sql_chains(engine: str) -> None:
    kind = f"sql public_size/{engine}"

    @_settings(max(1, SQL_EXAMPLES[engine] // 2))
    @given(
        sc=changed_row_scenarios(),
        chain=st.lists(st.sampled_from(sorted(SQL_WRAPPERS)), min_size=0, max_size=3),
        seed=st.integers(0, 2**16),
        max_rows=st.integers(1, 3),
    )
    def prop(sc, chain, seed, max_rows):
        world, before, after = sc
        try:
            r1, queries = run_sql_side(world, before, "A", chain, seed, max_rows, True)
            r2, _ = run_sql_side(world, after, "A", chain, seed, max_rows, True)
        except Skip:
            return
        _tally(kind, "chains")
        what = _changed_what(world, before, after, [f"(max_rows={max_rows})", *chain])
        what += "\n  SQL: " + queries["count"]
        note(what)
        problems = compare(r1, r2, what, kind, changed_row=True)
        if problems:
            _tally(kind, "violations")
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)


@pytest.fixture(autouse=True, scope="module")
def _final_summary():
    yield
    for kind in sorted(SUMMARY):
        _print_summary(kind)


# -- NULL-like unit ids, read from files ---------------------------------------------------------
# The same chains over tables written to parquet or CSV files and read back by the engine
# (declared types, as a curator declares them; a parquet NaN is a real NaN, a CSV one the
# text NaN), with persons whose id is NULL-like (NaN or NULL) in either table; the neighbour
# adds a person, whose id may itself be NULL-like. Rows of no known person must move no
# answer beyond the stability charged, as every other row.
FILE_EXAMPLES = {k: max(1, v // 6) for k, v in EXAMPLES.items()}
FILE_TYPES = {"pid": "float", "visit_id": "int", "k": "int", "v": "float", "s": "str", "src": "int"}
null_person = st.tuples(st.sampled_from(["nan", "nan", "null"]), user)


@dataclass
class FileSource:
    """Each table written to a ``kind`` file in ``folder`` and read back on the current
    engine, with the NULL-like persons ``nulls[table]`` ((spelling, rows) each) added. The id
    column is a float whatever the rows (a type follows the schema, never the values)."""

    kind: str
    folder: str
    nulls: dict[str, list[tuple[str, list[dict]]]]

    def __call__(self, df: pd.DataFrame, table: str) -> object:
        from pinqpy.engines.registry import default_engine, read_file

        src = 0 if table == "A" else 1
        recs = [
            {"pid": np.nan, "visit_id": 1000 * (src + 1) + 500 + i, **r, "src": src}
            for i, r in enumerate(r for _, rows in self.nulls.get(table, []) for r in rows)
        ]
        spelt = [sp for sp, rows in self.nulls.get(table, []) for _ in rows]
        cols = [c for c in df.columns if c != "items"]
        both = pd.concat([df[cols], pd.DataFrame(recs, columns=COLS)[cols]], ignore_index=True)
        both = both.astype({c: FILE_TYPES[c] for c in cols if FILE_TYPES[c] != "str"})
        nan_rows = [False] * len(df) + [sp == "nan" for sp in spelt]
        path = os.path.join(self.folder, f"{table}{len(os.listdir(self.folder))}.{self.kind}")
        _write(both, nan_rows, path, self.kind)
        types = {c: FILE_TYPES[c] for c in cols}
        return read_file(path, self.kind, default_engine(), schema=types)


def _write(df: pd.DataFrame, nan_rows: list[bool], path: str, kind: str) -> None:
    """``df`` as a file whose NULL ids are a real NaN where ``nan_rows`` says, else NULL."""
    if kind == "csv":
        text = df.astype(object).where(df.notna(), "")
        text["pid"] = ["NaN" if n else t for n, t in zip(nan_rows, text["pid"], strict=True)]
        text.to_csv(path, index=False)
        return
    import pyarrow as pa
    import pyarrow.parquet as papq

    arrays = {c: pa.Array.from_pandas(df[c]) for c in df.columns}
    pid = df["pid"].to_numpy(dtype=float)
    null = np.isnan(pid) & ~np.array(nan_rows, dtype=bool)
    arrays["pid"] = pa.array(pid, type=pa.float64(), mask=null)  # NaN kept, NULL masked
    papq.write_table(pa.table(arrays), path)


# Chains on A that end in a step by the unit, where rows of no known person must be dropped.
null_chains = st.builds(
    lambda body, end: [*body, end],
    st.lists(st.sampled_from(STEP_NAMES), max_size=2),
    st.sampled_from(_ENDINGS),
)


# SQL over A as registered (max_rows per person), or through a wrapper or two.
null_sql_chains = st.lists(st.sampled_from(sorted(SQL_WRAPPERS)), max_size=2)


@st.composite
def null_unit_scenarios(draw):
    """A scenario of :func:`scenarios` whose changed table is A, user-level (the table the
    chain is built on), with a file kind, NULL-like persons in either table, and whether the
    neighbour's added person has a NULL-like id (its spelling)."""
    world, side, extra = draw(scenarios().filter(lambda sc: sc[1] == "A" and sc[0].a_user_level))
    # The changed table always has a NULL-like person, so the added one meets others.
    nulls = {t: draw(st.lists(null_person, min_size=int(t == side), max_size=2)) for t in "AB"}
    extra_null = draw(st.sampled_from([None, "nan", "nan", "null"]))
    return world, side, extra, draw(st.sampled_from(["parquet", "csv"])), nulls, extra_null


def _file_sides(sc, folder: str):
    """The two neighbours' sources and extra units: the added person is either a unit with
    an id (as in :func:`scenarios`) or one more NULL-like person of ``side``'s table."""
    world, side, extra, kind, nulls, extra_null = sc
    first = FileSource(kind, folder, nulls)
    if extra_null is None:
        return world, side, extra, (first, None), (first, extra)
    more = {**nulls, side: [*nulls[side], (extra_null, extra[1])]}
    return world, side, extra, (first, None), (FileSource(kind, folder, more), None)


def _describe_files(sc) -> str:
    _, _, extra, kind, nulls, extra_null = sc
    added = f"a NULL-like ({extra_null}) person" if extra_null else f"pid={extra[0]}"
    counts = {t: [sp for sp, _ in nulls[t]] for t in nulls}
    return f"read from {kind} files; NULL-like persons {counts}; the neighbour adds {added}"


def test_adversarial_chains_with_null_like_units_from_files(engine: str, tmp_path) -> None:
    kind = f"python-files/{engine}"

    @_settings(FILE_EXAMPLES[engine])
    @given(sc=null_unit_scenarios(), chain=null_chains, seed=st.integers(0, 2**16))
    def prop(sc, chain, seed):
        if chain[0].startswith("explode"):
            return  # the files hold no list column
        folder = tempfile.mkdtemp(dir=tmp_path)
        world, side, extra, (s1, e1), (s2, e2) = _file_sides(sc, folder)
        try:
            r1 = run_side(world, e1, side, chain, seed, source=s1)
            r2 = run_side(world, e2, side, chain, seed, source=s2)
        except Skip:
            return
        _tally(kind, "chains")
        what = describe(world, side, extra, chain) + "; " + _describe_files(sc)
        note(what)
        problems = compare(r1, r2, what, kind)
        if problems:
            _tally(kind, "violations")
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)


def test_adversarial_sql_chains_with_null_like_units_from_files(engine: str, tmp_path) -> None:
    kind = f"sql-files/{engine}"

    @_settings(FILE_EXAMPLES[engine])
    @given(
        sc=null_unit_scenarios(),
        chain=null_sql_chains,
        seed=st.integers(0, 2**16),
        max_rows=st.integers(1, 3),
    )
    def prop(sc, chain, seed, max_rows):
        folder = tempfile.mkdtemp(dir=tmp_path)
        world, side, extra, (s1, e1), (s2, e2) = _file_sides(sc, folder)
        try:
            r1, queries = run_sql_side(world, e1, side, chain, seed, max_rows, source=s1)
            r2, _ = run_sql_side(world, e2, side, chain, seed, max_rows, source=s2)
        except Skip:
            return
        _tally(kind, "chains")
        what = describe(world, side, extra, [f"(registered with max_rows={max_rows})", *chain])
        what += "; " + _describe_files(sc) + "\n  SQL: " + queries["count"]
        note(what)
        problems = compare(r1, r2, what, kind)
        if problems:
            _tally(kind, "violations")
            raise AssertionError("stability violated: " + what + "\n  " + "\n  ".join(problems))

    try:
        prop()
    finally:
        _print_summary(kind)
