"""The default inference (AR-sieve test and interval of r_partial) against closed forms and its own contract.

References used here are independent of gengen.stats.sieve: numpy least squares for the partial correlation and the
dynamic AR regression, scipy's t distribution for Fisher's z test, statsmodels' Ljung–Box test; calibration is
checked by simulation against the nominal level with its Monte Carlo error.
"""

from __future__ import annotations

import importlib
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from numpy.testing import assert_allclose

import gengen
from gengen.across.compare import compare
from gengen.calibration.studies import GridCell, simulate_pair_runs
from gengen.errors import GengenError
from gengen.stats.meta import fisher_meta
from gengen.stats.sieve import (
    curvature_notes,
    curvature_shift,
    fit_autoregression,
    gam_control_z,
    ljung_box,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)
from tests.test_analyse import PYTHIA, load_pythia, synthetic


def residuals_of(y: np.ndarray, covar: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones(len(y)), covar])
    return y - design @ np.linalg.lstsq(design, y, rcond=None)[0]


# ------------------------------------------------------------------------------- closed forms
def test_with_white_residuals_the_test_is_fishers_z_on_ppcors_degrees_of_freedom() -> None:
    """When AIC picks AR(0) for every series and their spread is flat, the sieve's replicates equal their white
    twins, so the variance ratio is exactly 1: se_z = 1/sqrt(n - 3 - k), df = n - 2 - k, and p is Fisher's z
    test referred to t."""
    n, m = 40, 3
    for seed in range(100):  # the first white-noise data set whose series all get AR(0) (a precondition)
        rng = np.random.default_rng(seed)
        covar = np.linspace(0.4, 0.8, n) + rng.normal(0, 0.01, n)
        scores = covar[:, None] + rng.normal(0, 0.02, (n, m))
        result = sieve_partial_corr_matrix(scores, covar, n_boot=199, seed=2)
        if (result.ar_order == 0).all() and (result.spread_slope == 0).all():
            break
    assert (result.ar_order == 0).all() and (result.spread_slope == 0).all(), "precondition: white residuals"
    for a, b in zip(*np.triu_indices(m, 1), strict=True):
        r = np.corrcoef(residuals_of(scores[:, a], covar), residuals_of(scores[:, b], covar))[0, 1]
        z = math.atanh(r) * math.sqrt(n - 3 - 1)
        assert_allclose(result.r[a, b], r, rtol=1e-10)
        assert_allclose(result.se_z[a, b], 1 / math.sqrt(n - 4), rtol=1e-9)
        assert_allclose(result.df[a, b], n - 3, rtol=1e-9)
        assert_allclose(result.p_value[a, b], 2 * scipy.stats.t.sf(abs(z), n - 3), rtol=1e-8)
        half = scipy.stats.t.ppf(0.975, n - 3) / math.sqrt(n - 4)
        assert_allclose([result.ci_low[a, b], result.ci_high[a, b]], np.tanh(math.atanh(r) + np.array([-1, 1]) * half))


def test_autoregression_is_the_dynamic_least_squares_fit() -> None:
    """fit_autoregression at the chosen order p equals numpy's lstsq of e_t on [e_{t-1..t-p}, 1, z_t..z_{t-p}] on
    rows t >= max_order, and AIC recovers an AR(2) from a long series."""
    rng = np.random.default_rng(7)
    n = 600
    e = np.zeros(n + 200)
    for t in range(2, n + 200):
        e[t] = 1.2 * e[t - 1] - 0.5 * e[t - 2] + rng.normal()
    e = e[200:]
    z = np.linspace(0, 1, n) + rng.normal(0, 0.1, n)
    order, coef = fit_autoregression(e, max_order=4, control=z)
    p = int(order[0])
    assert p >= 2  # AIC may add a lag, never drop a real one at this length
    rows = np.arange(4, n)
    lags = [e[rows - i] for i in range(1, p + 1)]
    exogenous = [np.ones(rows.size)] + [z[rows - i] for i in range(p + 1)]
    design = np.column_stack(lags + exogenous)
    expected = np.linalg.lstsq(design, e[rows], rcond=None)[0][:p]
    assert_allclose(coef[0, :p], expected, rtol=1e-8)  # up to the 1e-13 ridge that keeps collinear lags solvable
    order_2, coef_2 = fit_autoregression(e, max_order=2, control=z)
    assert order_2[0] == 2
    assert_allclose(coef_2[0], [1.2, -0.5], atol=0.1)


