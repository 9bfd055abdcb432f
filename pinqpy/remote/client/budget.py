"""RemoteBudget: the client's view of a budget that the server keeps.

The server holds every budget in its ledger and is the only one that charges it. On the
client a :class:`RemoteBudget` is two things:

- a name for the budget in the plans the client builds: it is the root agent of the remote
  tables in a frame's catalog (through a :class:`~pinqpy.accounting.agents.ChangedRowView`
  for a table whose row count is public), so :attr:`~pinqpy.PrivateFrame.stabilities` and
  partitions work as they do locally (the server recomputes both from its own catalog, whatever the
  client thinks);
- a window on the server's figures: ``total``, ``spent``, ``remaining``, ``accounting`` and
  :meth:`audit` are read from the server at each access, so they include every charge made
  by any client drawing on the same budget (a group's members share one).

It cannot be charged here: a frame that draws on it is aggregated by sending its plan to the
server. A local frame combined with a remote one (``local.join(remote)``) would otherwise
reach the client's pipeline, which asks this budget whether a charge fits; the answer is a
clear error, before anything is read.
"""

from __future__ import annotations

import types
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import RootAgent
from pinqpy.accounting.cost import Cost, _short
from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.remote.client.transport import Transport

__all__ = ["RemoteBudget", "cost_from_data"]


def cost_from_data(data: Any, what: str) -> Cost:
    """A budget document's ``{"epsilon": "1/10", "delta": "0"}`` as an exact Cost."""
    try:
        return Cost(Fraction(str(data["epsilon"])), Fraction(str(data["delta"])))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, PinqError):
        raise PinqError(f"the server sent a malformed {what}") from None


class RemoteBudget(RootAgent):
    """A budget kept by a pinqpy server, named ``label`` there (``analyst:alice/pums`` for
    an analyst's own budget of a table, ``group:lab/pums`` for a group's).

    Compared and hashed by identity: a session makes one per budget, shared by every table
    that draws on it, as one local :class:`~pinqpy.Budget` is.
    """

    def __init__(self, transport: Transport, label: str) -> None:
        self._transport = transport
        self._label = label
        # What the client's pipeline looks at before it would charge (never used: see
        # _fits). No ledger here (the server keeps it), and no cached answers.
        self._ledger = None
        self._ledger_name = label
        self._answers: types.MappingProxyType[str, Any] = types.MappingProxyType({})

    # -- the server's figures -------------------------------------------------------------
    def _doc(self) -> dict[str, Any]:
        answer = self._transport.document("/budget")
        docs = answer.get("budgets") if isinstance(answer, dict) else None
        if isinstance(docs, list):
            for doc in docs:
                if isinstance(doc, dict) and doc.get("name") == self._label:
                    return doc
        raise PinqError(
            f"the server at {self._transport.url} no longer reports the budget {self._label!r}"
        )

    @property
    def name(self) -> str:
        """The server's name for this budget."""
        return self._label

    @property
    def url(self) -> str:
        """The server that keeps this budget."""
        return self._transport.url

    @property
    def tables(self) -> list[str]:
        """The tables (of this analyst's) that draw on this budget."""
        tables = self._doc().get("tables")
        return [str(t) for t in tables] if isinstance(tables, list) else []

    @property
    def accounting(self) -> str:
        """The accounting model: ``"pure"``, ``"approx"`` or ``"zcdp"``."""
        return str(self._doc().get("accounting"))

    @property
    def total(self) -> Cost:
        """The budget's total (epsilon, delta)."""
        return cost_from_data(self._doc().get("total"), "budget total")

    @property
    def epsilon(self) -> Exact:
        return self.total.epsilon

    @property
    def delta(self) -> Exact:
        return self.total.delta

    @property
    def spent(self) -> Cost:
        """What has been charged so far (by every client drawing on this budget)."""
        return cost_from_data(self._doc().get("spent"), "budget figure")

    @property
    def remaining(self) -> Cost:
        """What is left, as (epsilon, delta)."""
        return cost_from_data(self._doc().get("remaining"), "budget figure")

    @property
    def ledger(self) -> None:
        """None: the server keeps the ledger (see :meth:`audit` for its trail)."""
        return None

    def audit(self) -> pd.DataFrame:
        """The server's audit trail of this budget's charges (what was asked, by which plan,
        when, epsilon, delta), oldest first."""
        trail = self._transport.result("GET", "/audit")
        if not isinstance(trail, pd.DataFrame):
            raise PinqError(f"the server at {self.url} sent a malformed audit trail")
        if "budget" in trail.columns:
            trail = trail[trail["budget"] == self._label].reset_index(drop=True)
        return trail

    # -- not charged here (see the module docstring) ---------------------------------------
    def _refuse(self) -> PinqError:
        return PinqError(
            f"this frame draws on the budget {self._label!r} of the pinqpy server at "
            f"{self.url}; only that server can charge it: aggregate a frame of that server's "
            "session (a local frame cannot be combined with a remote one)"
        )

    def _fits(self, usage: object) -> bool:
        raise self._refuse()

    def _commit(self, usage: object, label: str) -> None:
        raise self._refuse()

    def _ledger_cost(self, usage: object) -> Cost:
        raise self._refuse()

    def _ledger_limit(self) -> Cost:
        raise self._refuse()

    def _ledger_answer(self, cache_key: str) -> None:
        return None

    # -- display ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        try:
            doc = self._doc()
            total = cost_from_data(doc.get("total"), "budget total")
            spent = cost_from_data(doc.get("spent"), "budget figure")
            remaining = cost_from_data(doc.get("remaining"), "budget figure")
            model = doc.get("accounting")
        except PinqError:  # a repr must not fail: the figures are simply not shown
            return f"RemoteBudget({self._label!r}, server={self.url!r})"
        model_text = "" if model == "approx" else f", accounting={model!r}"
        if total.delta == 0:
            figures = (
                f"epsilon={total.epsilon!r}{model_text}, spent={spent.epsilon!r}, "
                f"remaining={remaining.epsilon!r}"
            )
        else:
            figures = (
                f"epsilon={total.epsilon!r}, delta={_short(total.delta)}{model_text}, "
                f"spent={spent!r}, remaining={remaining!r}"
            )
        return f"RemoteBudget({self._label!r}, {figures})"
