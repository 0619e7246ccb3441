r"""AR-sieve bootstrap inference for the partial correlation of score *levels* (gengen's default).

The partial correlation that the paper reports, and that ppcor computes, is the correlation of the residuals of
two OOD score trajectories after the ID score has been regressed out. Across the checkpoints of one run those
residuals are autocorrelated, and the t-test of ppcor, which treats checkpoints as independent, then rejects
true nulls far too often (44% at a nominal 5% for AR(1) noise with φ = 0.9 and 50 checkpoints). This module
tests and brackets *that same quantity* honestly:

1. each test set's residual series :math:`e_j = (I - H_j) y_j` (``H_j`` the hat matrix of the control: least
   squares on ``[1, covar]``, or the GAM smoother at its selected smoothing parameters) is described by an
   autoregression AR(p_j), fitted as the dynamic regression
   :math:`e_t \sim e_{t-1}, …, e_{t-p} + [1, z_t, …, z_{t-p}]` with the order chosen by AIC;
2. the AR coefficients are corrected for their small-sample bias by simulation (generate, residualise, refit;
   twice, since the bias grows towards a unit root), kept stationary as in Kilian (1998);
3. replicate residual series are generated from the corrected AR models, driven by the AR innovations
   resampled at time points common to all test sets (so that their cross-correlation is kept), residualised
   with the same :math:`I - H_j` and correlated; *twin* replicates from the same shocks without the
   autoregression give what the resampling yields for independent checkpoints;
4. the ratio of the two variances of Fisher's :math:`z = \operatorname{artanh} r` is the variance inflation
   that the autocorrelation causes; it scales Fisher's :math:`1/(n - 3 - k)` into the standard error of
   :math:`z`, whose inverse square gives effective degrees of freedom (as Dutilleul's modified t-test does);
5. the test is Student's t of :math:`z / \mathrm{se}_z` on those degrees of freedom and the interval
   :math:`\tanh(z \mp t_{\mathrm{df}} \mathrm{se}_z)`.

With independent checkpoints the inflation is 1 and the test is Fisher's z test of ppcor's estimate on ppcor's
degrees of freedom. Because the p-value and the interval come from the same standard error and reference
distribution, the p-value is below :math:`1 - \text{level}` exactly when the interval excludes 0, and ``r``
always lies inside its interval. The calibration of this design on AR(1), AR(2), heteroskedastic, non-linear
and short-series cells is in ``docs/calibration.md`` (``gengen simulate --grid``).

References
----------
Bühlmann, P. (1997). Sieve bootstrap for time series. *Bernoulli* 3(2), 123–148.
Kilian, L. (1998). Small-sample confidence intervals for impulse response functions. *Rev. Econ. Stat.* 80(2),
218–230 (bootstrap bias correction kept stationary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import DegenerateDataError, InvalidArgumentError
from gengen.stats.controls import Control, FitArgument, Gam, Linear, keyword_control
from gengen.stats.gam import fit_gam
from gengen.stats.options import (
    DEFAULT_CI_LEVEL,
    DEFAULT_FIT,
    DEFAULT_METHOD,
    ResidualMethod,
)
from gengen.stats.sieve_ar import (
    MAX_ROOT,
    _correlations,
    _exogenous_bases,
    _innovation_spread,
    _innovations,
    _max_root,
    _shrink_to_stationary,
    default_max_order,
    fit_autoregression,
)
from gengen.stats.sieve_kernel import FactoredOperators, bias_refit_sums, factor_operators, replicate_moments
from gengen.stats.sieve_notes import (
    _ljung_box,
    _variance_ratio,
    curvature_notes,
    curvature_shift,
    gam_control_z,
    ljung_box,
    sieve_column_notes,
)
from gengen.stats.sieve_time import regular_steps, steps_array, time_innovations, training_time_model
from gengen.stats.validation import labelled, trajectory_inputs

__all__ = [
    "SIEVE_METHOD",
    "SievePartialCorrMatrix",
    "curvature_notes",
    "curvature_shift",
    "default_max_order",
    "fit_autoregression",
    "gam_control_z",
    "ljung_box",
    "sieve_column_notes",
    "sieve_partial_corr_matrix",
]

#: How the default inference is named in the pairs table (``p_sieve_method``, ``ci_method``).
SIEVE_METHOD = (
    "AR-sieve bootstrap of r_partial ({fit} control, AR order by AIC, bias-corrected, {n_boot} draws; "
    "Fisher z, t on effective df)"
)

#: Replicates used to estimate the small-sample bias of the AR coefficients, and how often it is re-evaluated.
BIAS_REPLICATES = 200
BIAS_ITERATIONS = 2

#: Most steps generated before the kept ones (see :func:`_burn_in`).
MAX_BURN_IN = 150


@dataclass(frozen=True)
class SievePartialCorrMatrix:
    """Every pair of test sets: the partial correlation of levels, its AR-sieve standard error, test and interval.

    Attributes
    ----------
    r : ndarray or DataFrame of shape (m, m)
        Partial correlations given the control (ppcor's estimate; 1 on the diagonal).
    se_z : ndarray or DataFrame of shape (m, m)
        Standard error of :math:`\\operatorname{artanh} r` from the sieve replicates.
    statistic : ndarray or DataFrame of shape (m, m)
        :math:`\\operatorname{artanh}(r) / \\mathrm{se}_z`, referred to Student's t on ``df``.
    df : ndarray or DataFrame of shape (m, m)
        Effective degrees of freedom of the t reference, :math:`1/\\mathrm{se}_z^2 + 1`: ppcor's n − 2 − k
        (under the GAM, k the larger smooth's EDF without intercept) when the checkpoints are independent,
        fewer as autocorrelation removes information.
    p_value : ndarray or DataFrame of shape (m, m)
        Two-sided p-value of ``statistic``.
    ci_low, ci_high : ndarray or DataFrame of shape (m, m)
        :math:`\\tanh(\\operatorname{artanh} r \\mp q\\, \\mathrm{se}_z)`, q the normal quantile of ``ci_level``.
    ar_order : ndarray of shape (m,)
        AR order of each test set's residuals (AIC).
    ar_coef : ndarray of shape (m, max_order)
        Bias-corrected AR coefficients used to generate (zero beyond the order).
    ljung_box_p : ndarray of shape (m,)
        Ljung–Box p-value of the AR innovations of each column (small: autocorrelation the AR model missed); on
        unevenly spaced ``steps``, of the training-time model's standardised innovations
        (:func:`gengen.stats.sieve_time.time_innovations`).
    variance_ratio : ndarray of shape (m,)
        Ratio of the innovations' standard deviation in the first third of the run to the last third (the same
        innovations as ``ljung_box_p``).
    spread_slope : ndarray of shape (m,)
        Change of the innovations' log variance over the run that the replicates follow (0: constant spread).
    time_inflation : ndarray of shape (m, m)
        Factor by which dependence in training time, on the checkpoints' actual ``steps``, inflates the variance
        of z over what the autoregression in checkpoint index gives (:func:`gengen.stats.sieve_time.gap_inflation`;
        exactly 1 when the checkpoints are evenly spaced or their steps were not given).
    n, k, n_boot, max_order : int
    ci_level : float
    method, fit : str
    inference : str
        Always "sieve".
    """

    r: NDArray[np.float64] | pd.DataFrame
    se_z: NDArray[np.float64] | pd.DataFrame
    statistic: NDArray[np.float64] | pd.DataFrame
    df: NDArray[np.float64] | pd.DataFrame
    p_value: NDArray[np.float64] | pd.DataFrame
    ci_low: NDArray[np.float64] | pd.DataFrame
    ci_high: NDArray[np.float64] | pd.DataFrame
    ar_order: NDArray[np.int64]
    ar_coef: NDArray[np.float64]
    ljung_box_p: NDArray[np.float64]
    variance_ratio: NDArray[np.float64]
    spread_slope: NDArray[np.float64]
    time_inflation: NDArray[np.float64]
    n: int
    k: int
    n_boot: int
    max_order: int
    ci_level: float
    method: str
    fit: str
    inference: str = field(default="sieve")


# ----------------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------------


def _burn_in(coef: NDArray[np.float64]) -> int:
    """Steps to run before the kept ones: until a start's influence has decayed below 1%, at most 150.

    Every series also starts from its model's stationary distribution, so the burn-in only lets the shared
    resampled shocks build up the series' cross-correlation; 150 steps keep over 95% of it even at the largest
    root allowed.
    """
    root = float(_max_root(coef).max(initial=0.0))
    if root < 1e-3:
        return coef.shape[1]
    return int(min(MAX_BURN_IN, math.ceil(math.log(0.01) / math.log(root)) + coef.shape[1]))


def _bias_corrected(
    e: NDArray[np.float64],
    order: NDArray[np.int64],
    coef: NDArray[np.float64],
    operators: FactoredOperators,
    control: NDArray[np.float64] | None,
    rng: np.random.Generator,
    replicates: int,
) -> NDArray[np.float64]:
    """Subtract the simulated small-sample bias of each column's AR coefficients, then keep them stationary.

    The bias is that of the whole pipeline — generate an AR(p) series, residualise it on the control, refit
    AR(p) — so the degrees of freedom the control spends (which bias the coefficients further down) are
    accounted for. When the corrected model is not stationary, the correction is scaled back step by step as in
    Kilian (1998); what is still too persistent is shrunk to roots of modulus :data:`MAX_ROOT`.
    """
    m, n = e.shape
    max_order = coef.shape[1]
    point = _shrink_to_stationary(coef)
    exogenous = _exogenous_bases(control, n, max_order)
    refitted = np.arange(max_order)[None, :] < order[:, None]  # each column's own coefficients
    buffer = np.empty(replicates * m * (n + MAX_BURN_IN + max_order))
    for _ in range(BIAS_ITERATIONS):
        # The bias grows as the coefficients approach a unit root, so it is evaluated again at the corrected
        # point (one step of the fixed-point iteration φ = φ̂ − bias(φ)).
        burn = _burn_in(point)
        # Drawn into one buffer for both iterations (the same numbers as a fresh array, without its page faults).
        shocks = buffer[: replicates * m * (burn + n)].reshape(replicates, m, burn + n)
        rng.standard_normal(out=shocks)
        start = _stationary_draws(_stationary_start(point, np.ones(m)), rng, replicates)
        # Generate AR(max_order) series from the point, residualise them, refit AR(p) of each column's order
        # with the control's current and lagged values (gengen._core.sieve_bias_refit).
        refit = bias_refit_sums(point, order, shocks, start, operators, exogenous) / replicates
        corrected = np.where(refitted, coef - (refit - point), coef)
        # Kilian's step-down: keep as much of the correction as stationarity allows.
        for _ in range(20):
            unstable = _max_root(corrected) > MAX_ROOT
            if not unstable.any():
                break
            corrected[unstable] = 0.5 * (corrected[unstable] + coef[unstable])
        point = _shrink_to_stationary(corrected)
    return point


def _stationary_start(coef: NDArray[np.float64], variance: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cholesky factors (m, p, p) of the stationary covariance of p consecutive values of each AR model."""
    m, p = coef.shape
    if p == 0:
        return np.zeros((m, p, p))
    companion = np.zeros((m, p, p))
    companion[:, 0] = coef
    companion[:, np.arange(1, p), np.arange(p - 1)] = 1.0
    noise = np.zeros((m, p * p, 1))
    noise[:, 0, 0] = variance
    # Γ = A Γ Aᵀ + Σ, solved as (I − A⊗A) vec Γ = vec Σ (p ≤ 4, so the Kronecker systems are tiny), all
    # series at once.
    kronecker = np.einsum("mij,mkl->mikjl", companion, companion).reshape(m, p * p, p * p)
    gamma = np.linalg.solve(np.eye(p * p) - kronecker, noise).reshape(m, p, p)
    gamma = 0.5 * (gamma + gamma.transpose(0, 2, 1)) + 1e-12 * variance[:, None, None] * np.eye(p)
    return np.asarray(np.linalg.cholesky(gamma), dtype=np.float64)


def _stationary_draws(factors: NDArray[np.float64], rng: np.random.Generator, size: int) -> NDArray[np.float64] | None:
    """``size`` Gaussian draws (size, m, p) of p consecutive values of each stationary AR model, oldest first,
    from the Cholesky factors (m, p, p) of :func:`_stationary_start`."""
    if factors.shape[1] == 0:
        return None
    normal = rng.standard_normal((size, factors.shape[0], factors.shape[1]))
    # The state vector is (x_t, x_{t-1}, …): reversed, it is in time order.
    return np.einsum("mij,bmj->bmi", factors, normal)[..., ::-1]


def _ranks(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Average ranks of each column (ties share their mean rank), as Spearman's correlation uses."""
    return pd.DataFrame(values).rank(method="average").to_numpy(dtype=np.float64)


def _operators(
    data: NDArray[np.float64],
    control: NDArray[np.float64],
    fit: Control,
) -> tuple[NDArray[np.float64], FactoredOperators, NDArray[np.float64]]:
    """Residuals (n, m), the residual operators I − H in factored form (sieve_kernel) and the EDF (m,)."""
    n, m = data.shape
    if isinstance(fit, Linear):
        # One projection shared by every column: I − Q Qᵀ, Q an orthonormal basis of [1, covar].
        design = np.column_stack([np.ones(n), control])
        q, _ = np.linalg.qr(design)
        basis = np.ascontiguousarray(q)
        mix = np.repeat(np.eye(basis.shape[1])[None], m, axis=0)
        return data - basis @ (basis.T @ data), FactoredOperators(basis, mix), np.full(m, float(design.shape[1]))
    fit_result = fit_gam(data, control, fit)
    lam = np.atleast_2d(np.asarray(fit_result.lam, dtype=np.float64))
    operators = np.empty((m, n, n))
    identity = np.eye(n)
    for j in range(m):
        # At fixed smoothing parameters the GAM is linear in y: its fitted values of the identity are H_j.
        smoother = fit_gam(identity, control, fit, lam=lam[j]).fitted
        operators[j] = identity - smoother
    # I − U M_j Uᵀ with U spanning every fit: the replicates never form an n × n product (sieve_kernel).
    factored = factor_operators(operators, m)
    return np.asarray(fit_result.residuals), factored, np.atleast_1d(np.asarray(fit_result.edf, dtype=np.float64))


def sieve_partial_corr_matrix(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    method: ResidualMethod = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    n_boot: int = 999,
    ci_level: float = DEFAULT_CI_LEVEL,
    max_order: int | None = None,
    seed: int = 0,
    steps: ArrayLike | None = None,
    **gam_options: Any,
) -> SievePartialCorrMatrix:
    r"""Partial correlations of every pair of test sets, with AR-sieve standard errors, tests and intervals.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint, in training order.
    covar : array_like of shape (n,) or (n, q), optional
        The control (e.g. the in-domain score), in the same order.
    method : {"pearson", "spearman"}
        Spearman ranks every column (and the control) first.
    fit : Linear, Gam, "linear" or "gam"
        The control: least squares on ``[1, covar]``, or a penalised regression spline of each control (mgcv's
        ``s(z, k = k, bs = "cr")``, GCV), whose smoother at the selected smoothing parameters is applied to
        every replicate.
    n_boot : int
        Sieve replicates (the standard error's relative precision is about :math:`1/\sqrt{2 B}`).
    ci_level : float
        Level of the interval.
    max_order : int, optional
        Highest AR order (default :func:`default_max_order` of n).
    seed : int
        Seed of the replicates; the result does not depend on anything else.
    steps : array_like of shape (n,), optional
        The checkpoints' training steps, increasing. Where they are unevenly spaced (log-spaced, dense early),
        the variance of z is corrected for noise that is autocorrelated in training steps rather than in
        checkpoint index (:mod:`gengen.stats.sieve_time`); evenly spaced steps, or none, leave it as it is.
    **gam_options
        Deprecated: ``k``, ``gam_method``, ``gam_basis``, ``max_edf`` with ``fit="gam"``; pass
        ``fit=Gam(...)`` instead (a ``FutureWarning`` says which; the GAM's cap applies to each smooth).

    Returns
    -------
    SievePartialCorrMatrix
        The partial correlations, their sieve standard errors, p-values and intervals, and the AR fits.

    Notes
    -----
    With :math:`e_j = (I - H_j) y_j` the residuals of test set j,
    :math:`r_{ab} = \mathrm{corr}(e_a, e_b)` is ppcor's partial correlation. Each :math:`e_j` is described by
    an AR(:math:`p_j`) model (order by AIC up to ``max_order``, coefficients bias-corrected by simulation).
    Replicates :math:`e_j^* = (I - H_j) u_j^*`, with :math:`u_j^*` generated from that model driven by the
    AR innovations resampled at time points common to all test sets, give :math:`z^*_{ab}`; twin replicates
    :math:`(I - H_j) \varepsilon_j^*` from the same shocks give :math:`w^*_{ab}`. Then

    .. math::

        \mathrm{se}_z^2 = \frac{\operatorname{Var} z^*_{ab} / \operatorname{Var} w^*_{ab}}{n - 3 - k}, \qquad
        \nu = 1/\mathrm{se}_z^2 + 1, \qquad
        T = \frac{\operatorname{artanh}(r_{ab})}{\mathrm{se}_z}, \qquad p = 2\,P(T_\nu > |T|),

    and the interval is :math:`\tanh\bigl(\operatorname{artanh}(r_{ab}) \mp t_{\nu, (1+\text{level})/2}\,
    \mathrm{se}_z\bigr)`. Given unevenly spaced ``steps``, the variance ratio is multiplied by the training-time
    correction of :func:`gengen.stats.sieve_time.gap_inflation` (where it exceeds 1) before the floor at 1.
    With independent checkpoints the variance ratio is 1, so that
    :math:`\mathrm{se}_z = 1/\sqrt{n - 3 - k}` (Fisher's) and :math:`\nu = n - 2 - k` (ppcor's).

    References
    ----------
    Bühlmann, P. (1997). Sieve bootstrap for time series. *Bernoulli* 3(2), 123–148.
    Kilian, L. (1998). *Rev. Econ. Stat.* 80(2), 218–230.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats.sieve import sieve_partial_corr_matrix
    >>> rng = np.random.default_rng(0)
    >>> id_score = np.linspace(0.5, 0.9, 60)
    >>> noise = np.cumsum(rng.normal(0, 0.01, (60, 3)), axis=0)
    >>> result = sieve_partial_corr_matrix(id_score[:, None] + noise, id_score, n_boot=199, seed=1)
    >>> bool(result.ci_low[0, 1] <= result.r[0, 1] <= result.ci_high[0, 1])
    True
    >>> bool((result.p_value[0, 1] < 0.05) == (result.ci_low[0, 1] > 0 or result.ci_high[0, 1] < 0))
    True
    """
    gam = keyword_control(fit, gam_options)
    data, control, labels = _inputs(scores, covar, method, gam)
    n_boot, max_order = _checked_sizes(data.shape[0], control.shape[1], n_boot, ci_level, max_order)
    n = data.shape[0]
    step_values = steps_array(steps, n)
    series, operators, df = _unit_residuals(data, control, gam)
    r = _correlations(series)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x51E7E]))
    exogenous = control if control.shape[1] else None
    order, coef = fit_autoregression(series.T, max_order, exogenous)
    coef = _bias_corrected(series, order, coef, operators, exogenous, rng, BIAS_REPLICATES)
    innovations = _innovations(series, coef, max_order, exogenous)  # (m, T), common time points t = max_order … n − 1
    innovations = innovations - innovations.mean(axis=1, keepdims=True)
    time_inflation, time_fits = _time_inflation(series, step_values, operators)
    lags = min(10, max(innovations.shape[1] // 5, 2))
    ljung_box_p = _ljung_box(innovations, lags=lags, fitted_order=order)
    variance_ratio = _variance_ratio(innovations)
    if not regular_steps(step_values):
        # On uneven steps the diagnostics ask what the training-time model (whose correction the variance
        # carries) leaves: the index AR's innovations shrink where checkpoints are dense and grow where they
        # are sparse, which is not a failure of that model.
        assert step_values is not None
        standardised = time_innovations(series, step_values, time_fits)[:, max_order:]
        ljung_box_p = _ljung_box(standardised, lags=lags, fitted_order=1)
        variance_ratio = _variance_ratio(standardised)
    variances, spread_slope = _replicate_variances(coef, innovations, operators, n, n_boot, rng)
    se_z, df_effective, statistic, p_value, ci_low, ci_high = _tests(r, variances, df, ci_level, time_inflation)
    return SievePartialCorrMatrix(
        r=labelled(r, labels),
        se_z=labelled(se_z, labels),
        statistic=labelled(statistic, labels),
        df=labelled(df_effective, labels),
        p_value=labelled(p_value, labels),
        ci_low=labelled(ci_low, labels),
        ci_high=labelled(ci_high, labels),
        ar_order=order,
        ar_coef=coef,
        ljung_box_p=ljung_box_p,
        variance_ratio=variance_ratio,
        spread_slope=spread_slope,
        time_inflation=time_inflation,
        n=n,
        k=control.shape[1],
        n_boot=n_boot,
        max_order=max_order,
        ci_level=float(ci_level),
        method=method,
        fit=gam.name,
    )


def _checked_sizes(n: int, controls: int, n_boot: int, ci_level: float, max_order: int | None) -> tuple[int, int]:
    """The sieve's sizes checked (replicates, level, AR order against the ``n`` checkpoints and the number of
    controls): (n_boot, max_order)."""
    n_boot = int(n_boot)
    if n_boot < 20:
        raise InvalidArgumentError(f"n_boot: need at least 20 sieve replicates for a standard error, got {n_boot}")
    if n_boot > 1_000_000:
        raise InvalidArgumentError(f"n_boot: at most 1,000,000 sieve replicates, got {n_boot}")
    if not 0.0 < ci_level < 1.0:
        raise InvalidArgumentError(f"ci_level: must lie strictly between 0 and 1, got {ci_level!r}")
    max_order = default_max_order(n) if max_order is None else int(max_order)
    if controls + 1 + max_order + 4 > n:
        raise InvalidArgumentError(
            f"scores: {n} checkpoints are too few for the sieve with {controls} control(s) and AR order "
            f"up to {max_order} (need at least {controls + 5 + max_order})"
        )
    return n_boot, max_order


def _unit_residuals(
    data: NDArray[np.float64], control: NDArray[np.float64], gam: Control
) -> tuple[NDArray[np.float64], FactoredOperators, NDArray[np.float64]]:
    """Each test set's residual series at unit length (m, n), the residual operators the replicates are
    residualised with, and the degrees of freedom of each pair's t-test (m, m)."""
    n = data.shape[0]
    residuals, operators, edf = _operators(data, control, gam)
    # Degrees of freedom of each pair's t-test as ppcor counts them (n − 2 − k; under the GAM, k = the larger
    # smooth's EDF without its intercept), so that with independent checkpoints the test is ppcor's.
    spent = edf - 1.0
    df = n - 2.0 - np.maximum(spent[:, None], spent[None, :])
    series = residuals.T.copy()  # (m, n)
    scale = np.sqrt((series**2).sum(axis=1))
    flat = scale <= 1e-12 * (np.abs(data).max(axis=0) * math.sqrt(n) + 1e-300)
    if flat.any():
        raise DegenerateDataError(
            f"scores: column {int(np.flatnonzero(flat)[0])} is fully explained by the control (zero residuals); "
            "its partial correlations are undefined"
        )
    series = series / scale[:, None]
    return series, operators, df


def _replicate_variances(
    coef: NDArray[np.float64],
    innovations: NDArray[np.float64],
    operators: FactoredOperators,
    n: int,
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[list[NDArray[np.float64]], NDArray[np.float64]]:
    """Variances of Fisher's z over the AR replicates and over their white twins (m, m each), and the slope of
    the innovations' spread that the replicates follow."""
    m, max_order = coef.shape[0], coef.shape[1]
    variance = innovations.var(axis=1)
    # The innovations' spread along the run (log-linear in training time): shocks are resampled standardised and
    # given the spread of the time point they drive, so a run whose noise shrinks as training goes on keeps that.
    spread, spread_slope = _innovation_spread(innovations, n, max_order)
    pool = innovations / spread[:, max_order:]
    burn = _burn_in(coef)
    spread_path = np.concatenate([np.repeat(spread[:, :1], burn, axis=1), spread], axis=1)  # (m, burn + n)
    moments = np.zeros((4, m, m))  # sums of z and z² for the AR replicates and for their white twins
    factors = _stationary_start(coef, variance)
    chunk = max(1, min(n_boot, int(2e6 // max(m * (n + burn), 1))))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        # One set of time points for every test set: the replicates keep the innovations' cross-correlation.
        picks = rng.integers(0, pool.shape[1], size=(size, burn + n))
        start = _stationary_draws(factors, rng, size)
        # AR replicates driven by the standardised shocks pool[:, picks] times the spread, and their white twins
        # (the same shocks without autoregression or changing spread: what this resampling gives for
        # independent, identically distributed checkpoints), residualised; only the sums of z and z² come back.
        moments += replicate_moments(coef, pool, picks, spread_path, start, operators)
        done += size
    variances = [np.maximum(moments[slot + 1] - moments[slot] ** 2 / n_boot, 0.0) / (n_boot - 1) for slot in (0, 2)]
    return variances, spread_slope


def _time_inflation(
    series: NDArray[np.float64], steps: NDArray[np.float64] | None, operators: FactoredOperators
) -> tuple[NDArray[np.float64], list[tuple[float, float]] | None]:
    """The training-time correction of every pair (m, m), 1 unless the steps are uneven (sieve_time), and the
    series' training-time fits (None when not needed)."""
    m = series.shape[0]
    if regular_steps(steps) or m < 2:
        return np.ones((m, m)), None
    assert steps is not None
    return training_time_model(series, steps, operators.basis, operators.mix)


def _tests(
    r: NDArray[np.float64],
    variances: list[NDArray[np.float64]],
    df: NDArray[np.float64],
    ci_level: float,
    time_inflation: NDArray[np.float64],
) -> tuple[NDArray[np.float64], ...]:
    """se_z, effective df, statistic, p-value and interval bounds of every pair (m, m each), from the variance
    inflation of the replicates over their white twins."""
    m = r.shape[0]
    # The variance inflation that the autocorrelation causes, measured as a ratio between twin replicates so
    # that the resampling's own small-sample error cancels, scales Fisher's 1/(n − 3 − k).
    with np.errstate(divide="ignore", invalid="ignore"):
        inflation = np.where(variances[1] > 0, variances[0] / variances[1], np.nan)
        # The autoregression lives in checkpoint index; on unevenly spaced checkpoints the dependence in training
        # time adds what the index cannot see (gengen.stats.sieve_time). It never removes what the index measured:
        # on noise that is autocorrelated in the index (not in steps) a factor below 1 made 0.13 of null pairs
        # reject at 0.05 at 40 log-spaced checkpoints (benches/power_pair_null.py --steps-check).
        inflation = inflation * np.maximum(time_inflation, 1.0)
        # Never more information than independent checkpoints: a negative AR estimate on short, white residuals
        # is far more often chance than real, and would shrink the standard error below Fisher's.
        inflation = np.maximum(inflation, 1.0)
        se_z = np.sqrt(inflation / np.maximum(df - 1.0, 1e-300))
        # Effective degrees of freedom: n − 2 − k with independent checkpoints (then the test is ppcor's), fewer
        # as the autocorrelation leaves less information (Dutilleul's modified t-test does the same).
        df_effective = np.where(se_z > 0, 1.0 / se_z**2 + 1.0, np.nan)
    np.fill_diagonal(se_z, 0.0)
    np.fill_diagonal(df_effective, np.nan)
    z_obs = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.where(se_z > 0, z_obs / se_z, np.nan)
    p_value = np.full((m, m), np.nan)
    quantile = np.full((m, m), np.nan)
    with np.errstate(invalid="ignore"):
        tested = np.isfinite(statistic) & (df_effective > 0)
    np.fill_diagonal(tested, False)
    p_value[tested] = _core.t_two_sided_array(statistic[tested], df_effective[tested])
    # The quantile depends on the degrees of freedom alone (the same for (a, b) and (b, a)).
    distinct, inverse = np.unique(df_effective[tested], return_inverse=True)
    quantile[tested] = _core.t_quantile_array(0.5 + ci_level / 2, distinct)[inverse]
    ci_low = np.tanh(z_obs - quantile * se_z)
    ci_high = np.tanh(z_obs + quantile * se_z)
    np.fill_diagonal(r, 1.0)
    for matrix in (statistic, p_value):
        np.fill_diagonal(matrix, np.nan)
    np.fill_diagonal(ci_low, 1.0)
    np.fill_diagonal(ci_high, 1.0)
    return se_z, df_effective, statistic, p_value, ci_low, ci_high


def _inputs(
    scores: ArrayLike, covar: ArrayLike | None, method: str, fit: Control
) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str] | None]:
    """The checks of every test of trajectories, plus what the sieve needs on top: finite values, two test sets;
    the data (and the control) ranked for Spearman."""
    data, control, labels = trajectory_inputs(scores, covar, method)
    if data.shape[1] < 2:
        raise InvalidArgumentError(f"scores: need at least two test sets (columns), got {data.shape[1]}")
    for name, values in (("scores", data), ("covar", control)):
        if not np.isfinite(values).all():
            raise InvalidArgumentError(f"{name}: must be finite (no NaN or infinity)")
    if isinstance(fit, Gam) and control.shape[1] == 0:
        raise InvalidArgumentError('covar: fit="gam" needs at least one control column')
    if method == "spearman":
        data = _ranks(data)
        control = _ranks(control) if control.shape[1] else control
    return data, control, labels
