"""The AR-sieve's diagnostics: what a test set's AR model did not capture, and whether the control is too straight.

The notes of :func:`gengen.stats.sieve.sieve_partial_corr_matrix`'s results: the Ljung–Box test of the AR
innovations and their change of spread (:func:`sieve_column_notes`), and the shift of a pair's partial
correlation when the control may curve (:func:`curvature_shift`, :func:`gam_control_z`,
:func:`curvature_notes`).
"""

from __future__ import annotations

import math
import warnings
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import GengenError, InvalidArgumentError
from gengen.stats._docs import shared_doc
from gengen.stats.controls import Gam
from gengen.stats.gam import fit_gam
from gengen.stats.options import DEFAULT_GAM_K, DEFAULT_GAM_MAX_EDF, GamMaxEdf
from gengen.stats.sieve_ar import _fisher_z

#: Marks a keyword that was not passed (``None`` means something for ``max_edf``).
_NOT_GIVEN: object = object()


class _SieveColumns(Protocol):
    """What the column notes read of a :class:`gengen.stats.sieve.SievePartialCorrMatrix` (a protocol, so that
    this module and the sieve's do not import each other)."""

    # Read-only (properties): the sieve's result is a frozen dataclass.
    @property
    def n(self) -> int: ...
    @property
    def max_order(self) -> int: ...
    @property
    def ar_order(self) -> NDArray[np.int64]: ...
    @property
    def ljung_box_p(self) -> NDArray[np.float64]: ...
    @property
    def variance_ratio(self) -> NDArray[np.float64]: ...


__all__ = [
    "LJUNG_BOX_FLAG",
    "NONLINEAR_SHIFT_FLAG",
    "VARIANCE_RATIO_FLAG",
    "curvature_notes",
    "curvature_shift",
    "gam_control_z",
    "ljung_box",
    "sieve_column_notes",
]

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


def sieve_column_notes(result: _SieveColumns, labels: list[str]) -> list[list[str]]:
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


def _one_control(scores: ArrayLike, covar: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """The scores (n, m) and their control (n, 1), or None when the curvature checks do not apply: more than one
    control, or fewer than 8 checkpoints."""
    data = np.asarray(scores, dtype=np.float64)
    control = np.asarray(covar, dtype=np.float64).reshape(data.shape[0], -1)
    return data, (control if control.shape[1] == 1 and data.shape[0] >= 8 else None)


@shared_doc
def curvature_shift(scores: ArrayLike, covar: ArrayLike) -> NDArray[np.float64]:
    r"""How much each pair's partial correlation moves when the control may curve.

    The shift is :math:`|\operatorname{artanh} r(\cdot \mid 1, c) - \operatorname{artanh} r(\cdot \mid 1, c, c^2)|`.
    A linear control leaves a curved ID effect in every residual that follows it, and two OOD test sets then
    correlate through it; adding :math:`c^2` to the control removes most of that shared part, so a large shift
    says the linear control is not enough (use ``fit="gam"``). With one control only; zeros otherwise.

    Parameters
    ----------
    %(one_control)s

    Returns
    -------
    ndarray of shape (m, m)
        The shift of every pair.
    """
    data, control = _one_control(scores, covar)
    m = data.shape[1]
    if control is None:
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


def _gam_argument(fit: Gam | None, k: int | None, max_edf: GamMaxEdf | object) -> Gam:
    """The GAM of :func:`gam_control_z`: ``fit``, or one built from the deprecated ``k``/``max_edf`` keywords."""
    if k is None and max_edf is _NOT_GIVEN:
        return Gam() if fit is None else fit
    if fit is not None:
        raise InvalidArgumentError("fit: give the GAM as fit=Gam(k=..., max_edf=...), not also as k= or max_edf=")
    warnings.warn(
        "gam_control_z: k= and max_edf= are deprecated; pass fit=Gam(k=..., max_edf=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    return Gam(
        k=DEFAULT_GAM_K if k is None else k,
        max_edf=DEFAULT_GAM_MAX_EDF if max_edf is _NOT_GIVEN else max_edf,  # type: ignore[arg-type]
    )


@shared_doc
def gam_control_z(
    scores: ArrayLike,
    covar: ArrayLike,
    fit: Gam | None = None,
    *,
    k: int | None = None,
    max_edf: GamMaxEdf | object = _NOT_GIVEN,
) -> NDArray[np.float64]:
    r"""Every pair's :math:`\operatorname{artanh} r` when a GAM, not a line, takes the control out: (m, m).

    The residuals are those of ``fit="gam"`` (one penalised spline of the single control per test set). NaN
    everywhere with more than one control, fewer than 8 checkpoints, or when the GAM cannot be fitted: the
    comparison it feeds (:func:`curvature_notes`) is then skipped.

    Parameters
    ----------
    %(one_control)s
    fit : Gam, optional
        The GAM control (default ``Gam()``: mgcv's ``k = 10``, GCV, cubic regression splines, EDF capped).
    k, max_edf : optional
        Deprecated: ``Gam(k=..., max_edf=...)`` as ``fit`` says the same.

    Returns
    -------
    ndarray of shape (m, m)
        :math:`\operatorname{artanh} r` of every pair under the GAM control.
    """
    gam = _gam_argument(fit, k, max_edf)
    data, control = _one_control(scores, covar)
    m = data.shape[1]
    missing = np.full((m, m), np.nan)
    if control is None:
        return missing
    try:
        # A diagnostic, not the analysis the user asked for: its notes (k lowered for few distinct ID values)
        # would only repeat on every group.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            residuals = np.asarray(fit_gam(data, control, gam).residuals, dtype=np.float64)
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
