"""Pooled seeds whose variances are too small (issue 34, item 4): the random effect widened by Hartung–Knapp's
spread (Student's t on R - 1) where it exceeds 1, against statsmodels' ``combine_effects`` (its HKSJ variance
``var_hksj_re``), scipy's t and normal tails, and a closed-form Monte Carlo.

metafor is not installed here; statsmodels' HKSJ variances are the independent reference (R's
``metafor::rma(yi, vi, method = "DL", test = "knha")`` gives the same random-effects standard error where the
spread exceeds 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose
from statsmodels.stats.meta_analysis import combine_effects

from gengen.stats.meta import fisher_meta, fisher_meta_rows

CASES = [
    (np.array([0.45, -0.10, 0.30]), np.array([0.03, 0.05, 0.04]), np.array([20.0, 30.0, 25.0])),
    (np.array([0.6, 0.1, 0.35, -0.2, 0.5]), np.array([0.02, 0.06, 0.04, 0.05, 0.03]), np.array([15.0] * 5)),
    (np.tanh(np.linspace(-0.6, 0.9, 10)), np.linspace(0.01, 0.03, 10), np.linspace(12.0, 40.0, 10)),
]


@pytest.mark.parametrize(("r", "v", "dfs"), CASES)
def test_spread_out_runs_get_hartung_knapp_on_r_minus_1_df(r: np.ndarray, v: np.ndarray, dfs: np.ndarray) -> None:
    """Accurate to 1e-9 (relative): DL's τ² and estimate, HKSJ's variance, t on R − 1 for p and interval."""
    z = np.arctanh(r)
    result = fisher_meta(r, np.zeros(len(r)), np.zeros(len(r)), variance=v, df=dfs)
    reference = combine_effects(z, v, method_re="dl", use_t=True)
    assert reference.tau2 > 0  # Q > R - 1: statsmodels' DL τ² is not truncated below 0, so compare above it
    assert_allclose(result.tau2, reference.tau2, rtol=1e-9)
    assert_allclose(np.arctanh(result.r_random), reference.mean_effect_re, rtol=1e-9)
    assert reference.scale_hksj_re > 1  # the runs spread more than the weights promise
    assert_allclose(result.se_random, math.sqrt(reference.var_hksj_re), rtol=1e-9)
    dof = len(r) - 1
    assert result.df_random == dof
    statistic = np.arctanh(result.r_random) / result.se_random
    assert_allclose(result.p_random, 2 * scipy.stats.t.sf(abs(statistic), dof), rtol=1e-9)
    half = scipy.stats.t.ppf(0.975, dof) * result.se_random
    assert_allclose(
        [result.ci_low_random, result.ci_high_random],
        np.tanh(np.arctanh(result.r_random) + np.array([-half, half])),
        rtol=1e-9,
    )
    # the fixed effect is not widened: 1/√Σw on Satterthwaite's df
    assert_allclose(result.se_fixed, 1 / math.sqrt(np.sum(1 / v)), rtol=1e-9)
    rows = fisher_meta_rows(r[None, :], v[None, :], dfs[None, :], np.array([True]))
    for name, value in result.as_dict().items():
        assert_allclose(rows[name][0], value, rtol=1e-12, equal_nan=True, err_msg=name)


def test_runs_that_agree_keep_the_weights_variances() -> None:
    """q* ≤ 1: the random effect (τ² = 0 here) has the fixed effect's estimate and se 1/√Σw, on the normal (the
    fixed effect on Satterthwaite's ν = (Σw)²/Σ(w²/ν_i)); written out (1e-9 relative)."""
    r = np.array([0.30, 0.28, 0.33])
    v = np.array([0.04, 0.05, 0.03])
    dfs = np.array([20.0, 25.0, 30.0])
    result = fisher_meta(r, np.zeros(3), np.zeros(3), variance=v, df=dfs)
    w = 1 / v
    z = np.sum(w * np.arctanh(r)) / np.sum(w)
    assert result.q < 2
    nu = np.sum(w) ** 2 / np.sum(w**2 / dfs)
    assert_allclose([result.se_fixed, result.df_fixed], [1 / math.sqrt(np.sum(w)), nu], rtol=1e-9)
    assert_allclose(result.p_fixed, 2 * scipy.stats.t.sf(abs(z) * math.sqrt(np.sum(w)), nu), rtol=1e-9)
    assert result.tau2 == 0 and np.isnan(result.df_random)
    assert_allclose(result.se_random, 1 / math.sqrt(np.sum(w)), rtol=1e-9)
    assert_allclose(result.p_random, 2 * scipy.stats.norm.sf(abs(z) * math.sqrt(np.sum(w))), rtol=1e-9)


def test_identical_estimates_leave_a_positive_standard_error_and_p() -> None:
    """No spread to measure: the weights' own variance, never se = 0 or p = 0."""
    result = fisher_meta(np.full(4, 0.2), np.zeros(4), np.zeros(4), variance=np.full(4, 0.04))
    assert_allclose([result.se_random, result.se_fixed], math.sqrt(0.04 / 4), rtol=1e-12)
    assert 0 < result.p_random < 1 and 0 < result.p_fixed < 1


@pytest.mark.parametrize("runs", [3, 10])
def test_seeds_with_too_small_variances_stay_calibrated(runs: int) -> None:
    """Each run's z ~ N(0, 1.5 v) while it reports v (its s.e. 18% too small; up to 10% on item-level log-spaced
    curves): the textbook DerSimonian–Laird random effect and the fixed effect reject more than 0.065 of these
    nulls; the random effect widened by Hartung–Knapp's spread stays at or below 0.065 (4,000 groups: one-sided
    95% Monte Carlo margin 0.006)."""
    rng = np.random.default_rng([34, runs])
    groups = 4000
    v = rng.uniform(0.02, 0.06, (groups, runs))
    z = rng.standard_normal((groups, runs)) * np.sqrt(1.5 * v)
    rows = fisher_meta_rows(np.tanh(z), v, np.full((groups, runs), np.inf), np.zeros(groups, dtype=bool))
    w = 1 / v
    z_fixed = np.sum(w * z, axis=1) / np.sum(w, axis=1)
    q = np.sum(w * (z - z_fixed[:, None]) ** 2, axis=1)
    tau2 = np.maximum(0.0, (q - (runs - 1)) / (np.sum(w, axis=1) - np.sum(w**2, axis=1) / np.sum(w, axis=1)))
    w_random = 1 / (v + tau2[:, None])
    textbook = 2 * scipy.stats.norm.sf(np.abs(np.sum(w_random * z, axis=1)) / np.sqrt(np.sum(w_random, axis=1)))
    margin = 1.645 * math.sqrt(0.05 * 0.95 / groups)
    assert np.mean(textbook < 0.05) > 0.065  # the failure is visible at this size
    assert np.mean(rows["p_fixed"] < 0.05) > 0.065 + margin  # the fixed effect trusts the variances
    assert np.mean(rows["p_random"] < 0.05) - margin <= 0.065
