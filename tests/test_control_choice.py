"""The automatic control choice (``gengen.stats.control_choice``) against statsmodels and closed forms.

- The curvature test's t statistic is generalised least squares under AR(1) errors of the coefficient it uses:
  statsmodels' ``GLS`` with the AR(1) correlation matrix :math:`\\phi^{|s-t|}` must give the same statistic and
  p-value (the Prais–Winsten transform with its first row is exactly that GLS).
- The AR(1) coefficient solves the moment equation of the docstring, checked with dense traces.
- Without autocorrelation (φ̃ = 0) the test is the ordinary t-test of the squared term (statsmodels OLS).
- The choice picks the linear control on a straight line with white noise and the GAM on a strongly curved
  link; under a linear truth with AR(1) noise it picks the GAM rarely, where the uncorrected F-test of the
  squared term would call a third of the test sets curved.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from gengen import _core
from gengen.errors import InvalidArgumentError
from gengen.stats.control_choice import choose_control, curvature_test

sm = pytest.importorskip("statsmodels.api")


def design(z: np.ndarray) -> np.ndarray:
    c = z - z.mean()
    c = c / np.abs(c).max()
    return np.column_stack([np.ones_like(c), c, c**2])


def ar1_noise(rng: np.random.Generator, n: int, phi: float, m: int) -> np.ndarray:
    e = np.empty((n, m))
    e[0] = rng.normal(size=m)
    for t in range(1, n):
        e[t] = phi * e[t - 1] + np.sqrt(1 - phi**2) * rng.normal(size=m)
    return e


def test_statistic_is_statsmodels_gls_at_the_ar1_coefficient() -> None:
    rng = np.random.default_rng(3)
    n = 30
    z = 0.5 + 0.35 * (1 - np.exp(-np.linspace(0, 4, n))) + rng.normal(0, 0.005, n)
    scores = np.column_stack([z, np.sqrt(z), (z - 0.7) ** 2]) + 0.01 * ar1_noise(rng, n, 0.7, 3)
    test = curvature_test(scores, z)
    assert test.df == n - 3
    lags = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    for j in range(3):
        assert 0.0 < test.phi[j] < 0.99
        fit = sm.GLS(scores[:, j], design(z), sigma=test.phi[j] ** lags).fit()
        assert_allclose(test.statistic[j], fit.tvalues[2], rtol=1e-8)
        assert_allclose(test.p_value[j], fit.pvalues[2], rtol=1e-6)


def test_ar1_coefficient_solves_the_moment_equation() -> None:
    rng = np.random.default_rng(4)
    n = 25
    z = np.linspace(0.5, 0.85, n) ** 0.5
    scores = z[:, None] + 0.02 * ar1_noise(rng, n, 0.8, 4)
    test = curvature_test(scores, z)
    x = design(z)
    maker = np.eye(n) - x @ np.linalg.solve(x.T @ x, x.T)
    lag = 0.5 * (np.eye(n, k=1) + np.eye(n, k=-1))
    lags = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    for j in range(4):
        e = maker @ scores[:, j]
        assert_allclose(test.phi_raw[j], (e[1:] @ e[:-1]) / (e @ e), rtol=1e-10)
        r = test.phi[j] ** lags
        expected = np.trace(maker @ lag @ maker @ r) / np.trace(maker @ r)
        if 0.0 < test.phi[j] < 0.99:
            assert_allclose(expected, test.phi_raw[j], atol=1e-9)
        # The correction raises the coefficient (the raw estimate is biased towards zero).
        assert test.phi[j] >= test.phi_raw[j]


def test_without_autocorrelation_the_test_is_the_ols_t_test() -> None:
    # Negatively autocorrelated residuals: the coefficient is clipped at 0, so the test is OLS's.
    n = 20
    z = np.linspace(0, 1, n)
    y = z + 0.3 * (z - 0.5) ** 2 + 0.01 * (-1.0) ** np.arange(n)
    test = curvature_test(y, z)
    assert test.phi[0] == 0.0 and test.phi_raw[0] < 0
    fit = sm.OLS(y, design(z)).fit()
    assert_allclose(test.p_value[0], fit.pvalues[2], rtol=1e-8)


def test_straight_line_with_white_noise_keeps_the_linear_control() -> None:
    rng = np.random.default_rng(5)
    n, m = 40, 6
    z = 0.5 + 0.35 * (1 - np.exp(-np.linspace(0, 5, n)))
    scores = 0.2 + z[:, None] * np.linspace(0.3, 1.0, m) + rng.normal(0, 0.01, (n, m))
    choice = choose_control(scores, z)
    assert choice.fit == "linear", choice.reason
    assert choice.n_columns == m and choice.n_curved < 3


def test_strongly_curved_link_picks_the_gam() -> None:
    rng = np.random.default_rng(6)
    n, m = 30, 6
    z = 0.5 + 0.35 * (1 - np.exp(-np.linspace(0, 5, n)))
    x = (z - 0.5) / 0.35
    link = (1 - np.exp(-4 * x)) / (1 - np.exp(-4))
    scores = 0.5 + 0.3 * link[:, None] + 0.01 * ar1_noise(rng, n, 0.5, m)
    choice = choose_control(scores, z)
    assert choice.fit == "gam", choice.reason
    assert choice.n_curved >= 4
    assert choice.reason.endswith("GAM control")


def test_ar1_noise_does_not_make_a_line_look_curved() -> None:
    """Linear truth, AR(1) φ = 0.5 noise, 2 test sets, n = 40 (gengen's simulated runs): the choice picks the GAM
    in few runs; the uncorrected t-test of the squared term (statsmodels OLS) calls far more test sets curved."""
    runs, gam, naive = 120, 0, 0
    for i in range(runs):
        idv, ood = _core.simulate_run(40, 2, "ar1", 0.5, "linear", 0.0, 0.02, 0.01, 11, i)
        gam += choose_control(ood, idv).fit == "gam"
        naive += sum(sm.OLS(ood[:, j], design(idv)).fit().pvalues[2] < 0.05 for j in range(2))
    assert gam / runs <= 0.12, gam
    assert naive / (2 * runs) >= 0.12, naive


def test_untestable_runs_keep_the_linear_control() -> None:
    z = np.array([0.5, 0.5, 0.6, 0.6, 0.6, 0.6, 0.5])
    choice = choose_control(np.column_stack([z, z**2]), z)
    assert choice.fit == "linear" and choice.n_columns == 0
    assert "too few checkpoints or ID values" in choice.reason
    two = choose_control(np.ones((20, 2)) + np.arange(20.0)[:, None] ** 2, np.column_stack([np.arange(20.0)] * 2))
    assert two.fit == "linear" and "exactly one control" in two.reason


def test_bad_alpha_is_refused() -> None:
    z = np.linspace(0, 1, 10)
    with pytest.raises(InvalidArgumentError, match=r"^alpha: "):
        choose_control(np.column_stack([z, z]), z, alpha=1.5)
