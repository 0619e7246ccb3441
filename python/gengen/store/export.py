"""Export the score table to CSV or Parquet, long (one score per row) or wide (one row per checkpoint).

The long table has the columns of :meth:`gengen.store.database.Store.load` (the score table, ``stderr``, extras);
``gengen ingest`` reads it back unchanged. The wide table has one row per ``(study, model, run, step)`` with
the columns ``study, model, family, size, run, seed, shots, step, tokens, epoch`` and then one column per
test set and metric named ``<testset>/<metric>``, which the wide importer's default pattern splits again
(``n_examples``, ``stderr`` and extras are not part of the wide table).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gengen._files import atomic_target, check_replaceable
from gengen.errors import GengenError
from gengen.store.database import COLUMNS, DB_NAME, Store, load
from gengen.store.database import shown as cut
from gengen.store.formats import EXPORT_FORMATS, ExportFormat

__all__ = ["EXPORT_FORMATS", "WIDE_ID_COLUMNS", "export", "to_wide"]


WIDE_ID_COLUMNS: tuple[str, ...] = COLUMNS[: COLUMNS.index("testset")]
"""The leading columns of a wide table."""

_WIDE_KEY = ["study", "model", "run", "step"]
_SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_SQLITE_HEADER = b"SQLite format 3\x00"


def to_wide(scores: pd.DataFrame, separator: str = "/") -> pd.DataFrame:
    """Pivot a long score table to one row per ``(study, model, run, step)``.

    Parameters
    ----------
    scores : DataFrame
        A score table (as :meth:`gengen.store.database.Store.load` returns).
    separator : str
        Joins test set and metric in the score column names.

    Returns
    -------
    DataFrame
        :data:`WIDE_ID_COLUMNS` (each the first value known for the checkpoint), then one column per test set
        and metric, sorted; NaN where a checkpoint lacks that score.

    Raises
    ------
    GengenError
        A metric name contains the separator, so the column names could not be split again.
    """
    clashing = sorted({m for m in scores["metric"].unique() if separator in str(m)})
    if clashing:
        raise GengenError(
            f"metric {clashing[0]!r} contains {separator!r}, so the wide table's column names "
            f"'<testset>{separator}<metric>' could not be split again",
            hint="export the long table instead (without {wide})",
        )
    labels = scores["testset"].astype(str) + separator + scores["metric"].astype(str)
    values = scores.assign(_column=labels).pivot(index=_WIDE_KEY, columns="_column", values="value").sort_index(axis=1)
    values.columns.name = None
    details = [c for c in WIDE_ID_COLUMNS if c not in _WIDE_KEY]
    described = scores.groupby(_WIDE_KEY, sort=True, dropna=False)[details].first()
    wide = described.join(values).reset_index()
    return wide[[*WIDE_ID_COLUMNS, *values.columns]]


def export(
    source: Store | str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    wide: bool = False,
    format: ExportFormat | None = None,
    **filters: str | Sequence[str],
) -> int:
    """Write the score table of a store (or a score DataFrame) to a CSV or Parquet file.

    Parameters
    ----------
    source : Store, path or DataFrame
        A store, the path of one, or a score table.
    out : str or Path
        The file to write (replaced atomically; parent folders are created). An existing ``out`` is replaced
        only when it is a writable regular file that is not an SQLite database: never the store itself (by
        any path, relative or through a symbolic link to a folder), a read-only file, a symbolic link, a
        device or a FIFO.
    wide : bool
        One row per checkpoint and one column per test set and metric, instead of one score per row.
    format : {"csv", "parquet"}, optional
        Taken from the suffix of ``out`` (``.csv``, ``.parquet``, ``.pq``) when not given; given, it must
        agree with a known suffix (``--format parquet`` into ``out.csv`` is an error).
    **filters : str or list of str
        Passed to :meth:`gengen.store.database.Store.load` (``model=``, ``metric=``...).

    Returns
    -------
    int
        Rows written.

    Raises
    ------
    GengenError
        ``out`` would replace the store, a read-only file, a link or a special file; the format and the
        suffix disagree; a filter matches nothing.
    """
    out = Path(out).expanduser()
    by_suffix = _SUFFIX_FORMATS.get(out.suffix.lower())
    chosen = format or by_suffix
    if chosen not in EXPORT_FORMATS:
        raise GengenError(
            f"{out}: cannot tell the export format from the suffix {out.suffix or '(none)'!r}",
            hint=f"pass {{format}} {' or '.join(EXPORT_FORMATS)}",
        )
    if by_suffix is not None and chosen != by_suffix:
        raise GengenError(
            option="format",
            problem=f"{chosen} into {out}, whose suffix {out.suffix!r} says {by_suffix}",
            hint=f"name the file .{'csv' if chosen == 'csv' else 'parquet'} or leave the format out",
        )
    _check_target(out, None if isinstance(source, pd.DataFrame) else source)
    if isinstance(source, pd.DataFrame):
        scores = source
    elif isinstance(source, Store):
        scores = source.load(**filters)
    else:
        scores = load(source, **filters)
    if not isinstance(source, pd.DataFrame):
        _check_filters_matched(source, scores, filters)
    table = to_wide(scores) if wide else scores
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(out) as temporary:
        if chosen == "csv":
            table.to_csv(temporary, index=False)
        else:
            table.to_parquet(temporary, index=False)
        _check_target(out, None if isinstance(source, pd.DataFrame) else source)  # again: it may have changed
    return len(table)


def _store_files(source: Store | str | os.PathLike[str]) -> list[Path]:
    """The database of ``source`` and its side files (WAL, shared memory, journal), resolved."""
    if isinstance(source, Store):
        database = source.path
    else:
        given = Path(source).expanduser()
        database = (
            given if given.is_file() or given.suffix.lower() in (".sqlite", ".sqlite3", ".db") else given / DB_NAME
        )
    real = Path(os.path.realpath(database))
    return [real, *(real.with_name(real.name + side) for side in ("-wal", "-shm", "-journal"))]


def _check_target(out: Path, source: Store | str | os.PathLike[str] | None) -> None:
    """Refuse an ``out`` whose replacement would destroy something: the store, a read-only file, a link, a
    special file, any SQLite database."""
    if out.is_symlink():
        raise GengenError(
            f"{out}: a symbolic link (to {os.readlink(out)}); export writes a new file and does not replace "
            "links: give the path of the file itself"
        )
    real = Path(os.path.realpath(out))
    if source is not None and real in _store_files(source):
        raise GengenError(f"{out}: is the store being exported ({real}); export to another file")
    if check_replaceable(out, "export", str(out / "scores.csv")) is None:
        return
    try:
        with open(real, "rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
    except OSError:
        header = b""
    if header == _SQLITE_HEADER:
        raise GengenError(f"{out}: an SQLite database (a gengen store?); export does not replace it")


def _check_filters_matched(
    source: Store | str | os.PathLike[str], scores: pd.DataFrame, filters: dict[str, str | Sequence[str]]
) -> None:
    """Every value of every filter must select something: a typo is an error listing what the store holds."""
    for name, wanted in filters.items():
        values = [wanted] if isinstance(wanted, str) else [str(value) for value in wanted]
        found = set(scores[name].dropna().astype(str)) if name in scores else set()
        missing = [value for value in values if value not in found]
        if not missing:
            continue
        everything = source.load() if isinstance(source, Store) else load(source)
        known = sorted(set(everything[name].dropna().astype(str))) if name in everything else []
        if missing[0] not in known:
            shown = ", ".join(known[:20]) + (f" (and {len(known) - 20} more)" if len(known) > 20 else "")
            plural = "studies" if name == "study" else f"{name}s"
            raise GengenError(
                option=name, problem=f"{cut(missing[0])} is not in the store; {plural}: {shown or '(none)'}"
            )
        raise GengenError(option=name, problem=f"{cut(missing[0])} has no scores that also match the other filters")
