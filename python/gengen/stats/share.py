r"""The global answer: what share of OOD pairs have a non-zero partial correlation, with an honest interval.

One model's :math:`m` pairs of :math:`p` OOD test sets each carry a p-value of "partial correlation 0". Too few
of them survive a per-pair multiplicity adjustment to answer "is there an overarching trend?", but their
distribution can: under the null the p-values are uniform, so an excess of small ones estimates the share of
non-null pairs (Storey's :math:`\hat\pi_1`).

The pairs are not independent: the pairs that share a test set share its residual series. Resampling pairs
would ignore that; the interval here comes from a delete-one-test-set jackknife (each test set's pairs are
left out together), the resampling unit whose dependence the pairs inherit. Chosen by simulation against a
normal mixture on Fisher z (docs/calibration.md, "The global share of co-moving pairs").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen.errors import InvalidArgumentError

__all__ = [
    "SHORT_RUN",
    "GlobalShare",
    "detectable_r",
    "global_share",
    "null_above_probability",
    "null_p_values",
    "share_variance",
    "storey_share",
]

#: Storey's tuning point: p-values above it are counted as (mostly) null.
DEFAULT_LAMBDA = 0.5
#: The fewest test sets the jackknife interval is given for: the smallest number the calibration covers
#: (docs/calibration.md); with fewer, the leave-one-out estimates are too few to measure a spread.
MIN_TESTSETS_INTERVAL = 12
#: Null data sets :func:`null_above_probability` simulates by default, and the sieve draws of each: enough that
#: the simulated null count's own noise adds about 5% to the share's variance (docs/calibration.md).
NULL_DRAWS = 20
NULL_SIEVE_DRAWS = 199
#: Runs with fewer checkpoints than this get the plain jackknife when the null count is simulated
#: (:func:`share_variance`): at 26 checkpoints the AR fits the null is simulated from still underestimate the
#: autocorrelation, the simulated count leans towards uniform p-values and the share is biased upwards (+0.068 with
#: no co-moving pair), so the corrected variance said "share > 0" in 6.7% of all-null replicates; at 40 it held
#: (docs/calibration.md, "The global share of co-moving pairs").
SHORT_RUN = 40
#: Burn-in of each simulated AR series (the fitted coefficients stay below 0.97 in modulus in practice:
#: 0.97^150 is about 0.01).
_BURN_IN = 150


@dataclass(frozen=True)
class GlobalShare:
    """Result of :func:`global_share`: one share, its standard error, interval and test, and what they rest on.

    Attributes
    ----------
    share : float
        Estimated share of pairs with a non-zero partial correlation *that the pairs' tests can show*,
        :math:`\\hat\\pi_1` clipped to [0, 1]: a non-null pair counts by :math:`1 - P(p > \\lambda)/q`, fully
        when its test always finds it, not at all when it cannot tell it from 0. With strong effects this is the
        share of non-zero pairs; with weak ones it is smaller, and the interval's lower end stays a lower bound
        of the share of non-zero pairs (docs/calibration.md, "What the interval estimates").
    share_unclipped : float
        :math:`\\hat\\pi_1` before clipping (can be negative by chance under the null; the interval is centred
        on it).
    se : float
        Jackknife standard error of :math:`\\hat\\pi_1` over test sets.
    ci_low, ci_high : float
        The interval :math:`\\hat\\pi_1 \\mp t_{p-1} \\mathrm{se}` clipped to [0, 1].
    p_positive : float
        One-sided p-value of "share > 0": :math:`P(T_{p-1} > \\hat\\pi_1 / \\mathrm{se})`.
    n_pairs, n_testsets : int
        Pairs with a finite p-value, and the test sets they name.
    ci_level : float
        Level of the interval.
    lambda_ : float
        Storey's :math:`\\lambda`.
    method : str
        How the share and its interval were computed.
    """

    share: float
    share_unclipped: float
    se: float
    ci_low: float
    ci_high: float
    p_positive: float
    n_pairs: int
    n_testsets: int
    ci_level: float
    lambda_: float
    method: str


def share_variance(n_checkpoints: float, null_simulated: bool) -> str:
    """The ``variance`` of :func:`global_share` the verdict uses: ``"jackknife"`` for a simulated null count on runs
    shorter than :data:`SHORT_RUN` checkpoints, else ``"corrected"``.

    Parameters
    ----------
    n_checkpoints : float
        The runs' (median) number of checkpoints; NaN when unknown (then ``"corrected"``).
    null_simulated : bool
        Whether the share counts against simulated null probabilities (``null_above``).

    Returns
    -------
    str
        ``"jackknife"`` or ``"corrected"``.

    Notes
    -----
    Measured on docs/calibration.md's grid (300 replicates per cell): with 26 checkpoints and the simulated null
    count the corrected variance said "share > 0" in 6.7% of all-null replicates (the count's bias, +0.068, not
    its spread: the corrected standard error, 0.087, exceeded the estimate's spread, 0.077); the plain jackknife
    in 3.3%, covering 96.7% (all-null) and 97.3% (10% co-moving). At 40 checkpoints the corrected variance held
    (2.3–4.3%). Between 26 and 40 the grid has no cell: the rule takes the measured side.

    Examples
    --------
    >>> share_variance(26, True), share_variance(40, True), share_variance(26, False)
    ('jackknife', 'corrected', 'corrected')
    """
    short = bool(np.isfinite(n_checkpoints) and n_checkpoints < SHORT_RUN)
    return "jackknife" if null_simulated and short else "corrected"


def storey_share(p: ArrayLike, lambda_: float = DEFAULT_LAMBDA) -> float:
    r"""Storey's estimate of the share of non-null tests, :math:`\hat\pi_1 = 1 - \hat\pi_0`, not clipped.

    Parameters
    ----------
    p : array_like
        P-values in [0, 1]; NaN values are left out.
    lambda_ : float
        Tuning point in (0, 1).

    Returns
    -------
    float
        :math:`1 - \#\{p_i > \lambda\} / ((1 - \lambda) m)`; NaN without a finite p-value.

    Notes
    -----
    Null p-values are uniform, so :math:`E\,\#\{p_i > \lambda\} = (1 - \lambda) m \pi_0 + m \pi_1
    P_1(p > \lambda)`: the estimate is unbiased when all tests are null and errs towards fewer non-null tests
    when some non-null tests have large p-values (weak effects, little power); it is not clipped, so that its
    sampling distribution stays centred at 0 under the null.

    References
    ----------
    Storey, J. D. (2002). A direct approach to false discovery rates. *JRSS B* 64, 479–498.

    Examples
    --------
    >>> storey_share([0.001, 0.01, 0.2, 0.6, 0.7, 0.9])
    0.0
    >>> round(storey_share([0.001, 0.01, 0.02, 0.04, 0.3, 0.8]), 4)
    0.6667
    """
    values = _checked_p(p)
    if not 0.0 < lambda_ < 1.0:
        raise InvalidArgumentError(f"lambda_: must lie strictly between 0 and 1, got {lambda_!r}")
    finite = values[np.isfinite(values)]
    if not len(finite):
        return float("nan")
    return float(1.0 - np.sum(finite > lambda_) / ((1.0 - lambda_) * len(finite)))


def global_share(
    p: ArrayLike,
    testset_a: ArrayLike,
    testset_b: ArrayLike,
    *,
    lambda_: float = DEFAULT_LAMBDA,
    ci_level: float = 0.95,
    variance: str = "corrected",
    null_above: ArrayLike | None = None,
) -> GlobalShare:
    r"""The share of pairs with a non-zero partial correlation, with an interval that resamples test sets.

    Parameters
    ----------
    p : array_like
        One p-value per pair (the row's own test of partial correlation 0; NaN rows are left out).
    testset_a, testset_b : array_like
        The pair's two test sets.
    lambda_ : float
        Storey's tuning point.
    ci_level : float
        Level of the interval.
    variance : {"corrected", "jackknife"}
        The standard error: the delete-one-test-set jackknife less the pairs' own variance, which it counts twice
        (the default: within −4% to +17% of the simulated spread), or the plain jackknife (conservative: with
        independent pairs its variance is about twice the true one).
    null_above : array_like, optional
        Per pair, the probability that its p-value exceeds ``lambda_`` when no pair co-moves
        (:func:`null_above_probability`, simulated from the data's own autocorrelation; in [0, 1]); NaN entries and
        the default take :math:`1 - \lambda`, the value for exact (uniform) null p-values. Given, it corrects the
        share for p-values that lean small or large.

    Returns
    -------
    GlobalShare
        The share, its standard error, interval and one-sided test of "share > 0".

    Notes
    -----
    With :math:`A = \sum_i a_i`, :math:`a_i = 1\{p_i > \lambda\}`, over the :math:`m` pairs and
    :math:`Q = \sum_i q_i` with :math:`q_i` the null probability of :math:`p_i > \lambda` (``null_above``;
    :math:`1 - \lambda` for uniform null p-values), :math:`\hat\pi_1 = 1 - A/Q`: :math:`E A = Q` when every pair
    is null. With :math:`q_i = 1 - \lambda` this is Storey's :math:`1 - A/((1-\lambda)m)`
    (:func:`storey_share`). Pairs that share a test set are dependent, so test sets are left out, never
    pairs: leaving out test set :math:`j` (its pairs' sums :math:`A_j`, :math:`Q_j`) gives
    :math:`\hat\pi_{1(j)} = 1 - (A - A_j)/(Q - Q_j)`, and over the :math:`p` test sets (at least
    :data:`MIN_TESTSETS_INTERVAL`) the jackknife variance (Efron and Stein, 1981)

    .. math::

        V_J = \frac{p - 1}{p} \sum_j (\hat\pi_{1(j)} - \bar\pi_{1(\cdot)})^2.

    Each pair sits in two test sets, so :math:`V_J` counts the pairs' own variance
    :math:`V_0 = \sum_i u_i^2 / Q^2`, :math:`u_i = a_i - (A/Q) q_i` (the linearised contribution of pair
    :math:`i`), twice and the dependence through shared test sets once. ``variance="corrected"`` (the default)
    takes :math:`\max(V_J - V_0, V_0)` (compare the dyadic-robust variance of Fafchamps and Gubert, 2007, and
    Aronow, Samii and Assenova, 2015, which is too small at 12–20 test sets): on uniform p-values and on p-values
    with test-set effects at 12, 20 and 40 test sets it is within −4% to +17% of the simulated spread, the plain
    jackknife up to 43% above. Interval :math:`\hat\pi_1 \mp t_{p-1,(1+\text{level})/2}\,\mathrm{se}`, clipped to
    [0, 1]; "share > 0" is tested by :math:`\hat\pi_1/\mathrm{se}` against :math:`t_{p-1}`. With fewer test
    sets, or when every leave-one-out estimate is the same (no spread to measure), the standard error, interval
    and test are NaN. Calibrated on docs/calibration.md's grid with ``null_above`` from
    :func:`null_above_probability` (without it, the sieve's p-values that lean small at lag-1 autocorrelation
    0.9 make "share > 0" wrong in 8.7% of all-null replicates).

    References
    ----------
    Storey, J. D. (2002). *JRSS B* 64, 479–498. Efron, B., Stein, C. (1981). The jackknife estimate of
    variance. *Ann. Statist.* 9, 586–596. Fafchamps, M., Gubert, F. (2007). *J. Dev. Econ.* 83, 326–350.
    Aronow, P. M., Samii, C., Assenova, V. A. (2015). Cluster-robust variance estimation for dyadic data.
    *Political Analysis* 23, 564–577.

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> pairs = list(itertools.combinations(range(12), 2))
    >>> p = np.random.default_rng(0).uniform(size=len(pairs))
    >>> result = global_share(p, [a for a, _ in pairs], [b for _, b in pairs], variance="jackknife")
    >>> result.n_pairs, result.n_testsets, round(result.share_unclipped, 3), round(result.se, 3)
    (66, 12, -0.03, 0.15)
    """
    values = _checked_p(p)
    first, second = np.asarray(testset_a, dtype=object), np.asarray(testset_b, dtype=object)
    if not (len(first) == len(second) == len(values)):
        raise InvalidArgumentError(
            f"testset_a, testset_b: need one name per p-value ({len(values)}), got {len(first)} and {len(second)}"
        )
    if not 0.0 < ci_level < 1.0:
        raise InvalidArgumentError(f"ci_level: must lie strictly between 0 and 1, got {ci_level!r}")
    if not 0.0 < lambda_ < 1.0:
        raise InvalidArgumentError(f"lambda_: must lie strictly between 0 and 1, got {lambda_!r}")
    if variance not in ("corrected", "jackknife"):
        raise InvalidArgumentError(f"variance: {variance!r} is not one of corrected, jackknife")
    null = _checked_null_above(null_above, len(values), lambda_)
    keep = np.isfinite(values)
    values, first, second, null = values[keep], first[keep], second[keep], null[keep]
    codes, names = pd.factorize(np.concatenate([first, second]))
    n_testsets, m = len(names), len(values)
    above = (values > lambda_).astype(float)
    estimate = float(1.0 - above.sum() / null.sum()) if m else float("nan")
    calibrated = null_above is not None and bool(np.any(null != 1.0 - lambda_))
    how = "a delete-one-test-set jackknife" + (", less the pairs' own variance" if variance == "corrected" else "")
    method = (
        f"Storey's pi1 = 1 - pi0 (lambda = {lambda_:g}) on the pairs' p-values"
        + (", its null count simulated from each test set's own AR fit" if calibrated else "")
        + f"; interval and test from {how} (t on test sets - 1 df)"
    )
    if n_testsets < MIN_TESTSETS_INTERVAL:
        nan = float("nan")
        share = float(np.clip(estimate, 0.0, 1.0)) if np.isfinite(estimate) else nan
        return GlobalShare(share, estimate, nan, nan, nan, nan, m, n_testsets, ci_level, lambda_, method)
    pair_a, pair_b = codes[:m], codes[m:]
    above_of = np.bincount(pair_a, above, n_testsets) + np.bincount(pair_b, above, n_testsets)
    null_of = np.bincount(pair_a, null, n_testsets) + np.bincount(pair_b, null, n_testsets)
    left = null.sum() - null_of
    with np.errstate(divide="ignore", invalid="ignore"):
        leave_out = 1.0 - (above.sum() - above_of) / left
    leave_out = leave_out[left > 0]
    count = len(leave_out)
    jackknife = (count - 1) / count * np.sum((leave_out - leave_out.mean()) ** 2)
    if variance == "corrected":
        # the jackknife counts the pairs' own variance twice; the share varies at least as much as if the pairs
        # were independent (which is that variance once)
        own = np.sum((above - above.sum() / null.sum() * null) ** 2) / null.sum() ** 2
        jackknife = max(jackknife - own, own)
    se = float(np.sqrt(max(jackknife, 0.0)))
    from scipy import stats as scipy_stats

    quantile = float(scipy_stats.t.ppf((1 + ci_level) / 2, count - 1))
    if not se > 0:  # every leave-one-out estimate equal: nothing to refer the share to
        nan = float("nan")
        return GlobalShare(
            float(np.clip(estimate, 0.0, 1.0)), estimate, nan, nan, nan, nan, m, n_testsets, ci_level, lambda_, method
        )
    p_positive = float(scipy_stats.t.sf(estimate / se, count - 1))
    p_positive = max(p_positive, float(np.finfo(float).tiny))  # never 0: below the float range
    return GlobalShare(
        share=float(np.clip(estimate, 0.0, 1.0)),
        share_unclipped=estimate,
        se=se,
        ci_low=float(np.clip(estimate - quantile * se, 0.0, 1.0)),
        ci_high=float(np.clip(estimate + quantile * se, 0.0, 1.0)),
        p_positive=p_positive,
        n_pairs=m,
        n_testsets=n_testsets,
        ci_level=ci_level,
        lambda_=lambda_,
        method=method,
    )


def null_above_probability(
    fitted: Any,
    covar: ArrayLike | None = None,
    *,
    lambda_: float = DEFAULT_LAMBDA,
    n_draws: int = NULL_DRAWS,
    n_boot: int = NULL_SIEVE_DRAWS,
    seed: int = 0,
    **sieve_options: Any,
) -> NDArray[np.float64]:
    r"""Per pair, the probability that its sieve p-value exceeds ``lambda_`` when no pair co-moves.

    Parameters
    ----------
    fitted : SievePartialCorrMatrix
        The data's own sieve fit (:func:`gengen.stats.sieve_partial_corr_matrix`): each test set's AR order and
        coefficients (bias-corrected) and the number of checkpoints.
    covar : array_like of shape (n,) or (n, q), optional
        The control the data were fitted with (e.g. the in-domain score).
    lambda_ : float
        Storey's tuning point.
    n_draws : int
        Null data sets simulated.
    n_boot : int
        Sieve draws per null data set.
    seed : int
        Seed of the simulation.
    **sieve_options
        ``method``, ``fit``, ``max_order`` and the GAM options the data were fitted with, passed on to
        :func:`~gengen.stats.sieve_partial_corr_matrix`.

    Returns
    -------
    ndarray of shape (m, m)
        Symmetric; entry (a, b) the share of null data sets in which pair (a, b)'s sieve p-value exceeds
        ``lambda_`` (its diagonal NaN). ``null_above`` of :func:`global_share`.

    Notes
    -----
    Each null data set draws every test set's series independently from its fitted AR model (normal
    innovations, a burn-in of 150 steps; started at zero when the fitted model is not stationary) and tests it as
    the data were tested, AR orders and coefficients refitted: the cross-correlations are 0 and each series
    keeps the data's own autocorrelation. The sieve's p-values then lean as they lean on the data: at lag-1
    autocorrelation 0.9 and 40 checkpoints its AR fit still underestimates the autocorrelation, and
    :math:`P(p > 0.5)` is about 0.46 rather than 0.5 (docs/calibration.md). The series need no ID trend:
    the residuals of the control remove it.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats import sieve_partial_corr_matrix
    >>> rng = np.random.default_rng(2)
    >>> ID = np.linspace(0.3, 0.8, 30)
    >>> scores = ID[:, None] * [0.5, 0.3, 0.2, 0.4] + 0.02 * rng.standard_normal((30, 4))
    >>> fitted = sieve_partial_corr_matrix(scores, ID, n_boot=199, seed=1)
    >>> above = null_above_probability(fitted, ID, n_draws=10, seed=3)
    >>> above.shape, bool(np.all((above[~np.eye(4, dtype=bool)] >= 0) & (above[~np.eye(4, dtype=bool)] <= 1)))
    ((4, 4), True)
    """
    if not 0.0 < lambda_ < 1.0:
        raise InvalidArgumentError(f"lambda_: must lie strictly between 0 and 1, got {lambda_!r}")
    draws = null_p_values(fitted, covar, n_draws=n_draws, n_boot=n_boot, seed=seed, **sieve_options)
    above = np.mean(draws > lambda_, axis=0)
    np.fill_diagonal(above, np.nan)
    return above


def null_p_values(
    fitted: Any,
    covar: ArrayLike | None = None,
    *,
    n_draws: int = NULL_DRAWS,
    n_boot: int = NULL_SIEVE_DRAWS,
    seed: int = 0,
    **sieve_options: Any,
) -> NDArray[np.float64]:
    r"""The sieve p-values of null data sets simulated from the data's own AR fits (no pair co-moves).

    The simulation of :func:`null_above_probability` (its Notes), each draw's p-value matrix kept: what a
    calibration needs to see the null distribution of a statistic of the p-values, not only each pair's
    probability of :math:`p > \lambda`.

    Parameters
    ----------
    fitted : SievePartialCorrMatrix
        The data's own sieve fit.
    covar : array_like of shape (n,) or (n, q), optional
        The control the data were fitted with.
    n_draws : int
        Null data sets simulated.
    n_boot : int
        Sieve draws per null data set.
    seed : int
        Seed of the simulation (the same seed gives the draws :func:`null_above_probability` counts).
    **sieve_options
        Passed on to :func:`~gengen.stats.sieve_partial_corr_matrix`.

    Returns
    -------
    ndarray of shape (n_draws, m, m)
        Draw d's matrix of sieve p-values.
    """
    from scipy.signal import lfilter

    from gengen.stats.sieve import sieve_partial_corr_matrix

    if int(n_draws) < 1:
        raise InvalidArgumentError(f"n_draws: must be at least 1, got {n_draws!r}")
    coefficients = np.asarray(fitted.ar_coef, dtype=float)
    orders = np.asarray(fitted.ar_order, dtype=int)
    n, m = int(fitted.n), len(orders)
    rng = np.random.default_rng(seed)
    models = []
    for j in range(m):
        phi = coefficients[j, : orders[j]]
        companion_radius = float(np.max(np.abs(np.roots(np.r_[1.0, -phi])))) if len(phi) else 0.0
        models.append((np.r_[1.0, -phi], _BURN_IN if companion_radius < 1.0 else 0))
    out = np.empty((int(n_draws), m, m))
    for draw in range(int(n_draws)):
        series = np.empty((n, m))
        for j, (denominator, burn) in enumerate(models):
            series[:, j] = lfilter([1.0], denominator, rng.standard_normal(n + burn))[burn:]
        result = sieve_partial_corr_matrix(series, covar, n_boot=n_boot, seed=int(rng.integers(2**31)), **sieve_options)
        out[draw] = np.asarray(result.p_value, dtype=float)
    return out


def detectable_r(
    se: ArrayLike,
    df: ArrayLike,
    n_tests: int,
    *,
    alpha: float = 0.05,
    adjust: str = "holm",
    power: float = 0.8,
) -> NDArray[np.float64]:
    r"""The smallest \|r\| a pair's test detects with the given power, after the multiplicity adjustment.

    Parameters
    ----------
    se : array_like
        Each row's standard error of :math:`\operatorname{artanh} r` (the AR-sieve ``se_z``, which carries the
        autocorrelation; :math:`1/\sqrt{n-3-k}` for independent checkpoints).
    df : array_like
        Degrees of freedom of the row's t reference (``inf`` for the normal), broadcast against ``se``.
    n_tests : int
        Pairs tested together (the adjustment's family size).
    alpha : float
        Level of the adjusted test.
    adjust : str
        The adjustment (:func:`gengen.stats.p_adjust`'s methods, or ``"maxT"``): every method but ``"none"``
        lets a lone strongest pair through at :math:`\alpha/m` (Holm's, Hochberg's, Hommel's and BH's first
        step, Bonferroni), so that level is used; ``"none"`` uses :math:`\alpha`.
    power : float
        Target power.

    Returns
    -------
    ndarray
        :math:`\tanh(\mathrm{se}\,\delta)`, with :math:`\delta` the non-centrality at which the two-sided
        test at level :math:`\alpha'` has the target power; NaN where ``se`` is not finite and positive.

    Notes
    -----
    The row's test refers :math:`T = \operatorname{artanh}(\hat r)/\mathrm{se}` to Student's t on
    :math:`\nu` df, so at a true :math:`\rho` it follows the non-central t with
    :math:`\delta = \operatorname{artanh}(\rho)/\mathrm{se}`. :math:`\delta` solves
    :math:`P(|T_{\nu,\delta}| > t_{\nu, 1-\alpha'/2}) = \text{power}` (bisection); with :math:`\nu = \infty`
    it is close to the closed form :math:`z_{1-\alpha'/2} + z_{\text{power}}`.

    References
    ----------
    Cohen, J. (1988). *Statistical power analysis for the behavioral sciences*, ch. 3 (the Fisher-z power of
    a correlation).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import norm
    >>> r = detectable_r([0.2], [np.inf], 1, adjust="none")
    >>> float(np.round(r[0], 4)), round(float(np.tanh(0.2 * (norm.isf(0.025) + norm.ppf(0.8)))), 4)
    (0.5082, 0.5082)
    >>> float(np.round(detectable_r(0.2, 20.0, 2016)[0], 3))
    0.861
    """
    from scipy import stats as scipy_stats

    if not 0.0 < alpha < 1.0:
        raise InvalidArgumentError(f"alpha: must lie strictly between 0 and 1, got {alpha!r}")
    if not 0.0 < power < 1.0:
        raise InvalidArgumentError(f"power: must lie strictly between 0 and 1, got {power!r}")
    if int(n_tests) < 1:
        raise InvalidArgumentError(f"n_tests: must be at least 1, got {n_tests!r}")
    level = alpha if adjust == "none" else alpha / int(n_tests)
    se_values, dof = np.broadcast_arrays(np.asarray(se, dtype=float).ravel(), np.asarray(df, dtype=float).ravel())
    usable = np.isfinite(se_values) & (se_values > 0)
    out = np.full(se_values.shape, np.nan)
    if not usable.any():
        return out
    nu_rows = np.where(np.isfinite(dof[usable]) & (dof[usable] > 0), dof[usable], np.inf)
    # The non-centrality depends on the df alone, and a table's rows share a few dfs: solve once per distinct df.
    nu, row_of_nu = np.unique(nu_rows, return_inverse=True)
    normal = ~np.isfinite(nu)
    finite_nu = np.where(normal, 1.0, nu)
    critical = np.where(normal, scipy_stats.norm.isf(level / 2), scipy_stats.t.isf(level / 2, finite_nu))

    def reached(delta: np.ndarray) -> np.ndarray:
        # the far tail by symmetry, P(T_delta < -c) = P(T_-delta > c) (scipy's nct.cdf gives NaN far out)
        far_tail = scipy_stats.nct.sf(critical, finite_nu, -delta)
        t_power = scipy_stats.nct.sf(critical, finite_nu, delta) + far_tail
        z_power = scipy_stats.norm.sf(critical - delta) + scipy_stats.norm.cdf(-critical - delta)
        return np.where(normal, z_power, t_power)

    # Bisection to a bracket 200 / 2^8 wide, then the Illinois variant of regula falsi (superlinear on this
    # smooth, increasing power curve): 20 evaluations of the non-central t reach 1e-12, where bisection took 60.
    low, high = np.zeros(len(nu)), np.full(len(nu), 200.0)
    for _ in range(8):
        middle = (low + high) / 2
        above = reached(middle) >= power
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    f_low, f_high = reached(low) - power, reached(high) - power
    # Where the power is not reached by 200 (a few df and many tests), high stays 200, as with bisection.
    bracketed = (f_low < 0) & (f_high >= 0)
    side = np.zeros(len(nu))  # +1 when the high end moved last, -1 the low end
    for _ in range(12):
        width = np.where(bracketed, f_high - f_low, 1.0)
        guess = np.clip(high - np.where(bracketed, f_high, 0.0) * (high - low) / width, low, high)
        f_guess = reached(guess) - power
        above = bracketed & (f_guess >= 0)  # a NaN tail (scipy's series failing) counts as below, as before
        below = bracketed & ~above
        f_guess = np.where(np.isfinite(f_guess), f_guess, -1.0)
        # Illinois: halve the value kept at the end that stayed put twice, so that it moves too
        f_low = np.where(above & (side > 0), f_low / 2, f_low)
        f_high = np.where(below & (side < 0), f_high / 2, f_high)
        high, f_high = np.where(above, guess, high), np.where(above, f_guess, f_high)
        low, f_low = np.where(below, guess, low), np.where(below, f_guess, f_low)
        side = np.where(above, 1.0, np.where(below, -1.0, 0.0))
        if np.all(~bracketed | (high - low < 1e-12)):
            break
    out[usable] = np.tanh(se_values[usable] * high[row_of_nu.ravel()])
    return out


def _checked_null_above(null_above: ArrayLike | None, m: int, lambda_: float) -> NDArray[np.float64]:
    """``null_above`` as a vector of m probabilities in [0, 1] (0 happens: a pair whose simulated p-values all
    stay below lambda), NaN entries (and ``None``) as ``1 - lambda_``."""
    if null_above is None:
        return np.full(m, 1.0 - lambda_)
    values = np.asarray(null_above, dtype=float).ravel()
    if len(values) != m:
        raise InvalidArgumentError(f"null_above: need one probability per p-value ({m}), got {len(values)}")
    finite = values[np.isfinite(values)]
    if np.any((finite < 0) | (finite > 1)):
        raise InvalidArgumentError("null_above: probabilities must lie in [0, 1]")
    return np.where(np.isfinite(values), values, 1.0 - lambda_)


def _checked_p(p: ArrayLike) -> NDArray[np.float64]:
    """``p`` as a float vector, every finite value in [0, 1]."""
    values = np.asarray(p, dtype=float).ravel()
    finite = values[np.isfinite(values)]
    if np.any((finite < 0) | (finite > 1)):
        raise InvalidArgumentError("p: p-values must lie in [0, 1]")
    return values
