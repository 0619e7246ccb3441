"""Loading a score table from a path, and the whole analysis of a study in one call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def run_study_analysis(store_path: str | Path, out_dir: str | Path, id_testset: str, **options: Any) -> Path:
    """Load a store, analyse it, compare the groups and write the report — what ``gengen run`` ends with.

    Parameters
    ----------
    store_path : str or Path
        Study folder, ``*.sqlite`` store, or score-table file (see :func:`load_scores`).
    out_dir : str or Path
        Folder for ``pairs.csv``, ``summary.json``, the comparison tables, ``report.html`` and ``figures/``.
    id_testset : str
        The in-domain test set.
    **options
        Passed to :func:`gengen.analyse` (e.g. ``metric``, ``n_perm``, ``ood``).

    Returns
    -------
    Path
        The report's path (``out_dir/report.html``).
    """
    from gengen.analyse.core import analyse
    from gengen.compare import compare
    from gengen.report import report

    analysis = analyse(load_scores(store_path), id_testset=id_testset, **options)
    analysis.to_dir(out_dir)
    comparison = compare(analysis)
    comparison.to_dir(out_dir)
    return report(analysis, comparison, out_dir)
