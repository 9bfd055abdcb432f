"""Where the command line keeps its ledger: the user's state directory on each platform, and
how ``--ledger``/``--no-ledger`` and the table files choose the ledger and budget names."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

import pytest

from pinqpy.interfaces import state_dir as sd
from pinqpy.interfaces.errors import CliError
from pinqpy.interfaces.tables import TableSpec, ledger_budget_name, ledger_path

HOME = Path("/home/ann")


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        ({}, "linux", HOME / ".local/state/pinqpy"),
        ({"XDG_STATE_HOME": "/var/state"}, "linux", Path("/var/state/pinqpy")),
        ({"XDG_STATE_HOME": "relative/state"}, "linux", HOME / ".local/state/pinqpy"),
        ({"XDG_STATE_HOME": ""}, "freebsd14", HOME / ".local/state/pinqpy"),
        ({}, "darwin", HOME / "Library/Application Support/pinqpy"),
        ({"XDG_STATE_HOME": "/var/state"}, "darwin", HOME / "Library/Application Support/pinqpy"),
        ({"LOCALAPPDATA": "/c/Users/ann/Local"}, "win32", Path("/c/Users/ann/Local/pinqpy")),
        ({}, "win32", HOME / "AppData/Local/pinqpy"),
        ({"PINQPY_STATE_DIR": "/srv/pq", "XDG_STATE_HOME": "/var/state"}, "linux", Path("/srv/pq")),
        ({"PINQPY_STATE_DIR": "/srv/pq"}, "darwin", Path("/srv/pq")),
        ({"PINQPY_STATE_DIR": "/srv/pq", "LOCALAPPDATA": "/c/x"}, "win32", Path("/srv/pq")),
        ({"PINQPY_STATE_DIR": ""}, "linux", HOME / ".local/state/pinqpy"),
    ],
)  # fmt: skip
def test_state_dir_on_each_platform(environ: dict[str, str], platform: str, expected: Path) -> None:
    assert sd.state_dir(environ, platform, HOME) == expected
    assert sd.default_ledger_path(environ, platform, HOME) == expected / "ledger.db"


def test_state_dir_reads_this_process_environment_and_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PINQPY_STATE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(sys, "platform", "linux")
    assert sd.state_dir() == tmp_path / "xdg" / "pinqpy"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert sd.state_dir(home=tmp_path) == tmp_path / "Library" / "Application Support" / "pinqpy"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert sd.state_dir() == tmp_path / "local" / "pinqpy"
    monkeypatch.setenv("PINQPY_STATE_DIR", str(tmp_path / "mine"))
    assert sd.state_dir() == tmp_path / "mine"


def test_tests_never_use_the_real_state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The autouse fixture in tests/conftest.py gives every test a directory of its own.
    configured = Path(os.environ["PINQPY_STATE_DIR"])
    assert sd.state_dir() == configured
    assert tmp_path_factory.getbasetemp() in configured.parents


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_ensure_dir_creates_the_folder_for_its_owner_only(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "pinqpy"
    assert sd.ensure_dir(target) == target
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    # An existing folder is left as the user made it.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    sd.ensure_dir(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**({"ledger": None, "no_ledger": False} | kw))


def test_ledger_path_defaults_to_the_state_dir_and_creates_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PINQPY_STATE_DIR", str(tmp_path / "state"))
    path = ledger_path(_args())
    assert path == tmp_path / "state" / "ledger.db"
    assert path.parent.is_dir()
    assert not path.exists()  # the Ledger creates the file itself


def test_ledger_and_no_ledger_choose_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PINQPY_STATE_DIR", str(tmp_path / "state"))
    assert ledger_path(_args(no_ledger=True)) is None
    assert ledger_path(_args(ledger=str(tmp_path / "mine.db"))) == tmp_path / "mine.db"
    assert not (tmp_path / "state").exists()  # neither touched the state directory


def test_a_state_dir_that_cannot_be_made_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("PINQPY_STATE_DIR", str(tmp_path / "file" / "state"))
    with pytest.raises(CliError) as info:
        ledger_path(_args())
    message = str(info.value)
    assert "cannot create the folder" in message
    assert "PINQPY_STATE_DIR" in message and "--ledger PATH" in message
    assert "\n" not in message


def test_budget_names_identify_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    relative = ledger_budget_name(TableSpec("people", Path("people.csv")))
    assert relative == f"people@{(tmp_path / 'a' / 'people.csv').resolve()}"
    other = ledger_budget_name(TableSpec("people", tmp_path / "b" / "people.csv"))
    assert other != relative  # same table name, another file: another budget
    monkeypatch.chdir(tmp_path)
    assert ledger_budget_name(TableSpec("people", Path("a/people.csv"))) == relative
    assert ledger_budget_name(TableSpec("folks", Path("a/people.csv"))) != relative
