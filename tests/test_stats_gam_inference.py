"""GAM control in the correlation and inference functions, recomputed independently in numpy.

References: the residuals and fixed-λ smoothers come from ``stats.gam_fit`` (itself checked against mgcv in
tests/test_gam.py); the permutations and resamples from ``stats.permutation_indices`` /
``stats.bootstrap_indices``; everything else (Freedman–Lane counting, correlations, quantiles, t-tests) is
written out here with numpy and scipy.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats as sps

from gengen import stats


def trajectories(n: int = 40, m: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An ID learning curve and OOD scores that saturate with it (a non-linear truth)."""
    rng = np.random.default_rng(seed)
    id_score = 0.5 + 0.4 * (1 - np.exp(-np.arange(n) / 8)) + rng.normal(0, 0.005, n)
    shared = rng.normal(0, 0.01, n)
    scores = np.column_stack(
        [np.tanh(6 * (id_score - 0.6)) * (0.1 + 0.05 * j) + 0.5 * shared + rng.normal(0, 0.01, n) for j in range(m)]
    )
    return scores, id_score


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_matrix_is_the_correlation_of_gam_residuals_with_edf_degrees_of_freedom() -> None:
    scores, id_score = trajectories()
    result = stats.partial_corr_matrix(scores, id_score, fit="gam")
    fit = stats.gam_fit(scores, id_score)
    e = fit.residuals
    expected = np.corrcoef(e, rowvar=False)
    np.testing.assert_allclose(result.r, expected, rtol=1e-10, atol=1e-12)
    nu = fit.edf - 1.0
    np.testing.assert_allclose(result.edf, nu, rtol=1e-12)
    n = scores.shape[0]
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        df = n - 2 - max(nu[a], nu[b])
        assert result.df[a, b] == pytest.approx(df, rel=1e-12)
        t = expected[a, b] * np.sqrt(df / (1 - expected[a, b] ** 2))
        np.testing.assert_allclose(result.p_value[a, b], 2 * sps.t.sf(abs(t), df), rtol=1e-9)
    assert result.fit == "gam"


def test_partial_corr_gam_matches_matrix_and_semi_uses_one_smooth() -> None:
    scores, id_score = trajectories(seed=3)
    matrix = stats.partial_corr_matrix(scores, id_score, fit=stats.Gam(method="reml"))
    pair = stats.partial_corr(scores[:, 0], scores[:, 2], id_score, fit=stats.Gam(method="reml"))
    assert pair.r == pytest.approx(matrix.r[0, 2], rel=1e-12)
    assert pair.df == pytest.approx(matrix.df[0, 2], rel=1e-12)
    semi = stats.partial_corr(scores[:, 0], scores[:, 2], id_score, fit="gam", semi="y")
    fit_y = stats.gam_fit(scores[:, 2], id_score)
    x_centred = scores[:, 0] - scores[:, 0].mean()
    assert semi.r == pytest.approx(float(unit(x_centred) @ unit(fit_y.residuals)), rel=1e-10)
    assert semi.df == pytest.approx(scores.shape[0] - 2 - (fit_y.edf - 1), rel=1e-12)


def test_permutation_under_gam_equals_a_numpy_freedman_lane_with_fixed_smoothers() -> None:
    scores, id_score = trajectories(n=30, seed=5)
    n_perm, seed = 199, 11
    result = stats.permutation_test(
        scores, id_score, fit="gam", n_perm=n_perm, scheme="block", block_length=3, seed=seed, family_wise=True
    )
    fit = stats.gam_fit(scores, id_score)
    e = fit.residuals
    r_obs = np.corrcoef(e, rowvar=False)
    orders = stats.permutation_indices(30, n_perm, scheme="block", block_length=3, seed=seed)
    m = scores.shape[1]
    exceed = np.zeros((m, m))
    exceed_max = np.zeros((m, m))
    for order in orders:
        r_star = np.zeros((m, m))
        for b in range(1, m):
            # Freedman–Lane: refit the permuted copy with b's smoother fixed at its chosen λ.
            y_star = fit.fitted[:, b] + e[order, b]
            refit = stats.gam_fit(y_star, id_score, lam=fit.lam[b]).residuals
            for a in range(b):
                r_star[a, b] = np.corrcoef(e[:, a], refit)[0, 1]
        largest = np.abs(r_star).max()
        for a in range(m):
            for b in range(a + 1, m):
                threshold = abs(r_obs[a, b]) * (1 - 1e-10)
                exceed[a, b] += abs(r_star[a, b]) >= threshold
                exceed_max[a, b] += largest >= threshold
    for a in range(m):
        for b in range(a + 1, m):
            assert result.p_value[a, b] == pytest.approx((exceed[a, b] + 1) / (n_perm + 1), abs=1e-12)
            assert result.p_fwer[a, b] == pytest.approx((exceed_max[a, b] + 1) / (n_perm + 1), abs=1e-12)


def test_bootstrap_under_gam_refits_every_replicate() -> None:
    scores, id_score = trajectories(n=36, seed=7)
    n_boot, seed = 60, 2
    result = stats.bootstrap_ci(
        scores, id_score, fit="gam", n_boot=n_boot, scheme="circular", block_length=4, seed=seed
    )
    rows = stats.bootstrap_indices(36, n_boot, scheme="circular", block_length=4, seed=seed)
    replicates = []
    for index in rows:
        residuals = _gam_residuals_quiet(scores[index], id_score[index])
        replicates.append(np.corrcoef(residuals, rowvar=False)[0, 1])
    replicates = np.sort(replicates)
    low, high = np.quantile(replicates, [0.025, 0.975])
    np.testing.assert_allclose([result.ci_low[0, 1], result.ci_high[0, 1]], [low, high], rtol=1e-8, atol=1e-10)


def _gam_residuals_quiet(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """GAM residuals of a resample; repeated rows can lower k, which gam_fit reports with a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stats.gam_fit(y, z).residuals


def test_gam_options_are_validated() -> None:
    scores, id_score = trajectories()
    with pytest.raises(ValueError, match=r"^k is a GAM option"):
        stats.partial_corr_matrix(scores, id_score, k=5)
    with pytest.raises(ValueError, match=r"^gam_mehtod is not an option"):
        stats.partial_corr_matrix(scores, id_score, fit="gam", gam_mehtod="reml")
    with pytest.raises(ValueError, match=r"^method: .*kendall"):
        stats.partial_corr_matrix(scores, id_score, fit="gam", method="kendall")
    with pytest.raises(ValueError, match=r"^covar: .*at least one control"):
        stats.partial_corr_matrix(scores, None, fit="gam")
