"""The server's TOML config: every field read and checked; each error names file, key, remedy."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS
from pinqpy.remote.server.config import ConfigError, Limits, load_config, shared_sources

GOOD = """
[server]
host = "0.0.0.0"
port = 9000
ledger = "state/ledger.db"
[server.limits]
max_plan_nodes = 50
query_timeout_s = 5

[tables.people]
source = "csv"
path = "people.csv"
privacy_unit = "pid"
max_rows = 3
bounds = { age = [0, 100] }
keys = { sex = ["F", "M"] }
schema = { age = "int" }

[tables.visits]
source = "parquet"
path = "data/visits.parquet"
engine = "duckdb"

[groups.lab]
budget = { epsilon = 2.0, delta = 1e-6, accounting = "zcdp" }

[analysts.alice]
tables = ["people", "visits"]
budget = { epsilon = 1, delta = 0.000001 }

[analysts.bob]
tables = ["people"]
group = "lab"
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "people.csv").write_text("pid,age,sex\n1,30,F\n")
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "visits.parquet").write_bytes(b"")
    (tmp_path / "state").mkdir(exist_ok=True)
    p = tmp_path / "server.toml"
    p.write_text(text)
    return p


def test_a_full_config_is_read_with_paths_relative_to_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    cfg = load_config(write(tmp_path, GOOD))
    base = tmp_path.resolve()
    assert (cfg.host, cfg.port) == ("0.0.0.0", 9000)
    assert cfg.ledger == base / "state" / "ledger.db"
    assert cfg.tokens == base / "server.tokens.json"
    assert cfg.limits == Limits(max_plan_nodes=50, query_timeout_s=5.0)
    people = cfg.tables["people"]
    assert people.path == base / "people.csv"
    assert (people.engine, people.privacy_unit, people.max_rows) == ("pandas", "pid", 3)
    assert dict(people.bounds) == {"age": (0, 100)}
    assert dict(people.keys) == {"sex": ("F", "M")}
    assert dict(people.schema) == {"age": "int"}
    assert cfg.tables["visits"].engine == "duckdb"
    alice, bob = cfg.analysts["alice"], cfg.analysts["bob"]
    assert alice.tables == ("people", "visits")
    assert alice.ledger_name("visits") == "analyst:alice/visits"
    assert bob.ledger_name("people") == "group:lab/people"
    assert cfg.budget_spec(bob).accounting == "zcdp"
    assert cfg.budget_spec(alice).make().epsilon == 1
    with pytest.raises(AttributeError):
        cfg.port = 1  # type: ignore[misc]


def test_the_bundled_sample_serves_pums_with_the_demo_facts():
    path = Path(str(resources.files("pinqpy").joinpath("data", "server-demo.toml")))
    cfg = load_config(path)
    pums = cfg.tables["pums"]
    assert pums.path == path.parent / "PUMS.csv" and pums.path.is_file()
    assert dict(pums.bounds) == PUMS_BOUNDS
    assert {k: list(v) for k, v in pums.keys.items()} == PUMS_KEYS
    assert cfg.analysts["demo"].tables == ("pums",)


@pytest.mark.parametrize(
    ("old", "new", "key", "fix"),
    [
        ("port = 9000", 'port = "x"', "server.port", "whole number"),
        ("port = 9000", "port = 70000", "server.port", "at most 65535"),
        ('host = "0.0.0.0"', 'hots = "x"', "server.hots", "the settings are"),
        ("max_plan_nodes = 50", "max_plan_nodes = 0", "server.limits.max_plan_nodes", "at least"),
        ("max_plan_nodes = 50", "max_nodes = 5", "server.limits.max_nodes", "settings are"),
        ('source = "csv"', 'source = "excel"', "tables.people.source", "csv, parquet"),
        ('path = "people.csv"', 'path = "nope.csv"', "tables.people.path", "relative to the"),
        ("max_rows = 3", "max_rows = -1", "tables.people.max_rows", "at least 1"),
        ('privacy_unit = "pid"', "", "tables.people.max_rows", "needs privacy_unit"),
        ("age = [0, 100]", "age = [100, 0]", "tables.people.bounds.age", "low <= high"),
        ("age = [0, 100]", "age = [0]", "tables.people.bounds.age", "[low, high]"),
        ('sex = ["F", "M"]', "sex = []", "tables.people.keys.sex", "non-empty list"),
        ('age = "int"', 'age = "integer"', "tables.people.schema", "unknown type"),
        ('engine = "duckdb"', 'engine = "spark"', "tables.visits.engine", "pandas or duckdb"),
        ("epsilon = 1, ", "epsilon = -1, ", "analysts.alice.budget", "positive"),
        ("delta = 0.000001", "delta = 2", "analysts.alice.budget", "below 1"),
        ('accounting = "zcdp"', 'accounting = "renyi"', "groups.lab.budget", "unknown accounting"),
        ('group = "lab"', 'group = "lob"', "analysts.bob.group", "[groups.lob]"),
        ('tables = ["people"]', 'tables = ["secret"]', "analysts.bob.tables", "not a table"),
        ('tables = ["people"]', "tables = []", "analysts.bob.tables", "must list"),
        ('group = "lab"', "", "analysts.bob", "exactly one of"),
        ("[analysts.bob]", "[analysts.'bob smith']", "analysts.bob smith", "letters, digits"),
        ("[tables.visits]", "[tables.'my visits']", "tables.my visits", "so SQL can name"),
        ('ledger = "state/ledger.db"', 'ledger = "nodir/l.db"', "server.ledger", "create it"),
        ("query_timeout_s = 5", "header_timeout_s = 0", "server.limits.header_timeout_s",
         "positive"),
        ("query_timeout_s = 5", "max_requests = 0", "server.limits.max_requests", "at least 1"),
        ("query_timeout_s = 5", "max_running = 1.5", "server.limits.max_running", "whole number"),
    ],
)
def test_each_bad_value_names_the_file_the_key_and_the_fix(tmp_path, old, new, key, fix):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert str(path.resolve()) in msg
    assert f": {key}: " in msg
    assert fix in msg


