"""RemoteFrame: a PrivateFrame whose table is kept by a pinqpy server.

A :class:`RemoteFrame` is a :class:`~pinqpy.PrivateFrame` in every way an analyst can see:
its transformations are the very same methods, so they build the same plan with the same
checks (of the curator's public facts, which the server sent) and the same stabilities.
What differs is where the plan is aggregated. Each aggregation (``count``, ``sum``, ``mean``,
``median``, ``quantile``, ``argmax``, ``select_keys``, ``histogram``, ``accuracy``; and the
per-key ones of a
:class:`RemotePartition`) sends the plan as pure data (:mod:`pinqpy.plan.serialize`) with
its arguments, named as the local method names them, to ``POST /v1/aggregate``. The server
rebuilds the plan against its own tables, re-checks every step, recomputes the stabilities,
charges, and calls the same method there; the client's opinion of any of it is ignored.

The client holds no private data. A frame's catalog maps each remote table to a *stub* (an
empty pandas DataFrame with the declared column types, which no code path reads; only its
type is looked at, when two frames are combined) and to the table's
:class:`~pinqpy.remote.client.budget.RemoteBudget`. Public tables joined in are the analyst's
own and travel in the request, under the id the plan gives them.

A Python callable cannot cross to the server (it would be the analyst's code running next to
the data), so one is refused here, with a clear error, before any request is made.
"""

from __future__ import annotations

import functools
import html
import inspect
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from pinqpy.api.aggregations import AGGREGATIONS, ALIASES, FRAME_AGGREGATIONS
from pinqpy.api.expressions import Expression, unwrap
from pinqpy.api.frame import GroupedFrame, PrivateFrame
from pinqpy.api.habits import need_epsilon
from pinqpy.api.partition import Partition
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Expr
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.nodes import PublicJoin, walk
from pinqpy.plan.serialize import plan_to_data
from pinqpy.plan.stability import INF
from pinqpy.remote import protocol
from pinqpy.remote.client.transport import Transport

__all__ = ["RemoteFrame", "RemoteGroupedFrame", "RemotePartition", "prepare_args"]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


# -- arguments --------------------------------------------------------------------------------
def _refuse_callable(what: str) -> PinqError:
    return PinqError(
        f"{what} is a Python callable, which cannot be sent to a pinqpy server (it would run "
        "your code next to the private data); write it as an expression: a string such as "
        "'age > 30' or pq.col('age') > 30"
    )


