"""Partial correlations and their inference: the typed Python face of gengen's Rust core.

Every function takes numpy arrays (pandas Series and DataFrames are accepted; DataFrame column names become
labels), validates them, and calls :mod:`gengen._core`, which does the numerics in Rust, in parallel, with the
GIL released. Bad input raises :class:`gengen.errors.InvalidArgumentError` or
:class:`gengen.errors.DegenerateDataError` (both ``ValueError`` subclasses) naming the argument at fault.

The numbers follow R's ppcor (Kim, 2015) for estimates and t-tests, R's ``p.adjust`` for adjustments, the
Freedman–Lane scheme for permutation tests, and percentile/BCa bootstrap intervals.

The control
-----------
Every function that regresses covariates out takes ``fit``: ``"linear"`` (least squares on [1, covar]) or
``"gam"`` (an additive model: intercept plus one penalised cubic regression spline per covariate, as mgcv's
``gam(y ~ s(z, k = 10, bs = "cr"))``, the smoothing parameter chosen per column by GCV or REML; see
:func:`gam_fit`). With ``fit="gam"`` these keyword options apply: ``k`` (basis dimension per covariate,
default 10), ``gam_method`` (``"gcv"``, default, or ``"reml"``) and ``gam_basis`` (``"cr"``, default, or
``"tp"``). Under the GAM control the t-test of a pair uses df = n − 2 − max(ν_a, ν_b), ν the effective degrees
of freedom of a column's smooth terms (intercept excluded), which reduces to ppcor's n − 2 − k for a linear
term; the permutation test, which reuses each column's smoother at its chosen smoothing parameter, is the
recommended inference there.

Checkpoint trajectories are autocorrelated, and ppcor's t-test then overstates significance (44% false
positives at a nominal 5% with lag-1 autocorrelation 0.9 and 50 checkpoints). :func:`lagged_partial_corr_matrix`
(gengen's default inference, see docs/calibration.md) and :func:`prewhitened_partial_corr_matrix` stay
calibrated; they are defined in :mod:`gengen.stats.lagged` and exported here.

Limits
------
Sizes are checked before anything is allocated (:mod:`gengen.limits`): at most ``MAX_RESAMPLES`` (10^7)
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
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen import _core, limits
from gengen.errors import InvalidArgumentError
from gengen.stats.lagged import (
    LaggedPartialCorrMatrix,
    PrewhitenedPartialCorrMatrix,
    lagged_partial_corr_matrix,
    prewhitened_partial_corr_matrix,
)

__all__ = [
    "BootstrapCI",
    "CorrMatrices",
    "GamFit",
    "LaggedPartialCorrMatrix",
    "PartialCorr",
    "PartialCorrMatrix",
    "PermutationTest",
    "PrewhitenedPartialCorrMatrix",
    "bootstrap_ci",
    "bootstrap_ci_batch",
    "bootstrap_indices",
    "default_block_length",
    "gam_fit",
    "lagged_partial_corr_matrix",
    "p_adjust",
    "partial_corr",
    "partial_corr_matrix",
    "partial_corr_matrix_batch",
    "pcor",
    "permutation_indices",
    "permutation_test",
    "permutation_test_batch",
    "prewhitened_partial_corr_matrix",
    "residualise",
    "spcor",
]

Method = Literal["pearson", "spearman", "kendall"]
Fit = Literal["linear", "gam"]
GamMethod = Literal["gcv", "reml"]
GamBasis = Literal["cr", "tp"]
PermutationScheme = Literal["free", "block", "circular"]
BootstrapScheme = Literal["iid", "block", "circular"]
IntervalMethod = Literal["percentile", "bca"]
Adjustment = Literal["holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none"]

_METHODS = ("pearson", "spearman", "kendall")
_FITS = ("linear", "gam")
_GAM_OPTIONS = ("k", "gam_method", "gam_basis")


# ----------------------------------------------------------------------------------------------------------
# Result types
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartialCorr:
    """One (semi-)partial correlation and its test.

    Attributes
    ----------
    r : float
        The estimate.
    statistic : float
        t statistic (Pearson, Spearman) or z statistic (Kendall).
    p_value : float
        Two-sided p-value of the statistic.
    df : float
        n − 2 − k, the degrees of freedom of the t-test.
    n : int
        Number of observations.
    k : int
        Number of covariates.
    ci : tuple of float
        Fisher-z confidence interval at ``ci_level``.
    ci_level : float
        Coverage of ``ci``.
    method : str
        "pearson", "spearman" or "kendall".
    semi : str or None
        None (partial), "x" or "y" (the variable the covariates were removed from).
    fit : str
        "linear" or "gam".
    """

    r: float
    statistic: float
    p_value: float
    df: float
    n: int
    k: int
    ci: tuple[float, float]
    ci_level: float
    method: str
    semi: str | None
    fit: str = "linear"


@dataclass(frozen=True)
class CorrMatrices:
    """Estimate, statistic and p-value matrices, as returned by ppcor's ``pcor`` and ``spcor``.

    The diagonals hold 1, 0 and 0, as ppcor's do. When the input was a DataFrame the matrices are DataFrames
    labelled by its columns.
    """

    estimate: Any
    statistic: Any
    p_value: Any
    n: int
    k: int
    method: str


@dataclass(frozen=True)
class PartialCorrMatrix:
    """Partial correlations of every pair of columns of ``scores`` given ``covar``.

    Attributes
    ----------
    r, statistic, p_value : ndarray of shape (m, m)
        Symmetric; diagonals 1, 0 and 0.
    df : float or ndarray of shape (m, m)
        n − 2 − k (linear control); under the GAM control, each pair's n − 2 − max(ν_a, ν_b).
    n, k : int
        Observations and covariates.
    method, fit : str
        Correlation and control used.
    labels : list of str or None
        Column names when ``scores`` was a DataFrame.
    edf : ndarray of shape (m,) or None
        Under the GAM control, the effective degrees of freedom ν of each column's smooth terms (intercept
        excluded): about 1 per covariate is a straight line, larger values a curve.
    """

    r: NDArray[np.float64]
    statistic: NDArray[np.float64]
    p_value: NDArray[np.float64]
    df: Any
    n: int
    k: int
    method: str
    fit: str
    labels: list[str] | None
    edf: NDArray[np.float64] | None = None

    def pairs(self) -> pd.DataFrame:
        """One row per pair (a < b): ``a, b, r, statistic, p_value, df, n, k``."""
        names = _names(self.labels, self.r.shape[0])
        rows = [
            (names[a], names[b], self.r[a, b], self.statistic[a, b], self.p_value[a, b])
            for a, b in zip(*np.triu_indices(self.r.shape[0], 1), strict=True)
        ]
        frame = pd.DataFrame(rows, columns=["a", "b", "r", "statistic", "p_value"])
        rows_a, rows_b = np.triu_indices(self.r.shape[0], 1)
        df = np.asarray(self.df, dtype=float)
        return frame.assign(df=df[rows_a, rows_b] if df.ndim == 2 else float(df), n=self.n, k=self.k)


@dataclass(frozen=True)
class PermutationTest:
    """Freedman–Lane permutation p-values for every pair of columns.

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


