"""Tail probabilities of Student's t and Fisher's F without scipy, for the heterogeneity and verdict tables.

:func:`two_sided_p` refers a statistic to Student's t (or the normal for infinite df) through the Rust core;
:func:`f_sf` is the upper tail of F from the regularised incomplete beta function (a continued fraction, modified
Lentz), with the chi-squared limit for an infinite denominator df. Both are re-exported by
:mod:`gengen.heterogeneity`, where they were first written.
"""

from __future__ import annotations

import math

import numpy as np

from gengen import _core

__all__ = ["f_sf", "two_sided_p"]


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
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(t) + b * math.log1p(-t)
    front = math.exp(log_front)
    if t < (a + 1.0) / (a + b + 2.0):
        return float(min(1.0, front * _betacf(a, b, t) / a))
    return float(max(0.0, 1.0 - front * _betacf(b, a, 1.0 - t) / b))
