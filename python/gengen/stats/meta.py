r"""Fisher-z meta-analysis of per-run partial correlations (fixed and DerSimonian–Laird random effects).

For each pair of OOD test sets in a cell (e.g. all seeds of one model/size/shots), run *i* contributes its
partial correlation :math:`r_i` from :math:`n_i` checkpoints with :math:`k_i` covariates:

.. math::

    z_i = \operatorname{artanh} r_i, \qquad v_i = \frac{1}{n_i - 3 - k_i}, \qquad w_i = 1 / v_i

Heterogeneity: :math:`Q = \sum w_i (z_i - \hat z_F)^2` on :math:`R - 1` degrees of freedom,
:math:`I^2 = \max(0, (Q - (R - 1)) / Q)`.

Fixed (common) effect: :math:`\hat z_F = \sum w_i z_i / \sum w_i`, :math:`\operatorname{se}_F = (\sum
w_i)^{-1/2}`, on Student's t with Satterthwaite's ``df_fixed`` (estimated variances) or the normal.

Random effect: DerSimonian–Laird between-run variance
:math:`\hat\tau^2 = \max\bigl(0, (Q - (R-1)) / (\sum w_i - \sum w_i^2 / \sum w_i)\bigr)`, weights
:math:`w_i^* = 1 / (v_i + \hat\tau^2)`, :math:`\hat z_R = \sum w_i^* z_i / \sum w_i^*` and
:math:`\operatorname{se}_R^2 = \max(1, q^*) / \sum w_i^*` with Hartung and Knapp's
:math:`q^* = \sum w_i^* (z_i - \hat z_R)^2 / (R - 1)`: when the runs spread about the estimate more than the
weights promise, the variance is the Hartung–Knapp–Sidik–Jonkman one and the reference Student's t on
:math:`R - 1` degrees of freedom (``df_random``); otherwise DerSimonian–Laird's, on the normal. Estimates and
confidence limits are transformed back with tanh.

Why the random effect moved off the textbook form (issue 34; docs/calibration.md, "Pooled seeds, heterogeneity and
every inference path on item-level curves"): on item-level learning curves the runs' AR-sieve variances are up to
10% too small and a linear control leaves a small bias that all seeds share, so the normal-reference
DerSimonian–Laird effect rejected a null pair 0.027–0.083 of the time over 3 and 10 seeds (0.027–0.070 now; plain
Hartung–Knapp, always on t, was worse at 3 seeds: 0.083). The fixed effect trusts the runs' variances and rejects
0.057–0.107 there; widening it by Q/(R − 1) too measured 0.020–0.060 but cost a planned 6-seed design a sixth of
its power (0.918 → 0.753), so it was not adopted.

The variance :math:`1/(n - 3 - k)` assumes independent checkpoints; with autocorrelated residuals it is too
small, and so are the pooled standard errors (at AR(1) φ = 0.9, 50 checkpoints and three seeds, 45% false
positives at a nominal 5%). The analysis therefore passes each run's own variance of z, the squared AR-sieve
standard error ``se_z`` of the default inference (:mod:`gengen.stats.sieve`), through ``variance``; the formula above
is used only when no such variance exists (inference without the sieve, across-run tables).

References
----------
DerSimonian, R. & Laird, N. (1986). Meta-analysis in clinical trials. *Controlled Clinical Trials* 7, 177–188.
Hartung, J. & Knapp, G. (2001). On tests of the overall treatment effect in meta-analysis with normally
distributed responses. *Statistics in Medicine* 20, 1771–1782.
Higgins, J. P. T. & Thompson, S. G. (2002). Quantifying heterogeneity in a meta-analysis.
*Statistics in Medicine* 21, 1539–1558.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gengen import _core
from gengen.errors import InvalidArgumentError


@dataclass(frozen=True)
class MetaResult:
    """Pooled estimate of one correlation across runs (all correlations on the r scale)."""

    n_runs: int
    r_fixed: float
    se_fixed: float
    ci_low_fixed: float
    ci_high_fixed: float
    p_fixed: float
    r_random: float
    se_random: float
    ci_low_random: float
    ci_high_random: float
    p_random: float
    tau2: float
    q: float
    q_df: int
    p_q: float
    i2: float
    df_fixed: float = float("nan")
    df_random: float = float("nan")

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict (one row of the pooled table)."""
        return asdict(self)