@dataclass(frozen=True)
class GamFit:
    """Penalised regression spline (GAM) fit of each column of ``y`` on smooth functions of ``covar``.

    Attributes
    ----------
    fitted, residuals : ndarray
        Shaped like ``y``; ``fitted + residuals == y``.
    edf : float or ndarray of shape (m,)
        Effective degrees of freedom ``tr A_λ`` per column, intercept included (mgcv's ``sum(edf)``): from
        1 + q (every smooth a straight line) to the number of coefficients.
    lam : ndarray of shape (q,) or (m, q)
        Smoothing parameter per control (mgcv's ``sp`` for the ``"cr"`` basis).
    score : float or ndarray of shape (m,)
        GCV score, or REML's negative log restricted likelihood, at ``lam`` (mgcv's ``gcv.ubre``).
    k : tuple of int
        Basis dimension used per control (lower than asked when a control has fewer distinct values).
    gam_method, gam_basis : str
    """

    fitted: NDArray[np.float64]
    residuals: NDArray[np.float64]
    edf: Any
    lam: NDArray[np.float64]
    score: Any
    k: tuple[int, ...]
    gam_method: str
    gam_basis: str


# ----------------------------------------------------------------------------------------------------------
# Input validation
# ----------------------------------------------------------------------------------------------------------


def _names(labels: list[str] | None, m: int) -> list[str]:
    return labels if labels is not None else [str(i) for i in range(m)]


def _as_float_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    if isinstance(value, pd.DataFrame | pd.Series):
        value = value.to_numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidArgumentError(f"{name}: must be numeric ({error})") from None
    return array


def _as_vector(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = _as_float_array(name, value)
    if array.ndim != 1:
        raise InvalidArgumentError(f"{name}: must be one-dimensional, got shape {array.shape}")
    return np.ascontiguousarray(array)


def _as_covar(covar: ArrayLike | None, n: int) -> NDArray[np.float64]:
    if covar is None:
        return np.zeros((n, 0))
    array = _as_float_array("covar", covar)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise InvalidArgumentError(f"covar: must be one- or two-dimensional, got shape {array.shape}")
    if array.shape[0] != n:
        raise InvalidArgumentError(f"covar: has {array.shape[0]} rows but the data have {n}")
    return array


def _as_table(name: str, value: ArrayLike) -> tuple[NDArray[np.float64], list[str] | None]:
    labels = [str(c) for c in value.columns] if isinstance(value, pd.DataFrame) else None
    array = _as_float_array(name, value)
    if array.ndim != 2:
        raise InvalidArgumentError(
            f"{name}: must be two-dimensional (observations × variables), got shape {array.shape}"
        )
    return array, labels


def _check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices)
        raise InvalidArgumentError(f"{name}: unknown value {value!r}; expected one of {expected}")


