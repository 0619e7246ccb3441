"""Tail probabilities of Student's t and Fisher's F without scipy, for the heterogeneity and verdict tables.

:func:`two_sided_p` refers a statistic to Student's t (or the normal for infinite df) through the Rust core;
:func:`f_sf` is the upper tail of F from the regularised incomplete beta function (a continued fraction, modified
Lentz), with the chi-squared limit for an infinite denominator df; :func:`f_sf_array` is the same arithmetic
element-wise over arrays (one Lentz pass over all of them, for the per-pair heterogeneity tests). The
log-beta in front of the fraction uses Stirling's series for large arguments (``lgamma(a + b) - lgamma(a)`` loses
1e-12 to cancellation at a denominator df of ~1,000). Both are re-exported by :mod:`gengen.across.heterogeneity`, where
they were first written.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from gengen import _core

__all__ = ["f_sf", "f_sf_array", "two_sided_p"]


def two_sided_p(statistic: float, df: float) -> float:
    """Two-sided p-value of a t statistic.

    Parameters
    ----------
    statistic : float
        The statistic.
    df : float
        Its degrees of freedom; ``inf`` for the standard normal.

    Returns
    -------
    float
        :math:`2 P(T_{df} > |t|)`; NaN for a statistic that is not finite.
    """
    if not np.isfinite(statistic):
        return float("nan")
    if np.isfinite(df):
        return float(_core.t_two_sided(statistic, df))
    return float(_core.normal_two_sided(statistic))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Press et al., *Numerical Recipes*)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def f_sf(x: float, d1: float, d2: float) -> float:
    """:math:`P(F_{d_1, d_2} > x)`, with :math:`\\chi^2_{d_1}/d_1` for :math:`d_2 = \\infty`.

    Parameters
    ----------
    x : float
        The statistic.
    d1, d2 : float
        Numerator and denominator degrees of freedom.

    Returns
    -------
    float
        The upper tail probability: :math:`I_{d_2/(d_2 + d_1 x)}(d_2/2, d_1/2)`, the regularised incomplete beta.

    Examples
    --------
    >>> round(f_sf(3.0, 3, 20), 6)
    0.054859
    """
    if not np.isfinite(x) or d1 <= 0:
        return float("nan")
    if x <= 0:
        return 1.0
    if not np.isfinite(d2):
        return float(_core.chi_squared_sf(x * d1, d1))
    a, b = d2 / 2.0, d1 / 2.0
    t = d2 / (d2 + d1 * x)
    if t >= 1.0:  # x so small against d2 that it rounds away (identical estimates)
        return 1.0
    if t <= 0.0:
        return 0.0
    # ln t and ln(1 - t) from d1·x / d2 and d1·x / (d2 + d1·x), as in f_sf_array
    rest = d1 * x / (d2 + d1 * x)
    log_beta = float(_log_beta(np.asarray(a), np.asarray(b)))
    log_front = -log_beta - a * math.log1p(d1 * x / d2) + b * math.log(rest)
    front = math.exp(log_front)
    if t < (a + 1.0) / (a + b + 2.0):
        return float(min(1.0, front * _betacf(a, b, t) / a))
    return float(max(0.0, 1.0 - front * _betacf(b, a, rest) / b))


_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _stirling_correction(x: np.ndarray) -> np.ndarray:
    """:math:`\\ln\\Gamma(x) - [(x - 1/2)\\ln x - x + \\ln\\sqrt{2\\pi}]` for x >= 10 (five terms: error < 1e-13)."""
    inverse = 1.0 / x
    square = inverse * inverse
    return inverse * (1 / 12 - square * (1 / 360 - square * (1 / 1260 - square * (1 / 1680 - square / 1188))))


def _log_beta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:math:`\\ln B(a, b)` element-wise; for max(a, b) >= 10 written so that no two large terms cancel."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    small, big = np.minimum(a, b), np.maximum(a, b)
    out = np.empty(a.shape)
    plain = ~(big >= 10)
    out[plain] = np.asarray(_lgamma(a[plain]), dtype=float) + np.asarray(_lgamma(b[plain]), dtype=float)
    out[plain] -= np.asarray(_lgamma(a[plain] + b[plain]), dtype=float)
    one_big = (big >= 10) & (small < 10)
    s, g = small[one_big], big[one_big]
    # ln Γ(g + s) − ln Γ(g) by Stirling, the large logarithms folded into log1p
    difference = (g - 0.5) * np.log1p(s / g) + s * np.log(g + s) - s
    difference += _stirling_correction(g + s) - _stirling_correction(g)
    out[one_big] = np.asarray(_lgamma(s), dtype=float) - difference
    both = small >= 10
    s, g = small[both], big[both]
    total = s + g
    out[both] = (
        0.5 * np.log(2 * np.pi)
        + (s - 0.5) * np.log(s / total)
        + (g - 0.5) * np.log(g / total)
        - 0.5 * np.log(total)
        + _stirling_correction(s)
        + _stirling_correction(g)
        - _stirling_correction(total)
    )
    return out


def _betacf_array(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """:func:`_betacf` element-wise: every element iterates until its own convergence, as the scalar does."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) > tiny, d, tiny)
    h = d.copy()
    active = np.flatnonzero(np.ones(x.shape, dtype=bool))
    for m in range(1, 500):
        if not active.size:
            break
        aa, bb, xx, qq, qp, qm = a[active], b[active], x[active], qab[active], qap[active], qam[active]
        cc, dd, hh = c[active], d[active], h[active]
        m2 = 2 * m
        for numerator in (
            m * (bb - m) * xx / ((qm + m2) * (aa + m2)),
            -(aa + m) * (qq + m) * xx / ((aa + m2) * (qp + m2)),
        ):
            dd = 1.0 + numerator * dd
            dd = 1.0 / np.where(np.abs(dd) > tiny, dd, tiny)
            cc = 1.0 + numerator / cc
            cc = np.where(np.abs(cc) > tiny, cc, tiny)
            hh = hh * (dd * cc)
        c[active], d[active], h[active] = cc, dd, hh
        active = active[~(np.abs(dd * cc - 1.0) < 1e-15)]
    return h


