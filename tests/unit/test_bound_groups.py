"""bound_contributions(max_groups=G, max_rows_per_group=k, by=...) and bound_degree.

Stabilities on random neighbours are in test_stability_properties.py; here: what each engine
keeps (at most G groups per unit, k rows per group, chosen at random alike), the exact charges
of a split on the ``by`` columns (Laplace and Gaussian), the public facts that survive, and the
errors, all raised before anything is charged.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.agents import AllParts, PartitionAgent, charge
from pinqpy.accounting.charges import GaussianCharge, PureCharge, usage_of
from pinqpy.accounting.models import rho_of_gaussian
from pinqpy.engines.registry import executor_for
from pinqpy.noise.mechanisms import CountMechanism
from pinqpy.plan.describe import StepDescriber
from pinqpy.plan.serialize import from_json, to_json

CITIES = list("ABCDEF")


def visits(n_units: int = 300, rows_per_group: int = 3) -> pd.DataFrame:
    """Every unit has rows in all six cities, ``rows_per_group`` rows each (values 0, 1, ...),
    plus rows with a NULL city (one more group) and rows with a NULL unit (no one's)."""
    recs = [
        {"uid": u, "city": c, "x": float(i)}
        for u in range(n_units)
        for c in [*CITIES, None]
        for i in range(rows_per_group)
    ]
    recs += [{"uid": None, "city": "A", "x": 9.0} for _ in range(5)]
    df = pd.DataFrame(recs)
    return df.astype({"uid": "float64", "city": "str", "x": "float64"}).assign(
        city=lambda d: d.city.where(d.city != "None", None)
    )


def rows_of(frame: pq.PrivateFrame, seed: int) -> pd.DataFrame:
    with pq.testing.seed(seed):
        ex = executor_for(frame._plan, frame._rel.catalog)
        return ex.rows(frame._plan)  # type: ignore[attr-defined]


def _city(v: object) -> object:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


# -- engines: what is kept ---------------------------------------------------------------------
def test_each_unit_keeps_at_most_g_groups_and_k_rows_each(engine):
    f = pq.PrivateFrame(visits(), pq.Budget(1), privacy_unit="uid")
    out = rows_of(f.bound_contributions(max_groups=2, max_rows_per_group=1, by="city"), 5)
    out = out.assign(city=[_city(c) for c in out.city])
    assert out.uid.notna().all()  # rows of no one are dropped
    groups = out.groupby("uid").city.nunique(dropna=False)
    per_group = out.groupby(["uid", "city"], dropna=False).size()
    assert (groups == 2).all() and len(groups) == 300  # every unit has 7 groups to choose from
    assert (per_group == 1).all()
    # Groups chosen uniformly at random: each of the 7 (NULL included) kept by ~2/7 of units.
    kept = out.city.value_counts(dropna=False)
    assert len(kept) == 7
    for city, n in kept.items():
        assert abs(n - 300 * 2 / 7) < 45, (city, n)  # sd 7.8
    # Rows within a group at random too: each of the 3 values kept ~1/3 of the time.
    for value, n in out.x.value_counts().items():
        assert abs(n - 600 / 3) < 60, (value, n)  # sd 11.5


def test_overall_cap_and_no_per_group_cap(engine):
    f = pq.PrivateFrame(visits(n_units=50), pq.Budget(1), privacy_unit="uid")
    capped = rows_of(f.bound_contributions(3, max_groups=2, max_rows_per_group=2, by="city"), 1)
    assert (capped.groupby("uid").size() == 3).all()
    assert (capped.groupby("uid").city.nunique(dropna=False) <= 2).all()
    assert (capped.groupby(["uid", "city"], dropna=False).size() <= 2).all()
    whole = rows_of(f.bound_contributions(max_groups=1, by="city"), 2)
    # No per-group cap: one whole group (3 rows) per unit.
    assert (whole.groupby("uid").size() == 3).all()
    assert (whole.groupby("uid").city.nunique(dropna=False) == 1).all()


def test_two_by_columns_and_fresh_draws(engine):
    df = visits(n_units=40).assign(hour=lambda d: (d.x * 7) % 2)
    f = pq.PrivateFrame(df, pq.Budget(1), privacy_unit="uid")
    b = f.bound_contributions(max_groups=3, max_rows_per_group=1, by=["city", "hour"])
    one, two = rows_of(b, 1), rows_of(b, 2)
    for out in (one, two):
        assert (out.groupby("uid").size() == 3).all()
        assert (out.groupby(["uid", "city", "hour"], dropna=False).size() == 1).all()
    # A fresh draw per read: two reads keep different rows.
    key = ["uid", "city", "x"]
    assert (
        not one[key]
        .fillna("-")
        .sort_values(key)
        .reset_index(drop=True)
        .equals(two[key].fillna("-").sort_values(key).reset_index(drop=True))
    )


def test_bound_degree_keeps_at_most_b_rows_per_key(engine):
    rng = np.random.default_rng(0)
    edges = pd.DataFrame({"src": rng.integers(0, 30, 900), "dst": rng.integers(0, 30, 900)})
    edges = edges.astype("float64")
    edges.loc[:9, "src"] = np.nan  # ten edges from a NULL node: one key
    f = pq.PrivateFrame(edges, pq.Budget(1))
    out = rows_of(f.bound_degree("src", 4), 3)
    sizes = out.groupby("src", dropna=False).size()
    assert sizes.max() == 4 and len(sizes) == 31
    assert out.src.isna().sum() == 4
    two = rows_of(f.bound_degree(["src", "dst"], 1), 3)
    assert not two.duplicated(["src", "dst"]).any()
    assert len(two) == len(edges.drop_duplicates(["src", "dst"]))


def test_engines_agree_on_the_count_after_bounding(engine):
    f = pq.PrivateFrame(visits(n_units=100), pq.Budget(100), privacy_unit="uid")
    b = f.bound_contributions(max_rows=5, max_groups=3, max_rows_per_group=2, by="city")
    with pq.testing.no_noise():
        assert b.count(epsilon=1) == 500
        parts = b.partition("city", keys=[*CITIES, None]).count(epsilon=1)
    assert int(parts.sum()) == 500
    assert (parts <= 200).all()  # 2 rows per unit per city at most


# -- charges -----------------------------------------------------------------------------------
def _people(budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(visits(n_units=20), budget, privacy_unit="uid")


def test_laplace_split_on_by_costs_g_k_epsilon():
    budget = pq.Budget(100)
    b = _people(budget).bound_contributions(max_groups=3, max_rows_per_group=2, by="city")
    assert b.stability == 6
    parts = b.partition("city", keys=CITIES)
    parts.count(epsilon=Fraction(1, 2))
    assert budget.spent.epsilon == 3  # G·k·eps = 3·2·1/2, as the largest-part rule
    # Every read through the partition draws its fixed salts (one cut for all reads), so
    # parts asked one at a time are charged by the largest part too: G·k·(1/2 + 1/10).
    parts["A"].count(epsilon=Fraction(1, 10))
    parts["B"].count(epsilon=Fraction(1, 10))
    assert budget.spent.epsilon == 3 + Fraction(6, 10)


def test_gaussian_split_on_by_has_l2_sensitivity_sqrt_g_times_k():
    eps, delta = Fraction(1, 2), Fraction(1, 10**7)
    rho1 = usage_of(CountMechanism(eps, delta=delta).charge, 1).rho
    sigma = CountMechanism(eps, delta=delta).charge.sigma

    def spent(by: str, part_on: str, **kw: int) -> Fraction:
        budget = pq.Budget(10, 1e-5, accounting="zcdp")
        f = _people(budget).assign(hour="x")
        b = f.bound_contributions(by=by, **kw)
        b.partition(part_on, keys=[*CITIES, None] if part_on == "city" else [0.0, 1.0]).count(
            eps, delta=delta
        )
        return budget._spent.rho

    g, k = 3, 2
    on_by = spent("city", "city", max_groups=g, max_rows_per_group=k)
    assert on_by == g * k * k * rho1  # G parts at stability k: G·k²·rho
    # ... the zCDP cost of the Gaussian at L2 sensitivity sqrt(G)·k with the noise drawn.
    assert on_by == pytest.approx(float(rho_of_gaussian(math.sqrt(g) * k, sigma)), rel=1e-9)
    # A split on another column: one part may get all G·k rows, (G·k)²·rho.
    assert spent("city", "hour", max_groups=g, max_rows_per_group=k) == (g * k) ** 2 * rho1
    # An overall cap of 5: at most 2 + 2 + 1 rows in three parts: (4 + 4 + 1)·rho.
    assert spent("city", "city", max_rows=5, max_groups=g, max_rows_per_group=k) == 9 * rho1
    # A cap below k: at most 1 row per part, in G parts.
    assert spent("city", "city", max_rows=1, max_groups=g, max_rows_per_group=k) == rho1


def test_partition_agent_charges_exactly():
    pure = pq.Budget(100)
    spread = PartitionAgent({pure: Fraction(6)}, max_parts_per_unit={pure: (3, Fraction(2))})
    charge({AllParts(spread): Fraction(1)}, PureCharge(Fraction(1, 4)))
    assert pure.spent.epsilon == Fraction(3, 2)

    c = GaussianCharge(Fraction(1, 2), Fraction(1, 10**6), 1, 6.0)
    one = usage_of(c, 1)
    for accounting in ("approx", "zcdp"):
        b = pq.Budget(50, Fraction(1, 100), accounting=accounting)
        plain = pq.Budget(50, Fraction(1, 100), accounting=accounting)
        charge({AllParts(PartitionAgent({b: 6}, max_parts_per_unit={b: (3, Fraction(2))})): 1}, c)
        charge({AllParts(PartitionAgent({plain: 6})): 1}, c)
        assert b._spent == one.at(2) + one.at(2) + one.at(2)
        assert plain._spent == one.at(6)
        assert b._spent.epsilon == plain._spent.epsilon == 3
        assert b._spent.rho == 12 * one.rho and plain._spent.rho == 36 * one.rho
        assert b._spent.delta < plain._spent.delta
    # K not a multiple of k: two parts at 2 and one at 1.
    z = pq.Budget(50, Fraction(1, 100), accounting="zcdp")
    charge({AllParts(PartitionAgent({z: 5}, max_parts_per_unit={z: (3, Fraction(2))})): 1}, c)
    assert z._spent == one.at(2) + one.at(2) + one.at(1)
    with pytest.raises(ValueError):
        PartitionAgent({z: 5}, max_parts_per_unit={pure: (3, Fraction(2))})


def test_partition_agent_follows_column_identity():
    b = pq.Budget(10)
    f = _people(b).bound_contributions(max_groups=2, max_rows_per_group=2, by="city")

    def spread(rel, cols):
        return rel.partition_agent(cols).max_parts_per_unit

    assert spread(f._rel, ("city",)) == {b: (2, Fraction(2))}
    renamed = f.select("uid", "x", town="city").where("x > 0")
    assert spread(renamed._rel, ("town",)) == {b: (2, Fraction(2))}
    assert spread(f.assign(city="UPPER(city)")._rel, ("city",)) == {}
    assert spread(f._rel, ("x",)) == {}
    assert spread(f._rel, ("city", "x")) == {}
    assert spread(f.bound_contributions(1)._rel, ("city",)) == {b: (2, Fraction(1))}
    assert spread(f.groupby("uid", "city").agg(n="COUNT(*)")._rel, ("city",)) == {}


# -- facts and text ----------------------------------------------------------------------------
def test_public_facts_survive():
    b = pq.Budget(1)
    df = visits(n_units=3)
    f = pq.PrivateFrame(
        df, b, privacy_unit="uid", bounds={"x": (0, 5)}, keys={"city": [*CITIES, None]}
    )
    g = f.bound_contributions(max_groups=2, max_rows_per_group=1, by="city")
    assert g.privacy_unit == "uid" and g._rel.bounds == {"x": (0, 5)}
    assert g._rel.keys["city"] == f._rel.keys["city"]
    d = f.bound_degree("city", 2)
    assert d.privacy_unit is None  # one unit's rows may evict another's
    assert d._rel.bounds == {"x": (0, 5)}
    assert f.bound_degree(["uid", "city"], 2).privacy_unit == "uid"
    u = f.groupby("uid", "city").agg(n="COUNT(*)")
    assert u.bound_degree("city", 1)._rel.meta.unique_on(("uid", "city"))
    assert u.bound_contributions(max_groups=1, by="city")._rel.meta.unique_on(("uid", "city"))
    text = StepDescriber().visit(g._plan)
    assert "at most 2 groups of city per 'uid', at most 1 rows each" in text
    assert StepDescriber().visit(d._plan) == "Bound degree: at most 2 rows per city"


def test_plan_json_round_trip():
    f = _people(pq.Budget(1))
    for frame in (
        f.bound_contributions(max_groups=2, max_rows_per_group=1, by=["city", "x"]),
        f.bound_contributions(max_rows=2, max_groups=2, by="city"),
        f.bound_degree(["city"], 3),
    ):
        back = from_json(to_json(frame._plan))
        assert type(back) is type(frame._plan)
        assert to_json(back) == to_json(frame._plan)


# -- errors, before any charge -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"max_groups": 0, "by": "city"}, pq.PinqError, "max_groups must be a positive"),
        ({"max_groups": 2.5, "by": "city"}, pq.PinqError, "max_groups must be a positive"),
        ({"max_groups": True, "by": "city"}, pq.PinqError, "max_groups must be a positive"),
        ({"max_groups": "2", "by": "city"}, pq.PinqError, "max_groups must be a positive"),
        (
            {"max_groups": 2, "max_rows_per_group": 0, "by": "city"},
            pq.PinqError,
            "max_rows_per_group must be a positive",
        ),
        ({"max_groups": 2, "by": "town"}, pq.PinqError, "unknown column 'town'"),
        ({"max_groups": 2, "by": "uid"}, pq.PinqError, "is the privacy unit"),
        ({"max_groups": 2, "by": []}, pq.PinqError, "at least one by column"),
        ({"max_groups": 2, "by": 3}, pq.PinqError, "by must be a column name"),
        ({"max_groups": 2}, pq.PinqError, "max_groups needs by="),
        ({"by": "city"}, pq.PinqError, "go with max_groups"),
        ({"max_rows_per_group": 2}, pq.PinqError, "go with max_groups"),
        ({"max_rows": 0, "max_groups": 2, "by": "city"}, pq.PinqError, "max_rows must be"),
        ({}, pq.PinqError, "needs max_rows=k"),
    ],
)
def test_bad_input_is_refused_before_any_charge(kw, error, match):
    budget = pq.Budget(1)
    f = _people(budget)
    with pytest.raises(error, match=match):
        f.bound_contributions(**kw).count(epsilon=1)
    assert budget.spent.is_zero