def _check_fit(fit: str) -> None:
    _check_choice("fit", fit, _FITS)


def _fit_argument(fit: str, gam_options: dict[str, Any]) -> tuple[int, str, str] | None:
    """The core's ``fit`` argument: None for the linear control, (k, method, basis) for the GAM control."""
    _check_fit(fit)
    unknown = sorted(set(gam_options) - set(_GAM_OPTIONS))
    if unknown:
        raise InvalidArgumentError(f"{unknown[0]}: unknown option; the GAM options are {', '.join(_GAM_OPTIONS)}")
    if fit == "linear":
        if gam_options:
            name = sorted(gam_options)[0]
            raise InvalidArgumentError(f'{name}: is a GAM option and needs fit="gam"')
        return None
    k = _check_count("k", gam_options.get("k", 10), 3)
    gam_method = gam_options.get("gam_method", "gcv")
    gam_basis = gam_options.get("gam_basis", "cr")
    _check_choice("gam_method", gam_method, ("gcv", "reml"))
    _check_choice("gam_basis", gam_basis, ("cr", "tp"))
    return (k, gam_method, gam_basis)


def _warn_if_k_lowered(controls: NDArray[np.float64], k: int, where: str) -> None:
    """Warn, as :func:`gam_fit` does, when the GAM control must use fewer basis functions than ``k``.

    The core lowers k to the number of distinct values of a control (and, with one control, to n − 1).
    """
    n = controls.shape[0]
    used = [min(k, len(np.unique(column))) for column in controls.T]
    if len(used) == 1:
        used = [min(used[0], n - 1)]
    if any(value < k for value in used):
        warnings.warn(
            f"k: lowered from {k} to {tuple(used)} for {where} (too few distinct control values)", stacklevel=3
        )


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < 2**64:
        raise InvalidArgumentError(f"seed: must be an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def _check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise InvalidArgumentError(f"{name}: must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


def _check_threads(n_threads: int | None) -> int | None:
    if n_threads is None:
        return None
    return limits.check_threads(_check_count("n_threads", n_threads, 1))


# Fewer distinct permutations than this and no p-value can reach .05.
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


def _check_block_length(block_length: int | None) -> int | None:
    return None if block_length is None else _check_count("block_length", block_length, 1)


def _runs(
    scores: Sequence[ArrayLike], covar: Sequence[ArrayLike | None] | None
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], list[list[str] | None]]:
    if isinstance(scores, np.ndarray) and scores.ndim == 3:
        scores = list(scores)
    if isinstance(covar, np.ndarray) and covar.ndim == 3:
        covar = list(covar)
    if covar is None:
        covar = [None] * len(scores)
    if len(covar) != len(scores):
        raise InvalidArgumentError(f"covar: {len(covar)} covariate matrices for {len(scores)} runs of scores")
    tables, covars, labels = [], [], []
    for index, (run_scores, run_covar) in enumerate(zip(scores, covar, strict=True)):
        table, names = _as_table(f"scores[{index}]", run_scores)
        tables.append(table)
        covars.append(_as_covar(run_covar, table.shape[0]))
        labels.append(names)
    return tables, covars, labels


# ----------------------------------------------------------------------------------------------------------
# Point estimates and t-tests
# ----------------------------------------------------------------------------------------------------------


