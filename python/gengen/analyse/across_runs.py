"""Across-run mode: correlate final scores across runs instead of scores across checkpoints.

When each run contributes one score per test set (for example 100 fine-tuning seeds evaluated once at the
end),
the observations are the runs of a cell (the rows sharing the ``by`` columns, by default a model). Each run's
last step is used. Runs are exchangeable, so permutations are free and bootstraps iid whatever ``scheme``
says,
and no autocorrelation check applies.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gengen.analyse.data import Group, make_group
from gengen.analyse.options import Settings


def is_single_score_per_run(scores: pd.DataFrame) -> bool:
    """True when every (model, run) has exactly one step — the case ``mode="auto"`` treats across runs."""
    return bool((scores.groupby(["model", "run"])["step"].nunique() == 1).all())


def final_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows at each run's last step (the step with the largest number)."""
    last = scores.groupby(["model", "run"])["step"].transform("max")
    return scores[scores["step"] == last]


def across_run_groups(scores: pd.DataFrame, settings: Settings, ood: tuple[str, ...]) -> tuple[list[Group], list[str]]:
    """One :class:`~gengen.analyse.data.Group` per ``by`` cell whose rows are the cell's runs.

    Returns the groups and their warnings.
    """
    final = final_scores(scores).copy()
    final["run_key"] = final["model"] + "/" + final["run"]
    cell_columns = list(settings.by)
    cells = final.groupby(cell_columns, sort=True, dropna=False) if cell_columns else [((), final)]
    groups: list[Group] = []
    notes: list[str] = []
    for key, rows in cells:
        values = key if isinstance(key, tuple) else (key,)
        meta: dict[str, Any] = {
            column: (None if pd.isna(value) else value) for column, value in zip(cell_columns, values, strict=True)
        }
        meta.setdefault("model", "*" if rows["model"].nunique() > 1 else rows["model"].iloc[0])
        meta["run"] = f"across {rows['run_key'].nunique()} runs"
        table = rows.pivot(index="run_key", columns="testset", values="value").sort_index()
        group, group_notes = make_group(
            "across_runs", meta, table, settings.id_testset, ood, ranked=settings.method != "pearson"
        )
        groups.append(group)
        notes.extend(group_notes)
    return groups, notes
