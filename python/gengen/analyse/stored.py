"""Checks of the files of an analysis folder as they are read back (issue 36).

An analysis folder is data a user can edit, truncate or replace. Every file :meth:`Analysis.from_dir`, the
report and ``gengen export --table`` read is checked where it is read: a directory in a file's place, a CSV cut
off in its last line, a column missing, text where a number or a yes/no belongs, a ``summary.json`` whose
settings are not what ``gengen analyse`` writes. Each is one :class:`~gengen.errors.InputError` naming the file
and what is wrong, instead of a traceback (or a table built from the damage) further on.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.analyse.options import Settings, settings_from_record
from gengen.errors import GengenError, InputError

__all__ = ["check_columns", "check_file", "check_settings", "check_whole_csv", "read_settings"]

#: Columns of the pairs table that every reader needs.
PAIRS_REQUIRED = ("level", "model", "run", "testset_a", "testset_b", "r_partial", "p_adjusted", "significant")
#: Columns of the pairs table that hold numbers wherever they are present.
PAIRS_NUMERIC = (
    "r_partial", "r_raw", "p_adjusted", "p_deciding", "p_value", "ci_low", "ci_high", "ci_level", "n", "n_steps",
    "n_informative", "k", "df", "sign", "se_z", "statistic", "p_loo_max", "influence",
)  # fmt: skip
#: Columns of the pairs table that hold yes/no values wherever they are present.
PAIRS_BOOLEAN = ("significant", "testable")
#: Columns of the scores table every reader needs, and those among them that hold numbers.
SCORES_REQUIRED = ("model", "run", "step", "testset", "metric", "value", "sign")
SCORES_NUMERIC = ("step", "value", "sign")
#: Columns of the pooled table (meta-analysis per cell) every reader needs, and those that hold numbers.
POOLED_REQUIRED = ("testset_a", "testset_b")
POOLED_NUMERIC = (
    "n_total", "mean_r", "n_runs", "r_fixed", "se_fixed", "ci_low_fixed", "ci_high_fixed", "p_fixed", "df_fixed",
    "p_fixed_adjusted", "r_random", "se_random", "ci_low_random", "ci_high_random", "p_random", "df_random",
    "p_random_adjusted", "tau2", "q", "q_df", "p_q", "i2",
)  # fmt: skip
#: Settings of ``summary.json`` that are read back, and the kind each must be when present.
SETTING_KINDS: dict[str, str] = {
    "id_testset": "text",
    "ood_resolved": "list of text",
    "fit": "text",
    "alpha": "number",
    "adjust": "text",
    "by": "list of text",
    "lower_is_better": "list of text",
}
#: Settings every ``summary.json`` holds.
SETTINGS_REQUIRED = ("id_testset", "ood_resolved")


def check_file(path: Path, hint: str) -> None:
    """Refuse a path that is missing or not a regular file (a directory in a file's place).

    Parameters
    ----------
    path : Path
        The file to be read.
    hint : str
        What writes it, appended to the line (e.g. ``"expected the output folder of gengen analyse"``).

    Raises
    ------
    InputError
        ``path`` is missing, a directory or not a regular file.
    """
    if path.is_file():
        return
    if path.is_dir():
        raise InputError(f"{path}: a directory where a file belongs; {hint}")
    if path.exists():
        raise InputError(f"{path}: not a regular file; {hint}")
    raise InputError(f"{path}: missing; {hint}")


def _kind_ok(value: Any, kind: str) -> bool:
    if kind == "text":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def check_settings(settings: dict[str, Any], where: str) -> None:
    """Refuse ``summary.json`` settings of the wrong kind (those read back: :data:`SETTING_KINDS`).

    Parameters
    ----------
    settings : dict
        The ``settings`` object of ``summary.json``.
    where : str
        The file, named in the error line.

    Raises
    ------
    InputError
        A setting of :data:`SETTINGS_REQUIRED` missing, or one of :data:`SETTING_KINDS` of another kind.
    """
    for key in SETTINGS_REQUIRED:
        if key not in settings:
            raise InputError(f"{where}: settings has no {key!r}; not as gengen analyse writes it")
    for key, kind in SETTING_KINDS.items():
        if key in settings and settings[key] is not None and not _kind_ok(settings[key], kind):
            shown = repr(settings[key])
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            raise InputError(f"{where}: settings {key!r} is {shown}, expected {kind}; not as gengen analyse writes it")


def read_settings(record: dict[str, Any], where: str) -> Settings:
    """The typed settings of a ``summary.json`` record, each recorded option checked as the analysis checks it.

    Parameters
    ----------
    record : dict
        The ``settings`` object of ``summary.json``.
    where : str
        The file, named in the error line.

    Returns
    -------
    Settings
        The settings (options the record lacks, from before they existed, hold their defaults and are listed in
        ``unrecorded``).

    Raises
    ------
    InputError
        A setting of the wrong kind (:func:`check_settings`) or holding a value the analysis does not take.
    """
    check_settings(record, where)
    try:
        return settings_from_record(record)
    except GengenError as error:
        raise InputError(
            f"{where}: settings {error.option!r} {error.problem}; not as gengen analyse writes it"
        ) from None


def _numeric(frame: pd.DataFrame, column: str, where: str) -> None:
    values = frame[column]
    if pd.api.types.is_bool_dtype(values):
        return
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() & values.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        text = str(values.iloc[row])
        text = text if len(text) <= 40 else text[:39] + "…"
        raise InputError(
            f"{where}: column {column!r} holds {text!r} (row {row + 1}), expected a number; "
            "not as gengen analyse writes it"
        )


def _boolean(frame: pd.DataFrame, column: str, where: str) -> None:
    values = frame[column]
    if pd.api.types.is_bool_dtype(values):
        return
    known = values.isna() | values.isin([True, False, 0, 1])
    if not known.all():
        row = int(np.flatnonzero(~known.to_numpy())[0])
        raise InputError(
            f"{where}: column {column!r} holds {str(values.iloc[row])[:40]!r} (row {row + 1}), expected true or "
            "false; not as gengen analyse writes it"
        )


def check_columns(
    frame: pd.DataFrame,
    where: str,
    what: str,
    *,
    required: Sequence[str] = (),
    numeric: Sequence[str] = (),
    boolean: Sequence[str] = (),
) -> None:
    """Refuse a table with a column twice or missing, or text where a number or a yes/no belongs.

    Parameters
    ----------
    frame : DataFrame
        The table as read.
    where : str
        The file (or table), named in the error line.
    what : str
        What the table is, for the line (e.g. ``"pairs table of gengen analyse"``).
    required : sequence of str
        Columns it must have.
    numeric : sequence of str
        Columns that hold numbers (or are empty) wherever they are present.
    boolean : sequence of str
        Columns that hold true/false (or are empty) wherever they are present.

    Raises
    ------
    InputError
        One line naming ``where`` and the column (and row) at fault.
    """
    if not frame.columns.is_unique:
        duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        raise InputError(f"{where}: column(s) {', '.join(duplicated)} appear more than once")
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}; expected the {what}")
    for column in numeric:
        if column in frame:
            _numeric(frame, column, where)
    for column in boolean:
        if column in frame:
            _boolean(frame, column, where)


def check_whole_csv(path: Path, n_columns: int) -> None:
    """Refuse a CSV file gengen wrote that was cut off: its last line lacks the line break and fields.

    gengen ends every CSV with a line break; a file that ends without one and whose last line has fewer
    fields than the header was truncated (pandas would read the cut row with its missing fields empty).

    Parameters
    ----------
    path : Path
        The CSV file, already read by pandas.
    n_columns : int
        The number of columns of its header.

    Raises
    ------
    InputError
        The file is truncated.
    """
    with path.open("rb") as handle:
        size = handle.seek(0, io.SEEK_END)
        handle.seek(max(0, size - 65536))
        tail = handle.read()
    if not tail or tail.endswith(b"\n"):
        return
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    fields = next(csv.reader([last]), [])
    if len(fields) < n_columns:
        raise InputError(f"{path}: truncated (its last line has {len(fields)} of {n_columns} fields and no line break)")