def partial_corr(
    x: ArrayLike,
    y: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    method: Method = "pearson",
    semi: Literal["x", "y"] | None = None,
    ci_level: float = 0.95,
    fit: Fit = "linear",
    **gam_options: Any,
) -> PartialCorr:
    r"""Partial (or semi-partial) correlation of ``x`` and ``y`` given ``covar``, with ppcor's test.

        Parameters
        ----------
        x, y : array_like of shape (n,)
            The two variables, e.g. two OOD test sets' scores across checkpoints.
        covar : array_like of shape (n,) or (n, k), optional
            Covariates to control for, e.g. the in-domain score. None gives the plain correlation (k = 0).
        method : {"pearson", "spearman", "kendall"}
            Pearson on the values, Spearman on average ranks (of every variable, covariates included), or
            Kendall's τ_b.
        semi : {None, "x", "y"}
            None: remove the covariates from both variables (partial correlation). "y": from ``y`` only
            (ppcor's ``spcor.test(x, y, z)``); "x": from ``x`` only.
        ci_level : float
            Coverage of the Fisher-z confidence interval.
        fit : {"linear", "gam"}
            The control; with ``"gam"``, the options ``k``, ``gam_method``, ``gam_basis`` apply (see the module
            documentation). Kendall's τ has no residual form and needs ``"linear"``.

        Returns
        -------
        PartialCorr
            ``r``, ``statistic``, ``p_value``, ``df``, ``n``, ``k``, ``ci``, ``ci_level``, ``method``, ``semi``,
            ``fit``.

        Notes
        -----
        For Pearson, with :math:`e_x, e_y` the residuals of least squares on :math:`[1, Z]`,

        .. math:: r = \frac{e_x^\top e_y}{\lVert e_x\rVert \, \lVert e_y\rVert}, \qquad
                  t = r \sqrt{\frac{n - 2 - k}{1 - r^2}} \sim t_{n-2-k}.

        The semi-partial correlation with ``semi="y"`` correlates the centred :math:`x` with :math:`e_y`.
        Kendall's partial τ follows ppcor: with :math:`P` the inverse of the τ_b matrix of
        :math:`(x, y, Z)`, :math:`r = -P_{xy}/\sqrt{P_{xx}P_{yy}}`; semi-partial
        :math:`-P_{xy} / (\sqrt{P_{xx}P_{yy}} \sqrt{|P_{xx} - P_{xy}^2/P_{yy}|})`; its test is ppcor's normal
        approximation :math:`z = r / \sqrt{2(2(n-k)+5) / (9(n-k)(n-1-k))}`.
    The interval is :math:`\tanh(\operatorname{atanh} r \pm z_{1-\alpha/2}/\sqrt{df-1})`, i.e.
        :math:`\sqrt{n-3-k}` under the linear control.

        Residuals come from a QR-type orthonormalisation of the centred covariates, never from normal equations,
        and singular covariates are detected by the condition number of the centred, unit-scaled covariate
        matrix (limit 1e12), which does not depend on the units of the data.

        References
        ----------
        Kim, S. (2015). ppcor: An R package for a fast calculation to semi-partial correlation coefficients.
        *Communications for Statistical Applications and Methods*, 22(6), 665–674.

        Examples
        --------
        >>> import numpy as np
        >>> from gengen import stats
        >>> rng = np.random.default_rng(0)
        >>> id_score = np.linspace(0.5, 0.9, 30)
        >>> a = id_score + rng.normal(0, 0.02, 30)
        >>> b = id_score + rng.normal(0, 0.02, 30)
        >>> round(stats.partial_corr(a, b).r, 3)  # raw correlation: both follow ID
        0.972
        >>> result = stats.partial_corr(a, b, id_score)
        >>> round(result.r, 3), result.df
        (-0.333, 27.0)
    """
    _check_choice("method", method, _METHODS)
    _check_choice("semi", semi, (None, "x", "y"))
    x_values = _as_vector("x", x)
    y_values = _as_vector("y", y)
    if y_values.shape[0] != x_values.shape[0]:
        raise InvalidArgumentError(f"y: has {y_values.shape[0]} values but x has {x_values.shape[0]}")
    covariates = _as_covar(covar, x_values.shape[0])
    fit_argument = _fit_argument(fit, gam_options)
    r, statistic, p_value, df, n, k = _core.partial_corr(x_values, y_values, covariates, method, semi, fit_argument)
    ci = _core.fisher_ci(r, df, float(ci_level))
    return PartialCorr(r, statistic, p_value, df, n, k, ci, float(ci_level), method, semi, fit)


def _ppcor(data: ArrayLike, method: Method, semi: bool) -> CorrMatrices:
    _check_choice("method", method, _METHODS)
    array, labels = _as_table("data", data)
    estimate, statistic, p_value, n, k = _core.ppcor_matrices(array, method, semi)
    if labels is not None:
        estimate, statistic, p_value = (
            pd.DataFrame(matrix, index=labels, columns=labels) for matrix in (estimate, statistic, p_value)
        )
    return CorrMatrices(estimate, statistic, p_value, n, k, method)


def pcor(data: ArrayLike, method: Method = "pearson") -> CorrMatrices:
    r"""Partial correlation of every pair of columns given all the other columns (R's ``ppcor::pcor``).

    Parameters
    ----------
    data : array_like of shape (n, m)
        Observations in rows, variables in columns; m ≥ 2.
    method : {"pearson", "spearman", "kendall"}

    Returns
    -------
    CorrMatrices
        ``estimate``, ``statistic``, ``p_value`` (m × m; DataFrames when ``data`` is one), ``n``,
        ``k`` = m − 2, ``method``.

    Notes
    -----
    With :math:`P` the inverse of the correlation matrix (of ranks for Spearman, the τ_b matrix for Kendall),
    :math:`\rho_{ij\cdot\text{rest}} = -P_{ij}/\sqrt{P_{ii}P_{jj}}`, tested as in :func:`partial_corr` with
    k = m − 2. The inverse is formed from the triangular factor of the centred, scaled data (Pearson,
    Spearman), not from the covariance matrix.

    References
    ----------
    Kim, S. (2015). ppcor. *Communications for Statistical Applications and Methods*, 22(6), 665–674.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(1)
    >>> data = rng.normal(size=(40, 3))
    >>> data[:, 0] += data[:, 2]
    >>> data[:, 1] += data[:, 0]
    >>> stats.pcor(data).estimate.round(3)[0, 1]
    np.float64(0.73)
    """
    return _ppcor(data, method, semi=False)


