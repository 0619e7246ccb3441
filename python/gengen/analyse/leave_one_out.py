"""No single checkpoint decides a verdict: the deciding p-value is the largest over deleting any one checkpoint.

(:func:`gengen.stats.leave_one_out_test`); the deciding interval becomes the hull over the deletions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gengen import stats
from gengen.analyse.data import Group
from gengen.analyse.group_plan import GroupPlan, minimum_rows
from gengen.analyse.options import Settings

#: Why a row's deciding p-value is the largest over deletions (appended to ``p_deciding_method``).
LEAVE_ONE_OUT_NOTE = "; survives deleting any checkpoint that carries more than half of it"


def leave_one_out_columns(
    table: pd.DataFrame,
    group: Group,
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    deciding: str,
    rows: np.ndarray,
    cols: np.ndarray,
) -> bool:
    """``p_loo_max``, ``influential_step``, ``influence`` and ``verdict_note``
    (:func:`~gengen.stats.leave_one_out_test`), and the hull of the intervals in ``loo_ci_low``/``loo_ci_high``;
    True when they decide the rows.

    Only where the deciding test is about ``r_partial`` with a standard error (the sieve, or ppcor's t-test
    with Pearson or Spearman) and the rows are a run's checkpoints: permutation p-values carry no standard
    error, and the lagged test is about another estimand.
    """
    table["p_loo_max"] = np.nan
    table["influential_step"] = np.nan
    table["influence"] = np.nan
    table["verdict_note"] = ""
    applies = (
        settings.leave_one_out
        and plan.ordered
        and deciding in ("p_sieve", "p_value")
        and settings.method != "kendall"
        and x.shape[0] > minimum_rows(covar.shape[1])
    )
    if not applies:
        return False
    method: Any = settings.method
    deleted = stats.leave_one_out_partial_corr(x, covar, method=method, fit=settings.control)[:, rows, cols]
    r = table["r_partial"].to_numpy(dtype=float)
    if deciding == "p_sieve":
        se = table["se_z"].to_numpy(dtype=float)
        df = table["df_sieve"].to_numpy(dtype=float)
    else:
        df = table["df"].to_numpy(dtype=float)
        statistic = table["statistic"].to_numpy(dtype=float)
        z = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
        with np.errstate(divide="ignore", invalid="ignore"):
            se = np.abs(np.where(np.abs(r) > 1e-12, z / statistic, 1.0 / np.sqrt(df)))
    fisher_df = table["df"].to_numpy(dtype=float) - 1.0  # n - 3 - k (k: the control's degrees of freedom)
    # An untestable row has no estimate to test (its r_partial is NaN): nothing either.
    se = np.where(table["testable"].to_numpy(dtype=bool), se, np.nan)
    result = stats.leave_one_out_test(r, deleted, se, df, fisher_df=fisher_df, ci_level=settings.ci_level)
    steps = np.asarray(group.index)
    table["p_loo_max"] = result.p_max
    table["influential_step"] = [float(steps[worst]) if worst >= 0 else np.nan for worst in result.worst]
    table["influence"] = result.influence
    table["loo_ci_low"] = result.ci_low
    table["loo_ci_high"] = result.ci_high
    p_full = table[deciding].to_numpy(dtype=float)
    # A note about the verdict, not about an assumption: in its own column, so that ``diagnostics`` stays a
    # description of the data whatever the test says.
    notes = [""] * len(table)
    for index, worst in enumerate(result.worst):
        if worst >= 0 and p_full[index] < settings.alpha <= result.p_max[index]:
            notes[index] = (
                f"significance rests on step {steps[worst]}: without it r_partial = {result.r_worst[index]:.2f} "
                f"(p = {result.p_max[index]:.2g})"
            )
    table["verdict_note"] = notes
    return True


def hull_interval(table: pd.DataFrame) -> None:
    """The deciding interval becomes the hull over the full estimate and every deletion (consistent with
    ``p_loo_max``)."""
    low = table.pop("loo_ci_low").to_numpy(dtype=float)
    high = table.pop("loo_ci_high").to_numpy(dtype=float)
    defined = np.isfinite(low) & np.isfinite(table["ci_low"].to_numpy(dtype=float))
    table["ci_low"] = np.where(defined, low, table["ci_low"])
    table["ci_high"] = np.where(defined, high, table["ci_high"])
    table["ci_method"] = table["ci_method"] + "; hull over the deletions that carry it"
