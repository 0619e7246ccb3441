"""The results store: one SQLite file holding the tidy score table and a manifest per run.

A store lives in a study folder (``<folder>/gengen.sqlite``) or in any ``*.sqlite`` / ``*.db`` file. It is
safe for several processes on one machine at once: the database runs in WAL mode with a busy timeout, and
every write is one ``BEGIN IMMEDIATE`` transaction, so a write lands completely or not at all, even when the
process is killed half-way.

Conflict semantics
------------------
A score is identified by ``(study, model, run, step, testset, metric)``. Writing a key that is already stored

* with an **equal value** (the same float64, or NaN over NaN) is a no-op upsert: the row stays as it was
  and is not counted as written; this makes re-running an import or resuming a scoring job harmless;
* with a **different value** raises :class:`gengen.errors.StoreConflictError` naming the run, step, test set,
  metric and both values, and nothing of the batch is written (``on_conflict="error"``, the default).
  ``on_conflict="replace"`` overwrites instead and ``on_conflict="keep"`` keeps the stored value.

The same rule holds inside one batch: two rows with one key and different values are a conflict.

Schema
------
``PRAGMA user_version`` holds the schema version (:data:`SCHEMA_VERSION`). Opening a store runs the
migrations in :data:`MIGRATIONS` from the stored version up to the current one inside one transaction (a new
file is at version 0, so creating a store is the first migration). A store written by a newer gengen is
refused rather than misread.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from gengen._versions import installed_versions
from gengen.errors import GengenError, InputError, StoreConflictError, StoreError

__all__ = [
    "COLUMNS",
    "DB_NAME",
    "KEY",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Store",
    "empty_scores",
    "load",
    "normalise_scores",
    "split_model_name",
]

DB_NAME = "gengen.sqlite"
"""File name of the database inside a study folder."""

SCHEMA_VERSION = 1
"""Version of the schema this gengen writes; kept in ``PRAGMA user_version``."""

COLUMNS: tuple[str, ...] = (
    "study",
    "model",
    "family",
    "size",
    "run",
    "seed",
    "shots",
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

_BUSY_TIMEOUT_S = 60.0
_INTEGER_COLUMNS = ("seed", "shots", "step", "tokens", "n_examples")
_FLOAT_COLUMNS = ("epoch", "value", "stderr")
_TEXT_COLUMNS = ("study", "model", "family", "size", "run", "testset", "metric")
_MANIFEST_PACKAGES = ("gengen", "numpy", "pandas", "pyarrow", "torch", "transformers", "datasets", "peft")
_SIZE_PATTERN = re.compile(r"^(?P<family>.+?)[-_](?P<size>\d+(?:\.\d+)?[kmbt])(?:[-_].*)?$", re.IGNORECASE)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
_RUN_KEY_PATTERN = re.compile(r"(?:^|[,;\s])\s*(?P<key>seed|shots)\s*=\s*(?P<value>-?\d+)\s*(?=$|[,;\s])")


# --------------------------------------------------------------------------------------------- schema


def _migrate_0_to_1(conn: sqlite3.Connection) -> None:
    """Create the version 1 schema: the score table and the manifest table."""
    conn.execute(
        """
        CREATE TABLE scores (
            study      TEXT    NOT NULL,
            model      TEXT    NOT NULL,
            family     TEXT    NOT NULL,
            size       TEXT    NOT NULL,
            run        TEXT    NOT NULL,
            seed       INTEGER,
            shots      INTEGER,
            step       INTEGER NOT NULL,
            tokens     INTEGER,
            epoch      REAL,
            testset    TEXT    NOT NULL,
            metric     TEXT    NOT NULL,
            value      REAL,
            n_examples INTEGER,
            stderr     REAL,
            extra      TEXT,
            PRIMARY KEY (study, model, run, step, testset, metric)
        ) WITHOUT ROWID
        """
    )
    conn.execute(
        """
        CREATE TABLE manifests (
            model      TEXT NOT NULL,
            run        TEXT NOT NULL,
            manifest   TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (model, run)
        ) WITHOUT ROWID
        """
    )


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _migrate_0_to_1}
"""``MIGRATIONS[v]`` upgrades a store from schema version ``v`` to ``v + 1`` (inside the open transaction).

