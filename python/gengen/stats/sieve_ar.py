r"""The AR-sieve's autoregressions: the dynamic-regression fits and their orders, roots and innovations.

One step of :func:`gengen.stats.sieve.sieve_partial_corr_matrix` (its module describes the whole test): each test
set's residual series is described by an AR(p) model fitted as the dynamic regression
:math:`e_t \sim e_{t-1}, …, e_{t-p} + [1, z_t, …, z_{t-p}]`, the order chosen by AIC
(:func:`fit_autoregression`); the innovations' spread along the run is fitted log-linearly; the correlations of
many series at once and their Fisher z are computed here too.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen.errors import InvalidArgumentError

__all__ = ["MAX_ROOT", "SPREAD_SHRINK", "default_max_order", "fit_autoregression"]

#: Largest modulus of an AR model's roots that the bootstrap generates from: a unit root (a random walk) has no
#: stationary distribution, and a root this close to 1 already behaves like one over a few hundred checkpoints.
MAX_ROOT = 0.99

#: Slopes of the innovations' log variance within this many standard errors of 0 are taken as 0.
SPREAD_SHRINK = 0.5


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


def _exogenous_bases(
    control: NDArray[np.float64] | None, n: int, max_order: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """:func:`_exogenous_basis` of every order 1 … ``max_order`` on rows t = max_order … n − 1, stacked with zero
    columns to one width: shape (max_order, n − max_order, q), and each order's rank (max_order,)."""
    bases = [_exogenous_basis(control, n, order, max_order) for order in range(1, max_order + 1)]
    width = max((basis.shape[1] for basis in bases), default=0)
    stacked = np.zeros((max_order, n - max_order, width))
    for index, basis in enumerate(bases):
        stacked[index, :, : basis.shape[1]] = basis
    return stacked, np.array([basis.shape[1] for basis in bases], dtype=np.int64)


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


def _innovation_spread(
    innovations: NDArray[np.float64], n: int, start: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Standard deviation of each column's innovations along the run, (m, n), from a log-linear fit in time, and
    the slope of log variance per run length that it uses (m,).

    ``log ε_t²`` is regressed on ``[1, t/(n − 1)]`` over t = start … n − 1; the fit is extrapolated to the first
    ``start`` checkpoints. Only ratios between time points matter to a correlation, so the fit's constant
    (E log χ²₁) is left alone.
    """
    time = np.arange(start, n) / max(n - 1, 1)
    log_square = np.log(innovations**2 + 1e-12 * (innovations**2).mean(axis=1, keepdims=True) + 1e-300)
    # The least-squares slope on [1, t], written out (a LAPACK call here wakes OpenBLAS's threads for nothing).
    centred_time = time - time.mean()
    spread_of_time = max(float((centred_time**2).sum()), 1e-300)
    centred_log = log_square - log_square.mean(axis=1, keepdims=True)
    fitted_slope = (centred_log * centred_time).sum(axis=1) / spread_of_time  # (m,)
    # Var log χ²₁ = π²/2: the slope's standard error under a constant spread. The slope is shrunk towards 0 by
    # the positive-part factor 1 − (c/t)², c = SPREAD_SHRINK, so that a slope within c standard errors of 0 is
    # taken as none (and with a constant spread the test stays exactly Fisher's), while a trend is kept nearly
    # whole: with 50 checkpoints a threefold fall of the noise sd is only about two standard errors.
    slope_se = math.sqrt((math.pi**2 / 2) / spread_of_time)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(fitted_slope != 0, np.maximum(0.0, 1.0 - (SPREAD_SHRINK * slope_se / fitted_slope) ** 2), 0.0)
    slope = np.clip(fitted_slope * shrink, -np.log(100.0), np.log(100.0))  # at most a hundredfold change in variance
    full_time = np.arange(n) / max(n - 1, 1)
    spread = np.exp(0.5 * slope[:, None] * (full_time[None, :] - full_time.mean()))
    return spread, slope


def _correlations(series: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pearson correlation matrices of (..., m, n) series over their last axis: (..., m, m)."""
    centred = series - series.mean(axis=-1, keepdims=True)
    norm = np.sqrt((centred**2).sum(axis=-1, keepdims=True))
    unit = centred / np.where(norm > 0, norm, np.nan)
    # einsum rather than a BLAS product: the matrices are small, and BLAS would wake OpenBLAS's threads.
    return np.einsum("...an,...bn->...ab", unit, unit)


def _fisher_z(series: NDArray[np.float64]) -> NDArray[np.float64]:
    """artanh of :func:`_correlations`, kept finite on the diagonal (r = 1 clipped just inside)."""
    return np.arctanh(np.clip(_correlations(series), -1 + 1e-15, 1 - 1e-15))