def fisher_meta(
    r: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    *,
    ci_level: float = 0.95,
    variance: np.ndarray | None = None,
    df: np.ndarray | None = None,
) -> MetaResult:
    """Fixed- and random-effects (DerSimonian–Laird) pooling of correlations on Fisher's z scale.

    Parameters
    ----------
    r : array_like, shape (R,)
        Per-run (partial) correlations; NaN entries are left out.
    n : array_like, shape (R,)
        Observations (checkpoints) behind each correlation.
    k : array_like, shape (R,)
        Covariates partialled out of each correlation (0 for a plain correlation).
    ci_level : float
        Confidence level of the intervals.
    variance : array_like, shape (R,), optional
        Each run's variance of :math:`\\operatorname{artanh} r` (e.g. the squared AR-sieve ``se_z``), used
        instead of :math:`1/(n - 3 - k)`; runs whose variance is not finite and positive are left out.
    df : array_like, shape (R,), optional
        Degrees of freedom of each run's ``variance`` when it is itself estimated (e.g. the sieve's
        ``df_sieve``). The fixed effect is then referred to Student's t on Satterthwaite's
        :math:`\\nu = (\\sum_i w_i)^2 / \\sum_i (w_i^2 / \\nu_i)`, :math:`w_i = 1/v_i` (``df_fixed``): its
        standard error is a sum of estimated weights, not a known constant. The random effect is on
        :math:`R - 1` (``df_random``) when Hartung–Knapp's spread widens it, else on the normal (``df_random``
        NaN).

    Returns
    -------
    MetaResult
        NaN estimates when no run is usable; heterogeneity fields NaN with a single run.

    Examples
    --------
    >>> m = fisher_meta([0.5, 0.3], [20, 30], [1, 1])
    >>> round(m.r_fixed, 4), m.q_df
    (0.3807, 1)
    """
    r_arr = np.asarray(r, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    k_arr = np.asarray(k, dtype=float)
    # NaN entries are left out, and |r| = 1 (a degenerate run) too; |r| > 1 (beyond rounding) or a negative
    # count is a bug upstream, not a run to drop.
    with np.errstate(invalid="ignore"):
        outside = np.abs(r_arr) > 1 + 1e-9
        if np.any(outside):
            bad = float(r_arr[outside].flat[0])
            raise InvalidArgumentError(f"r: correlations must lie in [-1, 1], got {bad:g}")
        if np.any(n_arr < 0) or np.any(k_arr < 0):
            name, values = ("n", n_arr) if np.any(n_arr < 0) else ("k", k_arr)
            raise InvalidArgumentError(f"{name}: counts must be >= 0, got {float(values[values < 0].flat[0]):g}")
    if variance is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            v_arr = np.where(n_arr - 3 - k_arr > 0, 1.0 / (n_arr - 3.0 - k_arr), np.nan)
    else:
        v_arr = np.asarray(variance, dtype=float)
    keep = np.isfinite(r_arr) & (np.abs(r_arr) < 1) & np.isfinite(v_arr) & (v_arr > 0)
    dof_arr = np.full(r_arr.shape, np.inf) if df is None else np.asarray(df, dtype=float)
    r_arr, v_arr, dof_arr = r_arr[keep], v_arr[keep], dof_arr[keep]
    n_runs = int(r_arr.size)
    nan = float("nan")
    if n_runs == 0:
        return MetaResult(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0, nan, nan)
    z = np.arctanh(r_arr)
    v = v_arr
    w = 1.0 / v
    upper = 1.0 - (1.0 - ci_level) / 2.0
    # Satterthwaite: Var(Σŵ) ≈ Σ w² · 2/ν_i, so Σŵ behaves as (Σw)·χ²_ν/ν. A run without a finite ν counts as
    # a known variance (ν = ∞); all-infinite gives the normal reference.
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.sum(np.where(np.isfinite(dof_arr) & (dof_arr > 0), w**2 / dof_arr, 0.0))
    df_fixed = float(np.sum(w) ** 2 / spread) if df is not None and spread > 0 else float("nan")

    def pooled(weights: np.ndarray, dof: float, scale: float = 1.0) -> tuple[float, float, float, float, float]:
        estimate = float(np.sum(weights * z) / np.sum(weights))
        se = float(np.sqrt(scale / np.sum(weights)))
        if np.isfinite(dof):
            p = float(_core.t_two_sided(estimate / se, dof))
            quantile = float(_core.t_quantile(upper, dof))
        else:
            p = float(_core.normal_two_sided(estimate / se))
            quantile = float(_core.normal_quantile(upper))
        return (
            float(np.tanh(estimate)),
            se,
            float(np.tanh(estimate - quantile * se)),
            float(np.tanh(estimate + quantile * se)),
            p,
        )

    q_df = n_runs - 1
    if n_runs == 1:
        fixed = pooled(w, df_fixed)
        random = pooled(w, float("nan"))
        return MetaResult(n_runs, *fixed, *random, 0.0, nan, q_df, nan, nan, df_fixed)
    z_fixed = np.sum(w * z) / np.sum(w)
    q = float(np.sum(w * (z - z_fixed) ** 2))
    c = float(np.sum(w) - np.sum(w**2) / np.sum(w))
    tau2 = max(0.0, (q - q_df) / c) if c > 0 else 0.0
    p_q = float(_core.chi_squared_sf(q, q_df))
    i2 = max(0.0, (q - q_df) / q) if q > 0 else 0.0
    fixed = pooled(w, df_fixed)
    w_random = 1.0 / (v + tau2)
    z_random = np.sum(w_random * z) / np.sum(w_random)
    # Hartung–Knapp: the spread of the runs about the random-effects estimate, relative to the weights' variance
    # (identical estimates leave no spread to measure: the weights' own variance then, never a zero s.e.)
    # Hartung–Knapp: the runs' spread about the random-effects estimate relative to what the weights promise;
    # where it is larger the variance is widened by it, on the spread's R - 1 df
    hartung_knapp = float(np.sum(w_random * (z - z_random) ** 2) / q_df)
    if hartung_knapp > 1:
        df_random = float(q_df)
        random = pooled(w_random, df_random, hartung_knapp)
    else:
        df_random = nan
        random = pooled(w_random, df_random)
    return MetaResult(n_runs, *fixed, *random, tau2, q, q_df, p_q, i2, df_fixed, df_random)


def fisher_meta_rows(
    r: np.ndarray,
    variance: np.ndarray,
    df: np.ndarray,
    has_df: np.ndarray,
    *,
    ci_level: float = 0.95,
) -> dict[str, np.ndarray]:
    """:func:`fisher_meta` for many pooled correlations at once: one per row of a (pairs, runs) array.

    Parameters
    ----------
    r : ndarray, shape (P, R)
        Each row's per-run correlations; NaN pads rows with fewer runs (and is left out, as in
        :func:`fisher_meta`).
    variance : ndarray, shape (P, R)
        Each run's variance of :math:`\\operatorname{artanh} r` (``1/(n - 3 - k)`` where no estimate exists);
        entries not finite and positive are left out.
    df : ndarray, shape (P, R)
        Degrees of freedom of each variance (``inf`` for a known variance).
    has_df : ndarray of bool, shape (P,)
        Rows whose variances come with degrees of freedom (``df`` given to :func:`fisher_meta`): only these
        get Satterthwaite's ``df_fixed``.
    ci_level : float
        Confidence level of the intervals.

    Returns
    -------
    dict of str to ndarray
        The fields of :class:`MetaResult`, each an array of length P, equal to :func:`fisher_meta` row by row.

    Examples
    --------
    >>> rows = fisher_meta_rows(np.array([[0.5, 0.3]]), np.array([[1 / 16, 1 / 26]]), np.full((1, 2), np.inf),
    ...                         np.array([False]))
    >>> round(float(rows["r_fixed"][0]), 4), int(rows["q_df"][0])
    (0.3807, 1)
    """
    r = np.asarray(r, dtype=float)
    variance = np.asarray(variance, dtype=float)
    df = np.asarray(df, dtype=float)
    keep = np.isfinite(r) & (np.abs(r) < 1) & np.isfinite(variance) & (variance > 0)
    n_runs = keep.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Left-out runs weigh 0 (adding 0.0 to a sum is exact)
        z = np.where(keep, np.arctanh(np.where(keep, r, 0.0)), 0.0)
        w = np.where(keep, 1.0 / np.where(keep, variance, 1.0), 0.0)
        usable_df = keep & np.isfinite(df) & (df > 0)
        spread = np.sum(np.where(usable_df, w**2 / np.where(usable_df, df, 1.0), 0.0), axis=1)
        sum_w = np.sum(w, axis=1)
        df_fixed = np.where(np.asarray(has_df, dtype=bool) & (spread > 0), sum_w**2 / spread, np.nan)
        z_fixed = np.sum(w * z, axis=1) / sum_w
        q_df = np.maximum(n_runs - 1, 0)
        q = np.sum(w * (z - z_fixed[:, None]) ** 2, axis=1)
        c = sum_w - np.sum(w**2, axis=1) / sum_w
        tau2 = np.where(c > 0, np.maximum(0.0, (q - q_df) / c), 0.0)
        i2 = np.where(q > 0, np.maximum(0.0, (q - q_df) / q), 0.0)
        w_random = np.where(keep, 1.0 / (np.where(keep, variance, 1.0) + tau2[:, None]), 0.0)
        several = n_runs > 1
        # random: widened by Hartung–Knapp's spread about the random-effects estimate where it exceeds 1, on R - 1
        z_random = np.sum(w_random * z, axis=1) / np.sum(w_random, axis=1)
        hartung_knapp = np.sum(w_random * (z - z_random[:, None]) ** 2, axis=1) / np.where(several, q_df, 1)
        spread_out = several & (hartung_knapp > 1)
        random_scale = np.where(spread_out, hartung_knapp, 1.0)
        df_random = np.where(spread_out, q_df, np.nan).astype(float)
    upper = 1.0 - (1.0 - ci_level) / 2.0
    normal_quantile = float(_core.normal_quantile(upper))
    fields: dict[str, np.ndarray] = {}
    for suffix, weights, dofs, scale in (
        ("fixed", w, df_fixed, np.ones(len(r))),
        ("random", w_random, df_random, random_scale),
    ):
        with np.errstate(divide="ignore", invalid="ignore"):
            total = np.sum(weights, axis=1)
            estimate = np.sum(weights * z, axis=1) / total
            se = np.sqrt(scale / total)
        p = np.full(len(r), np.nan)
        quantile = np.full(len(r), np.nan)
        for i in np.flatnonzero(n_runs > 0):
            if np.isfinite(dofs[i]):
                p[i] = _core.t_two_sided(float(estimate[i] / se[i]), float(dofs[i]))
                quantile[i] = _core.t_quantile(upper, float(dofs[i]))
            else:
                p[i] = _core.normal_two_sided(float(estimate[i] / se[i]))
                quantile[i] = normal_quantile
        empty = n_runs == 0
        fields[f"r_{suffix}"] = np.where(empty, np.nan, np.tanh(estimate))
        fields[f"se_{suffix}"] = np.where(empty, np.nan, se)
        fields[f"ci_low_{suffix}"] = np.where(empty, np.nan, np.tanh(estimate - quantile * se))
        fields[f"ci_high_{suffix}"] = np.where(empty, np.nan, np.tanh(estimate + quantile * se))
        fields[f"p_{suffix}"] = p
    p_q = np.full(len(r), np.nan)
    for i in np.flatnonzero(several):
        p_q[i] = _core.chi_squared_sf(float(q[i]), float(q_df[i]))
    return {
        "n_runs": n_runs.astype(np.int64),
        **{name: fields[name] for name in MetaResult.__dataclass_fields__ if name in fields},
        "tau2": np.where(several, tau2, np.where(n_runs == 1, 0.0, np.nan)),
        "q": np.where(several, q, np.nan),
        "q_df": q_df.astype(np.int64),
        "p_q": p_q,
        "i2": np.where(several, i2, np.nan),
        "df_fixed": np.where(n_runs > 0, df_fixed, np.nan),
        "df_random": df_random,
    }
