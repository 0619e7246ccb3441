"""Partial and semi-partial correlations with ppcor's tests, their matrices, and residuals.

The numbers follow R's ppcor (Kim, 2015): estimates, t statistics on n − 2 − k degrees of freedom (Kendall:
ppcor's normal approximation) and Fisher-z intervals.

The control
-----------
Every function that regresses covariates out takes ``fit``: a control value, :class:`~gengen.stats.Linear` or
:class:`~gengen.stats.Gam` (:mod:`gengen.stats.controls`), or its name: ``"linear"`` (least squares on
[1, covar]) or ``"gam"`` (an additive model: intercept plus one penalised cubic regression spline per
covariate, as mgcv's ``gam(y ~ s(z, k = 10, bs = "cr"))``, the smoothing parameter chosen per column by GCV or
REML; see :func:`~gengen.stats.gam.gam_fit`). With ``fit="gam"`` these keyword options apply (the fields of
``Gam``): ``k`` (basis dimension per covariate, default 10), ``gam_method`` (``"gcv"``, default, or ``"reml"``),
``gam_basis`` (``"cr"``, default, or ``"tp"``) and ``max_edf`` (default ``"auto"``). Under the GAM control the
t-test of a pair uses df = n − 2 − max(ν_a, ν_b), ν the effective degrees of freedom of a column's smooth terms
(intercept excluded), which reduces to ppcor's n − 2 − k for a linear term; the permutation test, which reuses
each column's smoother at its chosen smoothing parameter, is the recommended inference there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import InvalidArgumentError
from gengen.stats._docs import shared_doc
from gengen.stats.controls import FitArgument, Gam, Linear, keyword_control
from gengen.stats.gam import fit_gam, warn_if_k_lowered
from gengen.stats.options import DEFAULT_CI_LEVEL, DEFAULT_FIT, DEFAULT_METHOD, METHODS, SEMIS, Method, Semi
from gengen.stats.validation import (
    as_covar,
    as_float_array,
    as_runs,
    as_table,
    as_vector,
    check_choice,
    check_threads,
    column_names,
    one_run,
)

__all__ = [
    "CorrMatrices",
    "PartialCorr",
    "PartialCorrMatrix",
    "consistent_interval",
    "partial_corr",
    "partial_corr_matrix",
    "partial_corr_matrix_batch",
    "pcor",
    "residualise",
    "spcor",
]


@dataclass(frozen=True)
class PartialCorr:
    """One (semi-)partial correlation and its test.

    What :func:`partial_corr` returns: the values of ppcor's ``pcor.test`` and ``spcor.test`` (``estimate`` is
    ``r``, ``gp`` is ``k``), with the degrees of freedom, a confidence interval and the options used.

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
    fit: str = DEFAULT_FIT


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
    df: float | NDArray[np.float64]
    n: int
    k: int
    method: str
    fit: str
    labels: list[str] | None
    edf: NDArray[np.float64] | None = None

    def pairs(self) -> pd.DataFrame:
        """One row per pair (a < b): ``a, b, r, statistic, p_value, df, n, k``."""
        names = column_names(self.labels, self.r.shape[0])
        rows = [
            (names[a], names[b], self.r[a, b], self.statistic[a, b], self.p_value[a, b])
            for a, b in zip(*np.triu_indices(self.r.shape[0], 1), strict=True)
        ]
        frame = pd.DataFrame(rows, columns=["a", "b", "r", "statistic", "p_value"])
        rows_a, rows_b = np.triu_indices(self.r.shape[0], 1)
        df = np.asarray(self.df, dtype=float)
        return frame.assign(df=df[rows_a, rows_b] if df.ndim == 2 else float(df), n=self.n, k=self.k)


