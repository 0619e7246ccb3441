"""Loading a score table from a path: a study folder, a ``*.sqlite`` store or a table file."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from gengen.analyse.data import check_columns
from gengen.errors import GengenError, InputError

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def load_scores(path: str | Path, study: str | None = None) -> pd.DataFrame:
    """The score table from a store (study folder or ``*.sqlite``) or a tidy ``.csv``/``.parquet`` file.

    Parameters
    ----------
    path : str or Path
        A study folder holding ``gengen.sqlite``, a ``*.sqlite`` store, or a file with the score table's
        columns (as written by ``gengen export``). A file's scores pass the checks an import does
        (:func:`gengen.store.checks.check_scores` and :func:`gengen.store.database.normalise_scores`): numbers where
        numbers belong, finite values, accuracies in [0, 1], one value per key.
    study : str, optional
        Only this study's scores (a store can hold several); it must be there.

    Returns
    -------
    DataFrame
        The score table.

    Raises
    ------
    InputError
        The path is missing or not a score table, or a score cannot be right (naming the file, line, column
        and value).
    GengenError
        ``study`` is not in the table (naming the studies it holds).
    """
    table = _load(Path(path), study)
    if study is not None and table.empty:  # a table file without that study
        raise _unknown_study(study, Path(path), sorted(_load(Path(path), None)["study"].astype(str).unique()))
    return table


def load_study_scores(path: str | Path, study: str | None = None) -> pd.DataFrame:
    """The scores of one study: ``study``, or the only one the table holds.

    Parameters
    ----------
    path : str or Path
        As in :func:`load_scores`.
    study : str, optional
        The study to read; needed when the table holds several.

    Returns
    -------
    DataFrame
        The score table of that study.

    Raises
    ------
    GengenError
        Several studies and none chosen (naming them), or ``study`` is not there.
    """
    table = load_scores(path, study)
    studies = sorted(table["study"].astype(str).unique()) if "study" in table.columns else []
    if study is None and len(studies) > 1:
        raise GengenError(
            option="study", problem=f"is needed: {path} holds {len(studies)} studies ({', '.join(studies)})"
        )
    return table


def _load(source: Path, study: str | None) -> pd.DataFrame:
    """The table at ``source``, only ``study``'s rows when given."""
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        from gengen._files import read_csv, read_parquet

        is_csv = source.suffix.lower() == ".csv"
        if is_csv:
            check_columns(_csv_header(source), str(source))  # pandas renames a repeated name to "value.1"
        table = read_csv(source) if is_csv else read_parquet(source)
        check_columns(table.columns, str(source))
        if len(table) == 0:
            raise InputError(f"{source}: no scores (the table has a header but no rows)")
        checked = _checked(table, source, is_csv)
        return checked if study is None else checked[checked["study"] == study].reset_index(drop=True)
    if source.is_dir() and not (source / "gengen.sqlite").is_file():
        raise InputError(f"{source}: not a study folder (no gengen.sqlite inside)")
    from gengen.store.database import Store

    store = Store(source, read_only=True)
    if study is None:
        return store.load()
    if study not in (studies := store.studies()):
        raise _unknown_study(study, source, studies)
    return store.load(study=study)


def _unknown_study(study: str, source: Path, studies: list[str]) -> GengenError:
    return GengenError(option="study", problem=f"{study!r} is not in {source}; its studies: {', '.join(studies)}")


def _csv_header(source: Path) -> list[str]:
    """The names in a CSV file's first line (empty when it cannot be read as text: read_csv then says why)."""
    try:
        with source.open(encoding="utf-8-sig", newline="") as handle:
            return next(csv.reader([handle.readline(1_000_000)]), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _checked(table: pd.DataFrame, source: Path, is_csv: bool) -> pd.DataFrame:
    """``table`` validated as an import would be, its rows labelled by file and line (CSV) or row (Parquet).

    Without this a percentage under ``acc`` or a typo such as ``0.6x`` (read as missing) would be analysed.
    """
    from gengen.store.checks import check_scores
    from gengen.store.database import normalise_scores

    # A CSV's first data row is line 2 (after the header); a quoted field spanning lines shifts the count.
    first = 2 if is_csv else 1
    # Built column-wise: a formatted string per row was most of the load time of a 2-million-row table.
    labels = f"{source}: {'line' if is_csv else 'row'} " + pd.Series(range(first, first + len(table))).astype(str)
    check_scores(table, labels)
    return normalise_scores(table, study=source.stem, sources=labels)
