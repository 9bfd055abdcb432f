"""Random per-row priorities for the pandas engine's truncations, and keeping the lowest.

``bound_contributions``, ``bound_degree``, ``bound_groups`` and bounded joins keep, per key,
the ``limit`` rows of lowest priority. Stability needs one thing of a priority: it is a
function of the row's own values and a fresh salt, never of other rows or of positions. Then
which rows one key keeps does not change when another unit's rows arrive or leave, so the
truncations of neighbouring tables differ only in that unit's rows (for the same salt: a
coupling of the two runs, which is what the stability argument and the neighbour tests use).

**Ordering by a prefix of the row, exactly.** Hashing every column of every row is the
costly part of a truncation (``hash_pandas_object`` over eleven columns of 10**7 rows takes
seconds, mostly text). So rows are ordered by the pair

    (primary, secondary)

compared lexicographically, where ``primary`` is a salted hash of the row's *typed* columns
(numbers, booleans, dates: their bit patterns, mixed in numpy at memory speed) and
``secondary`` is the salted hash of *all* the row's values. Both are functions of the row's
values and the salt, so the pair is too, and the order it defines is the one the stability
argument needs. ``secondary`` is needed only to order rows whose ``primary`` ties within one
key, so it is computed for those rows alone (:func:`keep_lowest`): usually none, since the
typed columns tell a person's rows apart; in the worst case (no typed column besides the
key) every row, which is what hashing everything always cost.

Rows equal in every hashed value tie for good. They are then interchangeable: whichever of
them is kept, the truncated table is the same multiset of rows. Values pandas cannot hash
(lists, dicts, arrays) enter ``secondary`` as a text of their contents (:func:`_text`), so
the priority stays a function of the row and the salt, never of its position: then the
same salts keep the same rows on every read, which a partition's fixed salts rely on
(:mod:`pinqpy.plan.salts`).

The salts come from :func:`pinqpy.plan.salts.salt_source`: fresh on every read, or the
partition's own stream for the node being evaluated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.plan.salts import salt_source

__all__ = ["RowPriorities", "keep_lowest", "mix64", "row_hashes"]

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, a bijection of uint64 whose every output bit depends on every
    input bit (numpy's uint64 arithmetic wraps, as the finalizer needs). Mixes ``x`` in
    place and returns it."""
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


_NA_WORD = np.uint64(0x7FF8_0000_0000_0001)  # stands for NA and NaN in a typed column


def _typed_word(col: pd.Series) -> np.ndarray | None:
    """The column's values as one uint64 word per row when the column is typed (numbers,
    booleans, dates and durations, nullable or not); None for anything else (text,
    categoricals, objects), which only :meth:`RowPriorities.secondary` reads.

    The word is a function of the value alone, whichever of pandas' spellings holds it: an
    integer or boolean is its int64 pattern in ``int64``, ``Int64`` or Arrow storage alike
    (a table whose neighbour gains a NULL may be stored as ``Int64`` instead of ``int64``);
    a float is its float64 pattern with -0.0 read as 0.0; NA and NaN are one word. Words that
    coincide for different values only make rows tie, and ties are ordered by the secondary
    hash (module docstring)."""
    dtype = col.dtype
    kind = dtype.kind if isinstance(dtype, np.dtype) else getattr(dtype, "kind", "O")
    if isinstance(dtype, pd.CategoricalDtype) or kind not in "iubfmM":
        return None
    if isinstance(dtype, np.dtype) and kind in "mM":
        return col.to_numpy().view(np.uint64)
    if kind == "f":
        v = col.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0
        word = v.view(np.uint64)
        word[np.isnan(v)] = _NA_WORD
        return word
    if kind in "iub":
        if isinstance(dtype, np.dtype):
            return col.to_numpy().astype(np.int64, copy=False).view(np.uint64)
        na = col.isna().to_numpy()
        wide = np.uint64 if kind == "u" else np.int64  # the same pattern below 2**63
        word = col.to_numpy(dtype=wide, na_value=0).view(np.uint64)
        return np.where(na, _NA_WORD, word)
    return None  # Arrow dates and durations


class RowPriorities:
    """Salted priorities of a frame's rows: :attr:`primary` for every row now, and
    :meth:`secondary` for the rows whose primaries tie (module docstring)."""

    def __init__(self, df: pd.DataFrame) -> None:
        salt = salt_source().bytes(32)
        self._df = df
        self._key = salt[:8].hex()  # hash_pandas_object keys its text hashes by this
        s = [np.uint64(int.from_bytes(salt[i : i + 8], "little")) for i in (8, 16, 24)]
        self._s2, self._s3 = s[1], s[2]
        # hash_pandas_object does not key numbers by its hash key, so every hash here is
        # keyed again by the salt: which of a key's rows are kept changes with every salt.
        # Each typed column folds in with one xor and one odd multiply (a step of a
        # multiplicative hash), and the whole is mixed once at the end: a function of the
        # row's words, and at memory speed.
        h = np.full(len(df), s[0], dtype=np.uint64)
        for name in df.columns:
            word = _typed_word(df[name])
            if word is not None:
                h ^= word
                h *= _MIX1
        h ^= self._s2
        self.primary = mix64(h)

    def secondary(self, rows: np.ndarray) -> np.ndarray:
        """The salted hash of all the values of ``rows`` (positions)."""
        return _hash_rows(self._df.take(rows), self._key, self._s3)


