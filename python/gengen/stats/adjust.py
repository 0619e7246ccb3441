"""Multiple-testing adjustment of p-values, as R's ``p.adjust``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gengen import _core
from gengen.stats import limits
from gengen.stats.options import ADJUSTMENTS, DEFAULT_ADJUSTMENT, Adjustment
from gengen.stats.validation import as_float_array, check_choice

__all__ = ["p_adjust"]

#: Work arrays of an adjustment, in numbers per p-value (the Rust core's ``adjust::WORK_PER_P_VALUE``): the
#: input is refused before any work when they would exceed :func:`gengen.stats.limits.memory_budget`.
WORK_PER_P_VALUE = 12


def p_adjust(p: ArrayLike, method: Adjustment = DEFAULT_ADJUSTMENT) -> NDArray[np.float64]:
    r"""Adjust p-values for multiple comparisons, as R's ``p.adjust``.

    Parameters
    ----------
    p : array_like
        P-values in [0, 1]; NaN is kept as NaN and not counted among the tests. Any shape; the result has
        the same shape.
    method : {"holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none"}
        "fdr" is an alias of "BH".

    Returns
    -------
    ndarray
        The adjusted p-values, shaped like ``p``.

    Notes
    -----
    With the :math:`n` p-values sorted, :math:`p_{(1)} \le \dots \le p_{(n)}`: Bonferroni
    :math:`\min(1, n p)`; Holm :math:`\max_{j \le i} \min(1, (n - j + 1) p_{(j)})`; Hochberg
    :math:`\min_{j \ge i} \min(1, (n - j + 1) p_{(j)})`; BH :math:`\min_{j \ge i} \min(1, n p_{(j)} / j)`;
    BY as BH times :math:`\sum_{i=1}^n 1/i`; Hommel's values are those of R's algorithm (which falls back to
    Hochberg for two p-values, as R does), computed in O(n log n) instead of R's O(n²): 10^7 p-values take
    seconds, and Ctrl-C stops the computation between its passes.

    Limits: an input whose work arrays (about 12 numbers per p-value) would exceed
    :func:`gengen.stats.limits.memory_budget` is refused before any work, with one line naming its size and the limit.

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
    check_choice("method", method, ADJUSTMENTS)
    array = as_float_array("p", p)
    limits.check_array("p", (array.size, WORK_PER_P_VALUE), f"adjusting {array.size} p-values")
    flat = np.ascontiguousarray(array.reshape(-1))
    return _core.p_adjust(flat, method).reshape(array.shape)
