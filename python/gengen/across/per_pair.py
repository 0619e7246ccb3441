"""Per-pair arithmetic of the heterogeneity, comparison and verdict tables, without a Python loop over pairs.

Thousands of pairs of test sets, each tested in a few groups: the p-values, the Holm adjustment within each pair,
the ";"-joined labels of a pair's groups and the Welch–Satterthwaite degrees of freedom of their weights are
computed a column or a group at a time, with the same arithmetic (to the bit) as the scalar functions they replace:
:func:`gengen.stats.tails.two_sided_p` and :func:`gengen.stats.p_adjust`'s Holm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from gengen import _core

__all__ = ["holm_by_group", "joined_per_row", "oriented_pairs", "satterthwaite", "two_sided_p_array"]


def two_sided_p_array(statistic: ArrayLike, df: ArrayLike) -> np.ndarray:
    """:func:`gengen.stats.tails.two_sided_p` element-wise.

    Parameters
    ----------
    statistic : array_like
        The statistics.
    df : array_like
        Their degrees of freedom (broadcast against ``statistic``); ``inf`` for the standard normal.

    Returns
    -------
    ndarray
        :math:`2 P(T_{df} > |t|)` from the Rust t tail where ``df`` is finite, the normal's where it is not;
        NaN for a statistic that is not finite.

    Examples
    --------
    >>> two_sided_p_array([1.96, np.nan, 2.0], [np.inf, 5.0, 10.0]).round(4)
    array([0.05  ,    nan, 0.0734])
    """
    values, dof = np.broadcast_arrays(np.asarray(statistic, dtype=float), np.asarray(df, dtype=float))
    out = np.full(values.shape, np.nan)
    finite = np.isfinite(values)
    t, normal = finite & np.isfinite(dof), finite & ~np.isfinite(dof)
    out[t] = [_core.t_two_sided(x, d) for x, d in zip(values[t].tolist(), dof[t].tolist(), strict=True)]
    out[normal] = [_core.normal_two_sided(x) for x in values[normal].tolist()]
    return out


def holm_by_group(p: ArrayLike, group: ArrayLike) -> np.ndarray:
    """Holm's adjustment within each group of p-values, every group at once.

    Parameters
    ----------
    p : array_like, shape (n,)
        P-values in [0, 1]; NaN stays NaN and is not counted.
    group : array_like, shape (n,)
        The group of each p-value (any sortable labels).

    Returns
    -------
    ndarray, shape (n,)
        Per group, with its :math:`m` p-values sorted: :math:`\\max_{j \\le i} \\min(1, (m - j + 1) p_{(j)})`,
        the arithmetic of :func:`gengen.stats.p_adjust` with ``"holm"`` on each group alone.

    Examples
    --------
    >>> holm_by_group([0.01, 0.04, 0.03, 0.2], [0, 0, 0, 1]).round(4)
    array([0.03, 0.06, 0.06, 0.2 ])
    """
    out = np.array(p, dtype=float)
    labels = np.asarray(group)
    valid = np.flatnonzero(~np.isnan(out))
    order = valid[np.lexsort((out[valid], labels[valid]))]
    codes = np.unique(labels[order], return_inverse=True)[1].reshape(-1)
    counts = np.bincount(codes)
    rank = np.arange(len(order)) - (np.cumsum(counts) - counts)[codes]
    scaled = pd.Series((counts[codes] - rank) * out[order]).groupby(codes).cummax().to_numpy()
    out[order] = np.minimum(scaled, 1.0)
    return out


def joined_per_row(texts: np.ndarray, keep: np.ndarray) -> list[str]:
    """Per row, the texts that are kept joined by ";", a column at a time.

    Parameters
    ----------
    texts : ndarray of str, shape (rows, columns)
        The texts (a row of labels broadcast to the shape of ``keep`` will do).
    keep : ndarray of bool, shape (rows, columns)
        Which to join.

    Returns
    -------
    list of str
        One string per row (empty where nothing is kept).

    Examples
    --------
    >>> joined_per_row(np.array([["a", "b", "c"]] * 2), np.array([[True, False, True], [False, False, False]]))
    ['a;c', '']
    """
    out = np.full(keep.shape[0], "", dtype=object)
    for column in range(keep.shape[1]):
        piece = np.where(keep[:, column], texts[:, column], "").astype(object)
        out = out + np.where((out != "") & (piece != ""), ";", "").astype(object) + piece
    return list(out)


def satterthwaite(w: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Degrees of freedom of :math:`\\sum_g w_g` when each weight is estimated on :math:`\\nu_g` df, per row.

    Parameters
    ----------
    w : ndarray, shape (pairs, groups)
        Weights (0 where a group is left out).
    df : ndarray, shape (pairs, groups)
        Their degrees of freedom (``inf`` for a known variance).

    Returns
    -------
    ndarray, shape (pairs,)
        :math:`\\nu = (\\sum w_g)^2 / \\sum (w_g^2 / \\nu_g)` (``inf`` when every variance is known).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(df) & (df > 0) & (w > 0)
        spread = np.where(finite, w**2 / np.where(finite, df, 1.0), 0.0).sum(axis=1)
        return np.where(spread > 0, w.sum(axis=1) ** 2 / np.where(spread > 0, spread, 1.0), np.inf)


def oriented_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each pair's two names (``testset_a``, ``testset_b``) in alphabetical order, so that a pair
    matches across groups whichever way round each stored it."""
    swap = (table["testset_a"] > table["testset_b"]).to_numpy()
    a = np.where(swap, table["testset_b"], table["testset_a"])
    b = np.where(swap, table["testset_a"], table["testset_b"])
    return table.assign(testset_a=a, testset_b=b)
