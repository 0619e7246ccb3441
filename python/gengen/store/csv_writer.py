"""Writing a table as CSV byte for byte as ``DataFrame.to_csv(path, index=False)`` does, without its per-row work.

pandas formats every float with numpy's ``astype(str)`` and hands each row to :mod:`csv`: at a pairs table of
a quarter of a million rows × 70 columns that is most of the time an analysis spends writing its folder.
:func:`write_csv` formats each column once instead: a float64 column as Python's ``repr`` writes it (the same
shortest round-trip digits and the same switch to exponent notation as numpy's), by Arrow's cast to string for
the numbers both write in plain positional notation and by ``repr`` for the others (``tests/test_csv_writer.py``
checks both against numpy on random bit patterns and ties), only the distinct values of a column that repeats
them (a column of NaN, a method string, a test-set name), quoting each distinct string once by the :mod:`csv`
module's own rules, and joins the cells row by row in C (``str.join``). Missing values are written as pandas
writes them (an empty field; ``""`` when it is the row's only field).

A column of another kind (dates, categories, nullable floats, complex numbers, tuples of labels) is not
formatted here: the whole table is then written by pandas, so the output is pandas' in every case.
"""

from __future__ import annotations

import csv
import functools
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

__all__ = ["csv_lines", "write_csv"]

#: Rows joined and written per chunk (bounds the memory of the text held at once).
CHUNK_ROWS = 20_000

#: Columns shorter than this are formatted by ``repr`` alone (Arrow's start-up is not worth it).
ARROW_MIN_VALUES = 2_000

#: Characters that may make :mod:`csv` quote a field (which of them do depends on the Python version).
_CANDIDATES = ',"\r\n'


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to ``path`` exactly as ``frame.to_csv(path, index=False)`` writes it.

    Parameters
    ----------
    frame : DataFrame
        The table (its index is not written).
    path : path
        The file to write (replaced when it exists), UTF-8.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> table = pd.DataFrame({"name": ["a,b", 'say "hi" now'], "r": [0.1, float("nan")], "n": [3, 4]})
    >>> write_csv(table, folder / "t.csv")
    >>> print((folder / "t.csv").read_text(), end="")
    name,r,n
    "a,b",0.1,3
    "say ""hi"" now",,4
    >>> (folder / "t.csv").read_bytes() == table.to_csv(index=False).encode()
    True
    """
    lines = csv_lines(frame)
    if lines is None:
        frame.to_csv(path, index=False)
        return
    with Path(path).open("w", encoding="utf-8", newline="") as handle:
        for chunk in lines:
            handle.write(chunk)


def csv_lines(frame: pd.DataFrame, chunk_rows: int = CHUNK_ROWS) -> list[str] | None:
    """The CSV text of ``frame``: its header, then chunks of ``chunk_rows`` rows.

    None when one of its columns is of a kind this module does not format (:func:`write_csv` then lets pandas
    write it).

    Parameters
    ----------
    frame : DataFrame
        The table.
    chunk_rows : int
        Rows per chunk of text.

    Returns
    -------
    list of str or None
        The pieces of the file, in order; None for a table pandas must write itself.
    """
    names = list(frame.columns)
    if not names or not all(isinstance(name, str) for name in names) or isinstance(frame.columns, pd.MultiIndex):
        return None
    columns = []
    for position in range(len(names)):
        cells = _cells(frame.iloc[:, position])
        if cells is None:
            return None
        columns.append(cells)
    header = [_quoted(name) for name in names]
    if len(names) == 1:  # csv writes a row of one empty field as ""
        header, columns = _lone_fields(header), [_lone_fields(columns[0])]
    pieces = [",".join(header) + os.linesep]
    for start in range(0, len(frame), chunk_rows):
        rows = zip(*(column[start : start + chunk_rows] for column in columns), strict=True)
        pieces.append(os.linesep.join(map(",".join, rows)) + os.linesep)
    return pieces


def _cells(column: pd.Series) -> list[str] | None:
    """Each cell of one column as the text pandas writes for it (quoted where csv quotes it), or None."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype):
        values = column.to_numpy()
        if dtype.kind == "f":
            return _floats(values)
        if dtype.kind in "iu":
            return _numbers(values, np.zeros(len(values), dtype=bool), lambda numbers: numbers.astype(str).tolist())
        if dtype.kind == "b":
            return np.where(values, "True", "False").tolist()
        if dtype.kind == "O":
            return _objects(values)
        return None
    if isinstance(dtype, pd.StringDtype):
        return _distinct(column, str.__str__)
    if isinstance(dtype, (pd.Int8Dtype, pd.Int16Dtype, pd.Int32Dtype, pd.Int64Dtype, pd.BooleanDtype)) or (
        isinstance(dtype, (pd.UInt8Dtype, pd.UInt16Dtype, pd.UInt32Dtype, pd.UInt64Dtype))
    ):
        return _distinct(column, str)
    return None


def _floats(values: np.ndarray) -> list[str]:
    """A float column as pandas writes it: numpy's ``str`` of each value (Python's ``repr`` for float64, the
    same text), missing values empty."""
    missing = np.isnan(values)
    if missing.all():
        return [""] * len(values)
    # factorize takes -0.0 for 0.0: a column holding a negative zero is formatted value by value
    negative_zero = bool((np.signbit(values) & (values == 0)).any())
    return _numbers(values, missing, _float_text, distinct=not negative_zero)


