"""The pairs table of one group: every column family, the deciding p-value and interval, the diagnostics.

:func:`analyse_group` plans the group's tests (:mod:`gengen.analyse.group_plan`), builds the tested pairs from
:mod:`gengen.analyse.inference`, the information check (:mod:`gengen.analyse.untestable`) and the leave-one-out
rule (:mod:`gengen.analyse.leave_one_out`), then adjusts and decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from gengen import stats
from gengen.analyse.data import Group
from gengen.analyse.group_plan import PAIR_COLUMNS, GroupPlan, check_size, group_mode, pair_columns, plan_group
from gengen.analyse.inference import correlation_columns, method_columns
from gengen.analyse.leave_one_out import LEAVE_ONE_OUT_NOTE, hull_interval, leave_one_out_columns
from gengen.analyse.options import FALLBACK_P, INFERENCE, Settings, deciding_order
from gengen.analyse.untestable import information_columns, untestable_rows
from gengen.stats.autocorr import AUTOCORR_THRESHOLD, autocorrelation_warning, lag1_autocorrelation
from gengen.stats.correlation import consistent_interval
from gengen.stats.sieve import (
    curvature_notes,
    curvature_shift,
)


def _deciding_p(settings: Settings, plan: GroupPlan) -> str:
    """The column of unadjusted p-values that decides ``significant`` in this table: the first in the deciding
    order that was asked for and that this group's level can have (across runs, which have no order, and pooled
    residuals have neither the sieve nor the lagged test), else the t-test's, which every row has."""
    for name, column in deciding_order():
        if name in settings.inference and (name in plan.tests or column == FALLBACK_P):
            return column
    return FALLBACK_P


def _interval_columns(table: pd.DataFrame, deciding: str, settings: Settings) -> None:
    """``ci_low``/``ci_high``/``ci_method``: an interval of ``r_partial`` from the method that decides the row."""
    method = next(method for method in INFERENCE.values() if method.p_column == deciding)
    if method.interval is not None:
        table["ci_low"], table["ci_high"] = table[method.interval[0]], table[method.interval[1]]
        table["ci_method"] = table[f"{deciding}_method"].where(
            ~table[f"{deciding}_method"].str.startswith("not computed"), f"none (no {method.name} test for this pair)"
        )
    elif deciding == FALLBACK_P and settings.method != "kendall":
        low, high = consistent_interval(table["r_partial"], table["statistic"], table["df"], settings.ci_level)
        table["ci_low"] = low
        table["ci_high"] = high
        table["ci_method"] = "Fisher z with the t-test's standard error (consistent with p_value)"
    else:
        table["ci_low"] = np.nan
        table["ci_high"] = np.nan
        table["ci_method"] = method.no_interval
    for column in (column for method in INFERENCE.values() for column in method.interval or ()):
        if column in table.columns:
            del table[column]


def _decision_columns(table: pd.DataFrame, deciding: str, settings: Settings, *, leave_one_out: bool = False) -> None:
    """The adjusted p-value of the deciding test, what it rests on, and ``significant``.

    With ``leave_one_out`` the deciding p-value is ``p_loo_max``: the largest over the full estimate and every
    deletion of one checkpoint, so that no single checkpoint decides a verdict.
    """
    deciding_p = table["p_loo_max"] if leave_one_out else table[deciding]
    if "p_fwer" in table.columns:
        table["p_adjusted"] = table.pop("p_fwer")
        table["p_adjusted_from"] = "p_perm (max-|r| family-wise permutation, maxT)"
    else:
        table["p_adjusted"] = stats.p_adjust(deciding_p.to_numpy(dtype=float), method=settings.p_adjust_method)
        table["p_adjusted_from"] = "p_loo_max" if leave_one_out else deciding
    table["p_deciding"] = deciding_p
    table["p_deciding_method"] = table[f"{deciding}_method"] + (LEAVE_ONE_OUT_NOTE if leave_one_out else "")
    table["estimand"] = next(method.estimand for method in INFERENCE.values() if method.p_column == deciding)
    table["adjust"] = settings.adjust
    table["significant"] = table["p_adjusted"] < settings.alpha
    table["ci_level"] = settings.ci_level
    _screening_columns(table, deciding_p.to_numpy(dtype=float), settings)


