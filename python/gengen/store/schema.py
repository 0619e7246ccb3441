"""The store's SQLite schema and its migrations (split from :mod:`gengen.store.database`, which re-exports them).

``PRAGMA user_version`` holds the schema version. :class:`gengen.store.database.Store` runs ``MIGRATIONS[v]`` for
every ``v`` from the stored version up to :data:`SCHEMA_VERSION` inside one ``BEGIN IMMEDIATE`` transaction,
so an upgrade lands whole or not at all; a store of a newer version is refused.

Versions
--------
1. The ``scores`` table (primary key ``study, model, run, step, testset, metric``) and ``manifests``.
2. The run keys as columns: ``data_seed`` added next to ``seed`` and ``shots``, and all three filled from
   the run labels of the stored scores (``"seed=1,shots=64,data_seed=0"``) where they were empty, so no
   reader parses a label.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from gengen.store.run_keys import RUN_KEYS, parse_run_label

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
    """Store the run keys as columns: ``data_seed`` added, and all three filled from the labels where empty."""
    conn.execute("ALTER TABLE scores ADD COLUMN data_seed INTEGER")
    parsed = [(run, *(keys.get(n) for n in RUN_KEYS)) for run in _runs(conn) if (keys := parse_run_label(run))]
    if not parsed:
        return
    # One pass over the scores (a temporary table of the labels' keys), not one scan per run.
    conn.execute(f"CREATE TEMP TABLE run_keys (run TEXT PRIMARY KEY, {', '.join(RUN_KEYS)})")
    conn.executemany(f"INSERT INTO run_keys VALUES (?{', ?' * len(RUN_KEYS)})", parsed)
    sets = ", ".join(
        f"{n} = coalesce({n}, (SELECT k.{n} FROM run_keys AS k WHERE k.run = scores.run))" for n in RUN_KEYS
    )
    conn.execute(f"UPDATE scores SET {sets} WHERE run IN (SELECT run FROM run_keys)")
    conn.execute("DROP TABLE run_keys")


def _runs(conn: sqlite3.Connection) -> list[str]:
    """The distinct run labels of the stored scores."""
    return [run for (run,) in conn.execute("SELECT DISTINCT run FROM scores")]


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _migrate_0_to_1, 1: _migrate_1_to_2}
"""``MIGRATIONS[v]`` upgrades a store from schema version ``v`` to ``v + 1`` (inside the open transaction).

To change the schema: add ``MIGRATIONS[SCHEMA_VERSION] = _migrate_2_to_3`` and increment
:data:`SCHEMA_VERSION`; stores of every earlier version are upgraded when first opened.
"""