To change the schema: add ``MIGRATIONS[SCHEMA_VERSION] = _migrate_1_to_2`` and increment
:data:`SCHEMA_VERSION`; stores of every earlier version are upgraded when first opened.
"""


# --------------------------------------------------------------------------------------------- helpers


def split_model_name(model: str) -> tuple[str, str]:
    """Split a model name into family and size.

    Parameters
    ----------
    model : str
        A model name or hub id, e.g. ``"EleutherAI/pythia-v1.1-160m"``.

    Returns
    -------
    tuple of str
        ``(family, size)``: the part before a size token such as ``160m`` / ``1.4b`` / ``7B`` and the token;
        ``(basename, "")`` when the name has no size token.

    Examples
    --------
    >>> split_model_name("EleutherAI/pythia-v1.1-160m")
    ('pythia-v1.1', '160m')
    >>> split_model_name("gpt2")
    ('gpt2', '')
    """
    base = model.rstrip("/").rsplit("/", 1)[-1]
    match = _SIZE_PATTERN.match(base)
    if match is None:
        return base, ""
    return match.group("family"), match.group("size")


def _run_keys(run: str) -> dict[str, int]:
    """Return the ``seed`` / ``shots`` values written in a run key such as ``"seed=1,shots=64"``."""
    return {m.group("key"): int(m.group("value")) for m in _RUN_KEY_PATTERN.finditer(run)}


def _now() -> str:
    """The current UTC time as an ISO 8601 string."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _package_versions() -> dict[str, str]:
    """Versions of Python and of the installed packages that shape a run's scores."""
    return installed_versions(_MANIFEST_PACKAGES, python=True)


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


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python scalar it holds (for readable messages)."""
    return value.item() if isinstance(value, np.generic) else value


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
        shown = _plain(raw.iloc[position])
        raise InputError(f"{_label(sources, position)}: column {column!r}: {shown!r} is not an integer")
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
        raise InputError(
            f"{_label(sources, position)}: column {column!r}: {_plain(raw.iloc[position])!r} is not a number"
        )
    return numbers


def _check_name_characters(names: pd.Series, column: str, sources: pd.Series | None) -> None:
    """Refuse names holding control characters (NUL, newline, ESC...): they print as nothing or break lines, so
    two different names would look the same in every table and message."""
    unique = names.unique()
    bad = [name for name in unique if _CONTROL_CHARACTER.search(name)]
    if bad:
        position = int(np.flatnonzero((names == bad[0]).to_numpy())[0])
        found = _CONTROL_CHARACTER.search(bad[0])
        char = found.group(0) if found else ""
        raise InputError(
            f"{_label(sources, position)}: column {column!r}: {bad[0]!r} holds a control character ({char!r})"
        )


def normalise_scores(
    data: pd.DataFrame | Iterable[Mapping[str, Any]],
    *,
    study: str,
    sources: pd.Series | None = None,
) -> pd.DataFrame:
    """Validate a score table and fill in its defaults, ready to be written.

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        At least the columns ``model, step, testset, metric, value``. Missing ``study`` takes ``study``,
        missing ``run`` is ``"main"``, missing ``family``/``size`` come from :func:`split_model_name`,
        missing ``seed``/``shots`` are read from run keys such as ``"seed=1,shots=64"``. Columns outside
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
    out = pd.DataFrame(index=frame.index)
    out["study"] = frame["study"] if "study" in frame.columns else study
    out["model"] = frame["model"]
    out["run"] = frame["run"] if "run" in frame.columns else DEFAULT_RUN
    for name in ("study", "run"):
        out[name] = out[name].where(out[name].notna(), study if name == "study" else DEFAULT_RUN)
    for name in ("model", "testset", "metric", "run", "study"):
        column = (out[name] if name in ("run", "study") else frame[name]).astype("object")
        # Per distinct name, not per row: a table has few names and many rows.
        blank = [value for value in column.dropna().unique() if str(value).strip() == ""]
        empty = column.isna() | column.isin(blank)
        if empty.any() and name != "study":
            position = int(np.flatnonzero(empty.to_numpy())[0])
            raise InputError(f"{_label(sources, position)}: column {name!r} is empty")
        out[name] = column.astype(str)
        _check_name_characters(out[name], name, sources)
    split = {model: split_model_name(model) for model in out["model"].unique()}
    for index, name in enumerate(("family", "size")):
        derived = out["model"].map({model: pair[index] for model, pair in split.items()}).astype("object")
        if name in frame.columns:
            given = frame[name].astype("object")
            out[name] = given.where(given.notna(), derived).map(str)
        else:
            out[name] = derived
    run_keys = {run: _run_keys(run) for run in out["run"].unique()}
    for name in ("seed", "shots"):
        if name in frame.columns:
            out[name] = _check_integers(frame, name, sources)
        else:
            out[name] = pd.array(out["run"].map({run: keys.get(name) for run, keys in run_keys.items()}), dtype="Int64")
    out["step"] = _check_integers(frame, "step", sources)
    if out["step"].isna().any():
        position = int(np.flatnonzero(out["step"].isna().to_numpy())[0])
        raise InputError(f"{_label(sources, position)}: column 'step' is empty")
    for name in ("tokens", "n_examples"):
        out[name] = (
            _check_integers(frame, name, sources) if name in frame.columns else pd.array([pd.NA] * len(out), "Int64")
        )
    for name in ("epoch", "value", "stderr"):
        out[name] = _check_floats(frame, name, sources) if name in frame.columns else np.nan
    out = out[list(STORED_COLUMNS)]
    extras = [name for name in frame.columns if name not in STORED_COLUMNS]
    for name in extras:
        out[str(name)] = frame[name]
    return _drop_equal_duplicates(out, sources)


