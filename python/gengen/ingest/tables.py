"""Score tables as CSV, TSV or Parquet: long (one score per row), wide (one row per step) or per run.

**Long**: columns named as the score table (``model, run, step, testset, metric, value`` ...), or mapped to it
with ``columns={"testset": "task", "value": "score"}`` (``--column testset=task``). Columns outside the score
table are kept as extras.

**Wide**: one row per checkpoint with a step column, every other column a score whose name is split into test
set and metric (:func:`split_name`, or ``--pattern``). This is the shape of a Weights & Biases history export
(``_step``, ``eval/downstream/arc_easy_val_rc_5shot_len_norm``, ``eval/c4_en-validation/CrossEntropyLoss``...)
and of ``gengen export --wide``. Empty cells are missing scores.

**Per run**: one row per run (a ``run``/``Run``/``run_id``/``run_name`` or ``seed`` column, or
``--run-column``) and no step column, every other column a score: the final scores of each run (stored at step
``--step``, default 0), which ``gengen analyse`` correlates across runs. Column names that carry no metric take
``--metric``.

For every kind:

* the step column is ``step``, else the first of ``trainer/global_step`` (Lightning), ``train/global_step``
  (Hugging Face), ``global_step`` and ``_step`` (W&B's own counter)
  (any case; the others are dropped); ``--column step=NAME`` chooses another;
* the model is ``--model``, else a ``model`` column, else the file's stem (one model per file);
* the run is ``--run``, else the run column, else ``seed=N`` from a ``seed`` column, else ``"main"``;
* blank rows and summary rows (``Mean``, ``Minimum``, ``Standard deviation``... in the run, step or first
  column: :data:`SUMMARY_LABELS`) are skipped with a note naming their lines;
* a CSV/TSV must be UTF-8 (a byte-order mark is fine) with a header of distinct names and every row as long
  as the header; empty cells and ``NA``, ``N/A``, ``null``, ``None`` are missing values, but ``nan`` and
  ``inf`` are refused where a number is expected (see :mod:`gengen.store.checks`).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.errors import InputError
from gengen.ingest._common import (
    IngestOptions,
    Parsed,
    close_match,
    count,
    decode_text,
    pattern_groups,
    short_list,
)
from gengen.store.database import DEFAULT_RUN, REQUIRED_COLUMNS, shown

__all__ = [
    "DEFAULT_WIDE_PATTERN",
    "ID_COLUMNS",
    "METRIC_NAMES",
    "NAMESPACES",
    "NOT_SCORE_NAMESPACES",
    "RUN_COLUMNS",
    "STEP_COLUMNS",
    "SUMMARY_LABELS",
    "TABLE_SUFFIXES",
    "looks_long",
    "looks_runs",
    "looks_wide",
    "parse_long",
    "parse_runs",
    "parse_wide",
    "read_table",
    "split_name",
]

DEFAULT_WIDE_PATTERN = r"(?P<testset>.+)/(?P<metric>[^/]+)"
"""The split ``gengen export --wide`` writes (``<testset>/<metric>``); :func:`split_name` reads it back."""

ID_COLUMNS = ("study", "model", "family", "size", "run", "seed", "shots", "data_seed", "step", "tokens", "epoch")
"""Columns of a wide or per-run table that describe the row rather than hold a score."""

STEP_COLUMNS = ("step", "trainer/global_step", "train/global_step", "global_step", "_step")
"""Columns taken as the step, in this order of preference (compared case-insensitively)."""

RUN_COLUMNS = ("run", "run_id", "run_name")
"""Columns taken as the run key (compared case-insensitively); a ``seed`` column gives runs ``seed=N``."""

SUMMARY_LABELS = frozenset(
    {
        "min", "minimum", "max", "maximum", "mean", "average", "avg", "median", "std", "stdev", "std dev",
        "std. dev", "sd", "standard deviation", "var", "variance", "se", "sem", "standard error", "sum", "total",
        "count", "range", "iqr", "mode",
    }
)  # fmt: skip
"""Row labels of summary rows appended under a table's runs (compared case-insensitively, ``:`` and ``.``
stripped)."""

NAMESPACES = frozenset(
    {"eval", "evals", "evaluation", "val", "valid", "validation", "test", "train", "downstream", "lm", "metrics"}
)
"""Leading parts of a score name that group scores rather than name a test set (``eval/``, ``downstream/``)."""

NOT_SCORE_NAMESPACES = frozenset(
    {"optim", "optimizer", "throughput", "system", "sys", "perf", "timing", "memory", "gradients", "grad", "params"}
)
"""Leading parts of a column name whose columns are training telemetry, not scores (skipped)."""

METRIC_NAMES = (
    "acc", "acc_norm", "acc_mutual_info", "accuracy", "len_norm", "f1", "em", "exact_match", "mcc", "mc1", "mc2",
    "bpb", "bits_per_byte", "ce_loss", "loss", "nll", "ppl", "perplexity", "word_perplexity", "byte_perplexity",
    "soft", "soft_log", "pass_at_1", "bleu", "rouge1", "rouge2", "rougeL", "brier", "wer", "cer", "error",
)  # fmt: skip
"""Metric names recognised at the end of a score name (``arc_easy_val_rc_5shot_len_norm``: metric
``len_norm``); the longest that fits wins."""

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
STDERR_SUFFIX = "_stderr"
"""A metric named ``<metric>_stderr`` (lm-eval's, and the columns of tables exported from it or from W&B) is the
standard error of ``<metric>``: it fills that score's ``stderr`` instead of being stored as a metric."""
_TEXT_COLUMNS = ("study", "model", "family", "size", "run", "run_id", "run_name", "testset", "metric")
_MISSING_CELLS = ["", "NA", "N/A", "n/a", "null", "NULL", "None"]
_TIMING = frozenset({"runtime", "samples_per_second", "steps_per_second", "timestamp"})
_METRICS_LOWER = {name.lower(): name for name in METRIC_NAMES}
_PARENTHESISED = re.compile(r"(?P<testset>.+?)\s*\((?P<metric>[^()]+)\)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# --------------------------------------------------------------------------------------------- names


def _is_metric(name: str) -> bool:
    """Whether ``name`` reads as a metric on its own: a known metric name, or a lower-is-better word in it
    (``CrossEntropyLoss``, ``Perplexity``)."""
    if name.lower() in _METRICS_LOWER:
        return True
    from gengen.analyse.options import LOWER_IS_BETTER, name_parts  # the sign rule's words; imported when needed

    words = name_parts(name)
    return any(part in words for part in LOWER_IS_BETTER) or "accuracy" in words


def split_name(name: str) -> tuple[str, str] | None:
    """Test set and metric of a score column, or None for a column that is not a score.

    The rule (``--pattern`` replaces it):

    1. Columns starting with ``_`` (``_runtime``), ending in ``__MIN``/``__MAX``, under a telemetry namespace
       (:data:`NOT_SCORE_NAMESPACES`: ``optim/``, ``throughput/``, ``System/``...) or ending in a timing name
       (``runtime``, ``samples_per_second``) are not scores.
    2. The name is split at ``/``; a name without ``/`` that starts with ``eval_``, ``val_``, ``train_``...
       is read as ``eval/...``. The last part is the leaf; leading :data:`NAMESPACES` (``eval``, ``downstream``,
       ``lm``...) are dropped from the parts before it, and so are *qualified* namespaces, a namespace joined
       by ``_`` to a metric (``downstream_bpb``, ``downstream_soft``, ``downstream_soft_log``: OLMo-2's W&B
       columns).
    3. A leaf ``task (metric)`` (OLMo-core) gives that task and metric. Under a qualified namespace the
       metric is the qualifier and the test set the leaf less a trailing ``_<qualifier>``:
       ``eval/downstream_bpb/arc_easy_val_rc_5shot_bpb`` -> (``arc_easy_val_rc_5shot``, ``bpb``); parts left
       between the namespaces and the leaf are kept in the test set's name.
    4. When parts remain before the leaf, they are the test set and the leaf is the metric:
       ``eval/c4_en-validation/CrossEntropyLoss`` -> (``c4_en-validation``, ``CrossEntropyLoss``),
       ``arc_easy/acc`` -> (``arc_easy``, ``acc``).
    5. Otherwise a leaf ending in ``_<metric>`` for a metric of :data:`METRIC_NAMES` is split there, keeping the
       task name whole: ``eval/downstream/arc_easy_val_rc_5shot_len_norm`` -> (``arc_easy_val_rc_5shot``,
       ``len_norm``). A leaf that is a metric itself takes the last namespace as test set: ``eval/loss`` ->
       (``eval``, ``loss``), ``train/CrossEntropyLoss`` -> (``train``, ``CrossEntropyLoss``).
    6. Anything else is not a score.

    Examples
    --------
    >>> split_name("eval/downstream/arc_easy_val_rc_5shot_len_norm")
    ('arc_easy_val_rc_5shot', 'len_norm')
    >>> split_name("eval/downstream_soft_log/arc_easy_val_rc_5shot_soft_log")
    ('arc_easy_val_rc_5shot', 'soft_log')
    >>> split_name("eval/c4_en-validation/CrossEntropyLoss"), split_name("val_bpb"), split_name("_runtime")
    (('c4_en-validation', 'CrossEntropyLoss'), ('val', 'bpb'), None)
    """
    if name.startswith("_") or name.endswith(("__MIN", "__MAX")):
        return None
    parts = [part.strip() for part in name.split("/") if part.strip()]
    if len(parts) == 1 and "_" in parts[0]:
        head, tail = parts[0].split("_", 1)
        if head.lower() in NAMESPACES:
            parts = [head, tail]
    if not parts or parts[0].lower() in NOT_SCORE_NAMESPACES:
        return None
    leaf = parts[-1]
    if leaf.lower() in _TIMING:
        return None
    found = _PARENTHESISED.fullmatch(leaf)
    if found:
        return found.group("testset"), found.group("metric").strip()
    inner = parts[:-1]
    dropped: list[str] = []
    qualifier = ""
    while inner and (inner[0].lower() in NAMESPACES or _qualifier(inner[0])):
        qualifier = _qualifier(inner[0]) or qualifier
        dropped.append(inner.pop(0))
    if qualifier:
        return _qualified(inner, leaf, qualifier)
    if inner:
        return "/".join(inner), leaf
    if leaf.lower() not in _METRICS_LOWER:
        lowered = leaf.lower()
        fits = [m for m in _METRICS_LOWER if lowered.endswith("_" + m) and len(lowered) > len(m) + 1]
        if fits:
            metric = max(fits, key=len)
            return leaf[: -len(metric) - 1], leaf[-len(metric) :]
    if dropped and _is_metric(leaf):
        return dropped[-1], leaf
    return None


def _qualifier(part: str) -> str:
    """The metric named by a qualified namespace (``downstream_bpb`` -> ``bpb``), else ``""``."""
    head, sep, tail = part.partition("_")
    return tail if sep and tail and head.lower() in NAMESPACES else ""


def _qualified(inner: list[str], leaf: str, qualifier: str) -> tuple[str, str]:
    """Test set and metric under a qualified namespace: the leaf less a trailing ``_<qualifier>`` is the task
    and the qualifier the metric (``downstream_soft_log/arc_easy_val_rc_5shot_soft_log`` -> (``arc_easy_val_rc_5shot``,
    ``soft_log``))."""
    suffix = "_" + qualifier.lower()
    task = leaf[: -len(suffix)] if leaf.lower().endswith(suffix) and len(leaf) > len(suffix) else leaf
    return "/".join([*inner, task]), qualifier


# --------------------------------------------------------------------------------------------- reading


def _csv_text(path: Path, sep: str) -> tuple[str, list[str], list[int]]:
    """Check a CSV/TSV file and return its text, its header and the line number of each record after it.

    Refused, with the line: non-UTF-8 text, NUL bytes, an empty file, a header naming a column twice or
    holding control characters, and a row with more or fewer fields than the header (pandas would pad or
    shift it silently).
    """
    raw = path.read_bytes()
    text = decode_text(path, raw)
    if not text.strip():
        raise InputError(f"{path}: empty file, no header line")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError(f"{path}: line {line}: NUL byte; not a text table")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    try:
        header = next(reader)
        if not any(cell.strip() for cell in header):
            raise InputError(f"{path}: line 1: empty header line")
        seen: set[str] = set()
        for position, name in enumerate(header, start=1):
            if _CONTROL.search(name):
                raise InputError(f"{path}: line 1: column {position} name {shown(name)} holds a control character")
            if name in seen and name.strip():
                raise InputError(f"{path}: line 1: column {shown(name)} appears twice in the header")
            seen.add(name)
        lines: list[int] = []
        add, width, end = lines.append, len(header), reader.line_num
        for row in reader:
            start, end = end + 1, reader.line_num
            add(start)
            if len(row) != width and row and any(cell.strip() for cell in row):
                raise InputError(
                    f"{path}: malformed CSV: line {start} has {len(row)} fields, the header has {len(header)}"
                )
    except csv.Error as error:
        raise InputError(f"{path}: malformed CSV: line {reader.line_num}: {error}") from None
    return text, header, lines


def read_table(path: Path, options: IngestOptions) -> tuple[pd.DataFrame, list[str], list[str], tuple[str, ...]]:
    """Read a CSV/TSV/Parquet table, apply ``options.columns`` and recognise the step, run and model columns.

    Returns
    -------
    frame : DataFrame
        The table, blank and summary rows left out.
    labels : list of str
        One location per row (``"file: line 4"``, ``"file: row 3"`` for Parquet).
    notes : list of str
        What was skipped or chosen, for the user.
    unmapped : tuple of str
        The names of ``options.columns`` whose column the table lacks (with ``lenient_columns``; else an error).
    """
    suffix = path.suffix.lower()
    notes: list[str] = []
    if suffix in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, TypeError) as error:
            raise InputError(f"{path}: not a readable Parquet file: {str(error).splitlines()[0]}") from None
        prefix = f"{path}: row "
        labels = [prefix + str(i + 1) for i in range(len(frame))]
        duplicated = pd.Index(frame.columns).duplicated()
        if duplicated.any():
            raise InputError(f"{path}: column {shown(frame.columns[duplicated][0])} appears twice")
    else:
        sep = "\t" if suffix == ".tsv" else ","
        text, header, lines = _csv_text(path, sep)
        mapped = set(options.columns.values())
        text_columns = {name: str for name in header if name.lower() in _TEXT_COLUMNS or name in mapped}
        try:
            frame = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=text_columns,
                keep_default_na=False,
                na_values=_MISSING_CELLS,
                skip_blank_lines=False,
            )
        except (pd.errors.ParserError, ValueError) as error:
            raise InputError(f"{path}: malformed CSV: {str(error).strip().splitlines()[-1]}") from None
        if len(frame) != len(lines):  # a quoting pandas reads differently from the csv module
            lines = [i + 2 for i in range(len(frame))]
        prefix = f"{path}: line "
        labels = [prefix + str(line) for line in lines]
    frame.columns = [str(c) for c in frame.columns]
    frame, unmapped = _map_columns(path, frame, options, notes)
    frame, labels = _drop_empty_and_summary_rows(path, frame, labels, notes)
    return frame.reset_index(drop=True), labels, notes, unmapped