def test_ljung_box_matches_statsmodels() -> None:
    statsmodels = pytest.importorskip("statsmodels.stats.diagnostic")
    rng = np.random.default_rng(1)
    series = np.cumsum(rng.normal(size=120)) * 0.1 + rng.normal(size=120)
    expected = statsmodels.acorr_ljungbox(series, lags=[10], model_df=2)["lb_pvalue"].iloc[0]
    assert_allclose(ljung_box(series[None, :], 10, fitted_order=2)[0], expected, rtol=1e-9)


# --------------------------------------------------------------------------------- the contract
@pytest.mark.parametrize("seed", range(6))
def test_interval_holds_r_and_excludes_zero_exactly_when_p_is_small(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(16, 80))
    covar = np.sort(rng.uniform(0.3, 0.9, n))
    noise = np.cumsum(rng.normal(0, 0.01, (n, 5)), axis=0) * rng.uniform(0.2, 1.0)
    scores = covar[:, None] * rng.uniform(0.2, 1.0, 5) + noise
    level = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
    result = sieve_partial_corr_matrix(scores, covar, n_boot=99, ci_level=level, seed=seed)
    for a, b in zip(*np.triu_indices(5, 1), strict=True):
        assert result.ci_low[a, b] <= result.r[a, b] <= result.ci_high[a, b]
        excludes = result.ci_low[a, b] > 0 or result.ci_high[a, b] < 0
        assert (result.p_value[a, b] < 1 - level) == excludes
        assert result.p_value[a, b] == result.p_value[b, a]


def test_same_seed_same_answer_and_spearman_is_the_sieve_on_ranks() -> None:
    rng = np.random.default_rng(3)
    covar = np.linspace(0, 1, 30)
    scores = covar[:, None] + np.cumsum(rng.normal(0, 0.05, (30, 3)), axis=0)
    first = sieve_partial_corr_matrix(scores, covar, n_boot=99, seed=5)
    again = sieve_partial_corr_matrix(scores, covar, n_boot=99, seed=5)
    assert_allclose(first.p_value, again.p_value, rtol=0, atol=0)
    ranked = sieve_partial_corr_matrix(
        pd.DataFrame(scores).rank().to_numpy(), pd.Series(covar).rank().to_numpy(), n_boot=99, seed=5
    )
    spearman = sieve_partial_corr_matrix(scores, covar, method="spearman", n_boot=99, seed=5)
    assert_allclose(spearman.p_value, ranked.p_value, rtol=1e-12)


def test_bad_input_is_refused_with_the_argument_named() -> None:
    with pytest.raises(GengenError, match="n_boot"):
        sieve_partial_corr_matrix(np.zeros((30, 2)), None, n_boot=5)
    with pytest.raises(GengenError, match="scores"):
        sieve_partial_corr_matrix(np.full((30, 2), np.nan), None)
    with pytest.raises(GengenError, match="too few"):
        sieve_partial_corr_matrix(np.random.default_rng(0).normal(size=(6, 2)), np.arange(6.0))


