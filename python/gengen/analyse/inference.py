"""The columns each test adds to a group's pairs: the correlations and ppcor's t-test, the AR-sieve test, the
lagged test, Freedman–Lane permutations and the bootstrap.

Every number comes from :mod:`gengen.stats`; a test that cannot run on the whole group is run pair by pair, and
the pairs that still fail get NaN with the reason in their method column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple
from warnings import catch_warnings, simplefilter

import numpy as np

from gengen import stats
from gengen.analyse.group_plan import GroupPlan, pair_values
from gengen.analyse.options import INFERENCE, Settings
from gengen.errors import GengenError
from gengen.stats.correlation import consistent_interval
from gengen.stats.lagged import lagged_partial_corr_matrix, time_lagged_partial_corr_matrix
from gengen.stats.sieve import (
    SIEVE_METHOD,
    SievePartialCorrMatrix,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)
from gengen.stats.sieve_time import regular_steps, steps_array

LAGGED_METHOD = "lagged regression (residuals on [1, y(t-1), ID(t), ID(t-1)], {fit} fit, t-test)"
#: The lagged test of a run whose checkpoints are not evenly spaced: its lag in training time.
LAGGED_TIME_METHOD = (
    "lagged in training time (residuals on [1, ID], {fit} fit, filtered into OU-plus-white innovations on the "
    "training steps, t-test)"
)


#: What each test that is not calibrated on checkpoint trajectories was measured to do on true nulls
#: (docs/calibration.md: the realistic grid of issue 23 and the method comparison of issue 9, α = 0.05).
UNCALIBRATED_RATES = {
    "t-test": (
        "ppcor's t-test assumes independent checkpoints: it rejected 24–49% of true nulls on realistic "
        "learning curves (AR(1) 0.9 noise) and 70–83% on a test set stuck at chance"
    ),
    "free": (
        "the free permutation assumes independent checkpoints: it rejected 44% of true nulls at AR(1) 0.9, n = 50"
    ),
    "block": (
        "block permutation (blocks of about n^(1/3) checkpoints) keeps too little of the autocorrelation: it "
        "rejected 21–34% of true nulls at AR(1) 0.9–0.99 and random walks, n = 50"
    ),
    "circular": (
        "circular-shift permutation rejected 6.2–8.1% of true nulls at AR(1) 0.9–0.99 and random walks, n = 50, "
        "and cannot reach p below 1/n"
    ),
}


def uncalibrated_path_warning(settings: Settings) -> str | None:
    """The one-line warning an analysis of checkpoint trajectories gets when its deciding test is not calibrated
    there (the t-test or a permutation, whatever the scheme), with the false-positive rate measured for it; None
    when the sieve or the lagged test decides.

    Parameters
    ----------
    settings : Settings
        The analysis' settings.

    Returns
    -------
    str or None
        The warning, or None.
    """
    deciding = settings.primary_p
    if deciding == "p_value":
        key, name = "t-test", "t-test"
    elif deciding == "p_perm":
        key, name = settings.permutation_scheme, f"permutation ({settings.permutation_scheme})"
    else:
        return None
    return (
        f"inference: the {name} decides the rows, and {UNCALIBRATED_RATES[key]} (docs/calibration.md); its "
        "'significant' rows are not calibrated on trajectories: use 'sieve' (the default) or 'lagged'"
    )


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


def lagged_pairs(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    rows: np.ndarray,
    cols: np.ndarray,
    steps: np.ndarray | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The lagged test of every pair (upper triangle), as columns of the pairs table, and the problems met.

    ``steps``: a run's training steps; where they are not evenly spaced the lag is one in training time
    (:func:`gengen.stats.lagged.time_lagged_partial_corr_matrix`: the index lag left 0.087–0.128 of true nulls
    rejected on log-spaced checkpoints, docs/calibration.md), otherwise one checkpoint.

    When the test cannot run on the whole group (a test set whose scores are, say, constant after the first
    checkpoint is a linear function of its own past), each pair is tested on its own, and the pairs that
    still cannot be tested get NaN (not counted by the adjustment) with the reason in ``p_lagged_method``.
    The interval is that of ``r_innovation`` (a different estimand from ``r_partial``), in its own columns.
    """
    method: Any = settings.method
    fit: Any = settings.control  # the analysis' GAM options reach the lagged GAM
    times = steps_array(None if steps is None else np.asarray(steps, dtype=float), x.shape[0])
    in_time = not regular_steps(times)
    label = (LAGGED_TIME_METHOD if in_time else LAGGED_METHOD).format(fit=settings.fit)

    def compute(data: np.ndarray) -> Any:
        if in_time:
            assert times is not None
            return time_lagged_partial_corr_matrix(data, covar, times, method=method, fit=fit)
        return lagged_partial_corr_matrix(data, covar, method=method, fit=fit)

    fields = ("r_innovation", "statistic", "df", "p_value")
    try:
        result = compute(x)
        values: dict[str, Any] = {name: pair_values(getattr(result, name), rows, cols) for name in fields}
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