def _map_columns(
    path: Path, frame: pd.DataFrame, options: IngestOptions, notes: list[str]
) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Apply ``--column`` and recognise the step, run and model columns under their usual names; also the names
    of the mapping whose column the table lacks."""
    renamed: dict[str, str] = {}
    unmapped: list[str] = []
    for name, column in options.columns.items():
        if column in frame.columns:
            renamed[column] = name
            continue
        if not options.lenient_columns:
            raise InputError(
                option="columns",
                problem=f"{name}={column}: {path} has no column {shown(column)}{close_match(column, frame.columns)}; "
                f"columns are {short_list(list(frame.columns))}",
            )
        notes.append(f"{path}: no column {column!r} (mapped to {name!r} by --column), left unmapped")
        unmapped.append(name)
    frame = frame.rename(columns=renamed)
    lower = {column.lower(): column for column in reversed(frame.columns)}
    if "step" not in frame.columns:
        found = next((lower[name] for name in STEP_COLUMNS if name in lower), None)
        if found is not None:
            others = [lower[name] for name in STEP_COLUMNS if name in lower and lower[name] != found]
            frame = frame.drop(columns=others).rename(columns={found: "step"})
            notes.append(f"{path}: step from column {found!r}" + (f" ({', '.join(others)} left out)" if others else ""))
    if "run" not in frame.columns:
        found = next((lower[name] for name in RUN_COLUMNS if name in lower), None)
        if found is not None:
            frame = frame.rename(columns={found: "run"})
    for name in ("model", "seed"):
        if name not in frame.columns and name in lower:
            frame = frame.rename(columns={lower[name]: name})
    return frame, tuple(unmapped)


def _drop_empty_and_summary_rows(
    path: Path, frame: pd.DataFrame, labels: list[str], notes: list[str]
) -> tuple[pd.DataFrame, list[str]]:
    """Leave out blank rows and summary rows (``Mean``, ``Standard deviation``...), with a note naming them."""
    blank = frame.isna().all(axis=1).to_numpy()
    label_columns = [c for c in ("run", "step", "seed") if c in frame.columns]
    if len(frame.columns) and frame.columns[0] not in (*label_columns, *REQUIRED_COLUMNS):
        label_columns.append(frame.columns[0])
    summary = np.zeros(len(frame), dtype=bool)
    names: set[str] = set()
    for column in label_columns:  # once per distinct label, not per row
        codes, uniques = pd.factorize(frame[column], use_na_sentinel=True)
        texts = [value.strip() if isinstance(value, str) else "" for value in uniques]
        found = [number for number, text in enumerate(texts) if text.rstrip(":.").lower() in SUMMARY_LABELS]
        if not found:
            continue
        hit = np.isin(codes, found) & ~blank
        names.update(texts[code] for code in set(codes[hit].tolist()))
        summary |= hit
    if not blank.any() and not summary.any():
        return frame, labels
    where = [label.rsplit(": ", 1)[-1] for label in labels]
    if blank.any():
        notes.append(f"{path}: skipped {count(int(blank.sum()), 'blank row')} ({_lines(where, blank)})")
    if summary.any():
        shown = ", ".join(map(repr, sorted(names)))
        notes.append(f"{path}: skipped {count(int(summary.sum()), 'summary row')} ({shown}; {_lines(where, summary)})")
    keep = ~(blank | summary)
    return frame[keep], [label for label, kept in zip(labels, keep, strict=True) if kept]


def _lines(where: list[str], mask: np.ndarray) -> str:
    """The locations of the rows in ``mask``, shortened: ``"lines 103, 104"``."""
    chosen = [where[i] for i in np.flatnonzero(mask)]
    kind, _, _ = chosen[0].partition(" ")
    numbers = [place.partition(" ")[2] for place in chosen]
    shown = ", ".join(numbers[:6]) + (f", … ({len(numbers)} in all)" if len(numbers) > 6 else "")
    return f"{kind}{'s' if len(numbers) > 1 else ''} {shown}"


# --------------------------------------------------------------------------------------------- kinds


def looks_long(frame: pd.DataFrame) -> bool:
    """Whether a table has (most of) the columns of a long score table: two of testset, metric, value."""
    return len({"testset", "metric", "value"} & set(frame.columns)) >= 2


def looks_wide(frame: pd.DataFrame) -> bool:
    """Whether a table (not a long one) has a step column: one row per checkpoint."""
    return "step" in frame.columns


def looks_runs(frame: pd.DataFrame) -> bool:
    """Whether a table (neither long nor wide) has a run or seed column: one row per run."""
    return "run" in frame.columns or "seed" in frame.columns


def detect(frame: pd.DataFrame) -> str | None:
    """The table format of a table read by :func:`read_table` (``long``, ``wide``, ``runs``...), or None: the
    first of :data:`gengen.store.formats.INGEST_FORMAT_TABLE` whose detector accepts it."""
    from gengen.store.formats import INGEST_FORMAT_TABLE, load_function

    for entry in INGEST_FORMAT_TABLE:
        if entry.reads == "table" and load_function(entry.detect)(frame):
            return entry.name
    return None


def _fill(path: Path, frame: pd.DataFrame, options: IngestOptions, notes: list[str]) -> pd.DataFrame:
    """Apply ``--model`` / ``--run`` / ``--study`` / ``--step`` and the defaults of model, run and step."""
    frame = frame.copy()
    for name in ("model", "run", "study"):
        given = getattr(options, name)
        if given:
            frame[name] = given
    if "model" not in frame.columns:
        frame["model"] = path.stem
        notes.append(f"{path}: no model column; model {path.stem!r} from the file name (--model to choose)")
    if "run" not in frame.columns:
        if "seed" in frame.columns:
            seeds = frame["seed"]
            frame["run"] = ["seed=" + _integer_text(v) if pd.notna(v) else DEFAULT_RUN for v in seeds]
        else:
            frame["run"] = DEFAULT_RUN
    return frame


def _step_column_empty(frame: pd.DataFrame) -> bool:
    """Whether the table has a step column with no value in any row (a table of final scores)."""
    if "step" not in frame.columns:
        return False
    return bool(frame["step"].map(lambda v: pd.isna(v) or not str(v).strip()).all())


def _given_step(path: Path, frame: pd.DataFrame, options: IngestOptions, default: int | None) -> pd.DataFrame:
    """The table with ``--step`` (else ``default``) as the step of every row, for a table without a step column
    (a step column empty in every row counts as absent: a table of final scores)."""
    if _step_column_empty(frame):
        frame = frame.drop(columns="step")
    if options.step is not None and "step" in frame.columns:
        raise InputError(option="step", problem=f"is for files without a step column, and {path} has one")
    step = options.step if options.step is not None else default
    return frame if step is None else frame.assign(step=step)


def _integer_text(value: Any) -> str:
    """``3`` for 3, 3.0 and "3"; the value as text otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value).strip()
    return str(int(number)) if number.is_integer() else str(value).strip()