def _screening_columns(table: pd.DataFrame, deciding_p: np.ndarray, settings: Settings) -> None:
    """``p_fdr``: Benjamini–Hochberg of the deciding p-value across the group's pairs, for screening (a list of
    candidates at a false discovery rate, not the verdict, which stays family-wise); ``r_detectable``: the
    smallest \\|r\\| the row's test would detect with 80% power after the group's adjustment
    (:func:`gengen.stats.share.detectable_r`), from the row's own standard error — the sieve's ``se_z``
    (autocorrelation included) on ``df_sieve``, else Fisher's :math:`1/\\sqrt{n-3-k}` on the t-test's df."""
    from gengen.stats.share import detectable_r

    table["p_fdr"] = stats.p_adjust(deciding_p, method="BH")
    se = table["se_z"].to_numpy(dtype=float) if "se_z" in table.columns else np.full(len(table), np.nan)
    df = table["df_sieve"].to_numpy(dtype=float) if "df_sieve" in table.columns else np.full(len(table), np.nan)
    t_df = table["df"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fisher = np.where(t_df > 1, 1.0 / np.sqrt(t_df - 1), np.nan)
    sieve = np.isfinite(se)
    n_tests = max(int(np.isfinite(deciding_p).sum()), 1)
    adjust = "none" if settings.adjust == "none" else "holm"
    table["r_detectable"] = detectable_r(
        np.where(sieve, se, fisher), np.where(sieve, df, t_df), n_tests, alpha=settings.alpha, adjust=adjust
    )


def _autocorrelation_columns(
    table: pd.DataFrame,
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    deciding: str,
    label: str,
    diagnostics: list[list[str]],
) -> list[str]:
    """``acf1_a``, ``acf1_b``, ``autocorr_high`` and their notes; the group's warning when the deciding test
    assumes independent checkpoints that are not."""
    if not plan.ordered:
        table["acf1_a"] = np.nan
        table["acf1_b"] = np.nan
        table["autocorr_high"] = False
        return []
    rows, cols = np.triu_indices(x.shape[1], 1)
    fit: dict[str, Any] = {"fit": settings.control}
    fitted = np.column_stack([np.asarray(stats.residualise(x[:, j], covar, **fit)) for j in range(x.shape[1])])
    acf1 = lag1_autocorrelation(fitted)
    table["acf1_a"] = acf1[rows]
    table["acf1_b"] = acf1[cols]
    table["autocorr_high"] = np.fmax(table["acf1_a"], table["acf1_b"]) > AUTOCORR_THRESHOLD
    independent = independence_methods(settings, deciding, plan.permutation_scheme)
    message = autocorrelation_warning(label, acf1, independent)
    if independent:
        for index, high in enumerate(table["autocorr_high"]):
            if high:
                worst = max(float(table["acf1_a"].iloc[index]), float(table["acf1_b"].iloc[index]))
                diagnostics[index].append(
                    f"residual lag-1 autocorrelation {worst:.2f}: {', '.join(independent)} assume(s) "
                    "independent checkpoints"
                )
    return [message] if message else []


def _curvature_diagnostics(
    table: pd.DataFrame, x: np.ndarray, covar: np.ndarray, settings: Settings, diagnostics: list[list[str]]
) -> None:
    """Note the pairs whose partial correlation moves when ID also enters squared (linear control, one covariate;
    :func:`~gengen.stats.sieve.curvature_notes`).

    The note describes the control, not the verdict: it is not given or withheld according to the row's p-value
    (a rule that compared verdicts under two controls fired on 79–100% of the null rows that were significant
    and 10–35% of the others, so that "unflagged rows are calibrated" was nearly automatic).
    """
    # Under fit="auto" the group's control was chosen by testing every test set for curvature: the note would
    # repeat that decision pair by pair.
    if settings.fit != "linear" or settings.fit_chosen or settings.method == "kendall" or covar.shape[1] != 1:
        return
    rows, cols = np.triu_indices(x.shape[1], 1)
    ranked = settings.method == "spearman"
    data = pd.DataFrame(x).rank().to_numpy() if ranked else x
    control = pd.DataFrame(covar).rank().to_numpy() if ranked else covar
    shift = curvature_shift(data, control)[rows, cols]
    se = table["se_z"].to_numpy(dtype=float)
    # Without the sieve, Fisher's standard error (which is too small under autocorrelation: conservative).
    se = np.where(np.isfinite(se), se, 1.0 / np.sqrt(np.maximum(table["df"].to_numpy(dtype=float) - 1, 1)))
    notes = curvature_notes(shift, se)
    for index, note in enumerate(notes):
        if note:
            diagnostics[index].append(note)


def _identity_columns(table: pd.DataFrame, group: Group, settings: Settings, plan: GroupPlan) -> None:
    """The group's identity and the options that produced its rows."""
    for column, value in group.meta.items():
        table[column] = value
    table["level"] = plan.mode
    table["id_testset"] = settings.id_testset
    table["id_metric"] = settings.id_metric
    table["metric"] = settings.metric
    table["sign"] = settings.sign(settings.metric)
    table["fit"] = settings.fit
    table["method"] = settings.method
    table["inference"] = "+".join(settings.inference)
    independent = plan.permutation_scheme == "free" and plan.bootstrap_scheme == "iid"
    table["scheme"] = "free" if independent else settings.scheme
    table["block_length"] = pd.array([plan.block_length] * len(table), dtype="Int64")


def analyse_group(
    group: Group,
    settings: Settings,
    *,
    covar: np.ndarray | None = None,
    residuals: np.ndarray | None = None,
    p_value_note: str = "",
) -> tuple[pd.DataFrame, list[str]]:
    """The pairs table of one group, and its warnings.

    The group's ``level`` is its mode (:data:`GroupMode`, :func:`group_mode`), which decides the tests it gets
    (:func:`plan_group`); each family of columns comes from its own builder. A test set whose trajectory holds
    too little information (:mod:`gengen.analyse.information`: stuck on one value, two values, a function of a
    discrete ID) takes no part in the tests: its pairs are untestable rows with the reason.

    Parameters
    ----------
    group : Group
        Rows (checkpoints, runs, or pooled residuals) × OOD test sets, with the ID covariate.
    settings : Settings
        Validated options.
    covar : ndarray, shape (n, k), optional
        Covariates to partial out; default the ID score (k = 1).
    residuals : ndarray, shape (n, m), optional
        Pre-computed residuals to correlate with a linear fit on ``covar`` instead of ``group.scores`` (pooled
        residuals with a GAM or rank correlation); ``r_raw`` still comes from ``group.scores``.
    p_value_note : str
        Appended to ``p_value_method`` (how pooled residuals count the t-test's degrees of freedom).

    Returns
    -------
    pairs : DataFrame
        One row per pair of OOD test sets (see :data:`PAIR_COLUMNS`).
    warnings : list of str
    """
    covar = group.id_values[:, None] if covar is None else covar
    check_size(group, covar.shape[1])
    labels = list(group.scores.columns)
    if len(labels) < 2:
        return pd.DataFrame(columns=list(PAIR_COLUMNS)), [f"{group.label}: fewer than two usable OOD test sets"]
    plan = plan_group(group_mode(group), settings, len(group.id_values))
    unusable = {name: info.reason for name, info in group.information.items() if info.reason}
    tested = [index for index, name in enumerate(labels) if name not in unusable]
    warnings = [f"{group.label}: {reason} (its {len(labels) - 1} pairs are untestable)" for reason in unusable.values()]
    tables = []
    if len(tested) >= 2:
        sub_group = replace(group, scores=group.scores.iloc[:, tested])
        sub_residuals = None if residuals is None else residuals[:, tested]
        table, tested_warnings = _tested_pairs(sub_group, settings, plan, covar, sub_residuals, p_value_note)
        tables.append(table)
        warnings.extend(tested_warnings)
    if unusable:
        tables.append(untestable_rows(group, settings, covar, unusable))
    table = pd.concat([part for part in tables if len(part)], ignore_index=True) if tables else pd.DataFrame()
    position = {name: index for index, name in enumerate(labels)}
    order = np.lexsort((table["testset_b"].map(position), table["testset_a"].map(position)))
    table = table.iloc[order].reset_index(drop=True)
    _identity_columns(table, group, settings, plan)
    columns = pair_columns()
    extra = [column for column in group.meta if column not in columns]  # run attributes ``by`` names
    return table[[column for column in columns if column in table.columns] + extra], warnings


def _tested_pairs(
    group: Group,
    settings: Settings,
    plan: GroupPlan,
    covar: np.ndarray,
    residuals: np.ndarray | None,
    p_value_note: str,
) -> tuple[pd.DataFrame, list[str]]:
    """The pairs of the test sets that can be tested: every column family, the verdict, the diagnostics."""
    labels = list(group.scores.columns)
    x = group.scores.to_numpy(dtype=float)
    rows, cols = np.triu_indices(len(labels), 1)

    out = correlation_columns(x, covar, settings, labels, rows, cols, residuals=residuals, p_value_note=p_value_note)
    # A run's rows are its checkpoints, labelled by training step: the sieve follows training time on uneven gaps.
    steps = np.asarray(group.index, dtype=float) if group.level == "run" else None
    methods = method_columns(x, covar, settings, plan, rows, cols, labels, steps)
    out.update(methods.columns)
    problems, diagnostics = methods.problems, methods.diagnostics
    warnings = [f"{group.label}: {problem}" for problem in problems]
    table = pd.DataFrame(out)

    deciding = _deciding_p(settings, plan)
    information_columns(table, group, x, covar, rows, cols, plan, settings.ci_level)
    loo = leave_one_out_columns(table, group, x, covar, settings, plan, deciding, rows, cols)
    _interval_columns(table, deciding, settings)
    if loo:
        hull_interval(table)
    _decision_columns(table, deciding, settings, leave_one_out=loo)
    warnings.extend(_autocorrelation_columns(table, x, covar, settings, plan, deciding, group.label, diagnostics))
    if plan.ordered:
        _curvature_diagnostics(table, x, covar, settings, diagnostics)
    table["diagnostics"] = [
        "" if not testable else "; ".join(notes) for notes, testable in zip(diagnostics, table["testable"], strict=True)
    ]
    warnings.extend(repeated_diagnostics(group.label, table["diagnostics"].tolist()))
    return table, warnings


#: Diagnostics that, carried by most rows of a group, are a property of the group: what each says, and the fix.
GROUP_DIAGNOSTICS = (
    ("ID effect looks non-linear", "the ID effect looks non-linear", "rerun with --fit gam (or fit='gam')"),
    (
        "residual autocorrelation beyond AR",
        "residual autocorrelation beyond the sieve's AR model",
        "compare with --inference lagged",
    ),
    ("variance changes over training", "the noise level changes over training", "compare with --inference lagged"),
    (
        "assume(s) independent checkpoints",
        "the deciding test assumes independent checkpoints",
        "rerun with --inference sieve",
    ),
)


def repeated_diagnostics(label: str, diagnostics: list[str]) -> list[str]:
    """One warning per kind of diagnostic that at least half of a group's rows (and 3 or more) carry."""
    total = len(diagnostics)
    lines = []
    for marker, what, fix in GROUP_DIAGNOSTICS:
        count = sum(marker in text for text in diagnostics)
        if count >= 3 and 2 * count >= total:
            lines.append(f"{label}: {count} of {total} pairs: {what}; {fix}")
    return lines


def independence_methods(settings: Settings, deciding: str, perm_scheme: str) -> list[str]:
    """The methods behind the row's deciding p-value that assume independent checkpoints (empty when none)."""
    if deciding == "p_value":
        return ["t-test"]
    if deciding == "p_perm" and perm_scheme == "free":
        return ["permutation (free)"]
    return []
