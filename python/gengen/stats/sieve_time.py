r"""Training time for the AR-sieve: the variance correction for irregularly spaced checkpoints (issue 34, item 2).

The sieve (:mod:`gengen.stats.sieve`) models each residual series as an autoregression in *checkpoint index*.
Where checkpoints are evenly spaced in training steps that is the same as a process in training time; where they
are not (log-spaced, dense early), noise that lives in training steps is not stationary in the index: consecutive
checkpoints are nearly the same model early in a log-spaced run and nearly independent late. An AR model in the
index averages the two, and for an Ornstein–Uhlenbeck (OU) process in training steps sampled at 40 log-spaced
checkpoints the sieve's standard error of :math:`\operatorname{artanh} r` is 17% too small (docs/calibration.md,
"Training time (issue 34, item 2)").

The correction fits, to each residual series :math:`e_j`, two Gaussian models with the same two parameters
(:math:`\bar\phi`, the correlation of two checkpoints one mean gap apart, and :math:`w`, the share of white
measurement noise):

- **in training time:** :math:`\Sigma^{T}_{st} = (1 - w)\,\bar\phi^{|s_s - s_t| / \bar\Delta} + w\,[s = t]`, an OU
  process on the actual steps :math:`s` (mean gap :math:`\bar\Delta`) plus white noise;
- **in checkpoint index:** :math:`\Sigma^{I}_{st} = (1 - w)\,\bar\phi^{|s - t|} + w\,[s = t]`, the AR(1)-plus-white
  model the sieve's index autoregression stands for,

each by maximum likelihood on a grid (the scale profiled out; :func:`fit_gap_noise`). The first-order variance
of the correlation of two independent residual series :math:`M_a u_a`, :math:`M_b u_b` (:math:`M_j` the
control's residual operator) is

.. math::

    V(\Sigma_a, \Sigma_b) = \frac{\operatorname{tr}(M_a \Sigma_a M_a^\top M_b \Sigma_b M_b^\top)}
    {\operatorname{tr}(M_a \Sigma_a M_a^\top)\,\operatorname{tr}(M_b \Sigma_b M_b^\top)}

(Dutilleul, 1993), and the sieve's variance of :math:`z` is multiplied by :math:`V(\Sigma^T_a, \Sigma^T_b) /
V(\Sigma^I_a, \Sigma^I_b)`: what the dependence in training time adds over the dependence in the index. With
evenly spaced checkpoints the two models are the same model, the ratio is exactly 1 and the sieve is unchanged;
with white residuals (:math:`w = 1`) it is 1 too.

References
----------
Dutilleul, P. (1993). Modifying the t test for assessing the correlation between two spatial processes.
*Biometrics* 49(1), 305–314.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen.errors import InvalidArgumentError

__all__ = [
    "MAX_GAP_PHI",
    "REGULAR_GAP_TOLERANCE",
    "correlation_variance",
    "fit_gap_noise",
    "gap_inflation",
    "regular_steps",
    "steps_array",
    "time_innovations",
    "training_time_model",
]

#: Largest correlation one mean gap apart that the fits may reach (a random walk has no stationary variance).
MAX_GAP_PHI = 0.995
#: Gaps that differ from their mean by less than this share count as even: the correction is then exactly 1.
REGULAR_GAP_TOLERANCE = 0.01


def steps_array(steps: ArrayLike | None, n: int) -> NDArray[np.float64] | None:
    """The checkpoints' training steps as floats, checked: n of them, finite, strictly increasing.

    Parameters
    ----------
    steps : array_like of shape (n,) or None
        The training step of each checkpoint, in checkpoint order (None: unknown).
    n : int
        The number of checkpoints.

    Returns
    -------
    ndarray of shape (n,) or None
        The steps as floats; None when ``steps`` is None.
    """
    if steps is None:
        return None
    values = np.asarray(steps, dtype=np.float64).reshape(-1)
    if values.size != n:
        raise InvalidArgumentError(f"steps: need one training step per checkpoint ({n}), got {values.size}")
    if not np.isfinite(values).all():
        raise InvalidArgumentError("steps: must be finite (no NaN or infinity)")
    if np.any(np.diff(values) <= 0):
        first = int(np.flatnonzero(np.diff(values) <= 0)[0])
        raise InvalidArgumentError(
            f"steps: must increase strictly in checkpoint order (checkpoint {first + 2} is at step "
            f"{values[first + 1]:g}, not after {values[first]:g})"
        )
    return values


def regular_steps(steps: NDArray[np.float64] | None) -> bool:
    """Whether the checkpoints are evenly spaced in training steps (or their steps are unknown).

    Parameters
    ----------
    steps : ndarray of shape (n,) or None
        Increasing training steps (None: unknown).

    Returns
    -------
    bool
        True when every gap is within :data:`REGULAR_GAP_TOLERANCE` of the mean gap, fewer than three
        checkpoints are given, or the steps are unknown.
    """
    if steps is None or steps.size < 3:
        return True
    gaps = np.diff(steps)
    return bool(np.abs(gaps / gaps.mean() - 1.0).max() <= REGULAR_GAP_TOLERANCE)


#: The grid the fits search: correlations one unit apart (denser towards 1, where the variance is most
#: sensitive) and white shares. A grid, not an optimiser: the likelihood is flat along a ridge on short series,
#: and the grid gives the same answer on every machine.
_PHI_GRID = MAX_GAP_PHI * (1.0 - np.geomspace(1.0, 0.005, 60) + 0.005 * np.linspace(1.0, 0.0, 60))
_WHITE_GRID = np.linspace(0.0, 0.98, 36)


def _profile_loglik_grid(e: NDArray[np.float64], decay: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""−2 × the profile log-likelihood of each series (rows of ``e``, (m, n)) on the grid (m, K), by the Kalman
    filter of OU-plus-white noise.

    ``decay`` (n − 1, K): the state's correlation from each checkpoint to the next at each grid point. The state
    has variance 1 − w and the observation adds white noise of variance w; the scale is profiled out. The
    filter's variances do not depend on the data, so every series shares them.
    """
    n = e.shape[1]
    white = np.repeat(_WHITE_GRID[None, :], _PHI_GRID.size, axis=0).reshape(-1)
    signal = 1.0 - white
    # The filtered state before the first checkpoint: the stationary distribution, one step of decay 0 away.
    mean = np.zeros((e.shape[0], white.size))
    var = signal.copy()
    sum_sq = np.zeros_like(mean)
    sum_log = np.zeros_like(white)
    for t in range(n):
        a = decay[t - 1] if t else np.zeros_like(white)
        predicted_mean = a * mean
        predicted_var = a * a * var + (1.0 - a * a) * signal
        innovation_var = predicted_var + white
        innovation = e[:, t, None] - predicted_mean
        sum_sq += innovation * innovation / innovation_var
        sum_log += np.log(innovation_var)
        gain = predicted_var / innovation_var
        mean = predicted_mean + gain * innovation
        var = predicted_var * (1.0 - gain)
    return np.asarray(n * np.log(np.maximum(sum_sq / n, 1e-300)) + sum_log, dtype=np.float64)