def _hash_rows(df: pd.DataFrame, key: str, salt: np.uint64) -> np.ndarray:
    """A hash of all of each row's values keyed by ``key`` and ``salt``; a value pandas
    cannot hash is hashed as the text of its contents."""
    try:
        hashed = pd.util.hash_pandas_object(df, index=False, hash_key=key)
    except TypeError:
        hashed = pd.util.hash_pandas_object(_as_text(df), index=False, hash_key=key)
    return mix64(hashed.to_numpy(dtype=np.uint64) ^ salt)  # a fresh array: mixed in place


def _as_text(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the values of every column pandas cannot hash as :func:`_text`."""
    out = df.copy()
    for i in range(out.shape[1]):
        col = out.iloc[:, i]
        try:
            pd.util.hash_pandas_object(col, index=False)
        except TypeError:
            out.isetitem(i, col.astype(object).map(_text))
    return out


_TEXT_DEPTH = 20


def _text(x: object, depth: int = 0) -> str:
    """A text of ``x`` that tells values apart by content: a list, tuple, array, dict or set
    by its items (length-prefixed, so no item can pose as two), anything else by its type
    and ``repr`` (exact for numbers, text and timestamps). A value nested deeper than
    ``_TEXT_DEPTH`` or whose ``repr`` fails is told by identity: still a function of the row."""
    if depth > _TEXT_DEPTH:
        return f"id:{id(x)}"
    d = depth + 1
    if isinstance(x, np.ndarray):
        return f"a{x.dtype.str}{x.shape}" + _items([_text(v, d) for v in x.ravel().tolist()])
    if isinstance(x, list | tuple):
        return type(x).__name__[0] + _items([_text(v, d) for v in x])
    if isinstance(x, dict):
        return "d" + _items([_text(k, d) + _text(v, d) for k, v in x.items()])
    if isinstance(x, set | frozenset):
        return "e" + _items(sorted(_text(v, d) for v in x))
    try:
        return f"{type(x).__name__}:{x!r}"
    except Exception:  # a repr that fails: told apart by identity
        return f"id:{id(x)}"


def _items(texts: list[str]) -> str:
    return "(" + "".join(f"{len(t)}:{t}" for t in texts) + ")"


def row_hashes(df: pd.DataFrame) -> np.ndarray:
    """A salted hash of all of each row's values: for rows few enough, or columns few
    enough, to hash whole."""
    salt = salt_source().bytes(16)
    return _hash_rows(df, salt[:8].hex(), np.uint64(int.from_bytes(salt[8:], "little")))


def keep_lowest(
    codes: np.ndarray, priorities: RowPriorities | np.ndarray, limit: int
) -> np.ndarray:
    """Sorted positions of the ``limit`` rows of lowest priority within each code.

    One sort of a packed key (code in the high bits, the primary priority's top bits below)
    orders rows by group, then priority; that is several times faster than a lexsort. The
    key is 32 bits wide when the codes leave at least 12 bits of priority (a third faster
    to sort than 64), else 64. Rows whose packed keys tie (equal primaries, or primaries
    equal in the bits kept) are then ordered by the full primary and, where that ties too,
    the secondary, so the order is exactly the lexicographic one of the module docstring,
    whatever the sort did with ties. A plain array of priorities is used as it is (ties left
    as the sort puts them).
    """
    n = len(codes)
    if n == 0:
        return np.arange(0)
    primary = priorities.primary if isinstance(priorities, RowPriorities) else priorities
    bits = max(1, int(codes.max()).bit_length())
    dt = np.uint32 if bits <= 20 else np.uint64
    shift = (32 if dt is np.uint32 else 64) - bits
    key = (codes.astype(dt) << dt(shift)) | (primary >> np.uint64(64 - shift)).astype(dt)
    order = np.argsort(key)
    sorted_key = key[order]
    if isinstance(priorities, RowPriorities):
        tie = sorted_key[1:] == sorted_key[:-1]
        if tie.any():
            _order_ties(order, tie, primary, priorities)
    # The code of each sorted row is the packed key's high bits: no gather of the codes.
    sorted_codes = sorted_key >> dt(shift)
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    np.not_equal(sorted_codes[1:], sorted_codes[:-1], out=starts[1:])
    position = np.arange(n)
    start_pos = np.where(starts, position, 0)
    np.maximum.accumulate(start_pos, out=start_pos)
    keep = order[(position - start_pos) < limit]
    keep.sort()
    return keep


def _runs(tie: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the rows in runs (``tie[i]``: rows ``i`` and ``i + 1`` are equal),
    and each such row's run number (a run is a contiguous stretch of positions)."""
    in_run = np.zeros(len(tie) + 1, dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    pos = np.flatnonzero(in_run)
    # A run starts where a row does not tie with the one before it.
    starts = np.ones(len(pos), dtype=bool)
    later = pos > 0
    starts[later] = ~tie[pos[later] - 1]
    return pos, np.cumsum(starts)


def _order_ties(
    order: np.ndarray, tie: np.ndarray, primary: np.ndarray, priorities: RowPriorities
) -> None:
    """Reorder, in place, each run of equal packed keys in ``order`` by the full primary,
    then each run still tied on it by the secondary (computed for those rows alone). Sorting
    by run first keeps every row inside its own run's stretch."""
    pos, run = _runs(tie)
    rows = order[pos]
    sub = np.lexsort((primary[rows], run))
    rows, run = rows[sub], run[sub]
    order[pos] = rows
    p = primary[rows]
    still = (run[1:] == run[:-1]) & (p[1:] == p[:-1])
    if still.any():
        at, again = _runs(still)
        tied = rows[at]
        order[pos[at]] = tied[np.lexsort((priorities.secondary(tied), again))]
