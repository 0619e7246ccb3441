"""Score tables: long (one score per row) or wide (one row per step), as CSV, TSV or Parquet.

**Long**: columns named as the score table (``model, run, step, testset, metric, value`` ...), or mapped to it
with ``columns={"testset": "task", "value": "score"}`` (``--column testset=task``). ``model`` may instead
come from ``--model``; ``run`` defaults to ``"main"``. Columns outside the score table are kept as extras.

**Wide**: one row per checkpoint with a ``step`` column (plus any of ``study, model, family, size, run,
seed, shots, tokens, epoch``), every other column a score whose name the ``pattern`` splits into test set and
metric (default :data:`DEFAULT_WIDE_PATTERN`: ``"<testset>/<metric>"``, split at the last ``/``, which is how
:func:`gengen.export.export` writes wide tables). Columns the pattern does not match are skipped and reported;
empty cells are missing scores.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from gengen.errors import InputError
from gengen.ingest._common import IngestOptions, Parsed, close_match
from gengen.store import DEFAULT_RUN, REQUIRED_COLUMNS

__all__ = [
    "DEFAULT_WIDE_PATTERN",
    "ID_COLUMNS",
    "TABLE_SUFFIXES",
    "looks_long",
    "parse_long",
    "parse_wide",
    "read_table",
]

DEFAULT_WIDE_PATTERN = r"(?P<testset>.+)/(?P<metric>[^/]+)"
"""Default split of a wide table's column names: test set, then ``/``, then metric."""

ID_COLUMNS = ("study", "model", "family", "size", "run", "seed", "shots", "step", "tokens", "epoch")
"""Columns of a wide table that describe the checkpoint rather than hold a score."""

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
_TEXT_COLUMNS = ("study", "model", "family", "size", "run", "testset", "metric")


def read_table(path: Path, options: IngestOptions) -> tuple[pd.DataFrame, list[str]]:
    """Read a CSV/TSV/Parquet table with ``options.columns`` applied, and one location label per row."""
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable Parquet file: {str(error).splitlines()[0]}") from None
        labels = [f"{path}: row {i + 1}" for i in range(len(frame))]
    else:
        text_columns = {options.columns.get(n, n): str for n in _TEXT_COLUMNS}
        try:
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=text_columns, skip_blank_lines=False)
        except pd.errors.EmptyDataError:
            raise InputError(f"{path}: empty file, no header line") from None
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
            raise InputError(f"{path}: malformed CSV: {str(error).strip().splitlines()[-1]}") from None
        frame = frame.dropna(how="all")
        labels = [f"{path}: line {i + 2}" for i in frame.index]
        frame = frame.reset_index(drop=True)
    frame.columns = [str(c) for c in frame.columns]
    for name, column in options.columns.items():
        if column not in frame.columns:
            raise InputError(
                f"{path}: no column {column!r} (mapped to {name!r} by --column)"
                f"{close_match(column, frame.columns)}; columns are {', '.join(map(repr, frame.columns))}"
            )
    renamed = {column: name for name, column in options.columns.items()}
    frame = frame.rename(columns=renamed)
    return frame, labels


def looks_long(frame: pd.DataFrame) -> bool:
    """Whether a table has (most of) the columns of a long score table: two of testset, metric, value."""
    return len({"testset", "metric", "value"} & set(frame.columns)) >= 2


def _fill(frame: pd.DataFrame, options: IngestOptions) -> pd.DataFrame:
    """Apply ``--model`` / ``--run`` / ``--study`` to a table (they override its own columns)."""
    for name in ("model", "run", "study"):
        given = getattr(options, name)
        if given:
            frame[name] = given
    return frame


