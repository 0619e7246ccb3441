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
migrations in :data:`MIGRATIONS` (:mod:`gengen.store.schema`) from the stored version up to the current one
inside one transaction (a new file is at version 0, so creating a store is the first migration). A store
written by a newer gengen is refused rather than misread; one of an older version opened read-only (``load``,
``gengen export``) is read as it is and upgraded the next time it is opened for writing.

Run keys (``seed``, ``shots``, ``data_seed``) are integer columns next to the ``run`` label users see
(``"seed=1,shots=64,data_seed=0"``); see :mod:`gengen.store.run_keys`. The validation of written tables and the
row conversions (a write's temporary table filled once per run, a read's rows turned back into a score table)
live in :mod:`gengen.store.rows`; this module re-exports their public names.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen._versions import installed_versions
from gengen.errors import GengenError, InputError, StoreConflictError, StoreError
from gengen.store.rows import (
    CODENAME_UNITS,
    COLUMNS,
    DEFAULT_RUN,
    DTYPES,
    FILTERS,
    KEY,
    REQUIRED_COLUMNS,
    STORED_COLUMNS,
    OnConflict,
    _as_frame,
    _db_columns,
    _db_rows,
    _fill_incoming,
    _keys_from_labels,
    _read_scores,
    empty_scores,
    normalise_scores,
    shown,
    split_model_name,
)
from gengen.store.run_keys import RUN_KEYS, parse_run_label, run_attributes, run_label
from gengen.store.schema import MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "CODENAME_UNITS",
    "COLUMNS",
    "DB_NAME",
    "DEFAULT_RUN",
    "DTYPES",
    "FILTERS",
    "KEY",
    "MIGRATIONS",
    "REQUIRED_COLUMNS",
    "RUN_KEYS",
    "SCHEMA_VERSION",
    "STORED_COLUMNS",
    "OnConflict",
    "Store",
    "empty_scores",
    "load",
    "normalise_scores",
    "parse_run_label",
    "run_attributes",
    "run_label",
    "shown",
    "split_model_name",
]

DB_NAME = "gengen.sqlite"
"""File name of the database inside a study folder."""

_BUSY_TIMEOUT_S = 60.0
_MANIFEST_PACKAGES = ("gengen", "numpy", "pandas", "pyarrow", "torch", "transformers", "datasets", "peft")


# --------------------------------------------------------------------------------------------- helpers


