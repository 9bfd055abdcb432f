"""A pandas relation (a frame and a row mask) and the values that expressions and analysts'
callables give on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.expr.pandas_eval import evaluate, predicate_mask
from pinqpy.plan.nodes import PyFunc

__all__ = [
    "MaskedFrame",
    "as_float",
    "clip_into",
    "numbers_of",
    "row_mask",
    "run_callable",
    "value_of",
]


@dataclass
class MaskedFrame:
    df: pd.DataFrame
    mask: np.ndarray | None = None

    def materialize(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows (of only ``columns``, if given) as a frame of their own."""
        df = self.df if columns is None else self.df[columns]
        if self.mask is None:
            return df
        return df.loc[self.mask].reset_index(drop=True)

    def row_count(self) -> int:
        return int(np.count_nonzero(self.mask)) if self.mask is not None else len(self.df)


def run_callable(fn: PyFunc, df: pd.DataFrame) -> pd.Series:
    """Run an analyst's callable; its failures are reported without their (data) messages."""
    try:
        out = fn.fn(df)
    except Exception as exc:  # the message may quote data values
        raise PinqError(
            f"the callable {fn.name} raised {type(exc).__name__}; pinqpy hides its message "
            "because it may contain private values"
        ) from None
    if isinstance(out, pd.Series):
        if len(out) != len(df):
            raise PinqError(f"the callable {fn.name} must return one value per row")
        return pd.Series(out.to_numpy(), index=df.index)
    arr = np.asarray(out)
    if arr.ndim == 0:
        return pd.Series(np.repeat(arr, len(df)), index=df.index)
    if arr.shape[0] != len(df):
        raise PinqError(f"the callable {fn.name} must return one value per row")
    return pd.Series(arr, index=df.index)


def value_of(value: Expr | PyFunc, df: pd.DataFrame) -> pd.Series:
    return run_callable(value, df) if isinstance(value, PyFunc) else evaluate(value, df)


def row_mask(pred: Expr | PyFunc, df: pd.DataFrame) -> np.ndarray:
    if isinstance(pred, PyFunc):
        s = run_callable(pred, df)
        if not pd.api.types.is_bool_dtype(s.dtype):
            try:
                s = s.astype("boolean")
            except (TypeError, ValueError):
                raise PinqError(
                    f"the callable {pred.name} given to where must return true or false for "
                    "each row"
                ) from None
        # NULL (NaN/NA) is not TRUE, as in SQL.
        return s.fillna(False).to_numpy(dtype=bool, na_value=False)
    return predicate_mask(pred, df)


def as_float(series: pd.Series) -> np.ndarray:
    """Values as float64 with NULL as NaN; a value that is not a number counts as NULL."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.astype("float64").to_numpy(na_value=np.nan)
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype="float64", na_value=np.nan)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def numbers_of(rel: MaskedFrame, value: Expr | PyFunc) -> np.ndarray:
    """Every row's value of ``value`` as numbers (NULL as NaN), for the grid sums.

    A stored numpy column of floats, integers or booleans is handed over as it is stored,
    without a copy: the grid sums read it block by block and convert each value to float64
    exactly as :func:`as_float` would. Any other value is evaluated and converted."""
    if isinstance(value, Column) and value.name in rel.df.columns:
        series = rel.df[value.name]
        dtype = getattr(series, "dtype", None)  # (a frame, for a name used twice)
        if isinstance(dtype, np.dtype) and dtype.kind in "fiub":
            return series.to_numpy()
    return as_float(value_of(value, rel.df))


def clip_into(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``np.clip`` into a new array (NaN stays NaN, +-inf go to the bounds), several times
    faster: ``np.clip`` on floats takes a slow path to handle NaN."""
    out = np.maximum(values, lo)
    return np.minimum(out, hi, out=out)
