r"""The GLS oracle of the calibration wing: a test that knows the simulated noise's dependence (issue 34, item 6).

The contract (:mod:`gengen.calibration.contract`) reports power at ρ = 0.3 and 0.5 beside the default and the
lagged test. What the most a test could do there is depends on what it is allowed to know; this module's oracle
knows what the simulation put in, and nothing a user could estimate better:

- **the noise's covariance** of each OOD set's accuracy over the run's checkpoints: the Ornstein–Uhlenbeck
  deviation in training steps (length scale ``memory`` × T, the simulated one) carried into accuracy by the
  set's expected-accuracy curve, plus the binomial measurement variance of the set's N examples at each
  checkpoint (:func:`item_noise_covariance`);
- **the mean**: each OOD set's expected accuracy given the ID ability it follows, so that only the deviations
  are correlated (:func:`item_oracle`).

It whitens each set's deviations with the Cholesky factor of its covariance (generalised least squares), removes
``[1, ID]`` in the whitened space and t-tests the correlation of the two whitened residual series
(:func:`gls_partial_corr`). It lives in the calibration wing only: it is not an inference method offered to
users (they do not know the covariance), it is the reference the contract's power columns are read against.

References
----------
Aitken, A. C. (1935). On least squares and linear combination of observations. *Proc. R. Soc. Edinburgh* 55,
42–48. Box, G. E. P., Jenkins, G. M. (1970). *Time Series Analysis*, §11.2 (prewhitening before
cross-correlation).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg as sp_linalg
from scipy import stats as sp_stats

from gengen.calibration.item_level import (
    OOD_OFFSETS,
    OOD_SLOPES,
    ItemCell,
    _Draw,
    _set_curve,
    expected_accuracy,
)
from gengen.calibration.learning_curves import TOTAL_STEPS
from gengen.errors import GengenError

__all__ = ["GlsPartialCorr", "ar1_covariance", "gls_partial_corr", "item_noise_covariance", "item_oracle"]


#: Quantiles of a set's difficulties that stand for its examples in the oracle's curves (the analysis' driver
#: inverts a curve of 50 too); 0.05 s per run instead of 0.23 s at 200.
_RESOLUTION = 50


class GlsPartialCorr(NamedTuple):
    """The GLS partial correlation of two series given the covariates, its t statistic, df and two-sided p."""

    r: float
    statistic: float
    df: float
    p_value: float


def ar1_covariance(n: int, phi: float) -> NDArray[np.float64]:
    r"""The correlation matrix of a stationary AR(1) process, :math:`\phi^{|s - t|}` (n × n).

    Examples
    --------
    >>> ar1_covariance(3, 0.5).tolist()
    [[1.0, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 1.0]]
    """
    if not -1.0 < phi < 1.0:
        raise GengenError(f"phi: a stationary AR(1) needs |phi| < 1, got {phi}")
    index = np.arange(n)
    return np.asarray(phi ** np.abs(index[:, None] - index[None, :]), dtype=np.float64)


def _whitened_residuals(
    y: NDArray[np.float64], design: NDArray[np.float64], cov: NDArray[np.float64]
) -> NDArray[np.float64]:
    factor = np.linalg.cholesky(cov)
    y_w = sp_linalg.solve_triangular(factor, y, lower=True)
    x_w = sp_linalg.solve_triangular(factor, design, lower=True)
    beta, *_ = np.linalg.lstsq(x_w, y_w, rcond=None)
    return np.asarray(y_w - x_w @ beta)


def gls_partial_corr(y: ArrayLike, covar: ArrayLike | None, covariances: ArrayLike) -> GlsPartialCorr:
    r"""The partial correlation of two series given ``[1, covar]`` after whitening each by its known covariance.

    Parameters
    ----------
    y : array_like of shape (n, 2)
        The two series.
    covar : array_like of shape (n,) or (n, k), or None
        The covariates (None: the intercept only).
    covariances : array_like of shape (n, n) or (2, n, n)
        The noise covariance of both series, or of each (up to scale: only its shape matters).

    Returns
    -------
    GlsPartialCorr
        ``r``, the t ``statistic`` on ``df`` = n − k − 2 degrees of freedom and its two-sided ``p_value``.

    Notes
    -----
    With :math:`\Sigma_j = L_j L_j^\top` and :math:`X = [1, \text{covar}]`, each series is whitened,
    :math:`\tilde y_j = L_j^{-1} y_j`, :math:`\tilde X_j = L_j^{-1} X`, and :math:`e_j = \tilde y_j - \tilde X_j
    \hat\beta_j` are its least-squares residuals on the whitened design;
    :math:`r = \langle e_a, e_b\rangle / (\lVert e_a\rVert \lVert e_b\rVert)` and :math:`t = r \sqrt{\text{df} /
    (1 - r^2)}`. The Cholesky factor whitens causally (each whitened value is the standardised one-step
    prediction error given the earlier ones: Prais–Winsten's transform for an AR(1)), so that the two series'
    innovations stay aligned in time when their covariances differ. With one covariance for both series this
    is exactly the t statistic of :math:`y_b`'s coefficient in the GLS regression of :math:`y_a` on
    :math:`[X, y_b]` (Aitken, 1935), exact under Gaussian noise of that covariance; with two, the whitened
    residuals are both white under the null and the t-test holds to first order (Bartlett's formula).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> z = np.linspace(0, 1, 30)
    >>> y = np.column_stack([z, -z]) + rng.standard_normal((30, 2))
    >>> found = gls_partial_corr(y, z, ar1_covariance(30, 0.5))
    >>> found.df, bool(0 <= found.p_value <= 1)
    (27.0, True)
    """
    data = np.asarray(y, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != 2:
        raise GengenError(f"y: two series as the columns of an (n, 2) array, got shape {data.shape}")
    n = data.shape[0]
    x = np.ones((n, 1)) if covar is None else np.column_stack([np.ones(n), np.asarray(covar, dtype=np.float64)])
    if x.shape[0] != n:
        raise GengenError(f"covar: {x.shape[0]} rows for {n} observations")
    cov = np.asarray(covariances, dtype=np.float64)
    cov = np.stack([cov, cov]) if cov.ndim == 2 else cov
    if cov.shape != (2, n, n):
        raise GengenError(f"covariances: (n, n) or (2, n, n) with n = {n}, got shape {cov.shape}")
    df = float(n - x.shape[1] - 1)
    if df < 1:
        raise GengenError(f"y: {n} observations leave no degrees of freedom for {x.shape[1]} covariates")
    e = [_whitened_residuals(data[:, j], x, cov[j]) for j in range(2)]
    r = float(e[0] @ e[1] / np.sqrt((e[0] @ e[0]) * (e[1] @ e[1])))
    statistic = r * np.sqrt(df / max(1.0 - r * r, 1e-300))
    return GlsPartialCorr(r, float(statistic), df, float(2.0 * sp_stats.t.sf(abs(statistic), df)))


def item_noise_covariance(
    cell: ItemCell, steps: ArrayLike, ability: ArrayLike, difficulties: ArrayLike
) -> NDArray[np.float64]:
    r"""The simulated covariance of one OOD set's accuracy over a run's checkpoints, given its ability curve.

    Parameters
    ----------
    cell : ItemCell
        The design (its ``noise_sd``, ``memory``, item effects and N).
    steps : array_like of shape (n,)
        The run's training steps.
    ability : array_like of shape (n,)
        The set's ability without its deviation, :math:`c_j + b_j \hat\theta_t`.
    difficulties : array_like of shape (N,)
        The set's examples' difficulties.

    Returns
    -------
    ndarray of shape (n, n)
        :math:`\Sigma_{st} = g_s g_t e^{-|s_s - s_t| / \ell} + v_t [s = t]`.

    Notes
    -----
    The set's accuracy is :math:`\bar F(\theta_t + \sigma\delta_t)` plus the examples' sampling noise, with
    :math:`\bar F` the mean over its examples of :math:`E\,F(\theta - d_i + sZ)`, :math:`s^2 = \text{persist}^2 +
    \text{churn}^2`, and :math:`\delta` the unit-variance OU process of length scale :math:`\ell` = ``memory`` ×
    T. To first order in :math:`\sigma` the deviation is :math:`g_t \delta_t`, :math:`g_t = \sigma \bar
    F'(\theta_t)`; the sampling variance is :math:`v_t = N^{-1} \text{mean}_i\, p_{it}(1 - p_{it})`,
    :math:`p_{it} = E\,F(\theta_t - d_i + s Z)` (examples summarised by 50 quantiles of their difficulties). The
    per-run item effects also make the sampling noise of neighbouring checkpoints covary; that part is a smooth
    function of the ability, which the oracle's ``[1, ID]`` absorbs, and is left out here.
    """
    s = np.asarray(steps, dtype=np.float64)
    theta = np.asarray(ability, dtype=np.float64)
    d = np.asarray(difficulties, dtype=np.float64)
    curve = _set_curve(cell, d, 0.0, resolution=_RESOLUTION)
    slope = cell.noise_sd * np.interp(theta, curve.theta, np.gradient(curve.accuracy, curve.theta))
    length = cell.memory * TOTAL_STEPS
    ou = np.exp(-np.abs(s[:, None] - s[None, :]) / length)
    quantiles = np.quantile(d, (np.arange(_RESOLUTION) + 0.5) / _RESOLUTION) if d.size > _RESOLUTION else d
    item_sd = float(np.hypot(cell.persist_sd, cell.churn_sd))
    p = expected_accuracy(theta[:, None] - quantiles[None, :], item_sd, cell.link)
    sampling = (p * (1.0 - p)).mean(axis=1) / cell.n_examples
    return np.asarray(slope[:, None] * slope[None, :] * ou + np.diag(sampling))


def item_oracle(cell: ItemCell, draw: _Draw, model: int = 0, run: int = 0) -> GlsPartialCorr:
    """The oracle's test of the main pair (``ood_a``, ``ood_b``) in one run of an item-level replicate.

    Parameters
    ----------
    cell : ItemCell
        The design the replicate was drawn from.
    draw : gengen.calibration.item_level._Draw
        The replicate with what the simulation knows (the ID ability the OOD sets follow, their difficulties).
    model, run : int
        Which run of the replicate.

    Returns
    -------
    GlsPartialCorr
        :func:`gls_partial_corr` of the two sets' deviations from their expected accuracy given the ID ability,
        on ``[1, ID accuracy]``, each whitened by :func:`item_noise_covariance`.
    """
    replicate = draw.replicate
    row = model * cell.runs + run
    driver = draw.driver[row]
    accuracy = replicate.accuracy[model, run]
    deviations, covariances = [], []
    for j in range(2):
        difficulties = draw.difficulties[1 + j]
        ability = OOD_OFFSETS[j] + OOD_SLOPES[j] * driver
        mean = np.interp(ability, *_set_curve(cell, difficulties, cell.noise_sd, resolution=_RESOLUTION))
        deviations.append(accuracy[:, 1 + j] - mean)
        covariances.append(item_noise_covariance(cell, replicate.steps, ability, difficulties))
    return gls_partial_corr(np.column_stack(deviations), accuracy[:, 0], np.stack(covariances))