def sieve_pairs(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The AR-sieve test and interval of ``r_partial`` for every pair, its diagnostics, and the problems met.

    ``steps``: the checkpoints' training steps (a run's rows), so that unevenly spaced checkpoints get the
    sieve's training-time correction; None across runs.
    """
    method: Any = settings.method

    def compute(data: np.ndarray) -> SievePartialCorrMatrix:
        return sieve_partial_corr_matrix(
            data,
            covar,
            method=method,
            fit=settings.control,
            n_boot=settings.n_boot,
            ci_level=settings.ci_level,
            seed=settings.seed,
            steps=steps,
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
        values = {name: pair_values(getattr(result, name), rows, cols) for name in fields}
        values["reason"] = [""] * len(rows)
        failures = []
        orders = (result.ar_order[rows].astype(float), result.ar_order[cols].astype(float))
        values["p_null_above"] = null_above_column(result, covar, settings, rows, cols)
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
        "p_null_above": np.asarray(values.get("p_null_above", np.full(len(rows), np.nan)), dtype=float),
        "_diagnostics": diagnostics,
    }
    problems = []
    if failures:
        problems.append(
            f"{len(failures)} of {len(rows)} pairs have no sieve test (p_sieve is NaN, not counted by the "
            f"adjustment, not significant); first reason: {failures[0]}"
        )
    return out, problems


def null_above_column(
    result: SievePartialCorrMatrix, covar: np.ndarray, settings: Settings, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """Each pair's probability that its sieve p-value exceeds Storey's lambda when no pair co-moves, simulated
    from the run's own AR fits (what the verdict's global share counts against); NaN below the test sets the
    share's interval needs, where the verdict gives none."""
    from gengen.stats.share import MIN_TESTSETS_INTERVAL, NULL_SIEVE_DRAWS, null_above_probability

    if len(result.ar_order) < MIN_TESTSETS_INTERVAL:
        return np.full(len(rows), np.nan)
    method: Any = settings.method
    try:
        null = null_above_probability(
            result,
            covar,
            method=method,
            fit=settings.control,
            n_boot=min(NULL_SIEVE_DRAWS, settings.n_boot),
            seed=settings.seed,
        )
    except GengenError:  # a simulated series the sieve cannot model: the share counts against uniform p-values
        return np.full(len(rows), np.nan)
    return np.asarray(pair_values(null, rows, cols), dtype=float)


def control_options(settings: Settings) -> dict[str, Any]:
    """``method`` and ``fit`` (the settings' control) as keyword arguments (validated by make_settings; typed
    loosely for stats' Literals)."""
    return {"method": settings.method, "fit": settings.control}