def _fit_many(series: NDArray[np.float64], gaps: NDArray[np.float64]) -> list[tuple[float, float]]:
    """:func:`fit_gap_noise` of every row of ``series`` (m, n) in one pass of the filter."""
    centred = series - series.mean(axis=1, keepdims=True)
    phi = np.repeat(_PHI_GRID, _WHITE_GRID.size)
    decay = phi[None, :] ** gaps[:, None]
    best = np.argmin(_profile_loglik_grid(centred, decay), axis=1)
    return [(float(phi[k]), float(_WHITE_GRID[k % _WHITE_GRID.size])) for k in best]


def _standardised_innovations(
    e: NDArray[np.float64], gaps: NDArray[np.float64], phi: float, white: float
) -> NDArray[np.float64]:
    """One-step prediction errors of ``e`` over their predicted sd under OU-plus-white at (φ, w): white, of one
    spread, when the model holds."""
    signal = 1.0 - white
    mean, var = 0.0, signal
    out = np.empty(e.size)
    for t in range(e.size):
        a = phi ** gaps[t - 1] if t else 0.0
        predicted_mean = a * mean
        predicted_var = a * a * var + (1.0 - a * a) * signal
        innovation_var = predicted_var + white
        out[t] = (e[t] - predicted_mean) / np.sqrt(innovation_var)
        gain = predicted_var / innovation_var
        mean = predicted_mean + gain * (e[t] - predicted_mean)
        var = predicted_var * (1.0 - gain)
    return out


