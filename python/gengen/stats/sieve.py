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
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import DegenerateDataError, GengenError, InvalidArgumentError
from gengen.stats.controls import Control, FitArgument, Gam, Linear, as_control
from gengen.stats.gam import fit_gam, gam_fit
from gengen.stats.options import (
    DEFAULT_CI_LEVEL,
    DEFAULT_FIT,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_METHOD,
    GamMaxEdf,
    ResidualMethod,
)
from gengen.stats.validation import labelled, trajectory_inputs

__all__ = [
    "SIEVE_METHOD",
    "SievePartialCorrMatrix",
    "curvature_notes",
    "curvature_shift",
    "default_max_order",
    "fit_autoregression",
    "ljung_box",
    "sieve_column_notes",
    "sieve_partial_corr_matrix",
]

#: How the default inference is named in the pairs table (``p_sieve_method``, ``ci_method``).
SIEVE_METHOD = (
    "AR-sieve bootstrap of r_partial ({fit} control, AR order by AIC, bias-corrected, {n_boot} draws; "
    "Fisher z, t on effective df)"
)

#: Largest modulus of an AR model's roots that the bootstrap generates from: a unit root (a random walk) has no
#: stationary distribution, and a root this close to 1 already behaves like one over a few hundred checkpoints.
MAX_ROOT = 0.99

#: Slopes of the innovations' log variance within this many standard errors of 0 are taken as 0.
SPREAD_SHRINK = 0.5

#: Replicates used to estimate the small-sample bias of the AR coefficients, and how often it is re-evaluated.
BIAS_REPLICATES = 200
BIAS_ITERATIONS = 2


