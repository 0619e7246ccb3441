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
from gengen.store.checks import INT64_MAX
from gengen.store.database import STORED_COLUMNS, shown

__all__ = [
    "INT64_MAX",
    "IngestOptions",
    "Parsed",
    "close_match",
    "count",
    "number",
    "pattern_groups",
    "read_json",
    "short_list",
    "step_from_pattern",
]


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
    size : str, optional
        The model size of every score read (``"7B"``), for names the size rule of
        :func:`gengen.store.database.split_model_name` does not read.
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
    metric : str, optional
        The metric of every score of a table whose column names carry none (wide and per-run tables: each
        score column is then a test set, named in full; long tables: the metric of every row).
    lenient_columns : bool
        A table lacking a ``columns`` column is noted rather than refused (set when several files are read;
        a mapping no file matches is still an error).
    """

    model: str | None = None
    run: str | None = None
    study: str | None = None
    size: str | None = None
    step: int | None = None
    step_pattern: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    pattern: str | None = None
    metric: str | None = None
    lenient_columns: bool = False

    def __post_init__(self) -> None:
        unknown = [name for name in self.columns if name not in STORED_COLUMNS]
        if unknown:
            raise GengenError(
                option="columns",
                problem=f"{shown(unknown[0])} is not a score-table column; expected one of {', '.join(STORED_COLUMNS)}",
            )
        for option, text in (("step_pattern", self.step_pattern), ("pattern", self.pattern)):
            if text is not None:
                try:
                    re.compile(text)
                except re.error as error:
                    raise GengenError(
                        option=option, problem=f"{shown(text)} is not a regular expression: {error}"
                    ) from None
        if self.pattern is not None:
            pattern_groups(re.compile(self.pattern), need_metric=not self.metric)
        if self.step is not None and (isinstance(self.step, bool) or not 0 <= int(self.step) <= INT64_MAX):
            raise GengenError(option="step", problem=f"must be an integer from 0 to 2**63 - 1, got {shown(self.step)}")
        for option, name in (("model", self.model), ("run", self.run), ("study", self.study), ("size", self.size)):
            if name is not None and _CONTROL.search(name):
                raise GengenError(option=option, problem=f"{shown(name)} holds a control character")
        if self.metric is not None and (not self.metric.strip() or _CONTROL.search(self.metric)):
            raise GengenError(option="metric", problem=f"{shown(self.metric)} is not a metric name")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def pattern_groups(pattern: re.Pattern[str], *, need_metric: bool = True) -> tuple[str | int, str | int | None]:
    """The groups of ``--pattern`` holding the test set and the metric: named ``testset`` and ``metric``, else
    the first two groups. Raises a one-line GengenError when the pattern has too few groups."""
    named = pattern.groupindex
    testset: str | int | None = "testset" if "testset" in named else None
    metric: str | int | None = "metric" if "metric" in named else None
    unnamed = [i for i in range(1, pattern.groups + 1) if i not in named.values()]
    if testset is None and unnamed:
        testset = unnamed.pop(0)
    if metric is None and unnamed:
        metric = unnamed.pop(0)
    if testset is None or (need_metric and metric is None):
        needs = (
            "groups named 'testset' and 'metric'" if need_metric else "a group named 'testset' (the metric is given)"
        )
        raise GengenError(
            option="pattern",
            problem=f"{shown(pattern.pattern)} needs {needs}",
            hint="e.g. 'eval_(?P<testset>.+)_(?P<metric>acc|f1)'",
        )
    return testset, metric


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
    unmapped : tuple of str
        The names of the column mapping whose column the file lacks (several tables read with one mapping:
        a mapping that no table has is refused once all are read).
    """

    frame: pd.DataFrame
    sources: list[str]
    manifests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unmapped: tuple[str, ...] = ()


class _DuplicateKeyError(Exception):
    """A JSON object repeats a key (the standard library would silently keep the last value)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing repeated keys: which value was meant is unknowable."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def decode_text(path: Path, raw: bytes) -> str:
    """``raw`` as UTF-8 text (a byte-order mark is dropped), or an InputError naming the line, the byte and
    the encoding the file seems to be in."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path}: UTF-16 text; save the file as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise InputError(
            f"{path}: line {line}: not UTF-8 text (byte 0x{raw[error.start]:02x}); it looks like Latin-1 or "
            f"Windows-1252: save the file as UTF-8"
        ) from None


def read_json(path: Path) -> Any:
    """Parse a JSON file, or raise an InputError naming the line and column of the syntax error.

    A byte-order mark is accepted; a key repeated within one object and nesting beyond Python's recursion
    limit are refused.
    """
    text = decode_text(path, path.read_bytes())
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: line {error.lineno}, column {error.colno}: malformed JSON: {error.msg}") from None
    except _DuplicateKeyError as error:
        raise InputError(f"{path}: key {error.args[0]!r} appears twice in one object; which value is meant?") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a score file") from None


def number(value: Any, where: str, *, missing: Sequence[str] = ()) -> float | None:
    """``value`` as a finite float, or an InputError naming ``where``.

    Parameters
    ----------
    value : object
        A JSON value: a number, or a string holding one (``"0.61"``; lm-evaluation-harness v0.4 writes some
        values as strings).
    where : str
        ``"file: key"`` for the message.
    missing : sequence of str
        Strings that mean "no value" (e.g. ``"N/A"``); they give ``None``, as ``None`` itself does, and so
        does NaN when ``missing`` is given (a standard error that could not be computed).

    Raises
    ------
    InputError
        Not a number, or not finite (``Infinity``, ``"inf"``, ``NaN``, ``1e400``): a score must be a number.
    """
    if value is None or (isinstance(value, str) and value.strip() in missing):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where}: {shown(value)} is not a number")
    try:
        result = float(value)
    except (ValueError, OverflowError):
        if isinstance(value, int):  # an integer beyond float range
            raise InputError(f"{where}: {value} is not a finite number") from None
        raise InputError(f"{where}: {shown(value)} is not a number") from None
    if math.isnan(result) and missing:
        return None
    if not math.isfinite(result):
        raise InputError(f"{where}: {shown(value)} is not a finite number")
    return result


def step_from_pattern(path: Path, pattern: str) -> int:
    """The step that ``pattern`` finds in ``path`` (group ``step`` or the first group)."""
    match = re.search(pattern, str(path))
    if match is None:
        raise InputError(option="step_pattern", problem=f"{shown(pattern)} does not match the path {path}")
    text = match.groupdict().get("step") or (match.group(1) if match.groups() else match.group(0))
    try:
        return int(text)
    except (TypeError, ValueError):
        raise InputError(
            option="step_pattern", problem=f"{shown(pattern)} matched {shown(text)} in {path}, not an integer step"
        ) from None


def count(n: int, noun: str) -> str:
    """``"1 blank row"``, ``"4 blank rows"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def short_list(names: Sequence[Any], limit: int = 8) -> str:
    """The first ``limit`` names, quoted, and how many there are in all (``"'a', 'b', … (113 in all)"``)."""
    quoted = ", ".join(shown(str(name), 40) for name in names[:limit])
    return quoted + (f", … ({len(names)} in all)" if len(names) > limit else "") if len(names) else "none"


def close_match(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` when a choice resembles ``name``, else ``""``."""
    found = difflib.get_close_matches(name, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {shown(found[0])}?" if found else ""
