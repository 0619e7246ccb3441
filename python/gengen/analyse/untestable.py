"""Which pairs hold enough information to be tested, and the rows of those that do not.

A pair with too few informative checkpoints (a plateau, two values, a function of a discrete ID) or exactly
collinear residuals loses its inference (NaN) and says why in ``untestable_reason``; the sieve's standard error
never claims more information than the informative checkpoints hold as independent ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gengen import _core, stats
from gengen.analyse.data import Group
from gengen.analyse.group_plan import GroupPlan, minimum_rows
from gengen.analyse.information import pair_distinct_rows
from gengen.analyse.options import Settings
from gengen.stats.correlation import consistent_interval

#: Columns of a tested pair that a pair without enough information leaves empty (NaN).
INFERENCE_COLUMNS = (
    "r_partial",
    "statistic",
    "p_value",
    "edf_a",
    "edf_b",
    "se_z",
    "df_sieve",
    "p_sieve",
    "sieve_ci_low",
    "sieve_ci_high",
    "ar_order_a",
    "ar_order_b",
    "p_null_above",
    "p_perm",
    "p_fwer",
    "r_innovation",
    "df_lagged",
    "p_lagged",
    "ci_low_innovation",
    "ci_high_innovation",
    "boot_ci_low",
    "boot_ci_high",
)


def information_columns(
    table: pd.DataFrame,
    group: Group,
    x: np.ndarray,
    covar: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    plan: GroupPlan,
    ci_level: float,
) -> None:
    """``n_steps``, ``n_informative``, ``testable``, ``untestable_reason``; pairs with too few informative
    checkpoints lose their inference (NaN), and the sieve's standard error never claims more information than
    the informative checkpoints hold as independent ones."""
    labels = list(group.scores.columns)
    n, k = x.shape[0], covar.shape[1]
    table["n_steps"] = group.n_steps if group.n_steps >= 0 else n
    informative = np.full(rows.size, n)
    reasons = [""] * rows.size
    if plan.ordered:
        column = np.array([group.information[name].informative if name in group.information else n for name in labels])
        distinct = pair_distinct_rows(x, covar[:, 0], rows, cols)
        informative = np.minimum(np.minimum(column[rows], column[cols]), distinct)
        for index, (a, b) in enumerate(zip(rows, cols, strict=True)):
            if informative[index] < minimum_rows(k):
                reasons[index] = (
                    f"{labels[a]} and {labels[b]}: {informative[index]} informative of {n} checkpoints "
                    f"({distinct[index]} distinct (ID, {labels[a]}, {labels[b]}) rows); too few to test"
                )
    # Exactly collinear residuals (|r| = 1, e.g. ranks of five checkpoints) leave no variation to test against:
    # a row says so instead of printing r = ±1 with p = 0.
    r = table["r_partial"].to_numpy(dtype=float)
    for collinear in np.flatnonzero(np.abs(r) >= 1.0 - 1e-12).tolist():
        if not reasons[collinear]:
            first, second = labels[rows[collinear]], labels[cols[collinear]]
            reasons[collinear] = (
                f"{first} and {second}: their residuals are exactly collinear over {n} checkpoints "
                f"(r_partial = {r[collinear]:+.3f}); nothing left to test"
            )
    table["n_informative"] = informative
    table["untestable_reason"] = reasons
    table["testable"] = [not reason for reason in reasons]
    lost = ~table["testable"].to_numpy()
    for name in INFERENCE_COLUMNS if lost.any() else ():
        if name in table.columns:
            table.loc[lost, name] = np.nan
    # Fisher's standard error on the informative checkpoints is a floor for the sieve's: a plateau's
    # checkpoints are not independent observations of anything.
    if "se_z" in table.columns and np.isfinite(table["se_z"].to_numpy(dtype=float)).any():
        df_informative = table["df"].to_numpy(dtype=float) - (n - informative)
        with np.errstate(divide="ignore", invalid="ignore"):
            floor = np.where(df_informative > 1, 1.0 / np.sqrt(df_informative - 1.0), np.nan)
        se = table["se_z"].to_numpy(dtype=float)
        raise_se = np.isfinite(se) & np.isfinite(floor) & (floor > se)
        if raise_se.any():
            se = np.where(raise_se, floor, se)
            df_sieve = np.where(raise_se, 1.0 / se**2 + 1.0, table["df_sieve"].to_numpy(dtype=float))
            r = table["r_partial"].to_numpy(dtype=float)
            z = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
            low, high = consistent_interval(r, z / se, df_sieve, ci_level)
            table["se_z"] = se
            table["df_sieve"] = df_sieve
            p_sieve = table["p_sieve"].to_numpy(dtype=float).copy()
            p_sieve[raise_se] = [
                _two_sided(value, dof)
                for value, dof in zip(z[raise_se] / se[raise_se], df_sieve[raise_se], strict=True)
            ]
            table["p_sieve"] = p_sieve
            table["sieve_ci_low"] = np.where(raise_se, low, table["sieve_ci_low"].to_numpy(dtype=float))
            table["sieve_ci_high"] = np.where(raise_se, high, table["sieve_ci_high"].to_numpy(dtype=float))


def _two_sided(statistic: float, df: float) -> float:
    """Two-sided p of Student's t (NaN where undefined)."""
    if not (np.isfinite(statistic) and np.isfinite(df) and df > 0):
        return float("nan")
    return float(_core.t_two_sided(float(statistic), float(df)))


def untestable_rows(group: Group, settings: Settings, covar: np.ndarray, unusable: dict[str, str]) -> pd.DataFrame:
    """One row per pair with a test set that holds too little information: the raw correlation and why."""
    labels = list(group.scores.columns)
    x = group.scores.to_numpy(dtype=float)
    method: Any = settings.method
    raw = np.asarray(stats.partial_corr_matrix(x, None, method=method).r, dtype=float)
    records = []
    for a, b in zip(*np.triu_indices(len(labels), 1), strict=True):
        if labels[a] not in unusable and labels[b] not in unusable:
            continue
        informative = min(
            group.information[name].informative if name in group.information else x.shape[0]
            for name in (labels[a], labels[b])
        )
        records.append(
            {
                "testset_a": labels[a],
                "testset_b": labels[b],
                "n": x.shape[0],
                "n_steps": group.n_steps if group.n_steps >= 0 else x.shape[0],
                "n_informative": informative,
                "k": covar.shape[1],
                "r_raw": raw[a, b],
                "testable": False,
                "untestable_reason": unusable.get(labels[a]) or unusable[labels[b]],
                "significant": False,
                "autocorr_high": False,
                "diagnostics": "",
                "estimand": "r_partial",
                "ci_level": settings.ci_level,
                "adjust": settings.adjust,
                "ci_method": "none: untestable",
                "p_deciding_method": "none: untestable",
            }
        )
    return pd.DataFrame(records)
