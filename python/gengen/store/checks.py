"""Checks every score passes before it is stored or analysed: what cannot be right is refused.

* ``value``, ``stderr`` and ``epoch`` are finite numbers (or missing): ``inf``, ``Infinity``, ``1e400`` and
  ``nan`` are refused wherever they come from (JSON numbers, JSON strings, CSV cells, Parquet);
* ``step``, ``shots``, ``tokens``, ``n_examples`` are whole numbers from 0 to 2**63 - 1, ``seed`` any 64-bit
  integer; ``stderr`` and ``epoch`` are not negative; a date or time is not a step;
* accuracy-like metrics (:data:`FRACTION_METRICS`: ``acc``, ``accuracy``, ``acc_norm``, ``exact_match``,
  ``f1``...) lie in [0, 1]. Values in (1, 100] are refused as a percentage rather than divided by 100: a file
  mixing 0.59 and 59.57 cannot be repaired by guessing, and the hint says how to store it.

Each problem is one :class:`~gengen.errors.InputError` naming the file, the row or key, the column and the
value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from gengen.errors import InputError

__all__ = ["FRACTION_METRICS", "INT64_MAX", "check_scores"]

INT64_MAX = 2**63 - 1
"""The largest step, count or seed the store holds (SQLite integers are signed 64-bit)."""

FRACTION_METRICS = frozenset(
    {
        "acc",
        "accuracy",
        "acc_norm",
        "acc_mutual_info",
        "len_norm",
        "exact_match",
        "em",
        "f1",
        "precision",
        "recall",
        "mc1",
        "mc2",
    }
)
"""Metrics that are fractions in [0, 1] (compared case-insensitively, before an lm-eval ``,filter``)."""

_COUNTS = ("step", "shots", "tokens", "n_examples")
_FLOATS = ("value", "stderr", "epoch")


def _where(sources: pd.Series, position: int, column: str) -> str:
    """``file: line N: column 'c'`` for a message (a wide table's score column stands for ``value``)."""
    label = str(sources.iloc[position])
    row, _, score_column = label.partition(", column ")
    return f"{row}: column {score_column if score_column and column == 'value' else repr(column)}"


def _as_number(value: Any) -> float | int | None:
    """A cell as an exact int or a float; None when missing; raises ValueError when it is not a number."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            return float(text)
    raise ValueError(value)


def _check_integers(frame: pd.DataFrame, column: str, sources: pd.Series) -> None:
    """``column`` holds whole numbers in range (see the module docstring), or raise naming the first that is not."""
    raw = frame[column]
    lowest = -INT64_MAX - 1 if column == "seed" else 0
    if pd.api.types.is_datetime64_any_dtype(raw.dtype) or pd.api.types.is_timedelta64_dtype(raw.dtype):
        position = int(np.flatnonzero(raw.notna().to_numpy())[0]) if raw.notna().any() else 0
        raise InputError(
            f"{_where(sources, position, column)}: {raw.iloc[position]} is a date or time, not a {column}; "
            f"write {column}s as integers"
        )
    if pd.api.types.is_integer_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        bad = (raw < lowest).fillna(False).to_numpy(dtype=bool)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise InputError(f"{_where(sources, position, column)}: {raw.iloc[position]} is negative")
        return
    for position, value in enumerate(raw.tolist()):
        try:
            number = _as_number(value)
        except (ValueError, OverflowError):
            raise InputError(f"{_where(sources, position, column)}: {value!r} is not an integer") from None
        if number is None:
            continue
        if isinstance(number, float) and not number.is_integer():
            raise InputError(f"{_where(sources, position, column)}: {value!r} is not an integer")
        if not lowest <= number <= INT64_MAX:
            what = "is negative" if number < 0 and lowest == 0 else "is outside the 64-bit integer range"
            raise InputError(f"{_where(sources, position, column)}: {value!r} {what}")


def _check_floats(frame: pd.DataFrame, column: str, sources: pd.Series) -> np.ndarray:
    """``column`` as floats (NaN = missing), refusing non-finite values and, but for ``value``, negative ones."""
    raw = frame[column]
    out = np.full(len(raw), np.nan)
    if pd.api.types.is_float_dtype(raw.dtype) or pd.api.types.is_integer_dtype(raw.dtype):
        numbers = raw.to_numpy(dtype=float, na_value=np.nan)
        bad = np.isinf(numbers) | ((numbers < 0) & (column != "value"))
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            shown = float(numbers[position])
            what = "is not a finite number" if math.isinf(shown) else "is negative"
            raise InputError(f"{_where(sources, position, column)}: {shown!r} {what}")
        return numbers
    for position, value in enumerate(raw.tolist()):
        try:
            number = _as_number(value)
        except (ValueError, OverflowError):
            continue  # not a number at all: the store's own check names it
        if number is None:
            continue
        try:
            number = float(number)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise InputError(f"{_where(sources, position, column)}: {value!r} is not a finite number")
        if number < 0 and column != "value":
            raise InputError(f"{_where(sources, position, column)}: {value!r} is negative")
        out[position] = number
    return out


def _check_fractions(frame: pd.DataFrame, values: np.ndarray, sources: pd.Series) -> None:
    """Accuracy-like metrics lie in [0, 1]; a percentage is refused with a hint."""
    metrics = frame["metric"]
    # once per distinct metric, not per row (a 2-million-row table has a handful of metrics)
    codes, distinct = pd.factorize(metrics, use_na_sentinel=True)
    base = {m: str(m).split(",", 1)[0].strip().lower() for m in distinct}
    is_fraction = np.array([base[m] in FRACTION_METRICS for m in distinct] + [False], dtype=bool)
    fraction = is_fraction[codes]
    outside = fraction & ~np.isnan(values) & ((values < 0) | (values > 1))
    if not outside.any():
        return
    position = int(np.flatnonzero(outside)[0])
    value = float(values[position])
    metric = metrics.iloc[position]
    # The hint only where the metric's scores run on a 0-100 scale: 1.02 is a bug upstream, not a percentage.
    same_metric = (metrics == metric).to_numpy(dtype=bool) & ~np.isnan(values)
    largest = float(values[same_metric].max())
    hint = ""
    if 1 < value <= 100 and 1.5 < largest <= 100:
        hint = (
            f"; it looks like a percentage: divide the scores by 100, or store them under a metric name "
            f"that says so (e.g. '{base[metric]}_pct')"
        )
    raise InputError(f"{_where(sources, position, 'value')}: {metric} {value!r} is outside [0, 1]{hint}")


def check_scores(frame: pd.DataFrame, sources: pd.Series, *, fractions: bool = True) -> None:
    """Refuse the scores of an import that cannot be right (see the module docstring).

    Parameters
    ----------
    frame : DataFrame
        The scores read, before :func:`gengen.store.database.normalise_scores` (one row per score).
    sources : Series
        Where each row came from, aligned with ``frame``'s rows.
    fractions : bool
        Also check that accuracy-like metrics lie in [0, 1] (:meth:`gengen.store.database.Store.write_scores` checks
        only numbers and ranges: what a caller of the Python API names ``acc`` is the caller's).

    Raises
    ------
    InputError
        The first problem, naming its file, row or key, column and value.
    """
    frame = frame.reset_index(drop=True)
    sources = sources.reset_index(drop=True)
    for column in (*_COUNTS, "seed"):
        if column in frame.columns:
            _check_integers(frame, column, sources)
    values = None
    for column in _FLOATS:
        if column in frame.columns:
            checked = _check_floats(frame, column, sources)
            if column == "value":
                values = checked
    if fractions and values is not None and "metric" in frame.columns:
        _check_fractions(frame, values, sources)
