"""Connecting the command line and the notebook magic to a pinqpy server.

An analyst's token is a password: it is read from an environment variable
(``PINQPY_TOKEN``, or the one ``--token-env NAME`` names) or typed at a hidden prompt, never
taken from a command line or a notebook line. A command line is visible to every user of the
machine (``ps``) and kept in shell history; a notebook line is saved in the notebook and in
IPython's history.

>>> find_token("http://127.0.0.1:8765", environ={"PINQPY_TOKEN": " abc "})
'abc'
>>> find_token("http://h:1", "LAB_TOKEN", environ={"LAB_TOKEN": "xyz"})
'xyz'
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pinqpy.interfaces.errors import CliError

if TYPE_CHECKING:
    from pinqpy.interfaces.shell import SqlSession

__all__ = ["TOKEN_ENV", "check_env_name", "check_url", "find_token", "open_remote"]

#: Where a token is looked for when no other variable is named (as ``pq.connect`` does).
TOKEN_ENV = "PINQPY_TOKEN"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_name(name: str, flag: str = "--token-env") -> str:
    """``name`` when it can name an environment variable, else a usage error that does not
    repeat the value (it may be the token itself, given by mistake).

    >>> check_env_name("LAB_TOKEN")
    'LAB_TOKEN'
    """
    if not _ENV_NAME.fullmatch(name):
        raise CliError(
            f"{flag} takes the NAME of an environment variable that holds the token "
            f"(e.g. {TOKEN_ENV}), not the token itself",
            2,
        )
    return name


def _variable(name: str) -> str:
    """How a message names the token's variable: a long name may be a token given by
    mistake (a token can look like a variable name), so it is not repeated.

    >>> _variable("LAB_TOKEN"), _variable("A" * 43)
    ('the environment variable LAB_TOKEN', 'the environment variable --token-env names')
    """
    if len(name) > 32:
        return "the environment variable --token-env names"
    return f"the environment variable {name}"


def check_url(url: str, flag: str = "--connect") -> str:
    """A server's address, ``http://HOST:PORT`` or ``https://...``, without credentials.

    >>> check_url("http://127.0.0.1:8765/")
    'http://127.0.0.1:8765/'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        # The value is not repeated: it may be a token given in the wrong place.
        raise CliError(f"{flag} takes the server's address, http://HOST:PORT or https://...", 2)
    if parts.username is not None or parts.password is not None:
        raise CliError(
            f"{flag}: put no credentials in the address; the token is read from {TOKEN_ENV} "
            "(or the variable --token-env names)",
            2,
        )
    return url


def find_token(
    url: str,
    env_name: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    prompt: Callable[[str], str] | None = None,
) -> str:
    """The analyst's token for ``url``: the variable ``env_name`` (default ``PINQPY_TOKEN``),
    else what ``prompt`` (a hidden prompt such as :func:`getpass.getpass`, or None where no
    one can type) returns; else a clear error."""
    name = check_env_name(env_name) if env_name else TOKEN_ENV
    env = os.environ if environ is None else environ
    token = env.get(name, "").strip()
    if token:
        return token
    missing = (
        f"no token for {url}: set {_variable(name)} to your analyst token "
        "(it is never taken from the command line, where other users can see it)"
    )
    if prompt is None:
        raise CliError(missing)
    try:
        token = prompt(f"pinqpy token for {url}: ").strip()
    except (EOFError, OSError, NotImplementedError):
        raise CliError(missing) from None
    if not token:
        raise CliError(f"no token for {url}: nothing was typed")
    return token


def open_remote(url: str, token: str) -> SqlSession:
    """``pq.connect(url, token=token)``: the analyst's session on a pinqpy server."""
    from pinqpy.remote.client.session import connect

    return connect(url, token=token)
