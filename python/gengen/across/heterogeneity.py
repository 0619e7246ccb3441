r"""Does a pair's partial correlation differ between models? Cochran's Q on Fisher's z across groups.

For one pair of OOD test sets and :math:`M` groups (models; the sizes of one family; the shot regimes of one
model), group :math:`g` contributes one estimate of Fisher's :math:`z` of the pair's partial correlation and its
variance (:func:`group_estimates`):

* a group with several runs (seeds): the random-effects pooled estimate of its runs,
  :math:`\hat z_g = \operatorname{artanh} r_\text{random}`, :math:`v_g = \mathrm{se}_\text{random}^2` — the
  pooled table's numbers (:func:`gengen.analyse.pooled.meta_table`), recomputed here with the same
  :func:`gengen.stats.meta.fisher_meta` and the same run variances (the squared AR-sieve ``se_z``), so that
  :math:`v_g` holds both the checkpoint noise of each run and the seed-to-seed spread :math:`\hat\tau^2`;
* a group with one run: :math:`\hat z_g = \operatorname{artanh} r_\text{partial}`, :math:`v_g = \mathrm{se}_z^2`.

Rows that cannot be tested (``testable`` False) are left out. The test (:func:`heterogeneity_test`):

.. math::

    w_g = 1/v_g, \quad \bar z = \frac{\sum_g w_g \hat z_g}{\sum_g w_g}, \quad
    Q = \sum_g w_g (\hat z_g - \bar z)^2, \quad \frac{Q}{M - 1} \sim F_{M-1, \nu} \text{ under }
    H_0: \rho_1 = \dots = \rho_M, \quad I^2 = \max\Bigl(0, \frac{Q - (M - 1)}{Q}\Bigr).

The variances are themselves estimated (the sieve's ``se_z`` on ``df_sieve`` degrees of freedom :math:`\nu_g`;
a model's pooled variance on the meta-analysis' Satterthwaite ``df_fixed``), so Q is referred to
:math:`(M-1) F_{M-1,\nu}` with :math:`\nu = (\sum_g w_g)^2 / \sum_g (w_g^2 / \nu_g)` rather than to
:math:`\chi^2_{M-1}` (its limit for known variances, used when no df is recorded): with the chi-squared
reference the type-I error reached 0.068 at AR(1) φ = 0.9 and 50 checkpoints.

Pairwise differences (:func:`pairwise_differences`): :math:`d_{gh} = (\hat z_g - \hat z_h) / \sqrt{v_g + v_h}`,
referred to Student's t on the Welch–Satterthwaite df :math:`(v_g + v_h)^2 / (v_g^2/\nu_g + v_h^2/\nu_h)`,
two-sided, adjusted with Holm's method across the :math:`M(M-1)/2` comparisons of the pair.
The heterogeneity p-values are adjusted across the pairs of a cell with the analysis' method
(:func:`heterogeneity_table`). The calibration (type-I error, power) is in ``docs/calibration.md``.

References
----------
Cochran, W. G. (1954). The combination of estimates from different experiments. *Biometrics* 10, 101–129.
Higgins, J. P. T. & Thompson, S. G. (2002). Quantifying heterogeneity in a meta-analysis.
*Statistics in Medicine* 21, 1539–1558.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gengen.across.per_pair import holm_by_group, joined_per_row, oriented_pairs, satterthwaite, two_sided_p_array
from gengen.errors import InputError, InvalidArgumentError
from gengen.stats.tails import f_sf, f_sf_array, two_sided_p

__all__ = [
    "ACROSS",
    "HETEROGENEITY_COLUMNS",
    "HeterogeneityResult",
    "PairMatrices",
    "comparison_cells",
    "group_estimates",
    "heterogeneity_table",
    "heterogeneity_test",
    "pair_matrices",
    "pairwise_differences",
    "q_arrays",
    "two_sided_p",
]

#: The comparisons: across models (within a shot regime), across the sizes of a family, across shot regimes.
ACROSS = ("model", "size", "shots")
#: The columns that identify a group (a pooling cell of the analysis).
UNIT_COLUMNS = ("family", "model", "size", "shots", "condition")
#: For each comparison, the columns that must be equal within one test (its cell) and the one that varies.
CELLS: dict[str, tuple[tuple[str, ...], str]] = {
    "model": (("shots", "condition"), "unit"),
    "size": (("family", "shots", "condition"), "size"),
    "shots": (("model", "size", "condition"), "shots"),
}
#: How a group's variance of z was obtained, as in the ``variance_method`` column.
SIEVE = "se_z² (AR-sieve, autocorrelation-aware)"
SIEVE_INTERVAL = (
    "se² that the row's interval implies (AR-sieve, autocorrelation-aware; the leave-one-out hull by default)"
)
POOLED = "se_random² of the runs' random-effects pooling (se_z² per run, DerSimonian–Laird τ²)"
POOLED_INTERVAL = (
    "se_random² of the runs' random-effects pooling (per run the se² its interval implies, DerSimonian–Laird τ²)"
)
INDEPENDENT = "1/(n - 3 - k) (assumes independent checkpoints)"
LAGGED = "(artanh r_innovation / t)² of the lagged test (innovations, autocorrelation-aware)"
POOLED_LAGGED = (
    "se_random² of the runs' random-effects pooling of r_innovation (lagged variances, DerSimonian–Laird τ²)"
)
NO_VARIANCE = (
    "none: the deciding test (t-test or permutation) assumes independent checkpoints; ask for inference "
    "'sieve' or 'lagged' to compare models"
)
HETEROGENEITY_COLUMNS = (
    "across",
    "cell",
    "testset_a",
    "testset_b",
    "n_groups_heterogeneity",
    "groups_heterogeneity",
    "r_common_heterogeneity",
    "q_heterogeneity",
    "df_heterogeneity",
    "df_denominator_heterogeneity",
    "p_heterogeneity",
    "p_heterogeneity_adjusted",
    "i2_heterogeneity",
    "significant_heterogeneity",
)
DIFFERENCE_COLUMNS = (
    "across",
    "cell",
    "testset_a",
    "testset_b",
    "group_a",
    "group_b",
    "r_a",
    "r_b",
    "z_difference",
    "se_difference",
    "statistic",
    "df_difference",
    "p_difference",
    "p_difference_adjusted",
    "significant_difference",
)


def _text(value: Any) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else str(value)


@dataclass(frozen=True)
class HeterogeneityResult:
    """Cochran's Q of one set of Fisher-z estimates.

    Attributes
    ----------
    n_groups : int
        Estimates used (finite z, positive variance).
    z_common : float
        The inverse-variance weighted mean of z.
    q : float
        Cochran's Q.
    df : int
        ``n_groups - 1``.
    p_value : float
        :math:`P(\\chi^2_{df} \\ge Q)`; NaN with fewer than two groups.
    i2 : float
        Higgins' I².
    """

    n_groups: int
    z_common: float
    q: float
    df: int
    p_value: float
    i2: float


def heterogeneity_test(z: Any, variance: Any, df: Any = None) -> HeterogeneityResult:
    r"""Cochran's Q test that several Fisher-z estimates share one value.

    Parameters
    ----------
    z : array_like, shape (M,)
        Estimates of Fisher's z; NaN entries are left out.
    variance : array_like, shape (M,)
        Their variances; entries that are not finite and positive are left out.
    df : array_like, shape (M,), optional
        Degrees of freedom of each variance when it is estimated; Q is then referred to
        :math:`(M-1)\,F_{M-1,\nu}`, :math:`\nu = (\sum w_g)^2 / \sum (w_g^2/\nu_g)` (Satterthwaite).

    Returns
    -------
    HeterogeneityResult
        Q, its df and p-value, I² and the common (fixed-effect) z.

    Notes
    -----
    :math:`Q = \sum_g w_g (z_g - \bar z)^2`, :math:`w_g = 1/v_g`, :math:`\bar z = \sum w_g z_g / \sum w_g`,
    referred to :math:`\chi^2_{M-1}` (the same as R's ``metafor::rma(yi = z, vi = v, method = "FE")$QE`` and
    ``$QEp``), or with ``df`` to :math:`(M-1) F_{M-1,\nu}`: with estimated weights Q has a heavier tail than
    :math:`\chi^2` (exactly F when the variances share one estimated scale); :math:`I^2 = \max(0, (Q -
    (M-1))/Q)`.

    Examples
    --------
    >>> result = heterogeneity_test([0.5, -0.1, 0.2], [0.02, 0.03, 0.025])
    >>> round(result.q, 3), result.df, round(result.p_value, 4)
    (7.297, 2, 0.026)
    """
    z_arr = np.asarray(z, dtype=float).ravel()
    v_arr = np.asarray(variance, dtype=float).ravel()
    df_arr = np.full(z_arr.shape, np.inf) if df is None else np.asarray(df, dtype=float).ravel()
    if z_arr.shape != v_arr.shape or df_arr.shape != z_arr.shape:
        raise InputError(f"z and variance: different lengths ({z_arr.size} and {v_arr.size})")
    keep = np.isfinite(z_arr) & np.isfinite(v_arr) & (v_arr > 0)
    z_arr, w, df_arr = z_arr[keep], 1.0 / v_arr[keep], df_arr[keep]
    m = int(z_arr.size)
    nan = float("nan")
    if m == 0:
        return HeterogeneityResult(0, nan, nan, 0, nan, nan)
    common = float(np.sum(w * z_arr) / np.sum(w))
    if m == 1:
        return HeterogeneityResult(1, common, nan, 0, nan, nan)
    q = float(np.sum(w * (z_arr - common) ** 2))
    nu = float(satterthwaite(w[None, :], df_arr[None, :])[0])
    p = f_sf(q / (m - 1), m - 1, nu)
    i2 = max(0.0, (q - (m - 1)) / q) if q > 0 else 0.0
    return HeterogeneityResult(m, common, q, m - 1, p, i2)


def _run_rows(pairs: pd.DataFrame) -> pd.DataFrame:
    """The testable per-run rows of a pairs table, pair names oriented, group columns filled."""
    needed = ("model", "run", "testset_a", "testset_b", "r_partial")
    missing = [column for column in needed if column not in pairs.columns]
    if missing:
        raise InputError(f"pairs: missing column(s) {', '.join(missing)}; expected gengen analyse's pairs table")
    rows = pairs[pairs["level"] == "run"] if "level" in pairs.columns else pairs
    if "testable" in rows.columns:
        rows = rows[rows["testable"].fillna(True).astype(bool)]
    rows = oriented_pairs(rows.copy())
    for column in UNIT_COLUMNS:
        if column not in rows.columns:
            rows[column] = pd.NA
    return rows


def group_estimates(pairs: pd.DataFrame, *, interval_variance: bool = True) -> pd.DataFrame:
    """One Fisher-z estimate and variance per group (model × size × shots) and pair, from the per-run rows.

    Parameters
    ----------
    pairs : DataFrame
        The analysis' pairs table (``level == "run"`` rows are used; rows with ``testable`` False are left
        out). Needs ``model, run, testset_a, testset_b, r_partial`` and ``se_z`` (else ``n`` and ``k``).
    interval_variance : bool
        Whether a sieve row's variance is the one its reported interval implies (the default, what the
        across-model tests use: with leave-one-out that interval is the hull of the leave-one-checkpoint-out
        intervals) or the sieve's own :math:`\\mathrm{se}_z^2` (what the global share's p-values were calibrated
        on: :mod:`gengen.across.global_share`, docs/calibration.md).

    Returns
    -------
    DataFrame
        ``unit, family, model, size, shots, testset_a, testset_b, n_runs, r, z, variance, variance_method``;
        ``unit`` labels the group (the model, with ``shots=…`` when a model has several shot regimes).

    Notes
    -----
    A group with several runs gets the random-effects estimate of :func:`gengen.stats.meta.fisher_meta` over
    its runs (variances from :func:`gengen.analyse.pooled.run_variances`, as the pooled table):
    :math:`z = \\operatorname{artanh} r_\\text{random}`, :math:`v = \\mathrm{se}_\\text{random}^2`. A group with
    one run: :math:`z = \\operatorname{artanh} r_\\text{partial}`, :math:`v = \\mathrm{se}_z^2`.

    Each estimate is in the quantity its row was tested on, with the variance of the same dependence model as
    the row's interval: for an analysis' rows (an ``estimand`` column) decided by the lagged test,
    :math:`z = \\operatorname{artanh} r_\\text{innovation}` with :func:`gengen.analyse.pooled.lagged_variance`
    on ``df_lagged``; rows decided by a test that assumes independent checkpoints (t-test, permutation) get no
    variance (``variance_method`` says so) and are left out of every across-model test, never given ppcor's
    :math:`1/(n-3-k)`. That variance is used only for a bare table of ``r_partial``, ``n``, ``k`` without
    ``se_z`` or ``estimand``.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"model": ["a", "b"], "run": "main", "testset_a": "x", "testset_b": "y",
    ...                       "r_partial": [0.3, -0.2], "se_z": [0.15, 0.2]})
    >>> group_estimates(pairs)[["unit", "n_runs", "z", "variance"]].round(4)
      unit  n_runs       z  variance
    0    a       1  0.3095    0.0225
    1    b       1 -0.2027    0.0400
    """
    rows, from_analysis = _estimand_rows(_run_rows(pairs), interval_variance=interval_variance)
    keys = ["family", "model", "size", "shots", "condition"]
    shots_per_model = rows.groupby("model", dropna=False)["shots"].nunique(dropna=False)
    several_shots = set(shots_per_model.index[shots_per_model > 1])
    conditions_per_model = rows.groupby("model", dropna=False)["condition"].nunique(dropna=False)
    several_conditions = set(conditions_per_model.index[conditions_per_model > 1])
    has_se = from_analysis or ("se_z" in rows.columns and np.isfinite(rows["se_z"].to_numpy(dtype=float)).any())
    can_count = "n" in rows.columns and "k" in rows.columns
    if not has_se and not can_count:
        raise InputError("pairs: neither se_z nor n and k; cannot give each estimate a variance")
    columns = ["unit", *keys, "testset_a", "testset_b", "n_runs", "r", "z", "variance", "df", "variance_method", "runs"]
    out: dict[str, list[Any]] = {name: [] for name in columns}
    for key, cell in rows.groupby(keys, sort=False, dropna=False):
        family, model, size, shots, condition = key
        unit = str(model) if model not in several_shots else f"{model} shots={_text(shots)}"
        if model in several_conditions:  # a condition is never pooled with another as if it were a seed
            unit = f"{unit} {_text(condition) or 'no condition'}"
        identity = {
            "unit": unit,
            "family": family,
            "model": model,
            "size": size,
            "shots": shots,
            "condition": condition,
        }
        if cell["run"].nunique() == 1:
            estimates = _single_run_estimates(cell, has_se)
        else:
            estimates = _pooled_run_estimates(cell)
        if from_analysis:
            estimates["variance_method"] = _analysis_methods(cell, estimates)
        count = len(estimates["testset_a"])
        identity["runs"] = ";".join(sorted(map(str, cell["run"].unique())))  # what was pooled as replicates
        for name, value in identity.items():
            out[name].extend([value] * count)
        for name, values in estimates.items():
            out[name].extend(values)
    return pd.DataFrame(out, columns=columns)


def _estimand_rows(rows: pd.DataFrame, *, interval_variance: bool = True) -> tuple[pd.DataFrame, bool]:
    """The rows with each one's estimate and variance in ``r_partial``, ``se_z`` and ``df_sieve``, from the
    dependence model that gave the row its interval, and whether the rows come from an analysis (``estimand``).

    An analysis' row is compared in the quantity it was tested on: ``r_partial`` with the sieve's ``se_z²`` on
    ``df_sieve``, or, when the lagged test decided it, ``r_innovation`` with the lagged test's variance on
    ``df_lagged``. A row decided by a test that assumes independent checkpoints (the t-test, a permutation) gets
    no variance (it is left out of every across-model test) rather than ppcor's 1/(n − 3 − k): on
    autocorrelated trajectories that variance is several times too small (issue 34: 53% wrong verdicts on a
    null pair). A table without ``estimand`` (not an analysis' pairs table) is used as it is.
    """
    if "estimand" not in rows.columns:
        return rows, False
    from gengen.analyse.pooled import lagged_estimates

    lagged = (rows["estimand"].astype(str) == "r_innovation").to_numpy()
    rows = rows.assign(se_z=_interval_se(rows)) if interval_variance and "se_z" in rows.columns else rows
    rows, _ = lagged_estimates(rows)
    missing = {name: np.nan for name in ("se_z", "df_sieve") if name not in rows.columns}
    # no independence variance for an analysis' rows: n is what 1/(n - 3 - k) would be computed from
    return rows.assign(**missing, n=np.nan, _lagged=lagged), True


def _interval_se(rows: pd.DataFrame) -> np.ndarray:
    """Each sieve row's standard error of Fisher's z as its reported interval implies it: the interval's wider
    half-width on the z scale over Student's t quantile on ``df_sieve`` (with leave-one-out, the default, the
    interval is the hull of the leave-one-checkpoint-out intervals, so this is at least ``se_z``); ``se_z``
    where the row has no interval.

    On 4 models of realistic null curves (log-spaced, 300 replicates) Cochran's Q on these variances rejects 0.053
    (n = 20) and 0.060 (n = 40) against 0.063 and 0.077 on ``se_z²`` (docs/calibration.md, issue 34).
    """
    from gengen import _core

    se = rows["se_z"].to_numpy(dtype=float)
    if not {"ci_low", "ci_high", "ci_level", "df_sieve", "r_partial"} <= set(rows.columns):
        return se
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.arctanh(rows["r_partial"].to_numpy(dtype=float))
        low = np.arctanh(rows["ci_low"].to_numpy(dtype=float))
        high = np.arctanh(rows["ci_high"].to_numpy(dtype=float))
        level = rows["ci_level"].to_numpy(dtype=float)
        dof = rows["df_sieve"].to_numpy(dtype=float)
        # one vectorised quantile call per interval level (one level in practice), not one call per row
        quantile = np.full(len(rows), np.nan)
        ok = np.isfinite(level) & (dof > 0)
        for value in np.unique(level[ok]):
            chosen = ok & (level == value)
            quantile[chosen] = _core.t_quantile_array(0.5 + float(value) / 2, np.ascontiguousarray(dof[chosen]))
        implied = np.maximum(high - z, z - low) / quantile
    return np.where(np.isfinite(implied) & np.isfinite(se), np.fmax(implied, se), se)


def _analysis_methods(cell: pd.DataFrame, estimates: dict[str, list[Any]]) -> list[str]:
    """``variance_method`` of each estimate of an analysis' group: sieve or lagged (pooled or not), or none."""
    lagged = bool(cell["_lagged"].any())
    pooled = cell["run"].nunique() > 1
    method = (POOLED_LAGGED if pooled else LAGGED) if lagged else (POOLED_INTERVAL if pooled else SIEVE_INTERVAL)
    variance = np.asarray(estimates["variance"], dtype=float)
    with np.errstate(invalid="ignore"):
        return [method if ok else NO_VARIANCE for ok in (np.isfinite(variance) & (variance > 0)).tolist()]


