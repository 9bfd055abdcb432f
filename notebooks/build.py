"""(Re)create pinqpy's example notebooks and execute them, so they ship with real outputs.

    python notebooks/build.py                 # write and execute every notebook
    python notebooks/build.py 02 03           # only the notebooks whose name contains 02 or 03
    python notebooks/build.py --no-execute    # write the cells only (no outputs)

The notebooks are written with nbformat from the cell texts below, then run top to bottom by
nbclient in a kernel of *this* interpreter (a temporary kernel spec for ``sys.executable``,
so the notebooks see the pinqpy installed here), with the notebooks folder as the working
directory. Needs ``nbformat nbclient ipykernel matplotlib`` beside pinqpy.

The noise is fresh on every build (no seed), so the prose never quotes a noisy number: only
charges, budgets and other public, deterministic facts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(textwrap.dedent(text).strip())


def code(text: str) -> nbformat.NotebookNode:
    return new_code_cell(textwrap.dedent(text).strip())


def failing(text: str) -> nbformat.NotebookNode:
    """A cell that fails on purpose, to show an error: tagged so a run goes on past it."""
    return new_code_cell(textwrap.dedent(text).strip(), metadata={"tags": ["raises-exception"]})


# ------------------------------------------------------------------------------------------
# 01 -- quickstart
# ------------------------------------------------------------------------------------------
QUICKSTART = [
    md(
        """
        # pinqpy quickstart: private questions about 1,000 real Californians

        pinqpy wraps a pandas DataFrame so that the only way to learn about its rows is through
        **noisy aggregates**, each one paid for from a **privacy budget** before any row is read.

        This notebook uses the sample that ships inside pinqpy: 1,000 people from the US Census
        Bureau's California PUMS file (public domain; the same table OpenDP and SmartNoise test
        with). Its columns are `age`, `sex`, `educ` (education code 1–16), `race` (code 1–6),
        `income` (dollars) and `married` (0/1).

        Everything below is method chaining on a `PrivateFrame`. The SQL front end and the
        `%%pinq` magic are in `02_sql_magic.ipynb`; PINQ's classic programs with plots are in
        `03_pinq_classics.ipynb`.

        The noise is fresh every time the notebook runs, so your numbers will differ from the
        ones saved here. The charges will not: they are exact.
        """
    ),
    code(
        """
        import pandas as pd
        import pinqpy as pq
        from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums

        df = load_pums()        # the data curator's copy: the analyst never sees these rows
        print(f"pinqpy {pq.__version__}; columns: {list(df.columns)}")
        """
    ),
    md(
        """
        ## A budget and a private frame

        A `Budget` is the total privacy loss (epsilon) the analyst may spend on this data.
        A `PrivateFrame` holds the rows and charges every noisy answer to that budget.

        The frame also takes **public metadata**: value `bounds` for numeric columns (so a sum or
        a mean knows how much one person can move it) and the possible `keys` of categorical
        columns (so a partition knows its groups without looking). pinqpy never reads bounds or
        keys off the data; `pinqpy.demo` declares them for this sample:
        """
    ),
    code(
        """
        print("bounds:", PUMS_BOUNDS)
        print("keys:  ", PUMS_KEYS)

        budget = pq.Budget(epsilon=5.0)
        people = pq.PrivateFrame(df, budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
        print(repr(people))
        """
    ),
    md(
        """
        The `repr` shows the schema, the stability (how many output rows one person can change:
        1 for a fresh frame) and the budget. It shows no rows, no row count, no value. Asking for
        rows directly is refused:
        """
    ),
    code(
        """
        for attempt in (lambda: people.head(), lambda: len(people)):
            try:
                attempt()
            except pq.PrivacyError as err:
                print("PrivacyError:", err)
        """
    ),
    md(
        """
        ## Preview the accuracy before spending

        `accuracy()` tells you which mechanism a query would use, how large its error would be
        (at 95% by default) and what it would charge, without reading data or charging anything.
        A mean's error depends on how many rows there are; pass a public guess `n=` to get a
        useful figure (without it the bound is the whole width of the bounds).
        """
    ),
    code(
        """
        print(people.accuracy("count", epsilon=0.1))
        print(people.accuracy("mean", "income", epsilon=0.2, n=1000))
        print(people.accuracy("mean", "income", epsilon=0.2, n=1000, bounds=(0, 150_000)))
        print("\\nremaining after three previews:", budget.remaining)
        """
    ),
    md(
        """
        Narrower bounds cut the noise of a mean (one person moves it less), at the price of
        clamping the incomes above the upper bound. That trade-off is the analyst's choice, made
        without looking at the data.

        ## First answers, and the budget draining

        Each aggregation takes an `epsilon`, is charged `epsilon × stability` before the data is
        read, and returns a number that carries its own accuracy: `.ci(level)` is the interval
        that the noise distribution gives.
        """
    ),
    code(
        """
        def show(label, value):
            low, high = value.ci(0.95)
            print(f"{label:<34} {float(value):>10,.1f}   95% CI [{low:>10,.1f}, {high:>10,.1f}]"
                  f"   remaining {budget.remaining.epsilon}")

        show("people.count(0.1)", people.count(epsilon=0.1))
        show("aged 65 or over, count(0.1)", people.where("age >= 65").count(epsilon=0.1))
        show("mean income (0.2)", people.mean("income", epsilon=0.2))
        show("median age (0.3, ci=True)", people.median("age", epsilon=0.3, ci=True))
        """
    ),
    md(
        """
        The remaining budget went 5.0 → 4.9 → 4.8 → 4.6 → 4.3: exactly the epsilons asked for.
        Budget arithmetic is exact (fractions), so ten charges of 0.1 spend exactly 1.0.

        A result behaves like a number, and its `repr` names the noise:
        """
    ),
    code(
        """
        seniors = people.where("age >= 65").count(epsilon=0.1)   # asked above: cached, free
        print(repr(seniors))
        print("share of the sample:", f"{seniors / 1000:.1%}")
        """
    ),
    md(
        """
        ## Transformations are free

        `where`, `assign`, `select`, `distinct`, `groupby(...).agg(...)`, `join` and friends only
        build a plan: they read nothing and charge nothing. Expressions are SQL strings (or
        `pq.col(...)` builders). Declared bounds follow expressions: `income / 1000` is known to
        lie in [0, 500], so the new column needs no bounds of its own.
        """
    ),
    code(
        """
        workers = (
            people.where("age BETWEEN 20 AND 59")
                  .assign(k_income="income / 1000", decade="FLOOR(age / 10) * 10")
        )
        print(repr(workers))
        print("derived bounds:", {c: workers.bounds[c] for c in ("k_income", "decade")})
        print("remaining:", budget.remaining)
        """
    ),
    code(
        """
        show("mean income, $1000s, ages 20-59 (0.2)", workers.mean("k_income", epsilon=0.2))
        """
    ),
    md(
        """
        `groupby(...).agg(...)` (PINQ's GroupBy) makes one row per group with exact per-group
        values that later steps may filter on. One person can change one group's row (remove the
        old, add the new), so its stability is **2**: a query at epsilon 0.5 on it charges 1.0.
        """
    ),
    code(
        """
        levels = people.groupby("educ").agg(n="COUNT(*)", mean_age="AVG(age)")
        print(repr(levels))
        before = budget.spent.epsilon
        show("education codes with >= 50 people", levels.where("n >= 50").count(epsilon=0.5))
        print("charged:", float(budget.spent.epsilon - before))
        """
    ),
    md(
        """
        ## Partition versus sequential composition

        Suppose we want the mean income of the 20–59-year-olds in each age decade (20s to 50s),
        with incomes clamped to [0, 150,000] to keep the noise down.

        * With `partition("decade", keys=...)` the four groups are **disjoint**: one person is in
          at most one of them, so four means at epsilon 0.5 each cost **0.5 in all** (parallel
          composition).
        * With four separate `where("decade = d")` queries, pinqpy cannot know that the filters
          do not overlap, so it charges each one: **2.0 in all** (sequential composition).

        Same questions, same accuracy per group, four times the price.
        """
    ),
    code(
        """
        decades = [20, 30, 40, 50]

        before = budget.spent.epsilon
        by_partition = workers.partition("decade", keys=decades).mean(
            "income", epsilon=0.5, bounds=(0, 150_000))
        partition_charge = float(budget.spent.epsilon - before)

        before = budget.spent.epsilon
        by_where = pd.Series({
            d: workers.where(f"decade = {d}").mean("income", epsilon=0.5, bounds=(0, 150_000))
            for d in decades
        })
        where_charge = float(budget.spent.epsilon - before)

        print(f"partition(...).mean:   charged {partition_charge}")
        print(f"four where(...).mean:  charged {where_charge}")
        print("remaining:", budget.remaining)
        pd.DataFrame({"partition": by_partition, "separate where": by_where}).round(0)
        """
    ),
    md(
        """
        Both columns are noisy answers to the same four questions; they differ only by their
        noise. A partition's result is a pandas Series indexed by
        key, with intervals for every key:
        """
    ),
    code(
        """
        by_partition.ci(0.95).round(0)
        """
    ),
    md(
        """
        ## Asking again is free

        pinqpy caches answers. The same question (same plan over the same data, same aggregation,
        same parameters) returns the same noisy answer and charges nothing, however it is spelt.
        Re-asking cannot average the noise away, and it costs nothing.
        """
    ),
    code(
        """
        before = budget.remaining
        again = [
            people.where("age >= 65").count(epsilon=0.1),
            people.where("age>=65").count(epsilon=0.1),
            people.where(pq.col("age") >= 65).count(epsilon=0.1),
        ]
        print("same answer each time:", len({float(a) for a in again}) == 1)
        print("remaining before:", before, " after:", budget.remaining)
        """
    ),
    md(
        """
        ## Running out

        Keep asking (counts by age decade, at epsilon 0.25 each) and the budget runs out. A query
        that does not fit raises `BudgetExceededError` **before reading any data** and charges
        nothing, not even the part that would still fit.
        """
    ),
    code(
        """
        for decade in range(20, 100, 10):
            try:
                in_decade = people.where(f"age >= {decade} AND age < {decade + 10}")
                answer = in_decade.count(epsilon=0.25)
            except pq.BudgetExceededError as err:
                print(f"ages {decade}s: BudgetExceededError: {err}")
                break
            print(f"ages {decade}s: about {float(answer):.0f} people;"
                  f" remaining {budget.remaining.epsilon}")

        print("remaining after the refusal:", budget.remaining)
        """
    ),
    md(
        """
        The refused query charged nothing: 0.1 is left, exactly where the last successful query
        left it, and still available for a smaller question. Every charge is on record:
        """
    ),
    code(
        """
        print(budget)
        budget.audit()
        """
    ),
    md(
        """
        ## Where next

        * `02_sql_magic.ipynb`: the same engine through SQL, in notebook cells (`%%pinq`).
        * `03_pinq_classics.ipynb`: PINQ's degree histogram and k-means, accuracy against
          epsilon, and the budget spent per query, with plots.
        * `README.md`: accounting models (zCDP), Gaussian noise, private key selection and the
          durable ledger.
        """
    ),
]

# ------------------------------------------------------------------------------------------
# 02 -- SQL and the %%pinq magic
# ------------------------------------------------------------------------------------------
SQL_MAGIC = [
    md(
        """
        # SQL in notebooks: the `%%pinq` magic

        pinqpy answers a small SQL dialect with the same engine as method chaining: a query
        compiles to the same plan and the same noisy aggregations, and is charged the same way.
        In a notebook the `%%pinq` cell magic runs a cell of SQL against a `pq.Session` and
        displays the noisy result with its 95% intervals.

        `%%pinq [-e EPSILON] [-d DELTA] [--session NAME] [-o VARIABLE] [-q]`:

        * `-e` is the **total** epsilon the query charges (pinqpy splits it over the query's
          noisy measurements; `EXPLAIN` shows how);
        * `--session` picks the session (default: the last `pq.Session()` created);
        * `-o result` also stores the result in the variable `result`; `-q` does not display it.

        The data is the 1,000-person California PUMS sample bundled with pinqpy.
        """
    ),
    code(
        """
        %load_ext pinqpy

        import pandas as pd
        import pinqpy as pq
        from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums

        pd.set_option("display.width", 120)
        print(f"pinqpy {pq.__version__}: the %pinq and %%pinq magics are loaded")
        """
    ),
    md(
        """
        ## A session: one private table, one public table

        `register` adds a private table with its budget and public metadata (bounds, keys).
        `register_public` adds a table that is not private, for joins and labels: nothing is ever
        charged for it. Here it names the stages of the PUMS education codes (1–8 no diploma,
        9 high-school graduate, 10–12 some college or associate, 13 bachelor's, 14–16 graduate
        or professional degree).
        """
    ),
    code(
        """
        session = pq.Session()
        session.register("people", load_pums(), budget=pq.Budget(epsilon=3.0),
                         bounds=PUMS_BOUNDS, keys=PUMS_KEYS)

        stages = (["no diploma"] * 8 + ["high school"] + ["some college"] * 3
                  + ["bachelor"] + ["graduate"] * 3)
        education = pd.DataFrame({"educ": range(1, 17), "stage": stages})
        session.register_public("education", education)
        session.sql("SHOW TABLES")
        """
    ),
    code(
        """
        %%pinq
        DESCRIBE people
        """
    ),
    md(
        """
        ## GROUP BY: one query, one charge for all groups

        The outermost `GROUP BY` is a partition (parallel composition). Its keys come from the
        declared keys of `married`, so no key is read off the data. Three noisy measurements
        share the 0.5: about 0.167 each.

        Bounds come from the table's metadata (`age` in [0, 100]) or inline:
        `AVG(income, 0, 150000)` clamps incomes into [0, 150,000] for this aggregate, which
        makes its noise much smaller than the declared [0, 500,000] would.
        """
    ),
    code(
        """
        %%pinq -e 0.5
        SELECT married, COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income, AVG(age) AS mean_age
        FROM people
        WHERE age >= 25
        GROUP BY married
        """
    ),
    md(
        """
        ## JOIN with a public table

        Joining the public `education` table maps each code to its stage; the group keys then
        come from that public table. Each code appears once in it, so the join has stability 1.
        `ORDER BY` works on the noisy results (it is post-processing: free).
        """
    ),
    code(
        """
        %%pinq -e 0.5
        SELECT e.stage, COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income
        FROM people p JOIN education e ON p.educ = e.educ
        GROUP BY e.stage
        ORDER BY mean_income DESC
        """
    ),
    md(
        """
        ## A subquery with GROUP BY, explained first

        A `GROUP BY` inside a subquery is PINQ's GroupBy *transformation*: it makes one row per
        group with exact values that the outer query can filter. One person can change one such
        row (out with the old, in with the new), so it has stability 2. How many
        education × race cells hold at least 20 people?

        `EXPLAIN` shows the plan, each operator's stability, the noise and the total charge,
        without reading data or charging anything. With `-e 0.5` and stability 2, the count is
        answered at epsilon 0.25 so that the total charge is 0.5.
        """
    ),
    code(
        """
        %%pinq -e 0.5
        EXPLAIN
        SELECT COUNT(*) AS big_cells
        FROM (SELECT educ, race, COUNT(*) AS n FROM people GROUP BY educ, race) AS cells
        WHERE n >= 20
        """
    ),
    code(
        """
        %%pinq -e 0.5
        SELECT COUNT(*) AS big_cells
        FROM (SELECT educ, race, COUNT(*) AS n FROM people GROUP BY educ, race) AS cells
        WHERE n >= 20
        """
    ),
    md(
        """
        ## HAVING, ORDER BY and LIMIT

        At the top level these post-process the noisy answers: they filter and sort the released
        rows, so they cost nothing more. `HAVING` may name the `SELECT` aliases. Because the
        filter sees noisy counts, a group near the threshold may fall on either side of it.
        """
    ),
    code(
        """
        %%pinq -e 0.4
        SELECT educ, COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income
        FROM people
        GROUP BY educ
        HAVING n >= 40
        ORDER BY mean_income DESC
        LIMIT 5
        """
    ),
    md(
        """
        ## Keeping a result: `-o`

        `-o result` also stores the result (a `NoisyFrame`, which is a pandas DataFrame) in a
        variable (add `-q` to store it without displaying it). `result.ci("n")` gives the
        intervals of one noisy column.
        """
    ),
    code(
        """
        %%pinq -e 0.3 -o result
        SELECT sex, COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income
        FROM people
        WHERE age >= 18
        GROUP BY sex
        """
    ),
    code(
        """
        print(type(result).__name__, "with columns", list(result.columns))
        result.ci("n")
        """
    ),
    md(
        """
        ## The budget so far

        `SHOW BUDGET` is a DataFrame of every budget in the session: 0.5 + 0.5 + 0.5 + 0.4 + 0.3
        = 2.2 spent; the `EXPLAIN`, `SHOW` and `DESCRIBE` statements charged nothing.
        `--session` names the session explicitly (useful with several).
        """
    ),
    code(
        """
        %%pinq --session session
        SHOW BUDGET
        """
    ),
    md(
        """
        ## Mistakes are reported, not charged

        A typo, a query that would release raw rows, or a query that does not fit the budget:
        the cell fails with pinqpy's message (for a syntax error or an unknown name, with the
        line, the column and a caret under the fault) and no traceback, so "Run All" stops
        there. Nothing is read and nothing is charged. The three cells below are tagged
        `raises-exception` so that this notebook runs on past them.
        """
    ),
    failing(
        """
        %%pinq -e 0.1
        SELECT COUNT(*) FROM people WHERE agee >= 65
        """
    ),
    failing(
        """
        %%pinq -e 0.1
        SELECT age, income FROM people WHERE age >= 65
        """
    ),
    failing(
        """
        %%pinq -e 5
        SELECT COUNT(*) FROM people
        """
    ),
    code(
        """
        session.sql("SHOW BUDGET")[["budget", "spent_epsilon", "remaining_epsilon"]]
        """
    ),
    md(
        """
        ## Without the magic: `session.sql(...)`

        The magic is a thin layer over `session.sql(query, epsilon=..., delta=...)`, which works
        in any Python program. Errors are then ordinary exceptions (`pq.PinqSyntaxError`,
        `pq.PrivacyError`, `pq.BudgetExceededError`, all subclasses of `pq.PinqError`).
        The epsilon may also be written in the query, with `OPTIONS (...)`.
        """
    ),
    code(
        """
        older = session.sql(
            \"\"\"
            SELECT married, COUNT(*) AS n, AVG(age) AS mean_age
            FROM people
            WHERE income > 0
            GROUP BY married
            OPTIONS (epsilon = 0.3)
            \"\"\"
        )
        print(older.round(1))
        print()
        print(older.ci("mean_age").round(1))
        """
    ),
    code(
        """
        try:
            session.sql("SELECT COUNT(*) FROM people WHERE age >= 65 GROUP BY", epsilon=0.1)
        except pq.PinqSyntaxError as err:
            print(f"PinqSyntaxError at line {err.line}, column {err.column}:\\n{err}")

        print("\\nremaining:", session.sql("SHOW BUDGET")["remaining_epsilon"].iloc[0])
        """
    ),
]

# ------------------------------------------------------------------------------------------
# 03 -- PINQ's classics, with plots
# ------------------------------------------------------------------------------------------
CLASSICS = [
    md(
        """
        # PINQ's classics, with plots

        McSherry's PINQ paper (SIGMOD 2009) showed that a handful of stable transformations and
        noisy aggregations express real analyses. This notebook runs two of its examples with
        pinqpy and plots what the noise does:

        1. the **degree histogram** of a graph (GroupBy, then Partition);
        2. **k-means** clustering (a noisy mean per cluster, per iteration);
        3. how the **error shrinks as epsilon grows**;
        4. the **budget spent per query**.

        The graph and the clusters are generated here, so we can compare every private answer
        with the truth. (With real data you would not have the truth: that is the point.) The
        data generators are seeded, so the data is the same on every run; the privacy noise is
        fresh every run.
        """
    ),
    code(
        """
        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd
        import pinqpy as pq
        from pinqpy.demo import PUMS_KEYS, load_pums

        plt.rcParams.update({"figure.figsize": (8, 4), "figure.dpi": 90})

        budget = pq.Budget(epsilon=2.0)    # one budget for sections 1 and 2
        print(budget)
        """
    ),
    md(
        """
        ## 1. The degree histogram of a random graph

        The private data is a list of directed edges; each edge is one privacy unit. A node's
        out-degree is its number of edges; the histogram counts the nodes of each degree.

        In pinqpy that is `groupby("src").agg(degree="COUNT(*)")` (one row per node, stability 2)
        followed by `partition("degree", keys=0..29)` and one noisy count per degree. Removing
        an edge moves one node from one bar to the next, which is exactly what stability 2 pays
        for: counting at epsilon 0.1 charges 0.2.
        """
    ),
    code(
        """
        rng = np.random.default_rng(2009)
        n_nodes, n_edges = 1_000, 8_000
        edges = pd.DataFrame({"src": rng.integers(0, n_nodes, n_edges),
                              "dst": rng.integers(0, n_nodes, n_edges)})

        graph = pq.PrivateFrame(edges, budget)
        degrees = graph.groupby("src").agg(degree="COUNT(*)")
        print("stability of the degree table:", degrees.stability)

        keys = list(range(30))
        noisy_hist = degrees.partition("degree", keys=keys).count(epsilon=0.1)
        print("charged:", budget.spent.epsilon)

        true_hist = edges.groupby("src").size().value_counts().reindex(keys, fill_value=0)
        """
    ),
    code(
        """
        noisy = noisy_hist.to_numpy()
        low, high = noisy_hist.ci(0.95).T.to_numpy()
        x = np.arange(len(keys))
        fig, ax = plt.subplots()
        ax.bar(x - 0.2, true_hist.to_numpy(), width=0.4, label="true", color="#9e9e9e")
        ax.bar(x + 0.2, noisy, width=0.4, label="noisy (epsilon 0.1)", color="#e07b39",
               yerr=[noisy - low, high - noisy], capsize=2, error_kw={"lw": 0.8})
        ax.axhline(0, color="black", lw=0.5)
        ax.set(xlabel="out-degree", ylabel="number of nodes",
               title="Degree histogram: true vs differentially private (95% intervals)")
        ax.legend()
        plt.show()
        """
    ),
    md(
        """
        Each bar gets Laplace noise of scale 1/0.1 = 10 nodes, whatever its height: the tall
        bars in the middle are recovered well, the near-empty tails are mostly noise (and may be
        negative; clip or smooth them as post-processing, which is free). The bar at 0 is empty
        in truth: a node with no outgoing edge has no row to group.

        ## 2. k-means on three clusters

        PINQ's k-means: given the current centres (public), label each point with its nearest
        centre (a stable `assign`), partition by that label, and take a noisy mean of each
        coordinate in each part. Partitioning makes one iteration cost epsilon per coordinate,
        not per cluster: 2 × 0.1 = 0.2 per iteration for 2-D points, 1.0 for five iterations.

        The 6,000 points are 2-D, in three Gaussian clusters, with declared bounds [-10, 10] on
        each coordinate. The starting centres are a rough public guess.
        """
    ),
    code(
        """
        rng = np.random.default_rng(7)
        true_centres = np.array([[-4.0, -3.0], [3.0, 4.0], [4.5, -4.0]])
        points = pd.DataFrame(
            np.vstack([rng.normal(c, 1.3, size=(2_000, 2)) for c in true_centres]),
            columns=["x", "y"],
        )
        start = np.array([[-1.0, 0.0], [0.0, 2.0], [2.0, -1.0]])

        def nearest_centre(centres):
            \"\"\"A SQL expression: the index of the centre nearest to (x, y).\"\"\"
            d = [f"POWER(x - ({cx:.6f}), 2) + POWER(y - ({cy:.6f}), 2)"
                 for cx, cy in centres.tolist()]
            return (f"CASE WHEN {d[0]} <= {d[1]} AND {d[0]} <= {d[2]} THEN 0 "
                    f"WHEN {d[1]} <= {d[2]} THEN 1 ELSE 2 END")

        private_points = pq.PrivateFrame(points, budget, bounds={"x": (-10, 10), "y": (-10, 10)})

        centres, path = start, [start]
        for _ in range(5):
            labelled = private_points.assign(cluster=nearest_centre(centres))
            parts = labelled.partition("cluster", keys=[0, 1, 2])
            centres = np.column_stack([parts.mean(c, epsilon=0.1).to_numpy() for c in ("x", "y")])
            path.append(centres)
        path = np.array(path)
        print("budget after k-means:", budget)

        # the same five iterations without privacy, for comparison
        exact = start
        for _ in range(5):
            label = np.argmin(((points.to_numpy()[:, None, :] - exact[None]) ** 2).sum(-1), axis=1)
            exact = np.array([points.to_numpy()[label == k].mean(axis=0) for k in range(3)])

        pd.DataFrame({"private x": path[-1][:, 0], "private y": path[-1][:, 1],
                      "non-private x": exact[:, 0], "non-private y": exact[:, 1],
                      "true x": true_centres[:, 0], "true y": true_centres[:, 1]}).round(2)
        """
    ),
    code(
        """
        fig, ax = plt.subplots(figsize=(6.5, 6))
        ax.scatter(points["x"], points["y"], s=2, alpha=0.15, color="#607d8b", label="points")
        for k in range(3):
            ax.plot(path[:, k, 0], path[:, k, 1], "-o", ms=3, color="#e07b39", lw=1,
                    label="private centres, by iteration" if k == 0 else None)
        ax.scatter(path[-1][:, 0], path[-1][:, 1], s=120, marker="*", color="#d84315", zorder=3,
                   label="private centres, final")
        ax.scatter(exact[:, 0], exact[:, 1], s=90, marker="s", facecolors="none",
                   edgecolors="black", zorder=3, label="non-private k-means")
        ax.scatter(true_centres[:, 0], true_centres[:, 1], s=90, marker="x", color="#1565c0",
                   zorder=3, label="true centres")
        ax.set(xlabel="x", ylabel="y", title="k-means (k = 3), 5 iterations at epsilon 0.2 each")
        ax.set_aspect("equal")
        ax.legend(loc="upper left", fontsize=8)
        plt.show()
        """
    ),
    md(
        """
        The private centres land close to the non-private ones. A noisy mean spends half its
        epsilon on a sum and half on a count; here the sum's noise has scale 10 / 0.05 = 200
        (half the bound width over the epsilon), and dividing by about 2,000 points leaves an
        error of order 0.1 per coordinate. Fewer points or a smaller epsilon would show the
        noise: the error of a mean grows like (bound width) / (epsilon × cluster size).

        ## 3. The error shrinks as epsilon grows

        How accurate is a noisy count? Here: the 16 education counts of the PUMS sample (one
        `partition("educ").count(epsilon)` each time), repeated 20 times at each of eight
        epsilons, each repeat on a fresh budget (the answer cache would otherwise give back the
        same noisy answer). We compare with the true counts, which this demonstration may look
        at.

        A count gets discrete Laplace noise of scale 1/epsilon (integer noise, so the count
        stays an integer). Its mean absolute value is 1/sinh(epsilon): practically 1/epsilon
        while epsilon is small, a line of slope -1 on log-log axes, and somewhat below it once
        epsilon nears 1, where the noise is often exactly 0.
        """
    ),
    code(
        """
        pums = load_pums()
        true_counts = (pums["educ"].value_counts()
                       .reindex(PUMS_KEYS["educ"], fill_value=0).to_numpy())
        epsilons = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
        repeats = 20

        mae = []
        for eps in epsilons:
            errors = []
            for _ in range(repeats):
                lab = pq.Budget(epsilon=eps)                     # a fresh budget per repeat
                educ = pq.PrivateFrame(pums, lab, keys=PUMS_KEYS).partition("educ")
                noisy = educ.count(epsilon=eps)
                errors.append(np.abs(noisy.to_numpy() - true_counts))
            mae.append(np.mean(errors))

        fig, ax = plt.subplots()
        ax.loglog(epsilons, mae, "o-", color="#e07b39",
                  label=f"mean |error| over {repeats} x 16 counts")
        grid = np.geomspace(epsilons[0], epsilons[-1], 100)
        ax.loglog(grid, 1 / np.sinh(grid), "-", color="black", lw=1,
                  label="expected: 1 / sinh(epsilon)")
        ax.loglog(grid, 1 / grid, ":", color="#607d8b", lw=1, label="1 / epsilon")
        ax.set(xlabel="epsilon", ylabel="mean absolute error (people)",
               title="Noisy counts: error against epsilon")
        ax.legend()
        plt.show()
        pd.DataFrame({"epsilon": epsilons, "mean |error|": np.round(mae, 2),
                      "1/sinh(epsilon)": np.round(1 / np.sinh(epsilons), 2)})
        """
    ),
    md(
        """
        Ten times the epsilon, a tenth of the error (while epsilon is small). At epsilon 0.01 a
        count is off by about 100 people on average, a tenth of the sample; at epsilon 1, by
        less than one.

        ## 4. The budget spent per query

        `budget.charges` lists every charge of the budget used in sections 1 and 2, in order:
        one of 0.2 for the degree histogram (epsilon 0.1 × stability 2), then ten of 0.1 for
        k-means (two coordinates × five iterations, each a single charge for all three clusters).
        """
    ),
    code(
        """
        charges = [(float(cost.epsilon), what) for cost, what in budget.charges]
        labels = ["degree\\nhistogram"] + [
            f"k-means\\nit {i // 2 + 1} {'xy'[i % 2]}" for i in range(len(charges) - 1)
        ]
        eps = np.array([c for c, _ in charges])

        fig, ax = plt.subplots(figsize=(9, 4))
        ax.bar(range(len(eps)), eps, color="#e07b39", label="charge of each query")
        ax.step(range(len(eps)), np.cumsum(eps), where="mid", color="black", label="spent so far")
        ax.axhline(float(budget.epsilon), color="#4caf50", ls="--", label="budget")
        ax.set_xticks(range(len(eps)), labels, fontsize=7)
        ax.set(ylabel="epsilon", title="Budget spent per query")
        ax.set_ylim(0, float(budget.epsilon) * 1.3)
        ax.legend(loc="upper left", ncol=3)
        plt.show()
        print(budget)
        """
    ),
    md(
        """
        The step line ends at 1.2 of the 2.0 budget: every charge exactly as planned, and the
        remaining 0.8 still available for further questions.
        """
    ),
]

# ------------------------------------------------------------------------------------------
# 04 -- serving analysts: a curator's server, an analyst's client
# ------------------------------------------------------------------------------------------
SERVING = [
    md(
        """
        # Serving analysts: a curator's server and an analyst who connects to it

        Inside one Python process, whoever holds a `PrivateFrame` could reach its rows through
        private attributes. PINQ's real setting has two parties: a **curator** who keeps the
        data and an **analyst** who may not be trusted. `pinqpy serve` is the curator's
        process; the analyst gets a URL and a token and asks the same questions (method
        chaining, SQL, `%%pinq` cells) over HTTP. Only noisy answers and public facts come
        back.

        This notebook plays both parts on one machine:

        1. the curator writes a server config for the bundled PUMS sample (1,000 people), makes
           a token for each analyst and starts the real server on 127.0.0.1;
        2. the analyst connects with `pq.connect`, asks in Python and in SQL, previews a query
           with `EXPLAIN`, and meets two refusals that charge nothing;
        3. a second analyst works in `%%pinq` cells after `%pinq connect`;
        4. the curator reads the ledger: every charge, and whose budget paid it;
        5. the curator turns on the dashboard and sees who spent what, and when;
        6. the server is shut down.

        Running it needs the server extra: `pip install '.[server]'` in pinqpy's clone.
        """
    ),
    md(
        """
        ## 1. The curator: a config, tokens, a server

        The config declares the table with its public facts (value bounds, category keys),
        the analysts with a budget each, and where the server keeps its ledger (every charge
        and every released answer, durable) and its token hashes. Relative paths are relative
        to the config file, so the curator's folder holds the data, the config and the ledger
        together. `port = 0` lets the server pick a free port; it prints the one it got.
        """
    ),
    code(
        """
        import atexit
        import json
        import os
        import re
        import shutil
        import signal
        import subprocess
        import sys
        import tempfile
        import textwrap
        import time
        import urllib.error
        import urllib.request
        from pathlib import Path

        import pinqpy as pq
        from pinqpy.demo import PUMS_PATH

        curator = Path(tempfile.mkdtemp(prefix="pinqpy-curator-"))   # the curator's folder
        atexit.register(shutil.rmtree, curator, ignore_errors=True)
        shutil.copy(PUMS_PATH, curator / "PUMS.csv")

        config = curator / "server.toml"
        config.write_text(\"\"\"\\
        [server]
        host = "127.0.0.1"
        port = 0                            # any free port
        ledger = "server.ledger.db"         # every charge and released answer
        tokens = "server.tokens.json"       # the analysts' token hashes, never the tokens

        [tables.pums]
        source = "csv"
        path = "PUMS.csv"
        bounds = { age = [0, 100], income = [0, 500000] }
        keys = { sex = [0, 1], married = [0, 1] }

        [analysts.alice]
        tables = ["pums"]
        budget = { epsilon = 1.0 }          # alice's own budget for the table

        [analysts.bob]
        tables = ["pums"]
        budget = { epsilon = 0.5 }          # bob's, separate from alice's
        \"\"\")
        print(config.read_text())
        """
    ),
    md(
        """
        `pinqpy serve CONFIG --add-analyst NAME` makes a random token for an analyst, prints it
        once and keeps only its SHA-256 hash. The curator hands each token to its analyst; here
        they travel in environment variables, so no token is ever printed in this notebook
        (`pq.connect` and `%pinq connect` read one from `PINQPY_TOKEN` by default).
        """
    ),
    code(
        """
        pinqpy = [sys.executable, "-m", "pinqpy"]      # the `pinqpy` command of this Python

        for analyst in ("alice", "bob"):
            made = subprocess.run([*pinqpy, "serve", str(config), "--add-analyst", analyst],
                                  capture_output=True, text=True, check=True)
            token = re.search(r"^token: (\\S+)$", made.stdout, re.M).group(1)
            os.environ[f"{analyst.upper()}_TOKEN"] = token
            print(f"{analyst}: a token of {len(token)} characters, in ${analyst.upper()}_TOKEN")

        print("the tokens file holds hashes only:",
              sorted(json.loads((curator / "server.tokens.json").read_text())))
        """
    ),
    md(
        """
        Now the server itself, as a subprocess (in real life: a service on the curator's
        machine). The cell waits until the banner names the address and the server answers a
        request without a token with 401. Should a later cell fail before the last one stops
        the server, it still does not outlive this kernel: `atexit` stops it when the kernel's
        Python exits, and Jupyter ends a kernel's child processes when it shuts the kernel
        down.
        """
    ),
    code(
        """
        log = (curator / "server.log").open("w")
        server = subprocess.Popen([*pinqpy, "serve", str(config)], stdout=log,
                                  stderr=subprocess.STDOUT, text=True)


        def stop_server():
            \"\"\"Stop the server as Ctrl-C does (firmly if need be); safe to call twice.\"\"\"
            if server.poll() is None:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
            log.close()


        atexit.register(stop_server)

        deadline = time.monotonic() + 30
        url = None
        while url is None:
            assert server.poll() is None, (curator / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start in 30 s"
            found = re.search(r"^listening on (\\S+)$", (curator / "server.log").read_text(), re.M)
            if found:
                try:
                    urllib.request.urlopen(found.group(1) + "/v1/session", timeout=2)
                except urllib.error.HTTPError as err:
                    if err.code == 401:         # up, and asking for a token
                        url = found.group(1)
                except OSError:
                    pass
            time.sleep(0.1)

        print((curator / "server.log").read_text().replace(str(curator), "<curator's folder>"))
        """
    ),
    md(
        """
        ## 2. The analyst: `pq.connect`

        Alice has the URL and her token, nothing else. `pq.connect` checks both at once and
        reads what the curator grants her: the table names, their public facts, her budget.
        """
    ),
    code(
        """
        s = pq.connect(url, token=os.environ["ALICE_TOKEN"])
        print(s)
        print("tables:", s.tables)
        print("budget:", s.budget)
        s.describe("pums")
        """
    ),
    md(
        """
        `s.table("pums")` is the frame her queries start from. It is transformed exactly as a
        local `PrivateFrame` (the plan is built on her machine, as data), and each aggregation
        travels to the server, which rebuilds the plan against its own catalog, recomputes the
        stability, charges her budget before reading the data, and sends back the noisy answer.
        Results carry their intervals, as locally. Here: 0.1 for a count, 0.2 for a mean per
        sex (a partition pays once for both parts).
        """
    ),
    code(
        """
        people = s.table("pums")
        print(repr(people))

        seniors = people.where("age >= 65").count(epsilon=0.1)
        print("\\naged 65 or over:", repr(seniors), " 95% CI", seniors.ci(0.95))

        income = people.where("age >= 18").partition("sex").mean(
            "income", epsilon=0.2, bounds=(0, 150_000))
        print("\\nmean income by sex, adults (incomes clamped to [0, 150,000]):")
        print(income.round(0))
        print("\\nremaining:", s.budget.remaining)
        """
    ),
    md(
        """
        SQL goes to the server as text and is parsed and compiled again there. The answer is a
        `NoisyFrame` (a DataFrame whose noisy columns have intervals: `by_married.ci("n")`);
        `epsilon=` is the total the query charges, 0.3 here, split over its three noisy
        measurements.
        """
    ),
    code(
        """
        by_married = s.sql(
            "SELECT married, COUNT(*) AS n, AVG(age) AS mean_age FROM pums GROUP BY married",
            epsilon=0.3,
        )
        print("remaining:", s.budget.remaining)
        by_married
        """
    ),
    md(
        """
        ### Preview first: `EXPLAIN` charges nothing

        `s.explain(query, epsilon=...)` shows the plan, each operator's stability, the
        mechanisms, their noise and the total charge, without reading data or charging.
        """
    ),
    code(
        """
        question = (
            "SELECT COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income FROM pums "
            "WHERE educ >= 13"
        )
        print(s.explain(question, epsilon=0.2))
        print("remaining:", s.budget.remaining)
        """
    ),
    md(
        """
        ### Refusals charge nothing

        A mean of a column without declared bounds cannot be calibrated, and a query larger
        than what is left does not fit. Both are refused by the server before any data is read:
        the remaining budget stays at 0.4, and the errors are the same classes with the same
        messages as locally.
        """
    ),
    code(
        """
        before = s.budget.remaining
        attempts = {
            "mean of educ (no bounds)": lambda: people.mean("educ", epsilon=0.1),
            "a count at epsilon 0.5": lambda: people.count(epsilon=0.5),
        }
        for label, attempt in attempts.items():
            try:
                attempt()
            except pq.PinqError as err:
                print(f"{label}: {type(err).__name__}: {err}\\n")
        print("remaining before:", before, " after:", s.budget.remaining)
        """
    ),
    md(
        """
        ### What crosses the wire

        Alice's frame holds no rows: asking for them is refused on her side, and the server
        has no route that would send any. Below is the whole HTTP exchange of the SQL query
        above, sent by hand: a JSON request with the query, and a JSON answer holding the
        noisy values with what `.ci()` needs (the mechanisms and their noise scales). It is the
        same question as before, so the server answers from its cache and charges nothing.
        """
    ),
    code(
        """
        try:
            people.head()
        except pq.PrivacyError as err:
            print("PrivacyError:", err)

        sent = json.dumps({"query": "SELECT married, COUNT(*) AS n, AVG(age) AS mean_age "
                                    "FROM pums GROUP BY married", "epsilon": 0.3}).encode()
        request = urllib.request.Request(
            url + "/v1/sql", data=sent,
            headers={"Authorization": "Bearer " + os.environ["ALICE_TOKEN"],
                     "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            body = response.read()
        print(f"\\nsent, {len(sent)} bytes:")
        print(sent.decode())
        print(f"\\nreceived, {len(body)} bytes:")
        print(textwrap.fill(body.decode(), 100, break_on_hyphens=False))
        print("\\nremaining:", s.budget.remaining)
        """
    ),
    md(
        """
        Alice can read her own audit trail (only hers): one line per charge, 0.1 + 0.2 + 0.3.
        """
    ),
    code(
        """
        s.audit()[["query_id", "budget", "epsilon", "description"]]
        """
    ),
    md(
        """
        ## 3. The notebook magic against the server

        Bob works in SQL cells. `%pinq connect URL` sends later `%%pinq` cells to the server;
        the token comes from `PINQPY_TOKEN`, or from the variable `--token-env` names, never
        from the line (a magic's line is saved in the notebook and in IPython's history).
        IPython fills in `{url}` from the notebook's variables.
        """
    ),
    code(
        """
        %load_ext pinqpy
        %pinq connect {url} --token-env BOB_TOKEN
        %pinq status
        """
    ),
    code(
        """
        %%pinq -e 0.2
        SELECT sex, COUNT(*) AS n, AVG(income, 0, 150000) AS mean_income
        FROM pums
        WHERE age >= 18
        GROUP BY sex
        """
    ),
    md(
        """
        Bob's budget is his own: 0.5, of which 0.2 is now spent. Alice's is untouched by him.
        """
    ),
    code(
        """
        %%pinq
        SHOW BUDGET
        """
    ),
    code(
        """
        %pinq disconnect
        """
    ),
    md(
        """
        ## 4. The curator reads the ledger

        The ledger is a SQLite file in the curator's folder, never visible to an analyst. Each
        budget is named after whoever draws on it (`analyst:<name>/<table>`), and each charge
        is on record with its plan and time. `Ledger(path, verify=False)` opens the file
        read-only, so the curator can inspect it while the server runs; `check()` verifies
        that every budget's spent equals the exact sum of its charges.

        Expected: alice spent 0.6 of 1.0 in three charges, bob 0.2 of 0.5 in one; the
        `EXPLAIN`, the refusals and the repeated question are not there.

        From a terminal, `pinqpy ledger server.ledger.db` prints the same per analyst and
        table (budget, spent, remaining, queries, last query time), `--format csv` or `json`
        for a script and `--charges` for every charge. Section 5 shows the same table as the
        server's dashboard gives it.
        """
    ),
    code(
        """
        from pinqpy.accounting.ledger import Ledger

        with Ledger(curator / "server.ledger.db", verify=False) as ledger:
            budgets = ledger.budgets()
            charges = ledger.charges()
            problems = ledger.check()

        print("problems found:", problems)
        budgets[["budget", "total_epsilon", "spent_epsilon"]]
        """
    ),
    code(
        """
        charges[["query_id", "budget", "epsilon", "description", "has_answer"]]
        """
    ),
    code(
        """
        # The same from a terminal: pinqpy ledger PATH (read-only; the server keeps running).
        import subprocess
        import sys

        shown = subprocess.run(
            [sys.executable, "-m", "pinqpy", "ledger", str(curator / "server.ledger.db")],
            capture_output=True, text=True, check=True,
        )
        print(shown.stdout)
        """
    ),
    md(
        """
        ## 5. Who spent what: the curator's dashboard

        The server also shows the curator who spent what: a dashboard page, its JSON and a
        request log. The dashboard opens with a token of the curator's own, never an
        analyst's. `pinqpy serve CONFIG --curator-token` makes one and prints the line that
        holds its hash, for the config's `[server]` section; the server reads it at start, so
        the curator restarts it. Nothing is lost: the budgets and released answers are in the
        ledger.
        """
    ),
    code(
        """
        made = subprocess.run([*pinqpy, "serve", str(config), "--curator-token"],
                              capture_output=True, text=True, check=True)
        os.environ["CURATOR_TOKEN"] = re.search(r"^token: (\\S+)$", made.stdout, re.M).group(1)
        line = re.search(r"^curator_token_sha256 = .*$", made.stdout, re.M).group(0)
        config.write_text(config.read_text().replace("[server]\\n", f"[server]\\n{line}\\n", 1))
        print("added to [server]:", line[:40] + "...")

        stop_server()
        log = (curator / "server.log").open("a")      # the same log, the new server's after it
        server = subprocess.Popen([*pinqpy, "serve", str(config)], stdout=log,
                                  stderr=subprocess.STDOUT, text=True)
        deadline, url = time.monotonic() + 30, None
        while url is None:
            assert server.poll() is None and time.monotonic() < deadline, "no server"
            text = (curator / "server.log").read_text()
            banners = re.findall(r"^listening on (\\S+)$", text, re.M)
            if len(banners) == 2:                      # the first server's, then this one's
                try:
                    urllib.request.urlopen(banners[1] + "/v1/session", timeout=2)
                except urllib.error.HTTPError as err:
                    url = banners[1] if err.code == 401 else None
                except OSError:
                    pass
            time.sleep(0.1)
        print(re.findall(r"^dashboard: .*$", (curator / "server.log").read_text(), re.M)[-1])
        """
    ),
    md(
        """
        The page (`/curator`) is for a browser: the curator signs in with the token and sees
        one row per analyst and table, with a bar per budget and a plot of spending over
        time. A script reads the same from `GET /v1/curator/summary` with the curator's
        token in the header. Expected: alice spent 0.6 of 1.0 in three charged queries, bob
        0.2 of 0.5 in one.
        """
    ),
    code(
        """
        from fractions import Fraction

        import pandas as pd


        def curator_get(path, token=None):
            token = token or os.environ["CURATOR_TOKEN"]
            asked = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(asked, timeout=30) as answer:
                return answer.read().decode()


        summary = json.loads(curator_get("/v1/curator/summary"))
        pd.DataFrame(
            {
                "analyst": r["analyst"], "table": r["table"],
                "total ε": float(Fraction(r["total"]["epsilon"])),
                "spent ε": float(Fraction(r["spent"]["epsilon"])),
                "remaining ε": float(Fraction(r["remaining"]["epsilon"])),
                "used": f"{r['share']:.0%}", "queries": r["queries"],
                "last query (UTC)": r["last_query"][:19].replace("T", " "),
            }
            for r in summary["rows"]
        )
        """
    ),
    md(
        """
        The page's plot is inline SVG that pinqpy writes (no script); here it is, taken from
        the page. An analyst's token opens neither the page nor its JSON: 403.
        """
    ),
    code(
        """
        from IPython.display import SVG, display

        page = curator_get("/curator")
        display(SVG(re.search(r'<svg id="spending".*?</svg>', page, re.S).group(0)))

        try:
            curator_get("/v1/curator/summary", token=os.environ["ALICE_TOKEN"])
        except urllib.error.HTTPError as err:
            print(err.code, json.loads(err.read())["error"]["message"])
        """
    ),
    md(
        """
        The request log has one JSON line per request (here on the server's standard error,
        in `server.log`; `[server] log = "file"` puts it in a file): who asked, the endpoint,
        the status, the milliseconds, the tables charged (or refused for want of budget) and
        what was charged. It never holds a query's text, a literal, an answer or a token. The durations depend on the data, so the log is the curator's
        own. The analysts' questions (their POSTs; each also asked for their budget, free):
        """
    ),
    code(
        """
        lines = [json.loads(x) for x in (curator / "server.log").read_text().splitlines()
                 if x.startswith("{")]
        asked = [x for x in lines if x["role"] == "analyst" and x["method"] == "POST"]
        requests = pd.DataFrame(asked)
        requests["charged ε"] = [
            ", ".join(c.get("epsilon", "") for c in x) if x else "" for x in requests["charges"]
        ]
        requests["tables"] = [", ".join(x) for x in requests["tables"]]
        requests[["analyst", "method", "endpoint", "status", "ms", "tables", "charged ε"]]
        """
    ),
    md(
        """
        ## 6. Shutting down

        The analysts' budgets and the answers already released live in the ledger, so a server
        started again with the same config picks up where this one stopped: a question asked
        again is answered free, and no budget starts over. Here the demonstration ends: close
        the session, stop the server and remove the curator's temporary folder.
        """
    ),
    code(
        """
        s.close()
        stop_server()
        print("server stopped:", server.poll() is not None)
        shutil.rmtree(curator)
        print("curator's folder removed:", not curator.exists())
        """
    ),
]

# ------------------------------------------------------------------------------------------
# 05 -- one analysis on five engines
# ------------------------------------------------------------------------------------------
FIVE_ENGINES = [
    md(
        """
        # One analysis, five engines: the same charges everywhere

        pinqpy runs where the data already lives: a pandas DataFrame, a DuckDB database, a
        Spark DataFrame, a Polars lazy query or a PostgreSQL table. Each engine computes the
        few exact aggregates a query needs (in DuckDB's, Spark's, Polars' or PostgreSQL's own
        SQL or lazy engine), and pinqpy adds the noise afterwards, in Python. The stabilities
        and charges come from the query plan before any row is read, so **the engine cannot
        change what a query costs**.

        This notebook runs one analysis of the bundled PUMS sample (1,000 Californians, US
        Census, public domain) on all five engines and shows:

        1. every query charges exactly the same epsilon on every engine;
        2. with the noise switched off (a test hook, used here only to compare engines), every
           engine computes exactly the same answer;
        3. the noisy answers, each with its 95% interval, and how long each engine took.

        An engine that is not installed is skipped, and its output says so. In pinqpy's
        clone, `pip install '.[duckdb,spark,polars,postgres]'` installs them all (Spark also
        needs Java 17 or newer, PostgreSQL its server programs). The noise is fresh every
        run; the charges are exact.
        """
    ),
    code(
        """
        import atexit
        import contextlib
        import importlib.util
        import numbers
        import os
        import shutil
        import tempfile
        import time
        from pathlib import Path

        import pandas as pd
        import pinqpy as pq
        from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums, postgres_server

        # The test hooks (pq.testing.no_noise below) work only with this switch. It is on here
        # to compare the engines' exact aggregates; never set it for real releases.
        os.environ["PINQPY_TESTING"] = "1"
        IN_CI = bool(os.environ.get("CI"))  # in CI every engine must be there


        def skip(engine: str, why: str) -> None:
            if IN_CI:
                raise RuntimeError(f"{engine} is missing in CI: {why}")
            print(f"skipping {engine}: {why}")


        # The curator's data. To show user-level privacy as well, pretend the rows come from a
        # panel of 600 people: row i belongs to person i % 600, so 400 people have two rows.
        data = load_pums().assign(person=lambda d: d.index % 600)
        folder = Path(tempfile.mkdtemp(prefix="pinqpy-05-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # should a cell fail first
        PARQUET = folder / "pums.parquet"  # where DuckDB, Spark and Polars read it from
        data.to_parquet(PARQUET)

        # Each engine: how to wrap its copy of the table, given a budget and the public facts.
        engines = {"pandas": lambda budget, **facts: pq.PrivateFrame(data, budget, **facts)}
        print(f"pinqpy {pq.__version__}; columns {list(data.columns)}; data in {PARQUET.name}")
        """
    ),
    md(
        """
        ## The analysis

        Six questions, one budget of epsilon = 1 per engine. The charge of each is
        `epsilon × stability`, known before any row is read:

        | question | call | charge |
        |---|---|---|
        | people 65 or older | `where("age >= 65").count(epsilon=0.1)` | 0.1 |
        | mean income (declared bounds 0 to 500,000) | `mean("income", epsilon=0.1)` | 0.1 |
        | median age, with a value interval | `median("age", epsilon=0.2, ci=True)` | 0.2 |
        | mean income of each sex | `partition("sex").mean("income", epsilon=0.2)` | 0.2 |
        | panel rows, ≤ 2 per person | `bound_contributions(max_rows=2).count(0.1)` | 2 × 0.1 |
        | under 65s, count and mean income by `married` | SQL `GROUP BY`, `epsilon=0.2` | 0.2 |

        The last one is SQL over a table registered in a `pq.Session`; the user-level count
        wraps the same table with `privacy_unit="person"` (each person's rows are one unit).
        """
    ),
    code(
        """
        SQL = (
            "SELECT married, COUNT(*) AS n, AVG(income) AS mean_income "
            "FROM people WHERE age < 65 GROUP BY married"
        )


        def questions(people, panel, session):
            \"\"\"The analyst's questions, in order: (name, the call that asks it).\"\"\"
            return [
                ("count: age >= 65", lambda: people.where("age >= 65").count(epsilon=0.1)),
                ("mean income", lambda: people.mean("income", epsilon=0.1)),
                ("median age", lambda: people.median("age", epsilon=0.2, ci=True)),
                ("mean income by sex (0 | 1)",
                 lambda: people.partition("sex").mean("income", epsilon=0.2)),
                ("panel rows, <= 2 per person",
                 lambda: panel.bound_contributions(max_rows=2).count(epsilon=0.1)),
                ("SQL: n, mean income by married (0 | 1)", lambda: session.sql(SQL, epsilon=0.2)),
            ]


        def analyse(wrap) -> pd.DataFrame:
            \"\"\"Ask every question on one engine: each one's charge, answer and seconds.\"\"\"
            budget = pq.Budget(epsilon=1.0)
            people = wrap(budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
            panel = wrap(budget, privacy_unit="person")
            session = pq.Session()
            session.register("people", people)
            rows = []
            for name, ask in questions(people, panel, session):
                before, started = budget.spent.epsilon, time.perf_counter()
                answer = ask()
                rows.append({"question": name, "charge": budget.spent.epsilon - before,
                             "answer": answer, "seconds": time.perf_counter() - started})
            assert budget.spent.epsilon == 1, budget.spent  # the whole budget, exactly
            return pd.DataFrame(rows).set_index("question")


        print("questions:", [name for name, _ in questions(None, None, None)])
        """
    ),
    md(
        """
        ## The engines

        DuckDB reads the parquet file into a table of its own database; Polars scans the
        file lazily; Spark (a local session on two cores, started once) reads it as a Spark
        DataFrame; PostgreSQL gets a table of its own, copied in with `COPY`. pinqpy reads
        each where it lies: only the exact aggregates come back to Python.
        """
    ),
    code(
        """
        if importlib.util.find_spec("duckdb") is None:
            skip("DuckDB", "the duckdb extra is not installed")
        else:
            import duckdb

            con = duckdb.connect()  # in memory; a database file works the same way
            con.execute(f"CREATE TABLE pums AS SELECT * FROM read_parquet('{PARQUET}')")
            engines["DuckDB"] = lambda budget, **facts: pq.PrivateFrame(
                "pums", budget, connection=con, **facts)

        if importlib.util.find_spec("polars") is None:
            skip("Polars", "the polars extra is not installed")
        else:
            import polars as pl

            engines["Polars"] = lambda budget, **facts: pq.PrivateFrame(
                pl.scan_parquet(PARQUET), budget, **facts)
        print({name: wrap(pq.Budget(1.0)).engine for name, wrap in engines.items()})
        """
    ),
    code(
        """
        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            skip("Spark", "it needs the spark extra and Java 17 or newer")
        else:
            import warnings

            from pyspark.sql import SparkSession

            # pyspark warns at start-up about pandas 3, which pinqpy's Spark suites run with.
            warnings.filterwarnings("ignore", "PySpark does not yet fully support", FutureWarning)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver binds there anyway
            started = time.perf_counter()
            spark = (
                SparkSession.builder.master("local[2]").appName("pinqpy-05")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.driver.host", "127.0.0.1")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            pums_sdf = spark.read.parquet(str(PARQUET))
            engines["Spark"] = lambda budget, **facts: pq.PrivateFrame(pums_sdf, budget, **facts)
            print(f"Spark {spark.version} started in {time.perf_counter() - started:.0f} s")
        """
    ),
    md(
        """
        PostgreSQL needs a server. With `PINQPY_POSTGRES_URL` set (a connection string),
        the notebook uses that server and makes a table `pinqpy_demo_pums` there, dropped at
        the end. Without it, `pinqpy.demo.postgres_server()` starts a throwaway one: `initdb`
        in a temporary folder, listening on 127.0.0.1 only, stopped at the end of the
        notebook.
        """
    ),
    code(
        """
        servers = contextlib.ExitStack()  # the throwaway server, if any: closed at the end
        atexit.register(servers.close)  # or when the kernel exits, should a cell fail first
        url = os.environ.get("PINQPY_POSTGRES_URL")
        try:
            import psycopg

            if url is None:
                url = servers.enter_context(postgres_server())
                print("a throwaway PostgreSQL server on 127.0.0.1 (pinqpy.demo.postgres_server)")
            else:
                print("the PostgreSQL server of PINQPY_POSTGRES_URL")
        except ImportError:
            skip("PostgreSQL", "the postgres extra (psycopg 3) is not installed")
        except pq.PinqError as err:
            skip("PostgreSQL", str(err))
        else:
            columns = ", ".join(f"{c} {'double precision' if c == 'income' else 'int'}"
                                for c in data.columns)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS pinqpy_demo_pums")
                conn.execute(f"CREATE TABLE pinqpy_demo_pums ({columns})")
                with conn.cursor().copy(f"COPY pinqpy_demo_pums ({', '.join(data.columns)}) "
                                        "FROM STDIN") as copy:
                    for row in data.itertuples(index=False):
                        copy.write_row(tuple(row))
                print(conn.execute("SHOW server_version").fetchone()[0], "| table:", columns)
            engines["PostgreSQL"] = lambda budget, **facts: pq.PrivateFrame.from_sql(
                url, "pinqpy_demo_pums", budget, **facts)
        """
    ),
    md(
        """
        ## 1. The charges

        The analysis runs once on each engine, each with its own budget of 1. (In practice a
        table lives in one engine: five releases from copies of the same people would add up
        to epsilon = 5.) The charges are `Fraction`s, compared exactly.
        """
    ),
    code(
        """
        runs = {name: analyse(wrap) for name, wrap in engines.items()}
        charges = pd.DataFrame({name: run["charge"] for name, run in runs.items()})
        charges.loc["total"] = charges.sum()
        same = charges.apply(lambda row: len(set(row)) == 1, axis=1)
        if not same.all():
            raise AssertionError(f"the engines charged differently:\\n{charges[~same]}")
        charges.astype(str).assign(**{"the same on every engine": same})
        """
    ),
    md(
        """
        ## 2. The exact answers, with the noise off

        `pq.testing.no_noise()` makes every mechanism release its exact value (the charges
        are made as usual). Run again on each engine with a fresh budget, the analysis gives
        the same answer everywhere, to the last bit: the counts, the exact grid sums behind
        the means, the median's choice among the candidate values, the partition and the SQL
        groups.
        """
    ),
    code(
        """
        def plain(answer):
            \"\"\"An answer as plain Python values, to compare engines exactly.\"\"\"
            if isinstance(answer, pd.DataFrame):  # SQL: one tuple per group
                return tuple(tuple(row) for row in answer.itertuples(index=False))
            if isinstance(answer, pd.Series):  # a partition: one value per key
                return tuple(answer.items())
            return int(answer) if isinstance(answer, int) else float(answer)


        def number(x) -> str:
            return f"{x:,}" if isinstance(x, numbers.Integral) else f"{x:,.1f}"


        def shown(value) -> str:
            \"\"\"An exact answer as text; groups in the question's order, without their keys.\"\"\"
            if isinstance(value, tuple):
                return " | ".join(", ".join(number(x) for x in group[1:]) for group in value)
            return number(value)


        with pq.testing.no_noise():
            exact = {name: analyse(wrap) for name, wrap in engines.items()}
        answers = pd.DataFrame({name: run["answer"].map(plain) for name, run in exact.items()})
        agree = answers.apply(lambda row: len(set(row)) == 1, axis=1)
        if not agree.all():
            raise AssertionError(f"the engines' exact answers differ:\\n{answers[~agree]}")
        answers.map(shown).assign(**{"the same on every engine": agree})
        """
    ),
    md(
        """
        ## 3. The noisy answers and their accuracy

        These are what an analyst sees: each noisy value with its 95% interval (a count's
        interval is ± its noise; a mean's comes from the noise of its sum and count; the
        median's is in value space, paid for by part of its epsilon). The noise is drawn
        afresh for every release, so the engines' answers differ by the noise alone.
        """
    ),
    code(
        """
        def with_interval(value, low, high) -> str:
            return f"{float(value):,.0f} [{float(low):,.0f}, {float(high):,.0f}]"


        def noisy(answer) -> str:
            if isinstance(answer, pd.DataFrame):  # SQL: each noisy column of each group
                ci = answer.ci()
                cells = [[with_interval(answer.at[i, c], *ci.loc[i, c]) for c in answer.accuracy]
                         for i in answer.index]
                return " | ".join(", ".join(row) for row in cells)
            if isinstance(answer, pd.Series):
                ci = answer.ci(0.95)
                return " | ".join(with_interval(v, *ci.loc[k]) for k, v in answer.items())
            return with_interval(answer, *answer.ci(0.95))


        pd.set_option("display.max_colwidth", None)
        pd.DataFrame({name: run["answer"].map(noisy) for name, run in runs.items()})
        """
    ),
    md(
        """
        How long each engine took for the six noisy queries, in seconds. Indicative only:
        1,000 rows, a machine that may be busy, and each engine's fixed cost per query
        (Spark schedules a job for each, and its first one warms the JVM up; PostgreSQL is one
        round trip per aggregate). The speed of each engine on 10^6 to 10^8 rows is measured
        in `benchmarks/RESULTS.md`.
        """
    ),
    code(
        """
        pd.Series({name: run["seconds"].sum() for name, run in runs.items()},
                  name="seconds (indicative)").round(2).to_frame().T
        """
    ),
    md(
        """
        ## Clean up

        Stop Spark, drop the PostgreSQL table (from a server of `PINQPY_POSTGRES_URL`) or
        stop the throwaway server, and remove the parquet file's folder.
        """
    ),
    code(
        """
        if "Spark" in engines:
            spark.stop()
        if "PostgreSQL" in engines and os.environ.get("PINQPY_POSTGRES_URL"):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP TABLE pinqpy_demo_pums")
        servers.close()
        shutil.rmtree(folder)
        print("stopped and removed:", ", ".join(engines), "| folder gone:", not folder.exists())
        """
    ),
]

# ------------------------------------------------------------------------------------------
# 06 -- marginals
# ------------------------------------------------------------------------------------------
MARGINALS = [
    md(
        """
        # Consistent tables and synthetic microdata from noisy marginals

        A statistical office rarely publishes one count: it publishes cross-tabulations that
        must agree with each other. Measured as separate `GROUP BY`s, the noisy table of age by
        sex and the noisy table of sex by employment disagree on the sex totals, small cells
        come out negative, and a table nobody measured cannot be had at all.

        `frame.marginals(...)` measures several tables together over one public domain and
        fits one model to all of them (Private-PGM): every table read off it is non-negative
        and consistent with the others, unmeasured ones included, and the model draws a
        synthetic file. Reading tables and drawing rows is post-processing: free, and it reads
        no private data. See `docs/marginals.md`.

        The data is the Eurostat Labour Force Survey sample that OpenDP's tutorials use
        (France, 50,000 rows; source: Eurostat), four of its columns, as shipped in
        `tests/data`: `SEX` (1 male, 2 female), `AGE` (banded), `HWUSUAL` (usual weekly hours,
        99 = not applicable) and `ILOSTAT` (1 employed, 2 unemployed, 3 inactive, 9 a child).
        The noise is fresh every run; the charges are exact.
        """
    ),
    code(
        """
        import itertools
        from fractions import Fraction
        from pathlib import Path

        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd
        import pinqpy as pq

        plt.rcParams.update({"figure.figsize": (9, 4), "figure.dpi": 90})
        PATH = Path("../tests/data/eurostat_lfs_fr_4cols.csv")
        if not PATH.exists():
            raise FileNotFoundError(
                f"this notebook needs the LFS extract {PATH.resolve()}, which is absent: "
                "see tests/data/README.md for where it comes from"
            )
        lfs = pd.read_csv(PATH)  # the curator's copy: the analyst sees only what is released
        COLUMNS = ["SEX", "AGE", "HWUSUAL", "ILOSTAT"]
        print(list(lfs.columns))
        """
    ),
    md(
        """
        ## 1. Measure every 2-way marginal

        The domain is public: `SEX` and `ILOSTAT` have declared keys, `AGE` is cut at
        20/40/60 and `HWUSUAL` at 1/20/40 (intervals closed on the left). `None` among the cut
        points gives NULLs a cell of their own, so every row is in every marginal. The six
        pairs share an epsilon of 1, a sixth each; each is one partition count (one person is
        in one cell of each), so six of them charge 6 × 1/6. `explain=True` shows it first,
        charging nothing.
        """
    ),
    code(
        """
        KEYS = {"SEX": [1, 2], "ILOSTAT": [1, 2, 3, 9]}
        CUTS = {"AGE": [20, 40, 60, None], "HWUSUAL": [1, 20, 40, None]}
        PAIRS = list(itertools.combinations(COLUMNS, 2))

        budget = pq.Budget(epsilon=1)
        people = pq.PrivateFrame(lfs, budget, keys=KEYS)
        print(people.marginals(PAIRS, epsilon=Fraction(1, 6), cuts=CUTS, explain=True))
        m = people.marginals(PAIRS, epsilon=Fraction(1, 6), cuts=CUTS)
        print("spent:", budget.spent)
        m
        """
    ),
    md(
        """
        To judge the estimates we need the true tables, which only the curator has. The codes
        below put each row in its cell of the public domain, in the order of `m.domain`.
        """
    ),
    code(
        """
        def cell_codes(rows: pd.DataFrame) -> dict[str, np.ndarray]:
            \"\"\"Each row's cell per column, a position in m.domain (last cut cell: NULL).\"\"\"
            out = {}
            for c in COLUMNS:
                if c in CUTS:
                    points = [p for p in CUTS[c] if p is not None]
                    x = rows[c].to_numpy(dtype=float)
                    out[c] = np.where(np.isnan(x), len(points) + 1,
                                      np.searchsorted(points, x, side="right"))
                else:
                    out[c] = rows[c].map({k: i for i, k in enumerate(KEYS[c])}).to_numpy()
            return out

        def table_of(codes: dict[str, np.ndarray], cols: tuple) -> np.ndarray:
            shape = [len(m.domain[c]) for c in cols]
            flat = np.ravel_multi_index([codes[c] for c in cols], shape)
            return np.bincount(flat, minlength=int(np.prod(shape))).astype(float)

        TRUE = cell_codes(lfs)  # curator's side: for the comparison only
        print({c: len(cells) for c, cells in m.domain.items()})
        """
    ),
    md(
        """
        ## 2. Noisy against consistent against true

        `m.measurements[pair]` are the released noisy counts; `m.table(pair)` is the consistent
        estimate of the same cells. The first plot shows one table cell by cell; the second
        the error of every cell of all six tables.
        """
    ),
    code(
        """
        pair = ("AGE", "ILOSTAT")
        t = m.table(pair)
        ages = t["AGE"].astype(str).replace("nan", "NULL")
        labels = [f"{a} / {b}" for a, b in zip(ages, t["ILOSTAT"], strict=True)]
        x = np.arange(len(t))
        fig, ax = plt.subplots(figsize=(11, 4))
        ax.bar(x - 0.27, table_of(TRUE, pair), width=0.27, label="true", color="#9e9e9e")
        ax.bar(x, np.asarray(m.measurements[pair], dtype=float), width=0.27,
               label="noisy (raw)", color="#e07b39")
        ax.bar(x + 0.27, t["count"], width=0.27, label="consistent", color="#3b75af")
        ax.set_xticks(x, labels, rotation=70, fontsize=8)
        ax.set_yscale("symlog", linthresh=10)
        ax.set(ylabel="rows (symlog)", title="AGE by ILOSTAT: true, noisy and consistent cells")
        ax.legend()
        plt.show()
        print("negative noisy cells:", int((np.asarray(m.measurements[pair]) < 0).sum()),
              "| negative consistent cells:", int((t["count"] < 0).sum()))
        """
    ),
    code(
        """
        fig, ax = plt.subplots()
        rows = []
        for p in PAIRS:
            true = table_of(TRUE, p)
            noisy = np.asarray(m.measurements[p], dtype=float)
            est = m.table(p)["count"].to_numpy()
            ax.scatter(true + 1, noisy - true, s=10, color="#e07b39", alpha=0.6)
            ax.scatter(true + 1, est - true, s=10, color="#3b75af", alpha=0.6)
            rows.append({"table": " x ".join(p), "raw L1": np.abs(noisy - true).sum(),
                         "consistent L1": np.abs(est - true).sum()})
        ax.axhline(0, color="black", lw=0.5)
        ax.set_xscale("log")
        ax.set(xlabel="true count + 1", ylabel="error (rows)",
               title="Every cell of the six 2-way tables: noisy (orange), consistent (blue)")
        plt.show()
        pd.DataFrame(rows).round(1)
        """
    ),
    md(
        """
        The consistent estimate uses all six measurements for every cell: each column's
        totals are measured three times, and the fit pools them. Cells that are empty in
        truth (children with hours worked, adults with status "child") come out near zero
        instead of plus or minus the noise.

        The tables also agree with each other, which the raw measurements do not:
        """
    ),
    code(
        """
        sex_totals = pd.DataFrame({
            "raw, from " + " x ".join(p): m.measurements[p].groupby(level=0).sum()
            for p in PAIRS if p[0] == "SEX"
        })
        sex_totals.index = ["male", "female"]
        for p in PAIRS[:3]:
            sex_totals["consistent, from " + " x ".join(p)] = (
                m.table(p).groupby("SEX")["count"].sum().to_numpy())
        sex_totals.T.round(1)
        """
    ),
    md(
        """
        ## 3. A table nobody measured

        No 3-way table was measured, yet the model estimates one, consistent with the six
        pairs. Its accuracy note says what it can claim (no interval: it rests on the
        model's independence structure).
        """
    ),
    code(
        """
        for triple in itertools.combinations(COLUMNS, 3):
            est = m.table(triple)["count"].to_numpy()
            error = np.abs(est - table_of(TRUE, triple)).sum()
            print(" x ".join(triple), "L1 error:", round(float(error), 1))
        print(m.table(("SEX", "AGE", "ILOSTAT")).attrs["accuracy"])
        print("spent after all this:", budget.spent)
        """
    ),
    md(
        """
        ## 4. A synthetic file: `synthesize`

        `synthesize` chooses which pairs to measure (MST: every 1-way marginal, then a
        spanning tree of the pairs the 1-way marginals explain worst, each chosen by private
        selection), with its total epsilon split in thirds between the three phases, and
        returns the same kind of object. Its `sample()` is a synthetic microdata file to
        explore with ordinary pandas. Here on a budget of its own.
        """
    ),
    code(
        """
        synth_budget = pq.Budget(epsilon=1)
        frame = pq.PrivateFrame(lfs, synth_budget, keys=KEYS)
        s = frame.synthesize(1, columns=COLUMNS, cuts=CUTS)
        print("chosen pairs:", s.cliques[len(COLUMNS):], "| spent:", synth_budget.spent)
        fake = s.sample(seed=1)
        fake.head()
        """
    ),
    code(
        """
        FAKE = {  # the synthetic rows' cells, as positions in m.domain
            c: (fake[c].cat.codes.to_numpy().copy() if c in CUTS else
                fake[c].map({k: i for i, k in enumerate(KEYS[c])}).to_numpy())
            for c in COLUMNS
        }
        for c in CUTS:  # the NULL cell is not a category: its rows have code -1
            FAKE[c][FAKE[c] < 0] = len(m.domain[c]) - 1

        fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex=True, sharey=True)
        shares = []
        for ax, p in zip(axes.flat, PAIRS, strict=True):
            true = table_of(TRUE, p) / len(lfs)
            synthetic = table_of(FAKE, p) / len(fake)
            ax.scatter(true, synthetic, s=12, color="#3b75af")
            ax.plot([0, 0.5], [0, 0.5], color="black", lw=0.5)
            ax.set_title(" x ".join(p), fontsize=9)
            shares.append({"table": " x ".join(p), "L1 of shares": np.abs(synthetic - true).sum()})
        fig.supxlabel("true share of the cell")
        fig.supylabel("synthetic share")
        fig.suptitle("The synthetic file's 2-way marginals against the true ones")
        plt.show()
        pd.DataFrame(shares).round(3)
        """
    ),
    md(
        """
        The pairs `synthesize` measured are reproduced closely; a pair it did not measure is
        only as good as the tree's independence assumptions (the L1 distance of shares is
        between 0, identical, and 2, disjoint). Measuring every pair with `marginals`, as in
        section 1, costs the same epsilon spread over more tables.

        Both objects hold only public things (the domain and the noisy counts): they can be
        pickled, sent, and used after the data is gone, and `table()` and `sample()` never
        charge the budget.
        """
    ),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_sql_magic.ipynb": SQL_MAGIC,
    "03_pinq_classics.ipynb": CLASSICS,
    "04_serving_analysts.ipynb": SERVING,
    "05_engines.ipynb": FIVE_ENGINES,
    "06_marginals.ipynb": MARGINALS,
}


def make(cells: list[nbformat.NotebookNode]) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[nbformat.from_dict(c) for c in cells])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


@contextmanager
def kernel_of_this_interpreter() -> Iterator[None]:
    """Make the ``python3`` kernel spec run ``sys.executable`` while the block runs.

    A temporary kernel spec is installed with ipykernel and put first on ``JUPYTER_PATH``,
    so an unrelated default ``python3`` kernel (another interpreter) is never used.
    """
    from ipykernel.kernelspec import install

    old = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="pinqpy-kernel-") as tmp:
        install(prefix=tmp, kernel_name="python3")
        share = str(Path(tmp, "share", "jupyter"))
        os.environ["JUPYTER_PATH"] = share + (os.pathsep + old if old else "")
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


def execute(nb: nbformat.NotebookNode, timeout: int = 120) -> nbformat.NotebookNode:
    """Run ``nb`` top to bottom in place (a cell error raises) and return it."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(HERE)}},
    )
    with kernel_of_this_interpreter():
        client.execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="build only notebooks whose name contains this")
    parser.add_argument("--no-execute", action="store_true", help="write cells without outputs")
    args = parser.parse_args(argv)

    for name, cells in NOTEBOOKS.items():
        if args.only and not any(part in name for part in args.only):
            continue
        nb = make(cells)
        started = time.perf_counter()
        if not args.no_execute:
            execute(nb)
        elapsed = time.perf_counter() - started
        path = HERE / name
        nbformat.validate(nb)
        nbformat.write(nb, path)
        note = "written (not executed)" if args.no_execute else f"executed in {elapsed:.1f} s"
        print(f"{path.relative_to(HERE.parent)}: {len(cells)} cells, {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