def spcor(data: ArrayLike, method: Method = "pearson") -> CorrMatrices:
    r"""Semi-partial correlations of every pair of columns (R's ``ppcor::spcor``).

    Element (i, j) is the correlation of column i with column j freed of all the other columns (the
    covariates are removed from j only), so the matrix is not symmetric.

    Parameters
    ----------
    data : array_like of shape (n, m)
    method : {"pearson", "spearman", "kendall"}

    Returns
    -------
    CorrMatrices

    Notes
    -----
    :math:`sr_{ij} = -P_{ij} / (\sqrt{P_{ii}P_{jj}}\,\sqrt{|P_{ii} - P_{ij}^2/P_{jj}|})` with :math:`P` as in
    :func:`pcor`, tested with t on n − m degrees of freedom (normal approximation for Kendall).

    References
    ----------
    Kim, S. (2015). ppcor. *Communications for Statistical Applications and Methods*, 22(6), 665–674.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(1)
    >>> data = rng.normal(size=(40, 3))
    >>> data[:, 0] += data[:, 2]
    >>> data[:, 1] += data[:, 0]
    >>> stats.spcor(data).estimate.round(3)[0, 1]
    np.float64(0.542)
    """
    return _ppcor(data, method, semi=True)


def residualise(
    y: ArrayLike, covar: ArrayLike | None, *, fit: Fit = "linear", **gam_options: Any
) -> NDArray[np.float64]:
    r"""Residuals of each column of ``y`` after least squares on :math:`[1, \text{covar}]`.

    Parameters
    ----------
    y : array_like of shape (n,) or (n, m)
    covar : array_like of shape (n,) or (n, k), or None (centring only)
    fit : {"linear", "gam"}
        The control; with ``"gam"`` the residuals are :func:`gam_fit`'s (options ``k``, ``gam_method``,
        ``gam_basis``, and ``lam`` to fix the smoothing parameters).

    Returns
    -------
    ndarray
        Shaped like ``y``.

    Notes
    -----
    :math:`e = y_c - QQ^\top y_c` with :math:`y_c` the centred column and :math:`Q` an orthonormal basis of
    the centred covariates (Gram–Schmidt applied twice, which is as accurate as Householder QR here).

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> z = np.array([1.0, 2.0, 3.0, 4.0])
    >>> stats.residualise(2 * z + np.array([0.1, -0.1, -0.1, 0.1]), z).round(6)
    array([ 0.1, -0.1, -0.1,  0.1])
    """
    _check_fit(fit)
    if fit == "gam":
        return gam_fit(y, covar, **gam_options).residuals  # type: ignore[arg-type]
    _fit_argument(fit, gam_options)
    array = _as_float_array("y", y)
    if array.ndim not in (1, 2):
        raise InvalidArgumentError(f"y: must be one- or two-dimensional, got shape {array.shape}")
    table = array[:, None] if array.ndim == 1 else array
    residuals = _core.residualise(table, _as_covar(covar, table.shape[0]))
    return residuals[:, 0] if array.ndim == 1 else residuals


def gam_fit(
    y: ArrayLike,
    covar: ArrayLike,
    *,
    k: int = 10,
    gam_method: GamMethod = "gcv",
    gam_basis: GamBasis = "cr",
    lam: ArrayLike | None = None,
    n_threads: int | None = None,
) -> GamFit:
    r"""GAM control: each column of ``y`` on an intercept plus one penalised regression spline per control.

    Parameters
    ----------
    y : array_like of shape (n,) or (n, m)
    covar : array_like of shape (n,) or (n, q)
        The controls (e.g. the in-domain score).
    k : int, default 10
        Basis dimension per control (mgcv's ``k``); lowered, with a warning, when a control has fewer
        distinct values (or, with one control, when ``k >= n``).
    gam_method : {"gcv", "reml"}
        Smoothing parameter selection: mgcv's ``method = "GCV.Cp"`` or ``method = "REML"``.
    gam_basis : {"cr", "tp"}
        mgcv's cubic regression spline (``bs = "cr"``) or thin plate regression spline (``bs = "tp"``).
    lam : array_like of shape (q,), optional
        Fixed smoothing parameters instead of selecting them.
    n_threads : int, optional

    Returns
    -------
    GamFit

    Notes
    -----
    The model is mgcv's ``gam(y ~ s(z_1, k = k, bs = "cr") + … + s(z_q, …))``: coefficients minimise
    :math:`\lVert y - X\beta\rVert^2 + \sum_j \lambda_j \beta^\top S_j \beta` with the sum-to-zero constrained
    basis and penalty of ``smoothCon``. GCV minimises :math:`n\,\mathrm{RSS}/(n - \operatorname{tr} A_\lambda)^2`;
    REML minimises the restricted likelihood with the scale profiled out. The search over
    :math:`\log\lambda` is global (grid + Brent), so where the criterion has several local minima (short
    trajectories with tied control values) the optimum can be better than the one mgcv's Newton iteration
    stops at.

    References
    ----------
    Wood, S. N. (2017). *Generalized Additive Models: An Introduction with R* (2nd ed.). CRC Press.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> z = np.linspace(0, 1, 50)
    >>> fit = stats.gam_fit(np.sin(4 * z) + 0.1 * np.cos(40 * z), z)
    >>> fit.k, bool(2 < fit.edf < 10)
    ((10,), True)
    """
    _check_choice("gam_method", gam_method, ("gcv", "reml"))
    _check_choice("gam_basis", gam_basis, ("cr", "tp"))
    k = _check_count("k", k, 3)
    array = _as_float_array("y", y)
    if array.ndim not in (1, 2):
        raise InvalidArgumentError(f"y: must be one- or two-dimensional, got shape {array.shape}")
    table = array[:, None] if array.ndim == 1 else array
    controls = _as_covar(covar, table.shape[0])
    if controls.shape[1] == 0:
        raise InvalidArgumentError('covar: fit="gam" needs at least one control column')
    fixed = None if lam is None else [float(v) for v in np.atleast_1d(_as_float_array("lam", lam))]
    fitted, residuals, edf, lam_out, score, k_used = _core.gam_fit(
        table, controls, k, gam_method, gam_basis, fixed, _check_threads(n_threads)
    )
    if any(used < k for used in k_used):
        warnings.warn(f"k: lowered from {k} to {tuple(k_used)} (too few distinct control values)", stacklevel=2)
    if array.ndim == 1:
        return GamFit(
            fitted[:, 0],
            residuals[:, 0],
            float(edf[0]),
            lam_out[0],
            float(score[0]),
            tuple(k_used),
            gam_method,
            gam_basis,
        )
    return GamFit(fitted, residuals, edf, lam_out, score, tuple(k_used), gam_method, gam_basis)


