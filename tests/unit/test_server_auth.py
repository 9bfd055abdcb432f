"""Analyst tokens: stored only as hashes in a 0600 file, verified against every hash."""

from __future__ import annotations

import json
import os
import stat

import pytest

from pinqpy.errors import PinqError
from pinqpy.remote.server.auth import TokenStore, hash_token


def test_a_token_is_returned_once_and_only_its_hash_is_stored(tmp_path):
    path = tmp_path / "tokens.json"
    store = TokenStore(path, ["alice", "bob"])
    token = store.add("alice")
    assert len(token) >= 40
    text = path.read_text()
    assert token not in text
    assert json.loads(text) == {"alice": hash_token(token)}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert store.verify(token) == "alice"
    assert store.verify(token + "x") is None
    assert store.verify("") is None
    assert store.verify(None) is None
    assert store.verify("x" * 10_000) is None


def test_a_new_token_replaces_the_old_and_a_running_store_sees_it(tmp_path):
    path = tmp_path / "tokens.json"
    server = TokenStore(path, ["alice", "bob"])
    assert server.load() == []
    first = TokenStore(path, ["alice", "bob"]).add("alice")
    bob = TokenStore(path, ["alice", "bob"]).add("bob")
    assert server.verify(first) == "alice" and server.verify(bob) == "bob"
    second = TokenStore(path, ["alice", "bob"]).add("alice")
    assert server.verify(second) == "alice"
    assert server.verify(first) is None
    assert server.verify(bob) == "bob"


def test_only_the_configs_analysts_count(tmp_path):
    path = tmp_path / "tokens.json"
    token = TokenStore(path, ["alice", "carol"]).add("carol")
    assert TokenStore(path, ["alice"]).verify(token) is None  # carol left the config
    with pytest.raises(PinqError, match=r"'mallory' is not an analyst of this config"):
        TokenStore(path, ["alice"]).add("mallory")


def test_a_file_others_can_write_or_a_foreign_file_is_refused(tmp_path):
    path = tmp_path / "tokens.json"
    TokenStore(path, ["alice"]).add("alice")
    os.chmod(path, 0o666)
    with pytest.raises(PinqError, match=r"writable by other users.*run chmod 600"):
        TokenStore(path, ["alice"]).load()
    os.chmod(path, 0o600)
    path.write_text('{"alice": "not a hash"}')
    with pytest.raises(PinqError, match="is not a pinqpy tokens file"):
        TokenStore(path, ["alice"]).load()
    path.write_text("{")
    with pytest.raises(PinqError, match="cannot be read as JSON"):
        TokenStore(path, ["alice"]).load()


def test_analysts_added_at_once_all_keep_their_token(tmp_path):
    import threading

    path = tmp_path / "tokens.json"
    names = [f"a{i}" for i in range(12)]
    tokens: dict[str, str] = {}

    def add(name: str) -> None:
        tokens[name] = TokenStore(path, names).add(name)  # a store each, as processes have

    threads = [threading.Thread(target=add, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = TokenStore(path, names)
    assert {n: store.verify(tok) for n, tok in tokens.items()} == {n: n for n in names}
