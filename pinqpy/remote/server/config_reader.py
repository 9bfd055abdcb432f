"""Reading a server config's TOML data: :class:`ConfigReader` checks one value or one
section at a time and builds its :mod:`~pinqpy.remote.server.specs`; every error it raises
names the file, the key and what to do. :func:`pinqpy.remote.server.config.parse_config`
reads a whole config with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.expr.types import check_declared
from pinqpy.remote.server.specs import (
    SOURCES,
    STDERR,
    AnalystSpec,
    BudgetSpec,
    ConfigError,
    GroupSpec,
    Limits,
    TableSpec,
)

__all__ = ["ConfigReader"]

# The name of an environment variable (the connection string is read from it, never written
# in the config file).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Analyst and group names appear in ledger names and in the tokens file: plain text only.
_PERSON = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")
# The settings of a [tables.<name>] section.
_TABLE_SETTINGS = (
    "source", "path", "engine", "database", "table", "format", "privacy_unit", "max_rows",
    "bounds", "keys", "schema", "public_size", "connection_env",
)  # fmt: skip


class ConfigReader:
    """Checks one config file's values, naming the file and the key in every error."""

    def __init__(self, path: Path | None):
        self.path = path
        self.base = path.parent if path is not None else Path.cwd()

    def fail(self, key: str, problem: str) -> ConfigError:
        where = f"server config {str(self.path)!r}" if self.path else "server config"
        return ConfigError(f"{where}: {key}: {problem}")

    def table(self, data: Any, key: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(key, f"must be a table ([{key}] or {{...}}), not {_kind(data)}")
        return data

    def only(self, data: dict[str, Any], key: str, allowed: tuple[str, ...]) -> None:
        for k in data:
            if k not in allowed:
                raise self.fail(
                    f"{key}.{k}" if key else k,
                    f"is not a setting here; the settings are {', '.join(allowed)}",
                )

    def postgres(self, d: dict[str, Any], key: str) -> tuple[str, str]:
        """A postgres source's table and the environment variable naming its connection
        string (the secret stays out of the file)."""
        for k in ("path", "database", "format", "schema"):
            if k in d:
                raise self.fail(
                    f"{key}.{k}",
                    'is not for postgres sources, which name table = and connection_env = '
                    "(types come from the catalog)",
                )
        if "table" not in d or "connection_env" not in d:
            raise self.fail(
                key,
                'a postgres source needs table = "<schema.table>" and connection_env = '
                '"<NAME of the environment variable holding the connection string>"',
            )
        env = self.text(d["connection_env"], f"{key}.connection_env")
        if not _ENV_NAME.match(env):
            raise self.fail(
                f"{key}.connection_env",
                "names an environment variable (letters, digits, _); the connection string "
                "itself, which may hold a password, never goes in the config file",
            )
        if self.text(d.get("engine", "postgres"), f"{key}.engine") != "postgres":
            raise self.fail(f"{key}.engine", "a postgres source runs on the postgres engine")
        return self.text(d["table"], f"{key}.table"), env

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be non-empty text, not {_kind(value)}")
        return value

    def whole(self, value: Any, key: str, lo: int, hi: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be a whole number, not {_kind(value)}")
        if value < lo or (hi is not None and value > hi):
            top = f" and at most {hi}" if hi is not None else ""
            raise self.fail(key, f"must be at least {lo}{top} (got {value})")
        return value

    def number(self, value: Any, key: str) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"must be a number, not {_kind(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(key, "must be a finite number")
        return value

    def file(self, value: Any, key: str, *, must_exist: bool = True) -> Path:
        text = self.text(value, key)
        p = Path(text).expanduser()
        if not p.is_absolute():
            p = self.base / p
        p = Path(p.resolve(strict=False))
        if must_exist and "://" not in text and not _glob_exists(p):
            raise self.fail(
                key,
                f"the file {str(p)!r} does not exist; fix the path (relative "
                "paths are relative to the config file)",
            )
        return p

    def budget(self, data: Any, key: str) -> BudgetSpec:
        d = self.table(data, key)
        self.only(d, key, ("epsilon", "delta", "accounting"))
        if "epsilon" not in d:
            raise self.fail(key, "needs epsilon = <total epsilon>")
        spec = BudgetSpec(
            self.number(d["epsilon"], f"{key}.epsilon"),
            self.number(d.get("delta", 0), f"{key}.delta"),
            self.text(d.get("accounting", "approx"), f"{key}.accounting"),
        )
        try:
            spec.make()
        except PinqError as err:
            raise self.fail(key, str(err)) from None
        return spec

    def log(self, value: Any) -> Path | str | None:
        """``server.log``: "-" (standard error), a file whose folder exists, or false."""
        if value is False:
            return None
        if value == STDERR:
            return STDERR
        if value is True or not isinstance(value, str):
            raise self.fail(
                "server.log", 'must be "-" (standard error), a file name, or false (no log)'
            )
        p = self.file(value, "server.log", must_exist=False)
        if not p.parent.is_dir():
            raise self.fail("server.log", f"the folder {str(p.parent)!r} does not exist")
        return p

    def curator_hash(self, value: Any) -> str | None:
        """``server.curator_token_sha256``: 64 hex digits (the hash, never the token)."""
        if value is None:
            return None
        key = "server.curator_token_sha256"
        if not isinstance(value, str) or not _SHA256_HEX.match(value.lower()):
            raise self.fail(
                key,
                "must be the SHA-256 of the curator's token (64 hex digits), never the token "
                "itself; pinqpy serve CONFIG --curator-token makes a token and prints this line",
            )
        return value.lower()

    def limits(self, data: Any) -> Limits:
        d = self.table(data, "server.limits")
        names = tuple(Limits.__dataclass_fields__)
        self.only(d, "server.limits", names)
        values: dict[str, Any] = {}
        for name, v in d.items():
            k = f"server.limits.{name}"
            if name in ("query_timeout_s", "header_timeout_s"):
                t = self.number(v, k)
                if t <= 0:
                    raise self.fail(k, "must be a positive number of seconds")
                values[name] = float(t)
            else:
                values[name] = self.whole(v, k, 1)
        limits = Limits(**values)
        if limits.partition_keys_in_memory < limits.max_keys:
            raise self.fail(
                "server.limits.partition_keys_in_memory",
                f"must be at least max_keys ({limits.max_keys}), so that the agent of a "
                "partition with that many keys can be kept",
            )
        return limits

    def source(self, name: str, data: Any) -> TableSpec:
        key = f"tables.{name}"
        d = self.table(data, key)
        self.only(d, key, _TABLE_SETTINGS)
        if not _NAME.match(name):
            raise self.fail(
                key,
                "a table name is letters, digits and _ (not starting with a "
                "digit), so SQL can name it",
            )
        source = d.get("source")
        if source not in SOURCES:
            raise self.fail(f"{key}.source", f"must be one of {', '.join(SOURCES)}")
        path = database = table = fmt = env = None
        if source == "postgres":
            table, env = self.postgres(d, key)
            engine = "postgres"
        elif source == "duckdb":
            database, table, engine = self.duckdb(d, key)
        else:
            path, engine, fmt = self.file_source(source, d, key)
        unit, max_rows, public_size = self.ownership(d, key)
        bounds = self.column_bounds(d, key)
        keys = self.column_keys(d, key)
        schema = self.column_types(d, key)
        return TableSpec(
            name=name,
            source=source,
            path=path,
            engine=engine,
            database=database,
            table=table,
            format=fmt,
            privacy_unit=unit,
            max_rows=max_rows,
            bounds=MappingProxyType(bounds),
            keys=MappingProxyType(keys),
            schema=schema,
            public_size=public_size,
            connection_env=env,
        )

    def duckdb(self, d: dict[str, Any], key: str) -> tuple[Path, str, str]:
        """A duckdb source's database file, its table, and its engine (duckdb)."""
        for k in ("path", "format"):
            if k in d:
                raise self.fail(f"{key}.{k}", "a duckdb source names database = and table =")
        if "database" not in d or "table" not in d:
            raise self.fail(
                key, 'a duckdb source needs database = "<file>" and table = "<table in it>"'
            )
        database = self.file(d["database"], f"{key}.database")
        table = self.text(d["table"], f"{key}.table")
        engine = self.text(d.get("engine", "duckdb"), f"{key}.engine")
        if engine != "duckdb":
            raise self.fail(f"{key}.engine", "a duckdb source runs on the duckdb engine")
        return database, table, engine

    def file_source(self, source: str, d: dict[str, Any], key: str) -> tuple[Path, str, str | None]:
        """A csv, parquet or spark source's file, its engine, and (spark) its format."""
        for k in ("database", "table"):
            if k in d:
                raise self.fail(
                    f"{key}.{k}",
                    f"is for duckdb sources; a {source} source names its file with path =",
                )
        if "path" not in d:
            raise self.fail(key, f'a {source} source needs path = "<file>"')
        path = self.file(d["path"], f"{key}.path")
        fmt = None
        if source == "spark":
            engine = self.text(d.get("engine", "spark"), f"{key}.engine")
            if engine != "spark":
                raise self.fail(f"{key}.engine", "a spark source runs on the spark engine")
            fmt = self.text(d.get("format", "parquet"), f"{key}.format")
            if fmt not in ("parquet", "csv"):
                raise self.fail(f"{key}.format", "must be parquet or csv")
        else:
            if "format" in d:
                raise self.fail(
                    f"{key}.format", "is for spark sources; the source names the format"
                )
            engine = self.text(d.get("engine", "pandas"), f"{key}.engine")
            if engine not in ("pandas", "duckdb", "polars"):
                raise self.fail(
                    f"{key}.engine",
                    'must be pandas, duckdb or polars (or use source = "spark")',
                )
        return path, engine, fmt

    def ownership(self, d: dict[str, Any], key: str) -> tuple[str | None, int | None, bool]:
        """Who owns a table's rows and what of their number is public: ``privacy_unit``,
        ``max_rows`` (rows kept per person) and ``public_size``."""
        unit = d.get("privacy_unit")
        if unit is not None:
            unit = self.text(unit, f"{key}.privacy_unit")
        max_rows = d.get("max_rows")
        if max_rows is not None:
            max_rows = self.whole(max_rows, f"{key}.max_rows", 1)
            if unit is None:
                raise self.fail(
                    f"{key}.max_rows", "needs privacy_unit = <the column naming each row's owner>"
                )
        public_size = d.get("public_size", False)
        if not isinstance(public_size, bool):
            raise self.fail(
                f"{key}.public_size",
                f"must be true (the table's row count is public) or false, not "
                f"{_kind(public_size)}",
            )
        if public_size and max_rows is not None:
            raise self.fail(
                f"{key}.public_size",
                "declares the whole table's row count public; with max_rows the served table "
                "keeps only some rows per person, so its row count is not that number (drop "
                "one of the two)",
            )
        return unit, max_rows, public_size

    def column_bounds(self, d: dict[str, Any], key: str) -> dict[str, tuple[float, float]]:
        """A table's ``bounds``: ``[low, high]`` per column."""
        bounds = {}
        for col, b in self.table(d.get("bounds", {}), f"{key}.bounds").items():
            bk = f"{key}.bounds.{col}"
            if not (isinstance(b, list) and len(b) == 2):
                raise self.fail(bk, "must be [low, high]")
            lo, hi = self.number(b[0], bk), self.number(b[1], bk)
            if not lo <= hi:
                raise self.fail(bk, "needs low <= high")
            bounds[col] = (lo, hi)
        return bounds

    def column_keys(self, d: dict[str, Any], key: str) -> dict[str, tuple[Any, ...]]:
        """A table's ``keys``: the public values per column."""
        keys = {}
        for col, ks in self.table(d.get("keys", {}), f"{key}.keys").items():
            kk = f"{key}.keys.{col}"
            if not isinstance(ks, list) or not ks:
                raise self.fail(kk, "must be a non-empty list of the column's public values")
            for v in ks:
                if isinstance(v, dict | list):
                    raise self.fail(kk, "holds numbers, text or booleans only")
            keys[col] = tuple(ks)
        return keys

    def column_types(self, d: dict[str, Any], key: str) -> Mapping[str, str] | None:
        """A table's declared ``schema`` (None when it declares none)."""
        if "schema" not in d:
            return None
        raw = self.table(d["schema"], f"{key}.schema")
        try:
            check_declared(raw, list(raw))
        except PinqError as err:
            raise self.fail(f"{key}.schema", str(err)) from None
        return MappingProxyType(dict(raw))

    def state_files(self, server: dict[str, Any], stem: str) -> tuple[Path, Path]:
        """``server.ledger`` and ``server.tokens``, each in a folder that exists (by default
        ``<config stem>.ledger.db`` and ``<config stem>.tokens.json`` next to the config)."""
        ledger = self.file(
            server.get("ledger", f"{stem}.ledger.db"), "server.ledger", must_exist=False
        )
        tokens = self.file(
            server.get("tokens", f"{stem}.tokens.json"), "server.tokens", must_exist=False
        )
        for p, k in ((ledger, "server.ledger"), (tokens, "server.tokens")):
            if not p.parent.is_dir():
                raise self.fail(k, f"the folder {str(p.parent)!r} does not exist; create it first")
        return ledger, tokens

    def tls(self, server: dict[str, Any]) -> tuple[Path | None, Path | None]:
        """``server.tls_certfile`` and ``server.tls_keyfile``: both or neither."""
        cert = key = None
        if ("tls_certfile" in server) != ("tls_keyfile" in server):
            raise self.fail("server", "TLS needs both tls_certfile and tls_keyfile (or neither)")
        if "tls_certfile" in server:
            cert = self.file(server["tls_certfile"], "server.tls_certfile")
            key = self.file(server["tls_keyfile"], "server.tls_keyfile")
        return cert, key

    def group(self, name: str, data: Any) -> GroupSpec:
        """A ``[groups.<name>]`` section: a budget its analysts share."""
        gkey = f"groups.{name}"
        if not _PERSON.match(name):
            raise self.fail(gkey, "a group name is letters, digits, '_', '.' and '-'")
        gd = self.table(data, gkey)
        self.only(gd, gkey, ("budget",))
        if "budget" not in gd:
            raise self.fail(gkey, "needs budget = { epsilon = ..., delta = ... }")
        return GroupSpec(name, self.budget(gd["budget"], f"{gkey}.budget"))

    def analyst(
        self,
        name: str,
        data: Any,
        tables: Mapping[str, TableSpec],
        groups: Mapping[str, GroupSpec],
    ) -> AnalystSpec:
        """An ``[analysts.<name>]`` section: the tables granted (of ``tables``) and the budget
        drawn on, the analyst's own or one of ``groups``."""
        akey = f"analysts.{name}"
        if not _PERSON.match(name):
            raise self.fail(
                akey, "an analyst name is letters, digits, '_', '.' and '-' (at most 64)"
            )
        ad = self.table(data, akey)
        self.only(ad, akey, ("tables", "budget", "group"))
        granted = self.granted(ad, akey, tables)
        if ("budget" in ad) == ("group" in ad):
            raise self.fail(
                akey,
                "needs exactly one of budget = {...} (the analyst's own) or "
                'group = "<group>" (a shared one)',
            )
        budget = group = None
        if "budget" in ad:
            budget = self.budget(ad["budget"], f"{akey}.budget")
        else:
            group = self.text(ad["group"], f"{akey}.group")
            if group not in groups:
                raise self.fail(
                    f"{akey}.group", f"{group!r} is not a [groups.{group}] section of this config"
                )
        return AnalystSpec(name, tuple(granted), budget, group)

    def granted(self, ad: dict[str, Any], akey: str, tables: Mapping[str, TableSpec]) -> list[Any]:
        """An analyst's ``tables``: a list of tables of this config, each named once."""
        granted = ad.get("tables")
        if not (isinstance(granted, list) and granted):
            raise self.fail(f"{akey}.tables", 'must list the tables granted, e.g. ["pums"]')
        for t in granted:
            if t not in tables:
                raise self.fail(
                    f"{akey}.tables",
                    f"{t!r} is not a table of this config (the tables are {', '.join(tables)})",
                )
        if len(set(granted)) != len(granted):
            raise self.fail(f"{akey}.tables", "names a table twice")
        return granted


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "text", bool: "true/false"}.get(
        type(value), type(value).__name__
    )


def _glob_exists(p: Path) -> bool:
    import glob

    text = str(p)
    return bool(glob.glob(text)) if glob.has_magic(text) else p.exists()