def partial_corr_matrix(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    method: Method = "pearson",
    fit: Fit = "linear",
    n_threads: int | None = None,
    **gam_options: Any,
) -> PartialCorrMatrix:
    r"""Partial correlation of every pair of columns of ``scores`` given ``covar``, in one call.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint.
    covar : array_like of shape (n,) or (n, k), optional
        The control (e.g. the in-domain score); None gives raw correlations.
    method : {"pearson", "spearman", "kendall"}
    fit : {"linear", "gam"}
        The control; GAM options ``k``, ``gam_method``, ``gam_basis`` (see the module documentation).
    n_threads : int, optional
        Threads to use (default: all cores).

    Returns
    -------
    PartialCorrMatrix
        ``r``, ``statistic``, ``p_value`` (m × m), ``df``, ``n``, ``k``, ``method``, ``fit``, ``labels``;
        ``.pairs()`` gives the tidy table.

    Notes
    -----
    Element (a, b) equals :func:`partial_corr` of columns a and b given ``covar``: each column is
    residualised once and the m(m − 1)/2 correlations come from one product of residual matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> id_score = np.linspace(0.5, 0.9, 30)
    >>> scores = id_score[:, None] + rng.normal(0, 0.02, (30, 3))
    >>> result = stats.partial_corr_matrix(scores, id_score)
    >>> result.r.shape, result.df
    ((3, 3), 27.0)
    """
    return partial_corr_matrix_batch(
        [scores], None if covar is None else [covar], method=method, fit=fit, n_threads=n_threads, **gam_options
    )[0]


def partial_corr_matrix_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    method: Method = "pearson",
    fit: Fit = "linear",
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[PartialCorrMatrix]:
    """:func:`partial_corr_matrix` for many runs at once, computed in parallel.

    Parameters
    ----------
    scores : sequence of array_like (n_i, m_i), or an array of shape (runs, n, m)
        One score matrix per run; runs may differ in length.
    covar : sequence of array_like (n_i, k_i) or None, or an array of shape (runs, n, k), optional
    method, fit, n_threads
        As in :func:`partial_corr_matrix`.

    Returns
    -------
    list of PartialCorrMatrix
        In the order of ``scores``.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> runs = [rng.normal(size=(n, 3)) for n in (20, 35)]
    >>> [result.n for result in stats.partial_corr_matrix_batch(runs)]
    [20, 35]
    """
    _check_choice("method", method, _METHODS)
    fit_argument = _fit_argument(fit, gam_options)
    tables, covars, labels = _runs(scores, covar)
    if fit_argument is not None:
        for index, controls in enumerate(covars):
            _warn_if_k_lowered(controls, fit_argument[0], f"scores[{index}]" if len(covars) > 1 else "covar")
    results = _core.partial_corr_matrix_batch(tables, covars, method, fit_argument, _check_threads(n_threads))
    return [
        PartialCorrMatrix(
            r,
            statistic,
            p_value,
            float(n - 2 - k) if fit == "linear" else pair_df,
            n,
            k,
            method,
            fit,
            names,
            None if fit == "linear" else control_df,
        )
        for (r, statistic, p_value, pair_df, control_df, n, k), names in zip(results, labels, strict=True)
    ]


# ----------------------------------------------------------------------------------------------------------
# Resampling inference
# ----------------------------------------------------------------------------------------------------------


