"""Analyst tokens: the server keeps only their hashes, and compares in constant time.

The curator makes a token with ``pinqpy serve CONFIG --add-analyst NAME``: a fresh
``secrets.token_urlsafe(32)`` (256 random bits), printed once. The tokens file (JSON
``{name: sha256 hex}``, mode 0600, written atomically) holds only its SHA-256. A plain hash
suffices, with no salt or slow key stretching: the token is 256 random bits, so no guess list
reaches it, and the hash only keeps a copy of the file from being a list of working tokens.
Adding a token for a name replaces that analyst's previous token.

To verify a request, the presented token is hashed and compared with every stored hash by
:func:`hmac.compare_digest`, without stopping at a match and without looking the name up
first, so the time taken does not depend on which analyst (if any) the token belongs to. A
token belongs to an analyst only while the server's config names that analyst.

The server rereads the file when it changes, so a token added or replaced while the server
runs works at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pinqpy.errors import PinqError

__all__ = ["MAX_TOKEN_CHARS", "TokenStore", "hash_token", "new_token"]

#: A presented token longer than this is refused unhashed (a real one has 43 characters).
MAX_TOKEN_CHARS = 512
_HEX = frozenset("0123456789abcdef")


def new_token() -> str:
    """A fresh analyst token: 32 random bytes, URL-safe text."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The SHA-256 (hex) of a token, as the tokens file stores it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenStore:
    """The tokens file of one server: ``{analyst: sha256 hex}``.

    ``analysts`` are the names the config declares; a stored hash of any other name is
    ignored when verifying and refused when adding.
    """

    def __init__(self, path: str | os.PathLike[str], analysts: Iterable[str]):
        self.path = Path(path)
        self.analysts = frozenset(analysts)
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._hashes: tuple[tuple[str, bytes], ...] = ()

    # -- the file ------------------------------------------------------------------------
    def read(self) -> dict[str, str]:
        """The stored hashes; a missing file is empty. A file other users may write, or one
        that is not a tokens file, is refused (naming the file and what to do)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return {}
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PinqError(
                f"the tokens file {str(self.path)!r} is writable by other users, who could add "
                f"a token of their own; run chmod 600 {str(self.path)!r}"
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            raise PinqError(
                f"the tokens file {str(self.path)!r} cannot be read as JSON; delete it and "
                "add each analyst again with --add-analyst"
            ) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and len(v) == 64 and set(v) <= _HEX
            for k, v in data.items()
        ):
            raise PinqError(
                f"the tokens file {str(self.path)!r} is not a pinqpy tokens file "
                "({name: sha256 hex}); delete it and add each analyst again with --add-analyst"
            )
        return data

    def _write(self, hashes: Mapping[str, str]) -> None:
        """Replace the file atomically; the new file is created with mode 0600."""
        folder = self.path.parent
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=folder)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(sorted(hashes.items())), fh, indent=1)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def add(self, name: str) -> str:
        """A fresh token for analyst ``name`` (replacing any earlier one); only its hash is
        stored. Returns the token, which nothing keeps: the caller shows it once."""
        if name not in self.analysts:
            known = ", ".join(sorted(self.analysts)) or "none"
            raise PinqError(
                f"{name!r} is not an analyst of this config (its analysts: {known}); add an "
                f"[analysts.{name}] section first"
            )
        token = new_token()
        with self._lock, self._file_lock():
            hashes = self.read()
            hashes[name] = hash_token(token)
            self._write(hashes)
        return token

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """Serialise read-change-write across processes (two curators' ``--add-analyst`` at
        once must not lose a token), by an advisory lock on a file beside the tokens file."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: one writer at a time is assumed
            yield
            return
        fd = os.open(str(self.path) + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- verifying -----------------------------------------------------------------------
    def _current(self) -> tuple[tuple[str, bytes], ...]:
        """The hashes of the config's analysts, reread when the file changed."""
        try:
            st = self.path.stat()
            # ctime changes with the contents and with the file's mode or owner too.
            stamp: tuple[int, ...] | None = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                hashes = self.read() if stamp is not None else {}
                self._hashes = tuple(
                    (n, bytes.fromhex(h)) for n, h in sorted(hashes.items()) if n in self.analysts
                )
                self._stamp = stamp
            return self._hashes

    def load(self) -> list[str]:
        """Read the file now (so a bad file is reported at start-up); the analysts that have
        a token."""
        return [n for n, _ in self._current()]

    def verify(self, token: object) -> str | None:
        """The analyst whose token this is, or None.

        Every stored hash is compared (constant time each, no early exit), so timing does
        not tell which analyst, if any, matched."""
        hashes = self._current()
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            return None
        presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for name, stored in hashes:
            if hmac.compare_digest(presented, stored):
                found = name
        return found