def _plain(value: Any, what: str) -> Any:
    """``value`` as it can be sent: a callable refused, and the iterables a local method
    would iterate (a range, a set, a numpy array, a generator, a pandas Index) as a list, in
    the order the local method would read them."""
    if isinstance(value, Expression | Expr | str | bytes | pd.DataFrame):
        return value
    if callable(value):
        raise _refuse_callable(what)
    if isinstance(value, Mapping):
        return {k: _plain(v, what) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [_plain(v, what) for v in value]
        return tuple(out) if isinstance(value, tuple) else out
    if isinstance(value, np.ndarray | pd.Index | pd.Series):
        return [_plain(v, what) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, range | set | frozenset | Iterator) or (
        isinstance(value, Iterable) and not isinstance(value, Hashable)
    ):
        return [_plain(v, what) for v in value]
    return value


def prepare_args(method: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The bound arguments of ``method`` as they travel: every callable refused (with the
    argument's name) and iterables made lists."""
    return {name: _plain(v, f"{method}'s argument {name!r}") for name, v in arguments.items()}


def _binder(local: Callable[..., Any]) -> Callable[[object, Any, Any], dict[str, Any]]:
    """A function binding a call's arguments as the local method ``local`` would (a wrong
    call raises the same TypeError), without ``self`` and without defaults (the server
    applies its own)."""
    signature = inspect.signature(local)
    first = next(iter(signature.parameters))

    def bind(frame: object, args: Any, kwargs: Any) -> dict[str, Any]:
        arguments = dict(signature.bind(frame, *args, **kwargs).arguments)
        del arguments[first]
        return arguments

    return bind


def _public_tables(rel: Relation) -> dict[str, Any]:
    """Every public table the plan joins, as ``{id: encode_frame(rows)}``: the snapshot the
    client's checks used, so the server checks the same rows (and recomputes everything)."""
    out: dict[str, Any] = {}
    for node in walk(rel.plan):
        if isinstance(node, PublicJoin) and node.public.id not in out:
            out[node.public.id] = protocol.encode_frame(rel.catalog.public_data(node.public))
    return out


def _request(
    rel: Relation, method: str, arguments: Mapping[str, Any], partition: Any = None
) -> dict[str, Any]:
    return {
        "plan": plan_to_data(rel.plan),
        "public": _public_tables(rel),
        "partition": partition,
        "method": method,
        "args": protocol.encode_args(prepare_args(method, arguments)),
    }


def _remote(local: F, owner: str) -> F:
    """The remote twin of an aggregation: same name, signature and docstring as ``local``;
    it binds the call as ``local`` would and asks the server to make it."""
    name, bind = local.__name__, _binder(local)
    eps = inspect.signature(local).parameters.get("epsilon")
    optional_eps = eps is not None and eps.default is None

    @functools.wraps(local)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = bind(self, args, kwargs)
        if optional_eps:  # refused here, as locally, before any request is made
            need_epsilon(name, arguments.get("epsilon"), arguments.get("column", True))
        return self._aggregate(name, arguments)

    method.__qualname__ = f"{owner}.{name}"
    return method  # type: ignore[return-value]


def _asked_of_the_server(local: type, names: tuple[str, ...]) -> Callable[[C], C]:
    """A class decorator: the aggregations ``names`` of ``local`` (and their aliases, such
    as ``var``), each replaced by its remote twin (:func:`_remote`)."""

    def decorate(cls: C) -> C:
        for name in names:
            setattr(cls, name, _remote(getattr(local, name), cls.__name__))
        for alias, name in ALIASES.items():
            if name in names:
                setattr(cls, alias, getattr(cls, name))
        return cls

    return decorate


def _find_callable(value: Any, what: str) -> None:
    """Refuse a callable in ``value`` (looking into lists, tuples and mappings only, so no
    iterator is consumed before the local method reads it)."""
    if isinstance(value, Expression | Expr | str):
        return
    if callable(value):
        raise _refuse_callable(what)
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            _find_callable(item, what)


def _checked_transformation(local: F) -> F:
    """A transformation that takes expressions: a callable is refused with the remote
    message (locally it may be allowed by the curator; remotely it never is), then the local
    method runs as it is."""

    bind = _binder(local)

    @functools.wraps(local)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        for name, value in bind(self, args, kwargs).items():
            _find_callable(value, f"{local.__name__}'s argument {name!r}")
        return local(self, *args, **kwargs)

    method.__qualname__ = f"RemoteFrame.{local.__name__}"
    return method  # type: ignore[return-value]



def _same_server_transformation(local: F) -> F:
    """A transformation that combines this frame with ``other`` (a frame or public rows): a
    frame is refused unless it is of the same server session, then the local method runs as
    it is."""

    bind = _binder(local)

    @functools.wraps(local)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._same_server(bind(self, args, kwargs).get("other"), local.__name__)
        return local(self, *args, **kwargs)

    method.__qualname__ = f"RemoteFrame.{local.__name__}"
    return method  # type: ignore[return-value]

# -- frames -------------------------------------------------------------------------------------
@_asked_of_the_server(PrivateFrame, FRAME_AGGREGATIONS)
class RemoteFrame(PrivateFrame):
    """A private table kept by a pinqpy server; see the module docstring.

    Made by :meth:`pinqpy.remote.client.session.RemoteSession.table`; transform it exactly
    as a :class:`~pinqpy.PrivateFrame`. Every aggregation is answered and charged by the
    server, to the budget the curator gave this analyst.
    """

    __slots__ = ("_link",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise PinqError("a remote frame comes from a server session: pq.connect(url).table(name)")

    @classmethod
    def _from_file(cls, *args: Any, **kwargs: Any) -> PrivateFrame:
        raise PinqError(
            "a remote frame comes from a server session: pq.connect(url).table(name); "
            "use pq.PrivateFrame.from_csv / from_parquet for a local file"
        )

    @classmethod
    def _over(cls, rel: Relation, link: Transport) -> RemoteFrame:
        """A frame over ``rel`` whose aggregations go to the server behind ``link``."""
        frame = object.__new__(cls)
        frame._rel = rel
        frame._link = link
        return frame

    def _wrap(self, rel: Relation) -> RemoteFrame:  # type: ignore[override]
        """A frame over ``rel`` (the result of a transformation of this frame) of the same
        server."""
        return type(self)._over(rel, self._link)

    # -- public metadata that differs -----------------------------------------------------
    @property
    def engine(self) -> str:
        """``"remote"``: exact aggregates are computed by the server (on the curator's
        engine, which the analyst does not see)."""
        return "remote"

    @property
    def server(self) -> str:
        """The URL of the server that keeps this frame's tables."""
        return self._link.url

    def __repr__(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self._rel.meta.schema.items())
        try:
            parts = []
            for b, k in self._rel.stabilities().items():
                label = getattr(b, "name", repr(b))
                stab = "inf" if k == INF else str(k)
                parts.append(f"stability={stab}, budget={label!r}")
        except Exception:  # pragma: no cover - repr must never fail
            parts = []
        unit = f", privacy_unit={self._rel.privacy_unit!r}" if self._rel.privacy_unit else ""
        stabs = "; ".join(parts)
        return f"RemoteFrame([{cols}]{unit}, {stabs}, server={self._link.url!r})"

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(repr(self))}</pre>"

    def __reduce__(self) -> None:
        raise PinqError("a remote frame cannot be pickled: it belongs to one server connection")

    # -- transformations that combine frames or take expressions ---------------------------
    def _same_server(self, other: object, what: str) -> None:
        if isinstance(other, RemoteFrame) and other._link is self._link:
            return
        if isinstance(other, PrivateFrame):
            raise PinqError(
                f"{what} needs both frames from the same server session: a remote frame "
                "cannot be combined with a local frame or one of another connection"
            )

    join = _same_server_transformation(PrivateFrame.join)

    def _set_op(self, other: PrivateFrame, kind: Any) -> PrivateFrame:
        self._same_server(other, kind)
        return super()._set_op(other, kind)

    where = _checked_transformation(PrivateFrame.where)
    filter = where
    select = _checked_transformation(PrivateFrame.select)
    assign = _checked_transformation(PrivateFrame.assign)

    def groupby(self, *keys: str | list[str]) -> GroupedFrame:
        grouped = super().groupby(*keys)
        return RemoteGroupedFrame(self, grouped._keys)

    groupby.__doc__ = PrivateFrame.groupby.__doc__

    def partition(
        self, columns: str | Iterable[str], keys: Iterable[Hashable] | None = None
    ) -> Partition[PrivateFrame]:
        ref, rel = self._rel.partition(columns, keys)
        return RemotePartition(self, rel, ref, self._wrap)

    partition.__doc__ = PrivateFrame.partition.__doc__

    # -- aggregations: asked of the server ----------------------------------------------------
    def _aggregate(self, method: str, arguments: Mapping[str, Any]) -> Any:
        """Ask the server for ``method`` (one of FRAME_AGGREGATIONS, whose remote twins the
        class decorator installs) with the call's bound ``arguments``."""
        return self._link.result("POST", "/aggregate", _request(self._rel, method, arguments))


class RemoteGroupedFrame(GroupedFrame):
    """:meth:`RemoteFrame.groupby`'s pending result: ``agg`` makes a remote frame."""

    __slots__ = ()

    def agg(self, **aggs: str | Expression) -> PrivateFrame:
        _find_callable(aggs, "agg's argument 'aggs'")
        calls = {n: unwrap(v) for n, v in aggs.items()}
        frame = self._frame
        assert isinstance(frame, RemoteFrame)
        return frame._wrap(frame._rel.aggregate(self._keys, calls))

    agg.__doc__ = GroupedFrame.agg.__doc__


@_asked_of_the_server(Partition, AGGREGATIONS)
class RemotePartition(Partition[PrivateFrame]):
    """A partition of a remote frame: its parts are remote frames, and each per-key
    aggregation is one request that names the partition (its columns and keys), so the
    server charges it once for all parts, as locally."""

    def _aggregate(self, method: str, arguments: Mapping[str, Any]) -> Any:
        frame = self._frame
        assert isinstance(frame, RemoteFrame)
        partition = {
            "columns": list(self._ref.key_columns),
            "keys": protocol.encode_value(list(self._ref.keys)),
            "id": self._ref.agent,
        }
        doc = _request(self._rel, method, arguments, partition)
        return frame._link.result("POST", "/aggregate", doc)

    def __repr__(self) -> str:
        return "Remote" + super().__repr__()
