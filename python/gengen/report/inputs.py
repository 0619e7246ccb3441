"""Checks of the tables a report is drawn from, before anything is drawn (issue 26).

An analysis folder is data a user can edit, truncate or replace: a pairs or scores table with a column
missing, text where a number belongs, duplicated checkpoints or no rows at all is refused in one line naming
the file (or the table, for an :class:`~gengen.analyse.Analysis` built in Python) and the column, instead of
a traceback from deep inside the drawing code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from gengen.analyse.stored import (
    PAIRS_BOOLEAN,
    PAIRS_NUMERIC,
    PAIRS_REQUIRED,
    SCORES_NUMERIC,
    SCORES_REQUIRED,
    _boolean,
    _numeric,
)
from gengen.errors import InputError

if TYPE_CHECKING:
    from gengen.analyse.result import Analysis

#: Levels of the pairs table the report draws.
LEVELS = ("run", "across_runs")


def _name(folder: Path | None, table: str) -> str:
    return str(folder / f"{table}.parquet") if folder is not None else f"the analysis' {table} table"


def _columns(frame: pd.DataFrame, required: tuple[str, ...], where: str, what: str) -> None:
    if not frame.columns.is_unique:
        duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        raise InputError(f"{where}: column(s) {', '.join(duplicated)} appear more than once")
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}; expected the {what} of gengen analyse")
    if frame.empty:
        raise InputError(f"{where}: no rows; an analysis always has some, so there is nothing to report")


def _check_pairs(pairs: pd.DataFrame, where: str) -> None:
    """Refuse a pairs table the report cannot draw: a column missing or of the wrong kind, no rows at a level."""
    _columns(pairs, PAIRS_REQUIRED, where, "pairs table")
    for column in PAIRS_NUMERIC:
        if column in pairs:
            _numeric(pairs, column, where)
    for column in PAIRS_BOOLEAN:
        if column in pairs:
            _boolean(pairs, column, where)
    if not pairs["level"].isin(LEVELS).any():
        found = ", ".join(sorted(map(str, pairs["level"].dropna().unique()))[:5]) or "none"
        raise InputError(f"{where}: no rows at level {' or '.join(LEVELS)} (levels found: {found})")


def _check_scores(scores: pd.DataFrame, where: str, id_testset: str | None) -> None:
    """Refuse a scores table the report cannot draw: a column missing or not numeric, a checkpoint twice, no
    scores of the ID test set (``id_testset``, which every run needs)."""
    _columns(scores, SCORES_REQUIRED, where, "scores table")
    for column in SCORES_NUMERIC:
        _numeric(scores, column, where)
    key = ["model", "run", "step", "testset", "metric"]
    twice = scores.duplicated(subset=key)
    if twice.any():
        row = scores[twice].iloc[0]
        raise InputError(
            f"{where}: model {row['model']!r}, run {row['run']!r}, step {row['step']}, test set "
            f"{row['testset']!r} appears more than once"
        )
    if id_testset is not None and not (scores["testset"] == id_testset).any():
        raise InputError(f"{where}: no scores of the ID test set {id_testset!r}")


def check_analysis(analysis: Analysis, folder: Path | None = None) -> None:
    """Check the pairs and scores tables of ``analysis`` before a report is drawn from them.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` or :meth:`Analysis.from_dir`.
    folder : Path, optional
        The analysis folder it was read from, named in the error line (else the table is named).

    Raises
    ------
    InputError
        A table the report cannot draw: one line naming its file (or the table) and the column, row or
        checkpoint at fault.
    """
    _check_pairs(analysis.pairs, _name(folder, "pairs"))
    id_testset = analysis.settings.id_testset
    _check_scores(analysis.scores, _name(folder, "scores"), id_testset if isinstance(id_testset, str) else None)


def select_study(analysis: Analysis, study: str, where: str) -> Analysis:
    """The part of ``analysis`` that belongs to one study, for ``gengen report --study``.

    An analysis of a store holding several studies keeps each row's study in a ``study`` column (scores,
    pairs, pooled tables); the report of one of them keeps that study's rows. An analysis of one study only
    is returned whole when ``study`` is that one.

    Parameters
    ----------
    analysis : Analysis
        The analysis read from the folder.
    study : str
        The study to report.
    where : str
        The analysis folder, named in the error line.

    Returns
    -------
    Analysis
        The rows of ``study`` in every table and the warnings about its models (settings and versions as
        they are).

    Raises
    ------
    InputError
        The analysis records no study (it was analysed from a table without one) or not this one.
    """
    from dataclasses import replace

    studies = sorted(
        {
            str(value)
            for table in (analysis.scores, analysis.pairs)
            if "study" in table
            for value in table["study"].dropna()
        }
    )
    if not studies:
        raise InputError(
            f"--study: the analysis in {where} records no study (it was analysed from a table without a study "
            "column); report it without --study"
        )
    if study not in studies:
        raise InputError(
            f"--study: {study!r} is not a study of the analysis in {where} (studies: {', '.join(studies)})"
        )
    if len(studies) == 1:
        return analysis

    def keep(table: pd.DataFrame) -> pd.DataFrame:
        # A pooled table without a study column pools across studies: none of its rows is this study's alone.
        return table[table["study"] == study].reset_index(drop=True) if "study" in table else table.iloc[0:0]

    scores = keep(analysis.scores)
    others = {str(model) for model in analysis.scores["model"]} - {str(model) for model in scores["model"]}
    # The other studies' warnings ("model 'x' run 'y': …") are not this report's.
    warnings = [text for text in analysis.warnings if not any(f"model {model!r}" in text for model in others)]
    if not analysis.pooled.empty and "study" not in analysis.pooled:
        warnings.append(f"--study {study}: the pooled table pools across studies and is left out of this report")
    return replace(
        analysis,
        scores=scores,
        pairs=keep(analysis.pairs),
        pooled=keep(analysis.pooled),
        pooled_residuals=keep(analysis.pooled_residuals),
        warnings=warnings,
    )
