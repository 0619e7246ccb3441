"""Leave-one-out partial correlations under the linear control: the closed-form downdate equals the refits
(issue 27), including the deletions that leave a test set constant or the control degenerate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gengen.stats.controls import as_control
from gengen.stats.influence import _linear_deletions, _matrix_or_nan, leave_one_out_partial_corr


def refitted(scores: np.ndarray, covar: np.ndarray, method: Any = "pearson") -> np.ndarray:
    """Every deletion refitted through :func:`gengen.stats.partial_corr_matrix` (the definition)."""
    n = scores.shape[0]
    control = covar.reshape(n, -1)
    options = {"method": method, "fit": as_control("linear", {})}
    return np.stack([_matrix_or_nan(scores[np.arange(n) != t], control[np.arange(n) != t], options) for t in range(n)])


def trajectories(n: int, m: int, q: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    covar = np.cumsum(rng.normal(size=(n, q)), axis=0)
    scores = covar[:, :1] * rng.normal(size=m) + 0.3 * np.cumsum(rng.normal(size=(n, m)), axis=0)
    return scores, covar


@pytest.mark.parametrize(("n", "m", "q", "seed"), [(12, 5, 1, 0), (27, 20, 1, 1), (60, 8, 2, 2), (250, 12, 1, 3)])
def test_closed_form_equals_refits(n: int, m: int, q: int, seed: int) -> None:
    scores, covar = trajectories(n, m, q, seed)
    scores[0, 2] += 25.0  # a spike at step 0: its deletion removes most of the test set's residual
    got = leave_one_out_partial_corr(scores, covar)
    expected = refitted(scores, covar)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
    closed = _linear_deletions(scores, covar)
    assert closed is not None and closed[1][1:].all()  # the downdate, not the refits, gave these


def test_degenerate_deletions_match_the_refits() -> None:
    scores, covar = trajectories(15, 4, 1, 4)
    scores[:, 1] = 0.5
    scores[0, 1] = 0.45  # constant without step 0
    scores[:, 3] = 2.0 * covar[:, 0] + 1.0
    scores[7, 3] += 0.3  # a linear function of the control without step 7
    got = leave_one_out_partial_corr(scores, covar)
    expected = refitted(scores, covar)
    assert np.isnan(got[0, 0, 1]) and np.isnan(got[7, 0, 3])
    closed = _linear_deletions(scores, covar)
    assert closed is not None and not closed[1][0] and not closed[1][7] and closed[1][1:7].all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
    # a control that is constant but for one checkpoint: its deletion leaves no control to fit
    lonely = np.zeros(15)
    lonely[4] = 1.0
    lonely[9] = 2.0
    got = leave_one_out_partial_corr(scores[:, [0, 2]], lonely)
    np.testing.assert_allclose(got, refitted(scores[:, [0, 2]], lonely), rtol=0, atol=1e-10)


def test_spearman_and_gam_keep_the_refit() -> None:
    scores, covar = trajectories(14, 3, 1, 5)
    np.testing.assert_allclose(
        leave_one_out_partial_corr(scores, covar, method="spearman"), refitted(scores, covar, "spearman"), atol=1e-12
    )