def _now() -> str:
    """The current UTC time as an ISO 8601 string."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _package_versions() -> dict[str, str]:
    """Versions of Python and of the installed packages that shape a run's scores."""
    return installed_versions(_MANIFEST_PACKAGES, python=True)


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

                inside(path, DB_NAME)
        if not read_only and self.path.is_symlink() and not self.path.exists():
            raise StoreError(
                f"{self.path}: a symbolic link to a missing file ({os.readlink(self.path)}); "
                "gengen does not create a store through it"
            )
        self.study = study if study is not None else default_study
        self.timeout = float(timeout)
        self.read_only = read_only
        self._uri: str | None = None
        self._columns: tuple[str, ...] = (*STORED_COLUMNS, "extra")
        self._outdated = False  # an older schema, upgraded by the first write
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"{path}: no gengen store here (expected {self.path})")
            with self._connect() as conn:
                self._check_version(conn)
                found = {row[1] for row in conn.execute("PRAGMA table_info(scores)")}
            self._columns = tuple(name for name in self._columns if name in found)
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

    def _check_version(self, conn: sqlite3.Connection) -> int:
        """The schema version of a gengen store, checked: one of an older schema is read as it is (the
        columns it lacks are filled as the migrations would); a version gengen never wrote (negative, newer),
        a database that is not a gengen store and one missing a table are refused, naming the store."""
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        self._refuse_unknown(version)
        if version == 0:
            raise StoreError(f"{self.path}: an SQLite database that is not a gengen store")
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [name for name in ("scores", "manifests") if name not in tables]
        if missing:
            raise StoreError(
                f"{self.path}: no {' or '.join(missing)} table (a gengen store of schema version {version} has "
                "scores and manifests); the file is damaged or not a gengen store"
            )
        return version

    def _refuse_unknown(self, version: int) -> None:
        """A store written by a newer gengen is refused rather than misread; so is a version none wrote."""
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this gengen's ({SCHEMA_VERSION}); "
                "upgrade gengen"
            )
        if version < 0:
            raise StoreError(
                f"{self.path}: store schema version {version} is not one gengen writes (0 to {SCHEMA_VERSION}); "
                "the file was edited or damaged"
            )

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``) so concurrent writers queue cleanly.

        A store of an older schema is upgraded here, inside the transaction of the write that needs it: the
        upgrade lands with that write or, when the write fails, not at all (the file is left as it was)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._upgrade(conn)
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        _commit(conn)
        if self._outdated:  # WAL mode only once a write has landed: a failed one leaves the header as it was
            self._use_wal(conn)
            self._outdated = False
            self._columns = (*STORED_COLUMNS, "extra")

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL mode (outside a transaction: SQLite cannot change it inside one)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Bring the schema up to :data:`SCHEMA_VERSION` inside the open transaction (none when it is)."""
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version == SCHEMA_VERSION:
            return
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            pass  # a new, empty file: the schema is created
        else:
            version = self._check_version(conn)
        while version < SCHEMA_VERSION:
            try:
                MIGRATIONS[version](conn)
            except GengenError as error:
                raise StoreError(
                    f"{self.path}: cannot upgrade from schema version {version} (nothing was changed): {error}"
                ) from None
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Create a new store (WAL mode, the current schema); check an existing one, upgrading nothing.

        An existing store of an older schema is read as it is until a write (:meth:`_transaction`)."""
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        empty = version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        if not empty:
            version = self._check_version(conn)
        if version == SCHEMA_VERSION:
            self._use_wal(conn)
            return
        self._outdated = True
        if empty:
            with self._transaction(conn):
                pass
            return
        found = {row[1] for row in conn.execute("PRAGMA table_info(scores)")}
        self._columns = tuple(name for name in self._columns if name in found)

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

        Raises
        ------
        InputError
            A number that cannot be right (:func:`gengen.store.checks.check_scores`: ``inf``, a negative step),
            naming its row; nothing is written.
        """
        table = _as_frame(data)
        if len(table) == 0:
            return 0
        # The number checks every import passes (finite values, counts in range): an inf written here could not
        # be exported and ingested back.
        from gengen.store.checks import check_scores

        rows = pd.Series([f"row {i}" for i in range(len(table))])  # numbered as normalise_scores numbers them
        check_scores(table, rows, fractions=False)
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
        names = ", ".join((*STORED_COLUMNS, "extra"))
        keys = ", ".join(KEY)
        with self._connect() as conn, self._transaction(conn):
            conn.execute(f"CREATE TEMP TABLE incoming AS SELECT {names} FROM scores WHERE 0")
            _fill_incoming(conn, _db_columns(frame))
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
            f"{where}run {model}/{run} step {step} testset {shown(testset)} metric {shown(metric)}: new value "
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
            (one of) the given value(s): ``study="pythia"`` reads one study of a store holding several.

        Returns
        -------
        DataFrame
            Columns :data:`COLUMNS` with the dtypes of :data:`DTYPES`, then ``stderr`` (float, NaN when
            unknown), then any extra columns written with the scores; sorted by study, model, run, step,
            test set and metric.

        Raises
        ------
        GengenError
            An unknown filter name, a value that is not a name, or a study the store does not hold (as
            ``--study`` refuses it).
        """
        clauses: list[str] = []
        params: list[Any] = []
        for name, wanted in filters.items():
            if name not in FILTERS:
                raise GengenError(
                    option=name, problem=f"is not a filter of load(); expected one of {', '.join(FILTERS)}"
                )
            try:
                values: list[Any] | None = [wanted] if isinstance(wanted, str) else list(wanted)
            except TypeError:  # not a sequence: load(path, study=5)
                values = None
            if values is None or not all(isinstance(value, str) for value in values):
                raise GengenError(option=name, problem=f"must be a name or a list of names, got {wanted!r}")
            if name == "study":  # as the CLI's --study: a study the store does not hold is an error, not no rows
                held = self.studies()
                missing = [value for value in values if value not in held]
                if missing:
                    raise GengenError(
                        option="study",
                        problem=f"{missing[0]!r} is not in the store; studies: {', '.join(held) or '(none)'}",
                    )
            clauses.append(f"{name} IN ({', '.join('?' * len(values))})")
            params.extend(str(v) for v in values)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._connect() as conn:
            conn.execute("BEGIN")  # one snapshot for both queries
            try:
                frame = _read_scores(conn, self._columns, where, params)
            finally:
                conn.execute("COMMIT")
        if "data_seed" not in self._columns and len(frame):  # schema 1: the run keys were only in the label
            try:
                frame = _keys_from_labels(frame)
            except InputError as error:
                raise StoreError(f"{self.path}: {error}") from None
        return frame

    def held_by_study(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Which rows of a score table each study of the store already holds, with the same value.

        Parameters
        ----------
        frame : DataFrame
            A normalised score table (:func:`normalise_scores`); its ``study`` column is ignored.

        Returns
        -------
        dict of str to ndarray of bool
            For every study of the store holding any of the rows: a mask over ``frame``'s rows, True where
            that study holds the row's model, run, step, test set and metric with an equal value (NaN equals
            NaN). Used by :func:`gengen.ingest.ingest` to recognise files arriving under another study name.
        """
        studies = self.studies()
        if not studies or not len(frame):
            return {}
        columns = ("model", "run", "step", "testset", "metric", "value")
        rows = _db_rows(frame)
        positions = [STORED_COLUMNS.index(name) for name in columns]
        probe = [(number, *(row[p] for p in positions)) for number, row in enumerate(rows)]
        on = " AND ".join(f"s.{name} = p.{name}" for name in columns[:-1])
        found: dict[str, np.ndarray] = {}
        with self._connect() as conn:
            conn.execute(f"CREATE TEMP TABLE probe (position INTEGER PRIMARY KEY, {', '.join(columns)})")
            conn.executemany(f"INSERT INTO probe VALUES (?{', ?' * len(columns)})", probe)
            for study in studies:  # the key's first column fixed: each join follows the primary key
                matched = conn.execute(
                    f"SELECT p.position FROM probe AS p JOIN scores AS s ON s.study = ? AND {on} "
                    "WHERE s.value IS p.value",
                    (study,),
                ).fetchall()
                if matched:
                    mask = np.zeros(len(frame), dtype=bool)
                    mask[[position for (position,) in matched]] = True
                    found[study] = mask
            conn.execute("DROP TABLE probe")
        return found

    def studies(self) -> list[str]:
        """The studies the store holds scores of, sorted (a store can hold several)."""
        with self._connect() as conn:
            return [study for (study,) in conn.execute("SELECT DISTINCT study FROM scores ORDER BY study")]


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
    # Reading needs no write access: a read-only store (file, folder or media) loads, and so does one of an
    # older schema, read as it is (it is upgraded when next opened for writing).
    return Store(database, read_only=True).load(**filters)