# ------------------------------------------------------------------------------------ calibration
def rejection_rate(cell: GridCell, replicates: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    rejected = 0
    for replicate in range(replicates):
        scores, id_scores = simulate_pair_runs(cell, 0.0, rng)
        result = sieve_partial_corr_matrix(scores[0], id_scores[0], n_boot=99, seed=replicate)
        rejected += result.p_value[0, 1] < 0.05
    return rejected / replicates


def upper_bound(rate: float, count: int) -> float:
    """One-sided 95% Monte Carlo lower limit of a rate: the test fails only when the rate is clearly too high."""
    return rate - 1.645 * math.sqrt(max(rate * (1 - rate), 1e-9) / count)


def test_default_holds_its_level_at_ar1_0_9() -> None:
    rate = rejection_rate(GridCell("ar1(0.9)"), 200, seed=11)
    assert upper_bound(rate, 200) <= 0.065, rate


def test_pooled_false_positive_rate_stays_below_0_065_at_three_seeds_ar1_0_9() -> None:
    """3 seeds x AR(1) 0.9 x n = 50, no true correlation: the meta-analysis on the runs' sieve variances
    keeps its false-positive rate (fixed and random effects); ppcor's 1/(n - 3 - k) does not (issue 13)."""
    cell = GridCell("ar1(0.9), 3 seeds", runs=3)
    rng = np.random.default_rng(2026)
    replicates = 150
    rejections = {"sieve fixed": 0, "sieve random": 0, "naive fixed": 0}
    for replicate in range(replicates):
        scores, id_scores = simulate_pair_runs(cell, 0.0, rng)
        fits = [
            sieve_partial_corr_matrix(scores[run], id_scores[run], n_boot=99, seed=replicate * 3 + run)
            for run in range(3)
        ]
        r = np.array([fit.r[0, 1] for fit in fits])
        se = np.array([fit.se_z[0, 1] for fit in fits])
        dfs = np.array([fit.df[0, 1] for fit in fits])
        sieve = fisher_meta(r, np.full(3, 50), np.ones(3), variance=se**2, df=dfs)
        naive = fisher_meta(r, np.full(3, 50), np.ones(3))
        rejections["sieve fixed"] += sieve.p_fixed < 0.05
        rejections["sieve random"] += sieve.p_random < 0.05
        rejections["naive fixed"] += naive.p_fixed < 0.05
    rates = {name: count / replicates for name, count in rejections.items()}
    assert upper_bound(rates["sieve fixed"], replicates) <= 0.065, rates
    assert upper_bound(rates["sieve random"], replicates) <= 0.065, rates
    assert rates["naive fixed"] > 0.2, rates  # the failure this replaces is visible at this size


# --------------------------------------------------------------------------- the non-linearity flag
def test_gam_control_z_is_the_gam_partial_correlation() -> None:
    rng = np.random.default_rng(4)
    control = np.sort(rng.uniform(0, 1, 60))
    scores = np.column_stack([np.sqrt(control), control**2, np.sin(3 * control)]) + 0.05 * rng.standard_normal((60, 3))
    z = gam_control_z(scores, control)
    r_gam = np.asarray(gengen.stats.partial_corr_matrix(scores, control, fit="gam").r)
    off = ~np.eye(3, dtype=bool)
    reference = np.where(off, np.arctanh(np.where(off, r_gam, 0.0)), np.nan)
    assert_allclose(z[off], reference[off], atol=1e-9)
    assert np.isnan(gam_control_z(scores, np.column_stack([control, control**3]))).all()  # one control only


def test_gam_control_z_takes_the_typed_gam_and_the_old_keywords_with_a_warning() -> None:
    rng = np.random.default_rng(5)
    control = np.sort(rng.uniform(0, 1, 50))
    scores = np.column_stack([np.sqrt(control), np.sin(3 * control)]) + 0.05 * rng.standard_normal((50, 2))
    typed = gam_control_z(scores, control, gengen.stats.Gam(k=6, max_edf=None))
    r_gam = np.asarray(gengen.stats.partial_corr_matrix(scores, control, fit=gengen.stats.Gam(k=6, max_edf=None)).r)
    assert_allclose(typed[0, 1], np.arctanh(r_gam[0, 1]), atol=1e-9)
    with pytest.warns(DeprecationWarning, match="fit=Gam"):
        old = gam_control_z(scores, control, k=6, max_edf=None)
    assert_allclose(old, typed, atol=0, equal_nan=True)
    with pytest.raises(GengenError, match="fit"):
        gam_control_z(scores, control, gengen.stats.Gam(), k=6)


def test_a_verdict_that_depends_on_the_control_is_flagged_both_ways() -> None:
    # artanh r_gam / se_z on df against scipy's t: 0.1 / 0.2 on 30 df gives p = 0.62, 0.6 / 0.2 gives 0.0053.
    notes = curvature_notes(
        [0.0, 0.0, 0.0, 0.3],
        [0.2, 0.2, 0.2, 0.2],
        p_value=[0.01, 0.01, 0.3, 0.01],
        z_gam=[0.1, 0.6, 0.6, 0.1],
        df=[30, 30, 30, 30],
    )
    assert f"p = {2 * scipy.stats.t.sf(0.5, 30):.2g}" in notes[0] and "fit='gam'" in notes[0]
    assert notes[1] == ""  # significant either way
    assert f"p = {2 * scipy.stats.t.sf(3.0, 30):.2g}" in notes[2]  # significant only under the GAM
    assert notes[3].startswith("ID effect looks non-linear")  # the squared-term shift speaks first
    assert curvature_notes([0.0], [0.2]) == [""]  # without the GAM comparison only the shift counts


def test_unflagged_rows_hold_their_level_under_a_saturating_link() -> None:
    """The linear control leaves a saturating ID effect in both residuals: most null pairs are significant
    (r_partial is truly non-zero there), so the rows must be flagged; among the rest the level holds."""
    cell = GridCell("saturating, ar1(0.9)", shape="saturating")
    rng = np.random.default_rng(8)
    unflagged = rejected = significant = 0
    replicates = 150
    for replicate in range(replicates):
        scores, id_scores = simulate_pair_runs(cell, 0.0, rng)
        data, covar = scores[0], id_scores[0][:, None]
        result = sieve_partial_corr_matrix(data, covar, n_boot=99, seed=replicate)
        p = result.p_value[0, 1]
        curved = curvature_notes(
            [curvature_shift(data, covar)[0, 1]],
            [result.se_z[0, 1]],
            p_value=[p],
            z_gam=[gam_control_z(data, covar)[0, 1]],
            df=[result.df[0, 1]],
        )
        column_notes = sieve_column_notes(result, ["a", "b"])
        flagged = any(column_notes[0] + column_notes[1])
        significant += p < 0.05
        if not (flagged or curved[0]):
            unflagged += 1
            rejected += p < 0.05
    assert significant / replicates > 0.4  # the failure the flag answers is there
    assert unflagged > 5
    assert upper_bound(rejected / unflagged, unflagged) <= 0.065, (rejected, unflagged)


def test_the_non_linearity_note_describes_the_control_not_the_verdict() -> None:
    """Through gengen.analyse with the linear control on a saturating ID effect: the note fires on rows whatever
    their p-value (an earlier rule that compared verdicts under two controls fired almost only on significant
    rows), and every noted row's squared-term shift (recomputed here with numpy) exceeds max(0.2, se_z)."""
    cell = GridCell("saturating, ar1(0.9)", shape="saturating")
    rng = np.random.default_rng(3)
    rows = []
    for run in range(24):
        scores, id_scores = simulate_pair_runs(cell, 0.0, rng)
        for t in range(cell.n):
            rows.append(
                {"model": "m", "run": f"r{run}", "step": t, "testset": "id", "metric": "acc", "value": id_scores[0, t]}
            )
            for j, name in enumerate(("a", "b")):
                rows.append(
                    {
                        "model": "m",
                        "run": f"r{run}",
                        "step": t,
                        "testset": name,
                        "metric": "acc",
                        "value": scores[0, t, j],
                    }
                )
    frame = pd.DataFrame(rows)
    pairs = gengen.analyse(frame, id_testset="id", fit="linear", n_boot=99, adjust="none").pairs
    runs = pairs[pairs["level"] == "run"].set_index("run")
    assert not runs["diagnostics"].str.contains("verdict depends on the control").any()
    for run, row in runs.iterrows():
        wide = frame[frame["run"] == run].pivot(index="step", columns="testset", values="value")
        shift = []
        for design in ([wide["id"]], [wide["id"], wide["id"] ** 2]):
            x = np.column_stack([np.ones(len(wide)), *design])
            e = [y - x @ np.linalg.lstsq(x, y, rcond=None)[0] for y in (wide["a"], wide["b"])]
            shift.append(np.arctanh(np.corrcoef(e[0], e[1])[0, 1]))
        moved = abs(shift[0] - shift[1]) > max(0.2, row["se_z"])
        assert moved == ("non-linear" in row["diagnostics"]), run
    noted = runs["diagnostics"].str.contains("non-linear")
    significant = runs["p_deciding"] < 0.05
    assert noted.any() and (~significant).any()
    # Fires on non-significant rows too: the note is about the control.
    assert noted[~significant].mean() > 0


# ----------------------------------------------------------------------------------- the analysis
def test_pairs_table_rows_are_one_coherent_answer() -> None:
    df = synthetic(n_runs=3, phi=0.9, n_steps=40, seed=21)
    result = gengen.analyse(df, id_testset="id", n_boot=99)
    pairs = result.pairs
    assert (pairs["p_adjusted_from"] == "p_loo_max").all()
    assert (pairs["estimand"] == "r_partial").all()
    # No single checkpoint decides: the deciding p survives deleting any checkpoint that carries the estimate.
    assert_allclose(pairs["p_deciding"], np.fmax(pairs["p_sieve"], pairs["p_loo_max"]), rtol=1e-12)
    assert (pairs["p_deciding"] >= pairs["p_sieve"] * (1 - 1e-12)).all()
    assert ((pairs["ci_low"] <= pairs["r_partial"]) & (pairs["r_partial"] <= pairs["ci_high"])).all()
    excludes = (pairs["ci_low"] > 0) | (pairs["ci_high"] < 0)
    assert ((pairs["p_deciding"] < 1 - pairs["ci_level"]) == excludes).all()
    assert pairs["ci_method"].str.startswith("AR-sieve").all()
    assert pairs["ci_method"].str.endswith("hull over the deletions that carry it").all()
    # pooled with the same estimand and its autocorrelation-aware variances
    assert (result.pooled["variance_method"].str.startswith("se_z")).all()


def test_t_test_rows_get_the_interval_consistent_with_their_p_value() -> None:
    df = synthetic(n_runs=1, phi=0.0, n_steps=25, seed=3)
    for leave_one_out, deciding in ((False, "p_value"), (True, "p_loo_max")):
        pairs = gengen.analyse(df, id_testset="id", inference="t-test", leave_one_out=leave_one_out).pairs
        assert (pairs["p_adjusted_from"] == deciding).all()
        assert ((pairs["ci_low"] <= pairs["r_partial"]) & (pairs["r_partial"] <= pairs["ci_high"])).all()
        excludes = (pairs["ci_low"] > 0) | (pairs["ci_high"] < 0)
        assert ((pairs["p_deciding"] < 0.05) == excludes).all()
    assert_allclose(pairs["p_deciding"], np.fmax(pairs["p_value"], pairs["p_loo_max"]), rtol=1e-12)
    kendall = gengen.analyse(df, id_testset="id", inference="t-test", method="kendall").pairs
    assert kendall["ci_low"].isna().all() and kendall["ci_method"].str.startswith("none: Kendall").all()


def test_compare_takes_sign_and_significance_from_the_deciding_estimand() -> None:
    df = synthetic(n_runs=2, phi=0.9, n_steps=40, seed=11)
    lagged = gengen.analyse(df, id_testset="id", inference="lagged")
    per_pair = compare(lagged).per_pair
    expected = lagged.pairs.assign(group=lagged.pairs["model"].astype(str) + "/" + lagged.pairs["run"].astype(str))
    merged = per_pair.merge(expected, on=["group", "testset_a", "testset_b"], how="inner")
    assert len(merged) == len(lagged.pairs)
    assert_allclose(merged["r"], merged["r_innovation"])
    assert ((merged["p"] < 0.05) == (merged["p_adjusted"] < 0.05)).all()


def test_pythia_rows_never_exclude_their_own_r_partial(shared_dir: Path) -> None:
    pythia = load_pythia(shared_dir / PYTHIA)
    result = gengen.analyse(pythia, id_testset="lambada_openai", metric="acc", n_boot=199)
    pairs = result.pairs
    assert len(pairs) == 2 * 2016 or len(pairs) > 1000
    finite = pairs["ci_low"].notna()
    assert finite.mean() > 0.95
    inside = (pairs["ci_low"] <= pairs["r_partial"]) & (pairs["r_partial"] <= pairs["ci_high"])
    assert inside[finite].all()
    excludes = (pairs["ci_low"] > 0) | (pairs["ci_high"] < 0)
    assert ((pairs["p_deciding"] < 0.05) == excludes)[finite].all()


def test_when_the_sieve_fails_on_a_group_each_pair_keeps_its_own_ar_orders_and_notes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure of the whole group falls back to pairs; pairs without the failing test set keep their AR orders
    (chosen per test set, so equal to those of the whole-group fit) and their sieve test."""
    core = importlib.import_module("gengen.analyse.inference")
    df = synthetic(n_runs=1, n_ood=4, phi=0.5, n_steps=40, seed=2)
    reference = gengen.analyse(df, id_testset="id", n_boot=99).pairs
    failing = sorted(df.loc[df["testset"] != "id", "testset"].unique())[-1]
    failing_scores = df[df["testset"] == failing].sort_values("step")["value"].to_numpy()
    original = core.sieve_partial_corr_matrix

    def sieve_that_cannot_model_one_test_set(data: np.ndarray, *args: object, **kwargs: object) -> object:
        data = np.asarray(data)
        if data.shape[1] > 2 or any(np.array_equal(column, failing_scores) for column in data.T):
            raise GengenError("scores: column 1 cannot be modelled (test double)")
        return original(data, *args, **kwargs)

    monkeypatch.setattr(core, "sieve_partial_corr_matrix", sieve_that_cannot_model_one_test_set)
    result = gengen.analyse(df, id_testset="id", n_boot=99)
    assert any("3 of 6 pairs have no sieve test" in warning for warning in result.warnings), result.warnings
    pairs = result.pairs
    involved = ((pairs["testset_a"] == failing) | (pairs["testset_b"] == failing)).to_numpy()
    assert involved.sum() == 3
    assert pairs.loc[involved, ["ar_order_a", "ar_order_b", "p_sieve"]].isna().all().all()
    # p-values differ from the group's (the replicates are drawn for two test sets, not four); AR orders do not.
    columns = ["testset_a", "testset_b", "ar_order_a", "ar_order_b"]
    kept = pairs.loc[~involved, columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, reference.loc[~involved, columns].reset_index(drop=True))
    assert kept[["ar_order_a", "ar_order_b"]].notna().all().all()
    assert pairs.loc[~involved, "p_sieve"].notna().all()


def test_the_gam_verdict_check_adds_no_warnings_of_its_own() -> None:
    """With few distinct ID values the GAM lowers its basis and says so; under the default linear control that
    GAM is only the diagnostic's, so neither the analysis nor Python's warnings repeat it for every group."""
    df = synthetic(n_runs=2, n_ood=3, n_steps=12, seed=5)
    is_id = df["testset"] == "id"
    df.loc[is_id, "value"] = df.loc[is_id, "value"].round(1)  # a handful of distinct ID scores
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = gengen.analyse(df, id_testset="id", n_boot=99)
    assert not [w for w in caught if "lowered" in str(w.message)]
    assert not [w for w in result.warnings if "lowered" in w]
    first_run = df[df["run"] == df["run"].iloc[0]].pivot(index="step", columns="testset", values="value")
    with pytest.warns(Warning, match="lowered"):  # the GAM itself does warn on these data
        gengen.stats.gam_fit(first_run[["ood0", "ood1"]].to_numpy(), first_run[["id"]].to_numpy())


def test_fixed_effect_uses_students_t_on_satterthwaites_df_when_variances_are_estimated() -> None:
    """Closed form against scipy: z̄ = Σwz/Σw, se = 1/√Σw, ν = (Σw)²/Σ(w²/ν_i), p = 2·t.sf(|z̄|/se, ν)."""
    r = np.array([0.3, 0.1, 0.45])
    se = np.array([0.25, 0.3, 0.2])
    dfs = np.array([12.0, 9.0, 20.0])
    w = 1 / se**2
    z = np.sum(w * np.arctanh(r)) / np.sum(w)
    nu = np.sum(w) ** 2 / np.sum(w**2 / dfs)
    half = scipy.stats.t.ppf(0.975, nu) / np.sqrt(np.sum(w))
    meta = fisher_meta(r, np.full(3, 50), np.ones(3), variance=se**2, df=dfs)
    assert_allclose(meta.df_fixed, nu, rtol=1e-12)
    assert_allclose(meta.p_fixed, 2 * scipy.stats.t.sf(abs(z) * np.sqrt(np.sum(w)), nu), rtol=1e-9)
    assert_allclose([meta.ci_low_fixed, meta.ci_high_fixed], np.tanh([z - half, z + half]), rtol=1e-9)
    # Known variances (no df): the normal reference, as before.
    known = fisher_meta(r, np.full(3, 50), np.ones(3), variance=se**2)
    assert np.isnan(known.df_fixed)
    assert_allclose(known.p_fixed, 2 * scipy.stats.norm.sf(abs(z) * np.sqrt(np.sum(w))), rtol=1e-9)
    assert_allclose(meta.p_random, known.p_random)  # random effects keep the normal reference