def _numbers(
    values: np.ndarray, missing: np.ndarray, text: Callable[[np.ndarray], list[str]], distinct: bool = True
) -> list[str]:
    """Numbers as ``text`` writes them, missing ones empty; a column of few distinct values (a count, a level,
    a constant) formats each of them once."""
    if distinct:
        codes, unique = pd.factorize(values, use_na_sentinel=True)
        if len(unique) * 4 < len(values):
            return np.array([*text(unique), ""], dtype=object)[codes].tolist()
    cells = text(values)
    for position in np.flatnonzero(missing).tolist():
        cells[position] = ""
    return cells


def _float_text(values: np.ndarray) -> list[str]:
    """Each number's text as numpy's ``astype(str)`` gives it (for float64 that is ``repr``, which is faster;
    Arrow's for the numbers both write in plain positional notation, faster again: :func:`_arrow_or_repr`)."""
    if values.dtype != np.float64:
        return [str(text) for text in values.astype(str).tolist()]
    if len(values) < ARROW_MIN_VALUES or not _arrow_agrees_on_probes():
        return list(map(repr, values.tolist()))
    return _arrow_or_repr(values)


def _arrow_or_repr(values: np.ndarray, sample: int = 64) -> list[str]:
    """float64 values as ``repr`` writes them, most of them converted by Arrow.

    Python's ``repr`` and Arrow's cast to string both give the shortest digits that read back as the same
    number (ties to even); they lay them out alike where ``repr`` writes plain positional notation
    (1e-4 <= |x| < 1e16) and Arrow writes a point and no exponent. Every other value (an integral one, an
    exponent, inf, NaN) is formatted by ``repr``, and so is the whole column when one of ``sample`` of Arrow's
    cells differs from ``repr`` (``tests/test_csv_writer.py`` compares the two on random bit patterns and ties).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.cast(pa.array(values), pa.string())
    plain = pc.and_(pc.match_substring(text, "."), pc.invert(pc.match_substring(text, "e")))
    magnitude = np.abs(values)
    with np.errstate(invalid="ignore"):
        arrow = plain.to_numpy(zero_copy_only=False) & (magnitude >= 1e-4) & (magnitude < 1e16)
    cells = text.to_numpy(zero_copy_only=False)
    checked = np.flatnonzero(arrow)[:: max(1, int(arrow.sum()) // sample)] if sample else np.array([], dtype=int)
    if any(cells[i] != repr(float(values[i])) for i in checked.tolist()):
        return list(map(repr, values.tolist()))
    others = np.flatnonzero(~arrow)
    cells[others] = list(map(repr, values[others].tolist()))
    return list(cells.tolist())


@functools.cache
def _arrow_agrees_on_probes() -> bool:
    """Whether Arrow's text of the numbers :func:`_arrow_or_repr` takes from it is ``repr``'s on hard cases
    (ties between two shortest decimals, the bounds of positional notation, float noise), checked once."""
    rng = np.random.default_rng(20261202)
    probes = np.concatenate(
        [
            [0.1, 1 / 3, 2 / 3, 0.30000000000000004, 1e-4, 1.0000000000000002e-4, 9999999999999998.0, 123456.789],
            1 + np.arange(1, 200) * 2.0**-17,  # exact halves between two 17-digit decimals
            (rng.integers(1, 2**40, 500) | 1) / 2.0 ** rng.integers(20, 60, 500),
            rng.normal(0, 1, 500) * 10.0 ** rng.integers(-4, 15, 500),
        ]
    )
    return _arrow_or_repr(probes, sample=0) == list(map(repr, probes.tolist()))


def _objects(values: np.ndarray) -> list[str]:
    """An object column as pandas and csv write it: missing values empty, strings as they are, anything else
    by ``str`` (then quoted where csv quotes it)."""
    missing = pd.isna(values)
    if missing.all():
        return [""] * len(values)
    if infer_dtype(values, skipna=True) == "string":  # every present value a str: distinct ones quoted once
        return _distinct(pd.Series(values, dtype=object).where(~missing, None), str.__str__)
    return [
        "" if gone else _quoted(value if isinstance(value, str) else str(value))
        for value, gone in zip(values.tolist(), missing.tolist(), strict=True)
    ]


def _distinct(column: pd.Series, text: Callable[[Any], str]) -> list[str]:
    """A column of repeated values formatted once per distinct value (missing ones empty), then quoted."""
    codes, distinct = pd.factorize(column, use_na_sentinel=True)
    cells = np.array([*(_quoted(text(value)) for value in distinct), ""], dtype=object)
    return cells[codes].tolist()


def _lone_fields(cells: list[str]) -> list[str]:
    """The cells of a one-column table: an empty field alone on its row is written ``""``."""
    return ['""' if cell == "" else cell for cell in cells]


def _quoted(field: str) -> str:
    """``field`` as csv writes it: quoted (its quotes doubled) when it holds a character that needs it."""
    if not any(char in field for char in _triggers()):
        return field
    return _csv_field(field)


@functools.cache
def _triggers() -> str:
    """The characters that make this Python's csv module quote a field (a newline, a quote, a comma; a
    carriage return too in some versions)."""
    return "".join(char for char in _CANDIDATES if _csv_field("a" + char + "b") != "a" + char + "b")


def _csv_field(field: str) -> str:
    """``field`` as the csv module writes it in a row of two fields (pandas' dialect: ``,``, ``"`` doubled,
    minimal quoting, the platform's line ending)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=os.linesep).writerow([field, "x"])
    return buffer.getvalue()[: -len(",x" + os.linesep)]