def default_max_order(n: int) -> int:
    """Highest AR order the sieve considers for ``n`` checkpoints: ⌊n/10⌋ clamped to [1, 4].

    Short series cannot support more lags (each costs one observation and one degree of freedom); AR(4)
    already describes smooth, slowly wandering residuals of a few hundred checkpoints.

    Parameters
    ----------
    n : int
        Number of checkpoints.

    Returns
    -------
    int
        The highest AR order.

    Examples
    --------
    >>> [default_max_order(n) for n in (8, 15, 25, 50, 200)]
    [1, 1, 2, 4, 4]
    """
    return int(min(4, max(1, n // 10)))


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
        Ljung–Box p-value of the AR innovations of each column (small: autocorrelation the AR model missed).
    variance_ratio : ndarray of shape (m,)
        Ratio of the innovations' standard deviation in the first third of the run to the last third.
    spread_slope : ndarray of shape (m,)
        Change of the innovations' log variance over the run that the replicates follow (0: constant spread).
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
    n: int
    k: int
    n_boot: int
    max_order: int
    ci_level: float
    method: str
    fit: str
    inference: str = field(default="sieve")


# ----------------------------------------------------------------------------------------------------------
# Autoregressions
# ----------------------------------------------------------------------------------------------------------


def _lagged_design(e: NDArray[np.float64], order: int, start: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Response e[start:] and its ``order`` lags, for every column at once: shapes (..., T) and (..., T, order)."""
    n = e.shape[-1]
    target = e[..., start:]
    lags = np.stack([e[..., start - i : n - i] for i in range(1, order + 1)], axis=-1)
    return target, lags


def _exogenous_basis(control: NDArray[np.float64] | None, n: int, lags: int, start: int) -> NDArray[np.float64]:
    """Orthonormal basis (T, q) of [1, Z_t, Z_{t−1}, …, Z_{t−lags}] on rows t = start … n − 1."""
    columns = [np.ones(n - start)]
    if control is not None:
        for i in range(lags + 1):
            columns.extend(control[start - i : n - i, c] for c in range(control.shape[1]))
    design = np.column_stack(columns)
    u, singular, _ = np.linalg.svd(design, full_matrices=False)
    keep = singular > 1e-10 * singular[0]
    return u[:, keep]


def _project_out(values: NDArray[np.float64], basis: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
    """``values`` with their component in span(basis) removed along ``axis`` (the time axis)."""
    moved = np.moveaxis(values, axis, -1)
    cleaned = moved - (moved @ basis) @ basis.T
    return np.moveaxis(cleaned, -1, axis)


def _least_squares_ar(
    e: NDArray[np.float64], order: int, start: int, control: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AR(order) coefficients of each series (time on the last axis) in the dynamic regression
    e_t ~ [e_{t−1}, …, e_{t−order}] + [1, Z_t, …, Z_{t−order}], and the residual sums of squares.

    The control's current and lagged values enter the regression (as in the lagged test) instead of being
    projected out beforehand: a projection on a smooth learning curve absorbs the slow wander of a nearly
    integrated series and biases its coefficient far below 1, whereas in the dynamic regression the bias is
    the usual, small O(1/n) one that the simulation step removes.
    """
    basis = _exogenous_basis(control, e.shape[-1], order, start)
    target = _project_out(e[..., start:], basis, -1)
    if order == 0:
        return np.zeros((*e.shape[:-1], 0)), (target**2).sum(axis=-1)
    _, lags = _lagged_design(e, order, start)
    lags = _project_out(lags, basis, -2)
    gram = np.einsum("...ti,...tj->...ij", lags, lags)
    rhs = np.einsum("...ti,...t->...i", lags, target)
    # A tiny ridge keeps exactly collinear lags (a constant stretch) solvable; it is far below any real signal.
    scale = np.trace(gram, axis1=-2, axis2=-1)[..., None, None] / max(order, 1)
    gram = gram + 1e-13 * (scale + 1e-300) * np.eye(order)
    coef = np.linalg.solve(gram, rhs[..., None])[..., 0]
    residual = target - np.einsum("...ti,...i->...t", lags, coef)
    return coef, (residual**2).sum(axis=-1)


def fit_autoregression(
    residuals: ArrayLike, max_order: int | None = None, control: ArrayLike | None = None
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    r"""AR order by AIC and least-squares coefficients of each column of ``residuals``.

    Parameters
    ----------
    residuals : array_like of shape (n,) or (n, m)
        Series in time order (residuals of the control, or any zero-mean series).
    max_order : int, optional
        Highest order considered (default :func:`default_max_order`).
    control : array_like of shape (n,) or (n, q), optional
        Controls whose current and lagged values enter each regression (an intercept always does).

    Returns
    -------
    order : ndarray of int, shape (m,)
        The AIC-selected order of each column.
    coef : ndarray of shape (m, max_order)
        :math:`\phi_1 … \phi_p` of :math:`e_t = \sum_i \phi_i e_{t-i} + \gamma^\top [1, z_t, …, z_{t-p}] +
        \varepsilon_t`, zero beyond ``order``.

    Notes
    -----
    Every order is fitted on the same observations t = max_order … n − 1, so that
    :math:`\mathrm{AIC}(p) = T \log(\mathrm{RSS}_p / T) + 2 p (1 + q)` compares like with like.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> e = np.zeros(400)
    >>> for t in range(1, 400):
    ...     e[t] = 0.8 * e[t - 1] + rng.normal()
    >>> order, coef = fit_autoregression(e - e.mean(), max_order=3)
    >>> int(order[0]), round(float(coef[0, 0]), 2)
    (1, 0.79)
    """
    e = np.asarray(residuals, dtype=np.float64)
    if e.ndim == 1:
        e = e[:, None]
    series = e.T  # (m, n): time on the last axis
    n = series.shape[1]
    exogenous = None if control is None else np.asarray(control, dtype=np.float64).reshape(n, -1)
    q = 0 if exogenous is None else exogenous.shape[1]
    max_order = default_max_order(n) if max_order is None else int(max_order)
    if max_order < 0 or max_order > n - 3:
        raise InvalidArgumentError(f"max_order: must lie in [0, {n - 3}] for {n} observations, got {max_order}")
    count = n - max_order
    best_aic = np.full(series.shape[0], np.inf)
    order = np.zeros(series.shape[0], dtype=np.int64)
    coef = np.zeros((series.shape[0], max_order))
    for p in range(max_order + 1):
        phi, rss = _least_squares_ar(series, p, max_order, exogenous)
        with np.errstate(divide="ignore"):
            aic = count * np.log(np.maximum(rss, 1e-300) / count) + 2 * p * (1 + q)
        better = aic < best_aic - 1e-12
        best_aic = np.where(better, aic, best_aic)
        order = np.where(better, p, order)
        if p:
            coef[better] = 0.0
            coef[better, :p] = phi[better]
    return order, coef


def _max_root(coef: NDArray[np.float64]) -> NDArray[np.float64]:
    """Largest modulus of the roots of each AR model (eigenvalues of the companion matrix); shape coef.shape[:-1]."""
    p = coef.shape[-1]
    flat = coef.reshape(-1, p)
    if p == 0:
        return np.zeros(coef.shape[:-1])
    companion = np.zeros((flat.shape[0], p, p))
    companion[:, 0, :] = flat
    companion[:, np.arange(1, p), np.arange(p - 1)] = 1.0
    return np.abs(np.linalg.eigvals(companion)).max(axis=1).reshape(coef.shape[:-1])


def _shrink_to_stationary(coef: NDArray[np.float64]) -> NDArray[np.float64]:
    """Scale each model's roots so that none exceeds :data:`MAX_ROOT` in modulus (φ_i → φ_i c^i moves every
    root by c)."""
    limit = MAX_ROOT
    root = _max_root(coef)
    factor = np.where(root > limit, limit / np.maximum(root, 1e-300), 1.0)
    powers = np.arange(1, coef.shape[-1] + 1)
    return coef * factor[..., None] ** powers


def _innovations(
    e: NDArray[np.float64], coef: NDArray[np.float64], start: int, control: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """Innovations of each series (m, n) for t = start … n − 1: e_t − Σ φ_i e_{t−i}, with the control's current
    and lagged values (up to the largest order) projected out; shape (m, n − start)."""
    basis = _exogenous_basis(control, e.shape[-1], coef.shape[1], start)
    if coef.shape[1] == 0:
        return _project_out(e[:, start:], basis, -1)
    target, lags = _lagged_design(e, coef.shape[1], start)
    return _project_out(target - np.einsum("mti,mi->mt", lags, coef), basis, -1)


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
    return int(min(150, math.ceil(math.log(0.01) / math.log(root)) + coef.shape[1]))


def _generate(
    coef: NDArray[np.float64], shocks: NDArray[np.float64], n: int, start: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """AR series driven by ``shocks`` (replicates, m, T), returning the last ``n`` steps, shape (replicates, m, n).

    ``coef`` is (m, p); ``start`` (replicates, m, p) gives the p values before the first shock, oldest first
    (zeros when omitted). The recursion runs in the Rust core, one series per task.
    """
    initial = np.zeros((0, 0, 0)) if start is None or coef.shape[1] == 0 else np.ascontiguousarray(start)
    return _core.ar_generate(np.ascontiguousarray(coef), np.ascontiguousarray(shocks), initial, n)


def _residualise(series: NDArray[np.float64], operators: NDArray[np.float64]) -> NDArray[np.float64]:
    """Apply each column's residual operator (m, n, n) (or one shared (n, n)) to series (..., m, n)."""
    if operators.ndim == 2:
        return series @ operators.T
    return np.einsum("mst,...mt->...ms", operators, series)


def _bias_corrected(
    e: NDArray[np.float64],
    order: NDArray[np.int64],
    coef: NDArray[np.float64],
    operators: NDArray[np.float64],
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
    for _ in range(BIAS_ITERATIONS):
        # The bias grows as the coefficients approach a unit root, so it is evaluated again at the corrected
        # point (one step of the fixed-point iteration φ = φ̂ − bias(φ)).
        burn = _burn_in(point)
        shocks = rng.standard_normal((replicates, m, burn + n))
        simulated = _residualise(
            _generate(point, shocks, n, _stationary_draws(point, np.ones(m), rng, replicates)), operators
        )
        corrected = coef.copy()
        for p in np.unique(order):
            if p == 0:
                continue
            columns = np.flatnonzero(order == p)
            refit, _ = _least_squares_ar(simulated[:, columns, :], int(p), max_order, control)
            bias = refit.mean(axis=0) - point[columns, :p]
            corrected[columns, :p] = coef[columns, :p] - bias
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
    factors = np.zeros((m, p, p))
    if p == 0:
        return factors
    for j in range(m):
        companion = np.zeros((p, p))
        companion[0] = coef[j]
        companion[np.arange(1, p), np.arange(p - 1)] = 1.0
        noise = np.zeros((p, p))
        noise[0, 0] = variance[j]
        # Γ = A Γ Aᵀ + Σ, solved as (I − A⊗A) vec Γ = vec Σ (p ≤ 4, so the Kronecker system is tiny).
        system = np.eye(p * p) - np.kron(companion, companion)
        gamma = np.linalg.solve(system, noise.ravel()).reshape(p, p)
        gamma = 0.5 * (gamma + gamma.T) + 1e-12 * variance[j] * np.eye(p)
        factors[j] = np.linalg.cholesky(gamma)
    return factors


def _stationary_draws(
    coef: NDArray[np.float64], variance: NDArray[np.float64], rng: np.random.Generator, size: int
) -> NDArray[np.float64] | None:
    """``size`` Gaussian draws (size, m, p) of p consecutive values of each stationary AR model, oldest first."""
    if coef.shape[1] == 0:
        return None
    factors = _stationary_start(coef, variance)
    normal = rng.standard_normal((size, coef.shape[0], coef.shape[1]))
    # The state vector is (x_t, x_{t-1}, …): reversed, it is in time order.
    return np.einsum("mij,bmj->bmi", factors, normal)[..., ::-1]


# ----------------------------------------------------------------------------------------------------------
# Diagnostics
# ----------------------------------------------------------------------------------------------------------


def ljung_box(innovations: ArrayLike, lags: int, fitted_order: ArrayLike | int = 0) -> NDArray[np.float64]:
    r"""Ljung–Box portmanteau p-value of each row of ``innovations`` (series on the last axis).

    :math:`Q = T(T + 2) \sum_{h=1}^{H} \hat\rho_h^2 / (T - h)`, referred to :math:`\chi^2_{H - p}` with p the
    AR order already fitted (at least one degree of freedom is kept).

    Parameters
    ----------
    innovations : array_like of shape (T,) or (m, T)
        The series, time on the last axis.
    lags : int
        Number of autocorrelations H in the statistic.
    fitted_order : array_like of int or int
        AR order p already fitted to each series.

    Returns
    -------
    ndarray
        The p-value of each series.

    References
    ----------
    Ljung, G. M., Box, G. E. P. (1978). On a measure of lack of fit in time series models. *Biometrika* 65(2),
    297–303.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> white = rng.normal(size=(1, 200))
    >>> bool(ljung_box(white, 10)[0] > 0.05)
    True
    """
    count = int(np.shape(innovations)[-1]) if np.ndim(innovations) else 0
    if isinstance(lags, bool) or not isinstance(lags, (int, np.integer)) or lags < 1:
        raise InvalidArgumentError(f"lags: expected an integer >= 1, got {lags!r}")
    if lags > count - 2:
        raise InvalidArgumentError(
            f"lags: {lags} autocorrelations need at least {lags + 2} points per series, got {count}"
        )
    return _ljung_box(innovations, int(lags), fitted_order)


def _ljung_box(innovations: ArrayLike, lags: int, fitted_order: ArrayLike | int = 0) -> NDArray[np.float64]:
    """:func:`ljung_box` without its checks: ``lags`` is cut to the series' length minus 2 (the sieve's own use)."""
    x = np.atleast_2d(np.asarray(innovations, dtype=np.float64))
    x = x - x.mean(axis=-1, keepdims=True)
    count = x.shape[-1]
    lags = int(min(lags, count - 2))
    denominator = (x**2).sum(axis=-1)
    statistic = np.zeros(x.shape[0])
    for h in range(1, lags + 1):
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = (x[:, h:] * x[:, :-h]).sum(axis=-1) / denominator
        statistic += rho**2 / (count - h)
    statistic *= count * (count + 2)
    df = np.maximum(lags - np.broadcast_to(np.asarray(fitted_order), statistic.shape), 1)
    return np.array(
        [
            _core.chi_squared_sf(float(q), float(d)) if np.isfinite(q) else np.nan
            for q, d in zip(statistic, df, strict=True)
        ]
    )


def _innovation_spread(
    innovations: NDArray[np.float64], n: int, start: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Standard deviation of each column's innovations along the run, (m, n), from a log-linear fit in time, and
    the slope of log variance per run length that it uses (m,).

    ``log ε_t²`` is regressed on ``[1, t/(n − 1)]`` over t = start … n − 1; the fit is extrapolated to the first
    ``start`` checkpoints. Only ratios between time points matter to a correlation, so the fit's constant
    (E log χ²₁) is left alone.
    """
    count = innovations.shape[1]
    time = np.arange(start, n) / max(n - 1, 1)
    design = np.column_stack([np.ones(count), time])
    log_square = np.log(innovations**2 + 1e-12 * (innovations**2).mean(axis=1, keepdims=True) + 1e-300)
    coef = np.linalg.lstsq(design, log_square.T, rcond=None)[0]  # (2, m)
    # Var log χ²₁ = π²/2: the slope's standard error under a constant spread. The slope is shrunk towards 0 by
    # the positive-part factor 1 − (c/t)², c = SPREAD_SHRINK, so that a slope within c standard errors of 0 is
    # taken as none (and with a constant spread the test stays exactly Fisher's), while a trend is kept nearly
    # whole: with 50 checkpoints a threefold fall of the noise sd is only about two standard errors.
    slope_se = math.sqrt((math.pi**2 / 2) / max(float(((time - time.mean()) ** 2).sum()), 1e-300))
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(coef[1] != 0, np.maximum(0.0, 1.0 - (SPREAD_SHRINK * slope_se / coef[1]) ** 2), 0.0)
    slope = np.clip(coef[1] * shrink, -np.log(100.0), np.log(100.0))  # at most a hundredfold change in variance
    full_time = np.arange(n) / max(n - 1, 1)
    spread = np.exp(0.5 * slope[:, None] * (full_time[None, :] - full_time.mean()))
    return spread, slope


def _variance_ratio(innovations: NDArray[np.float64]) -> NDArray[np.float64]:
    """Standard deviation of the innovations in the first third of the run over that in the last third."""
    third = max(innovations.shape[-1] // 3, 2)
    first = innovations[:, :third].std(axis=-1, ddof=1)
    last = innovations[:, -third:].std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return first / last


# ----------------------------------------------------------------------------------------------------------
# The test
# ----------------------------------------------------------------------------------------------------------


#: Diagnostic thresholds; docs/calibration.md measures the flag rates they give on the calibration grid.
LJUNG_BOX_FLAG = 0.01
VARIANCE_RATIO_FLAG = 2.5
NONLINEAR_SHIFT_FLAG = 0.2


def sieve_column_notes(result: SievePartialCorrMatrix, labels: list[str]) -> list[list[str]]:
    """The sieve's warnings about each test set: what its AR model did not capture.

    A column is flagged when its AR innovations are still autocorrelated (Ljung–Box p below
    :data:`LJUNG_BOX_FLAG`), or when their spread in the first third of the run differs from that in the last
    third by more than :data:`VARIANCE_RATIO_FLAG` in standard deviation *and* significantly (the log variance
    ratio beyond 2.58 standard errors, :math:`\\sqrt{2/(k_1 - 1) + 2/(k_2 - 1)}`), which the sieve's log-linear
    spread may not follow.

    Parameters
    ----------
    result : SievePartialCorrMatrix
        A result of :func:`sieve_partial_corr_matrix`.
    labels : list of str
        The test sets' names, in column order.

    Returns
    -------
    list of list of str
        The notes of each test set, in column order (empty when none).
    """
    notes: list[list[str]] = []
    third = max((result.n - result.max_order) // 3, 2)
    log_ratio_se = math.sqrt(4.0 / (third - 1)) if third > 1 else math.inf
    for j, label in enumerate(labels):
        column = []
        if result.ljung_box_p[j] < LJUNG_BOX_FLAG:
            column.append(
                f"{label}: residual autocorrelation beyond AR({result.ar_order[j]}) "
                f"(Ljung–Box p = {result.ljung_box_p[j]:.2g})"
            )
        ratio = result.variance_ratio[j]
        if (
            np.isfinite(ratio)
            and max(ratio, 1 / ratio) > VARIANCE_RATIO_FLAG
            and abs(2 * math.log(ratio)) > 2.58 * log_ratio_se
        ):
            column.append(f"{label}: variance changes over training (noise sd first/last third {ratio:.2g})")
        notes.append(column)
    return notes


def curvature_shift(scores: ArrayLike, covar: ArrayLike) -> NDArray[np.float64]:
    r"""How much each pair's partial correlation moves when the control may curve.

    The shift is :math:`|\operatorname{artanh} r(\cdot \mid 1, c) - \operatorname{artanh} r(\cdot \mid 1, c, c^2)|`.
    A linear control leaves a curved ID effect in every residual that follows it, and two OOD test sets then
    correlate through it; adding :math:`c^2` to the control removes most of that shared part, so a large shift
    says the linear control is not enough (use ``fit="gam"``). With one control only; zeros otherwise.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint.
    covar : array_like of shape (n,) or (n, q)
        The control.

    Returns
    -------
    ndarray of shape (m, m)
        The shift of every pair.
    """
    data = np.asarray(scores, dtype=np.float64)
    control = np.asarray(covar, dtype=np.float64).reshape(data.shape[0], -1)
    m = data.shape[1]
    if control.shape[1] != 1 or data.shape[0] < 8:
        return np.zeros((m, m))
    c = control[:, 0] - control[:, 0].mean()
    scale = np.abs(c).max()
    if scale == 0:
        return np.zeros((m, m))
    c = c / scale
    shifts = []
    for design in (np.column_stack([np.ones_like(c), c]), np.column_stack([np.ones_like(c), c, c**2])):
        q, _ = np.linalg.qr(design)
        residuals = (data - q @ (q.T @ data)).T
        with np.errstate(divide="ignore", invalid="ignore"):
            shifts.append(_fisher_z(residuals))
    shift = np.abs(shifts[0] - shifts[1])
    np.fill_diagonal(shift, 0.0)
    return np.nan_to_num(shift, nan=0.0)


def gam_control_z(
    scores: ArrayLike, covar: ArrayLike, k: int = DEFAULT_GAM_K, max_edf: GamMaxEdf = DEFAULT_GAM_MAX_EDF
) -> NDArray[np.float64]:
    r"""Every pair's :math:`\operatorname{artanh} r` when a GAM, not a line, takes the control out: (m, m).

    The residuals are those of ``fit="gam"`` (one penalised spline of the single control per test set). NaN
    everywhere with more than one control, fewer than 8 checkpoints, or when the GAM cannot be fitted: the
    comparison it feeds (:func:`curvature_notes`) is then skipped.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint.
    covar : array_like of shape (n,) or (n, q)
        The control.
    k : int
        GAM basis dimension.
    max_edf : float, "auto" or None
        Cap on the GAM's effective degrees of freedom (see :func:`~gengen.stats.gam.gam_fit`).

    Returns
    -------
    ndarray of shape (m, m)
        :math:`\operatorname{artanh} r` of every pair under the GAM control.
    """
    data = np.asarray(scores, dtype=np.float64)
    control = np.asarray(covar, dtype=np.float64).reshape(data.shape[0], -1)
    m = data.shape[1]
    missing = np.full((m, m), np.nan)
    if control.shape[1] != 1 or data.shape[0] < 8:
        return missing
    try:
        # A diagnostic, not the analysis the user asked for: its notes (k lowered for few distinct ID values)
        # would only repeat on every group.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            residuals = np.asarray(gam_fit(data, control, k=k, max_edf=max_edf).residuals, dtype=np.float64)
    except (GengenError, np.linalg.LinAlgError):
        return missing
    with np.errstate(divide="ignore", invalid="ignore"):
        z = _fisher_z(residuals.T)
    np.fill_diagonal(z, np.nan)
    return z


def curvature_notes(
    shift: ArrayLike,
    se_z: ArrayLike,
    *,
    p_value: ArrayLike | None = None,
    z_gam: ArrayLike | None = None,
    df: ArrayLike | None = None,
    alpha: float = 0.05,
) -> list[str]:
    r"""The non-linearity note of each pair (empty when none).

    A pair is flagged when its curvature shift (:func:`curvature_shift`) exceeds both
    :data:`NONLINEAR_SHIFT_FLAG` and ``se_z``, or, given ``p_value``, ``z_gam`` (:func:`gam_control_z`) and
    ``df``, when its verdict at ``alpha`` depends on the control: the test of :math:`\operatorname{artanh}
    r_{\mathrm{gam}} / \mathrm{se}_z` on ``df`` and the row's own ``p_value`` fall on different sides of
    ``alpha``. The second rule matters where the first is too coarse: a saturating ID effect under a linear
    control makes most null pairs significant, and the squared term alone does not see all of them.

    Parameters
    ----------
    shift : array_like of shape (pairs,)
        Each pair's :func:`curvature_shift`.
    se_z : array_like of shape (pairs,)
        Their standard errors on the Fisher-z scale.
    p_value : array_like of shape (pairs,), optional
        Their deciding p-values.
    z_gam : array_like of shape (pairs,), optional
        Their :func:`gam_control_z`.
    df : array_like of shape (pairs,), optional
        Degrees of freedom of the test of ``z_gam / se_z``.
    alpha : float
        The significance level of the verdicts.

    Returns
    -------
    list of str
        One note per pair, in the order of ``shift``; empty for a pair not flagged.
    """
    moved_all = np.asarray(shift, dtype=float)
    se_all = np.asarray(se_z, dtype=float)
    count = moved_all.size
    p_all = np.full(count, np.nan) if p_value is None else np.asarray(p_value, dtype=float)
    z_all = np.full(count, np.nan) if z_gam is None else np.asarray(z_gam, dtype=float)
    df_all = np.full(count, np.nan) if df is None else np.asarray(df, dtype=float)
    notes = []
    for moved, se, p, z, dof in zip(moved_all, se_all, p_all, z_all, df_all, strict=True):
        limit = max(NONLINEAR_SHIFT_FLAG, se if np.isfinite(se) else 0.0)
        if moved > limit:
            notes.append(
                f"ID effect looks non-linear: artanh r_partial moves by {moved:.2f} when ID also enters squared; "
                "use fit='gam'"
            )
            continue
        if np.isfinite(p) and np.isfinite(z) and np.isfinite(se) and se > 0 and np.isfinite(dof) and dof > 0:
            p_gam = _core.t_two_sided(float(z / se), float(dof))
            if (p < alpha) != (p_gam < alpha):
                notes.append(
                    f"verdict depends on the control: under a GAM control r_partial = {math.tanh(z):.2f} "
                    f"(p = {p_gam:.2g} on the same standard error); use fit='gam'"
                )
                continue
        notes.append("")
    return notes


def _ranks(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Average ranks of each column (ties share their mean rank), as Spearman's correlation uses."""
    return pd.DataFrame(values).rank(method="average").to_numpy(dtype=np.float64)


def _operators(
    data: NDArray[np.float64],
    control: NDArray[np.float64],
    fit: Control,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Residuals (n, m), the residual operators I − H (shared (n, n) or per column (m, n, n)) and the EDF (m,)."""
    n, m = data.shape
    if isinstance(fit, Linear):
        design = np.column_stack([np.ones(n), control])
        q, _ = np.linalg.qr(design)
        operator = np.eye(n) - q @ q.T
        residuals = operator @ data
        return residuals, operator, np.full(m, float(design.shape[1]))
    fit_result = fit_gam(data, control, fit)
    lam = np.atleast_2d(np.asarray(fit_result.lam, dtype=np.float64))
    operators = np.empty((m, n, n))
    identity = np.eye(n)
    for j in range(m):
        # At fixed smoothing parameters the GAM is linear in y: its fitted values of the identity are H_j.
        smoother = fit_gam(identity, control, fit, lam=lam[j]).fitted
        operators[j] = identity - smoother
    return np.asarray(fit_result.residuals), operators, np.atleast_1d(np.asarray(fit_result.edf, dtype=np.float64))


def _correlations(series: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pearson correlation matrices of (..., m, n) series over their last axis: (..., m, m)."""
    centred = series - series.mean(axis=-1, keepdims=True)
    norm = np.sqrt((centred**2).sum(axis=-1, keepdims=True))
    unit = centred / np.where(norm > 0, norm, np.nan)
    return unit @ np.swapaxes(unit, -1, -2)


def _fisher_z(series: NDArray[np.float64]) -> NDArray[np.float64]:
    """artanh of :func:`_correlations`, kept finite on the diagonal (r = 1 clipped just inside)."""
    return np.arctanh(np.clip(_correlations(series), -1 + 1e-15, 1 - 1e-15))


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
    **gam_options
        ``k``, ``gam_method``, ``gam_basis`` and ``max_edf`` for ``fit="gam"`` (see :class:`~gengen.stats.Gam`;
        the cap applies to each smooth, ``"auto"`` being :func:`~gengen.stats.gam.default_max_edf` of n).

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
    \mathrm{se}_z\bigr)`. With independent checkpoints the variance ratio is 1, so that
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
    gam = as_control(fit, gam_options)
    data, control, labels = _inputs(scores, covar, method, gam)
    n_boot = int(n_boot)
    if n_boot < 20:
        raise InvalidArgumentError(f"n_boot: need at least 20 sieve replicates for a standard error, got {n_boot}")
    if n_boot > 1_000_000:
        raise InvalidArgumentError(f"n_boot: at most 1,000,000 sieve replicates, got {n_boot}")
    if not 0.0 < ci_level < 1.0:
        raise InvalidArgumentError(f"ci_level: must lie strictly between 0 and 1, got {ci_level!r}")
    n, m = data.shape
    if method == "spearman":
        data = _ranks(data)
        control = _ranks(control) if control.shape[1] else control
    max_order = default_max_order(n) if max_order is None else int(max_order)
    if control.shape[1] + 1 + max_order + 4 > n:
        raise InvalidArgumentError(
            f"scores: {n} checkpoints are too few for the sieve with {control.shape[1]} control(s) and AR order "
            f"up to {max_order} (need at least {control.shape[1] + 5 + max_order})"
        )
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
    r = _correlations(series)

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x51E7E]))
    exogenous = control if control.shape[1] else None
    order, coef = fit_autoregression(series.T, max_order, exogenous)
    coef = _bias_corrected(series, order, coef, operators, exogenous, rng, BIAS_REPLICATES)
    innovations = _innovations(series, coef, max_order, exogenous)  # (m, T), common time points t = max_order … n − 1
    innovations = innovations - innovations.mean(axis=1, keepdims=True)
    variance = innovations.var(axis=1)
    ljung_box_p = _ljung_box(innovations, lags=min(10, max(innovations.shape[1] // 5, 2)), fitted_order=order)
    variance_ratio = _variance_ratio(innovations)

    # The innovations' spread along the run (log-linear in training time): shocks are resampled standardised and
    # given the spread of the time point they drive, so a run whose noise shrinks as training goes on keeps that.
    spread, spread_slope = _innovation_spread(innovations, n, max_order)
    pool = innovations / spread[:, max_order:]
    burn = _burn_in(coef)
    spread_path = np.concatenate([np.repeat(spread[:, :1], burn, axis=1), spread], axis=1)  # (m, burn + n)
    moments = np.zeros((4, m, m))  # sums of z and z² for the AR replicates and for their white twins
    chunk = max(1, min(n_boot, int(2e6 // max(m * (n + burn), 1))))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        # One set of time points for every test set: the replicates keep the innovations' cross-correlation.
        picks = rng.integers(0, pool.shape[1], size=(size, burn + n))
        shocks = pool[:, picks].transpose(1, 0, 2)  # (size, m, burn + n), standardised
        start = _stationary_draws(coef, variance, rng, size)
        autoregressive = _residualise(_generate(coef, shocks * spread_path, n, start), operators)
        # The same shocks without autoregression or changing spread: what this resampling gives for independent,
        # identically distributed checkpoints.
        white = _residualise(shocks[..., -n:], operators)
        for slot, replicate in ((0, autoregressive), (2, white)):
            z = _fisher_z(replicate)
            moments[slot] += z.sum(axis=0)
            moments[slot + 1] += (z**2).sum(axis=0)
        done += size
    variances = [np.maximum(moments[slot + 1] - moments[slot] ** 2 / n_boot, 0.0) / (n_boot - 1) for slot in (0, 2)]
    # The variance inflation that the autocorrelation causes, measured as a ratio between twin replicates so
    # that the resampling's own small-sample error cancels, scales Fisher's 1/(n − 3 − k).
    with np.errstate(divide="ignore", invalid="ignore"):
        inflation = np.where(variances[1] > 0, variances[0] / variances[1], np.nan)
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
    for a, b in zip(*np.triu_indices(m, 1), strict=True):
        for i, j in ((a, b), (b, a)):
            if np.isfinite(statistic[i, j]) and df_effective[i, j] > 0:
                p_value[i, j] = _core.t_two_sided(float(statistic[i, j]), float(df_effective[i, j]))
                quantile[i, j] = _core.t_quantile(0.5 + ci_level / 2, float(df_effective[i, j]))
    ci_low = np.tanh(z_obs - quantile * se_z)
    ci_high = np.tanh(z_obs + quantile * se_z)
    np.fill_diagonal(r, 1.0)
    for matrix in (statistic, p_value):
        np.fill_diagonal(matrix, np.nan)
    np.fill_diagonal(ci_low, 1.0)
    np.fill_diagonal(ci_high, 1.0)
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
        n=n,
        k=control.shape[1],
        n_boot=n_boot,
        max_order=max_order,
        ci_level=float(ci_level),
        method=method,
        fit=gam.name,
    )


def _inputs(
    scores: ArrayLike, covar: ArrayLike | None, method: str, fit: Control
) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str] | None]:
    """The checks of every test of trajectories, plus what the sieve needs on top: finite values, two test sets."""
    data, control, labels = trajectory_inputs(scores, covar, method)
    if data.shape[1] < 2:
        raise InvalidArgumentError(f"scores: need at least two test sets (columns), got {data.shape[1]}")
    for name, values in (("scores", data), ("covar", control)):
        if not np.isfinite(values).all():
            raise InvalidArgumentError(f"{name}: must be finite (no NaN or infinity)")
    if isinstance(fit, Gam) and control.shape[1] == 0:
        raise InvalidArgumentError('covar: fit="gam" needs at least one control column')
    return data, control, labels
