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
        columns (as written by ``gengen export``). A file's scores pass the checks an import does
        (:func:`gengen.score_checks.check_scores` and :func:`gengen.store.normalise_scores`): numbers where
        numbers belong, finite values, accuracies in [0, 1], one value per key.

    Returns
    -------
    DataFrame
        The score table.

    Raises
    ------
    InputError
        The path is missing or not a score table, or a score cannot be right (naming the file, line, column
        and value).
    """
    source = Path(path)
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        from gengen._files import read_csv, read_parquet

        is_csv = source.suffix.lower() == ".csv"
        table = read_csv(source) if is_csv else read_parquet(source)
        if len(table) == 0:
            raise InputError(f"{source}: no scores (the table has a header but no rows)")
        return _checked(table, source, is_csv)
    if source.is_dir() and not (source / "gengen.sqlite").is_file():
        raise InputError(f"{source}: not a study folder (no gengen.sqlite inside)")
    from gengen.store import Store

    return Store(source, read_only=True).load()


def _checked(table: pd.DataFrame, source: Path, is_csv: bool) -> pd.DataFrame:
    """``table`` validated as an import would be, its rows labelled by file and line (CSV) or row (Parquet).

    Without this a percentage under ``acc`` or a typo such as ``0.6x`` (read as missing) would be analysed.
    """
    from gengen.score_checks import check_scores
    from gengen.store import normalise_scores

    # A CSV's first data row is line 2 (after the header); a quoted field spanning lines shifts the count.
    first = 2 if is_csv else 1
    labels = pd.Series([f"{source}: {'line' if is_csv else 'row'} {first + i}" for i in range(len(table))])
    check_scores(table, labels)
    return normalise_scores(table, study=source.stem, sources=labels)
