"""The analyst's client without a pinqpy server: a stand-in answers from local frames over a
small HTTP server in a thread on 127.0.0.1, so the client's own rules (what it refuses before
sending, what it never reads, how it names things) are checked quickly. The real server is
tested in tests/remote."""

from __future__ import annotations

import contextlib
import functools
import http.server
import inspect
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.api.frame import PrivateFrame
from pinqpy.api.partition import Partition
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.nodes import PublicJoin
from pinqpy.plan.serialize import plan_from_data, plan_to_data
from pinqpy.remote import protocol
from pinqpy.remote.client import session as client_session
from pinqpy.remote.client.budget import RemoteBudget
from pinqpy.remote.client.frame import RemoteFrame, RemotePartition

TOKEN = "the-analyst-token-0123456789"


# -- a stand-in server ---------------------------------------------------------------------
@dataclass
class Request:
    """What the stand-in reads of a request."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    content: bytes


Reply = tuple[int, bytes]


@contextlib.contextmanager
def serving(handler: Callable[[Request], Reply]) -> Iterator[str]:
    """``handler`` answering HTTP on 127.0.0.1 in a thread; yields the base URL."""

    class Handle(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the server

        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            request = Request(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                self.rfile.read(size),
            )
            status, body = handler(request)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _cost(c: pq.Cost) -> dict[str, str]:
    return {"epsilon": str(Fraction(c.epsilon)), "delta": str(Fraction(c.delta))}


class StandIn:
    """Answers the client's requests from local frames (the same calls the server makes).

    Not a server: it trusts the plan's table ids and agent names, which a real server never
    does. Parts of a partition (plans with PartSource nodes) are not served.
    """

    def __init__(self, frames: dict[str, PrivateFrame]) -> None:
        self.frames = frames
        self.requests: list[tuple[str, str]] = []
        self.session = pq.Session()
        for name, frame in frames.items():
            self.session.register(name, frame)

    def budgets(self) -> list[tuple[str, pq.Budget, list[str]]]:
        out: dict[int, tuple[pq.Budget, list[str]]] = {}
        for name, frame in self.frames.items():
            (budget,) = frame.stabilities
            out.setdefault(id(budget), (budget, []))[1].append(name)
        return [(f"analyst:a/{names[0]}", b, names) for b, names in out.values()]

    def budget_docs(self) -> list[dict[str, Any]]:
        return [
            {
                "name": label,
                "tables": names,
                "accounting": b.accounting,
                "total": _cost(b.total),
                "spent": _cost(b.spent),
                "remaining": _cost(b.remaining),
            }
            for label, b, names in self.budgets()
        ]

    url = ""

    def handler(self, request: Request) -> Reply:
        self.requests.append((request.method, request.path))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            err = pq.PinqError("a valid analyst token is required (Authorization: Bearer <token>)")
            return self.reply({"error": protocol.encode_error(err)}, 401)
        try:
            return self.reply(self.answer(request))
        except pq.BudgetExceededError as err:
            return self.reply({"error": protocol.encode_error(err)}, 409)
        except pq.PinqError as err:
            return self.reply({"error": protocol.encode_error(err)}, 400)

    @staticmethod
    def reply(doc: Any, status: int = 200) -> Reply:
        return status, protocol.dumps(doc)

    def answer(self, request: Request) -> Any:
        path = request.path
        if path == "/v1/session":
            labels = {id(b): label for label, b, _ in self.budgets()}
            tables = [
                {"name": n, "plan": plan_to_data(f._plan), "budget": labels[id(f.budgets[0])]}
                for n, f in self.frames.items()
            ]
            doc = {
                "analyst": "a",
                "version": pq.__version__,
                "tables": tables,
                "budgets": self.budget_docs(),
                "limits": {},
            }
            return {"result": doc}
        if path == "/v1/budget":
            return {"result": {"budgets": self.budget_docs()}}
        doc = protocol.loads(request.content)
        if path == "/v1/sql":
            run = self.session.explain if doc["explain"] else self.session.sql
            return {
                "result": protocol.encode_result(run(doc["query"], doc["epsilon"], doc["delta"]))
            }
        assert path == "/v1/aggregate", path
        plan = plan_from_data(doc["plan"])
        catalog = functools.reduce(
            lambda c, f: c.merge(f._rel.catalog),
            self.frames.values(),
            next(iter(self.frames.values()))._rel.catalog,
        )
        stack = [plan]
        while stack:
            node = stack.pop()
            if isinstance(node, PublicJoin):
                rows = protocol.decode_frame(doc["public"][node.public.id])
                catalog = catalog.with_public(node.public, rows)
            stack.extend(node.children)
        frame = PrivateFrame._wrap(Relation(plan, catalog))
        target: Any = frame
        if doc["partition"] is not None:
            part = doc["partition"]
            target = frame.partition(part["columns"], protocol.decode_value(part["keys"]))
        result = getattr(target, doc["method"])(**protocol.decode_args(doc["args"]))
        return {"result": protocol.encode_result(result)}


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    budget = pq.Budget(epsilon=100, delta=1e-6)
    pums = pq.PrivateFrame(load_pums(), budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS, name="pums")
    server = StandIn({"pums": pums})
    with serving(server.handler) as url:
        server.url = url
        yield server


@pytest.fixture
def session(standin: StandIn) -> Iterator[client_session.RemoteSession]:
    with pq.connect(standin.url, token=TOKEN) as s:
        yield s


# -- the same API ------------------------------------------------------------------------------
AGGREGATIONS = ["count", "sum", "mean", "median", "quantile", "argmax", "select_keys", "accuracy"]


def test_aggregations_have_the_local_signatures_and_docstrings():
    for name in AGGREGATIONS:
        local, remote = getattr(PrivateFrame, name), getattr(RemoteFrame, name)
        assert inspect.signature(remote) == inspect.signature(local), name
        assert remote.__doc__ == local.__doc__, name
    for name in ["count", "sum", "mean", "median", "quantile", "argmax"]:
        local, remote = getattr(Partition, name), getattr(RemotePartition, name)
        assert inspect.signature(remote) == inspect.signature(local), name
    for name in ["where", "select", "assign", "join", "groupby", "partition"]:
        assert getattr(RemoteFrame, name).__doc__ == getattr(PrivateFrame, name).__doc__


def test_remote_answers_and_charges_are_the_local_ones(session, standin):
    budget = standin.frames["pums"].budgets[0]
    pums = session.table("pums")
    assert isinstance(pums, pq.PrivateFrame) and pums.engine == "remote"
    assert pums.columns == standin.frames["pums"].columns
    assert pums.bounds == standin.frames["pums"].bounds
    with pq.testing.no_noise():
        assert pums.count(epsilon=0.5) == 1000
        assert pums.where(pq.col("age") >= 30).count(0.5) == (load_pums()["age"] >= 30).sum()
        counts = pums.partition("sex").count(epsilon=0.25)
        assert list(counts) == [486, 514]
        assert counts.ci(0.9) is not None
        degrees = pums.groupby("educ").agg(n="COUNT(*)")
        assert isinstance(degrees, RemoteFrame) and degrees.stability == 2
        names = pd.DataFrame({"sex": [0, 1], "label": ["f", "m"]})
        joined = pums.join(names, on="sex").partition("label", keys=["f", "m"])
        assert isinstance(joined, RemotePartition)
        assert list(joined.count(epsilon=0.25)) == [486, 514]
        assert pums.argmax("educ", candidates=range(1, 17), epsilon=0.5) == 9
        assert pums.select_keys("sex", epsilon=1, delta=1e-7) == [0, 1]
    assert budget.spent == pq.Cost(3, Fraction(1, 10**7))
    assert session.budget.spent == budget.spent
    assert session.budgets == {"pums": session.budget}
    preview = pums.accuracy("count", epsilon=0.1)
    assert preview.error == 30.0
    assert budget.spent.epsilon == 3  # a preview charges nothing


def test_the_stub_table_is_never_read(standin, monkeypatch):
    """Every transformation and aggregation of a remote frame works with a catalog whose
    tables raise on any use: the client never reads the table it stands for."""

    class Tripwire(pd.DataFrame):
        armed = False

        def __getattribute__(self, name: str) -> Any:
            if type(self).armed:
                raise AssertionError(f"the stub table was read ({name})")
            return super().__getattribute__(name)

        def _trip(self, *args: object, **kwargs: object) -> Any:
            raise AssertionError("the stub table was read")

        __len__ = __iter__ = __getitem__ = __contains__ = __array__ = _trip  # type: ignore[assignment]

    monkeypatch.setattr(
        client_session, "_stub", lambda table: Tripwire({c: [] for c in table.columns})
    )
    with pq.connect(standin.url, token=TOKEN) as s:
        pums = s.table("pums")
        stub = pums._rel.catalog.data(pums._plan.table)
        Tripwire.armed = True
        try:
            for touch in (len, lambda t: t.shape, lambda t: t["age"], lambda t: t.iloc):
                with pytest.raises(AssertionError, match="the stub table was read"):
                    touch(stub)  # the tripwire works
            other = pums.where("age > 60").select("age", "sex", "educ")
            frames = [
                pums.where("age > 30").assign(decade="FLOOR(age / 10)"),
                pums.select("sex", "educ").distinct(),
                pums.groupby("sex", "educ").agg(n="COUNT(*)"),
                pums.join(pd.DataFrame({"sex": [0, 1], "x": [1.5, 2.5]}), on="sex"),
                pums.select("age", "sex", "educ").concat(other),
                pums.select("age", "sex", "educ").union(other),
                pums.select("age", "sex", "educ").intersect(other),
                pums.select("age", "sex", "educ").difference(other),
                pums.groupby("educ")
                .agg(n="COUNT(*)")
                .join(pums.groupby("educ").agg(m="AVG(age)"), on="educ"),
            ]
            with pq.testing.no_noise():
                for frame in frames:
                    repr(frame), frame._repr_html_(), frame.engine, frame.stabilities
                    frame.count(epsilon=0.01)
                pums.sum("income", 0.01)
                pums.mean("age", 0.01)
                pums.median("age", 0.01)
                pums.quantile("age", 0.9, 0.01)
                pums.argmax("race", [1, 2, 3], 0.01)
                pums.select_keys("sex", 0.01, 1e-9)
                pums.accuracy("mean", "age", epsilon=0.01, n=1000)
                parts = pums.partition("sex")
                parts.count(0.01), parts.mean("age", 0.01), parts.argmax("race", [1, 2], 0.01)
                repr(parts), parts[0], parts[1].engine
                s.sql("SELECT COUNT(*) FROM pums", epsilon=0.01)
        finally:
            Tripwire.armed = False


# -- what the client refuses before sending --------------------------------------------------
def test_a_callable_is_refused_before_any_request(session, standin):
    pums = session.table("pums")
    before = len(standin.requests)
    fn = lambda df: df["age"]  # noqa: E731
    calls = [
        lambda: pums.where(fn),
        lambda: pums.filter(fn),
        lambda: pums.select("age", older=fn),
        lambda: pums.assign(older=fn),
        lambda: pums.groupby("sex").agg(n=fn),
        lambda: pums.sum(fn, epsilon=0.1, bounds=(0, 100)),
        lambda: pums.mean("age", epsilon=fn),
        lambda: pums.argmax("educ", candidates=[1, fn], epsilon=0.1),
        lambda: pums.partition("sex").mean(fn, 0.1, (0, 1)),
        lambda: pums.accuracy("sum", fn, epsilon=0.1),
    ]
    for call in calls:
        with pytest.raises(pq.PinqError, match="callable, which cannot be sent to a pinqpy server"):
            call()
    assert len(standin.requests) == before
    assert standin.frames["pums"].budgets[0].spent == pq.Cost(0)


def test_a_remote_frame_cannot_be_combined_with_a_local_one(session, standin):
    pums = session.table("pums")
    local = pq.PrivateFrame(load_pums(), pq.Budget(1.0))
    with pytest.raises(pq.PinqError, match="same server session"):
        pums.join(local.groupby("educ").agg(n="COUNT(*)"), on="educ")
    with pytest.raises(pq.PinqError, match="same server session"):
        pums.concat(local)
    # The other way round the local frame's own join runs; its aggregation is refused before
    # any data is read, since only the server can charge the remote budget.
    mixed = local.concat(pums)
    before = len(standin.requests)
    with pytest.raises(pq.PinqError, match="only that server can charge it"):
        mixed.count(epsilon=0.1)
    assert local.budgets[0].spent == pq.Cost(0)
    assert len(standin.requests) == before


def test_wrong_arguments_fail_as_locally(session, standin):
    pums = session.table("pums")
    before = len(standin.requests)
    with pytest.raises(TypeError):
        pums.count(0.1, 0.2)  # delta is keyword-only
    with pytest.raises(TypeError):
        pums.mean()
    assert len(standin.requests) == before
    # Checked by the server: the same class and message as locally.
    local = standin.frames["pums"]
    for call in (lambda f: f.mean("agee", 0.1), lambda f: f.count(epsilon=-1)):
        with pytest.raises(pq.PinqError) as remote_err:
            call(pums)
        with pytest.raises(pq.PinqError) as local_err:
            call(local)
        assert type(remote_err.value) is type(local_err.value)
        assert str(remote_err.value) == str(local_err.value)


# -- names, reprs and the connection -----------------------------------------------------------
def test_reprs_name_the_server_never_the_token(session, standin):
    pums = session.table("pums")
    texts = [
        repr(session),
        session._repr_html_(),
        repr(pums),
        pums._repr_html_(),
        repr(pums.partition("sex")),
        repr(session.budget),
    ]
    for text in texts:
        assert TOKEN not in text
    assert repr(session) == f"RemoteSession({standin.url!r}, analyst='a')"
    assert f"server={standin.url!r}" in repr(pums)
    assert repr(pums).startswith("RemoteFrame([age: int")
    assert pums.server == standin.url
    budget = session.budget
    assert isinstance(budget, RemoteBudget) and budget.name == "analyst:a/pums"
    assert hash(budget) == hash(session.budgets["pums"])
    assert pums.stabilities == {budget: 1}
    assert budget.total == pq.Cost(100, Fraction(1, 10**6))
    assert budget.accounting == "approx"
    with pytest.raises(pq.PinqError, match="cannot be pickled"):
        pickle.dumps(pums)
    with pytest.raises(pq.PinqError, match="cannot be pickled"):
        pickle.dumps(session)
    with pytest.raises(pq.PinqError, match="comes from a server session"):
        RemoteFrame(load_pums(), pq.Budget(1.0))
    with pytest.raises(pq.PinqError, match="no private table named 'people'"):
        session.table("people")


def test_a_closed_session_refuses_requests(standin):
    s = pq.connect(standin.url, token=TOKEN)
    pums = s.table("pums")
    s.close()
    assert s.closed
    with pytest.raises(pq.PinqError, match="is closed"):
        pums.count(epsilon=0.1)


def test_a_wrong_token_is_the_servers_error(standin):
    with pytest.raises(pq.PinqError, match=r"a valid analyst token is required"):
        pq.connect(standin.url, token="not-it")


def test_connect_needs_a_token(monkeypatch):
    monkeypatch.delenv(protocol.TOKEN_ENV, raising=False)
    with pytest.raises(pq.PinqError, match="PINQPY_TOKEN"):
        pq.connect("http://127.0.0.1:9")
    for token in ("  ", "two words", "new\nline", "caf\u00e9", 42):
        with pytest.raises(pq.PinqError, match="token"):
            pq.connect("http://127.0.0.1:9", token=token)  # type: ignore[arg-type]


def test_the_token_may_come_from_the_environment(standin, monkeypatch):
    monkeypatch.setenv(protocol.TOKEN_ENV, TOKEN)
    with pq.connect(standin.url) as s:
        assert s.analyst == "a"


@pytest.mark.parametrize(
    "url", ["", "127.0.0.1:8765", "ftp://host", "http://", "http://u:p@host", "http://h/?q=1", 3]
)
def test_a_bad_url_is_refused_before_connecting(url):
    with pytest.raises(pq.PinqError, match="URL"):
        pq.connect(url, token=TOKEN)


def test_a_bad_timeout_is_refused():
    for timeout in (0, -1, float("inf"), True, "5"):
        with pytest.raises(pq.PinqError, match="timeout"):
            pq.connect("http://127.0.0.1:9", token=TOKEN, timeout=timeout)  # type: ignore[arg-type]


def test_an_unreachable_server_is_a_clear_error():
    import socket

    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(pq.PinqError, match=f"the pinqpy server at {url} cannot be reached"):
        pq.connect(url, token=TOKEN, timeout=5)


def test_an_answer_that_is_not_pinqpys_is_a_clear_error():
    not_pinqpy = r"did not answer as a pinqpy server \(HTTP 404\)"
    with (
        serving(lambda request: (404, b"<html>no</html>")) as url,
        pytest.raises(pq.PinqError, match=not_pinqpy),
    ):
        pq.connect(url, token=TOKEN)


def test_a_connection_the_server_closed_is_opened_again(standin):
    with pq.connect(standin.url, token=TOKEN) as s:
        pums = s.table("pums")
        s._transport._conn.sock.shutdown(2)  # as a server closes an idle connection
        # Answered (the stand-in's budget then has this question cached: the same value).
        assert pums.count(epsilon=0.5) == standin.frames["pums"].count(epsilon=0.5)
        s._transport._conn.close()
        assert isinstance(s.budget.spent, pq.Cost)


def test_the_client_needs_no_http_library_beyond_the_standard_one():
    code = (
        "import sys; sys.modules['httpx'] = None; sys.modules['requests'] = None\n"
        "import pinqpy; from pinqpy.remote.client import transport; print(pinqpy.connect)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_every_method_has_the_local_signature():
    for name in ["where", "filter", "select", "assign", "join", "groupby", "partition"]:
        local, remote = getattr(PrivateFrame, name), getattr(RemoteFrame, name)
        assert inspect.signature(remote) == inspect.signature(local), name
