"""Loading a score table from a path: a study folder, a ``*.sqlite`` store or a table file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gengen.errors import InputError

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def load_scores(path: str | Path) -> pd.DataFrame:
    """The score table from a store (study folder or ``*.sqlite``) or a tidy ``.csv``/``.parquet`` file.

    Parameters
    ----------
    path : str or Path
        A study folder holding ``gengen.sqlite``, a ``*.sqlite`` store, or a file with the score table's
        columns (as written by ``gengen export``).

    Returns
    -------
    DataFrame
        The score table.
    """
    source = Path(path)
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        from gengen._files import read_csv, read_parquet

        table = read_csv(source) if source.suffix.lower() == ".csv" else read_parquet(source)
        if len(table) == 0:
            raise InputError(f"{source}: no scores (the table has a header but no rows)")
        return table
    if source.is_dir() and not (source / "gengen.sqlite").is_file():
        raise InputError(f"{source}: not a study folder (no gengen.sqlite inside)")
    from gengen.store import Store

    return Store(source).load()