def _drop_equal_duplicates(frame: pd.DataFrame, sources: pd.Series | None) -> pd.DataFrame:
    """Drop rows repeating a key with an equal value; raise on a repeated key with a different value."""
    duplicated = frame.duplicated(list(KEY), keep=False)
    if not duplicated.any():
        return frame
    repeated = frame[duplicated]
    for _, group in repeated.groupby(list(KEY), sort=False):
        values = group["value"].to_numpy()
        first = values[0]
        differs = [not (v == first or (math.isnan(v) and math.isnan(first))) for v in values]
        if any(differs):
            other = differs.index(True)
            row = group.iloc[0]
            first_at = _label(sources, int(group.index[0]))
            other_at = _label(sources, int(group.index[other]))
            raise StoreConflictError(
                f"{other_at}: run {row['model']}/{row['run']} step {row['step']} testset {row['testset']!r} "
                f"metric {row['metric']!r}: value {float(values[other])!r} conflicts with {float(first)!r} "
                f"from {first_at}; nothing was written"
            )
    return frame[~frame.duplicated(list(KEY), keep="first")]


def _db_rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The rows of a normalised score table as tuples for the database (extras as one JSON text)."""
    extras = [name for name in frame.columns if name not in STORED_COLUMNS]
    columns: list[list[Any]] = []
    for name in STORED_COLUMNS:
        series = frame[name]
        if name in _INTEGER_COLUMNS:
            columns.append([None if v is pd.NA else int(v) for v in series.astype("Int64")])
        elif name in _FLOAT_COLUMNS:
            columns.append([None if math.isnan(v) else float(v) for v in series.astype("float64")])
        else:
            columns.append([str(v) for v in series])
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
    return list(zip(*columns, strict=True))


# --------------------------------------------------------------------------------------------- store


class Store:
    """A gengen results store: the tidy score table and one manifest per run, in one SQLite file.

    Parameters
    ----------
    path : str or Path
        A study folder (the database is ``path / "gengen.sqlite"``) or a ``*.sqlite`` / ``*.db`` file.
        Created, with its parent folders, if absent.
    study : str, optional
        The study of scores written without a ``study`` column; by default the folder's name (or the file's
        stem for a database file named by path).
    timeout : float
        Seconds a write waits for another process's transaction before giving up.
    read_only : bool
        Open an existing store for reading only (SQLite ``mode=ro``, or ``immutable=1`` where even the
        WAL index cannot be created, as in a read-only folder): nothing is created, migrated or written, so a
        store on read-only media or shared read-only can be loaded and exported.

    Notes
    -----
    The object holds no open connection: each call opens one, so a ``Store`` can be passed to worker
    processes. See the module docstring for the conflict semantics and the schema migrations.

    Examples
    --------
    >>> import shutil, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> store = Store(folder)
    >>> store.write_scores([{"model": "gpt2", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5}])
    1
    >>> store.load()[["model", "run", "step", "testset", "metric", "value"]]
      model   run  step testset metric  value
    0  gpt2  main     0    piqa    acc    0.5
    >>> shutil.rmtree(folder)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        study: str | None = None,
        timeout: float = _BUSY_TIMEOUT_S,
        read_only: bool = False,
    ):
        path = Path(path).expanduser()
        if path.suffix.lower() in (".sqlite", ".db", ".sqlite3") or path.is_file():
            self.path = path
            default_study = path.stem if path.name != DB_NAME else path.resolve().parent.name
        else:
            self.path = path / DB_NAME
            default_study = path.resolve().name
            if not read_only:  # a gengen.sqlite linking (or dangling) out of the study folder is not written
                from gengen._files import inside

                inside(path, self.path)
        if not read_only and self.path.is_symlink() and not self.path.exists():
            raise StoreError(
                f"{self.path}: a symbolic link to a missing file ({os.readlink(self.path)}); "
                "gengen does not create a store through it"
            )
        self.study = study if study is not None else default_study
        self.timeout = float(timeout)
        self.read_only = read_only
        self._uri: str | None = None
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"{path}: no gengen store here (expected {self.path})")
            with self._connect() as conn:
                self._check_version(conn)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            self._prepare(conn)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, study={self.study!r})"

    # ----------------------------------------------------------------------------- connection

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """An autocommit connection with the busy timeout set; closed on exit."""
        try:
            if self.read_only:
                conn = self._connect_read_only()
            else:
                conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as error:
            raise StoreError(_store_problem(self.path, error)) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA synchronous = FULL")
            yield conn
        except sqlite3.DatabaseError as error:
            raise StoreError(_store_problem(self.path, error)) from None
        finally:
            conn.close()

    def _connect_read_only(self) -> sqlite3.Connection:
        """``mode=ro``; where that cannot read (a WAL store in a read-only folder has no ``-shm`` to map),
        ``immutable=1``, which reads the file as it is (the store must then not be written meanwhile)."""
        base = self.path.resolve().as_uri()
        modes = [self._uri] if self._uri else [f"{base}?mode=ro", f"{base}?immutable=1"]
        for number, uri in enumerate(modes):
            conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
            try:
                conn.execute("PRAGMA user_version").fetchone()
            except sqlite3.OperationalError:
                conn.close()
                if number == len(modes) - 1:
                    raise
                continue
            self._uri = uri
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_version(self, conn: sqlite3.Connection) -> None:
        """A store opened read-only must be one this gengen reads as it is (no migration is possible)."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this gengen's ({SCHEMA_VERSION}); "
                "upgrade gengen"
            )
        if version == 0:
            raise StoreError(f"{self.path}: an SQLite database that is not a gengen store")
        raise _OlderSchemaError(
            f"{self.path}: store schema version {version} is older than this gengen's ({SCHEMA_VERSION}); "
            "open it once writable (e.g. gengen ingest) to upgrade it"
        )

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``) so concurrent writers queue cleanly."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        _commit(conn)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL mode and bring the schema up to :data:`SCHEMA_VERSION`."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        with self._transaction(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: store schema version {version} is newer than this gengen's "
                    f"({SCHEMA_VERSION}); upgrade gengen"
                )
            if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0:
                raise StoreError(f"{self.path}: an SQLite database that is not a gengen store")
            while version < SCHEMA_VERSION:
                MIGRATIONS[version](conn)
                version += 1
                conn.execute(f"PRAGMA user_version = {version}")

    @property
    def schema_version(self) -> int:
        """The schema version of the database file."""
        with self._connect() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    # ----------------------------------------------------------------------------- writing

    def write_scores(
        self,
        data: pd.DataFrame | Iterable[Mapping[str, Any]],
        *,
        on_conflict: OnConflict = "error",
    ) -> int:
        """Write scores in one transaction.

        Parameters
        ----------
        data : DataFrame or iterable of mappings
            Columns as in :func:`normalise_scores`: at least ``model, step, testset, metric, value``.
        on_conflict : {"error", "replace", "keep"}
            What to do with a key already stored with a different value: raise
            :class:`~gengen.errors.StoreConflictError` and write nothing, overwrite it, or keep the stored
            value. An equal value is always a no-op.

        Returns
        -------
        int
            Rows inserted or changed (equal re-writes are not counted); 0 for an empty table.
        """
        table = _as_frame(data)
        if len(table) == 0:
            return 0
        frame = normalise_scores(table, study=self.study)
        return self.write_batch(frame, on_conflict=on_conflict)

    def write_batch(
        self,
        frame: pd.DataFrame,
        *,
        on_conflict: OnConflict = "error",
        manifests: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        sources: pd.Series | None = None,
    ) -> int:
        """Write a normalised score table and manifests in one transaction (used by the importers).

        Parameters
        ----------
        frame : DataFrame
            The output of :func:`normalise_scores`.
        on_conflict : {"error", "replace", "keep"}
            As in :meth:`write_scores`.
        manifests : mapping, optional
            ``{(model, run): manifest}`` written only for runs that have none yet.
        sources : Series, optional
            One label per row of ``frame`` (same index) naming where it came from, for conflict messages.

        Returns
        -------
        int
            Rows inserted or changed.
        """
        if on_conflict not in ("error", "replace", "keep"):
            raise GengenError(f"on_conflict: expected 'error', 'replace' or 'keep', got {on_conflict!r}")
        rows = _db_rows(frame)
        names = ", ".join((*STORED_COLUMNS, "extra"))
        marks = ", ".join("?" * (len(STORED_COLUMNS) + 1))
        keys = ", ".join(KEY)
        with self._connect() as conn, self._transaction(conn):
            conn.execute(f"CREATE TEMP TABLE incoming AS SELECT {names} FROM scores WHERE 0")
            conn.executemany(f"INSERT INTO incoming ({names}) VALUES ({marks})", rows)
            if on_conflict == "error":
                self._raise_on_conflict(conn, frame, sources)
            before = conn.total_changes
            if on_conflict == "replace":
                updates = ", ".join(f"{n} = excluded.{n}" for n in (*STORED_COLUMNS, "extra") if n not in KEY)
                conn.execute(
                    f"INSERT INTO scores ({names}) SELECT {names} FROM incoming WHERE true "
                    f"ON CONFLICT ({keys}) DO UPDATE SET {updates} WHERE scores.value IS NOT excluded.value"
                )
            else:
                conn.execute(
                    f"INSERT INTO scores ({names}) SELECT {names} FROM incoming WHERE true "
                    f"ON CONFLICT ({keys}) DO NOTHING"
                )
            written = conn.total_changes - before
            now = _now()
            for (model, run), manifest in (manifests or {}).items():
                conn.execute(
                    "INSERT INTO manifests (model, run, manifest, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (model, run) DO NOTHING",
                    (model, run, self._manifest_text(manifest, now), now, now),
                )
            conn.execute("DROP TABLE incoming")
        return written

    def _raise_on_conflict(self, conn: sqlite3.Connection, frame: pd.DataFrame, sources: pd.Series | None) -> None:
        """Raise StoreConflictError for the first incoming row whose key is stored with another value."""
        on = " AND ".join(f"s.{k} = i.{k}" for k in KEY)
        found = conn.execute(
            f"SELECT i.study, i.model, i.run, i.step, i.testset, i.metric, s.value, i.value, "
            f"count(*) OVER () FROM incoming AS i JOIN scores AS s ON {on} "
            f"WHERE s.value IS NOT i.value LIMIT 1"
        ).fetchone()
        if found is None:
            return
        study, model, run, step, testset, metric, stored, new, count = found
        where = ""
        if sources is not None:
            match = (
                (frame["study"] == study)
                & (frame["model"] == model)
                & (frame["run"] == run)
                & (frame["step"] == step)
                & (frame["testset"] == testset)
                & (frame["metric"] == metric)
            )
            where = f"{sources[match[match].index[0]]}: "
        others = f" (and {count - 1} more)" if count > 1 else ""
        raise StoreConflictError(
            f"{where}run {model}/{run} step {step} testset {testset!r} metric {metric!r}: new value "
            f"{_show(new)} differs from {_show(stored)} already in {self.path}{others}; nothing was written"
        )

    def _manifest_text(self, manifest: Mapping[str, Any], now: str) -> str:
        """A manifest as JSON text, with package versions and the creation time added when absent."""
        full = dict(manifest)
        full.setdefault("packages", _package_versions())
        full.setdefault("created_at", now)
        return json.dumps(full, sort_keys=True, default=str)

    def write_manifest(self, model: str, run: str, manifest: Mapping[str, Any]) -> None:
        """Store the manifest of a run (its config and anything worth keeping), replacing an earlier one.

        Parameters
        ----------
        model, run : str
            The run.
        manifest : mapping
            JSON-serialisable content (other objects are written as their ``str``). ``packages`` (versions
            of Python and the libraries that shape scores) and ``created_at`` (UTC, ISO 8601) are added when
            absent; a replaced manifest keeps its first ``created_at``.
        """
        now = _now()
        with self._connect() as conn, self._transaction(conn):
            found = conn.execute(
                "SELECT created_at FROM manifests WHERE model = ? AND run = ?", (model, run)
            ).fetchone()
            created = found[0] if found else now
            text = self._manifest_text({**manifest, "created_at": manifest.get("created_at", created)}, now)
            conn.execute(
                "INSERT INTO manifests (model, run, manifest, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (model, run) DO UPDATE SET manifest = excluded.manifest, "
                "updated_at = excluded.updated_at",
                (model, run, text, created, now),
            )

    # ----------------------------------------------------------------------------- reading

    def manifest(self, model: str, run: str) -> dict[str, Any] | None:
        """The manifest of a run, or ``None`` when it has none."""
        with self._connect() as conn:
            found = conn.execute("SELECT manifest FROM manifests WHERE model = ? AND run = ?", (model, run)).fetchone()
        return None if found is None else json.loads(found[0])

    def manifests(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every manifest, keyed by ``(model, run)``."""
        with self._connect() as conn:
            found = conn.execute("SELECT model, run, manifest FROM manifests ORDER BY model, run").fetchall()
        return {(model, run): json.loads(text) for model, run, text in found}

    def completed(self, model: str, run: str, *, study: str | None = None) -> set[tuple[int, str, str]]:
        """The ``(step, testset, metric)`` triples already stored for a run (of any study unless given)."""
        query = "SELECT step, testset, metric FROM scores WHERE model = ? AND run = ?"
        params: list[Any] = [model, run]
        if study is not None:
            query += " AND study = ?"
            params.append(study)
        with self._connect() as conn:
            return {(int(step), testset, metric) for step, testset, metric in conn.execute(query, params)}

    def count(self) -> int:
        """Number of scores in the store."""
        with self._connect() as conn:
            return int(conn.execute("SELECT count(*) FROM scores").fetchone()[0])

    def load(self, **filters: str | Sequence[str]) -> pd.DataFrame:
        """The score table, optionally filtered.

        Parameters
        ----------
        **filters : str or list of str
            Keep rows whose ``study``, ``model``, ``family``, ``size``, ``run``, ``testset`` or ``metric`` is
            (one of) the given value(s).

        Returns
        -------
        DataFrame
            Columns :data:`COLUMNS` with the dtypes of :data:`DTYPES`, then ``stderr`` (float, NaN when
            unknown), then any extra columns written with the scores; sorted by study, model, run, step,
            test set and metric.
        """
        clauses: list[str] = []
        params: list[Any] = []
        for name, wanted in filters.items():
            if name not in FILTERS:
                raise GengenError(f"load: unknown filter {name!r}; expected one of {', '.join(FILTERS)}")
            values = [wanted] if isinstance(wanted, str) else list(wanted)
            clauses.append(f"{name} IN ({', '.join('?' * len(values))})")
            params.extend(str(v) for v in values)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        query = (
            f"SELECT {', '.join((*STORED_COLUMNS, 'extra'))} FROM scores{where} "
            f"ORDER BY study, model, run, step, testset, metric"
        )
        with self._connect() as conn:
            rows = conn.execute(query, params).fetchall()
        return _frame_from_rows(rows)


