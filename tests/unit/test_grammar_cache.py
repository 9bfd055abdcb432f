"""The LALR tables of the SQL grammar kept on disk between processes (pinqpy.core.grammar)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from pinqpy.core import grammar

STATEMENTS = [
    "SELECT COUNT(*) FROM people WHERE age > 30",
    "SELECT sex, AVG(income) AS m FROM people GROUP BY sex",
    "SELECT * FROM a JOIN b ON a.k = b.k WHERE NOT (x IS NULL OR y <> 'it''s')",
]


def build(start: str = "statement", positions: bool = False):
    return grammar.get_parser.__wrapped__(start, positions)  # not the in-process cache


def loaded_from_cache(caplog: pytest.LogCaptureFixture) -> bool:
    return any("Loading grammar from cache" in r.getMessage() for r in caplog.records)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PINQPY_CACHE_DIR", str(folder))
    return folder


def test_the_tables_are_written_once_and_read_back(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="lark")
    fresh = build()
    files = list(cache_dir.iterdir())
    assert len(files) == 1 and not loaded_from_cache(caplog)
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    cached = build()
    assert loaded_from_cache(caplog)
    for text in STATEMENTS:
        assert cached.parse(text) == fresh.parse(text)
    # Another start rule or option set is another file, never a table of the wrong parser.
    build("expression_start", positions=True)
    assert len(list(cache_dir.iterdir())) == 2


def test_a_damaged_cache_file_is_rebuilt(cache_dir: Path) -> None:
    fresh = build()
    (path,) = cache_dir.iterdir()
    path.write_bytes(path.read_bytes()[:1000])  # cut short, as by a writer that died
    assert build().parse(STATEMENTS[1]) == fresh.parse(STATEMENTS[1])
    path.write_bytes(b"not the grammar's hash\n")
    assert build().parse(STATEMENTS[0]) == fresh.parse(STATEMENTS[0])


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_folder_others_can_write_is_not_used(cache_dir: Path) -> None:
    cache_dir.mkdir(mode=0o700)
    cache_dir.chmod(0o777)  # anyone could plant a pickle here
    assert grammar._cache_dir() is None
    build()
    assert list(cache_dir.iterdir()) == []


def test_an_empty_setting_turns_the_cache_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PINQPY_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert grammar._cache_dir() is None
    build()
    assert list(tmp_path.iterdir()) == []


def test_the_default_folder_is_under_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PINQPY_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert grammar._cache_dir() == tmp_path / "pinqpy"


def test_the_fast_sql_driver_runs_on_tables_read_from_the_cache(cache_dir: Path) -> None:
    # A parser loaded from lark's cache lacks attributes a freshly built one has
    # (ignore_tokens); the fast driver must read only what both carry.
    from pinqpy.sql.parser import _FastParser

    fresh = build()
    cached = build()
    assert list(cache_dir.iterdir())
    for text in STATEMENTS:
        assert _FastParser(cached).parse(text) == fresh.parse(text)
