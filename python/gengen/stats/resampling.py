"""Resampling inference for partial correlations: Freedman–Lane permutation tests and bootstrap intervals.

Checkpoint trajectories are autocorrelated; the "block" and "circular" schemes keep neighbouring checkpoints
together, "free" and "iid" treat them as exchangeable.

Limits
------
Sizes are checked before anything is allocated (:mod:`gengen.stats.limits`): at most ``MAX_RESAMPLES`` (10^7)
permutations or bootstrap replicates per call, at most 256 threads (or the number of CPUs if larger), and no
single array (index tables, kept bootstrap replicates) above half the machine's memory or 16 GiB. Beyond them
:class:`~gengen.errors.InvalidArgumentError` says how much the call would take. A block length that makes one
block of all checkpoints is refused (nothing could be resampled), and a scheme with fewer than 20 distinct
permutations warns that small p-values are out of reach.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.stats import limits
from gengen.stats._docs import shared_doc
from gengen.stats.controls import Control, FitArgument, as_control
from gengen.stats.options import (
    BOOTSTRAP_SCHEMES,
    DEFAULT_CI_LEVEL,
    DEFAULT_FIT,
    DEFAULT_INTERVAL_METHOD,
    DEFAULT_METHOD,
    DEFAULT_N_BOOT,
    DEFAULT_N_PERM,
    INTERVAL_METHODS,
    PERMUTATION_SCHEMES,
    RESIDUAL_METHODS,
    BootstrapScheme,
    IntervalMethod,
    PermutationScheme,
    ResidualMethod,
)
from gengen.stats.validation import (
    as_runs,
    check_block_length,
    check_choice,
    check_count,
    check_seed,
    check_threads,
    one_run,
)

__all__ = [
    "BootstrapCI",
    "PermutationTest",
    "bootstrap_ci",
    "bootstrap_ci_batch",
    "bootstrap_indices",
    "default_block_length",
    "permutation_indices",
    "permutation_test",
    "permutation_test_batch",
]


@dataclass(frozen=True)
class PermutationTest:
    """Freedman–Lane permutation p-values for every pair of columns.

    What :func:`permutation_test` returns (:func:`permutation_test_batch`: one per run). No p-value is below
    1/(n_perm + 1), the resolution the number of permutations allows.

    Attributes
    ----------
    r : ndarray of shape (m, m)
        Observed partial correlations.
    p_value : ndarray of shape (m, m)
        Two-sided p = (b + 1)/(n_perm + 1), b the permutations with |r*| ≥ |r|.
    p_fwer : ndarray of shape (m, m) or None
        Max-|r| family-wise p-values across the pairs of the run (when ``family_wise=True``).
    n_perm : int
    scheme : str
    block_length : int or None
        Block length used by the "block" scheme.
    mirror : bool
    seed : int
    labels : list of str or None
    """

    r: NDArray[np.float64]
    p_value: NDArray[np.float64]
    p_fwer: NDArray[np.float64] | None
    n_perm: int
    scheme: str
    block_length: int | None
    mirror: bool
    seed: int
    labels: list[str] | None


@dataclass(frozen=True)
class BootstrapCI:
    """Bootstrap confidence intervals of the partial correlation of every pair of columns.

    What :func:`bootstrap_ci` returns (:func:`bootstrap_ci_batch`: one per run).

    Attributes
    ----------
    r : ndarray of shape (m, m)
        Observed partial correlations.
    ci_low, ci_high : ndarray of shape (m, m)
        Interval bounds (NaN where no interval exists, with a warning).
    n_valid : ndarray of shape (m, m)
        Replicates that had a partial correlation (degenerate resamples are left out).
    n_boot : int
    scheme : str
    block_length : int or None
    ci_level : float
    ci_method : str
    seed : int
    labels : list of str or None
    """

    r: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    n_valid: NDArray[np.int64]
    n_boot: int
    scheme: str
    block_length: int | None
    ci_level: float
    ci_method: str
    seed: int
    labels: list[str] | None


@shared_doc
def permutation_test(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    n_perm: int = DEFAULT_N_PERM,
    scheme: PermutationScheme = "free",
    block_length: int | None = None,
    mirror: bool = False,
    method: ResidualMethod = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    family_wise: bool = False,
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> PermutationTest:
    r"""Freedman–Lane permutation test of the partial correlation of every pair of columns.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint (in training order: the block and circular schemes
        rely on it).
    %(covar)s
    n_perm : int
        Number of permutations m.
    scheme : {"free", "block", "circular"}
        "free": any permutation of checkpoints (exchangeable data). "block": contiguous blocks of
        ``block_length`` checkpoints (the last may be shorter) put in random order. "circular": a random
        circular shift, reversed with probability ½ when ``mirror``. Checkpoint trajectories are
        autocorrelated; "free" then overstates significance.
    block_length : int, optional
        Default :func:`default_block_length` (⌈n^{1/3}⌉).
    mirror : bool
        With "circular", also use reversed shifts.
    method : {"pearson", "spearman"}
        Kendall's partial τ has no residual form, so it has no Freedman–Lane test.
    fit : Linear, Gam, "linear" or "gam"
        The control; GAM options ``k``, ``gam_method``, ``gam_basis``. Under the GAM control each column's
        smoother is fixed at the smoothing parameter chosen on the observed data and reapplied to every
        permuted copy (:math:`M_b(\hat y_b + P e_b)`), as the projection is in the linear scheme.
    family_wise : bool
        Also return max-|r| family-wise p-values across the pairs of the run.
    seed : int
        Permutation i is drawn from its own stream derived from (seed, i): the result depends on the seed
        only, not on ``n_threads``.
    %(threads)s
    %(gam_options)s

    Returns
    -------
    PermutationTest
        The estimates and their permutation p-values for every pair.

    Notes
    -----
    For the pair (a, b), a < b: the reduced-model residuals :math:`e_b = M y_b` (M the residual-maker of
    :math:`[1, Z]`) are permuted and residualised again, :math:`r^* = \operatorname{corr}(e_a, M P e_b)`;
    then :math:`p = (1 + \#\{|r^*| \ge |r|\})/(1 + m)`, counting with a relative slack of 1e-10 so that a
    permutation reproducing the data always counts. The same permutations serve all pairs, which gives the
    family-wise :math:`p_{\text{FWER}}(a, b) = (1 + \#\{\max_{c<d} |r^*_{cd}| \ge |r_{ab}|\})/(1 + m)`.

    References
    ----------
    Freedman, D., & Lane, D. (1983). A nonstochastic interpretation of reported significance levels.
    *Journal of Business & Economic Statistics*, 1(4), 292–298.
    Winkler, A. M., Ridgway, G. R., Webster, M. A., Smith, S. M., & Nichols, T. E. (2014). Permutation
    inference for the general linear model. *NeuroImage*, 92, 381–397.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> id_score = np.linspace(0.5, 0.9, 40)
    >>> shared = rng.normal(0, 0.02, 40)
    >>> scores = np.column_stack([id_score + shared + rng.normal(0, 0.01, 40) for _ in range(2)])
    >>> result = stats.permutation_test(scores, id_score, n_perm=999, seed=1)
    >>> float(result.p_value[0, 1])
    0.001
    """
    return cast(PermutationTest, one_run(permutation_test_batch, locals()))


@shared_doc
def permutation_test_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    n_perm: int = DEFAULT_N_PERM,
    scheme: PermutationScheme = "free",
    block_length: int | None = None,
    mirror: bool = False,
    method: ResidualMethod = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    family_wise: bool = False,
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[PermutationTest]:
    """:func:`permutation_test` for many runs at once, in parallel over runs and permutations.

    Every run of the same length sees the same permutations.

    Parameters
    ----------
    %(runs)s
    n_perm : int
        Number of permutations.
    scheme : {"free", "block", "circular"}
        As in :func:`permutation_test`.
    block_length : int, optional
        Default :func:`default_block_length` of each run's length.
    mirror : bool
        With "circular", also use reversed shifts.
    method : {"pearson", "spearman"}
        As in :func:`permutation_test`.
    fit : Linear, Gam, "linear" or "gam"
        As in :func:`permutation_test`.
    family_wise : bool
        Also return max-|r| family-wise p-values across the pairs of each run.
    seed : int
        As in :func:`permutation_test`.
    %(threads)s
    %(gam_options)s

    Returns
    -------
    list of PermutationTest
        In the order of ``scores``.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> runs = [rng.normal(size=(30, 3)) for _ in range(2)]
    >>> [r.p_value.shape for r in stats.permutation_test_batch(runs, n_perm=99, scheme="block")]
    [(3, 3), (3, 3)]
    """
    check_choice("method", method, RESIDUAL_METHODS)
    check_choice("scheme", scheme, PERMUTATION_SCHEMES)
    control, (tables, covars, labels), n_perm, seed = _checked_runs(
        fit, gam_options, scores, covar, "n_perm", n_perm, 1, seed
    )
    block_length = check_block_length(block_length)
    n_threads = check_threads(n_threads)
    _warn_if_few_permutations(tables, scheme, block_length, bool(mirror))
    results = _core.permutation_test_batch(
        tables,
        covars,
        method,
        n_perm,
        scheme,
        block_length,
        bool(mirror),
        seed,
        control,
        n_threads,
    )
    return [
        PermutationTest(
            run.r,
            run.p_value,
            run.p_fwer if family_wise else None,
            n_perm,
            scheme,
            run.block_length,
            bool(mirror),
            seed,
            names,
        )
        for run, names in zip(results, labels, strict=True)
    ]


@shared_doc
def bootstrap_ci(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    ci_level: float = DEFAULT_CI_LEVEL,
    ci_method: IntervalMethod = DEFAULT_INTERVAL_METHOD,
    method: ResidualMethod = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> BootstrapCI:
    r"""Bootstrap confidence intervals of the partial correlation of every pair of columns.

    Parameters
    ----------
    %(scores_covar)s
    n_boot : int
        Number of replicates B.
    scheme : {"iid", "block", "circular"}
        "iid": checkpoints drawn with replacement. "block": moving blocks of ``block_length`` consecutive
        checkpoints (Künsch, 1989). "circular": circular blocks, which may wrap around the end (Politis &
        Romano, 1992).
    block_length : int, optional
        Default :func:`default_block_length` (⌈n^{1/3}⌉).
    ci_level : float
        Coverage of the intervals.
    ci_method : {"percentile", "bca"}
    method : {"pearson", "spearman"}
    fit : Linear, Gam, "linear" or "gam"
        The control, refitted on every replicate (under GAM, smoothing parameters chosen again); GAM options
        ``k``, ``gam_method``, ``gam_basis``.
    seed : int
        Replicate i is drawn from its own stream derived from (seed, i).
    %(threads)s
    %(gam_options)s

    Returns
    -------
    BootstrapCI
        The estimates and their intervals for every pair.

    Notes
    -----
    Each replicate resamples the rows of ``scores`` and ``covar`` together and recomputes the partial
    correlations from scratch (re-residualising). Quantiles interpolate linearly between order statistics
    (numpy's default, R's type 7). Percentile: the α/2 and 1 − α/2 quantiles of the replicates. BCa: the
    quantiles at :math:`\Phi(z_0 + (z_0 + z_q)/(1 - \hat a (z_0 + z_q)))`, :math:`z_q` = Φ⁻¹(α/2) and
    Φ⁻¹(1 − α/2), with :math:`z_0 = \Phi^{-1}(\#\{r^* < \hat r\}/B)` and
    :math:`\hat a = \sum(\bar\theta - \theta_{(i)})^3 / (6[\sum(\bar\theta - \theta_{(i)})^2]^{3/2})` from the
    leave-one-checkpoint-out jackknife. Replicates in which a resampled column is constant or the covariates
    are collinear are left out and counted in ``n_valid``.

    References
    ----------
    Efron, B. (1987). Better bootstrap confidence intervals. *JASA*, 82(397), 171–185.
    Künsch, H. R. (1989). The jackknife and the bootstrap for general stationary observations.
    *Annals of Statistics*, 17(3), 1217–1241.
    Politis, D. N., & Romano, J. P. (1992). A circular block-resampling procedure for stationary data.
    In *Exploring the Limits of Bootstrap*, 263–270.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.normal(size=(50, 2))
    >>> scores[:, 1] += scores[:, 0]
    >>> result = stats.bootstrap_ci(scores, n_boot=999, seed=3)
    >>> bool(result.ci_low[0, 1] < result.r[0, 1] < result.ci_high[0, 1])
    True
    """
    return cast(BootstrapCI, one_run(bootstrap_ci_batch, locals()))


@shared_doc
def bootstrap_ci_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    ci_level: float = DEFAULT_CI_LEVEL,
    ci_method: IntervalMethod = DEFAULT_INTERVAL_METHOD,
    method: ResidualMethod = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[BootstrapCI]:
    """:func:`bootstrap_ci` for many runs at once, in parallel.

    Parameters
    ----------
    %(runs)s
    n_boot : int
        Number of replicates per run.
    scheme : {"iid", "block", "circular"}
        As in :func:`bootstrap_ci`.
    block_length : int, optional
        Default :func:`default_block_length` of each run's length.
    ci_level : float
        Coverage of the intervals.
    ci_method : {"percentile", "bca"}
        As in :func:`bootstrap_ci`.
    method : {"pearson", "spearman"}
        As in :func:`bootstrap_ci`.
    fit : Linear, Gam, "linear" or "gam"
        As in :func:`bootstrap_ci`.
    seed : int
        As in :func:`bootstrap_ci`.
    %(threads)s
    %(gam_options)s

    Returns
    -------
    list of BootstrapCI
        In the order of ``scores``.
    """
    check_choice("method", method, RESIDUAL_METHODS)
    check_choice("scheme", scheme, BOOTSTRAP_SCHEMES)
    check_choice("ci_method", ci_method, INTERVAL_METHODS)
    control, (tables, covars, labels), n_boot, seed = _checked_runs(
        fit, gam_options, scores, covar, "n_boot", n_boot, 2, seed
    )
    n_threads = check_threads(n_threads)
    # Every replicate of every pair is kept until the intervals are taken.
    pairs = sum(table.shape[1] * (table.shape[1] - 1) // 2 + 3 for table in tables)
    limits.check_array("n_boot", (n_boot, pairs), f"keeping {n_boot} bootstrap replicates of {pairs} pairs")
    results = _core.bootstrap_ci_batch(
        tables,
        covars,
        method,
        n_boot,
        scheme,
        check_block_length(block_length),
        float(ci_level),
        ci_method,
        seed,
        control,
        n_threads,
    )
    out = []
    for run, names in zip(results, labels, strict=True):
        r, low, high, length = run.r, run.ci_low, run.ci_high, run.block_length
        n_valid = run.n_valid.astype(np.int64)
        off_diagonal = ~np.eye(r.shape[0], dtype=bool)
        if np.any(n_valid[off_diagonal] < n_boot):
            warnings.warn(
                f"bootstrap: {n_boot - int(n_valid[off_diagonal].min())} of {n_boot} replicates had a constant "
                "column or collinear covariates and were left out (see n_valid)",
                RuntimeWarning,
                stacklevel=2,
            )
        if np.any(np.isnan(low[off_diagonal])):
            warnings.warn(
                "bootstrap: some intervals are undefined (NaN): every replicate fell on one side of the estimate, "
                "so the BCa bias correction is infinite",
                RuntimeWarning,
                stacklevel=2,
            )
        out.append(BootstrapCI(r, low, high, n_valid, n_boot, scheme, length, float(ci_level), ci_method, seed, names))
    return out


@shared_doc
def permutation_indices(
    n: int,
    n_perm: int,
    *,
    scheme: PermutationScheme = "free",
    block_length: int | None = None,
    mirror: bool = False,
    seed: int = 0,
) -> NDArray[np.int64]:
    """The permutations :func:`permutation_test` uses for ``n`` checkpoints, one per row.

    Row i is the order in which the permuted copy reads the residuals: ``permuted = residuals[row]``.

    Parameters
    ----------
    %(n_checkpoints)s
    n_perm : int
        Number of permutations.
    scheme : {"free", "block", "circular"}
        As in :func:`permutation_test`.
    block_length : int, optional
        Default :func:`default_block_length`.
    mirror : bool
        With "circular", also use reversed shifts.
    seed : int
        Permutation i is drawn from its own stream derived from (seed, i).

    Returns
    -------
    ndarray of int, shape (n_perm, n)
        One permutation of ``range(n)`` per row.

    Examples
    --------
    >>> from gengen import stats
    >>> stats.permutation_indices(6, 2, scheme="circular", seed=0).shape
    (2, 6)
    """
    check_choice("scheme", scheme, PERMUTATION_SCHEMES)
    n, n_perm = check_count("n", n, 1), check_count("n_perm", n_perm, 0)
    limits.check_array("n_perm", (n_perm + 1, n), f"a table of {n_perm} x {n} indices")
    return _core.permutation_indices(
        n,
        n_perm,
        scheme,
        check_block_length(block_length),
        bool(mirror),
        check_seed(seed),
    )


@shared_doc
def bootstrap_indices(
    n: int,
    n_boot: int,
    *,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    seed: int = 0,
) -> NDArray[np.int64]:
    """The row indices of the resamples :func:`bootstrap_ci` uses for ``n`` checkpoints, one per row.

    Parameters
    ----------
    %(n_checkpoints)s
    n_boot : int
        Number of replicates.
    scheme : {"iid", "block", "circular"}
        As in :func:`bootstrap_ci`.
    block_length : int, optional
        Default :func:`default_block_length`.
    seed : int
        Replicate i is drawn from its own stream derived from (seed, i).

    Returns
    -------
    ndarray of int, shape (n_boot, n)
        Row i holds the checkpoints replicate i is made of.

    Examples
    --------
    >>> from gengen import stats
    >>> stats.bootstrap_indices(5, 3, scheme="block", block_length=2, seed=0).shape
    (3, 5)
    """
    check_choice("scheme", scheme, BOOTSTRAP_SCHEMES)
    n, n_boot = check_count("n", n, 1), check_count("n_boot", n_boot, 0)
    limits.check_array("n_boot", (n_boot + 1, n), f"a table of {n_boot} x {n} indices")
    return _core.bootstrap_indices(
        n,
        n_boot,
        scheme,
        check_block_length(block_length),
        check_seed(seed),
    )


@shared_doc
def default_block_length(n: int) -> int:
    """Default block length for ``n`` checkpoints: ⌈n^{1/3}⌉ (Hall, Horowitz & Jing, 1995).

    Parameters
    ----------
    %(n_checkpoints)s

    Returns
    -------
    int
        The block length of the block and circular schemes.

    Examples
    --------
    >>> from gengen import stats
    >>> stats.default_block_length(100)
    5
    """
    return int(_core.default_block_length(check_count("n", n, 1)))


# Fewer distinct permutations than this and no p-value can reach .05.
def _checked_runs(
    fit: FitArgument,
    gam_options: dict[str, Any],
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None,
    count_name: str,
    count: int,
    minimum: int,
    seed: int,
) -> tuple[Control, tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], list[list[str] | None]], int, int]:
    """The inputs both resampling batches check alike: the control, the runs, the resamples and the seed.

    In that order (the first bad one is reported); the number of resamples is at least ``minimum`` and at
    most :data:`gengen.stats.limits.MAX_RESAMPLES`.
    """
    control = as_control(fit, gam_options)
    runs = as_runs(scores, covar)
    count = limits.check_resamples(count_name, check_count(count_name, count, minimum))
    return control, runs, count, check_seed(seed)


_FEW_PERMUTATIONS = 20


def _distinct_permutations(n: int, scheme: str, block_length: int | None, mirror: bool) -> int:
    """How many different orders ``scheme`` can produce for ``n`` checkpoints (counted up to 10**6)."""
    if scheme == "circular":
        return n * (2 if mirror else 1)
    units = n if scheme == "free" else -(-n // (block_length or int(_core.default_block_length(n))))
    count = 1
    for factor in range(2, units + 1):
        count *= factor
        if count >= 10**6:
            break
    return count


def _warn_if_few_permutations(
    tables: list[NDArray[np.float64]], scheme: str, block_length: int | None, mirror: bool
) -> None:
    """Warn when the scheme allows so few distinct permutations that small p-values are unreachable."""
    for table in tables:
        n = table.shape[0]
        if scheme == "block" and block_length is not None and block_length >= n:
            return  # the core refuses a single block with its own message
        distinct = _distinct_permutations(n, scheme, block_length, mirror)
        if 1 < distinct < _FEW_PERMUTATIONS:
            warnings.warn(
                f"permutation: only {distinct} distinct permutations of {n} checkpoints under scheme={scheme!r}"
                f"{f' (block_length={block_length})' if scheme == 'block' and block_length else ''}, so no p-value "
                f"can fall below about {1 / distinct:.2g}; use shorter blocks or more checkpoints",
                RuntimeWarning,
                stacklevel=3,
            )
            return
