"""The per-pair table: for every group and pair of OOD test sets, raw and partial correlation with tests.

Every number comes from :mod:`gengen.stats`: the partial correlations, t statistics and p-values from
:func:`~gengen.stats.partial_corr_matrix` (raw correlations: the same without covariates); Fisher-z
intervals from :func:`~gengen.stats.partial_corr`; permutation p-values from :func:`~gengen.stats.permutation_test`
(Freedman–Lane); bootstrap intervals from :func:`~gengen.stats.bootstrap_ci`; adjusted p-values from
:func:`~gengen.stats.p_adjust`; residuals for the autocorrelation check from
:func:`~gengen.stats.residualise`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args
from warnings import catch_warnings, simplefilter

import numpy as np
import pandas as pd

from gengen import _core, stats
from gengen.analyse.across_runs import across_run_groups, is_single_score_per_run
from gengen.analyse.data import RUN_COLUMNS, Group, prepare, run_groups
from gengen.analyse.information import pair_distinct_rows
from gengen.analyse.options import (
    DECIDING_ORDER,
    DEFAULT_ALPHA,
    DEFAULT_ANALYSIS_FIT,
    DEFAULT_BY,
    DEFAULT_INFERENCE,
    DEFAULT_LEAVE_ONE_OUT,
    DEFAULT_METRIC,
    DEFAULT_MODE,
    DEFAULT_POOLING,
    DEFAULT_SCHEME,
    Settings,
    make_settings,
)
from gengen.analyse.pooled import meta_table, pooled_residual_groups
from gengen.analyse.result import Analysis
from gengen.errors import GengenError
from gengen.stats.autocorr import AUTOCORR_THRESHOLD, autocorrelation_warning, lag1_autocorrelation
from gengen.stats.control_choice import choose_control
from gengen.stats.correlation import consistent_interval
from gengen.stats.lagged import lagged_partial_corr_matrix
from gengen.stats.options import (
    DEFAULT_ADJUSTMENT,
    DEFAULT_CI_LEVEL,
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    DEFAULT_INTERVAL_METHOD,
    DEFAULT_METHOD,
    DEFAULT_N_BOOT,
    DEFAULT_N_PERM,
)
from gengen.stats.sieve import (
    SIEVE_METHOD,
    SievePartialCorrMatrix,
    curvature_notes,
    curvature_shift,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)

#: Column order of the pairs table (run-level columns absent from the score table are left out).
PAIR_COLUMNS = (
    "level",
    "model",
    "run",
    *RUN_COLUMNS,
    "runs",
    "id_testset",
    "id_metric",
    "testset_a",
    "testset_b",
    "metric",
    "sign",
    "n",
    "n_steps",
    "n_informative",
    "k",
    "df",
    "edf_a",
    "edf_b",
    "r_raw",
    "r_partial",
    "ci_low",
    "ci_high",
    "ci_level",
    "ci_method",
    "p_deciding",
    "p_deciding_method",
    "p_adjusted",
    "p_adjusted_from",
    "adjust",
    "significant",
    "testable",
    "untestable_reason",
    "p_loo_max",
    "influential_step",
    "influence",
    "verdict_note",
    "estimand",
    "diagnostics",
    "se_z",
    "df_sieve",
    "p_sieve",
    "p_sieve_method",
    "ar_order_a",
    "ar_order_b",
    "statistic",
    "p_value",
    "p_value_method",
    "p_perm",
    "p_perm_method",
    "boot_ci_low",
    "boot_ci_high",
    "boot_ci_method",
    "n_boot_valid",
    "r_innovation",
    "df_lagged",
    "p_lagged",
    "p_lagged_method",
    "ci_low_innovation",
    "ci_high_innovation",
    "fit",
    "fit_reason",
    "method",
    "inference",
    "scheme",
    "block_length",
    "acf1_a",
    "acf1_b",
    "autocorr_high",
)


def _pair_values(matrix: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The upper-triangle entries of a (m, m) result (scalars are broadcast)."""
    values = np.asarray(matrix, dtype=float)
    if values.ndim == 0:
        return np.full(rows.size, float(values))
    return values[rows, cols]


def minimum_rows(k: int) -> int:
    """Fewest observations for which the t-test has df = n - 2 - k ≥ 2 and the Fisher-z interval exists."""
    return k + 4


def check_size(group: Group, k: int) -> None:
    """Raise :class:`GengenError` when ``group`` has too few rows for the tests (df = n - 2 - k < 2)."""
    n = len(group.id_values)
    if n < minimum_rows(k):
        what = "runs" if group.level == "across_runs" else "checkpoints"
        raise GengenError(
            f"{group.label}: {n} {what} with every score present, too few for the tests "
            f"(df = n - 2 - k = {n - 2 - k} with k = {k}; need at least {minimum_rows(k)} {what})"
        )


LAGGED_METHOD = "lagged regression (residuals on [1, y(t-1), ID(t), ID(t-1)], {fit} fit, t-test)"


