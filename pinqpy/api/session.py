"""Session: named private and public tables, queried in pinqpy's SQL dialect.

A SQL query compiles to the very same plans and aggregations as Python method chaining;
``session.table(name)`` hands back the PrivateFrame a query would start from.

>>> import pandas as pd, pinqpy as pq
>>> df = pd.DataFrame({"state": ["CA", "NY", "CA"], "age": [30, 40, 50]})
>>> session = pq.Session()
>>> budget = pq.Budget(epsilon=1.0)
>>> _ = session.register("people", df, budget=budget, bounds={"age": (0, 100)},
...                      keys={"state": ["CA", "NY"]})
>>> with pq.testing.no_noise():
...     session.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.5)
noisy (epsilon 0.5), 95% intervals:
  state      n
0    CA  2 ± 6
1    NY  1 ± 6
>>> budget.spent.epsilon == 0.5
True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Literal

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.accounting.cost import Cost
from pinqpy.api.frame import PrivateFrame
from pinqpy.api.panels import session_panel
from pinqpy.engines.registry import public_frame
from pinqpy.engines.wrapping.wrapped import type_sources
from pinqpy.errors import BudgetExceededError, PinqError, PinqSyntaxError, PrivacyError
from pinqpy.pipeline.typenotes import note_inferred
from pinqpy.plan.nodes import Source
from pinqpy.plan.public import snapshot
from pinqpy.results.html import session_html
from pinqpy.results.marginals import Marginals
from pinqpy.results.noise import check_level
from pinqpy.results.summary import PlannedMeasurement, summary_frame
from pinqpy.results.tables import NoisyFrame
from pinqpy.sql import ast as q
from pinqpy.sql.compiler import (
    Catalog,
    CompiledRelease,
    compile_release,
    locate,
    option_pos,
    resolve_table,
)
from pinqpy.sql.explain import Explanation, cost_note, explain
from pinqpy.sql.marginals import CompiledMarginals, compile_marginals, run_marginals
from pinqpy.sql.parser import parse_statement
from pinqpy.sql.run import run_release
from pinqpy.sql.summary import release_rows

__all__ = ["Session"]


class Session:
    """Named tables for SQL: private frames (each with its budget) and public tables.

    >>> import pinqpy as pq
    >>> pq.Session()
    Session(private=[], public=[])
    """

    def __init__(self) -> None:
        self._private: dict[str, PrivateFrame] = {}
        self._public: dict[str, pd.DataFrame] = {}
        #: One line on what the last :meth:`sql` statement charged and why (see :meth:`sql`).
        self.last_note: str | None = None

    def _repr_html_(self) -> str:
        return session_html(session_panel(self._private, self._public))

    # -- tables -------------------------------------------------------------------------
    def register(
        self,
        name: str,
        data: Any,
        *,
        budget: Budget | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        privacy_unit: str | None = None,
        max_rows: int | None = None,
        allow_callables: bool = False,
        engine: Literal["pandas", "duckdb", "spark", "polars", "postgres"] | None = None,
        connection: Any = None,
        schema: Mapping[str, str] | None = None,
        public_size: bool = False,
    ) -> PrivateFrame:
        """Register a private table under ``name`` and return its PrivateFrame.

        ``data`` is a PrivateFrame (its budget, bounds and keys come along), or anything
        :class:`PrivateFrame` wraps -- a pandas DataFrame, a DuckDB relation or table name, a
        Spark DataFrame, a PostgreSQL table name with ``connection=`` a psycopg connection or
        connection string -- with ``budget=`` and optional metadata; ``engine`` and
        ``connection`` are passed on. ``privacy_unit`` with ``max_rows=k`` keeps at most k
        rows per person, so queries see a table of stability k. ``schema={"code": "str"}``
        declares column types, converted or cast now (see :class:`PrivateFrame`).
        ``public_size=True`` declares the table's row count public (see
        :class:`PrivateFrame`): ``SELECT COUNT(*) FROM name`` then returns it free and
        exactly, and AVG divides by it. With ``max_rows`` the registered frame keeps a
        subset of the rows, so its count is not the public one.
        """
        _check_name(name)
        if name in self._public:
            raise PinqError(f"{name!r} is already a public table")
        if isinstance(data, PrivateFrame):
            if (
                budget is not None
                or bounds
                or keys
                or privacy_unit is not None
                or engine is not None
                or connection is not None
                or schema is not None
                or public_size
            ):
                raise PinqError(
                    "register a PrivateFrame on its own: its budget, bounds and keys come with it"
                )
            frame = data
        else:
            if budget is None:
                raise PinqError(
                    f"register({name!r}, {type(data).__name__}) needs budget=pq.Budget(...)"
                )
            frame = PrivateFrame(
                data,
                budget,
                privacy_unit=privacy_unit,
                bounds=bounds,
                keys=keys,
                allow_callables=allow_callables,
                name=name,
                engine=engine,
                connection=connection,
                schema=schema,
                public_size=public_size,
            )
        if max_rows is not None:
            frame = frame.bound_contributions(max_rows=max_rows)
        self._private[name] = frame
        return frame

    def register_public(self, name: str, data: Any) -> None:
        """Register a public table (usable in joins and as a source of GROUP BY keys).

        ``data`` is a pandas DataFrame, or a DuckDB relation or Spark DataFrame, which is read
        into pandas once: a public table is not private, and every engine joins against it.
        """
        _check_name(name)
        data = snapshot(public_frame(data))
        if name in self._private:
            raise PinqError(f"{name!r} is already a private table")
        self._public[name] = data

    def table(self, name: str) -> PrivateFrame:
        """The PrivateFrame registered as ``name``."""
        if name not in self._private:
            raise PinqError(f"no private table named {name!r}")
        return self._private[name]

    @property
    def tables(self) -> list[str]:
        return [*self._private, *self._public]

    # -- SQL ----------------------------------------------------------------------------
    def sql(
        self,
        query: str,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        n: float | None = None,
    ) -> NoisyFrame | Explanation | pd.DataFrame:
        """Answer one SQL statement.

        A SELECT returns a pandas DataFrame of noisy results, one row per group, each noisy
        column's accuracy available through ``result.ci(column)``. ``epsilon`` (or ``OPTIONS
        (epsilon = ...)``) is the total the query charges; EXPLAIN charges nothing and returns
        printable text; SHOW TABLES, DESCRIBE t and SHOW BUDGET return DataFrames.

        ``n`` (or ``OPTIONS (n = ...)``), only with EXPLAIN: a guessed or public number of
        rows (per group, for a grouped query) that states the error of means and quantiles
        in the column's units; see :mod:`pinqpy.sql.explain`.

        Afterwards :attr:`last_note` says in one line what the statement charged and why:
        ``charged epsilon 0.2 on people: 2 measurements x 0.05 x stability 2 (join labels: a
        key repeats up to 2 times (stability 1 -> 2))``, naming each step whose stability
        multiplies the charge. EXPLAIN's note is ``charged nothing (EXPLAIN reads no data)``;
        SHOW and DESCRIBE statements, and a refused query, leave it None.
        """
        self.last_note = None
        statement, compiled = self._compile(query, epsilon, delta)
        if isinstance(compiled, CompiledMarginals):
            return self._run_marginals(compiled, query, n)
        if isinstance(statement, q.Explain):
            assert isinstance(compiled, CompiledRelease)
            rows = _explain_rows(statement.query, query, n)
            self.last_note = "charged nothing (EXPLAIN reads no data)"
            return explain(compiled, self._budget_names(), self._table_names(), n=rows)
        if n is not None:
            raise PinqSyntaxError(
                "n= (a row count for EXPLAIN's accuracy figures) is accepted only with EXPLAIN",
                text=query,
            )
        if isinstance(statement, q.ShowTables):
            return self._show_tables()
        if isinstance(statement, q.ShowBudget):
            return self._show_budget()
        if isinstance(statement, q.ShowLedger):
            return self._show_ledger()
        if isinstance(statement, q.Describe):
            return self.describe(self._described(statement, query))
        assert isinstance(compiled, CompiledRelease)
        budgets = list(compiled.frame.stabilities())
        before = {b: len(b.charges) for b in budgets}

        def note(failed: bool) -> None:
            # What this process committed to each budget: a charge stands when reading fails
            # after it; a refused query charged nothing and leaves no note.
            charged = {b: _sum_costs(b.charges[before[b] :]) for b in budgets}
            if not failed or any(c.epsilon or c.delta for c in charged.values()):
                self.last_note = cost_note(
                    compiled, charged, self._note_names(), self._table_names()
                )

        try:
            result = run_release(compiled, label=" ".join(query.split())[:120])
        except BaseException:
            note(failed=True)
            raise
        note(failed=False)
        return result

    def explain(
        self,
        query: str,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        n: float | None = None,
    ) -> Explanation:
        """EXPLAIN a SELECT without writing the keyword; charges nothing. ``n`` as for
        :meth:`sql`: a guessed or public row count for the accuracy of means and quantiles."""
        statement, compiled = self._compile(query, epsilon, delta, force_explain=True)
        if isinstance(compiled, CompiledMarginals):
            compiled.explain = True
            return run_marginals(compiled, self._budget_names(), "explain")  # type: ignore[return-value]
        if not isinstance(compiled, CompiledRelease):
            raise PinqSyntaxError("explain() takes a SELECT query", text=query)
        inner = statement.query if isinstance(statement, q.Explain) else statement
        rows = _explain_rows(inner, query, n)  # type: ignore[arg-type]
        return explain(compiled, self._budget_names(), self._table_names(), n=rows)

    def summarize(
        self,
        *queries: str,
        epsilon: float | None = None,
        delta: float | None = None,
        n: float | None = None,
        level: float = 0.95,
    ) -> pd.DataFrame:
        """An overview of the noisy measurements ``queries`` (SELECT statements) would make,
        one row each: the query, the aggregate, its mechanism, epsilon, delta and (under
        zCDP) rho, noise scale, expected error and ``level`` interval half-width in the
        column's units, and whether a figure needs a row count ``n`` (a guess, or a public
        count; per group for a grouped query). Compiles each query as EXPLAIN does: charges
        nothing and reads no data. ``epsilon`` is each query's total unless its OPTIONS say
        otherwise. The columns are described in :mod:`pinqpy.results.summary`; the shell's
        ``.summarize SELECT ...`` prints the same table.

        >>> import pandas as pd, pinqpy as pq
        >>> s = pq.Session()
        >>> _ = s.register("people", pd.DataFrame({"age": [30, 40]}), budget=pq.Budget(1),
        ...                bounds={"age": (0, 100)})
        >>> t = s.summarize("SELECT COUNT(*), AVG(age) FROM people", epsilon=0.2, n=500)
        >>> t[["measurement", "epsilon", "ci95_half_width", "unit"]].round(2)
          measurement  epsilon  ci95_half_width  unit
        0    COUNT(*)      0.1            30.00  rows
        1    AVG(age)      0.1             8.23   age
        """
        if not queries:
            raise PinqError("summarize() needs at least one SELECT query")
        rows: list[PlannedMeasurement] = []
        for query in queries:
            own = _own_options(query)  # a query's OPTIONS win over the defaults given here
            eps, dlt = (None if "epsilon" in own else epsilon), (None if "delta" in own else delta)
            statement, compiled = self._compile(query, eps, dlt, force_explain=True)
            if not isinstance(compiled, CompiledRelease):
                raise PinqSyntaxError("summarize() takes SELECT queries", text=query)
            inner = statement.query if isinstance(statement, q.Explain) else statement
            per = _explain_rows(inner, query, n)  # type: ignore[arg-type]
            rows += release_rows(compiled, query, per, check_level(level))
        return summary_frame(rows, level)

    def marginals(
        self,
        table: str,
        marginals: Iterable[str | tuple[str, ...]],
        epsilon: float | None = None,
        **options: Any,
    ) -> Marginals | Explanation:
        """``table``'s :meth:`PrivateFrame.marginals <pinqpy.PrivateFrame.marginals>` (the
        same arguments: ``epsilon``, ``delta``, ``rho`` and ``keys``/``cuts`` per marginal);
        SQL's ``SELECT MARGINALS`` spells it with a total epsilon instead."""
        return self.table(table).marginals(marginals, epsilon, **options)

    def _run_marginals(
        self, compiled: CompiledMarginals, query: str, n: object
    ) -> Marginals | Explanation:
        if n is not None:
            raise PinqSyntaxError("n= is not used by SELECT MARGINALS", text=query)
        if compiled.explain:
            self.last_note = "charged nothing (EXPLAIN reads no data)"
        out = run_marginals(compiled, self._budget_names(), " ".join(query.split())[:120])
        if not compiled.explain:
            self.last_note = f"charged {len(compiled.plan.cliques)} marginal(s) of {compiled.table}"
        return out

    def _table_names(self) -> dict[str, str]:
        """Each registered frame's table by the name it was registered as (a frame made as
        "table" and registered as "people" is scanned as people)."""
        names: dict[str, str] = {}
        for name, frame in self._private.items():
            plan = frame._plan
            if isinstance(plan, Source):
                names.setdefault(plan.table.id, name)
        return names

    def _note_names(self) -> dict[object, str]:
        """Each budget by the tables registered on it, as the cost note names them."""
        names: dict[object, list[str]] = {}
        for tname, frame in self._private.items():
            for b in frame.stabilities:
                names.setdefault(b, []).append(tname)
        return {b: ", ".join(ts) for b, ts in names.items()}

    def _compile(
        self, query: str, epsilon: object, delta: object, *, force_explain: bool = False
    ) -> tuple[q.Statement, CompiledRelease | CompiledMarginals | None]:
        if not isinstance(query, str):
            raise PinqSyntaxError(f"a query must be text, not {type(query).__name__}")
        try:
            statement = parse_statement(query, positions=False)
            return statement, self._compile_statement(
                statement, query, epsilon, delta, force_explain
            )
        except BudgetExceededError:
            raise
        except PinqError as err:
            first = err
        except Exception as err:
            raise _internal(err, query) from None
        # Errors are rare: only now parse again with positions, so the error can point at the
        # fault. Compiling reads no data and charges nothing, so this is safe. It runs outside
        # the handler above, so the error it raises is the only traceback shown.
        try:
            statement = parse_statement(query, positions=True)
            self._compile_statement(statement, query, epsilon, delta, force_explain)
        except (PinqSyntaxError, PrivacyError) as err:
            raise self._typed(err) from None
        except PinqError as err:
            raise PinqSyntaxError(str(err), text=query) from None
        except Exception as err:  # an internal fault must not surface as a raw error
            raise _internal(err, query) from None
        if isinstance(first, PinqSyntaxError | PrivacyError):
            raise self._typed(first) from None
        raise PinqSyntaxError(str(first), text=query) from None

    def _typed(self, err: PinqError) -> PinqError:
        """``err``, saying how to declare a column's type when it is a type mismatch on a
        column whose type was inferred from a file (:mod:`pinqpy.pipeline.typenotes`)."""
        return note_inferred(err, [f._plan for f in self._private.values()])

    def _compile_statement(
        self, statement: q.Statement, text: str, epsilon: object, delta: object, force: bool
    ) -> CompiledRelease | CompiledMarginals | None:
        if isinstance(statement, q.ShowTables | q.ShowBudget | q.ShowLedger):
            return None
        if isinstance(statement, q.MarginalsQuery):
            frames = {n: f._rel for n, f in self._private.items()}
            return compile_marginals(frames, statement, text, epsilon, delta)
        if isinstance(statement, q.Describe):
            self._described(statement, text)
            return None
        explaining = force or isinstance(statement, q.Explain)
        query = statement.query if isinstance(statement, q.Explain) else statement
        query = _without_n(query, text, explaining)
        catalog = Catalog({n: f._rel for n, f in self._private.items()}, self._public)
        return compile_release(catalog, query, text, epsilon, delta)

    def _described(self, statement: q.Describe, text: str) -> str:
        """The registered table DESCRIBE names (unquoted names in any case, schema.table)."""
        path = statement.path or tuple((p, True) for p in (*statement.schema, statement.name))
        found = resolve_table([*self._private, *self._public], path)
        if len(found) == 1:
            return found[0]
        written = ".".join(part for part, _ in path)
        message = (
            f"table name {written!r} is ambiguous: it matches {found[0]!r} and {found[1]!r}"
            if found
            else f"unknown table {written!r}"
        )
        at = locate(text, r"\bDESC(?:RIBE)?\s+(\S+)", statement.pos, 1)
        raise PinqSyntaxError(
            message, text=text, line=at.line if at else None, column=at.column if at else None
        )

    # -- catalogue statements -------------------------------------------------------------
    def _budget_names(self) -> dict[object, str]:
        names: dict[object, list[str]] = {}
        for tname, frame in self._private.items():
            for b in frame.stabilities:
                names.setdefault(b, []).append(tname)
        return {b: "budget of " + ", ".join(ts) for b, ts in names.items()}

    def _show_tables(self) -> pd.DataFrame:
        rows = []
        for name, frame in self._private.items():
            stab = ", ".join(str(v) for v in frame.stabilities.values())
            rows.append(
                {
                    "table": name,
                    "kind": "private",
                    "columns": len(frame.columns),
                    "privacy_unit": frame.privacy_unit,
                    "stability": stab,
                }
            )
        for name, df in self._public.items():
            rows.append(
                {
                    "table": name,
                    "kind": "public",
                    "columns": df.shape[1],
                    "privacy_unit": None,
                    "stability": "",
                }
            )
        return pd.DataFrame(rows, columns=["table", "kind", "columns", "privacy_unit", "stability"])

    def _show_budget(self) -> pd.DataFrame:
        rows = []
        for budget, label in self._budget_names().items():
            assert isinstance(budget, Budget)
            rows.append(
                {
                    "budget": label,
                    "epsilon": float(budget.total.epsilon),
                    "delta": float(budget.total.delta),
                    "spent_epsilon": float(budget.spent.epsilon),
                    "spent_delta": float(budget.spent.delta),
                    "remaining_epsilon": float(budget.remaining.epsilon),
                    "remaining_delta": float(budget.remaining.delta),
                }
            )
        return pd.DataFrame(rows)

    def _show_ledger(self) -> pd.DataFrame:
        """The audit trail of every registered budget that is kept in a ledger file."""
        frames = []
        for budget in self._budget_names():
            assert isinstance(budget, Budget)
            if budget.ledger is not None:
                frames.append(budget.audit())
        if not frames:
            raise PinqError(
                "no budget of this session keeps a ledger: create it with "
                "pq.Budget(..., ledger='budget.db') to keep an audit trail"
            )
        return pd.concat(frames, ignore_index=True)

    def describe(self, name: str) -> pd.DataFrame:
        """The public schema of a table: types, where each type came from, declared bounds
        and keys.

        ``type_source`` is ``declared`` (given with ``schema=`` or ``--schema``), ``inferred``
        (read from a CSV file's text by the engine when the table was registered: declare
        the type to fix it instead) or ``engine`` (the column's own type in the DataFrame or
        database; a pandas object column is ``any``); a column a query made is ``computed``."""
        if name in self._public:
            df = self._public[name]
            return pd.DataFrame(
                {"column": [str(c) for c in df.columns], "type": [str(t) for t in df.dtypes]}
            )
        frame = self.table(name)
        sources = type_sources(frame._plan)
        rows = []
        for col, ctype in frame.schema.items():
            b = frame.bounds.get(col)
            k = frame.keys.get(col)
            rows.append(
                {
                    "column": col,
                    "type": ctype,
                    "type_source": sources.get(col, "computed"),
                    "bounds": "" if b is None else f"[{b[0]:g}, {b[1]:g}]",
                    "keys": "" if k is None else f"{len(k)} public keys",
                    "privacy_unit": col == frame.privacy_unit,
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"Session(private={list(self._private)}, public={list(self._public)})"


def _own_options(query: object) -> set[str]:
    """The OPTIONS names a query sets itself (empty when it does not parse: compiling it
    then reports the error)."""
    try:
        statement = parse_statement(query, positions=False)  # type: ignore[arg-type]
    except Exception:
        return set()
    inner = statement.query if isinstance(statement, q.Explain) else statement
    return {name for name, _ in getattr(inner, "options", ())}


def _sum_costs(charges: list[tuple[Cost, str]]) -> Cost:
    total = Cost()
    for cost, _label in charges:
        total = total + cost
    return total


def _internal(err: BaseException, query: str) -> PinqSyntaxError:
    """The error for an internal fault while compiling: its type only (never its message,
    which could quote anything)."""
    return PinqSyntaxError(
        f"pinqpy could not compile this query (internal error: {type(err).__name__})",
        text=query,
    )


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise PinqError("a table name must be a non-empty string")


# -- EXPLAIN's row count ----------------------------------------------------------------------
def _without_n(query: Any, text: str, explaining: bool) -> Any:
    """``query`` without its ``OPTIONS (n = ...)``, which only EXPLAIN takes (a row count
    for its accuracy figures: it changes no release, so a query that runs refuses it)."""
    options = tuple(getattr(query, "options", ()))
    if not any(name == "n" for name, _ in options):
        return query
    if not explaining:
        at = option_pos(text, "n")
        raise PinqSyntaxError(
            "OPTIONS n (a row count for EXPLAIN's accuracy figures) is accepted only with "
            "EXPLAIN; remove it to run the query",
            text=text,
            line=at.line if at else None,
            column=at.column if at else None,
        )
    _check_rows(dict(options)["n"], text)
    return dataclasses.replace(query, options=tuple(o for o in options if o[0] != "n"))


def _check_rows(value: object, text: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type]
        at = option_pos(text, "n", value=True)
        raise PinqSyntaxError(
            "OPTIONS n must be a positive number of rows",
            text=text,
            line=at.line if at else None,
            column=at.column if at else None,
        )
    return float(value)  # type: ignore[arg-type]


def _explain_rows(query: Any, text: str, n: object) -> float | None:
    """The row count EXPLAIN states its figures for: ``n=`` or ``OPTIONS (n = ...)``."""
    written = dict(getattr(query, "options", ())).get("n")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | float):
            raise PinqError("n (a row count) must be a positive number")
        if not math.isfinite(n) or n <= 0:
            raise PinqError("n (a row count) must be a positive number")
        if written is not None and float(written) != float(n):  # type: ignore[arg-type]
            raise PinqSyntaxError(
                "n is given twice, as an argument and in OPTIONS, differently", text=text
            )
        return float(n)
    return None if written is None else _check_rows(written, text)
