"""The sieve's resampler against closed forms: what its replicates must keep, and the floor on its inflation.

Two ways of getting the resampler wrong leave every other test green (issue 23, item 7):

* resampling each test set's AR innovations at its *own* time points loses their contemporaneous
  cross-correlation, so the replicates of two test sets are independent whatever the data say;
* not flooring the variance inflation at 1 lets a chance negative AR estimate on short, white residuals give a
  standard error below Fisher's, i.e. more information than independent checkpoints.

The references are independent of gengen.stats.sieve: Bartlett's asymptotic variance of a sample
cross-correlation of a bivariate stationary process (Brockwell & Davis 1991, Theorem 11.2.2, written out below
for two AR(1) series with correlated innovations), numpy least squares for the innovations, and Fisher's
1/sqrt(n - 3 - k).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from gengen.stats.sieve import SievePartialCorrMatrix, sieve_partial_corr_matrix


def bartlett_z_variance(phi_a: float, phi_b: float, rho_e: float, lags: int = 5000) -> float:
    """n · Var(artanh r) of the lag-0 sample correlation r of a_t = φ_a a_{t−1} + ε_t, b_t = φ_b b_{t−1} + η_t
    with corr(ε_t, η_t) = ρ_e (Bartlett's formula, then the delta method for artanh).

    With ρ_j = ρ_{ab}(j) = corr(a_{t+j}, b_t): ρ_j = φ_a^j ρ_0 (j ≥ 0), φ_b^{|j|} ρ_0 (j < 0),
    ρ_0 = ρ_e √((1 − φ_a²)(1 − φ_b²)) / (1 − φ_a φ_b), and

    n Var r = Σ_j [ρ_aa(j)ρ_bb(j) + ρ_j ρ_{−j} − 2ρ_0 (ρ_aa(j)ρ_j + ρ_bb(j)ρ_{−j})
                   + ρ_0² (½ρ_aa(j)² + ρ_j² + ½ρ_bb(j)²)],

    divided by (1 − ρ_0²)² for Fisher's z. With ρ_e = 0 it is (1 + φ_a φ_b) / (1 − φ_a φ_b).
    """
    j = np.arange(-lags, lags + 1)
    rho_0 = rho_e * math.sqrt((1 - phi_a**2) * (1 - phi_b**2)) / (1 - phi_a * phi_b)
    rho_aa, rho_bb = phi_a ** np.abs(j), phi_b ** np.abs(j)
    rho_ab = np.where(j >= 0, rho_aa, rho_bb) * rho_0
    rho_ba = rho_ab[::-1]
    total = np.sum(
        rho_aa * rho_bb
        + rho_ab * rho_ba
        - 2 * rho_0 * (rho_aa * rho_ab + rho_bb * rho_ba)
        + rho_0**2 * (0.5 * rho_aa**2 + rho_ab**2 + 0.5 * rho_bb**2)
    )
    return float(total / (1 - rho_0**2) ** 2)


def test_bartlett_reference_reduces_to_its_known_cases() -> None:
    """The reference itself: independent series give (1 + φ_a φ_b)/(1 − φ_a φ_b); equal coefficients give the
    same whatever ρ_e (the pair is then a linear map of two independent AR(1) series of that coefficient)."""
    assert_allclose(bartlett_z_variance(0.9, 0.5, 0.0), 1.45 / 0.55, rtol=1e-9)
    assert_allclose(bartlett_z_variance(0.0, 0.0, 0.0), 1.0, rtol=1e-12)
    assert_allclose(bartlett_z_variance(0.6, 0.6, 0.8), 1.36 / 0.64, rtol=1e-9)
    # A large direct simulation (numpy only) agrees with the closed form where the two differ.
    rng = np.random.default_rng(0)
    n, reps = 400, 4000
    shocks = rng.standard_normal((reps, n + 200, 2)) @ np.linalg.cholesky([[1, 0.8], [0.8, 1]]).T
    series = np.zeros_like(shocks)
    for t in range(1, n + 200):
        series[:, t] = np.array([0.9, 0.5]) * series[:, t - 1] + shocks[:, t]
    a, b = series[:, 200:, 0], series[:, 200:, 1]
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    r = (a * b).sum(axis=1) / np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    assert_allclose(np.arctanh(r).var() * n, bartlett_z_variance(0.9, 0.5, 0.8), rtol=0.1)


def correlated_ar_pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two test sets linear in a rising ID score plus AR(1) noise, φ = 0.9 and 0.5, whose innovations correlate
    0.8 at the same checkpoint (and not otherwise)."""
    rng = np.random.default_rng(seed)
    shocks = rng.standard_normal((n + 300, 2)) @ np.linalg.cholesky([[1.0, 0.8], [0.8, 1.0]]).T
    noise = np.zeros_like(shocks)
    for t in range(1, n + 300):
        noise[t] = np.array([0.9, 0.5]) * noise[t - 1] + shocks[t]
    covar = np.linspace(0.4, 0.9, n) + rng.normal(0, 0.02, n)
    return covar[:, None] * np.array([1.0, 0.5]) + 0.01 * noise[300:], covar


def lstsq_innovations(y: np.ndarray, covar: np.ndarray) -> np.ndarray:
    """Innovations of the dynamic regression e_t ~ e_{t−1} + [1, z_t, z_{t−1}], e the residual of y on [1, z]."""
    n = len(y)
    design = np.column_stack([np.ones(n), covar])
    e = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    dynamic = np.column_stack([e[:-1], np.ones(n - 1), covar[1:], covar[:-1]])
    return e[1:] - dynamic @ np.linalg.lstsq(dynamic, e[1:], rcond=None)[0]


@pytest.mark.parametrize("seed", range(3))
def test_replicates_keep_the_innovations_cross_correlation(seed: int) -> None:
    """Two AR(1) test sets with different coefficients (0.9, 0.5) and innovations correlated 0.8: the variance
    of artanh r that the sieve reports, se_z² (n − 3 − k), is Bartlett's for its own fitted AR(1) models and the
    data's innovation correlation (about 1.3), not the (1 + φ_a φ_b)/(1 − φ_a φ_b) of independent series
    (about 2.5) that innovations resampled at independent time points per test set give.

    Measured at n = 400, 999 draws, seeds 0–11: sieve / Bartlett = 0.93–1.14; with the innovations resampled
    per test set it is about 1.9.
    """
    n = 400
    scores, covar = correlated_ar_pair(n, seed)
    result = sieve_partial_corr_matrix(scores, covar, n_boot=999, max_order=1, seed=seed)
    assert (result.ar_order == 1).all(), "precondition: both test sets get their AR(1)"
    phi_a, phi_b = (float(c) for c in result.ar_coef[:, 0])
    rho_e = float(np.corrcoef(lstsq_innovations(scores[:, 0], covar), lstsq_innovations(scores[:, 1], covar))[0, 1])
    reference = bartlett_z_variance(phi_a, phi_b, rho_e)
    independent = bartlett_z_variance(phi_a, phi_b, 0.0)
    assert independent > 1.5 * reference, "precondition: keeping the cross-correlation matters here"
    inflation = float(result.se_z[0, 1]) ** 2 * (n - 4)
    assert 0.75 * reference < inflation < 1.3 * reference, (inflation, reference, independent)


def opposite_sign_white_pair(n: int) -> SievePartialCorrMatrix:
    """The first white-noise data set (residuals truly independent) whose two test sets get AR(1) models of
    opposite sign with a constant spread: there, resampling alone would give a variance ratio of
    (1 + φ_a φ_b)/(1 − φ_a φ_b) < 1, i.e. less than Fisher's variance."""
    for seed in range(500):
        rng = np.random.default_rng(seed)
        covar = np.linspace(0.4, 0.8, n) + rng.normal(0, 0.01, n)
        scores = covar[:, None] + rng.normal(0, 0.02, (n, 2))
        result = sieve_partial_corr_matrix(scores, covar, n_boot=199, max_order=1, seed=2)
        phi_a, phi_b = result.ar_coef[:, 0]
        if (result.ar_order == 1).all() and (result.spread_slope == 0).all():
            if bartlett_z_variance(float(phi_a), float(phi_b), 0.0) < 0.85:
                return result
    raise AssertionError("precondition: no white-noise data set with opposite-sign AR(1) estimates")


def test_inflation_is_floored_at_one_so_se_z_is_never_below_fishers() -> None:
    """White residuals whose AR estimates are, by chance, of opposite sign (n = 30): the floor keeps the
    standard error at exactly Fisher's 1/sqrt(n − 3 − k) and df at ppcor's n − 2 − k; without it the standard
    error would be below Fisher's (the variance ratio (1 − |φ_a φ_b|)/(1 + |φ_a φ_b|) < 0.85 is the precondition).

    Measured: with the floor removed, se_z = 0.160 against Fisher's 0.196."""
    n = 30
    result = opposite_sign_white_pair(n)
    assert_allclose(result.se_z[0, 1], 1 / math.sqrt(n - 4), rtol=1e-9)
    assert_allclose(result.df[0, 1], n - 3, rtol=1e-9)


def test_se_z_never_falls_below_fishers_on_white_noise() -> None:
    """Over many short white-noise data sets, whatever AR orders AIC picks, se_z ≥ 1/sqrt(n − 3 − k); among them
    are data sets whose estimates pull the unfloored ratio below 1 (the precondition). Measured: with the floor
    removed, the first data set already gives se_z sqrt(n − 4) = 0.986."""
    n = 24
    below_one = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        covar = np.linspace(0.3, 0.9, n) + rng.normal(0, 0.01, n)
        scores = covar[:, None] + rng.normal(0, 0.02, (n, 3))
        result = sieve_partial_corr_matrix(scores, covar, n_boot=99, seed=seed)
        coef = result.ar_coef[:, 0] * (result.ar_order > 0)
        below_one += int((np.outer(coef, coef)[np.triu_indices(3, 1)] < -0.02).sum())
        off = ~np.eye(3, dtype=bool)
        assert (result.se_z[off] * math.sqrt(n - 4) >= 1 - 1e-12).all(), (seed, result.se_z)
    assert below_one >= 3, "precondition: some pairs have AR estimates of opposite sign"