@shared_doc
def partial_corr(
    x: ArrayLike,
    y: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    method: Method = DEFAULT_METHOD,
    semi: Semi | None = None,
    ci_level: float = DEFAULT_CI_LEVEL,
    fit: FitArgument = DEFAULT_FIT,
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
    fit : Linear, Gam, "linear" or "gam"
        The control; with ``"gam"``, the options ``k``, ``gam_method``, ``gam_basis`` apply (see the module
        documentation). Kendall's τ has no residual form and needs ``"linear"``.
    %(gam_options)s

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
    check_choice("method", method, METHODS)
    check_choice("semi", semi, (None, *SEMIS))
    x_values = as_vector("x", x)
    y_values = as_vector("y", y)
    if y_values.shape[0] != x_values.shape[0]:
        raise InvalidArgumentError(f"y: has {y_values.shape[0]} values but x has {x_values.shape[0]}")
    covariates = as_covar(covar, x_values.shape[0])
    control = keyword_control(fit, gam_options)
    result = _core.partial_corr(x_values, y_values, covariates, method, semi, control)
    r, statistic, p_value, df, n, k = result.r, result.statistic, result.p_value, result.df, result.n, result.k
    ci = _core.fisher_ci(r, df, float(ci_level))
    return PartialCorr(r, statistic, p_value, df, n, k, ci, float(ci_level), method, semi, control.name)


def consistent_interval(
    r: np.ndarray, statistic: np.ndarray, df: np.ndarray, ci_level: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""The Fisher-z interval of ``r`` whose standard error is the one its t statistic implies.

    With :math:`z = \operatorname{artanh} r` and :math:`\mathrm{se} = z / t` (the limit
    :math:`1/\sqrt{\mathrm{df}}` at r = 0), the interval :math:`\tanh(z \mp t_{\mathrm{df}, (1+\text{level})/2}\,
    \mathrm{se})` contains ``r`` and excludes 0 exactly when the t-test's two-sided p-value is below
    1 − level, so a row's interval and the p-value that decides it never disagree.

    Parameters
    ----------
    r, statistic, df : array_like
        Correlations, their t statistics and degrees of freedom (``df`` is broadcast to ``r``'s shape).
    ci_level : float
        Coverage of the interval.

    Returns
    -------
    low : ndarray
        Lower bounds, shaped like ``r`` (NaN where df ≤ 0).
    high : ndarray
        Upper bounds, likewise.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> low, high = stats.consistent_interval(np.array([0.5]), np.array([2.0]), np.array([12.0]), 0.95)
    >>> bool(low[0] < 0.5 < high[0])
    True
    """
    r = np.asarray(r, dtype=float)
    t = np.asarray(statistic, dtype=float)
    df = np.broadcast_to(np.asarray(df, dtype=float), r.shape)
    z = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(np.abs(r) > 1e-12, z / t, 1.0 / np.sqrt(df))
    quantile = np.array([_core.t_quantile(0.5 + ci_level / 2, float(d)) if d > 0 else np.nan for d in df.ravel()])
    half = quantile.reshape(r.shape) * np.abs(se)
    return np.tanh(z - half), np.tanh(z + half)


def _ppcor(data: ArrayLike, method: Method, semi: bool) -> CorrMatrices:
    check_choice("method", method, METHODS)
    array, labels = as_table("data", data)
    result = _core.ppcor_matrices(array, method, semi)
    estimate, statistic, p_value, n, k = result.estimate, result.statistic, result.p_value, result.n, result.k
    if labels is not None:
        estimate, statistic, p_value = (
            pd.DataFrame(matrix, index=labels, columns=labels) for matrix in (estimate, statistic, p_value)
        )
    return CorrMatrices(estimate, statistic, p_value, n, k, method)


@shared_doc
def pcor(data: ArrayLike, method: Method = DEFAULT_METHOD) -> CorrMatrices:
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

    %(ppcor_references)s

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


@shared_doc
def spcor(data: ArrayLike, method: Method = DEFAULT_METHOD) -> CorrMatrices:
    r"""Semi-partial correlations of every pair of columns (R's ``ppcor::spcor``).

    Element (i, j) is the correlation of column i with column j freed of all the other columns (the
    covariates are removed from j only), so the matrix is not symmetric.

    Parameters
    ----------
    data : array_like of shape (n, m)
        One variable per column.
    method : {"pearson", "spearman", "kendall"}

    Returns
    -------
    CorrMatrices
        ``estimate``, ``p_value``, ``statistic`` (m × m), ``n``, ``k``, ``method``.

    Notes
    -----
    :math:`sr_{ij} = -P_{ij} / (\sqrt{P_{ii}P_{jj}}\,\sqrt{|P_{ii} - P_{ij}^2/P_{jj}|})` with :math:`P` as in
    :func:`pcor`, tested with t on n − m degrees of freedom (normal approximation for Kendall).

    %(ppcor_references)s

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> data = np.random.default_rng(1).normal(size=(40, 3)).cumsum(axis=1)  # each column adds to the last
    >>> estimate = stats.spcor(data).estimate.round(3)
    >>> estimate[0, 1], estimate[1, 0]  # not symmetric
    (np.float64(0.437), np.float64(0.295))
    """
    return _ppcor(data, method, semi=True)


def residualise(
    y: ArrayLike,
    covar: ArrayLike | None,
    *,
    fit: FitArgument = DEFAULT_FIT,
    lam: ArrayLike | None = None,
    **gam_options: Any,
) -> NDArray[np.float64]:
    r"""Residuals of each column of ``y`` after least squares on :math:`[1, \text{covar}]`.

    Parameters
    ----------
    y : array_like of shape (n,) or (n, m)
        The variables to residualise, one per column.
    covar : array_like of shape (n,) or (n, k), or None
        The covariates; None centres only.
    fit : Linear, Gam, "linear" or "gam"
        The control; with a GAM the residuals are :func:`gam_fit`'s.
    lam : array_like, optional
        With a GAM control, fixed smoothing parameters (one per covariate) instead of the criterion's.
    **gam_options
        Deprecated: ``k``, ``gam_method``, ``gam_basis``, ``max_edf`` with ``fit="gam"``; pass
        ``fit=Gam(...)`` instead (a ``FutureWarning`` says which).

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
    control = keyword_control(fit, gam_options)
    if isinstance(control, Gam):
        return fit_gam(y, covar, control, lam=lam).residuals  # type: ignore[arg-type]
    if lam is not None:
        raise InvalidArgumentError(option="lam", problem='is a GAM option and needs fit="gam"')
    array = as_float_array("y", y)
    if array.ndim not in (1, 2):
        raise InvalidArgumentError(f"y: must be one- or two-dimensional, got shape {array.shape}")
    table = array[:, None] if array.ndim == 1 else array
    residuals = _core.residualise(table, as_covar(covar, table.shape[0]))
    return residuals[:, 0] if array.ndim == 1 else residuals


@shared_doc
def partial_corr_matrix(
    scores: ArrayLike,
    covar: ArrayLike | None = None,
    *,
    method: Method = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
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
    fit : Linear, Gam, "linear" or "gam"
        The control; GAM options ``k``, ``gam_method``, ``gam_basis`` (see the module documentation).
    %(threads)s
    %(gam_options)s

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
    >>> import pandas as pd
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> id_score = np.linspace(0.5, 0.9, 30)
    >>> scores = pd.DataFrame(id_score[:, None] + rng.normal(0, 0.02, (30, 3)), columns=["hans", "rte", "anli"])
    >>> result = stats.partial_corr_matrix(scores, id_score)
    >>> result.r.shape, result.df
    ((3, 3), 27.0)
    >>> result.pairs()[["a", "b", "r", "p_value"]].round(3)
          a     b      r  p_value
    0  hans   rte  0.153    0.428
    1  hans  anli  0.198    0.304
    2   rte  anli -0.139    0.472
    """
    return cast(PartialCorrMatrix, one_run(partial_corr_matrix_batch, locals()))


@shared_doc
def partial_corr_matrix_batch(
    scores: Sequence[ArrayLike],
    covar: Sequence[ArrayLike | None] | None = None,
    *,
    method: Method = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    n_threads: int | None = None,
    **gam_options: Any,
) -> list[PartialCorrMatrix]:
    """:func:`partial_corr_matrix` for many runs at once, computed in parallel.

    Parameters
    ----------
    scores : sequence of array_like (n_i, m_i), or an array of shape (runs, n, m)
        One score matrix per run; runs may differ in length.
    covar : sequence of array_like (n_i, k_i) or None, or an array of shape (runs, n, k), optional
        One control per run, in the same order (None: no control).
    method : {"pearson", "spearman", "kendall"}
        As in :func:`partial_corr_matrix`.
    fit : Linear, Gam, "linear" or "gam"
        As in :func:`partial_corr_matrix`.
    %(threads)s
    %(gam_options)s

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
    check_choice("method", method, METHODS)
    control = keyword_control(fit, gam_options)
    tables, covars, labels = as_runs(scores, covar)
    if isinstance(control, Gam):
        for index, controls in enumerate(covars):
            warn_if_k_lowered(controls, control.k, f"scores[{index}]" if len(covars) > 1 else "covar")
    results = _core.partial_corr_matrix_batch(tables, covars, method, control, check_threads(n_threads))
    linear = isinstance(control, Linear)
    return [
        PartialCorrMatrix(
            run.r,
            run.statistic,
            run.p_value,
            float(run.n - 2 - run.k) if linear else run.pair_df,
            run.n,
            run.k,
            method,
            control.name,
            names,
            None if linear else run.control_df,
        )
        for run, names in zip(results, labels, strict=True)
    ]