class _OlderSchemaError(StoreError):
    """A store of an older schema opened read-only (it must be migrated, which needs writing)."""


def _store_problem(path: Path, error: sqlite3.Error) -> str:
    """One line naming the store and what SQLite could not do with it."""
    text = str(error)
    if "not a database" in text or "malformed" in text:
        return f"{path}: not a gengen store (not an SQLite database, or a damaged one)"
    if "readonly" in text or "read-only" in text:
        return f"{path}: the store is read-only (the file or its folder cannot be written)"
    if "unable to open" in text:
        return f"{path}: cannot open the store (its folder is missing, read-only, or the path is a folder)"
    if "locked" in text or "busy" in text:
        return f"{path}: the store is locked by another process; try again when it has finished"
    if "disk" in text or "full" in text:
        return f"{path}: cannot write the store ({text})"
    return f"{path}: store error: {text}"


def _commit(conn: sqlite3.Connection) -> None:
    """Commit the open transaction."""
    conn.execute("COMMIT")


def _show(value: float | None) -> str:
    """A stored value for a message (SQL NULL is NaN)."""
    return "nan" if value is None else repr(value)


def _frame_from_rows(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """The score table from database rows, with the documented dtypes and the extras expanded."""
    if not rows:
        return empty_scores()
    columns = dict(zip((*STORED_COLUMNS, "extra"), zip(*rows, strict=True), strict=True))
    frame = pd.DataFrame(index=pd.RangeIndex(len(rows)))
    for name in STORED_COLUMNS:
        values = columns[name]
        if name in _FLOAT_COLUMNS:
            frame[name] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        elif name == "step":
            frame[name] = np.array(values, dtype=np.int64)
        else:
            frame[name] = pd.Series(pd.array(list(values), dtype=DTYPES[name]))
    if any(text is not None for text in columns["extra"]):
        parsed = pd.DataFrame.from_records([json.loads(text) if text else {} for text in columns["extra"]])
        for name in parsed.columns:
            if name not in frame.columns:
                frame[name] = parsed[name]
    return frame


def load(path: str | os.PathLike[str], **filters: str | Sequence[str]) -> pd.DataFrame:
    """Load the score table of the store at ``path`` (``Store(path).load(**filters)``).

    Parameters
    ----------
    path : str or Path
        A study folder holding ``gengen.sqlite``, or the database file itself.
    **filters : str or list of str
        As in :meth:`Store.load`.

    Returns
    -------
    DataFrame
        The score table; see :meth:`Store.load`.

    Raises
    ------
    StoreError
        ``path`` holds no gengen store.
    """
    candidate = Path(path).expanduser()
    database = candidate if candidate.is_file() else candidate / DB_NAME
    if not database.is_file():
        raise StoreError(f"{path}: no gengen store here (expected {database})")
    try:  # reading needs no write access: a read-only store (file, folder or media) loads
        store = Store(database, read_only=True)
    except _OlderSchemaError:
        store = Store(database)  # migrated first, as any writable opening does
    return store.load(**filters)