def f_sf_array(x: ArrayLike, d1: ArrayLike, d2: ArrayLike) -> np.ndarray:
    """:func:`f_sf` element-wise over arrays (broadcast together).

    Parameters
    ----------
    x : array_like
        The statistics.
    d1, d2 : array_like
        Numerator and denominator degrees of freedom (``inf`` in ``d2``: :math:`\\chi^2_{d_1}/d_1`).

    Returns
    -------
    ndarray
        :math:`P(F_{d_1, d_2} > x)` per element: NaN for a statistic that is not finite or :math:`d_1 \\le 0`,
        the same numbers as :func:`f_sf` (one continued fraction per element, iterated together).

    Examples
    --------
    >>> f_sf_array(np.array([3.0, 0.0]), 3, np.array([20.0, 5.0])).round(6)
    array([0.054859, 1.      ])
    """
    x, d1, d2 = (np.array(value, dtype=float) for value in np.broadcast_arrays(x, d1, d2))
    out = np.full(x.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        valid = np.isfinite(x) & ~(d1 <= 0)
        out[valid & (x <= 0)] = 1.0
        positive = valid & (x > 0)
        for i in zip(*np.nonzero(positive & ~np.isfinite(d2)), strict=True):
            out[i] = float(_core.chi_squared_sf(float(x[i] * d1[i]), float(d1[i])))
        main = positive & np.isfinite(d2)
        a, b = d2[main] / 2.0, d1[main] / 2.0
        t = d2[main] / (d2[main] + d1[main] * x[main])
        values = np.where(t >= 1.0, 1.0, 0.0)
        inside = (t < 1.0) & (t > 0.0)
        a, b, t = a[inside], b[inside], t[inside]
        # ln t and ln(1 - t) from d1·x / d2 and d1·x / (d2 + d1·x): no rounding of t near 1 gets multiplied by a
        u = (d1[main] * x[main])[inside]
        rest = u / (d2[main][inside] + u)
        log_front = -_log_beta(a, b) - a * np.log1p(u / (2.0 * a)) + b * np.log(rest)
        front = np.exp(log_front)
        lower = t < (a + 1.0) / (a + b + 2.0)
        fraction = _betacf_array(np.where(lower, a, b), np.where(lower, b, a), np.where(lower, t, rest))
        values[inside] = np.where(
            lower, np.minimum(1.0, front * fraction / a), np.maximum(0.0, 1.0 - front * fraction / b)
        )
        out[main] = values
    return out
