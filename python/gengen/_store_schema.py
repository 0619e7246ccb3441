"""The store's SQLite schema and its migrations (split from :mod:`gengen.store`, which re-exports them).

``PRAGMA user_version`` holds the schema version. :class:`gengen.store.Store` runs ``MIGRATIONS[v]`` for
every ``v`` from the stored version up to :data:`SCHEMA_VERSION` inside one ``BEGIN IMMEDIATE`` transaction,
so an upgrade lands whole or not at all; a store of a newer version is refused.

Versions
--------
1. The ``scores`` table (primary key ``study, model, run, step, testset, metric``) and ``manifests``.
2. The run keys as columns: ``data_seed`` added next to ``seed`` and ``shots``, and all three filled from
   the run labels of the stored scores (``"seed=1,shots=64,data_seed=0"``) where they were empty, so no
   reader parses a label; the ``sources`` table holds a fingerprint of every file ingested (content and the
   options that shaped its scores), with the study it went to, so the same files arriving under another
   study name are recognised.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from gengen._run_keys import RUN_KEYS, parse_run_label

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 2
"""Version of the schema this gengen writes; kept in ``PRAGMA user_version``."""


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


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Store the run keys as columns (``data_seed`` added; all three filled from the labels where empty) and
    create the ``sources`` table of ingested files."""
    conn.execute("ALTER TABLE scores ADD COLUMN data_seed INTEGER")
    runs = [run for (run,) in conn.execute("SELECT DISTINCT run FROM scores")]
    for run in runs:
        keys = parse_run_label(run)
        if keys:
            sets = ", ".join(f"{name} = coalesce({name}, ?)" for name in RUN_KEYS)
            conn.execute(f"UPDATE scores SET {sets} WHERE run = ?", (*(keys.get(n) for n in RUN_KEYS), run))
    conn.execute(
        """
        CREATE TABLE sources (
            fingerprint TEXT    NOT NULL,
            study       TEXT    NOT NULL,
            file        TEXT    NOT NULL,
            scores      INTEGER NOT NULL,
            created_at  TEXT    NOT NULL,
            PRIMARY KEY (fingerprint, study)
        ) WITHOUT ROWID
        """
    )


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _migrate_0_to_1, 1: _migrate_1_to_2}
"""``MIGRATIONS[v]`` upgrades a store from schema version ``v`` to ``v + 1`` (inside the open transaction).

To change the schema: add ``MIGRATIONS[SCHEMA_VERSION] = _migrate_2_to_3`` and increment
:data:`SCHEMA_VERSION`; stores of every earlier version are upgraded when first opened.
"""
