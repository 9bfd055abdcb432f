"""The curator's server configuration: a TOML file read into frozen dataclasses, checked.

A config declares the tables the server holds (with their public facts), the budgets, the
analysts and what each may query, the durable ledger, where the server listens, and its
limits. Every relative path is relative to the config file, never to the directory the
server was started from. Every error names the file, the key and what to do.

The schema::

    [server]
    host = "127.0.0.1"                 # default 127.0.0.1
    port = 8765                        # default 8765; 0 picks a free port
    ledger = "pinqpy-ledger.db"        # default <config stem>.ledger.db next to the config
    tokens = "pinqpy-tokens.json"      # default <config stem>.tokens.json next to the config
    tls_certfile = "cert.pem"          # optional; both or neither
    tls_keyfile = "key.pem"
    log = "-"                          # the request log: "-" standard error (default), a
                                       # file (appended), or false for none
    curator_token_sha256 = "<hex>"     # optional: the SHA-256 of the curator's dashboard
                                       # token (pinqpy serve CONFIG --curator-token)

    [server.limits]                    # all optional; the defaults are shown
    max_request_bytes = 1000000        # a request body larger than this is refused (413)
    max_plan_nodes = 500               # nodes of one plan (422)
    max_plan_depth = 64                # nesting of one plan (422)
    max_keys = 100000                  # partition keys, candidates of argmax or quantile (422)
    max_public_rows = 100000           # rows of one public table sent with a join (422)
    max_sql_chars = 20000              # length of one SQL query (422)
    query_timeout_s = 60               # run time of one request (504, after the charge);
                                       # also the time its body may take to arrive (408)
    max_requests = 64                  # requests in progress at once, all analysts (503)
    max_requests_per_analyst = 8       # requests of one analyst in progress at once (429)
    max_running = 2                    # requests reading data at once (default: the number
                                       # of CPUs, at least 2); the others wait their turn
    header_timeout_s = 10              # a request's head must arrive within this many
                                       # seconds (else the connection is closed)
    max_connections = 256              # connections open at once (the oldest one still
                                       # short of a request head is closed for a new one)
    answers_in_memory = 1000           # answers each analyst keeps in memory, the latest
                                       # used (one more per 8 KB of arrays an answer holds);
                                       # the others are read back from the ledger
    partitions_in_memory = 1000        # partitions each analyst keeps the agent of (their
                                       # parts share one charge), the latest used ...
    partition_keys_in_memory = 100000  # ... listing this many keys in all (at least
                                       # max_keys); a dropped partition is charged afresh

    [tables.pums]                      # the table's name, as analysts and SQL see it
    source = "csv"                     # csv | parquet | duckdb | spark
    path = "PUMS.csv"                  # csv, parquet, spark: a file (or directory, glob)
    engine = "pandas"                  # csv/parquet: pandas (default), duckdb or polars
    # database = "census.duckdb"       # duckdb: the database file (opened read-only) ...
    # table = "people"                 # ... and the table in it
    # format = "parquet"               # spark: parquet (default) or csv
    privacy_unit = "person_id"         # optional: the column naming each row's owner
    max_rows = 5                       # with privacy_unit: rows kept per person
    bounds = { age = [0, 100], income = [0, 500000] }
    keys = { sex = [0, 1] }
    schema = { age = "int" }
    public_size = true                 # optional: the row count is public (census totals
                                       # are); COUNT(*) then returns it free, AVG divides by
                                       # it, and neighbours differ in one changed row, so
                                       # every query costs twice its stability. Not with
                                       # max_rows (that serves fewer rows).

    [groups.lab]
    budget = { epsilon = 2.0, delta = 1e-6, accounting = "approx" }  # per table, shared

    [analysts.alice]
    tables = ["pums"]
    budget = { epsilon = 1.0, delta = 1e-6 }   # her own, one per granted table
    [analysts.bob]
    tables = ["pums"]
    group = "lab"                              # draws on the group's budget instead

Budgets are per table: an analyst with her own budget has one budget of that size for every
table granted to her (ledger name ``analyst:<name>/<table>``); the members of a group share
one budget per table (``group:<group>/<table>``).

The request log (:mod:`pinqpy.remote.server.requestlog`) and the curator's dashboard
(:mod:`pinqpy.remote.server.dashboard`) are described in their modules; the dashboard is on
only when ``curator_token_sha256`` is set.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pinqpy.remote.server.config_reader import ConfigReader
from pinqpy.remote.server.specs import (
    STDERR,
    AnalystSpec,
    BudgetSpec,
    ConfigError,
    GroupSpec,
    Limits,
    ServerConfig,
    TableSpec,
)

__all__ = [
    "STDERR",
    "AnalystSpec",
    "BudgetSpec",
    "ConfigError",
    "GroupSpec",
    "Limits",
    "ServerConfig",
    "TableSpec",
    "load_config",
    "parse_config",
    "shared_sources",
]


def parse_config(data: Mapping[str, Any], path: Path | None = None) -> ServerConfig:
    """A checked :class:`ServerConfig` from the TOML data of a config file at ``path``."""
    r = ConfigReader(path)
    d = dict(data)
    r.only(d, "", ("server", "tables", "groups", "analysts"))
    server = r.table(d.get("server", {}), "server")
    r.only(
        server,
        "server",
        (
            "host", "port", "ledger", "tokens", "tls_certfile", "tls_keyfile", "limits", "log",
            "curator_token_sha256",
        ),
    )  # fmt: skip
    stem = path.stem if path is not None else "pinqpy-server"
    host = r.text(server.get("host", "127.0.0.1"), "server.host")
    port = r.whole(server.get("port", 8765), "server.port", 0, 65535)
    ledger, tokens = r.state_files(server, stem)
    cert, key = r.tls(server)
    limits = r.limits(server.get("limits", {}))
    log = r.log(server.get("log", STDERR))
    curator = r.curator_hash(server.get("curator_token_sha256"))

    tables_data = r.table(d.get("tables", {}), "tables")
    if not tables_data:
        raise r.fail("tables", "the config serves no table; add a [tables.<name>] section")
    tables = {n: r.source(n, t) for n, t in tables_data.items()}
    groups = {g: r.group(g, gd) for g, gd in r.table(d.get("groups", {}), "groups").items()}
    analysts_data = r.table(d.get("analysts", {}), "analysts")
    if not analysts_data:
        raise r.fail("analysts", "the config names no analyst; add an [analysts.<name>] section")
    analysts = {a: r.analyst(a, ad, tables, groups) for a, ad in analysts_data.items()}

    return ServerConfig(
        path=path,
        host=host,
        port=port,
        ledger=ledger,
        tokens=tokens,
        tables=MappingProxyType(tables),
        analysts=MappingProxyType(analysts),
        groups=MappingProxyType(groups),
        limits=limits,
        tls_certfile=cert,
        tls_keyfile=key,
        log=log,
        curator_token_sha256=curator,
    )


def shared_sources(config: ServerConfig) -> list[tuple[str, str, str]]:
    """Pairs of tables that read the same data, ``(first, second, what)``: the same file or
    folder (by its identity on disk, so a symbolic or hard link counts too; by its resolved
    name when it does not exist, such as a glob), the same table of one DuckDB database, or
    the same table of one PostgreSQL connection string (by its environment variable's value
    where it is set, else by the variable's name).

    Each table has budgets of its own, so two tables over one file are two budgets over the
    same people: ``pinqpy serve`` warns the curator at load."""
    seen: list[tuple[str, object, str]] = []
    pairs = []
    for name, spec in config.tables.items():
        if spec.source == "postgres":
            # One database by its connection string when it is set (compared, never shown).
            env = spec.connection_env or ""
            ident = ("postgres", os.environ.get(env) or env, (spec.table or "").lower())
            shown = f"table {spec.table} of the database in ${env}"
            _pair(pairs, seen, name, ident, shown)
            continue
        where = spec.database if spec.source == "duckdb" else spec.path
        assert where is not None
        try:
            st = os.stat(where)
            ident: object = ("file", st.st_dev, st.st_ino)
        except OSError:
            ident = ("name", str(where))
        shown = str(where)
        if spec.source == "duckdb":
            ident, shown = (ident, (spec.table or "").lower()), f"table {spec.table} of {where}"
        _pair(pairs, seen, name, ident, shown)
    return pairs


def _pair(
    pairs: list[tuple[str, str, str]],
    seen: list[tuple[str, object, str]],
    name: str,
    ident: object,
    shown: str,
) -> None:
    for other, other_ident, other_shown in seen:
        if other_ident == ident:
            also = "" if other_shown == shown else f" (also named {shown})"
            pairs.append((other, name, other_shown + also))
    seen.append((name, ident, shown))


def load_config(path: str | Path) -> ServerConfig:
    """Read and check the config file at ``path``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"server config {str(p)!r} does not exist (or is not a file)")
    p = p.resolve()
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"server config {str(p)!r} is not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(
            f"server config {str(p)!r} cannot be read ({err.strerror or type(err).__name__})"
        ) from None
    return parse_config(data, p)