def correlation_columns(
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
        result = stats.partial_corr_matrix(x, covar, **control_options(settings))
    else:
        result = stats.partial_corr_matrix(residuals, covar, **method, fit="linear")
    return {
        "testset_a": [labels[i] for i in rows],
        "testset_b": [labels[j] for j in cols],
        "n": x.shape[0],
        "k": covar.shape[1],
        "df": pair_values(result.df, rows, cols),
        "r_raw": pair_values(stats.partial_corr_matrix(x, None, **method).r, rows, cols),
        "r_partial": pair_values(result.r, rows, cols),
        "statistic": pair_values(result.statistic, rows, cols),
        "p_value": pair_values(result.p_value, rows, cols),
        # Under the GAM control, the effective degrees of freedom of each column's smooth (how curved the fit is).
        "edf_a": np.nan if result.edf is None else np.asarray(result.edf)[rows],
        "edf_b": np.nan if result.edf is None else np.asarray(result.edf)[cols],
        "p_value_method": "t-test" + p_value_note,
    }


#: The columns of each method that did not run, from its entry of :data:`gengen.analyse.options.INFERENCE`.
NO_SIEVE = dict(INFERENCE["sieve"].not_applicable)
NO_PERMUTATION = dict(INFERENCE["permutation"].not_applicable)
NO_LAGGED = dict(INFERENCE["lagged"].not_applicable)
NO_BOOTSTRAP = dict(INFERENCE["bootstrap"].not_applicable)


def permutation_columns(
    x: np.ndarray, covar: np.ndarray, settings: Settings, plan: GroupPlan, rows: np.ndarray, cols: np.ndarray
) -> dict[str, Any]:
    """Freedman–Lane p-values (and, for ``adjust="maxT"``, the family-wise ones in ``p_fwer``)."""
    scheme = plan.permutation_scheme
    perm = stats.permutation_test(
        x,
        covar,
        n_perm=settings.n_perm,
        **{"scheme": scheme, **control_options(settings)},
        block_length=plan.block_length if scheme != "free" else None,
        family_wise=settings.adjust == "maxT",
        seed=settings.seed,
    )
    out: dict[str, Any] = {"p_perm": pair_values(perm.p_value, rows, cols)}
    if perm.p_fwer is not None:
        out["p_fwer"] = pair_values(perm.p_fwer, rows, cols)
    length = f", L={plan.block_length}" if scheme != "free" else ""
    out["p_perm_method"] = f"permutation ({scheme}{length}, Freedman–Lane, {settings.n_perm} draws)"
    return out


def bootstrap_columns(
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
            **{"scheme": scheme, "ci_method": settings.boot_ci_method, **control_options(settings)},
            block_length=plan.block_length if scheme != "iid" else None,
            ci_level=settings.ci_level,
            seed=settings.seed,
        )
    length = f", L={plan.block_length}" if scheme != "iid" else ""
    out = {
        "boot_ci_low": pair_values(boot.ci_low, rows, cols),
        "boot_ci_high": pair_values(boot.ci_high, rows, cols),
        "n_boot_valid": pair_values(boot.n_valid, rows, cols).astype(int),
        "boot_ci_method": f"bootstrap ({scheme}{length}, {settings.boot_ci_method}, {settings.n_boot} draws)",
    }
    return out, [str(warning.message) for warning in caught]


class MethodColumns(NamedTuple):
    """What an inference method adds to a group's pairs: its columns, the problems met (warnings), and notes for
    each pair's ``diagnostics`` (empty: none)."""

    columns: dict[str, Any]
    problems: list[str]
    diagnostics: list[list[str]]


#: The function of an inference method: ``(x, covar, settings, plan, rows, cols, labels, steps)`` → its columns for
#: the pairs ``(rows[i], cols[i])`` of the group's test sets ``labels`` (``x``: scores, ``covar``: ID, ``steps``: a
#: run's training steps, None across runs).
ColumnFunction = Callable[
    [np.ndarray, np.ndarray, Settings, GroupPlan, np.ndarray, np.ndarray, list[str], np.ndarray | None],
    MethodColumns,
]


def _sieve_method(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None,
) -> MethodColumns:
    columns, problems = sieve_pairs(x, covar, settings, rows, cols, labels, steps)
    return MethodColumns(columns, problems, columns.pop("_diagnostics"))


def _lagged_method(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None,
) -> MethodColumns:
    columns, problems = lagged_pairs(x, covar, settings, rows, cols, steps)
    return MethodColumns(columns, problems, [])


def _permutation_method(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None,
) -> MethodColumns:
    return MethodColumns(permutation_columns(x, covar, settings, plan, rows, cols), [], [])


def _bootstrap_method(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None,
) -> MethodColumns:
    columns, problems = bootstrap_columns(x, covar, settings, plan, rows, cols)
    return MethodColumns(columns, problems, [])


#: The function of each inference method of :data:`gengen.analyse.options.INFERENCE` (the t-test has none: its
#: columns come with the correlations, always).
COLUMNS_OF: dict[str, ColumnFunction] = {
    "sieve": _sieve_method,
    "lagged": _lagged_method,
    "permutation": _permutation_method,
    "bootstrap": _bootstrap_method,
}


def method_columns(
    x: np.ndarray,
    covar: np.ndarray,
    settings: Settings,
    plan: GroupPlan,
    rows: np.ndarray,
    cols: np.ndarray,
    labels: list[str],
    steps: np.ndarray | None = None,
) -> MethodColumns:
    """Every inference method's columns for a group's pairs: computed for the methods of ``plan.tests``, the
    entry's "not applicable" values for the others; their problems and diagnostics in :data:`INFERENCE`'s order.

    Parameters
    ----------
    x, covar : ndarray
        The group's scores (one column per test set) and its ID score(s).
    settings : Settings
        The analysis' settings.
    plan : GroupPlan
        The tests this group gets.
    rows, cols : ndarray
        The pairs, as indices into the columns of ``x``.
    labels : list of str
        The test sets.
    steps : ndarray, optional
        A run's training steps, one per row of ``x`` (the sieve's training-time correction on uneven gaps); None
        across runs.

    Returns
    -------
    MethodColumns
        The columns of every method, the problems met and each pair's diagnostics.
    """
    out = MethodColumns({}, [], [[] for _ in rows])
    for name, method in INFERENCE.items():
        function = COLUMNS_OF.get(name)
        if function is None:
            continue
        if name not in plan.tests:
            out.columns.update(method.not_applicable)
            continue
        columns, problems, diagnostics = function(x, covar, settings, plan, rows, cols, labels, steps)
        out.columns.update(columns)
        out.problems.extend(problems)
        for notes, more in zip(out.diagnostics, diagnostics, strict=False):
            notes.extend(more)
    return out
