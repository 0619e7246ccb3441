r"""Which control a run needs: is the in-domain (ID) effect on the test sets straight, or curved?

:func:`choose_control` decides, for one run (n checkpoints × m test sets, one ID covariate), whether the linear
control suffices or the capped GAM control (:func:`~gengen.stats.gam.gam_fit`) is needed: each test set's
dependence on ID is tested for curvature (:func:`curvature_test`, the squared-ID term of a quadratic
regression, with the checkpoints' AR(1) autocorrelation taken into account), and the GAM is chosen when at
least half of the test sets, and at least two, are curved at a Benjamini–Hochberg level.
:func:`choose_pooled_control` makes the choice once for several runs of one condition (seeds), from their
curvature tests combined per test set (:func:`stouffer_curvature`), counting a set as curved at an unadjusted
:data:`POOLED_LEVEL`; ``fit="auto"`` in the analysis calls it once
per pooling cell, so every seed of a condition gets the same control and no seed's control follows its own noise
(docs/calibration.md, "The automatic control").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import InvalidArgumentError
from gengen.stats.options import Fit
from gengen.stats.validation import as_covar, as_float_array

__all__ = [
    "MAX_PHI",
    "POOLED_LEVEL",
    "ControlChoice",
    "CurvatureTest",
    "choose_control",
    "choose_pooled_control",
    "curvature_test",
    "stouffer_curvature",
]

#: The largest AR(1) coefficient the curvature test corrects for: the Prais–Winsten transform of a series this
#: close to a random walk keeps about 1/7 of each checkpoint's information.
MAX_PHI = 0.99


@dataclass(frozen=True)
class CurvatureTest:
    """The curvature test of every test set (see :func:`curvature_test`).

    Attributes
    ----------
    statistic : ndarray of shape (m,)
        t statistic of the squared-ID coefficient after the AR(1) transform (NaN where untestable).
    p_value : ndarray of shape (m,)
        Two-sided p-value on ``df`` degrees of freedom.
    df : int
        n − 3.
    phi : ndarray of shape (m,)
        The AR(1) coefficient the transform used (the moment-matched estimate, in [0, :data:`MAX_PHI`]).
    phi_raw : ndarray of shape (m,)
        The lag-one autocorrelation of the quadratic fit's residuals, before the bias correction.
    """

    statistic: NDArray[np.float64]
    p_value: NDArray[np.float64]
    df: int
    phi: NDArray[np.float64]
    phi_raw: NDArray[np.float64]


@dataclass(frozen=True)
class ControlChoice:
    """The control :func:`choose_control` picked for one run.

    Attributes
    ----------
    fit : {"linear", "gam"}
        The control to use.
    n_curved : int
        Test sets whose curvature test rejects at the Benjamini–Hochberg level ``alpha``.
    n_columns : int
        Test sets that could be tested (finite p-value).
    reason : str
        One line saying why, e.g. ``"5 of 6 test sets curve in ID (BH 0.05); GAM control"``.
    test : CurvatureTest or None
        The per-test-set tests (None when none could be run).
    adjusted : ndarray of shape (m,)
        BH-adjusted p-values (NaN where untestable).
    """

    fit: Fit
    n_curved: int
    n_columns: int
    reason: str
    test: CurvatureTest | None
    adjusted: NDArray[np.float64]


def _cross_lag_sums(u: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Σ_k Σ_t u[t, k] v[t + d, k]`` for d = 0 … n − 1: the upper diagonal sums of ``u @ v.T`` (n × r each)."""
    n = u.shape[0]
    return np.asarray(sum(np.correlate(v[:, k], u[:, k], "full")[n - 1 :] for k in range(u.shape[1])))