def time_innovations(
    series: ArrayLike, steps: NDArray[np.float64], fits: list[tuple[float, float]] | None = None
) -> NDArray[np.float64]:
    r"""Standardised innovations of each series under its OU-plus-white model in training time (m, n).

    What the column diagnostics read on unevenly spaced runs in place of the index autoregression's innovations:
    under noise that lives in training steps those shrink where checkpoints are dense and grow where they are
    sparse, and would flag a changing variance and left-over autocorrelation that the training-time model
    accounts for.

    Parameters
    ----------
    series : array_like of shape (m, n)
        Each test set's residual series, in checkpoint order.
    steps : ndarray of shape (n,)
        The checkpoints' training steps, increasing.
    fits : list of (float, float), optional
        Each series' :math:`(\bar\phi, w)` in training time when already fitted (:func:`training_time_model`).

    Returns
    -------
    ndarray of shape (m, n)
        :math:`(e_t - \hat e_{t|t-1}) / \sqrt{F_t}` from the Kalman filter at each series' fitted
        :math:`(\bar\phi, w)` (:func:`fit_gap_noise` on the gaps in mean gaps), in units of the series' scale.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> time_innovations(rng.standard_normal((2, 20)), np.geomspace(10, 1000, 20)).shape
    (2, 20)
    """
    e = np.asarray(series, dtype=np.float64)
    gaps = np.diff(steps) / np.diff(steps).mean()
    out = np.empty_like(e)
    fitted = _fit_many(e, gaps) if fits is None else fits
    for j, (phi, white) in enumerate(fitted):
        centred = e[j] - e[j].mean()
        out[j] = _standardised_innovations(centred, gaps, phi, white)
    return out


def fit_gap_noise(e: ArrayLike, gaps: ArrayLike) -> tuple[float, float]:
    r"""Maximum-likelihood :math:`(\bar\phi, w)` of :math:`(1 - w)\,\bar\phi^{D} + w I` for one series.

    D is the distance between checkpoints, the sum of the ``gaps`` between them; the fit is the best point of a
    60 × 36 grid (:math:`\bar\phi` up to :data:`MAX_GAP_PHI`, w from 0 to 0.98), its likelihood computed by
    the Kalman filter of the equivalent state-space model (O(n) per grid point).

    Parameters
    ----------
    e : array_like of shape (n,)
        The series (a test set's residuals), centred here.
    gaps : array_like of shape (n − 1,)
        Distances between consecutive checkpoints: in mean gaps (training time) or ones (index).

    Returns
    -------
    tuple of float
        :math:`\bar\phi`, the correlation one unit of distance apart, and :math:`w`, the white share of the
        variance.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.zeros(400)
    >>> for t in range(1, 400):
    ...     x[t] = 0.8 * x[t - 1] + rng.standard_normal()
    >>> phi, white = fit_gap_noise(x, np.ones(399))
    >>> bool(abs(phi - 0.8) < 0.08 and white < 0.2)
    True
    """
    return _fit_many(np.asarray(e, dtype=np.float64)[None, :], np.asarray(gaps, dtype=np.float64))[0]


def _covariance(phi: float, white: float, distance: NDArray[np.float64]) -> NDArray[np.float64]:
    sigma = (1.0 - white) * phi**distance
    sigma[np.diag_indices_from(sigma)] += white
    return sigma


def correlation_variance(covariances: ArrayLike) -> NDArray[np.float64]:
    r"""First-order variance of the correlation of every pair of independent zero-mean Gaussian series (m, m).

    Parameters
    ----------
    covariances : array_like of shape (m, n, n)
        The covariance :math:`A_j` of each series (e.g. :math:`M_j \Sigma_j M_j^\top` for residuals).

    Returns
    -------
    ndarray of shape (m, m)
        :math:`\operatorname{tr}(A_a A_b) / (\operatorname{tr} A_a \operatorname{tr} A_b)` (Dutilleul, 1993): the
        variance of :math:`r_{ab}` (and of :math:`\operatorname{artanh} r_{ab}`) to first order when the two
        series are independent; 1/n for white series of n values.

    Examples
    --------
    >>> import numpy as np
    >>> float(correlation_variance(np.stack([np.eye(25), np.eye(25)]))[0, 1])
    0.04
    """
    covs = np.asarray(covariances, dtype=np.float64)
    traces = np.trace(covs, axis1=1, axis2=2)
    # tr(A_a A_b) for every pair at once (the covariances are symmetric): one matrix product of the flattened ones.
    flat = covs.reshape(covs.shape[0], -1)
    cross = flat @ flat.T
    return np.asarray(cross / np.outer(traces, traces), dtype=np.float64)