def test_other_refusals():
    budget = pq.Budget(1)
    f = _people(budget)
    with pytest.raises(pq.PinqError, match="is the privacy unit"):
        f.select("city", "x", person="uid").bound_contributions(max_groups=1, by="person")
    records = pq.PrivateFrame(visits(n_units=2), budget)
    with pytest.raises(pq.PrivacyError, match="needs a user-level frame"):
        records.bound_contributions(max_groups=1, by="city")
    with pytest.raises(pq.PrivacyError, match="needs a user-level frame"):
        f.assign(uid="x").bound_contributions(max_groups=1, by="city")
    with pytest.raises(pq.PinqError, match="max_rows must be a positive"):
        records.bound_degree("city", 0)
    with pytest.raises(pq.PinqError, match="unknown column"):
        records.bound_degree("town", 1)
    with pytest.raises(pq.PinqError, match="at least one key column"):
        records.bound_degree([], 1)
    # Unbounded per group: aggregating is refused, before any charge.
    with pytest.raises(pq.PrivacyError, match="unbounded"):
        f.bound_contributions(max_groups=2, by="city").count(epsilon=1)
    assert budget.spent.is_zero
    # The old spellings still work.
    assert f.bound_contributions(3).stability == 3
    assert f.bound_contributions(max_rows=3).stability == 3


def test_sql_group_by_on_the_by_column_uses_the_spread():
    """SQL's GROUP BY charges through Relation.partition_agent: under a zCDP budget, Laplace
    noise of epsilon e/6 per group (stability 6) costs G·k²·(e/6)²/2 of rho, not
    (G·k)²·(e/6)²/2."""
    cities = [*CITIES, None]

    def rho_spent(group_by: str) -> Fraction:
        budget = pq.Budget(10, 1e-6, accounting="zcdp")
        f = pq.PrivateFrame(
            visits(n_units=20).assign(hour=lambda d: d.x),
            budget,
            privacy_unit="uid",
            keys={"city": cities, "hour": [0.0, 1.0, 2.0]},
        )
        session = pq.Session()
        session.register("v", f.bound_contributions(max_groups=3, max_rows_per_group=2, by="city"))
        session.sql(f"SELECT {group_by}, COUNT(*) AS n FROM v GROUP BY {group_by}", epsilon=1)
        return budget._spent.rho

    per_group = Fraction(1, 6) ** 2 / 2
    assert rho_spent("city") == 3 * 2 * 2 * per_group
    assert rho_spent("hour") == 6 * 6 * per_group
