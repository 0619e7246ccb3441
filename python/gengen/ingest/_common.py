"""Pieces shared by the importers: options, the parsed result of one file, checked numbers and JSON."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import GengenError, InputError
from gengen.store import STORED_COLUMNS

__all__ = ["IngestOptions", "Parsed", "close_match", "number", "read_json", "step_from_pattern"]


@dataclass(frozen=True)
class IngestOptions:
    """What the user tells an import beyond the files themselves.

    Attributes
    ----------
    model : str, optional
        The model of every score read (overrides what the files say).
    run : str, optional
        The run of every score read (default: the file's own, else ``"main"``).
    study : str, optional
        The study of every score read (default: the store's).
    step : int, optional
        The checkpoint step of every score read from a per-checkpoint file (lm-evaluation-harness).
    step_pattern : str, optional
        A regular expression searched in each file's path whose group ``step`` (or first group) is the step;
        overrides the step found in the file name or the config.
    columns : mapping of str to str
        Score-table column -> column of a CSV/Parquet file (``{"testset": "task", "value": "score"}``).
    pattern : str, optional
        A regular expression with groups ``testset`` and ``metric`` that splits the score column names of a
        wide table (or the ``eval_*`` keys of ``trainer_state.json``) into test set and metric.
    """

    model: str | None = None
    run: str | None = None
    study: str | None = None
    step: int | None = None
    step_pattern: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    pattern: str | None = None

    def __post_init__(self) -> None:
        unknown = [name for name in self.columns if name not in STORED_COLUMNS]
        if unknown:
            raise GengenError(
                f"--column: {unknown[0]!r} is not a score-table column; expected one of {', '.join(STORED_COLUMNS)}"
            )
        for option, text in (("--step-pattern", self.step_pattern), ("--pattern", self.pattern)):
            if text is not None:
                try:
                    re.compile(text)
                except re.error as error:
                    raise GengenError(f"{option}: {text!r} is not a regular expression: {error}") from None


@dataclass
class Parsed:
    """The scores read from one file, before they are written.

    Attributes
    ----------
    frame : DataFrame
        Score-table columns (at least ``model, step, testset, metric, value``), one row per score.
    sources : list of str
        One label per row naming the file and the key or line it came from.
    manifests : dict
        ``{(model, run): manifest}`` for the runs the file belongs to.
    notes : list of str
        Things the user should know (e.g. columns that were skipped).
    """

    frame: pd.DataFrame
    sources: list[str]
    manifests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_json(path: Path) -> Any:
    """Parse a JSON file, or raise an InputError naming the line and column of the syntax error."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: line {error.lineno}, column {error.colno}: malformed JSON: {error.msg}") from None


def number(value: Any, where: str, *, missing: Sequence[str] = ()) -> float | None:
    """``value`` as a float, or an InputError naming ``where``.

    Parameters
    ----------
    value : object
        A JSON value.
    where : str
        ``"file: key"`` for the message.
    missing : sequence of str
        Strings that mean "no value" (e.g. ``"N/A"``); they give ``None``, as ``None`` itself does.
    """
    if value is None or (isinstance(value, str) and value in missing):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {value!r} is not a number")
    result = float(value)
    return result if not math.isnan(result) else math.nan


def step_from_pattern(path: Path, pattern: str) -> int:
    """The step that ``pattern`` finds in ``path`` (group ``step`` or the first group)."""
    match = re.search(pattern, str(path))
    if match is None:
        raise InputError(f"{path}: --step-pattern {pattern!r} does not match the path")
    text = match.groupdict().get("step") or (match.group(1) if match.groups() else match.group(0))
    try:
        return int(text)
    except (TypeError, ValueError):
        raise InputError(f"{path}: --step-pattern {pattern!r} matched {text!r}, not an integer step") from None


def close_match(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` when a choice resembles ``name``, else ``""``."""
    found = difflib.get_close_matches(name, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {found[0]!r}?" if found else ""