def gap_inflation(
    series: ArrayLike,
    steps: NDArray[np.float64] | None,
    operators: ArrayLike,
) -> NDArray[np.float64]:
    r"""The factor by which dependence in training time inflates the sieve's variance of every pair (m, m).

    Parameters
    ----------
    series : array_like of shape (m, n)
        Each test set's residual series, in checkpoint order.
    steps : ndarray of shape (n,) or None
        The checkpoints' training steps (None: evenly spaced).
    operators : array_like of shape (n, n) or (m, n, n)
        The residual operators :math:`M_j` of the control (one shared, or one per test set).

    Returns
    -------
    ndarray of shape (m, m)
        :math:`V(\Sigma^T_a, \Sigma^T_b) / V(\Sigma^I_a, \Sigma^I_b)` (module docstring); exactly 1 everywhere
        when the checkpoints are evenly spaced, 1 on the diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> e = rng.standard_normal((2, 30))
    >>> gap_inflation(e, np.arange(30.0) * 100, np.eye(30)).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    e = np.asarray(series, dtype=np.float64)
    m, n = e.shape
    if regular_steps(steps) or m < 2:
        return np.ones((m, m))
    assert steps is not None
    ops = np.asarray(operators, dtype=np.float64)
    hat = np.eye(n) - (np.broadcast_to(ops, (m, n, n)) if ops.ndim == 2 else ops)
    return training_time_model(e, steps, np.eye(n), hat)[0]


def training_time_model(
    series: NDArray[np.float64], steps: NDArray[np.float64], basis: NDArray[np.float64], mix: NDArray[np.float64]
) -> tuple[NDArray[np.float64], list[tuple[float, float]]]:
    r""":func:`gap_inflation` on residual operators in factored form, and each series' training-time fit.

    Parameters
    ----------
    series : ndarray of shape (m, n)
        Each test set's residual series, in checkpoint order.
    steps : ndarray of shape (n,)
        The checkpoints' training steps, increasing and not evenly spaced.
    basis, mix : ndarray of shape (n, r) and (m, r, r)
        The residual operators :math:`M_j = I - U K_j U^\top` (U = ``basis``, :math:`K_j` = ``mix[j]``), as the
        sieve's kernel holds them: the residual covariances then cost O(n² r) each, not O(n³).

    Returns
    -------
    tuple
        The factor (m, m) of :func:`gap_inflation`, and :math:`(\bar\phi, w)` of each series in training time
        (for :func:`time_innovations`).
    """
    m, n = series.shape
    time = (steps - steps[0]) / np.diff(steps).mean()
    in_time = np.abs(np.subtract.outer(time, time))
    position = np.arange(n, dtype=np.float64)
    in_index = np.abs(np.subtract.outer(position, position))
    variance = {}
    time_fits: list[tuple[float, float]] = []
    for label, distance, gaps in (("time", in_time, np.diff(time)), ("index", in_index, np.ones(n - 1))):
        covs = np.empty((m, n, n))
        fits = _fit_many(series, gaps)
        if label == "time":
            time_fits = fits
        for j, (phi, white) in enumerate(fits):
            sigma = _covariance(phi, white, distance)
            # M Σ Mᵀ with M = I − U K Uᵀ, without forming M: Σ − U K UᵀΣ − ΣU Kᵀ Uᵀ + U K (UᵀΣU) Kᵀ Uᵀ.
            projected = sigma @ basis  # (n, r)
            left = basis @ (mix[j] @ projected.T)  # U K UᵀΣ (Σ symmetric)
            covs[j] = sigma - left - left.T + basis @ (mix[j] @ (basis.T @ projected) @ mix[j].T) @ basis.T
        variance[label] = correlation_variance(covs)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(variance["index"] > 0, variance["time"] / variance["index"], 1.0)
    np.fill_diagonal(ratio, 1.0)
    return np.asarray(ratio, dtype=np.float64), time_fits