def permutation_test(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    n_perm: int = 9999,
    scheme: PermutationScheme = "free",
    block_length: int | None = None,
    mirror: bool = False,
    method: Literal["pearson", "spearman"] = "pearson",
    fit: Fit = "linear",
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
    covar : array_like of shape (n,) or (n, k), optional
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
    fit : {"linear", "gam"}
        The control; GAM options ``k``, ``gam_method``, ``gam_basis``. Under the GAM control each column's
        smoother is fixed at the smoothing parameter chosen on the observed data and reapplied to every
        permuted copy (:math:`M_b(\hat y_b + P e_b)`), as the projection is in the linear scheme.
    family_wise : bool
        Also return max-|r| family-wise p-values across the pairs of the run.
    seed : int
        Permutation i is drawn from its own stream derived from (seed, i): the result depends on the seed
        only, not on ``n_threads``.
    n_threads : int, optional

    Returns
    -------
    PermutationTest

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
    return permutation_test_batch(
        [scores],
        None if covar is None else [covar],
        n_perm=n_perm,
        scheme=scheme,
        block_length=block_length,
        mirror=mirror,
        method=method,
        fit=fit,
        family_wise=family_wise,
        seed=seed,
        n_threads=n_threads,
        **gam_options,
    )[0]


def permutation_test_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    n_perm: int = 9999,
    scheme: PermutationScheme = "free",
    block_length: int | None = None,
    mirror: bool = False,
    method: Literal["pearson", "spearman"] = "pearson",
    fit: Fit = "linear",
    family_wise: bool = False,
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[PermutationTest]:
    """:func:`permutation_test` for many runs at once, in parallel over runs and permutations.

    Every run of the same length sees the same permutations. Arguments as in :func:`permutation_test`;
    ``scores`` and ``covar`` as in :func:`partial_corr_matrix_batch`.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> runs = [rng.normal(size=(30, 3)) for _ in range(2)]
    >>> [r.p_value.shape for r in stats.permutation_test_batch(runs, n_perm=99, scheme="block")]
    [(3, 3), (3, 3)]
    """
    _check_choice("method", method, ("pearson", "spearman"))
    _check_choice("scheme", scheme, ("free", "block", "circular"))
    fit_argument = _fit_argument(fit, gam_options)
    tables, covars, labels = _runs(scores, covar)
    n_perm = limits.check_resamples("n_perm", _check_count("n_perm", n_perm, 1))
    seed = _check_seed(seed)
    block_length = _check_block_length(block_length)
    n_threads = _check_threads(n_threads)
    _warn_if_few_permutations(tables, scheme, block_length, bool(mirror))
    results = _core.permutation_test_batch(
        tables,
        covars,
        method,
        n_perm,
        scheme,
        _check_block_length(block_length),
        bool(mirror),
        seed,
        fit_argument,
        n_threads,
    )
    return [
        PermutationTest(r, p, p_fwer if family_wise else None, n_perm, scheme, length, bool(mirror), seed, names)
        for (r, p, p_fwer, length), names in zip(results, labels, strict=True)
    ]


def bootstrap_ci(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    n_boot: int = 1999,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    ci_level: float = 0.95,
    ci_method: IntervalMethod = "percentile",
    method: Literal["pearson", "spearman"] = "pearson",
    fit: Fit = "linear",
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> BootstrapCI:
    r"""Bootstrap confidence intervals of the partial correlation of every pair of columns.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint, in training order.
    covar : array_like of shape (n,) or (n, k), optional
    n_boot : int
        Number of replicates B.
    scheme : {"iid", "block", "circular"}
        "iid": checkpoints drawn with replacement. "block": moving blocks of ``block_length`` consecutive
        checkpoints (Künsch, 1989). "circular": circular blocks, which may wrap around the end (Politis &
        Romano, 1992).
    block_length : int, optional
        Default :func:`default_block_length` (⌈n^{1/3}⌉).
    ci_level : float
    ci_method : {"percentile", "bca"}
    method : {"pearson", "spearman"}
    fit : {"linear", "gam"}
        The control, refitted on every replicate (under GAM, smoothing parameters chosen again); GAM options
        ``k``, ``gam_method``, ``gam_basis``.
    seed : int
        Replicate i is drawn from its own stream derived from (seed, i).
    n_threads : int, optional

    Returns
    -------
    BootstrapCI

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
    return bootstrap_ci_batch(
        [scores],
        None if covar is None else [covar],
        n_boot=n_boot,
        scheme=scheme,
        block_length=block_length,
        ci_level=ci_level,
        ci_method=ci_method,
        method=method,
        fit=fit,
        seed=seed,
        n_threads=n_threads,
        **gam_options,
    )[0]


def bootstrap_ci_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    n_boot: int = 1999,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    ci_level: float = 0.95,
    ci_method: IntervalMethod = "percentile",
    method: Literal["pearson", "spearman"] = "pearson",
    fit: Fit = "linear",
    seed: int = 0,
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[BootstrapCI]:
    """:func:`bootstrap_ci` for many runs at once, in parallel.

    Arguments as in :func:`bootstrap_ci`; ``scores`` and ``covar`` as in :func:`partial_corr_matrix_batch`.
    """
    _check_choice("method", method, ("pearson", "spearman"))
    _check_choice("scheme", scheme, ("iid", "block", "circular"))
    _check_choice("ci_method", ci_method, ("percentile", "bca"))
    fit_argument = _fit_argument(fit, gam_options)
    tables, covars, labels = _runs(scores, covar)
    n_boot = limits.check_resamples("n_boot", _check_count("n_boot", n_boot, 2))
    seed = _check_seed(seed)
    n_threads = _check_threads(n_threads)
    # Every replicate of every pair is kept until the intervals are taken.
    pairs = sum(table.shape[1] * (table.shape[1] - 1) // 2 + 3 for table in tables)
    limits.check_array("n_boot", (n_boot, pairs), f"keeping {n_boot} bootstrap replicates of {pairs} pairs")
    results = _core.bootstrap_ci_batch(
        tables,
        covars,
        method,
        n_boot,
        scheme,
        _check_block_length(block_length),
        float(ci_level),
        ci_method,
        seed,
        fit_argument,
        n_threads,
    )
    out = []
    for (r, low, high, valid, length), names in zip(results, labels, strict=True):
        n_valid = valid.astype(np.int64)
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

    Examples
    --------
    >>> from gengen import stats
    >>> stats.permutation_indices(6, 2, scheme="circular", seed=0).shape
    (2, 6)
    """
    _check_choice("scheme", scheme, ("free", "block", "circular"))
    n, n_perm = _check_count("n", n, 1), _check_count("n_perm", n_perm, 0)
    limits.check_array("n_perm", (n_perm + 1, n), f"a table of {n_perm} x {n} indices")
    return _core.permutation_indices(
        n,
        n_perm,
        scheme,
        _check_block_length(block_length),
        bool(mirror),
        _check_seed(seed),
    )


def bootstrap_indices(
    n: int,
    n_boot: int,
    *,
    scheme: BootstrapScheme = "iid",
    block_length: int | None = None,
    seed: int = 0,
) -> NDArray[np.int64]:
    """The row indices of the resamples :func:`bootstrap_ci` uses for ``n`` checkpoints, one per row.

    Examples
    --------
    >>> from gengen import stats
    >>> stats.bootstrap_indices(5, 3, scheme="block", block_length=2, seed=0).shape
    (3, 5)
    """
    _check_choice("scheme", scheme, ("iid", "block", "circular"))
    n, n_boot = _check_count("n", n, 1), _check_count("n_boot", n_boot, 0)
    limits.check_array("n_boot", (n_boot + 1, n), f"a table of {n_boot} x {n} indices")
    return _core.bootstrap_indices(
        n,
        n_boot,
        scheme,
        _check_block_length(block_length),
        _check_seed(seed),
    )


def default_block_length(n: int) -> int:
    """Default block length for ``n`` checkpoints: ⌈n^{1/3}⌉ (Hall, Horowitz & Jing, 1995).

    Examples
    --------
    >>> from gengen import stats
    >>> stats.default_block_length(100)
    5
    """
    return int(_core.default_block_length(_check_count("n", n, 1)))


def p_adjust(p: ArrayLike, method: Adjustment = "holm") -> NDArray[np.float64]:
    r"""Adjust p-values for multiple comparisons, as R's ``p.adjust``.

    Parameters
    ----------
    p : array_like
        p-values in [0, 1]; NaN is kept as NaN and not counted among the tests. Any shape; the result has
        the same shape.
    method : {"holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none"}
        "fdr" is an alias of "BH".

    Returns
    -------
    ndarray

    Notes
    -----
    With the :math:`n` p-values sorted, :math:`p_{(1)} \le \dots \le p_{(n)}`: Bonferroni
    :math:`\min(1, n p)`; Holm :math:`\max_{j \le i} \min(1, (n - j + 1) p_{(j)})`; Hochberg
    :math:`\min_{j \ge i} \min(1, (n - j + 1) p_{(j)})`; BH :math:`\min_{j \ge i} \min(1, n p_{(j)} / j)`;
    BY as BH times :math:`\sum_{i=1}^n 1/i`; Hommel by R's algorithm (which falls back to Hochberg for two
    p-values, as R does).

    References
    ----------
    Holm, S. (1979). *Scand. J. Statist.*, 6, 65–70. Hochberg, Y. (1988). *Biometrika*, 75, 800–803.
    Hommel, G. (1988). *Biometrika*, 75, 383–386. Benjamini, Y., & Hochberg, Y. (1995). *JRSS B*, 57,
    289–300. Benjamini, Y., & Yekutieli, D. (2001). *Annals of Statistics*, 29, 1165–1188.

    Examples
    --------
    >>> from gengen import stats
    >>> stats.p_adjust([0.01, 0.04, 0.03, 0.2], "holm")
    array([0.04, 0.09, 0.09, 0.2 ])
    """
    _check_choice("method", method, ("holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none"))
    array = _as_float_array("p", p)
    flat = np.ascontiguousarray(array.reshape(-1))
    return _core.p_adjust(flat, method).reshape(array.shape)
