r"""The Mantel test: do two correlation matrices over the same labels show the same pattern?

The statistic is the Pearson correlation :math:`r_M` of the upper triangles of the two symmetric matrices
:math:`A` and :math:`B`. The pairs of one matrix are not independent (each label enters :math:`p - 1` of them),
so the usual t-test does not apply; the p-value permutes the labels of :math:`B` jointly (rows and columns):
:math:`p = (1 + \#\{r_M^{(b)} \ge r_M\}) / (1 + n_\text{perm})` for ``alternative="greater"`` (does the pattern
carry over?), with :math:`|r|` for ``"two-sided"``. The permutations come from
:func:`~gengen.stats.resampling.permutation_indices` (seeded).

References
----------
Mantel, N. (1967). The detection of disease clustering and a generalized regression approach.
*Cancer Research* 27, 209–220.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gengen.errors import InvalidArgumentError
from gengen.stats.correlation import partial_corr
from gengen.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, DEFAULT_N_PERM_MANTEL, Alternative
from gengen.stats.resampling import permutation_indices
from gengen.stats.validation import check_choice

__all__ = ["MantelTest", "mantel", "upper_triangle"]


@dataclass(frozen=True)
class MantelTest:
    """The Mantel test of two matrices.

    What :func:`mantel` returns. The p-value is never below 1/(n_perm + 1), the resolution the number of
    permutations allows.

    Attributes
    ----------
    r : float
        Pearson correlation of the two upper triangles.
    p_value : float
        Label-permutation p-value, :math:`(1 + b)/(1 + n_\\text{perm})`.
    n_perm : int
    alternative : str
        "greater" or "two-sided".
    seed : int
    """

    r: float
    p_value: float
    n_perm: int
    alternative: str
    seed: int


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """The entries above the diagonal, row by row.

    Parameters
    ----------
    matrix : ndarray of shape (m, m)
        A square matrix.

    Returns
    -------
    ndarray of shape (m (m - 1) / 2,)
        Its entries above the diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> upper_triangle(np.arange(9).reshape(3, 3)).tolist()
    [1, 2, 5]
    """
    rows, cols = np.triu_indices(matrix.shape[0], 1)
    return matrix[rows, cols]


def _permuted_correlations(x: np.ndarray, b: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """Pearson r of ``x`` with the upper triangle of ``b`` relabelled by each order, a chunk of orders at a time."""
    rows, cols = np.triu_indices(b.shape[0], 1)
    centred = x - x.mean()
    scale = np.sqrt(centred @ centred)
    out = np.empty(len(orders))
    step = max(1, 2_000_000 // max(len(rows), 1))
    for first in range(0, len(orders), step):
        chunk = orders[first : first + step]
        y = b[chunk[:, rows], chunk[:, cols]]
        y = y - y.mean(axis=1, keepdims=True)
        out[first : first + step] = (y @ centred) / (np.sqrt((y * y).sum(axis=1)) * scale)
    return out


def mantel(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_perm: int = DEFAULT_N_PERM_MANTEL,
    alternative: Alternative = DEFAULT_ALTERNATIVE,
    seed: int = 0,
) -> MantelTest:
    """Correlation of two symmetric matrices' upper triangles with a label-permutation p-value.

    Entry (i, j) of ``a`` is paired with entry (i, j) of ``b``, so both must list the labels in the same
    order; the diagonals are left out.

    Parameters
    ----------
    a, b : ndarray, shape (p, p)
        Symmetric matrices over the same labels in the same order (p ≥ 3).
    n_perm : int
        Permutations of ``b``'s labels (rows and columns together), from
        :func:`~gengen.stats.resampling.permutation_indices` with ``scheme="free"``.
    alternative : {"greater", "two-sided"}
        "greater": is the pattern of ``a`` carried over to ``b`` (p from :math:`r^{(b)} \\ge r`)? "two-sided":
        from :math:`|r^{(b)}| \\ge |r|`.
    seed : int
        Seed of the permutations (the p-value depends on it and on ``n_perm`` only).

    Returns
    -------
    MantelTest
        ``r``, ``p_value``, ``n_perm``, ``alternative``, ``seed``.

    Examples
    --------
    >>> import numpy as np
    >>> from gengen import stats
    >>> rng = np.random.default_rng(0)
    >>> a = np.corrcoef(rng.normal(size=(6, 30)))
    >>> test = stats.mantel(a, a, n_perm=99)
    >>> round(test.r, 6), test.p_value
    (1.0, 0.01)
    """
    check_choice("alternative", alternative, ALTERNATIVES)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or b.shape != a.shape:
        raise InvalidArgumentError(f"b: must be a square matrix shaped like a {a.shape}, got {b.shape}")
    size = a.shape[0]
    x = upper_triangle(a)
    r = float(partial_corr(x, upper_triangle(b)).r)
    orders = np.asarray(permutation_indices(size, n_perm, scheme="free", seed=seed))
    permuted = _permuted_correlations(x, b, orders)
    if alternative == "greater":
        exceed = np.sum(permuted >= r - 1e-12)
    else:
        exceed = np.sum(np.abs(permuted) >= abs(r) - 1e-12)
    return MantelTest(r, float((exceed + 1) / (n_perm + 1)), n_perm, alternative, seed)
