"""The curator's config keys (log, curator_token_sha256), the request log's lines, and the
dashboard's credentials: the curator's token by its hash, signed short-lived sessions."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from pinqpy.remote.server.auth import hash_token, new_token
from pinqpy.remote.server.config import STDERR, ConfigError, load_config
from pinqpy.remote.server.replies import Reply
from pinqpy.remote.server.requestlog import RequestLog, Seen
from pinqpy.remote.server.sessions import (
    COOKIE,
    MAX_SESSIONS,
    CuratorKey,
    Sessions,
    bearer,
    same_origin,
)

CONFIG = """
[server]
{server}
[tables.people]
source = "csv"
path = "people.csv"
[analysts.alice]
tables = ["people"]
budget = {{ epsilon = 1 }}
"""


def config(tmp_path: Path, server: str = "") -> Path:
    (tmp_path / "people.csv").write_text("age\n30\n")
    p = tmp_path / "server.toml"
    p.write_text(CONFIG.format(server=server))
    return p


# -- config ------------------------------------------------------------------------------------
def test_the_log_goes_to_standard_error_unless_the_config_says_otherwise(tmp_path):
    assert load_config(config(tmp_path)).log == STDERR
    assert load_config(config(tmp_path, 'log = "-"')).log == STDERR
    assert load_config(config(tmp_path, "log = false")).log is None
    (tmp_path / "logs").mkdir()
    cfg = load_config(config(tmp_path, 'log = "logs/requests.jsonl"'))
    assert cfg.log == tmp_path / "logs" / "requests.jsonl"  # relative to the config file


@pytest.mark.parametrize(
    ("line", "fix"),
    [
        ("log = true", "false (no log)"),
        ("log = 3", "a file name"),
        ('log = "nodir/requests.jsonl"', "does not exist"),
        ('curator_token_sha256 = "abc"', "64 hex digits"),
        ("curator_token_sha256 = 5", "never the token"),
    ],
)
def test_a_bad_log_or_curator_hash_names_the_key_and_the_fix(tmp_path, line, fix):
    with pytest.raises(ConfigError) as err:
        load_config(config(tmp_path, line))
    key = line.split(" ")[0]
    assert f"server.{key}" in str(err.value) and fix in str(err.value)


def test_the_token_itself_is_refused_where_its_hash_belongs(tmp_path):
    token = new_token()
    with pytest.raises(ConfigError, match="--curator-token"):
        load_config(config(tmp_path, f'curator_token_sha256 = "{token}"'))
    digest = hash_token(token)
    cfg = load_config(config(tmp_path, f'curator_token_sha256 = "{digest.upper()}"'))
    assert cfg.curator_token_sha256 == digest


# -- the request log ---------------------------------------------------------------------------
def test_a_log_file_is_appended_to_one_json_object_a_line_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text('{"earlier": true}\n')
    path.chmod(0o600)
    (tmp_path / "fresh.jsonl").unlink(missing_ok=True)
    for target in (path, tmp_path / "fresh.jsonl"):
        log = RequestLog.open(target)
        assert log is not None
        charged = [{"table": "people", "budget": "analyst:alice/people", "epsilon": "1/10",
                    "delta": "0"}]  # fmt: skip
        log.write(Seen("alice", "analyst", charged, ["people"]), method="POST", endpoint="/v1/sql",
                  status=200, ms=12.345)  # fmt: skip
        log.write(Seen(), method="GET", endpoint="other", status=401, ms=0.04)
        log.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0] == {"earlier": True}
    first, second = lines[1], lines[2]
    assert {k: first[k] for k in ("analyst", "role", "method", "endpoint", "status", "ms")} == {
        "analyst": "alice", "role": "analyst", "method": "POST", "endpoint": "/v1/sql",
        "status": 200, "ms": 12.3,
    }  # fmt: skip
    assert first["charges"][0]["epsilon"] == "1/10" and first["time"].endswith("+00:00")
    assert first["tables"] == ["people"]
    assert second["analyst"] is None and second["charges"] == [] and second["tables"] == []
    mode = stat.S_IMODE((tmp_path / "fresh.jsonl").stat().st_mode)
    assert mode == 0o600


def test_the_log_can_be_standard_error_or_nothing():
    stream = io.StringIO()
    log = RequestLog.open(STDERR, stream)
    assert log is not None
    log.write(Seen(None, None, None, None), method="GET", endpoint="/v1/budget", status=504,
              ms=1.0)  # fmt: skip
    line = json.loads(stream.getvalue())
    assert line["charges"] is None and line["tables"] is None  # not known
    assert RequestLog.open(None) is None


def test_a_replys_charges_cross_from_a_worker_and_default_to_unknown():
    charged = [{"table": "t", "budget": "analyst:a/t", "rho": "1/200"}]
    back = Reply.from_bytes(Reply(200, b'{"result":1}', charges=charged, tables=["t"]).to_bytes())
    assert back.charges == charged and back.tables == ["t"] and back.body == b'{"result":1}'
    unknown = Reply.from_bytes(Reply(504).to_bytes())
    assert unknown.charges is None and unknown.tables is None


# -- credentials -------------------------------------------------------------------------------
def test_only_the_curators_token_verifies():
    token = new_token()
    key = CuratorKey(hash_token(token))
    assert key.verify(token)
    for other in (new_token(), token[:-1], token + "x", "", None, 42, "x" * 10_000):
        assert not key.verify(other)


def test_bearer_reads_only_a_bearer_header():
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    for header in (None, "", "Basic abc", "Bearer", "Bearer   "):
        assert bearer(header) is None


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_valid_until_it_expires_or_ends_and_cannot_be_forged():
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    value = sessions.issue()
    assert sessions.valid(value)
    expiry, nonce, mac = value.split(".")
    forged = [
        f"{int(expiry) + 3600}.{nonce}.{mac}",  # a later expiry
        f"{expiry}.{nonce}x.{mac}",
        f"{expiry}.{nonce}.{mac[:-1]}",
        f"{expiry}.{nonce}",
        "",
        None,
    ]
    assert not any(sessions.valid(v) for v in forged)
    assert not Sessions(lifetime=60, clock=clock).valid(value)  # another server's secret
    clock.now += 61
    assert not sessions.valid(value)
    fresh = sessions.issue()
    sessions.end(fresh)
    assert not sessions.valid(fresh)


def test_at_most_max_sessions_live_the_oldest_ending_first():
    sessions = Sessions(lifetime=60, clock=Clock())
    values = [sessions.issue() for _ in range(MAX_SESSIONS + 1)]
    assert not sessions.valid(values[0])
    assert all(sessions.valid(v) for v in values[1:])


def test_the_cookie_is_httponly_samesite_strict_for_the_curator_paths_only():
    sessions = Sessions(lifetime=60)
    header = sessions.set_cookie("v", secure=False)
    parts = header.split("; ")
    assert parts[0] == f"{COOKIE}=v"
    assert {"Path=/curator", "Max-Age=60", "HttpOnly", "SameSite=Strict"} <= set(parts)
    assert "Secure" not in parts
    assert "Secure" in sessions.set_cookie("v", secure=True).split("; ")
    assert "Max-Age=0" in Sessions.clear_cookie(secure=False)


def test_a_post_from_another_origin_is_told_apart():
    assert same_origin("http://127.0.0.1:8765", "127.0.0.1:8765")
    assert same_origin(None, "127.0.0.1:8765")  # not a browser: SameSite guards the cookie
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999"):
        assert not same_origin(origin, "127.0.0.1:8765")
