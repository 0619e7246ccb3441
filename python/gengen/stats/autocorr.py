"""Lag-1 autocorrelation of residual trajectories, and the warning it triggers.

Consecutive checkpoints of one run are not independent draws: when the residual of an OOD score (after the ID
score has been regressed out) at step *t* predicts the residual at step *t + 1*, a p-value that assumes
independent observations (the t-test, a free permutation, an iid bootstrap) is too small. See issue 9 and
``docs/calibration.md``.
"""

from __future__ import annotations

import numpy as np

from gengen import _core

__all__ = ["AUTOCORR_THRESHOLD", "autocorrelation_warning", "lag1_autocorrelation"]

#: Lag-1 autocorrelation of the residuals from which a method that assumes independent checkpoints is unsafe,
#: and the analysis warns: at φ = 0.25 in both series Bartlett's variance factor (1 + φ²)/(1 − φ²) is 1.13, and
#: the naive 5% test rejects about 6.5% of true nulls; it grows quickly beyond (docs/calibration.md).
AUTOCORR_THRESHOLD = 0.25


def lag1_autocorrelation(residuals: np.ndarray) -> np.ndarray:
    r"""Lag-1 autocorrelation of each column of ``residuals`` (rows in step order).

    Parameters
    ----------
    residuals : ndarray, shape (n,) or (n, m)
        Residual trajectories, one column per test set, rows ordered by step.

    Returns
    -------
    ndarray, shape () or (m,)
        :math:`\hat\rho_1 = \sum_{t<n} (e_t - \bar e)(e_{t+1} - \bar e) / \sum_{t} (e_t - \bar e)^2`
        (the usual ACF estimator); NaN for a constant column or fewer than three rows.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(lag1_autocorrelation(np.array([1.0, 2.0, 3.0, 4.0]))), 3)
    0.25
    """
    e = np.asarray(residuals, dtype=np.float64)
    squeeze = e.ndim == 1
    # The estimator is the core's (the same one the prewhitened and lagged tests use).
    out = np.asarray(_core.lag1_autocorrelation(np.ascontiguousarray(e[:, None] if squeeze else e)))
    return out[0] if squeeze else out


def autocorrelation_warning(
    label: str, acf1: np.ndarray, independence_methods: list[str], threshold: float = AUTOCORR_THRESHOLD
) -> str | None:
    """The warning for one group when its residuals are autocorrelated, else None (the one such warning).

    Parameters
    ----------
    label : str
        The group's name, as it should appear in the message (e.g. ``"model 'm' run 'main'"``).
    acf1 : ndarray
        Lag-1 autocorrelation of each test set's residuals in the group.
    independence_methods : list of str
        The requested inference methods that assume independent checkpoints; no warning when empty.
    threshold : float
        Median lag-1 autocorrelation above which the warning is given.

    Returns
    -------
    str or None
        The warning's one line, or None.
    """
    finite = acf1[np.isfinite(acf1)]
    if not independence_methods or finite.size == 0:
        return None
    median = float(np.median(finite))
    if median <= threshold:
        return None
    share = float(np.mean(finite > threshold))
    verb, pronoun = ("assumes", "its") if len(independence_methods) == 1 else ("assume", "their")
    return (
        f"{label}: residuals are strongly autocorrelated (median lag-1 autocorrelation {median:.2f}, "
        f"{share:.0%} of test sets above {threshold}); {', '.join(independence_methods)} {verb} independent "
        f"checkpoints, so {pronoun} p-values/intervals are likely too small: use the default inference 'sieve' "
        "(calibrated for autocorrelated checkpoints; block and circular schemes are not, docs/calibration.md)"
    )