def _single_run_estimates(cell: pd.DataFrame, has_se: bool) -> dict[str, list[Any]]:
    """:func:`group_estimates`' columns for a group of one run: its own z and variance per pair."""
    r = cell["r_partial"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if has_se:
            variance = cell["se_z"].to_numpy(dtype=float) ** 2
            method = SIEVE
            # the sieve's variance is estimated, on df_sieve degrees of freedom
            df = cell["df_sieve"].to_numpy(dtype=float) if "df_sieve" in cell.columns else np.full(len(cell), np.inf)
        else:
            dof = cell["n"].to_numpy(dtype=float) - 3.0 - cell["k"].to_numpy(dtype=float)
            variance = np.where(dof > 0, 1.0 / dof, np.nan)
            method = INDEPENDENT
            df = np.full(len(cell), np.inf)
        z = np.arctanh(np.where(np.abs(r) < 1, r, np.nan))
    return {
        "testset_a": cell["testset_a"].tolist(),
        "testset_b": cell["testset_b"].tolist(),
        "n_runs": [1] * len(cell),
        "r": list(r),
        "z": list(z),
        "variance": list(variance),
        "df": list(df),
        "variance_method": [method] * len(cell),
    }


def _pooled_run_estimates(cell: pd.DataFrame) -> dict[str, list[Any]]:
    """:func:`group_estimates`' columns for a group of several runs: the random-effects pooling of each pair's
    runs (:func:`gengen.stats.meta.fisher_meta_rows` over a pairs × runs array, the numbers of
    :func:`gengen.stats.meta.fisher_meta` with :func:`gengen.analyse.pooled.run_variances` per pair)."""
    from gengen.stats.meta import fisher_meta_rows

    pair = cell.groupby(["testset_a", "testset_b"], sort=False).ngroup().to_numpy()
    present = np.flatnonzero(pair >= 0)
    order = present[np.argsort(pair[present], kind="stable")]
    codes = pair[order]
    n_pairs = int(codes.max()) + 1 if len(codes) else 0
    counts = np.bincount(codes, minlength=n_pairs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    slot = np.arange(len(order)) - starts[codes]

    def grid(values: np.ndarray, fill: float) -> np.ndarray:
        out = np.full((n_pairs, int(counts.max()) if n_pairs else 0), fill)
        out[codes, slot] = values[order]
        return out

    r = cell["r_partial"].to_numpy(dtype=float)
    n = cell["n"].to_numpy(dtype=float) if "n" in cell.columns else np.full(len(cell), np.nan)
    k = cell["k"].to_numpy(dtype=float) if "k" in cell.columns else np.zeros(len(cell))
    with np.errstate(invalid="ignore"):
        if np.any(np.abs(r) > 1 + 1e-9) or np.any(n < 0) or np.any(k < 0):
            raise InvalidArgumentError("r, n, k: correlations must lie in [-1, 1] and counts be >= 0")
    se = cell["se_z"].to_numpy(dtype=float) if "se_z" in cell.columns else np.full(len(cell), np.nan)
    pair_has_se = np.zeros(n_pairs, dtype=bool)
    np.logical_or.at(pair_has_se, codes, np.isfinite(se[order]))
    row_has_se = np.zeros(len(cell), dtype=bool)
    row_has_se[order] = pair_has_se[codes]
    with np.errstate(divide="ignore", invalid="ignore"):
        independent = np.where(n - 3 - k > 0, 1.0 / (n - 3.0 - k), np.nan)
    variance = np.where(row_has_se, se**2, independent)
    has_df = "df_sieve" in cell.columns
    dof = cell["df_sieve"].to_numpy(dtype=float) if has_df else np.full(len(cell), np.inf)
    meta = fisher_meta_rows(
        grid(r, np.nan), grid(variance, np.nan), grid(np.where(row_has_se, dof, np.inf), np.inf), pair_has_se & has_df
    )
    r_random = meta["r_random"]
    with np.errstate(invalid="ignore"):
        z = np.where(np.isfinite(r_random) & (np.abs(r_random) < 1), np.arctanh(r_random), np.nan)
    first = order[starts]
    return {
        "testset_a": cell["testset_a"].to_numpy(dtype=object)[first].tolist(),
        "testset_b": cell["testset_b"].to_numpy(dtype=object)[first].tolist(),
        "n_runs": meta["n_runs"].tolist(),
        "r": r_random.tolist(),
        "z": z.tolist(),
        "variance": (meta["se_random"] ** 2).tolist(),
        "df": np.where(np.isfinite(meta["df_fixed"]), meta["df_fixed"], np.inf).tolist(),
        "variance_method": [POOLED if has else INDEPENDENT for has in pair_has_se],
    }


def comparison_cells(estimates: pd.DataFrame, across: str) -> list[tuple[str, pd.DataFrame]]:
    """The tests of one comparison: (cell label, estimates) for each cell with at least two groups.

    Parameters
    ----------
    estimates : DataFrame
        From :func:`group_estimates`.
    across : {"model", "size", "shots"}
        The comparison (see :func:`heterogeneity_table`).

    Returns
    -------
    list of (str, DataFrame)
        The cell's label (``"all"``, ``"shots=5"``, ``"family=pythia, shots=0"``) and its rows.
    """
    within, varying = CELLS[across]
    within = tuple(column for column in within if column in estimates.columns)  # estimates without conditions
    columns = list(within)
    codes = estimates.groupby(columns, dropna=False, sort=False).ngroup().to_numpy()
    _, first = np.unique(codes, return_index=True)
    keys = [estimates[column].to_numpy(dtype=object)[first] for column in columns]
    # one label per key; keys that read alike ("shots=5" from 5 and "5", "" from None and NaN) share a cell
    label_of_key = np.array(
        [
            ", ".join(f"{c}={_text(v)}" for c, v in zip(within, key, strict=True) if _text(v))
            for key in zip(*keys, strict=True)
        ],
        dtype=object,
    )
    labels = label_of_key[codes] if len(codes) else np.array([], dtype=object)
    cells = []
    for label in sorted(set(label_of_key)):
        rows = estimates.iloc[np.flatnonzero(labels == label)]
        if across == "size" and not rows["family"].notna().all():
            continue
        units = rows.drop_duplicates("unit")
        if units[varying].nunique(dropna=False) < 2:
            continue
        # One group per value of the varying column: two models of one size in a family are not "sizes".
        if across != "model" and units[varying].nunique(dropna=False) != len(units):
            continue
        cells.append((str(label) or "all", rows))
    return cells


@dataclass(frozen=True)
class PairMatrices:
    """One cell's estimates as (pair × group) arrays.

    Attributes
    ----------
    index : DataFrame
        ``testset_a, testset_b`` of each row, sorted.
    units : list of str
        The groups, one per column.
    z, variance, r : ndarray, shape (pairs, groups)
        Fisher's z, its variance and r (NaN where a group has no estimate for the pair).
    df : ndarray, shape (pairs, groups)
        Degrees of freedom of each variance (``inf`` when known or not recorded).
    usable : ndarray of bool
        Finite z and positive variance.
    """

    index: pd.DataFrame
    units: list[str]
    z: np.ndarray
    variance: np.ndarray
    r: np.ndarray
    usable: np.ndarray
    df: np.ndarray

    def groups_per_pair(self) -> list[str]:
        """The groups that estimate each pair, joined by ";"."""
        return joined_per_row(np.broadcast_to(np.array(self.units, dtype=object), self.usable.shape), self.usable)


def pair_matrices(rows: pd.DataFrame) -> PairMatrices:
    """The estimates of one cell as (pair × group) arrays.

    Parameters
    ----------
    rows : DataFrame
        Rows of :func:`group_estimates` (one cell).

    Returns
    -------
    PairMatrices
        Pairs sorted by name, groups in order of appearance.
    """
    unit_codes, unit_names = pd.factorize(rows["unit"].astype(str).to_numpy(dtype=object), sort=False)
    units = [str(unit) for unit in unit_names]
    code_a, names_a = pd.factorize(rows["testset_a"].to_numpy(dtype=object), sort=True)
    code_b, names_b = pd.factorize(rows["testset_b"].to_numpy(dtype=object), sort=True)
    key = code_a.astype(np.int64) * len(names_b) + code_b
    named = (code_a >= 0) & (code_b >= 0)
    z_column = rows["z"].to_numpy(dtype=float)
    # the pairs (sorted by name) where some group has a z, as a pivot of z would keep them
    pair_keys = np.unique(key[named & ~np.isnan(z_column)])
    slot = np.searchsorted(pair_keys, key)
    named &= slot < len(pair_keys)
    named[named] = pair_keys[slot[named]] == key[named]

    def wide(values: np.ndarray) -> np.ndarray:
        """A (pair × group) array of one column: each cell's first value that is not NaN."""
        out = np.full((len(pair_keys), len(units)), np.nan)
        valid = named & ~np.isnan(values)
        cells, first = np.unique(slot[valid] * len(units) + unit_codes[valid], return_index=True)
        out.flat[cells] = values[valid][first]
        return out

    z_values = wide(z_column)
    variance = wide(rows["variance"].to_numpy(dtype=float))
    df = wide(rows["df"].to_numpy(dtype=float)) if "df" in rows.columns else np.full(variance.shape, np.inf)
    df = np.where(np.isfinite(df) & (df > 0), df, np.inf)
    r = wide(rows["r"].to_numpy(dtype=float))
    with np.errstate(invalid="ignore"):
        usable = np.isfinite(z_values) & np.isfinite(variance) & (variance > 0)
    index = pd.DataFrame(
        {"testset_a": names_a[pair_keys // len(names_b)], "testset_b": names_b[pair_keys % len(names_b)]}
    )
    return PairMatrices(index, units, z_values, variance, r, usable, df)


def q_arrays(z: np.ndarray, variance: np.ndarray, df: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:func:`heterogeneity_test` for every row of (pairs × groups) arrays at once.

    Parameters
    ----------
    z, variance : ndarray, shape (pairs, groups)
        Estimates and their variances; entries without a finite z and a positive variance are left out.
    df : ndarray, shape (pairs, groups), optional
        Degrees of freedom of each variance when it is estimated (the sieve's ``df_sieve``): Q is then referred
        to :math:`(M-1) F_{M-1, \\nu}` with Satterthwaite's :math:`\\nu` (:func:`satterthwaite`) instead of
        :math:`\\chi^2_{M-1}`, and the common effect to Student's t on :math:`\\nu`.

    Returns
    -------
    dict of ndarray
        ``n_groups``, ``z_common``, ``sum_w`` (:math:`\\sum w_g`), ``q``, ``df``, ``df_denominator`` (ν),
        ``p`` and ``i2`` per row.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.isfinite(z) & np.isfinite(variance) & (variance > 0)
        w = np.where(usable, 1.0 / np.where(usable, variance, 1.0), 0.0)
        zz = np.where(usable, z, 0.0)
        n = usable.sum(axis=1)
        sum_w = w.sum(axis=1)
        common = np.where(n > 0, (w * zz).sum(axis=1) / np.where(sum_w > 0, sum_w, 1.0), np.nan)
        q = np.where(n > 1, (w * (zz - np.where(np.isfinite(common), common, 0.0)[:, None]) ** 2).sum(axis=1), np.nan)
        q_df = np.maximum(n - 1, 0)
        nu = satterthwaite(w, np.full(w.shape, np.inf) if df is None else np.where(usable, df, np.inf))
        p = np.where(q_df > 0, f_sf_array(q / np.where(q_df > 0, q_df, 1), q_df, nu), np.nan)
        i2 = np.where(q > 0, np.maximum(0.0, (q - q_df) / np.where(q > 0, q, 1.0)), np.where(n > 1, 0.0, np.nan))
    return {
        "n_groups": n,
        "z_common": common,
        "sum_w": sum_w,
        "q": q,
        "df": q_df,
        "df_denominator": nu,
        "p": p,
        "i2": i2,
    }


def heterogeneity_table(
    estimates: pd.DataFrame, *, alpha: float = 0.05, adjust: str = "holm", across: tuple[str, ...] = ACROSS
) -> pd.DataFrame:
    """Cochran's Q per pair, for each comparison (across models, sizes, shot regimes) that has two groups.

    Parameters
    ----------
    estimates : DataFrame
        From :func:`group_estimates`.
    alpha : float
        Level of ``significant_heterogeneity`` (on the adjusted p-value).
    adjust : str
        :func:`gengen.stats.p_adjust` method, applied across the pairs of each cell.
    across : tuple of str
        Which comparisons: ``"model"`` (every group, within each shot regime), ``"size"`` (the sizes of a
        family, within each shot regime), ``"shots"`` (the shot regimes of one model and size).

    Returns
    -------
    DataFrame
        The columns of :data:`HETEROGENEITY_COLUMNS`, one row per comparison × cell × pair.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"model": ["a", "b", "c"], "run": "main", "testset_a": "x", "testset_b": "y",
    ...                       "r_partial": [0.5, -0.1, 0.2], "se_z": [0.15, 0.17, 0.16]})
    >>> table = heterogeneity_table(group_estimates(pairs))
    >>> table[["across", "q_heterogeneity", "df_heterogeneity", "p_heterogeneity"]].round(3)
      across  q_heterogeneity  df_heterogeneity  p_heterogeneity
    0  model            8.312                 2            0.016
    """
    return _heterogeneity_rows(_cell_matrices(estimates, across), alpha=alpha, adjust=adjust)


def _heterogeneity_rows(
    cells: list[tuple[str, str, PairMatrices]], *, alpha: float = 0.05, adjust: str = "holm"
) -> pd.DataFrame:
    """:func:`heterogeneity_table` from the cells' pair matrices (:func:`_cell_matrices`), so that the
    matrices can serve several tables."""
    from gengen.stats import p_adjust

    tables = []
    for comparison, label, matrices in cells:
        q = q_arrays(matrices.z, matrices.variance, matrices.df)
        table = matrices.index.assign(
            across=comparison,
            cell=label,
            n_groups_heterogeneity=q["n_groups"],
            groups_heterogeneity=matrices.groups_per_pair(),
            r_common_heterogeneity=np.tanh(q["z_common"]),
            q_heterogeneity=q["q"],
            df_heterogeneity=q["df"],
            df_denominator_heterogeneity=q["df_denominator"],
            p_heterogeneity=q["p"],
            i2_heterogeneity=q["i2"],
        )
        table["p_heterogeneity_adjusted"] = p_adjust(table["p_heterogeneity"].to_numpy(dtype=float), adjust)  # type: ignore[arg-type]
        table["significant_heterogeneity"] = table["p_heterogeneity_adjusted"] < alpha
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=list(HETEROGENEITY_COLUMNS))
    return pd.concat(tables, ignore_index=True)[list(HETEROGENEITY_COLUMNS)]


def pairwise_differences(
    estimates: pd.DataFrame, *, across: tuple[str, ...] = ACROSS, alpha: float = 0.05
) -> pd.DataFrame:
    """Every two groups' difference in Fisher's z per pair, Holm-adjusted across the comparisons of the pair.

    Parameters
    ----------
    estimates : DataFrame
        From :func:`group_estimates`.
    across : tuple of str
        The comparisons, as in :func:`heterogeneity_table`.
    alpha : float
        Level of ``significant_difference`` (on the adjusted p-value).

    Returns
    -------
    DataFrame
        The columns of ``DIFFERENCE_COLUMNS``: ``z_difference`` = :math:`\\hat z_a - \\hat z_b`,
        ``se_difference`` = :math:`\\sqrt{v_a + v_b}`, their ratio ``statistic``, two-sided normal
        ``p_difference`` and Holm's ``p_difference_adjusted`` over the :math:`M(M-1)/2` comparisons of the pair.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"model": ["a", "b"], "run": "main", "testset_a": "x", "testset_b": "y",
    ...                       "r_partial": [0.5, -0.3], "se_z": [0.15, 0.15]})
    >>> pairwise_differences(group_estimates(pairs))[["group_a", "group_b", "statistic", "p_difference"]].round(3)
      group_a group_b  statistic  p_difference
    0       a       b      4.049           0.0
    """
    return _difference_rows(_cell_matrices(estimates, across), alpha=alpha)


def _difference_rows(cells: list[tuple[str, str, PairMatrices]], *, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`pairwise_differences` from the cells' pair matrices (:func:`_cell_matrices`)."""
    tables = [_differences(matrices).assign(across=comparison, cell=label) for comparison, label, matrices in cells]
    tables = [table for table in tables if len(table)]
    if not tables:
        return pd.DataFrame(columns=list(DIFFERENCE_COLUMNS))
    table = pd.concat(tables, ignore_index=True)
    table["significant_difference"] = table["p_difference_adjusted"] < alpha
    return table[list(DIFFERENCE_COLUMNS)]


def _cell_matrices(estimates: pd.DataFrame, across: tuple[str, ...] = ACROSS) -> list[tuple[str, str, PairMatrices]]:
    """(comparison, cell label, the cell's :func:`pair_matrices`) for every comparison in ``across`` and each of
    its cells (:func:`comparison_cells`); an unknown comparison is an ``option across`` error."""
    out: list[tuple[str, str, PairMatrices]] = []
    for comparison in across:
        if comparison not in CELLS:
            raise InputError(f"option across: {comparison!r} is not one of {', '.join(CELLS)}")
        out.extend((comparison, label, pair_matrices(rows)) for label, rows in comparison_cells(estimates, comparison))
    return out


def _differences(matrices: PairMatrices) -> pd.DataFrame:
    """Every two groups g < h compared on each pair both can test, group pair by group pair: z difference, its
    se, the Welch–Satterthwaite df of v_g + v_h (inf when the variances are known), the two-sided p, and Holm's
    adjustment across the comparisons of each pair."""
    g_of, h_of = np.triu_indices(len(matrices.units), 1)  # the order of itertools.combinations
    comparison, pair = np.nonzero((matrices.usable[:, g_of] & matrices.usable[:, h_of]).T)
    g, h = g_of[comparison], h_of[comparison]
    z, v, nu = matrices.z, matrices.variance, matrices.df
    se = np.sqrt(v[pair, g] + v[pair, h])
    welch = satterthwaite(np.stack([v[pair, g], v[pair, h]], axis=1), np.stack([nu[pair, g], nu[pair, h]], axis=1))
    difference = z[pair, g] - z[pair, h]
    statistic = difference / se
    p = two_sided_p_array(statistic, welch)
    units = np.array(matrices.units, dtype=object)
    return pd.DataFrame(
        {
            "testset_a": matrices.index["testset_a"].to_numpy()[pair],
            "testset_b": matrices.index["testset_b"].to_numpy()[pair],
            "group_a": units[g],
            "group_b": units[h],
            "r_a": matrices.r[pair, g],
            "r_b": matrices.r[pair, h],
            "z_difference": difference,
            "se_difference": se,
            "statistic": statistic,
            "df_difference": welch,
            "p_difference": p,
            "p_difference_adjusted": holm_by_group(p, pair),
        }
    )
