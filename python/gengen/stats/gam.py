"""The GAM control: each column on an intercept plus one penalised regression spline per covariate (mgcv's model).

Every function that regresses covariates out takes ``fit=Gam(...)`` (:mod:`gengen.stats.controls`) or
``fit="gam"`` for this control, with the keyword options
``k`` (basis dimension per covariate, default 10), ``gam_method`` (``"gcv"``, default, or ``"reml"``),
``gam_basis`` (``"cr"``, default, or ``"tp"``) and ``max_edf`` (cap on the effective degrees of freedom,
default ``"auto"``: :func:`default_max_edf` of the number of rows); :func:`gam_fit` exposes the fit itself.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import InvalidArgumentError
from gengen.stats.controls import Gam, gam_of
from gengen.stats.options import (
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    GamBasis,
    GamMaxEdf,
    GamMethod,
)
from gengen.stats.validation import as_covar, as_float_array, check_count, check_threads

__all__ = ["GamFit", "default_max_edf", "gam_fit"]


def default_max_edf(n: int, q: int = 1) -> float:
    r"""The default cap on the GAM control's effective degrees of freedom: :math:`1 + q\max(1, n/4)`.

    The cap counts the intercept (as mgcv's ``sum(edf)``): each of the ``q`` smooths may spend one degree of
    freedom per four checkpoints, and always at least a straight line's one.

    Parameters
    ----------
    n : int
        Rows (checkpoints).
    q : int, default 1
        Controls.

    Returns
    -------
    float
        The cap, intercept included.

    Notes
    -----
    A partial correlation under a GAM control of EDF :math:`\nu` (intercept included) has
    :math:`n - 2 - (\nu - 1)` degrees of freedom, as ppcor counts them. Left to itself GCV can spend 9 of 11 at
    n = 11 (standard error :math:`10^{150}`); under the cap it keeps at least :math:`n - 1 - 3.75 = 6.25` at
    n = 11 and 13 at n = 20; from n = 36 on the cap exceeds what a basis of ``k = 10`` can spend.

    The rows per degree of freedom (4) were chosen by measurement: the sieve test
    (:func:`~gengen.stats.sieve.sieve_partial_corr_matrix`, ``fit="gam"``) of a truly independent pair at n = 11
    with a saturating ID effect and AR(1) noise of φ = 0.9 (gengen's simulated runs, 400 per cell) rejects 0.21
    of them at 0.05 with the cap n/5 (3.2: too stiff to follow the curve, which stays in both residuals), 0.05
    with n/4 and 0.60 with n/6; with a linear ID effect all three reject at most 0.04.

    Examples
    --------
    >>> from gengen.stats.gam import default_max_edf
    >>> default_max_edf(11), default_max_edf(40), default_max_edf(40, q=2)
    (3.75, 11.0, 21.0)
    """
    n = check_count("n", n, 1)
    q = check_count("q", q, 1)
    return float(_core.default_max_edf(n, q))


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
    capped : bool or ndarray of shape (m,)
        Whether the EDF cap raised the smoothing parameters above the criterion's optimum.
    max_edf : float
        The cap that applied (``inf`` when none).
    """

    fitted: NDArray[np.float64]
    residuals: NDArray[np.float64]
    edf: Any
    lam: NDArray[np.float64]
    score: Any
    k: tuple[int, ...]
    gam_method: str
    gam_basis: str
    capped: Any = False
    max_edf: float = float("inf")


def gam_fit(
    y: ArrayLike,
    covar: ArrayLike,
    *,
    k: int = DEFAULT_GAM_K,
    gam_method: GamMethod = DEFAULT_GAM_METHOD,
    gam_basis: GamBasis = DEFAULT_GAM_BASIS,
    lam: ArrayLike | None = None,
    n_threads: int | None = None,
    max_edf: GamMaxEdf = DEFAULT_GAM_MAX_EDF,
) -> GamFit:
    r"""GAM control: each column of ``y`` on an intercept plus one penalised regression spline per control.

    Parameters
    ----------
    y : array_like of shape (n,) or (n, m)
        The variables to smooth on the controls, one per column.
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
        Threads to use (default: all cores).
    max_edf : float, "auto" or None, default "auto"
        Cap on each fit's effective degrees of freedom, intercept included: ``"auto"`` for
        :func:`default_max_edf` of n and q, a number (at least 1 + q), or None for the criterion's optimum
        whatever it spends. Does not apply to fixed ``lam``.

    Returns
    -------
    GamFit
        ``fitted``, ``residuals``, ``edf``, ``lam``, ``score``, ``k``, ``gam_method``, ``gam_basis``,
        ``capped``, ``max_edf``.

    Notes
    -----
    The model is mgcv's ``gam(y ~ s(z_1, k = k, bs = "cr") + … + s(z_q, …))``: coefficients minimise
    :math:`\lVert y - X\beta\rVert^2 + \sum_j \lambda_j \beta^\top S_j \beta` with the sum-to-zero constrained
    basis and penalty of ``smoothCon``. GCV minimises :math:`n\,\mathrm{RSS}/(n - \operatorname{tr} A_\lambda)^2`;
    REML minimises the restricted likelihood with the scale profiled out. The search over
    :math:`\log\lambda` is global (grid + Brent), so where the criterion has several local minima (short
    trajectories with tied control values) the optimum can be better than the one mgcv's Newton iteration
    stops at.

    Under the cap :math:`\nu_{\max}`, when the optimum has :math:`\operatorname{tr} A_\lambda > \nu_{\max}`
    every :math:`\log\lambda_j` is raised by the same :math:`t` (bisection; the EDF falls monotonically in
    :math:`t`) until :math:`\operatorname{tr} A_\lambda = \nu_{\max}`: the returned fit is mgcv's
    ``gam(y ~ s(z, k = k, bs = "cr"), sp = lam)`` at the returned ``lam``.

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
    >>> z11 = np.linspace(0, 1, 11)
    >>> y11 = np.sin(8 * z11) + 0.1 * np.cos(40 * z11)
    >>> round(stats.gam_fit(y11, z11, max_edf=None).edf, 1)
    9.9
    >>> short = stats.gam_fit(y11, z11)
    >>> round(short.edf, 6), short.max_edf, short.capped
    (3.75, 3.75, True)
    """
    control = gam_of({"k": k, "gam_method": gam_method, "gam_basis": gam_basis, "max_edf": max_edf})
    return fit_gam(y, covar, control, lam=lam, n_threads=n_threads, stacklevel=3)


def fit_gam(
    y: ArrayLike,
    covar: ArrayLike,
    control: Gam,
    *,
    lam: ArrayLike | None = None,
    n_threads: int | None = None,
    stacklevel: int = 2,
) -> GamFit:
    """:func:`gam_fit` under a :class:`~gengen.stats.controls.Gam` control value (already checked).

    Parameters
    ----------
    y : array_like of shape (n,) or (n, m)
        The variables to smooth on the controls, one per column.
    covar : array_like of shape (n,) or (n, q)
        The controls.
    control : Gam
        Basis dimension, criterion, basis and EDF cap.
    lam : array_like of shape (q,), optional
        Fixed smoothing parameters instead of selecting them.
    n_threads : int, optional
        Threads to use (default: all cores).
    stacklevel : int, default 2
        Where the warning that k was lowered points (2: the caller of this function).

    Returns
    -------
    GamFit
        As :func:`gam_fit`'s.
    """
    k = control.k
    array = as_float_array("y", y)
    if array.ndim not in (1, 2):
        raise InvalidArgumentError(f"y: must be one- or two-dimensional, got shape {array.shape}")
    table = array[:, None] if array.ndim == 1 else array
    controls = as_covar(covar, table.shape[0])
    if controls.shape[1] == 0:
        raise InvalidArgumentError('covar: fit="gam" needs at least one control column')
    fixed = None if lam is None else [float(v) for v in np.atleast_1d(as_float_array("lam", lam))]
    result = _core.gam_fit(table, controls, control, fixed, check_threads(n_threads))
    fitted, residuals, edf, lam_out, score, k_used = (
        result.fitted,
        result.residuals,
        result.edf,
        result.lam,
        result.score,
        result.k_used,
    )
    if any(used < k for used in k_used):
        warnings.warn(
            f"k: lowered from {k} to {tuple(k_used)} (too few distinct control values)", stacklevel=stacklevel
        )
    if array.ndim == 1:
        return GamFit(
            fitted[:, 0],
            residuals[:, 0],
            float(edf[0]),
            lam_out[0],
            float(score[0]),
            tuple(k_used),
            control.method,
            control.basis,
            bool(result.capped[0]),
            float(result.max_edf),
        )
    capped = np.asarray(result.capped, dtype=bool)
    return GamFit(
        fitted,
        residuals,
        edf,
        lam_out,
        score,
        tuple(k_used),
        control.method,
        control.basis,
        capped,
        float(result.max_edf),
    )


def warn_if_k_lowered(controls: NDArray[np.float64], k: int, where: str) -> None:
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
