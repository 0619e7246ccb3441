r"""How much one checkpoint carries a partial correlation: leave-one-checkpoint-out estimates and tests.

A partial correlation across checkpoints can rest on a single checkpoint. The typical case in fine-tuning is
the model before training (step 0): an OOD test set that sits at chance from the first evaluation on has a
residual that is one spike at step 0, so its partial correlation with any other test set is
:math:`\pm |e_{b,0}| / \lVert e_b \rVert` with a sign that is a coin flip, and a test that treats the spike as
if it could have fallen at any checkpoint calls it significant. Deleting each checkpoint in turn and
recomputing the estimate — with the control refitted, as statsmodels' ``OLSInfluence`` and the DFBETAS of
Belsley, Kuh & Welsch (1980) do for a regression coefficient — shows whether the verdict survives without it.

:func:`leave_one_out_partial_corr` gives the estimates; :func:`leave_one_out_test` turns them, with the
standard error of the full estimate, into each pair's most influential checkpoint and the p-value that survives
the deletion of any checkpoint carrying more than half of the estimate, which gengen's analysis uses so that no
single checkpoint decides a verdict.

References
----------
Belsley, D. A., Kuh, E. & Welsch, R. E. (1980). *Regression Diagnostics*. Wiley, ch. 2.
Cook, R. D. (1977). Detection of influential observation in linear regression. *Technometrics* 19(1), 15–18.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.errors import GengenError, InvalidArgumentError
from gengen.stats.controls import FitArgument, Linear, keyword_control
from gengen.stats.correlation import partial_corr_matrix, partial_corr_matrix_batch
from gengen.stats.options import DEFAULT_FIT, DEFAULT_METHOD, Method

__all__ = ["CARRYING_SHARE", "LeaveOneOut", "leave_one_out_partial_corr", "leave_one_out_test"]


def _matrix_or_nan(scores: NDArray[np.float64], covar: NDArray[np.float64], options: dict[str, Any]) -> Any:
    """``partial_corr_matrix(...).r``, pair by pair where the whole matrix cannot be computed (NaN where a pair
    cannot): deleting one checkpoint can leave a test set constant or explained by the control."""
    m = scores.shape[1]
    try:
        return np.asarray(partial_corr_matrix(scores, covar, **options).r, dtype=float)
    except GengenError:
        pass
    r = np.full((m, m), np.nan)
    np.fill_diagonal(r, 1.0)
    for a, b in zip(*np.triu_indices(m, 1), strict=True):
        try:
            value = float(np.asarray(partial_corr_matrix(scores[:, [a, b]], covar, **options).r)[0, 1])
        except GengenError:
            continue
        r[a, b] = r[b, a] = value
    return r


def leave_one_out_partial_corr(
    scores: ArrayLike,
    covar: ArrayLike,
    *,
    method: Method = DEFAULT_METHOD,
    fit: FitArgument = DEFAULT_FIT,
    **gam_options: Any,
) -> NDArray[np.float64]:
    r"""Every pair's partial correlation with each checkpoint deleted in turn, the control refitted.

    Parameters
    ----------
    scores : array_like of shape (n, m)
        One column per test set, one row per checkpoint.
    covar : array_like of shape (n,) or (n, q)
        The control (e.g. the in-domain score), in the same order.
    method : {"pearson", "spearman", "kendall"}
        Correlation (ranks are recomputed without the deleted checkpoint).
    fit : Linear, Gam, "linear" or "gam"
        The control, refitted on the remaining checkpoints.
    **gam_options
        Deprecated: ``k``, ``gam_method``, ``gam_basis``, ``max_edf`` with ``fit="gam"``; pass
        ``fit=Gam(...)`` instead (a ``FutureWarning`` says which).

    Returns
    -------
    ndarray of shape (n, m, m)
        ``r[t]`` is the partial correlation matrix without checkpoint ``t``; NaN where deleting it leaves a pair
        without a partial correlation (a test set constant or explained by the control).

    Raises
    ------
    InvalidArgumentError
        Shapes that do not match, or fewer than 5 checkpoints.

    Notes
    -----
    With :math:`S_{-t}` the checkpoints without :math:`t`,
    :math:`r_{ab}^{(-t)} = \operatorname{corr}\bigl((I - H^{(-t)}) y_a^{(-t)}, (I - H^{(-t)}) y_b^{(-t)}\bigr)`,
    where :math:`H^{(-t)}` is the control's hat matrix fitted on :math:`S_{-t}` (Belsley, Kuh & Welsch, 1980).
    The n refits run in parallel in the core (:func:`~gengen.stats.partial_corr_matrix_batch`); for Pearson
    under the linear control they are one closed-form pass instead, the residual cross-products downdated by
    each checkpoint's residual and leverage, :math:`S^{(-t)} = S - e_t e_t^\top / (1 - h_t)` (the same numbers to
    rounding; a deletion that leaves less than 1e-4 of a test set's residual is refitted).

    Examples
    --------
    A test set at chance after step 0 has all of its residual there:

    >>> import numpy as np
    >>> from gengen.stats.influence import leave_one_out_partial_corr
    >>> rng = np.random.default_rng(0)
    >>> id_score = np.linspace(0.5, 0.9, 12)
    >>> ood = np.column_stack([id_score + rng.normal(0, 0.02, 12), np.full(12, 0.5)])
    >>> ood[0, 1] = 0.45
    >>> loo = leave_one_out_partial_corr(ood, id_score)
    >>> bool(np.isnan(loo[0, 0, 1]))  # without step 0 that test set is constant: nothing left to correlate
    True
    """
    data = np.asarray(scores, dtype=np.float64)
    if data.ndim != 2:
        raise InvalidArgumentError(f"scores: expected a 2-D array (checkpoints × test sets), got shape {data.shape}")
    control = np.asarray(covar, dtype=np.float64).reshape(data.shape[0], -1) if np.size(covar) else None
    if control is None or control.shape[0] != data.shape[0]:
        raise InvalidArgumentError("covar: needs one row per checkpoint of scores")
    n = data.shape[0]
    if n < 5:
        raise InvalidArgumentError(f"scores: need at least 5 checkpoints to delete one, got {n}")
    options: dict[str, Any] = {"method": method, "fit": keyword_control(fit, gam_options)}
    keep = [np.flatnonzero(np.arange(n) != t) for t in range(n)]
    if method == "pearson" and isinstance(options["fit"], Linear):
        closed = _linear_deletions(data, control)
        if closed is not None:
            r, exact = closed
            for t in np.flatnonzero(~exact):  # deletions too close to a degenerate fit: refitted
                r[t] = _matrix_or_nan(data[keep[t]], control[keep[t]], options)
            return r
    try:
        batch = partial_corr_matrix_batch([data[rows] for rows in keep], [control[rows] for rows in keep], **options)
        return np.stack([np.asarray(result.r, dtype=float) for result in batch])
    except GengenError:
        # One deletion that leaves a test set without residual sinks the batch: each deletion on its own.
        return np.stack([_matrix_or_nan(data[rows], control[rows], options) for rows in keep])


#: A deletion whose residual sum of squares keeps less than this share of the full one (or whose leverage is
#: within this of 1) is refitted rather than downdated: the downdate's cancellation would cost digits there.
_DOWNDATE_FLOOR = 1e-4


def _linear_deletions(
    data: NDArray[np.float64], control: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
    r"""All n deleted Pearson partial correlations under the linear control in one pass, and which deletions
    the downdate is accurate for (None when the full fit is itself degenerate: the refits decide then).

    With :math:`E` the residuals of the least-squares fit on :math:`X = [1, 	ext{covar}]`, :math:`h_t` its
    leverages and :math:`S = E^	op E`, deleting checkpoint t leaves the residual cross-products
    :math:`S^{(-t)} = S - e_t e_t^	op / (1 - h_t)` (the rank-one downdate of the residual-maker matrix; Belsley,
    Kuh & Welsch, 1980, ch. 2), so :math:`r^{(-t)}_{ab} = S^{(-t)}_{ab} / (S^{(-t)}_{aa} S^{(-t)}_{bb})^{1/2}`.
    """
    n = data.shape[0]
    design = np.column_stack([np.ones(n), control])
    q, upper = np.linalg.qr(design)
    if not np.all(np.abs(np.diag(upper)) > 1e-10 * np.abs(upper).max()):
        return None  # collinear control: the refit decides
    centred = data - data.mean(axis=0)
    residuals = centred - q @ (q.T @ centred)
    leverage = np.sum(q * q, axis=1)
    full = np.sum(residuals * residuals, axis=0)
    if not np.all(full > (1e-6 * np.linalg.norm(centred, axis=0)) ** 2):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 1.0 / (1.0 - leverage)
        cross = residuals.T @ residuals
        scaled = residuals * scale[:, None]
        deleted = scaled[:, :, None] * residuals[:, None, :]  # e_t e_tᵀ / (1 − h_t), then S minus it, in place
        np.subtract(cross[None, :, :], deleted, out=deleted)
        diagonal = np.einsum("taa->ta", deleted)
        exact = (leverage < 1.0 - _DOWNDATE_FLOOR) & np.all(diagonal > _DOWNDATE_FLOOR * full, axis=1)
        inverse = 1.0 / np.sqrt(np.where(diagonal > 0, diagonal, np.nan))
        r = deleted
        r *= inverse[:, :, None]
        r *= inverse[:, None, :]
    m = data.shape[1]
    r[:, np.arange(m), np.arange(m)] = 1.0
    return r, exact


#: A deletion *carries* an estimate when it removes more than this share of it (on Fisher's z scale): the
#: DFBETA-style cut-off of the rule that no single checkpoint decides a verdict.
CARRYING_SHARE = 0.5
#: Shares of the estimate closer than this count as a tie for the most influential checkpoint, which then is
#: the earliest of them (equal deletions of repeated checkpoints differ only by rounding).
TIE_TOLERANCE = 1e-10


@dataclass(frozen=True)
class LeaveOneOut:
    """The verdict of one estimate with each checkpoint deleted in turn (arrays: one entry per pair).

    Attributes
    ----------
    p_max : ndarray
        The largest two-sided p-value over the full estimate and every deletion that carries it (removes more
        than ``share`` of it), each taken in the direction of the full estimate (a deletion that flips the sign,
        or leaves no estimate, gives p = 1). Equal to the full estimate's p when no single checkpoint carries it.
    worst : ndarray of int
        The most influential checkpoint (row index): the deletion that removes the largest share of the estimate
        (the earliest of those within :data:`TIE_TOLERANCE` of it); -1 when undefined.
    influence : ndarray
        The share of the estimate that deleting ``worst`` removes, :math:`1 - s z_{(t)} / |z|` (above 1 when the
        sign flips; 1 when no estimate is left).
    r_worst : ndarray
        The estimate without ``worst``.
    ci_low, ci_high : ndarray
        The hull of the full interval and those of the carrying deletions: it holds the full estimate and
        excludes 0 exactly when ``p_max`` is below 1 − level.
    """

    p_max: NDArray[np.float64]
    worst: NDArray[np.int64]
    influence: NDArray[np.float64]
    r_worst: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]


def _directional_p(statistic: float, df: float) -> float:
    """Two-sided p of ``statistic`` on Student's t with ``df`` where it is positive; 1 where it is not (or
    anything is undefined): an estimate on the other side of 0 does not support the verdict at all."""
    if math.isfinite(statistic) and statistic > 0 and math.isfinite(df) and df > 0:
        return min(1.0, float(_core.t_two_sided(float(statistic), float(df))))
    return 1.0


def _half_width(se: float, df: float, ci_level: float) -> float:
    """Half-width of the t interval on the Fisher-z scale (NaN where undefined)."""
    if math.isfinite(se) and math.isfinite(df) and df > 0:
        return float(_core.t_quantile(0.5 + ci_level / 2, float(df))) * se
    return math.nan


def _directional_p_array(statistic: NDArray[np.float64], df: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`_directional_p` element-wise (the same tail, over the array in the core)."""
    out = np.ones(statistic.shape)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(statistic) & (statistic > 0) & np.isfinite(df) & (df > 0)
    tails = _core.t_two_sided_array(np.ascontiguousarray(statistic[ok]), np.ascontiguousarray(df[ok]))
    out[ok] = np.minimum(1.0, tails)
    return out