def _missing(path: Path, frame: pd.DataFrame, needed: tuple[str, ...], kind: str) -> None:
    """Raise an InputError for the first column of ``needed`` the table lacks."""
    for name in needed:
        if name not in frame.columns:
            raise InputError(
                f"{path}: {kind} table has no column {shown(name)}{close_match(name, frame.columns)}; columns are "
                f"{short_list(list(frame.columns))}",
                hint=f"map one with {{columns}} {name}=COLUMN",
            )


def parse_long(
    path: Path, frame: pd.DataFrame, labels: list[str], options: IngestOptions, notes: list[str] | None = None
) -> Parsed:
    """Read a long score table (``frame`` and ``labels`` from :func:`read_table`)."""
    notes = list(notes or [])
    if options.metric:
        frame = frame.assign(metric=options.metric)
    empty = _step_column_empty(frame)
    frame = _given_step(path, frame, options, None)
    if "step" not in frame.columns and "step" not in options.columns:
        # Final scores (no step, or an empty step column): one path, --step, whatever was tried before.
        raise InputError(
            option="step",
            problem=f"is needed: {path} is a long table whose step column is "
            f"{'empty in every row' if empty else 'absent'} (final scores?); give the step they were taken at",
            hint="e.g. {step} 0 for the scores at the end of training, or map a column with {columns} step=COLUMN",
        )
    _missing(path, frame, tuple(n for n in REQUIRED_COLUMNS if n != "model"), "long")
    frame = _fill(path, frame, options, notes)
    manifests = {
        (str(m), str(r)): {"format": "long", "file": str(path)}
        for m, r in frame[["model", "run"]].drop_duplicates().itertuples(index=False)
    }
    frame, labels = fold_stderr(path, frame, labels, notes)
    return Parsed(frame, labels, manifests, notes)


