"""The score table's columns and rows: validating a table to be written (:func:`normalise_scores`), family and
size from model names, and the conversion between DataFrames and database rows, vectorised per column so that
its cost is linear in rows (split from :mod:`gengen.store.database`, which re-exports the public names): the rows a
write
puts in its temporary table (:func:`_fill_incoming`: the run-level columns bound once per run) and the rows a
read turns back into a score table (:func:`_read_scores`: the run-level columns read once per run).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from gengen.errors import InputError, StoreConflictError
from gengen.store.run_keys import RUN_KEYS, parse_run_label

COLUMNS: tuple[str, ...] = (
    "study",
    "model",
    "family",
    "size",
    "run",
    "seed",
    "shots",
    "data_seed",
    "step",
    "tokens",
    "epoch",
    "testset",
    "metric",
    "value",
    "n_examples",
)
"""The score table's columns, in order; :meth:`Store.load` returns them first, then ``stderr`` and extras."""

KEY: tuple[str, ...] = ("study", "model", "run", "step", "testset", "metric")
"""The primary key of a score."""

DTYPES: dict[str, str] = {
    "study": "str",
    "model": "str",
    "family": "str",
    "size": "str",
    "run": "str",
    "seed": "Int64",
    "shots": "Int64",
    "data_seed": "Int64",
    "step": "int64",
    "tokens": "Int64",
    "epoch": "float64",
    "testset": "str",
    "metric": "str",
    "value": "float64",
    "n_examples": "Int64",
    "stderr": "float64",
}
"""The dtype of each column :meth:`Store.load` returns (``str`` is pandas' string dtype)."""

STORED_COLUMNS: tuple[str, ...] = (*COLUMNS, "stderr")
"""Columns with their own database column; any other column of a written table is kept as an extra."""

REQUIRED_COLUMNS: tuple[str, ...] = ("model", "step", "testset", "metric", "value")
"""Columns a written table must have; the others have defaults."""

DEFAULT_RUN = "main"
"""The run of a score written without one."""

FILTERS: tuple[str, ...] = ("study", "model", "family", "size", "run", "testset", "metric")
"""The keyword filters :meth:`Store.load` accepts."""

OnConflict = Literal["error", "replace", "keep"]

SHOWN_LIMIT = 80
"""The most characters of a value that an error message quotes (:func:`shown`)."""

_INTEGER_COLUMNS = ("seed", "shots", "data_seed", "step", "tokens", "n_examples")
_FLOAT_COLUMNS = ("epoch", "value", "stderr")
_TEXT_COLUMNS = ("study", "model", "family", "size", "run", "testset", "metric")
#: The columns that are the same for all of a run's scores: bound once per run when written, read once per run.
_RUN_LEVEL = ("study", "model", "run", "family", "size", "seed", "shots", "data_seed")
_SIZE_PATTERN = re.compile(r"^(?P<family>.+?)[-_](?P<size>\d+(?:\.\d+)?[kmbt])(?:[-_].*)?$", re.IGNORECASE)
_LEADING_SIZE = re.compile(r"^(?P<size>\d+(?:\.\d+)?[kmbt])(?:[-_](?P<rest>.+))?$", re.IGNORECASE)
_CODENAME = re.compile(r"^(?P<family>[a-z]+)(?P<number>\d+(?:\.\d+)?)$", re.IGNORECASE)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")

CODENAME_UNITS: dict[str, str] = {"peteish": "B"}
"""Model code names whose trailing number is a size in the given unit (OLMo-2's ``peteish1`` ... ``peteish32``
are its 1B ... 32B models)."""