def _half_width_array(se: NDArray[np.float64], df: NDArray[np.float64], ci_level: float) -> NDArray[np.float64]:
    """:func:`_half_width` element-wise (the same quantile, over the array in the core)."""
    out = np.full(se.shape, np.nan)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(se) & np.isfinite(df) & (df > 0)
    out[ok] = _core.t_quantile_array(0.5 + ci_level / 2, np.ascontiguousarray(df[ok])) * se[ok]
    return out


def leave_one_out_test(
    r: ArrayLike,
    r_deleted: ArrayLike,
    se_z: ArrayLike,
    df: ArrayLike,
    *,
    fisher_df: ArrayLike,
    share: float = CARRYING_SHARE,
    ci_level: float = 0.95,
) -> LeaveOneOut:
    r"""Whether an estimate's verdict survives the deletion of any checkpoint that carries it.

    Parameters
    ----------
    r : array_like of shape (pairs,)
        The full estimates.
    r_deleted : array_like of shape (n, pairs)
        The estimates without each of the n checkpoints (:func:`leave_one_out_partial_corr`).
    se_z : array_like of shape (pairs,)
        Standard errors of :math:`\operatorname{artanh} r` of the full estimates (e.g. the AR-sieve's, or
        Fisher's :math:`1/\sqrt{n - 3 - k}`).
    df : array_like of shape (pairs,)
        Degrees of freedom of the full estimates' t reference (e.g. ``df_sieve``).
    fisher_df : array_like of shape (pairs,)
        :math:`n - 3 - k`, Fisher's :math:`1/\mathrm{se}^2` with independent checkpoints: one checkpoint fewer
        scales the variance by :math:`f / (f - 1)`.
    share : float
        A deletion *carries* the estimate when it removes more than this share of it (default 0.5).
    ci_level : float
        Level of the intervals.

    Returns
    -------
    LeaveOneOut
        ``p_max``, ``worst``, ``influence``, ``r_worst``, ``ci_low``, ``ci_high`` per pair.

    Notes
    -----
    With :math:`s` the sign of the full estimate, :math:`z = \operatorname{artanh} r` and
    :math:`z_{(t)} = \operatorname{artanh} r^{(-t)}`, the influence of checkpoint :math:`t` is
    :math:`1 - s z_{(t)} / |z|`, the share of the estimate its deletion removes (DFBETA on the Fisher scale,
    relative to the estimate; Belsley, Kuh & Welsch, 1980). Its deletion's standard error is
    :math:`\mathrm{se}_{(t)} = \mathrm{se}_z \sqrt{f / (f - 1)}` (the variance inflation kept) on
    :math:`1/\mathrm{se}_{(t)}^2 + 1` degrees of freedom, and its directional p-value is
    :math:`p_{(t)} = \min\{1, 2 P(T > s z_{(t)} / \mathrm{se}_{(t)})\}` (1 when :math:`s z_{(t)} \le 0`).
    Then :math:`p_{\max} = \max(p, \max_{t \in C} p_{(t)})` over the carrying deletions
    :math:`C = \{t : 1 - s z_{(t)}/|z| > \text{share}\}`. A row is significant only when no single
    checkpoint carries it, or its significance survives that checkpoint's deletion. The rule costs little power:
    ordinary sampling variation moves an estimate by a small share per checkpoint, while a spike (a test set
    flat after step 0, every test set's step 0 off its line in ID) carries nearly all of it. Each interval is
    :math:`\tanh(z \mp t_{\nu,(1+\text{level})/2}\, \mathrm{se})`; each excludes 0 on the side of
    :math:`s` exactly when its p is below :math:`1 - \text{level}`, so their hull excludes 0 exactly when
    :math:`p_{\max} < 1 - \text{level}`.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.stats.influence import leave_one_out_test
    >>> result = leave_one_out_test([0.6], [[0.55], [0.05], [0.62]], se_z=[0.2], df=[24.0], fisher_df=[23.0])
    >>> int(result.worst[0]), round(float(result.influence[0]), 2), round(float(result.p_max[0]), 2)
    (1, 0.93, 0.81)
    """
    full = np.asarray(r, dtype=np.float64).ravel()
    deleted = np.asarray(r_deleted, dtype=np.float64)
    if deleted.ndim != 2 or deleted.shape[1] != full.size:
        raise InvalidArgumentError(f"r_deleted: expected shape (n, {full.size}), got {deleted.shape}")
    se = np.broadcast_to(np.asarray(se_z, dtype=np.float64).ravel(), full.shape)
    dof = np.broadcast_to(np.asarray(df, dtype=np.float64).ravel(), full.shape)
    fisher = np.broadcast_to(np.asarray(fisher_df, dtype=np.float64).ravel(), full.shape)
    if not 0.0 < ci_level < 1.0:
        raise InvalidArgumentError(f"ci_level: must lie strictly between 0 and 1, got {ci_level!r}")
    if not 0.0 < share <= 1.0:
        raise InvalidArgumentError(f"share: must lie in (0, 1], got {share!r}")
    sign = np.where(full < 0, -1.0, 1.0)
    z_full = np.arctanh(np.clip(full, -1 + 1e-15, 1 - 1e-15))
    with np.errstate(divide="ignore", invalid="ignore"):
        se_deleted = np.where(fisher > 1.0, se * np.sqrt(fisher / (fisher - 1.0)), np.nan)
        df_deleted = 1.0 / se_deleted**2 + 1.0
    z_deleted = np.arctanh(np.clip(deleted, -1 + 1e-15, 1 - 1e-15))
    # A deletion without an estimate (NaN) removes all of it and leaves the sign open.
    directional = np.where(np.isfinite(z_deleted), sign * z_deleted, -np.inf)
    pairs = full.size
    p_max = np.full(pairs, np.nan)
    worst = np.full(pairs, -1, dtype=np.int64)
    influence = np.full(pairs, np.nan)
    r_worst = np.full(pairs, np.nan)
    low = np.full(pairs, np.nan)
    high = np.full(pairs, np.nan)
    # All pairs at once; the t quantiles and tails are the scalar functions' over arrays (the same numbers). A
    # deletion's df is at least 1, so its quantile is finite wherever its standard error is: its half-width is
    # needed only for the pairs whose interval a deletion widens (below).
    half_full = _half_width_array(se, dof, ci_level)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(half_full) & np.isfinite(se_deleted) & np.isfinite(df_deleted) & (df_deleted > 0)
    magnitude = np.abs(z_full)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_max[valid] = _directional_p_array(magnitude[valid] / se[valid], dof[valid])
    low[valid], high[valid] = z_full[valid] - half_full[valid], z_full[valid] + half_full[valid]
    active = np.flatnonzero(valid & ~(magnitude <= 1e-12))
    if active.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            removed = 1.0 - np.minimum(directional[:, active], 1e300) / magnitude[active]
        # Deletions whose shares tie up to rounding (repeated or mirrored checkpoints) go to the earliest, so
        # the choice does not hang on how the deleted fits were computed (refits or the closed form).
        best = removed.max(axis=0)
        top = np.where(np.isnan(best), np.argmax(removed, axis=0), np.argmax(removed >= best - TIE_TOLERANCE, axis=0))
        cols = np.arange(active.size)
        worst[active] = top
        influence[active] = np.where(np.isfinite(directional[top, active]), removed[top, cols], 1.0)
        r_worst[active] = deleted[top, active]
        with np.errstate(invalid="ignore"):
            carrying = removed > share
        some = carrying.any(axis=0)
        # Only the pairs with a carrying deletion (usually few) change below.
        chosen = active[some]
        carrying = carrying[:, some]
        weakest = np.where(carrying, directional[:, chosen], np.inf).min(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            deleted_p = _directional_p_array(weakest / se_deleted[chosen], df_deleted[chosen])
        p_max[chosen] = np.maximum(p_max[chosen], deleted_p)
        kept = z_deleted[:, chosen]
        finite = carrying & np.isfinite(kept)
        has_finite = finite.any(axis=0)
        smallest = np.where(finite, kept, np.inf).min(axis=0)
        largest = np.where(finite, kept, -np.inf).max(axis=0)
        cols_f = chosen[has_finite]
        half_deleted = _half_width_array(se_deleted[cols_f], df_deleted[cols_f], ci_level)
        low[cols_f] = np.minimum(low[cols_f], smallest[has_finite] - half_deleted)
        high[cols_f] = np.maximum(high[cols_f], largest[has_finite] + half_deleted)
        open_sign = (carrying & ~np.isfinite(kept)).any(axis=0)
        cols_o = chosen[open_sign]
        low[cols_o], high[cols_o] = np.minimum(low[cols_o], 0.0), np.maximum(high[cols_o], 0.0)
    return LeaveOneOut(
        p_max=p_max, worst=worst, influence=influence, r_worst=r_worst, ci_low=np.tanh(low), ci_high=np.tanh(high)
    )