def parse_runs(
    path: Path, frame: pd.DataFrame, labels: list[str], options: IngestOptions, notes: list[str] | None = None
) -> Parsed:
    """Read a per-run table: one row per run, final scores, no step (stored at ``--step``, default 0)."""
    if "step" in frame.columns and not _step_column_empty(frame):
        raise InputError(
            option="format",
            problem=f"runs reads tables without a step column, and {path} has one",
            hint="read it as wide",
        )
    long_columns = {"testset", "value"} & set(frame.columns)
    if long_columns == {"testset", "value"}:
        raise InputError(
            option="format",
            problem=f"runs reads one row per run with a column per score; {path} is a long table (testset and value "
            "columns)",
            hint="read it as long, with {step} N when it has no steps (final scores: {step} 0)",
        )
    columns = list(frame.columns)
    frame = _given_step(path, frame, options, 0)
    return _parse_scores(path, frame, labels, options, list(notes or []), "runs", columns)


def parse_wide(
    path: Path, frame: pd.DataFrame, labels: list[str], options: IngestOptions, notes: list[str] | None = None
) -> Parsed:
    """Read a wide score table, one row per step (``frame`` and ``labels`` from :func:`read_table`)."""
    columns = list(frame.columns)
    frame = _given_step(path, frame, options, None)
    _missing(path, frame, ("step",), "wide")
    return _parse_scores(path, frame, labels, options, list(notes or []), "wide", columns)