def _default_run(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a table without a ``run`` column the default run."""
    if "run" not in frame.columns:
        frame["run"] = DEFAULT_RUN
    return frame


def _missing(path: Path, frame: pd.DataFrame, needed: tuple[str, ...], kind: str) -> None:
    """Raise an InputError for the first column of ``needed`` the table lacks."""
    for name in needed:
        if name not in frame.columns:
            hint = "pass --model or " if name == "model" else ""
            raise InputError(
                f"{path}: {kind} table has no column {name!r}{close_match(name, frame.columns)} "
                f"({hint}map one with --column {name}=COLUMN); "
                f"columns are {', '.join(map(repr, frame.columns))}"
            )


def parse_long(path: Path, frame: pd.DataFrame, labels: list[str], options: IngestOptions) -> Parsed:
    """Read a long score table (``frame`` and ``labels`` from :func:`read_table`)."""
    frame = _fill(frame, options)
    _missing(path, frame, REQUIRED_COLUMNS, "long")
    frame = _default_run(frame)
    manifests = {
        (str(m), str(r)): {"format": "long", "file": str(path)}
        for m, r in frame[["model", "run"]].drop_duplicates().itertuples(index=False)
    }
    return Parsed(frame, labels, manifests)


def parse_wide(path: Path, frame: pd.DataFrame, labels: list[str], options: IngestOptions) -> Parsed:
    """Read a wide score table, one row per step (``frame`` and ``labels`` from :func:`read_table`)."""
    frame = _fill(frame, options)
    _missing(path, frame, ("model", "step"), "wide")
    frame = _default_run(frame)
    pattern = re.compile(options.pattern or DEFAULT_WIDE_PATTERN)
    ids = [c for c in frame.columns if c in ID_COLUMNS]
    matched: list[tuple[str, str, str]] = []
    skipped: list[str] = []
    for column in frame.columns:
        if column in ID_COLUMNS:
            continue
        match = pattern.fullmatch(column)
        if match is None:
            skipped.append(column)
            continue
        groups = match.groupdict()
        testset = groups.get("testset") or (match.group(1) if match.re.groups >= 1 else None)
        metric = groups.get("metric") or (match.group(2) if match.re.groups >= 2 else None)
        if not testset or not metric:
            raise InputError(f"{path}: --pattern {pattern.pattern!r} must have groups 'testset' and 'metric'")
        matched.append((column, testset, metric))
    if not matched:
        raise InputError(
            f"{path}: no column name matches the wide pattern {pattern.pattern!r}; "
            f"columns are {', '.join(map(repr, frame.columns))}; pass --pattern"
        )
    score_columns = [column for column, _, _ in matched]
    raw = frame[score_columns]
    numbers = raw.apply(pd.to_numeric, errors="coerce").astype("float64")
    bad = numbers.isna().to_numpy() & raw.notna().to_numpy()
    if bad.any():
        row, position = np.argwhere(bad)[0]
        column = score_columns[position]
        raise InputError(f"{labels[row]}: column {column!r}: {raw[column].iloc[row]!r} is not a number")
    table = pd.concat([frame[ids], numbers], axis=1).assign(_row=np.arange(len(frame)))
    long = table.melt(id_vars=[*ids, "_row"], value_vars=score_columns, var_name="_column", value_name="value")
    long = long[long["value"].notna()].reset_index(drop=True)
    names = {column: (testset, metric) for column, testset, metric in matched}
    long["testset"] = long["_column"].map({c: t for c, (t, _) in names.items()})
    long["metric"] = long["_column"].map({c: m for c, (_, m) in names.items()})
    sources = [f"{labels[row]}, column {column!r}" for row, column in zip(long["_row"], long["_column"], strict=True)]
    long = long.drop(columns=["_row", "_column"])
    manifests = {
        (str(m), str(r)): {"format": "wide", "file": str(path), "pattern": pattern.pattern}
        for m, r in frame[["model", "run"]].drop_duplicates().itertuples(index=False)
    }
    notes = [f"{path}: skipped columns not matching {pattern.pattern!r}: {', '.join(skipped)}"] if skipped else []
    return Parsed(long, sources, manifests, notes)