def _pairwise_fallback(
    compute: Any, x: np.ndarray, rows: np.ndarray, cols: np.ndarray, fields: tuple[str, ...]
) -> tuple[dict[str, list[Any]], list[str], list[Any]]:
    """Run ``compute(x[:, [a, b]])`` pair by pair (fields read at [0, 1]); pairs that fail get NaN and a reason.

    Also returns each pair's result (``None`` where it failed), for the per-column parts of a result.
    """
    values: dict[str, list[Any]] = {name: [] for name in (*fields, "reason")}
    failures = []
    results: list[Any] = []
    for a, b in zip(rows, cols, strict=True):
        try:
            pair = compute(x[:, [a, b]])
        except GengenError as error:
            reason = str(error).replace("column 0", f"column {a}").replace("column 1", f"column {b}")
            for name in fields:
                values[name].append(np.nan)
            values["reason"].append(f"not computed: {reason}")
            failures.append(reason)
            results.append(None)
            continue
        for name in fields:
            values[name].append(float(np.asarray(getattr(pair, name))[0, 1]))
        values["reason"].append("")
        results.append(pair)
    return values, failures, results


def _lagged_pairs(
    x: np.ndarray, covar: np.ndarray, settings: Settings, rows: np.ndarray, cols: np.ndarray
) -> tuple[dict[str, Any], list[str]]:
    """The lagged test of every pair (upper triangle), as columns of the pairs table, and the problems met.

    When the test cannot run on the whole group (a test set whose scores are, say, constant after the first
    checkpoint is a linear function of its own past), each pair is tested on its own, and the pairs that
    still cannot be tested get NaN (not counted by the adjustment) with the reason in ``p_lagged_method``.
    The interval is that of ``r_innovation`` (a different estimand from ``r_partial``), in its own columns.
    """
    method: Any = settings.method
    fit: Any = settings.fit
    label = LAGGED_METHOD.format(fit=settings.fit)

    def compute(data: np.ndarray) -> Any:
        return lagged_partial_corr_matrix(data, covar, method=method, fit=fit)

    fields = ("r_innovation", "statistic", "df", "p_value")
    try:
        result = compute(x)
        values: dict[str, Any] = {name: _pair_values(getattr(result, name), rows, cols) for name in fields}
        values["reason"] = [""] * len(rows)
        failures: list[str] = []
    except GengenError:
        values, failures, _ = _pairwise_fallback(compute, x, rows, cols, fields)
    low, high = consistent_interval(
        np.asarray(values["r_innovation"], dtype=float),
        np.asarray(values["statistic"], dtype=float),
        np.asarray(values["df"], dtype=float),
        settings.ci_level,
    )
    out = {
        "r_innovation": np.asarray(values["r_innovation"], dtype=float),
        "df_lagged": np.asarray(values["df"], dtype=float),
        "p_lagged": np.asarray(values["p_value"], dtype=float),
        "p_lagged_method": [reason or label for reason in values["reason"]],
        "ci_low_innovation": low,
        "ci_high_innovation": high,
    }
    problems = []
    if failures:
        problems.append(
            f"{len(failures)} of {len(rows)} pairs have no lagged test (p_lagged is NaN, not counted by the "
            f"adjustment, not significant); first reason: {failures[0]}"
        )
    return out, problems