def _score_columns(
    path: Path, frame: pd.DataFrame, options: IngestOptions
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``(column, testset, metric)`` of every score column, and the columns that are not scores."""
    pattern = re.compile(options.pattern) if options.pattern else None
    groups = pattern_groups(pattern, need_metric=not options.metric) if pattern else None
    matched: list[tuple[str, str, str]] = []
    skipped: list[str] = []
    for column in frame.columns:
        if column in ID_COLUMNS:
            continue
        split: tuple[str, str] | None
        if pattern is not None and groups is not None:
            found = pattern.fullmatch(column)
            metric_group = groups[1]
            split = (
                None
                if found is None
                else (found.group(groups[0]), options.metric or (found.group(metric_group) if metric_group else ""))
            )
        elif options.metric:
            split = (
                None
                if column.startswith("_") or column.split("/")[0].lower() in NOT_SCORE_NAMESPACES
                else (
                    column.strip(),
                    options.metric,
                )
            )
        else:
            if "/" in column and not column.startswith("_") and "" in (part.strip() for part in column.split("/")):
                # eval/downstream_bpb/ (no leaf) became a test set "downstream": a name is split only when whole
                raise InputError(
                    f"{path}: column {shown(column)}: an empty part in its name (a leading, trailing or doubled "
                    "'/'), so its test set and metric cannot be told; rename the column or give --pattern"
                )
            split = split_name(column)
            if split is None and column.lower().endswith(STDERR_SUFFIX):
                base = split_name(column[: -len(STDERR_SUFFIX)])  # arc_easy_acc_stderr: the stderr of arc_easy's acc
                split = None if base is None else (base[0], base[1] + STDERR_SUFFIX)
        if split is None or not split[0] or not split[1]:
            skipped.append(column)
        else:
            matched.append((column, split[0], split[1]))
    return matched, skipped


def _parse_scores(
    path: Path,
    frame: pd.DataFrame,
    labels: list[str],
    options: IngestOptions,
    notes: list[str],
    kind: str,
    columns: list[str],
) -> Parsed:
    """Melt the score columns of a wide or per-run table into one row per score (``columns``: the file's own,
    for messages)."""
    frame = _fill(path, frame, options, notes)
    matched, skipped = _score_columns(path, frame, options)
    text_only = []
    for column, _, _ in matched:
        values = frame[column]
        if values.dtype == object and values.notna().any():
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.isna().all() and not any(_parses(v) for v in values.dropna()):
                text_only.append(column)
    if text_only:
        matched = [entry for entry in matched if entry[0] not in text_only]
        notes.append(f"{path}: skipped columns holding text, not scores: {short_list(text_only)}")
    if not matched:
        how = f"the pattern {shown(options.pattern)}" if options.pattern else "the rule for score names"
        hint = "pass {metric} NAME if the columns are test sets" if kind == "runs" else "pass {pattern}"
        raise InputError(f"{path}: no column is a score by {how}; columns are {short_list(columns)}", hint=hint)
    score_columns = [column for column, _, _ in matched]
    ids = [c for c in frame.columns if c in ID_COLUMNS]
    raw = frame[score_columns]
    numbers = raw.apply(pd.to_numeric, errors="coerce").astype("float64")
    bad = numbers.isna().to_numpy() & raw.notna().to_numpy()
    if bad.any():
        row, position = np.argwhere(bad)[0]
        column = score_columns[position]
        cell = raw[column].iloc[row]
        what = "is not a finite number" if _parses(cell) else "is not a number"
        raise InputError(f"{labels[row]}: column {shown(column)}: {shown(cell)} {what}")
    table = pd.concat([frame[ids].reset_index(drop=True), numbers.reset_index(drop=True)], axis=1)
    table["_row"] = np.arange(len(frame))
    long = table.melt(id_vars=[*ids, "_row"], value_vars=score_columns, var_name="_column", value_name="value")
    long = long[long["value"].notna()].reset_index(drop=True)
    names = {column: (testset, metric) for column, testset, metric in matched}
    long["testset"] = long["_column"].map({c: t for c, (t, _) in names.items()})
    long["metric"] = long["_column"].map({c: m for c, (_, m) in names.items()})
    quoted = {column: shown(column) for column in score_columns}
    sources = [
        f"{labels[row]}, column {quoted[c]}" for row, c in zip(long["_row"].tolist(), long["_column"], strict=True)
    ]
    long = long.drop(columns=["_row", "_column"])
    rule = options.pattern or ("--metric " + options.metric if options.metric else "split_name")
    manifests = {
        (str(m), str(r)): {"format": kind, "file": str(path), "names": rule}
        for m, r in frame[["model", "run"]].drop_duplicates().itertuples(index=False)
    }
    if skipped:
        notes.append(f"{path}: skipped {count(len(skipped), 'column')} that are not scores: {short_list(skipped)}")
    long, sources = fold_stderr(path, long, sources, notes)
    return Parsed(long, sources, manifests, notes)


def fold_stderr(path: Path, frame: pd.DataFrame, labels: list[str], notes: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The long rows of a table with each ``<metric>_stderr`` row folded into the ``stderr`` column of its
    ``<metric>`` row (same model, run, step, test set and the other key columns present), and their labels.

    A standard error without its score is left out with a note naming its line; one that differs from a
    ``stderr`` the score's row already carries is an error. A note says how many were folded.
    """
    metric = frame["metric"].astype(str)
    is_stderr = metric.str.lower().str.endswith(STDERR_SUFFIX).to_numpy() & (metric.str.len() > len(STDERR_SUFFIX))
    if not is_stderr.any():
        return frame, labels
    keys = [c for c in ("study", "model", "run", "seed", "shots", "data_seed", "step", "testset") if c in frame.columns]
    base = metric.where(~is_stderr, metric.str[: -len(STDERR_SUFFIX)])
    key_frame = frame[keys].astype(str).assign(metric=base.to_numpy())
    key_ids = key_frame.groupby(list(key_frame.columns), sort=False, dropna=False).ngroup().to_numpy()
    score_rows = np.full(int(key_ids.max()) + 1, -1, dtype=np.int64)
    score_rows[key_ids[~is_stderr]] = np.flatnonzero(~is_stderr)
    positions = np.flatnonzero(is_stderr)
    targets = score_rows[key_ids[positions]]
    alone = targets < 0
    if alone.any():
        first = int(positions[np.argmax(alone)])
        notes.append(
            f"{labels[first]}: {count(int(alone.sum()), 'standard error')} without the score they belong to (e.g. "
            f"{shown(metric.iloc[first])} with no {shown(base.iloc[first])} for that test set and step); left out"
        )
        positions, targets = positions[~alone], targets[~alone]
    stderr = (
        pd.to_numeric(frame["stderr"], errors="coerce").to_numpy(dtype=float).copy()
        if "stderr" in frame.columns
        else np.full(len(frame), np.nan)
    )
    values = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
    given, folded = stderr[targets], values[positions]
    differ = np.isfinite(given) & np.isfinite(folded) & ~np.isclose(given, folded)
    if differ.any():
        at = int(np.argmax(differ))
        raise InputError(
            f"{labels[int(positions[at])]}: {shown(metric.iloc[int(positions[at])])} = {folded[at]:.6g}, but the "
            f"score's stderr column says {given[at]:.6g}"
        )
    stderr[targets] = folded
    keep = ~is_stderr
    notes.append(
        f"{path}: {count(len(positions), 'standard error')} (<metric>{STDERR_SUFFIX}) stored as the stderr of "
        "their scores, not as metrics"
    )
    out = frame.assign(stderr=stderr)[keep].reset_index(drop=True)
    return out, [label for label, kept in zip(labels, keep, strict=True) if kept]


def _parses(value: Any) -> bool:
    """Whether ``float(value)`` succeeds (``"nan"`` and ``"inf"`` do: they are numbers, just not finite)."""
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