def _residual_lag_sums(q: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""The lag sums :math:`s_d = \sum_{|s - t| = d} X_{st}` (d = 0 … n − 1) of :math:`X = MAM` and :math:`X = M`,
    with :math:`M = I - QQ^\top` the residual maker of the orthonormal ``q`` (n × r) and :math:`A = (L + L^\top)/2`
    the symmetric lag-one matrix, without forming either n × n matrix.

    With :math:`P = AQ` and :math:`B = Q^\top P`, :math:`MAM = A - QP^\top - PQ^\top + QBQ^\top`, each term's
    diagonal sums a sum of r cross-correlations of columns (O(n² r) instead of the O(n³) product).
    """
    n = q.shape[0]
    p = np.zeros_like(q)  # A @ Q: half the sum of each row's two neighbours
    p[1:] += q[:-1]
    p[:-1] += q[1:]
    p *= 0.5
    lag = np.zeros(n)
    lag[1:2] = 0.5 * (n - 1)  # A's first upper diagonal
    numerator = lag - _cross_lag_sums(q, p) - _cross_lag_sums(p, q) + _cross_lag_sums(q @ (q.T @ p), q)
    denominator = -_cross_lag_sums(q, q)
    denominator[0] += n
    numerator[1:] *= 2.0
    denominator[1:] *= 2.0
    return numerator, denominator


def _moment_matched_phi(
    raw: NDArray[np.float64], numerator: NDArray[np.float64], denominator: NDArray[np.float64]
) -> NDArray[np.float64]:
    r"""The φ whose expected residual lag-one autocorrelation is ``raw``, for every entry of ``raw`` at once:
    solves :math:`g(\phi) = \hat\phi`.

    :math:`g(\phi) = \sum_d \phi^d a_d / \sum_d \phi^d b_d` with ``numerator`` a and ``denominator`` b the lag sums
    of :math:`MAM` and :math:`M`, i.e. :math:`\operatorname{tr}(MAMR_\phi)/\operatorname{tr}(MR_\phi)`. g
    increases with φ; outside :math:`[g(0), g(\phi_{\max})]` the end is returned, inside it 60 bisection steps
    (all entries together) find the root.
    """

    def g(phi: NDArray[np.float64]) -> NDArray[np.float64]:
        weights = np.empty((numerator.size, phi.size))  # φ^d (d = 0 … n − 1) by doubling: φ^(d + 2^k) = φ^d φ^(2^k)
        weights[0] = 1.0
        power, filled = phi, 1
        while filled < numerator.size:
            step = min(filled, numerator.size - filled)
            np.multiply(weights[:step], power, out=weights[filled : filled + step])
            power, filled = power * power, filled + step
        return np.asarray((numerator @ weights) / (denominator @ weights), dtype=np.float64)

    values = np.asarray(raw, dtype=np.float64)
    low, high = np.zeros(values.size), np.full(values.size, MAX_PHI)
    for _ in range(60):
        middle = 0.5 * (low + high)
        below = g(middle) < values
        low = np.where(below, middle, low)
        high = np.where(below, high, middle)
    phi = 0.5 * (low + high)
    phi = np.where(values <= g(np.zeros(values.size)), 0.0, phi)
    return np.where(values >= g(np.full(values.size, MAX_PHI)), MAX_PHI, phi)


#: Fewest checkpoints for a curvature test (a quadratic fit leaves n − 3 residual degrees of freedom).
MIN_CHECKPOINTS = 6


def curvature_test(scores: ArrayLike, covar: ArrayLike) -> CurvatureTest:
    r"""Does each test set curve in ID? The AR(1)-corrected t-test of the squared-ID term.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint, in training order.
    covar : array_like of shape (n,) or (n, 1)
        The ID score, in the same order.

    Returns
    -------
    CurvatureTest
        ``statistic``, ``p_value``, ``df``, ``phi``, ``phi_raw`` per test set.

    Notes
    -----
    With :math:`c_t = (z_t - \bar z)/\max_s |z_s - \bar z|` and :math:`X = [1, c, c^2]`, each column y is fitted by
    least squares, :math:`e = My`, :math:`M = I - X(X^\top X)^{-1}X^\top`, and
    :math:`\hat\phi = \sum_t e_t e_{t-1} / \sum_t e_t^2`. That estimate is biased towards zero, strongly so on
    short runs whose ID is a smooth trend (the quadratic absorbs the noise's slow part): at n = 20 and φ = 0.9 it
    averages 0.4. It is corrected by moments: :math:`\tilde\phi` solves
    :math:`\operatorname{tr}(MAMR_{\tilde\phi})/\operatorname{tr}(MR_{\tilde\phi}) = \hat\phi`, with
    :math:`A = (L + L^\top)/2` the symmetric lag-one matrix and :math:`(R_\phi)_{st} = \phi^{|s-t|}` the AR(1)
    correlation, clipped to :math:`[0, 0.99]`. The Prais–Winsten transform
    :math:`y^*_1 = \sqrt{1-\tilde\phi^2}\,y_1`, :math:`y^*_t = y_t - \tilde\phi y_{t-1}` (and the same for X)
    whitens AR(1) noise, and the ordinary t-test of the :math:`c^2` coefficient on :math:`y^* \sim X^*` has
    :math:`n - 3` degrees of freedom (exact for Gaussian AR(1) noise of known φ). Without the correction
    (φ = 0: the ordinary F-test of the quadratic term) a linear ID effect with AR(1) noise of φ = 0.5 is called
    curved in 17–24% of test sets at n = 20–100 and at φ = 0.9 in 40–63%; see :func:`choose_control` for the
    corrected rates.

    References
    ----------
    Prais, S. J. & Winsten, C. B. (1954). Trend estimators and serial correlation. Cowles Commission
    Discussion Paper 383. Kendall, M. G. (1954). Note on bias in the estimation of autocorrelation.
    *Biometrika* 41, 403–404 (the bias the moment matching removes).

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats.control_choice import curvature_test
    >>> z = np.linspace(0, 1, 30)
    >>> noise = 0.01 * np.cos(np.arange(30) * 2.1)
    >>> test = curvature_test(np.column_stack([z + noise, np.sqrt(z) + noise]), z)
    >>> test.df, bool(test.p_value[0] > 0.05), bool(test.p_value[1] < 1e-6)
    (27, True, True)
    """
    data = as_float_array("scores", scores)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2:
        raise InvalidArgumentError(f"scores: must be one- or two-dimensional, got shape {data.shape}")
    n, m = data.shape
    control = as_covar(covar, n)
    if control.shape[1] != 1:
        raise InvalidArgumentError(f"covar: the curvature test takes exactly one control, got {control.shape[1]}")
    if not (np.isfinite(data).all() and np.isfinite(control).all()):
        raise InvalidArgumentError("scores: must be finite (no NaN or infinity)")
    nan = np.full(m, np.nan)
    z = control[:, 0]
    if n < MIN_CHECKPOINTS or np.unique(z).size < 3:
        return CurvatureTest(nan, nan.copy(), n - 3, nan.copy(), nan.copy())
    c = z - z.mean()
    c = c / np.abs(c).max()
    design = np.column_stack([np.ones(n), c, c**2])
    q, _ = np.linalg.qr(design)
    numerator, denominator = _residual_lag_sums(q)
    statistic, p_value, phi_used, phi_raw = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    residuals = data - q @ (q.T @ data)
    total = np.einsum("tj,tj->j", residuals, residuals)
    # A column the quadratic fits exactly has no noise to test against.
    noisy = np.flatnonzero(total > 1e-24 * np.maximum(np.einsum("tj,tj->j", data, data), 1e-300))
    if noisy.size:
        e = residuals[:, noisy]
        phi_raw[noisy] = np.einsum("tj,tj->j", e[1:], e[:-1]) / total[noisy]
        phi = _moment_matched_phi(phi_raw[noisy], numerator, denominator)
        phi_used[noisy] = phi
        statistic[noisy] = _prais_winsten_t(design, data[:, noisy], phi)
        for j in noisy[np.isfinite(statistic[noisy])]:
            p_value[j] = _core.t_two_sided(float(statistic[j]), float(n - 3))
    return CurvatureTest(statistic, p_value, n - 3, phi_used, phi_raw)


def _prais_winsten_t(
    design: NDArray[np.float64], y: NDArray[np.float64], phi: NDArray[np.float64]
) -> NDArray[np.float64]:
    r"""The t statistic of the last coefficient of each column of ``y`` on ``design`` after that column's
    Prais–Winsten transform with its ``phi`` (NaN where its variance is not positive), all columns at once.

    With :math:`X^* = QR` (one QR per column, stacked), the coefficient is :math:`(Q^\top y^*)_p / R_{pp}` and its
    variance :math:`s^2 / R_{pp}^2`, so :math:`t = \operatorname{sign}(R_{pp}) (Q^\top y^*)_p / s` with
    :math:`s^2 = \lVert y^* - QQ^\top y^* \rVert^2 / (n - p)`: the least-squares fit's t, without forming the inverse.
    """
    n, p = design.shape
    first = np.sqrt(1.0 - phi * phi)
    x_star = np.empty((phi.size, n, p))  # (columns, n, p)
    x_star[:, 0, :] = first[:, None] * design[0]
    x_star[:, 1:, :] = design[None, 1:, :] - phi[:, None, None] * design[None, :-1, :]
    y_star = np.empty((n, phi.size))
    y_star[0] = first * y[0]
    y_star[1:] = y[1:] - phi * y[:-1]
    q, r = np.linalg.qr(x_star)
    projected = np.einsum("jtp,tj->jp", q, y_star)
    rest = y_star - np.einsum("jtp,jp->tj", q, projected)
    scale = np.einsum("tj,tj->j", rest, rest) / (n - p)
    last = r[:, p - 1, p - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = scale / (last * last)
        statistic = projected[:, p - 1] / last / np.sqrt(variance)
    return np.where(variance > 0, statistic, np.nan)


def choose_control(scores: ArrayLike, covar: ArrayLike, *, alpha: float = 0.05) -> ControlChoice:
    r"""The control one run needs: ``"gam"`` when most of its test sets curve in ID, ``"linear"`` otherwise.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint, in training order.
    covar : array_like of shape (n,) or (n, q)
        The control; the choice is made for exactly one (with another number of controls the linear
        control is kept, and ``reason`` says so).
    alpha : float, default 0.05
        Benjamini–Hochberg level of the per-test-set curvature tests.

    Returns
    -------
    ControlChoice
        ``fit``, ``n_curved``, ``n_columns``, ``reason``, ``test``, ``adjusted``.

    Notes
    -----
    Each test set's curvature p-value :math:`p_j` comes from :func:`curvature_test` (the AR(1)-corrected t-test of
    the squared-ID coefficient). With :math:`\tilde p_j` their Benjamini–Hochberg adjustment over the
    :math:`m'` test sets with a finite p-value, :math:`C = \#\{j: \tilde p_j \le \alpha\}` and

    .. math::

        \text{fit} = \begin{cases} \text{gam} & C \ge \max(\min(2, m'), \lceil m'/2 \rceil), \\
        \text{linear} & \text{otherwise.} \end{cases}

    A linear control leaves a curved ID effect in every residual that follows it, and two test sets then
    correlate through it; one curved test set alone correlates with nothing (its residual's curve has no
    partner), so at least two must curve, and the group's control follows the majority.

    Measured on gengen's simulated runs (``gengen._core.simulate_run``: ID a saturating learning curve, each
    OOD set ``0.2 + b_j f(x) + 0.02 e_j`` with AR(1) noise e of coefficient φ; 300 runs per cell), the
    fraction of runs choosing the GAM with 2 / 6 test sets:

    ==========  =====  =============  =============  =============  =============
    truth f      φ      n = 11         n = 20         n = 40         n = 100
    ==========  =====  =============  =============  =============  =============
    linear       0      0.000 / 0.000  0.003 / 0.000  0.007 / 0.000  0.003 / 0.000
    linear       0.5    0.003 / 0.007  0.010 / 0.010  0.003 / 0.003  0.000 / 0.000
    linear       0.9    0.010 / 0.023  0.023 / 0.030  0.010 / 0.007  0.013 / 0.000
    saturating   0      0.910 / 0.773  0.977 / 0.957  0.993 / 0.997  1.000 / 1.000
    saturating   0.5    0.943 / 0.900  0.970 / 0.960  0.977 / 0.967  1.000 / 1.000
    saturating   0.9    1.000 / 1.000  1.000 / 1.000  1.000 / 1.000  1.000 / 1.000
    ==========  =====  =============  =============  =============  =============

    The uncorrected test (φ = 0 throughout, the ordinary F-test of the squared term) calls a linear test set
    curved in 17–24% of runs at φ = 0.5 and 40–63% at φ = 0.9 (n = 20–100).

    References
    ----------
    Benjamini, Y. & Hochberg, Y. (1995). Controlling the false discovery rate. *JRSS B* 57(1), 289–300.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats.control_choice import choose_control
    >>> z = np.linspace(0, 1, 30)
    >>> noise = 0.01 * np.cos(np.outer(np.arange(30), [2.1, 1.3, 2.9]))
    >>> choose_control(z[:, None] + noise, z).fit
    'linear'
    >>> choice = choose_control(np.sqrt(z)[:, None] + noise, z)
    >>> choice.fit, choice.reason
    ('gam', '3 of 3 test sets curve in ID (BH 0.05); GAM control')
    """
    if not (isinstance(alpha, float | int) and 0.0 < float(alpha) < 1.0):
        raise InvalidArgumentError(f"alpha: must lie strictly between 0 and 1, got {alpha!r}")
    data = as_float_array("scores", scores)
    if data.ndim == 1:
        data = data[:, None]
    n, m = data.shape
    control = as_covar(covar, n)
    nan = np.full(m, np.nan)
    if control.shape[1] != 1:
        reason = f"automatic control choice needs exactly one control (got {control.shape[1]}); linear control"
        return ControlChoice("linear", 0, 0, reason, None, nan)
    test = curvature_test(data, control)
    tested = np.isfinite(test.p_value)
    n_columns = int(tested.sum())
    if n_columns == 0:
        reason = (
            f"too few checkpoints or ID values to test for curvature (n = {n}, "
            f"{np.unique(control[:, 0]).size} distinct ID values); linear control"
        )
        return ControlChoice("linear", 0, 0, reason, test, nan)
    adjusted = nan.copy()
    adjusted[tested] = _core.p_adjust(np.ascontiguousarray(test.p_value[tested]), "BH")
    n_curved = int((adjusted[tested] <= alpha).sum())
    # Two curved test sets make a spurious pair; one alone correlates with nothing.
    needed = max(min(2, n_columns), math.ceil(n_columns / 2))
    fit: Fit = "gam" if n_curved >= needed else "linear"
    control_name = "GAM control" if fit == "gam" else "linear control"
    reason = f"{n_curved} of {n_columns} test sets curve in ID (BH {alpha:g}); {control_name}"
    return ControlChoice(fit, n_curved, n_columns, reason, test, adjusted)


def stouffer_curvature(tests: list[CurvatureTest]) -> NDArray[np.float64]:
    r"""Each test set's curvature p-value over several runs: Stouffer's combination of the runs' signed tests.

    Parameters
    ----------
    tests : list of CurvatureTest
        One per run, each over the same m test sets (NaN where a run could not test one).

    Returns
    -------
    ndarray of shape (m,)
        Two-sided p-value of :math:`Z_j = \sum_r z_{rj} / \sqrt{R_j}` (NaN where no run tested the set).

    Notes
    -----
    Run r's t statistic :math:`t_{rj}` on :math:`n_r - 3` degrees of freedom becomes the normal score with the
    same one-sided tail, :math:`z_{rj} = \operatorname{sign}(t_{rj})\,\Phi^{-1}(1 - p_{rj}/2)` with :math:`p_{rj}`
    its two-sided p-value; the :math:`R_j` runs that tested set j add up. Seeds of one condition share the
    curve of their ID effect, so the signs agree where the curvature is real and the evidence grows as
    :math:`\sqrt{R_j}`; noise of either sign cancels. With one run the p-value is that run's own.

    References
    ----------
    Stouffer, S. A., Suchman, E. A., DeVinney, L. C., Star, S. A. & Williams, R. M. (1949). *The American
    Soldier*, vol. 1. Princeton University Press.
    """
    if not tests:
        raise InvalidArgumentError("tests: at least one run's curvature test is needed")
    m = tests[0].p_value.size
    if any(test.p_value.size != m for test in tests):
        raise InvalidArgumentError("tests: every run must test the same test sets")
    total, count = np.zeros(m), np.zeros(m)
    for test in tests:
        finite = np.isfinite(test.p_value) & np.isfinite(test.statistic)
        for j in np.flatnonzero(finite):
            total[j] += math.copysign(-_core.normal_quantile(float(test.p_value[j]) / 2.0), test.statistic[j])
            count[j] += 1
    p_value = np.full(m, np.nan)
    for j in np.flatnonzero(count):
        p_value[j] = _core.normal_two_sided(float(total[j] / math.sqrt(count[j])))
    return p_value


#: The unadjusted level at which ``fit="auto"``'s pooled choice counts a test set as curved (measured on the
#: contract's grid against BH at 0.05: docs/calibration.md, "The automatic control").
POOLED_LEVEL = 0.20


def choose_pooled_control(
    tests: list[CurvatureTest], *, level: float = POOLED_LEVEL, adjust: bool = False, unit: str = "run"
) -> ControlChoice:
    r"""One control for several runs of one condition (seeds), from their pooled curvature evidence.

    Parameters
    ----------
    tests : list of CurvatureTest
        Each run's :func:`curvature_test`, over the same m test sets in the same order (NaN where a run could
        not test one).
    level : float, default :data:`POOLED_LEVEL` (0.20)
        A test set counts as curved when its pooled p-value (BH-adjusted when ``adjust``) is at most ``level``.
    adjust : bool, default False
        Benjamini–Hochberg-adjust the pooled p-values first (with ``level=0.05``, :func:`choose_control`'s rule).
    unit : str, default "run"
        What the runs are called in ``reason``.

    Returns
    -------
    ControlChoice
        As :func:`choose_control`; ``test`` is the run's test when there is one run, else None (the runs' tests
        are pooled); ``adjusted`` the pooled p-values (BH-adjusted when ``adjust``).

    Notes
    -----
    The runs' tests are combined per test set by :func:`stouffer_curvature` into :math:`p_j`; with
    :math:`C = \#\{j: p_j \le \text{level}\}` over the :math:`m'` test sets with a finite :math:`p_j`, the GAM is
    chosen when :math:`C \ge \max(\min(2, m'), \lceil m'/2 \rceil)` (:func:`choose_control`'s floor of two and
    majority), else the line. Every run of the condition gets the same control, so a seed's control does not follow
    its own noise, and a curvature the seeds share, too weak to see in any one of them, is seen in their sum.

    Why an unadjusted 0.20 rather than :func:`choose_control`'s BH 0.05: a run whose curvature the test misses keeps
    the line and with it the curve the line leaves in both residuals of a pair, the more so the closer the test
    came to rejecting; the lenient level leaves fewer such runs on the line. On the contract's item-level cells
    (log-spaced, N = 30,000) the main null pair's type-I falls from 0.073 to 0.053, and on realistic saturating
    curves (n = 20) the runs left on the line reject 0.083 instead of 0.185, while a linear link with AR(1) 0.9
    noise, where the GAM always rejects 0.090, gets the GAM in 11% of runs and stays at 0.027
    (docs/calibration.md, "The automatic control"). The majority keeps the rule from drifting to the GAM always as
    test sets are added: under a straight truth each set passes 0.20 a fifth of the time.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats.control_choice import choose_pooled_control, curvature_test
    >>> z = np.linspace(0, 1, 30)
    >>> tests = [curvature_test(np.sqrt(z)[:, None] + 0.01 * np.cos(np.outer(np.arange(30), [2.1 + s, 1.3 + s])), z)
    ...          for s in (0.0, 0.4)]
    >>> choose_pooled_control(tests, unit="seed").reason
    '2 of 2 test sets curve in ID at p ≤ 0.2 over 2 seeds (Stouffer); GAM control'
    """
    if not (isinstance(level, float | int) and 0.0 < float(level) < 1.0):
        raise InvalidArgumentError(f"level: must lie strictly between 0 and 1, got {level!r}")
    pooled = stouffer_curvature(tests)
    tested = np.isfinite(pooled)
    n_columns = int(tested.sum())
    adjusted = np.full(pooled.size, np.nan)
    first = tests[0] if len(tests) == 1 else None
    if n_columns == 0:
        reason = "too few checkpoints or ID values to test for curvature; linear control"
        return ControlChoice("linear", 0, 0, reason, first, adjusted)
    values = np.ascontiguousarray(pooled[tested])
    adjusted[tested] = _core.p_adjust(values, "BH") if adjust else values
    n_curved = int((adjusted[tested] <= level).sum())
    needed = max(min(2, n_columns), math.ceil(n_columns / 2))
    fit: Fit = "gam" if n_curved >= needed else "linear"
    control_name = "GAM control" if fit == "gam" else "linear control"
    test_name = f"BH {level:g}" if adjust else f"p ≤ {level:g}"
    runs = f" over {len(tests)} {unit}s (Stouffer)" if len(tests) > 1 else ""
    reason = f"{n_curved} of {n_columns} test sets curve in ID at {test_name}{runs}; {control_name}"
    return ControlChoice(fit, n_curved, n_columns, reason, first, adjusted)