def shown(value: Any, limit: int = SHOWN_LIMIT) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters (a 1 GiB cell is not echoed whole).

    Parameters
    ----------
    value : object
        The offending value (numpy scalars are shown as the Python value they hold).
    limit : int
        The most characters shown; a longer ``repr`` ends in ``…`` and says how long the value is.

    Returns
    -------
    str

    Examples
    --------
    >>> shown("high"), shown(0.5)
    ("'high'", '0.5')
    >>> shown("x" * 1000, limit=12)
    "'xxxxxxxxxxx… (1000 characters)"
    """
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return f"{repr(value[:limit])[:limit]}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def split_model_name(model: str) -> tuple[str, str]:
    """Split a model name into family and size.

    The rule, on the name's last ``/``-part:

    1. ``<family>-<size>[-<anything>]`` with a size token (a number and ``k``/``m``/``b``/``t``, any case)
       between separators: ``pythia-160m``, ``OLMo-2-1124-7B``, ``SmolLM2-360M``, ``Llama-2-7b-hf``;
    2. a name that starts with the size, ``<size>[-<rest>]``: the rest is the family (OLMo's ladder
       ``1B-1xC`` -> family ``1xC``, size ``1B``; the name itself when nothing follows);
    3. a code name of :data:`CODENAME_UNITS` followed by its number: ``peteish7`` -> (``peteish``, ``7B``);
    4. otherwise no size: ``(name, "")``. ``gengen ingest --size`` sets it per file.

    Parameters
    ----------
    model : str
        A model name or hub id, e.g. ``"EleutherAI/pythia-v1.1-160m"``.

    Returns
    -------
    tuple of str
        ``(family, size)``.

    Examples
    --------
    >>> split_model_name("EleutherAI/pythia-v1.1-160m")
    ('pythia-v1.1', '160m')
    >>> split_model_name("1B-1xC"), split_model_name("peteish7"), split_model_name("gpt2")
    (('1xC', '1B'), ('peteish', '7B'), ('gpt2', ''))
    """
    base = model.rstrip("/").rsplit("/", 1)[-1]
    match = _SIZE_PATTERN.match(base)
    if match is not None:
        return match.group("family"), match.group("size")
    leading = _LEADING_SIZE.match(base)
    if leading is not None:
        return leading.group("rest") or base, leading.group("size")
    coded = _CODENAME.match(base)
    if coded is not None and coded.group("family").lower() in CODENAME_UNITS:
        unit = CODENAME_UNITS[coded.group("family").lower()]
        return coded.group("family"), coded.group("number") + unit
    return base, ""


def _json_scalar(value: Any) -> Any:
    """``value`` as a JSON-ready Python scalar (numpy scalars unwrapped, NaN/NA as ``None``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def empty_scores(extra_columns: Sequence[str] = ()) -> pd.DataFrame:
    """An empty score table with the columns and dtypes :meth:`Store.load` returns."""
    frame = pd.DataFrame({name: pd.Series(dtype=DTYPES[name]) for name in STORED_COLUMNS})
    for name in extra_columns:
        frame[name] = pd.Series(dtype="object")
    return frame


def _as_frame(data: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A DataFrame from a DataFrame or an iterable of records."""
    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, Mapping):
        raise InputError("scores: expected a DataFrame or an iterable of records (mappings), got one mapping")
    return pd.DataFrame.from_records(list(data))


def _label(sources: pd.Series | None, position: int) -> str:
    """Where row ``position`` of a batch came from, for error messages."""
    if sources is not None:
        return str(sources.iloc[position])
    return f"row {position}"


def _check_integers(frame: pd.DataFrame, column: str, sources: pd.Series | None) -> pd.Series:
    """Column ``column`` as Int64, or an InputError naming the first value that is not an integer."""
    raw = frame[column]
    if pd.api.types.is_integer_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        return raw.astype("Int64")
    numbers = pd.to_numeric(raw, errors="coerce").astype("float64")
    finite = np.isfinite(numbers.to_numpy())
    bad = (raw.notna().to_numpy() & ~finite) | (finite & (numbers.to_numpy() != np.round(numbers.to_numpy())))
    if pd.api.types.is_bool_dtype(raw.dtype):
        bad = raw.notna().to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{_label(sources, position)}: column {column!r}: {shown(raw.iloc[position])} is not an integer"
        )
    return numbers.round().astype("Int64")


def _check_floats(frame: pd.DataFrame, column: str, sources: pd.Series | None) -> pd.Series:
    """Column ``column`` as float64 (missing values as NaN), or an InputError naming the first non-number."""
    raw = frame[column]
    numbers = pd.to_numeric(raw, errors="coerce").astype("float64")
    bad = numbers.isna().to_numpy() & raw.notna().to_numpy()
    if pd.api.types.is_bool_dtype(raw.dtype):
        bad = raw.notna().to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(f"{_label(sources, position)}: column {column!r}: {shown(raw.iloc[position])} is not a number")
    return numbers


def _name_codes(
    column: pd.Series, name: str, sources: pd.Series | None, *, fill: str | None = None, required: bool = True
) -> tuple[np.ndarray, list[str]]:
    """A name column as integer codes into its distinct texts, checked once per distinct name (a table has few
    names and many rows): missing names take ``fill``; when ``required``, a missing or blank name is an
    InputError naming the first row; names holding control characters (NUL, newline, ESC...) are refused,
    since they print as nothing or break lines, so two different names would look the same everywhere."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    texts = [str(value) for value in uniques]
    if len(set(texts)) < len(texts):  # 1 and "1" are one name
        merged, distinct = pd.factorize(np.array(texts, dtype=object))
        codes = np.where(codes >= 0, merged[np.maximum(codes, 0)], -1)
        texts = [str(text) for text in distinct]
    if fill is not None and (codes < 0).any():
        if fill not in texts:
            texts.append(fill)
        codes = np.where(codes < 0, texts.index(fill), codes)
    if required:
        blank = [number for number, text in enumerate(texts) if not text.strip()]
        empty = (codes < 0) | np.isin(codes, blank)
        if empty.any():
            raise InputError(f"{_label(sources, int(np.flatnonzero(empty)[0]))}: column {name!r} is empty")
    for number, text in enumerate(texts):
        found = _CONTROL_CHARACTER.search(text)
        if found:
            position = int(np.flatnonzero(codes == number)[0])
            raise InputError(
                f"{_label(sources, position)}: column {name!r}: {shown(text)} holds a control character "
                f"({found.group(0)!r})"
            )
    return codes, texts


def _from_codes(codes: np.ndarray, texts: Sequence[str]) -> pd.api.extensions.ExtensionArray:
    """The string column (pandas' ``str`` dtype) whose rows are ``texts[codes]``."""
    return pd.array(list(texts), dtype="str").take(codes)


def _given_or_derived(
    frame: pd.DataFrame, name: str, model_codes: np.ndarray, derived: Sequence[str]
) -> pd.api.extensions.ExtensionArray:
    """Column ``name`` as given where it is, else ``derived[model]`` (family and size from the model name)."""
    if name not in frame.columns:
        return _from_codes(model_codes, derived)
    codes, uniques = pd.factorize(frame[name], use_na_sentinel=True)
    texts = [str(value) for value in uniques]
    combined = np.where(codes >= 0, codes, len(texts) + model_codes)
    merged, distinct = pd.factorize(np.array([*texts, *derived], dtype=object))
    return _from_codes(merged[combined], [str(text) for text in distinct])


def _missing_integers(n: int) -> pd.api.extensions.ExtensionArray:
    """``n`` missing values of the Int64 dtype."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))


def _run_key_column(run_codes: np.ndarray, runs: Sequence[str], name: str) -> pd.Series:
    """Run key ``name`` of every row, from its run label (missing where the label has none)."""
    keys = [parse_run_label(run).get(name) for run in runs]
    values = np.array([0 if key is None else key for key in keys], dtype=np.int64)
    missing = np.array([key is None for key in keys], dtype=bool)
    return pd.Series(pd.arrays.IntegerArray(values[run_codes], missing[run_codes]))


def normalise_scores(
    data: pd.DataFrame | Iterable[Mapping[str, Any]],
    *,
    study: str,
    sources: pd.Series | None = None,
) -> pd.DataFrame:
    """Validate a score table and fill in its defaults, ready to be written.

    Vectorised, with names handled once per distinct value, so that the cost is linear in rows with a small
    constant (a table of millions of scores normalises in seconds).

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        At least the columns ``model, step, testset, metric, value``. Missing ``study`` takes ``study``,
        missing ``run`` is ``"main"``, missing ``family``/``size`` come from :func:`split_model_name`,
        missing ``seed``/``shots``/``data_seed`` are read from run labels such as
        ``"seed=1,shots=64,data_seed=0"`` (:func:`parse_run_label`). Columns outside
        the score table are kept as extras.
    study : str
        The study of rows without one.
    sources : Series, optional
        One label per row (file and key) used in error messages instead of the row number.

    Returns
    -------
    DataFrame
        The columns of :data:`COLUMNS`, ``stderr``, then the extras, one row per key (equal duplicates
        dropped).

    Raises
    ------
    InputError
        A required column is missing, a key column is empty, or a value is not a number.
    StoreConflictError
        Two rows share a key and have different values.
    """
    frame = _as_frame(data).reset_index(drop=True)
    if sources is not None:
        sources = sources.reset_index(drop=True)
    missing = [name for name in REQUIRED_COLUMNS if name not in frame.columns]
    if missing:
        raise InputError(
            f"scores: missing column(s) {', '.join(map(repr, missing))}; "
            f"found {', '.join(map(repr, map(str, frame.columns))) or 'no columns'}"
        )
    n = len(frame)
    absent = pd.Series([None] * n, dtype=object) if n else pd.Series([], dtype=object)
    codes: dict[str, tuple[np.ndarray, list[str]]] = {}
    for name, fill in (("model", None), ("testset", None), ("metric", None), ("run", DEFAULT_RUN), ("study", study)):
        column = frame[name] if name in frame.columns else absent
        codes[name] = _name_codes(column, name, sources, fill=fill, required=name != "study")
    out = pd.DataFrame(index=frame.index)
    model_codes, models = codes["model"]
    split = [split_model_name(model) for model in models]
    for name in ("study", "model"):
        out[name] = _from_codes(*codes[name])
    out["family"] = _given_or_derived(frame, "family", model_codes, [pair[0] for pair in split])
    out["size"] = _given_or_derived(frame, "size", model_codes, [pair[1] for pair in split])
    out["run"] = _from_codes(*codes["run"])
    for name in RUN_KEYS:  # a given key wins; the label's fills the rows without one
        parsed = _run_key_column(*codes["run"], name)
        out[name] = _check_integers(frame, name, sources).fillna(parsed) if name in frame.columns else parsed
    out["step"] = _check_integers(frame, "step", sources)
    if out["step"].isna().any():
        position = int(np.flatnonzero(out["step"].isna().to_numpy())[0])
        raise InputError(f"{_label(sources, position)}: column 'step' is empty")
    for name in ("tokens", "n_examples"):
        out[name] = _check_integers(frame, name, sources) if name in frame.columns else _missing_integers(n)
    for name in ("testset", "metric"):
        out[name] = _from_codes(*codes[name])
    for name in ("epoch", "value", "stderr"):
        out[name] = _check_floats(frame, name, sources) if name in frame.columns else np.nan
    out = out[list(STORED_COLUMNS)]
    for name in [name for name in frame.columns if name not in STORED_COLUMNS]:
        out[str(name)] = frame[name]
    key = [codes[name][0] for name in ("study", "model", "run")]
    key += [out["step"].to_numpy(dtype=np.int64), codes["testset"][0], codes["metric"][0]]
    return _drop_equal_duplicates(out, key, sources)


def _drop_equal_duplicates(frame: pd.DataFrame, key: list[np.ndarray], sources: pd.Series | None) -> pd.DataFrame:
    """Drop rows repeating a key with an equal value; raise on a repeated key with a different value.

    ``key`` holds the key columns as integers (name codes and the step), so the check is one sort, not one
    comparison per repeated key.
    """
    keys, repeated = _repeated_keys(key)
    if not repeated.any():
        return frame
    rows = np.flatnonzero(repeated)
    order = rows[np.lexsort([rows, *(column[rows] for column in reversed(key))])]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = np.any([column[order][1:] != column[order][:-1] for column in key], axis=0)
    first = order[np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))]
    values = frame["value"].to_numpy(dtype=np.float64)
    equal = (values[order] == values[first]) | (np.isnan(values[order]) & np.isnan(values[first]))
    if not equal.all():
        at = int(np.flatnonzero(~equal)[0])
        other, original = int(order[at]), int(first[at])
        row = frame.iloc[original]
        raise StoreConflictError(
            f"{_label(sources, other)}: run {row['model']}/{row['run']} step {row['step']} testset "
            f"{shown(row['testset'])} metric {shown(row['metric'])}: value {float(values[other])!r} conflicts "
            f"with {float(values[original])!r} from {_label(sources, original)}; nothing was written"
        )
    return frame[~keys.duplicated(keep="first").to_numpy()]


def _repeated_keys(key: list[np.ndarray]) -> tuple[pd.Series | pd.DataFrame, np.ndarray]:
    """The key columns as one integer per row (each column's codes in a mixed radix; a table of the columns
    where the radix would overflow), and which rows share their key with another.

    One count per possible key when there are not many more of those than rows (a long table's keys fill
    most of model × run × step × test set × metric), else one hash of the combined key, not of six columns.
    """
    combined = np.zeros(len(key[0]), dtype=np.int64)
    width = 1
    for column in key:
        dense = bool(column.min() >= 0 and column.max() < 64) if len(column) else True
        codes = column if dense else pd.factorize(column)[0]
        radix = int(codes.max()) + 1 if len(codes) else 1
        width *= radix
        if width >= 2**62:
            table = pd.DataFrame(dict(enumerate(key)))
            return table, table.duplicated(keep=False).to_numpy()
        combined = combined * radix + codes
    if width <= 4 * len(combined) + 1024:
        return pd.Series(combined), np.bincount(combined, minlength=width)[combined] > 1
    series = pd.Series(combined)
    return series, series.duplicated(keep=False).to_numpy()


def _with_none(values: list[Any], missing: np.ndarray) -> list[Any]:
    """``values`` with ``None`` (SQL NULL) at the positions ``missing`` marks."""
    for position in np.flatnonzero(missing).tolist():
        values[position] = None
    return values


def _texts(values: Any) -> list[str]:
    """Each value as ``str``, converted once per distinct value (a table has few names and many rows)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return np.array([str(u) for u in uniques], dtype=object)[codes].tolist()


def _db_rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The rows of a normalised score table as tuples for the database (extras as one JSON text)."""
    columns = _db_columns(frame)
    return list(zip(*(columns[name] for name in (*STORED_COLUMNS, "extra")), strict=True))


def _db_columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """The columns of a normalised score table as lists of database values (``None`` for NULL; extras as one
    JSON text, column ``extra``).

    Column by column and vectorised (numpy to Python lists), so the cost is linear in rows with a small
    constant: a long table of millions of scores converts in seconds.
    """
    extras = [name for name in frame.columns if name not in STORED_COLUMNS]
    columns: list[list[Any]] = []
    for name in STORED_COLUMNS:
        series = frame[name]
        if name in _INTEGER_COLUMNS:
            integers = series.astype("Int64")
            missing = integers.isna().to_numpy()
            columns.append(_with_none(integers.to_numpy(dtype="int64", na_value=0).tolist(), missing))
        elif name in _FLOAT_COLUMNS:
            floats = series.astype("float64").to_numpy()
            columns.append(_with_none(floats.tolist(), np.isnan(floats)))
        else:
            columns.append(_texts(series))
    if extras:
        records = frame[extras].astype("object").to_dict(orient="records")
        texts = []
        for record in records:
            kept = {str(k): _json_scalar(v) for k, v in record.items()}
            kept = {k: v for k, v in kept.items() if v is not None}
            texts.append(json.dumps(kept, sort_keys=True) if kept else None)
        columns.append(texts)
    else:
        columns.append([None] * len(frame))
    return dict(zip((*STORED_COLUMNS, "extra"), columns, strict=True))


def _frame_from_rows(
    rows: list[tuple[Any, ...]],
    names: Sequence[str] = (*STORED_COLUMNS, "extra"),
    repeated: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The score table from database rows (columns ``names``; ``repeated`` holds the other columns, one object
    array each, already one value per row), with the documented dtypes and the extras expanded; vectorised
    per column (text converted once per distinct value)."""
    if not rows:
        return empty_scores()
    table = np.empty((len(rows), len(names)), dtype=object)
    table[:] = rows  # one C loop over the rows (zip(*rows) costs more than the whole conversion)
    columns = {name: table[:, number] for number, name in enumerate(names)}
    columns.update(repeated or {})
    frame = pd.DataFrame(index=pd.RangeIndex(len(rows)))
    for name in STORED_COLUMNS:
        values = columns[name]
        if name in _FLOAT_COLUMNS:
            frame[name] = values.astype(np.float64)  # None -> NaN
        elif name == "step":
            frame[name] = values.astype(np.int64)
        elif name in _INTEGER_COLUMNS:
            missing = values == None  # noqa: E711 (elementwise on an object array)
            frame[name] = pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)
        else:
            codes, uniques = pd.factorize(values, use_na_sentinel=False)
            frame[name] = pd.array(list(uniques), dtype=DTYPES[name]).take(codes)
    extra = columns.get("extra", ())
    if any(text is not None for text in extra):
        parsed = pd.DataFrame.from_records([json.loads(text) if text else {} for text in extra])
        for name in parsed.columns:
            if name not in frame.columns:
                frame[name] = parsed[name]
    return frame


def _distinct(columns: Sequence[list[Any]]) -> tuple[list[int], list[tuple[Any, ...]]]:
    """The code of each row's combination of ``columns`` and the distinct combinations, in order."""
    codes = pd.DataFrame(
        {
            i: pd.factorize(np.asarray(column, dtype=object), use_na_sentinel=False)[0]
            for i, column in enumerate(columns)
        }
    )
    group = codes.groupby(list(codes.columns), sort=False).ngroup().to_numpy()
    _, first = np.unique(group, return_index=True)
    return group.tolist(), [tuple(column[i] for column in columns) for i in first.tolist()]


def _fill_incoming(conn: sqlite3.Connection, columns: Mapping[str, list[Any]]) -> None:
    """Fill the temporary table ``incoming`` with the rows of ``columns``. The run-level columns and the test
    set and metric are bound once per distinct combination and joined back in SQL, so each row binds only its
    own numbers (binding is most of a write's cost)."""
    row_names = [name for name in (*STORED_COLUMNS, "extra") if name not in (*_RUN_LEVEL, "testset", "metric")]
    runs, run_values = _distinct([columns[name] for name in _RUN_LEVEL])
    tasks, task_values = _distinct([columns["testset"], columns["metric"]])
    conn.execute(f"CREATE TEMP TABLE runs_in (id INTEGER PRIMARY KEY, {', '.join(_RUN_LEVEL)})")
    conn.execute("CREATE TEMP TABLE tasks_in (id INTEGER PRIMARY KEY, testset, metric)")
    conn.execute(f"CREATE TEMP TABLE rows_in (run_id, task_id, {', '.join(row_names)})")
    conn.executemany(
        f"INSERT INTO runs_in VALUES (?{', ?' * len(_RUN_LEVEL)})", [(i, *run) for i, run in enumerate(run_values)]
    )
    conn.executemany("INSERT INTO tasks_in VALUES (?, ?, ?)", [(i, *pair) for i, pair in enumerate(task_values)])
    conn.executemany(
        f"INSERT INTO rows_in VALUES (?, ?{', ?' * len(row_names)})",
        zip(runs, tasks, *(columns[name] for name in row_names), strict=True),
    )
    names = (*STORED_COLUMNS, "extra")
    source = {**{name: f"r.{name}" for name in _RUN_LEVEL}, "testset": "t.testset", "metric": "t.metric"}
    selected = ", ".join(source.get(name, f"i.{name}") for name in names)
    conn.execute(
        f"INSERT INTO incoming ({', '.join(names)}) SELECT {selected} FROM rows_in AS i "
        "JOIN runs_in AS r ON r.id = i.run_id JOIN tasks_in AS t ON t.id = i.task_id"
    )
    for table in ("rows_in", "runs_in", "tasks_in"):
        conn.execute(f"DROP TABLE {table}")


def _read_scores(conn: sqlite3.Connection, stored: tuple[str, ...], where: str, params: list[Any]) -> pd.DataFrame:
    """The rows of ``where``, sorted by the key (``stored``: the columns of the store's schema). The run-level
    columns, the same for all of a run's scores in every store gengen writes, are read once per run and repeated
    (half the values to fetch); a store where they vary within a run is read row by row."""

    def column(name: str) -> str:  # a store of an older schema: the columns it lacks read as NULL
        return name if name in stored else f"NULL AS {name}"

    order = "ORDER BY study, model, run, step, testset, metric"
    # Per run (in key order, so no sort): each run-level column's min, max and count of non-NULL values.
    others = [c if c in stored else "NULL" for c in _RUN_LEVEL[3:]]
    spans = ", ".join(f"min({c}), max({c}), count({c})" for c in others)
    groups = conn.execute(
        f"SELECT study, model, run, {spans}, count(*) FROM scores{where} GROUP BY study, model, run "
        "ORDER BY study, model, run",
        params,
    ).fetchall()
    if not groups:
        return empty_scores()
    constant = all(
        (low == high and count == group[-1]) or count == 0
        for group in groups
        for low, high, count in zip(group[3:-1:3], group[4:-1:3], group[5:-1:3], strict=True)
    )
    if constant:
        names = [name for name in (*STORED_COLUMNS, "extra") if name not in _RUN_LEVEL]
        rows = conn.execute(f"SELECT {', '.join(map(column, names))} FROM scores{where} {order}", params).fetchall()
        counts = np.array([group[-1] for group in groups], dtype=np.int64)
        if counts.sum() == len(rows):
            values = np.empty((len(groups), len(_RUN_LEVEL)), dtype=object)
            values[:] = [(*group[:3], *group[3:-1:3]) for group in groups]
            repeated = {name: np.repeat(values[:, i], counts) for i, name in enumerate(_RUN_LEVEL)}
            return _frame_from_rows(rows, names, repeated)
    names = [*STORED_COLUMNS, "extra"]
    rows = conn.execute(f"SELECT {', '.join(map(column, names))} FROM scores{where} {order}", params).fetchall()
    return _frame_from_rows(rows, names)


def _keys_from_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its empty run-key columns filled from the run labels (as the migration to schema 2 does)."""
    keys = {run: parse_run_label(run) for run in frame["run"].unique()}
    for name in RUN_KEYS:
        parsed = pd.array(frame["run"].map({run: found.get(name) for run, found in keys.items()}), dtype="Int64")
        frame[name] = frame[name].fillna(pd.Series(parsed, index=frame.index))
    return frame
