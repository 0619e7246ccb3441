"""``gengen report`` on an analysis folder whose tables were tampered with (issue 26, item 4).

The files are readable Parquet, so the damage is in what they hold: a column the report reads is missing,
text where a number or a yes/no belongs, no rows at all, a checkpoint twice, no ID scores. Each was a
``KeyError``/``ValueError`` traceback from the drawing code, or (no pairs) a report of nothing; now one line
naming the file and the column. Damaged bytes (truncated, empty, garbage files) are in ``cases_cli.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .case import Case
from .cases_cli import _analysis, _both

REPORT = ["report", "{tmp}/analysis", "--out", "{tmp}/out", "-q"]


def _edit(table: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    """Rewrite ``analysis/<table>.parquet`` as ``change`` makes it (still valid Parquet)."""

    def setup(folder: Path) -> None:
        path = folder / "analysis" / f"{table}.parquet"
        change(pd.read_parquet(path)).to_parquet(path)

    return setup


def _text(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        values = frame[column].astype(object)
        values.iloc[len(values) // 2] = "n/a"
        return frame.assign(**{column: values.astype(str)})

    return change


def _no_study(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["study"], errors="ignore")


def _twice(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([frame, frame.iloc[:1]], ignore_index=True)


def cases() -> list[Case]:
    """Every tampered-table case of ``gengen report``."""
    pairs, scores = "{tmp}/analysis/pairs.parquet", "{tmp}/analysis/scores.parquet"
    damaged = [
        (
            "pairs-no-r_partial",
            "pairs",
            lambda f: f.drop(columns=["r_partial"]),
            f"{pairs}: missing column(s) r_partial",
        ),
        ("pairs-no-level", "pairs", lambda f: f.drop(columns=["level"]), f"{pairs}: missing column(s) level"),
        ("pairs-no-significant", "pairs", lambda f: f.drop(columns=["significant"]), f"{pairs}: missing column(s)"),
        ("pairs-text-r_partial", "pairs", _text("r_partial"), f"{pairs}: column 'r_partial' holds 'n/a'"),
        ("pairs-text-p_adjusted", "pairs", _text("p_adjusted"), f"{pairs}: column 'p_adjusted'"),
        ("pairs-text-n", "pairs", _text("n"), f"{pairs}: column 'n'"),
        ("pairs-text-significant", "pairs", _text("significant"), f"{pairs}: column 'significant'"),
        ("pairs-no-rows", "pairs", lambda f: f.iloc[0:0], f"{pairs}: no rows"),
        ("pairs-unknown-level", "pairs", lambda f: f.assign(level="elsewhere"), f"{pairs}: no rows at level"),
        ("scores-no-value", "scores", lambda f: f.drop(columns=["value"]), f"{scores}: missing column(s) value"),
        ("scores-no-step", "scores", lambda f: f.drop(columns=["step"]), f"{scores}: missing column(s) step"),
        ("scores-no-sign", "scores", lambda f: f.drop(columns=["sign"]), f"{scores}: missing column(s) sign"),
        ("scores-text-value", "scores", _text("value"), f"{scores}: column 'value' holds 'n/a'"),
        ("scores-text-step", "scores", _text("step"), f"{scores}: column 'step'"),
        ("scores-no-rows", "scores", lambda f: f.iloc[0:0], f"{scores}: no rows"),
        ("scores-checkpoint-twice", "scores", _twice, f"{scores}: model"),
        ("scores-no-id", "scores", lambda f: f[f["testset"] != "id"], f"{scores}: no scores of the ID test set 'id'"),
    ]
    out = [
        Case(f"report-table-{label}", REPORT, culprit, setup=_both(_analysis, _edit(table, change)))
        for label, table, change, culprit in damaged
    ]
    # --study names a study the analysis does not hold, or one of an analysis that records none.
    out.append(
        Case(
            "report-study-unknown", [*REPORT, "--study", "nosuch"], "--study: 'nosuch' is not a study", setup=_analysis
        )
    )
    out.append(
        Case(
            "report-study-none-recorded",
            [*REPORT, "--study", "study"],
            "--study: the analysis in {tmp}/analysis records no study",
            setup=_both(_analysis, _edit("scores", _no_study), _edit("pairs", _no_study)),
        )
    )
    return out