def test_a_duckdb_source_needs_database_and_table(tmp_path):
    (tmp_path / "db.duckdb").write_bytes(b"")
    text = GOOD.replace(
        'source = "parquet"\npath = "data/visits.parquet"\nengine = "duckdb"',
        'source = "duckdb"\ndatabase = "db.duckdb"',
    )
    with pytest.raises(ConfigError, match=r"tables\.visits: a duckdb source needs database"):
        load_config(write(tmp_path, text))
    cfg = load_config(
        write(
            tmp_path, text.replace('database = "db.duckdb"', 'database = "db.duckdb"\ntable = "v"')
        )
    )
    visits = cfg.tables["visits"]
    assert (visits.source, visits.engine, visits.table) == ("duckdb", "duckdb", "v")
    assert visits.database == (tmp_path / "db.duckdb").resolve()


def test_missing_file_bad_toml_and_no_tables_or_analysts(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"tables: the config serves no table"):
        load_config(write(tmp_path, "[server]\n"))
    only = GOOD[: GOOD.index("[groups.lab]")]
    with pytest.raises(ConfigError, match=r"analysts: the config names no analyst"):
        load_config(write(tmp_path, only))


def test_tls_needs_both_files(tmp_path):
    (tmp_path / "c.pem").write_text("x")
    text = GOOD.replace("[server.limits]", 'tls_certfile = "c.pem"\n[server.limits]')
    with pytest.raises(ConfigError, match="TLS needs both"):
        load_config(write(tmp_path, text))
    (tmp_path / "k.pem").write_text("x")
    text = text.replace('tls_certfile = "c.pem"', 'tls_certfile = "c.pem"\ntls_keyfile = "k.pem"')
    cfg = load_config(write(tmp_path, text))
    assert cfg.tls_keyfile == (tmp_path / "k.pem").resolve()


def test_the_work_and_connection_limits_are_read(tmp_path):
    text = GOOD.replace(
        "query_timeout_s = 5",
        "query_timeout_s = 5\nmax_requests = 10\nmax_requests_per_analyst = 2\nmax_running = 3\n"
        "header_timeout_s = 2.5\nmax_connections = 40",
    )
    limits = load_config(write(tmp_path, text)).limits
    assert (limits.max_requests, limits.max_requests_per_analyst, limits.max_running) == (10, 2, 3)
    assert (limits.header_timeout_s, limits.max_connections) == (2.5, 40)
    assert Limits().max_running >= 2  # the CPUs this process may use, at least 2


TWO_OVER_ONE = """
[tables.people]
source = "csv"
path = "people.csv"
[tables.again]
source = "csv"
path = "{again}"
[tables.other]
source = "csv"
path = "other.csv"
[analysts.alice]
tables = ["people"]
budget = {{ epsilon = 1 }}
"""


@pytest.mark.parametrize("again", ["people.csv", "./data/../people.csv", "link.csv", "hard.csv"])
def test_two_tables_over_one_file_are_found(tmp_path, again):
    (tmp_path / "other.csv").write_text("pid\n1\n")
    write(tmp_path, "")
    (tmp_path / "link.csv").symlink_to(tmp_path / "people.csv")
    (tmp_path / "hard.csv").hardlink_to(tmp_path / "people.csv")
    cfg = load_config(write(tmp_path, TWO_OVER_ONE.format(again=again)))
    first, second = (str(cfg.tables[t].path) for t in ("people", "again"))
    also = "" if first == second else f" (also named {second})"
    assert shared_sources(cfg) == [("people", "again", first + also)]


def test_tables_over_different_files_or_database_tables_are_not(tmp_path):
    (tmp_path / "other.csv").write_text("pid\n1\n")
    (tmp_path / "db.duckdb").write_bytes(b"")
    cfg = load_config(write(tmp_path, TWO_OVER_ONE.format(again="other.csv")))
    assert shared_sources(cfg) == [("again", "other", str(cfg.tables["other"].path))]
    text = TWO_OVER_ONE.format(again="other.csv").replace(
        '[tables.again]\nsource = "csv"\npath = "other.csv"',
        '[tables.again]\nsource = "duckdb"\ndatabase = "db.duckdb"\ntable = "people"\n'
        '[tables.third]\nsource = "duckdb"\ndatabase = "db.duckdb"\ntable = "visits"\n'
        '[tables.fourth]\nsource = "duckdb"\ndatabase = "./db.duckdb"\ntable = "PEOPLE"',
    )
    cfg = load_config(write(tmp_path, text))
    where = f"table people of {cfg.tables['again'].database} (also named table PEOPLE of "
    where += f"{cfg.tables['fourth'].database})"
    assert shared_sources(cfg) == [("again", "fourth", where)]