def _sieve_pairs(
    x: np.ndarray, covar: np.ndarray, settings: Settings, rows: np.ndarray, cols: np.ndarray, labels: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """The AR-sieve test and interval of ``r_partial`` for every pair, its diagnostics, and the problems met."""
    method: Any = settings.method
    fit: Any = settings.fit

    def compute(data: np.ndarray) -> SievePartialCorrMatrix:
        return sieve_partial_corr_matrix(
            data,
            covar,
            method=method,
            fit=fit,
            n_boot=settings.n_boot,
            ci_level=settings.ci_level,
            seed=settings.seed,
            **settings.gam_options,
        )

    fields = ("se_z", "df", "p_value", "ci_low", "ci_high")
    diagnostics: list[list[str]] = [[] for _ in rows]
    orders = (np.full(len(rows), np.nan), np.full(len(rows), np.nan))
    values: dict[str, Any]
    try:
        result = compute(x)
    except GengenError:
        # One test set the sieve cannot model sinks the whole group: each pair on its own, with its own AR
        # orders and column notes, so that only the pairs with that test set lose them.
        values, failures, fits = _pairwise_fallback(compute, x, rows, cols, fields)
        for index, (pair, a, b) in enumerate(zip(fits, rows, cols, strict=True)):
            if pair is None:
                continue
            orders[0][index], orders[1][index] = float(pair.ar_order[0]), float(pair.ar_order[1])
            notes = sieve_column_notes(pair, [labels[a], labels[b]])
            diagnostics[index].extend([*notes[0], *notes[1]])
    else:
        values = {name: _pair_values(getattr(result, name), rows, cols) for name in fields}
        values["reason"] = [""] * len(rows)
        failures = []
        orders = (result.ar_order[rows].astype(float), result.ar_order[cols].astype(float))
        notes = sieve_column_notes(result, labels)
        for index, (a, b) in enumerate(zip(rows, cols, strict=True)):
            diagnostics[index].extend([*notes[a], *notes[b]])
    label = SIEVE_METHOD.format(n_boot=settings.n_boot, fit=settings.fit)
    out = {
        "se_z": np.asarray(values["se_z"], dtype=float),
        "df_sieve": np.asarray(values["df"], dtype=float),
        "p_sieve": np.asarray(values["p_value"], dtype=float),
        "p_sieve_method": [reason or label for reason in values["reason"]],
        "sieve_ci_low": np.asarray(values["ci_low"], dtype=float),
        "sieve_ci_high": np.asarray(values["ci_high"], dtype=float),
        "ar_order_a": orders[0],
        "ar_order_b": orders[1],
        "_diagnostics": diagnostics,
    }
    problems = []
    if failures:
        problems.append(
            f"{len(failures)} of {len(rows)} pairs have no sieve test (p_sieve is NaN, not counted by the "
            f"adjustment, not significant); first reason: {failures[0]}"
        )
    return out, problems


#: What a group's rows are (its ``level``), which decides the tests it can have:
#:
#: - ``"run"``: one run's checkpoints in training order. Every test asked for; the sieve, the lagged test and
#:   the autocorrelation check need that order, and the permutation and the bootstrap use the chosen scheme.
#: - ``"across_runs"``: one score per run, in no order: the permutation is free and the bootstrap iid, and
#:   there is no sieve, lagged test or autocorrelation check.
#: - ``"pooled_residuals"``: the stacked within-run residuals of a cell's runs (:mod:`gengen.analyse.pooled`):
#:   the t-test only, on degrees of freedom that its ``p_value_method`` states.
GroupMode = Literal["run", "across_runs", "pooled_residuals"]
GROUP_MODES: tuple[GroupMode, ...] = get_args(GroupMode)


@dataclass(frozen=True)
class GroupPlan:
    """The tests one group gets, and the resampling they use (from its mode and the settings)."""

    mode: GroupMode
    sieve: bool
    lagged: bool
    permutation: bool
    bootstrap: bool
    permutation_scheme: str
    bootstrap_scheme: str
    block_length: int | None

    @property
    def ordered(self) -> bool:
        """Whether the rows are checkpoints in training order (the autocorrelation check needs it)."""
        return self.mode == "run"


def group_mode(group: Group) -> GroupMode:
    """A group's mode: its ``level``, checked."""
    for mode in GROUP_MODES:
        if group.level == mode:
            return mode
    raise GengenError(f"{group.label}: level {group.level!r} is not one of {', '.join(GROUP_MODES)}")


def plan_group(mode: GroupMode, settings: Settings, n: int) -> GroupPlan:
    """Which of the asked-for tests a group of ``n`` rows in ``mode`` can have, and their schemes."""
    ordered = mode == "run"
    resampled = mode != "pooled_residuals"
    across = mode == "across_runs"
    permutation_scheme = "free" if across else settings.permutation_scheme
    bootstrap_scheme = "iid" if across else settings.bootstrap_scheme
    block_length = None
    if permutation_scheme != "free" or bootstrap_scheme != "iid":
        block_length = settings.block_length or int(stats.default_block_length(n))
    return GroupPlan(
        mode=mode,
        sieve="sieve" in settings.inference and ordered,
        lagged="lagged" in settings.inference and ordered,
        permutation="permutation" in settings.inference and resampled,
        bootstrap="bootstrap" in settings.inference and resampled,
        permutation_scheme=permutation_scheme,
        bootstrap_scheme=bootstrap_scheme,
        block_length=block_length,
    )


def _options(settings: Settings) -> dict[str, Any]:
    """``method``, ``fit`` and the GAM's options as keyword arguments (validated by make_settings; typed loosely
    for stats' Literals)."""
    return {"method": settings.method, "fit": settings.fit, **settings.gam_options}


def _correlation_columns(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    labels: list[str],
    rows: np.ndarray,
    cols: np.ndarray,
    *,
    residuals: np.ndarray | None,
    p_value_note: str,
) -> dict[str, Any]:
    """The pair's names, the raw and partial correlations and ppcor's t-test (with the GAM's EDF under it)."""
    method: dict[str, Any] = {"method": settings.method}
    if residuals is None:
        result = stats.partial_corr_matrix(x, covar, **_options(settings))
    else:
        result = stats.partial_corr_matrix(residuals, covar, **method, fit="linear")
    return {
        "testset_a": [labels[i] for i in rows],
        "testset_b": [labels[j] for j in cols],
        "n": x.shape[0],
        "k": covar.shape[1],
        "df": _pair_values(result.df, rows, cols),
        "r_raw": _pair_values(stats.partial_corr_matrix(x, None, **method).r, rows, cols),
        "r_partial": _pair_values(result.r, rows, cols),
        "statistic": _pair_values(result.statistic, rows, cols),
        "p_value": _pair_values(result.p_value, rows, cols),
        # Under the GAM control, the effective degrees of freedom of each column's smooth (how curved the fit is).
        "edf_a": np.nan if result.edf is None else np.asarray(result.edf)[rows],
        "edf_b": np.nan if result.edf is None else np.asarray(result.edf)[cols],
        "p_value_method": "t-test" + p_value_note,
    }


NO_SIEVE = {
    "se_z": np.nan,
    "df_sieve": np.nan,
    "p_sieve": np.nan,
    "p_sieve_method": "",
    "sieve_ci_low": np.nan,
    "sieve_ci_high": np.nan,
    "ar_order_a": np.nan,
    "ar_order_b": np.nan,
}
NO_PERMUTATION = {"p_perm": np.nan, "p_perm_method": ""}
NO_LAGGED = {
    "r_innovation": np.nan,
    "df_lagged": np.nan,
    "p_lagged": np.nan,
    "p_lagged_method": "",
    "ci_low_innovation": np.nan,
    "ci_high_innovation": np.nan,
}
NO_BOOTSTRAP = {"boot_ci_low": np.nan, "boot_ci_high": np.nan, "boot_ci_method": ""}


def _permutation_columns(
    x: np.ndarray, covar: np.ndarray, settings: Settings, plan: GroupPlan, rows: np.ndarray, cols: np.ndarray
) -> dict[str, Any]:
    """Freedman–Lane p-values (and, for ``adjust="maxT"``, the family-wise ones in ``p_fwer``)."""
    scheme = plan.permutation_scheme
    perm = stats.permutation_test(
        x,
        covar,
        n_perm=settings.n_perm,
        **{"scheme": scheme, **_options(settings)},
        block_length=plan.block_length if scheme != "free" else None,
        family_wise=settings.adjust == "maxT",
        seed=settings.seed,
    )
    out: dict[str, Any] = {"p_perm": _pair_values(perm.p_value, rows, cols)}
    if perm.p_fwer is not None:
        out["p_fwer"] = _pair_values(perm.p_fwer, rows, cols)
    length = f", L={plan.block_length}" if scheme != "free" else ""
    out["p_perm_method"] = f"permutation ({scheme}{length}, Freedman–Lane, {settings.n_perm} draws)"
    return out


def _bootstrap_columns(
    x: np.ndarray, covar: np.ndarray, settings: Settings, plan: GroupPlan, rows: np.ndarray, cols: np.ndarray
) -> tuple[dict[str, Any], list[str]]:
    """Bootstrap intervals of ``r_partial``, and the bootstrap's warnings (replicates left out, NaN intervals)."""
    scheme = plan.bootstrap_scheme
    with catch_warnings(record=True) as caught:
        simplefilter("always")
        boot = stats.bootstrap_ci(
            x,
            covar,
            n_boot=settings.n_boot,
            **{"scheme": scheme, "ci_method": settings.boot_ci_method, **_options(settings)},
            block_length=plan.block_length if scheme != "iid" else None,
            ci_level=settings.ci_level,
            seed=settings.seed,
        )
    length = f", L={plan.block_length}" if scheme != "iid" else ""
    out = {
        "boot_ci_low": _pair_values(boot.ci_low, rows, cols),
        "boot_ci_high": _pair_values(boot.ci_high, rows, cols),
        "n_boot_valid": _pair_values(boot.n_valid, rows, cols).astype(int),
        "boot_ci_method": f"bootstrap ({scheme}{length}, {settings.boot_ci_method}, {settings.n_boot} draws)",
    }
    return out, [str(warning.message) for warning in caught]


def _deciding_p(settings: Settings, plan: GroupPlan) -> str:
    """The column of unadjusted p-values that decides ``significant`` in this table."""
    available = {"p_sieve": plan.sieve, "p_lagged": plan.lagged, "p_perm": plan.permutation}
    for name, column in DECIDING_ORDER:
        if name in settings.inference and available.get(column, True):
            return column
    # Across runs (no order) and pooled residuals have neither the sieve nor the lagged test.
    return "p_perm" if available["p_perm"] else "p_value"


def _interval_columns(table: pd.DataFrame, deciding: str, settings: Settings) -> None:
    """``ci_low``/``ci_high``/``ci_method``: an interval of ``r_partial`` from the method that decides the row."""
    if deciding == "p_sieve":
        table["ci_low"] = table["sieve_ci_low"]
        table["ci_high"] = table["sieve_ci_high"]
        table["ci_method"] = table["p_sieve_method"].where(
            ~table["p_sieve_method"].str.startswith("not computed"), "none (no sieve test for this pair)"
        )
    elif deciding == "p_value" and settings.method != "kendall":
        low, high = consistent_interval(table["r_partial"], table["statistic"], table["df"], settings.ci_level)
        table["ci_low"] = low
        table["ci_high"] = high
        table["ci_method"] = "Fisher z with the t-test's standard error (consistent with p_value)"
    else:
        table["ci_low"] = np.nan
        table["ci_high"] = np.nan
        table["ci_method"] = {
            "p_lagged": "none: the lagged test is about r_innovation (its interval: ci_low_innovation, "
            "ci_high_innovation)",
            "p_perm": "none: a permutation test gives no interval (ask for inference 'bootstrap': boot_ci_low, "
            "boot_ci_high)",
            "p_value": "none: Kendall's tau has no interval consistent with its normal-approximation test",
        }[deciding]
    for column in ("sieve_ci_low", "sieve_ci_high"):
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
    table["estimand"] = "r_innovation" if deciding == "p_lagged" else "r_partial"
    table["adjust"] = settings.adjust
    table["significant"] = table["p_adjusted"] < settings.alpha
    table["ci_level"] = settings.ci_level


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
    fit: dict[str, Any] = {"fit": settings.fit}
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
        tables.append(_untestable_rows(group, settings, covar, unusable))
    table = pd.concat([part for part in tables if len(part)], ignore_index=True) if tables else pd.DataFrame()
    position = {name: index for index, name in enumerate(labels)}
    order = np.lexsort((table["testset_b"].map(position), table["testset_a"].map(position)))
    table = table.iloc[order].reset_index(drop=True)
    _identity_columns(table, group, settings, plan)
    return table[[column for column in PAIR_COLUMNS if column in table.columns]], warnings


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

    out = _correlation_columns(x, covar, settings, labels, rows, cols, residuals=residuals, p_value_note=p_value_note)
    problems: list[str] = []
    diagnostics: list[list[str]] = [[] for _ in rows]
    if plan.sieve:
        sieve_columns, sieve_problems = _sieve_pairs(x, covar, settings, rows, cols, labels)
        for index, notes in enumerate(sieve_columns.pop("_diagnostics")):
            diagnostics[index].extend(notes)
        out.update(sieve_columns)
        problems.extend(sieve_problems)
    else:
        out.update(NO_SIEVE)
    out.update(_permutation_columns(x, covar, settings, plan, rows, cols) if plan.permutation else NO_PERMUTATION)
    if plan.lagged:
        lagged_columns, lagged_problems = _lagged_pairs(x, covar, settings, rows, cols)
        out.update(lagged_columns)
        problems.extend(lagged_problems)
    else:
        out.update(NO_LAGGED)
    if plan.bootstrap:
        bootstrap_columns, bootstrap_problems = _bootstrap_columns(x, covar, settings, plan, rows, cols)
        out.update(bootstrap_columns)
        problems.extend(bootstrap_problems)
    else:
        out.update(NO_BOOTSTRAP)
    warnings = [f"{group.label}: {problem}" for problem in problems]
    table = pd.DataFrame(out)

    deciding = _deciding_p(settings, plan)
    _information_columns(table, group, x, covar, rows, cols, plan, settings.ci_level)
    loo = _leave_one_out_columns(table, group, x, covar, settings, plan, deciding, rows, cols)
    _interval_columns(table, deciding, settings)
    if loo:
        _hull_interval(table)
    _decision_columns(table, deciding, settings, leave_one_out=loo)
    warnings.extend(_autocorrelation_columns(table, x, covar, settings, plan, deciding, group.label, diagnostics))
    if plan.ordered:
        _curvature_diagnostics(table, x, covar, settings, diagnostics)
    table["diagnostics"] = [
        "" if not testable else "; ".join(notes) for notes, testable in zip(diagnostics, table["testable"], strict=True)
    ]
    warnings.extend(repeated_diagnostics(group.label, table["diagnostics"].tolist()))
    return table, warnings


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


def _information_columns(
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
    for name in INFERENCE_COLUMNS:
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
            table["p_sieve"] = np.where(
                raise_se,
                [_two_sided(value, dof) for value, dof in zip(z / se, df_sieve, strict=True)],
                table["p_sieve"].to_numpy(dtype=float),
            )
            table["sieve_ci_low"] = np.where(raise_se, low, table["sieve_ci_low"].to_numpy(dtype=float))
            table["sieve_ci_high"] = np.where(raise_se, high, table["sieve_ci_high"].to_numpy(dtype=float))


def _two_sided(statistic: float, df: float) -> float:
    """Two-sided p of Student's t (NaN where undefined)."""
    if not (np.isfinite(statistic) and np.isfinite(df) and df > 0):
        return float("nan")
    return float(_core.t_two_sided(float(statistic), float(df)))


#: Why a row's deciding p-value is the largest over deletions (appended to ``p_deciding_method``).
LEAVE_ONE_OUT_NOTE = "; survives deleting any checkpoint that carries more than half of it"


def _leave_one_out_columns(
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
    fit: Any = settings.fit
    deleted = stats.leave_one_out_partial_corr(x, covar, method=method, fit=fit, **settings.gam_options)[:, rows, cols]
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


def _hull_interval(table: pd.DataFrame) -> None:
    """The deciding interval becomes the hull over the full estimate and every deletion (consistent with
    ``p_loo_max``)."""
    low = table.pop("loo_ci_low").to_numpy(dtype=float)
    high = table.pop("loo_ci_high").to_numpy(dtype=float)
    defined = np.isfinite(low) & np.isfinite(table["ci_low"].to_numpy(dtype=float))
    table["ci_low"] = np.where(defined, low, table["ci_low"])
    table["ci_high"] = np.where(defined, high, table["ci_high"])
    table["ci_method"] = table["ci_method"] + "; hull over the deletions that carry it"


def _untestable_rows(group: Group, settings: Settings, covar: np.ndarray, unusable: dict[str, str]) -> pd.DataFrame:
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


def group_control(group: Group, settings: Settings) -> tuple[Settings, str]:
    """The settings one group is analysed with, and why: under ``fit="auto"``, with the control
    :func:`gengen.stats.choose_control` picks for its testable test sets."""
    if settings.fit != "auto":
        return settings, ""
    usable = [name for name in group.scores.columns if not getattr(group.information.get(name), "reason", "")]
    if len(usable) < 1 or len(group.id_values) < minimum_rows(1):
        choice_fit, reason = "linear", "too few testable test sets or checkpoints to test for curvature; linear control"
    else:
        choice = choose_control(group.scores[usable].to_numpy(dtype=float), group.id_values)
        choice_fit, reason = choice.fit, choice.reason
    return replace(settings, fit=choice_fit, fit_chosen=True), f"fit='auto': {reason}"


def control_summary(groups: list[Group], chosen: list[str]) -> str:
    """One line: which control ``fit="auto"`` gave how many groups (the reasons are in ``fit_reason``)."""
    gam = [group.label for group, fit in zip(groups, chosen, strict=True) if fit == "gam"]
    if not gam:
        return f"control (fit='auto'): linear for all {len(groups)} groups (no majority of test sets curves in ID)"
    shown = "; ".join(gam[:3]) + (f"; … ({len(gam) - 3} more)" if len(gam) > 3 else "")
    return (
        f"control (fit='auto'): the capped GAM for {len(gam)} of {len(groups)} groups, where most test sets curve "
        f"in ID ({shown}); linear for the rest (fit_reason says why per row; --fit linear or --fit gam to choose)"
    )


def _progress(items: list[Any], enabled: bool, description: str) -> Iterable[Any]:
    """Iterate ``items``, with a rich progress bar on stderr when ``enabled``."""
    if not enabled:
        return items
    from rich.progress import track

    return track(items, description=description, transient=True)


def analyse(
    df: pd.DataFrame,
    *,
    id_testset: str,
    ood: str | Iterable[str] | None = None,
    metric: str = DEFAULT_METRIC,
    id_metric: str | None = None,
    fit: str = DEFAULT_ANALYSIS_FIT,
    method: str = DEFAULT_METHOD,
    inference: str | Iterable[str] = DEFAULT_INFERENCE,
    scheme: str = DEFAULT_SCHEME,
    block_length: int | None = None,
    n_perm: int = DEFAULT_N_PERM,
    n_boot: int = DEFAULT_N_BOOT,
    ci_level: float = DEFAULT_CI_LEVEL,
    boot_ci_method: str = DEFAULT_INTERVAL_METHOD,
    adjust: str = DEFAULT_ADJUSTMENT,
    alpha: float = DEFAULT_ALPHA,
    by: str | Iterable[str] | None = None,
    pooling: str | Iterable[str] | None = DEFAULT_POOLING,
    mode: str = DEFAULT_MODE,
    lower_is_better: Iterable[str] | None = None,
    higher_is_better: Iterable[str] | None = None,
    models: str | Iterable[str] | None = None,
    runs: str | Iterable[str] | None = None,
    sizes: str | Iterable[str] | None = None,
    shots: int | str | Iterable[int | str] | None = None,
    seed: int = 0,
    leave_one_out: bool = DEFAULT_LEAVE_ONE_OUT,
    min_step: int | None = None,
    gam_k: int = DEFAULT_GAM_K,
    gam_method: str = DEFAULT_GAM_METHOD,
    gam_basis: str = DEFAULT_GAM_BASIS,
    max_edf: float | str | None = DEFAULT_GAM_MAX_EDF,
    progress: bool = False,
) -> Analysis:
    r"""Partial correlations of every pair of OOD test sets, controlling for ID performance.

    For each run (model, run), the OOD scores across its checkpoints are correlated pairwise after the ID
    score has been regressed out (linear or GAM fit); each pair gets the raw and the partial correlation, the
    t statistic with its degrees of freedom and p-value, a permutation p-value, a bootstrap interval and an
    adjusted p-value, with the method that produced each. Runs of the same ``by`` cell are then pooled.

    Parameters
    ----------
    df : DataFrame
        The score table (columns ``model, run, step, testset, metric, value``; others such as ``size``,
        ``seed``, ``shots`` are carried along).
    id_testset : str
        The in-domain test set whose score is regressed out.
    ood : str or list of str, optional
        OOD test sets (comma-separated string or list); default every other test set with ``metric``.
    metric : str
        Metric of the OOD scores.
    id_metric : str, optional
        Metric of the ID score (default ``metric``).
    fit : {"auto", "linear", "gam"}
        How ID is regressed out: least squares on [1, ID], a penalised regression spline of ID whose effective
        degrees of freedom are capped (:func:`gengen.stats.default_max_edf`), or (default) per group the one
        :func:`gengen.stats.choose_control` picks: the GAM when most test sets curve in ID, else the line
        (``fit`` then records the choice and ``fit_reason`` why).
    method : {"pearson", "spearman", "kendall"}
        Correlation.
    inference : str or list of str
        Any of ``"sieve"`` (default), ``"lagged"``, ``"t-test"``, ``"permutation"``, ``"bootstrap"``. The first
        of sieve, lagged, permutation, t-test that was asked for gives the p-value that is adjusted and decides
        ``significant`` (across runs and for pooled residuals, which have no order, the permutation or t-test
        p). The sieve (:mod:`gengen.stats.sieve`) tests ``r_partial`` itself with an AR-sieve standard error that
        stays valid on autocorrelated trajectories and gives its interval (``ci_low``, ``ci_high``); the lagged
        test is about another estimand, the correlation of the innovations (``r_innovation``), and has its own
        interval columns. Each row names its ``estimand``, the deciding p and its method, and ``diagnostics``
        where the default's assumptions look doubtful (docs/analysis.md, docs/calibration.md).
    scheme : {"block", "circular", "free", "iid"}
        Resampling scheme of the permutation test and the bootstrap (``free`` and ``iid`` are the same
        independent scheme). Block schemes respect the autocorrelation of checkpoint trajectories.
    block_length : int, optional
        Block length (default :func:`gengen.stats.default_block_length` of the number of checkpoints).
    n_perm, n_boot : int
        Permutations, and sieve or bootstrap resamples, per group.
    ci_level : float
        Confidence level of intervals.
    boot_ci_method : {"percentile", "bca"}
        Bootstrap interval.
    adjust : str
        Multiple-testing adjustment across the pairs of each group (R ``p.adjust`` names).
    alpha : float
        Level for the ``significant`` column.
    by : str or list of str, optional
        Columns that define a pooling cell: runs of the same cell are pooled (in across-run mode a cell is one
        group). Any of study, model, family, size, shots; default model, size and shots (those the table has),
        so that the seeds of one model/size/shot count are pooled.
    pooling : str or list of str, optional
        ``"meta"`` (Fisher-z fixed and random effects with I², in :attr:`Analysis.pooled`) and/or
        ``"residuals"`` (residualise within each run and correlate the pooled residuals, in
        :attr:`Analysis.pooled_residuals`); empty for none.
    mode : {"auto", "checkpoints", "across_runs"}
        ``auto`` correlates across runs when every run has a single step, else across checkpoints.
    lower_is_better, higher_is_better : list of str, optional
        Metric names (or name parts) to read as lower- or higher-is-better, beyond the name parts of
        :data:`~gengen.analyse.options.LOWER_IS_BETTER` (see :func:`~gengen.analyse.options.is_lower_better`
        and the sign convention in :mod:`gengen.analyse.data`); ``higher_is_better`` wins.
    models, runs, sizes, shots : str or list, optional
        Analyse only the rows whose model, run key, size or shot count matches one of these glob patterns
        (``"pythia-*"``, ``"seed=[0-4]"``, ``64``); each pattern must match something.
    seed : int
        Seed of every permutation and bootstrap.
    leave_one_out : bool
        No single checkpoint decides a verdict: a run's deciding p-value (sieve, or t-test) is the largest over
        the full estimate and every deletion of one checkpoint (``p_loo_max``, with ``influential_step``), and
        its interval the hull of theirs (:func:`gengen.stats.leave_one_out_test`). Default True.
    min_step : int, optional
        Leave out the checkpoints before this step (``1`` leaves out step 0, the model before fine-tuning).
        Default: every checkpoint, as the paper scores step 0 (the leave-one-out rule keeps its jump from
        deciding a verdict on its own).
    gam_k : int
        The GAM control's basis dimension (mgcv's ``k``, default 10), wherever the control is a GAM (the lagged
        test keeps its own small basis, k = 5).
    gam_method : {"gcv", "reml"}
        The GAM's smoothing-parameter criterion.
    gam_basis : {"cr", "tp"}
        The GAM's basis.
    max_edf : float, "auto" or None
        Cap on each smooth's effective degrees of freedom: ``"auto"`` (:func:`gengen.stats.default_max_edf` of
        n), None (uncapped), or a number of at least 2.
    progress : bool
        Show a progress bar over groups.

    Returns
    -------
    Analysis
        ``pairs`` (one row per group × pair), ``pooled``, ``pooled_residuals``, ``warnings``, ``settings``.

    Raises
    ------
    GengenError
        Unknown test set, the ID listed as OOD, a bad option, or too few checkpoints for the tests.

    Notes
    -----
    The partial correlation of OOD scores :math:`a, b` given ID score :math:`c` is the correlation of the
    residuals of :math:`a` and :math:`b` after regressing each on :math:`[1, c]`; the t statistic is
    :math:`t = r\sqrt{(n - 2 - k)/(1 - r^2)}` on :math:`n - 2 - k` degrees of freedom (ppcor's ``pcor.test``).

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> steps = np.arange(0, 4000, 100)
    >>> id_acc = 0.5 + 0.4 * (1 - np.exp(-steps / 1500))  # the in-domain (ID) learning curve
    >>> rows = [
    ...     (model, "main", step, testset, "acc", acc + (testset != "mnli") * rng.normal(0, 0.02))
    ...     for model in ("opt-125m",)
    ...     for step, acc in zip(steps, id_acc)
    ...     for testset in ("mnli", "hans", "rte", "anli")
    ... ]
    >>> scores = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])
    >>> import gengen
    >>> result = gengen.analyse(scores, id_testset="mnli", n_boot=199)
    >>> result.pairs[["testset_a", "testset_b", "r_partial", "p_value", "significant"]].round(2)
      testset_a testset_b  r_partial  p_value  significant
    0      anli      hans       0.16     0.34        False
    1      anli       rte       0.22     0.18        False
    2      hans       rte      -0.01     0.97        False
    """
    if by is None:
        by = tuple(column for column in DEFAULT_BY if isinstance(df, pd.DataFrame) and column in df.columns)
    settings = make_settings(
        id_testset=id_testset,
        ood=ood,
        metric=metric,
        id_metric=id_metric,
        fit=fit,
        method=method,
        inference=inference,
        scheme=scheme,
        block_length=block_length,
        n_perm=n_perm,
        n_boot=n_boot,
        ci_level=ci_level,
        boot_ci_method=boot_ci_method,
        adjust=adjust,
        alpha=alpha,
        by=by,
        pooling=pooling,
        mode=mode,
        lower_is_better=lower_is_better,
        seed=seed,
        higher_is_better=higher_is_better,
        models=models,
        runs=runs,
        sizes=sizes,
        shots=shots,
        leave_one_out=leave_one_out,
        min_step=min_step,
        gam_k=gam_k,
        gam_method=gam_method,
        gam_basis=gam_basis,
        max_edf=max_edf,
    )
    scores, ood_names = prepare(df, settings)
    resolved_mode = settings.mode
    if resolved_mode == "auto":
        resolved_mode = "across_runs" if is_single_score_per_run(scores) else "checkpoints"
    if resolved_mode == "across_runs":
        groups, warnings = across_run_groups(scores, settings, ood_names)
    else:
        groups, warnings = run_groups(scores, settings, ood_names)
    for group in groups:
        check_size(group, 1)
    tables = []
    chosen: list[str] = []
    for group in _progress(groups, progress, "analysing groups"):
        group_settings, reason = group_control(group, settings)
        table, group_warnings = analyse_group(group, group_settings)
        if reason and len(table):
            table["fit_reason"] = reason
        tables.append(table)
        warnings.extend(group_warnings)
        chosen.append(group_settings.fit)
    if settings.fit == "auto" and chosen:
        warnings.insert(0, control_summary(groups, chosen))
    pairs = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(PAIR_COLUMNS))
    pairs = pairs[[column for column in PAIR_COLUMNS if column in pairs.columns]]
    pooled = pd.DataFrame()
    pooled_residuals = pd.DataFrame()
    if resolved_mode == "checkpoints" and "meta" in settings.pooling:
        pooled = meta_table(pairs, settings)
    if resolved_mode == "checkpoints" and "residuals" in settings.pooling:
        residual_tables = []
        # One control for pooled residuals: the one most runs got.
        pooled_settings = (
            replace(settings, fit=max(set(chosen), key=chosen.count)) if settings.fit == "auto" else settings
        )
        for group, covar, note, residuals in pooled_residual_groups(groups, pooled_settings):
            table, _ = analyse_group(group, pooled_settings, covar=covar, residuals=residuals, p_value_note=note)
            residual_tables.append(table)
        if residual_tables:
            pooled_residuals = pd.concat(residual_tables, ignore_index=True)
    record = settings.as_dict()
    record["mode_resolved"] = resolved_mode
    record["ood_resolved"] = list(ood_names)
    return Analysis(
        pairs=pairs,
        pooled=pooled,
        pooled_residuals=pooled_residuals,
        warnings=warnings,
        settings=record,
        scores=scores,
    )
