"""The global answer of issue 33 (items 4 and 5): the share of co-moving pairs, its interval, the r distribution
next to the null, resolved sign agreement, the screening FDR column, the detectable |r| and the answer sentence.

References are independent of the code under test: closed forms (Storey's count, the normal power formula,
the t distribution's CDF), explicit loops for the jackknife, statsmodels' ``multipletests`` for
Benjamini–Hochberg, and simulations whose Monte-Carlo error is stated beside each tolerance.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats as scipy_stats

from gengen.across.global_share import (
    answer_sentence,
    global_share_table,
    r_distribution_table,
    resolved_sign_agreement,
    unrelated_estimates,
)
from gengen.stats.share import detectable_r, global_share, storey_share


def _pairs(n_testsets: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.array(list(itertools.combinations(range(n_testsets), 2)))
    return pairs[:, 0], pairs[:, 1]


def test_storey_share_is_the_closed_form_count() -> None:
    p = np.array([0.001, 0.2, 0.51, 0.7, 0.99, np.nan, 0.5, 0.03])
    finite = p[np.isfinite(p)]
    expected = 1 - np.sum(finite > 0.5) / (0.5 * len(finite))
    assert storey_share(p) == pytest.approx(expected, abs=1e-15)
    assert storey_share(p, 0.25) == pytest.approx(1 - np.sum(finite > 0.25) / (0.75 * len(finite)), abs=1e-15)


def test_jackknife_matches_an_explicit_leave_one_test_set_out_loop() -> None:
    a, b = _pairs(13)
    p = np.random.default_rng(3).beta(0.6, 1.0, len(a))
    leave_out = np.array([storey_share(p[(a != j) & (b != j)]) for j in range(13)])
    jackknife = 12 / 13 * np.sum((leave_out - leave_out.mean()) ** 2)
    above = (p > 0.5).astype(float)
    own = np.sum((above - above.mean()) ** 2) / (0.5 * len(a)) ** 2
    q = scipy_stats.t.ppf(0.975, 12)
    corrected = global_share(p, a, b).se  # the default
    assert corrected == pytest.approx(np.sqrt(max(jackknife - own, own)), rel=1e-12)
    result = global_share(p, a, b, variance="jackknife")
    se = np.sqrt(jackknife)
    assert result.se == pytest.approx(se, rel=1e-12)
    assert result.share_unclipped == pytest.approx(storey_share(p), abs=1e-15)
    assert result.ci_low == pytest.approx(max(0.0, result.share_unclipped - q * se), abs=1e-12)
    assert result.ci_high == pytest.approx(min(1.0, result.share_unclipped + q * se), abs=1e-12)
    assert result.p_positive == pytest.approx(scipy_stats.t.sf(result.share_unclipped / se, 12), rel=1e-12)
    assert (result.n_pairs, result.n_testsets) == (78, 13)


def test_simulated_null_count_matches_an_explicit_leave_one_test_set_out_loop() -> None:
    """With each pair's null probability q_i of p > lambda, the share is 1 - sum(a)/sum(q): the leave-one-out
    shares and the pairs' own variance (a_i - (A/Q) q_i)^2 / Q^2 from explicit loops over test sets and pairs,
    to 1e-12; q_i = 1 - lambda gives Storey's count again."""
    a, b = _pairs(14)
    rng = np.random.default_rng(8)
    p = rng.beta(0.7, 1.0, len(a))
    q = rng.uniform(0.4, 0.55, len(a))
    q[3] = np.nan  # counted as 1 - lambda
    filled = np.where(np.isfinite(q), q, 0.5)
    estimate = 1 - np.sum(p > 0.5) / np.sum(filled)
    kept = [(a != j) & (b != j) for j in range(14)]
    leave_out = np.array([1 - np.sum(p[rows] > 0.5) / np.sum(filled[rows]) for rows in kept])
    jackknife = 13 / 14 * np.sum((leave_out - leave_out.mean()) ** 2)
    own = sum((float(p[i] > 0.5) - (1 - estimate) * filled[i]) ** 2 for i in range(len(a))) / np.sum(filled) ** 2
    result = global_share(p, a, b, null_above=q)
    assert result.share_unclipped == pytest.approx(estimate, abs=1e-12)
    assert result.se == pytest.approx(np.sqrt(max(jackknife - own, own)), rel=1e-12)
    assert global_share(p, a, b, null_above=q, variance="jackknife").se == pytest.approx(np.sqrt(jackknife), rel=1e-12)
    assert "null count simulated" in result.method
    uniform = global_share(p, a, b, null_above=np.full(len(a), 0.5))
    assert uniform.share_unclipped == pytest.approx(storey_share(p), abs=1e-15)
    with pytest.raises(ValueError, match="null_above: probabilities must lie in"):
        global_share(p, a, b, null_above=np.full(len(a), 1.5))
    with pytest.raises(ValueError, match="null_above: need one probability per p-value"):
        global_share(p, a, b, null_above=[0.5])


class _Fitted:
    """A sieve fit's AR models, set by hand: what :func:`null_above_probability` simulates from."""

    def __init__(self, coefficients: list[list[float]], n: int) -> None:
        self.ar_order = np.array([len(c) for c in coefficients])
        self.ar_coef = np.zeros((len(coefficients), max(1, int(self.ar_order.max()))))
        for j, c in enumerate(coefficients):
            self.ar_coef[j, : len(c)] = c
        self.n = n


def test_null_above_probability_is_the_sieve_p_values_on_independent_series_of_the_fitted_models() -> None:
    """Reference: the sieve test run on series drawn independently of the function (the stationary AR generator
    of gengen.calibration.simulate, true coefficients), 200 data sets of 6 test sets (15 pairs); the function with
    the same models, 200 draws. The two mean probabilities differ by Monte-Carlo error only: each is a mean of
    3,000 dependent indicators, s.e. below 0.015 each (pairs of one data set share series); tolerance 0.05.
    Neither is the 0.5 of exact p-values: white noise leans above it (measured 0.59), AR(1) 0.9 with 40
    checkpoints below (0.41), as on the calibration grid."""
    from gengen.calibration.simulate import _stationary_ar
    from gengen.stats import sieve_partial_corr_matrix
    from gengen.stats.share import null_above_probability

    n, m, draws = 40, 6, 200
    control = np.linspace(0.0, 1.0, n) ** 0.5
    upper = np.triu_indices(m, 1)
    for phi in (None, 0.9):
        fitted = _Fitted([[] if phi is None else [phi]] * m, n)
        simulated = null_above_probability(fitted, control, n_draws=draws, n_boot=99, seed=4)
        assert np.all(np.isnan(np.diag(simulated))) and np.allclose(simulated, simulated.T, equal_nan=True)
        rng = np.random.default_rng(9)
        reference = []
        for _ in range(draws):
            series = rng.standard_normal((m, n)) if phi is None else _stationary_ar(rng, (phi,), n, m)
            result = sieve_partial_corr_matrix(series.T, control, n_boot=99, seed=int(rng.integers(2**31)))
            reference.append(np.asarray(result.p_value)[upper] > 0.5)
        assert np.mean(simulated[upper]) == pytest.approx(np.mean(reference), abs=0.05)
        # white noise: the p-values lean large (the sieve's bias correction leans towards autocorrelation)
        assert np.mean(simulated[upper]) > 0.5 if phi is None else np.mean(simulated[upper]) < 0.5


@pytest.mark.parametrize("effect", [0.0, 0.5, 1.0])
def test_standard_error_matches_the_spread_of_the_share_over_draws(effect: float) -> None:
    """P-values of 190 pairs of 20 test sets, independent (effect 0) or sharing test-set effects f_a + f_b:
    the corrected standard error (the default)'s mean lies between 0.9 and 1.15 times the standard deviation of
    the share over 1,500 draws (whose own Monte-Carlo error is about 2%; measured 1.13, 0.98, 0.96: the floor at
    the independent pairs' variance makes it conservative when the pairs are independent); the plain jackknife
    is 40% too large then."""
    a, b = _pairs(20)
    rng = np.random.default_rng(17)
    shares, errors, plain = [], [], []
    for _ in range(1500):
        f = effect * rng.standard_normal(20)
        z = f[a] + f[b] + rng.standard_normal(len(a))
        p = scipy_stats.norm.cdf(z / np.sqrt(1 + 2 * effect**2))  # uniform margins: every pair null
        result = global_share(p, a, b)
        shares.append(result.share_unclipped)
        errors.append(result.se)
        plain.append(global_share(p, a, b, variance="jackknife").se)
    assert 0.9 <= np.mean(errors) / np.std(shares) <= 1.15
    if effect == 0.0:
        assert np.mean(plain) / np.std(shares) > 1.3


def test_too_few_test_sets_or_no_spread_give_no_interval_and_bad_p_values_are_refused() -> None:
    a, b = _pairs(11)  # below the 12 test sets the calibration covers
    result = global_share(np.linspace(0.001, 0.999, len(a)), a, b)
    assert np.isnan(result.se) and np.isnan(result.ci_low) and np.isfinite(result.share)
    a, b = _pairs(12)  # every pair below lambda: every leave-one-out share is 1, no spread to refer to
    result = global_share(np.full(len(a), 0.01), a, b)
    assert result.share == 1.0 and np.isnan(result.ci_low) and np.isnan(result.p_positive)
    with pytest.raises(ValueError, match="p: p-values must lie in"):
        global_share([0.1, 1.5], ["a", "b"], ["b", "c"])
    with pytest.raises(ValueError, match="testset_a, testset_b"):
        global_share([0.1, 0.5], ["a"], ["b"])


def test_detectable_r_solves_each_df_to_the_power_and_caps_the_unreachable() -> None:
    """Many rows, repeated and distinct df (the root is found once per df, by regula falsi): each row's
    non-central t power at its r is 0.8 within 1e-9; where a df of about 1 cannot reach 0.8 below a
    non-centrality of 200 at the Holm level of 50 tests, r is tanh(200 se), the solver's documented cap."""
    rng = np.random.default_rng(5)
    dof = np.concatenate([np.repeat([4.0, 17.5], 30), rng.uniform(3.0, 400.0, 60), [1.1, 1.15]])
    se = rng.uniform(0.05, 0.6, len(dof))
    r = detectable_r(se, dof, 50)
    critical = scipy_stats.t.isf(0.05 / 50 / 2, dof)
    delta = np.arctanh(r) / se
    power = scipy_stats.nct.sf(critical, dof, delta) + scipy_stats.nct.sf(critical, dof, -delta)
    assert_allclose(power[:-2], 0.8, atol=1e-9)
    assert np.all(scipy_stats.nct.sf(critical[-2:], dof[-2:], 200.0) < 0.8)
    assert_allclose(r[-2:], np.tanh(200.0 * se[-2:]), rtol=1e-12)


def test_detectable_r_reaches_the_power_it_promises() -> None:
    """Closed form (normal), the non-central t's power (exact, 1e-6), and a simulation of the Fisher-z test of
    independent checkpoints at the Holm/Bonferroni level of 10 pairs (4,000 draws: Monte-Carlo s.e. 0.0063,
    tolerance 0.025)."""
    se = np.array([0.1, 0.2, 0.35])
    level = 0.05 / 50
    expected = np.tanh(se * (scipy_stats.norm.isf(level / 2) + scipy_stats.norm.ppf(0.8)))
    assert_allclose(detectable_r(se, np.inf, 50), expected, atol=2e-3)  # the far tail adds < 1e-3
    r = detectable_r(se, [5.0, 12.0, 30.0], 50)
    delta = np.arctanh(r) / se
    critical = scipy_stats.t.isf(level / 2, [5.0, 12.0, 30.0])
    # the far tail by symmetry, P(T_delta < -c) = P(T_-delta > c)
    power = scipy_stats.nct.sf(critical, [5.0, 12.0, 30.0], delta) + scipy_stats.nct.sf(
        critical, [5.0, 12.0, 30.0], -delta
    )
    assert_allclose(power, 0.8, atol=1e-6)
    assert detectable_r(0.2, np.inf, 50, adjust="none")[0] < detectable_r(0.2, np.inf, 50)[0]

    n, k, m = 40, 1, 10
    rho = float(detectable_r(1 / np.sqrt(n - 3 - k), np.inf, m)[0])
    rng = np.random.default_rng(11)
    draws = 4000
    control = rng.standard_normal((draws, n))
    shared = rng.standard_normal((draws, n))
    x = control + np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.standard_normal((draws, n))
    y = 2 * control + np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.standard_normal((draws, n))
    design = np.stack([np.ones((draws, n)), control], axis=-1)
    beta_x = np.linalg.solve(design.transpose(0, 2, 1) @ design, design.transpose(0, 2, 1) @ x[..., None])
    beta_y = np.linalg.solve(design.transpose(0, 2, 1) @ design, design.transpose(0, 2, 1) @ y[..., None])
    ex, ey = x - (design @ beta_x)[..., 0], y - (design @ beta_y)[..., 0]
    r = np.sum(ex * ey, axis=1) / np.sqrt(np.sum(ex**2, axis=1) * np.sum(ey**2, axis=1))
    p = 2 * scipy_stats.norm.sf(np.abs(np.arctanh(r)) * np.sqrt(n - 3 - k))
    assert np.mean(p < 0.05 / m) == pytest.approx(0.8, abs=0.025)


def test_r_distribution_expects_the_t_null_of_each_row() -> None:
    estimates = pd.DataFrame(
        {"unit": "m", "z": [0.1, -0.3, 0.02, 0.5], "variance": [0.04, 0.09, 0.04, 0.01], "df": [10.0, np.inf, 4, 20]}
    )
    table = r_distribution_table(estimates, n_bins=10)
    assert table["n_observed"].sum() == 4
    assert table["n_null_expected"].sum() == pytest.approx(4, abs=1e-9)
    low, high = np.arctanh(0.2), np.arctanh(0.4)
    se, df = np.sqrt([0.04, 0.09, 0.04, 0.01]), np.array([10.0, np.inf, 4, 20])
    by_row = [
        (scipy_stats.norm if not np.isfinite(d) else scipy_stats.t(d)).cdf(high / s)
        - (scipy_stats.norm if not np.isfinite(d) else scipy_stats.t(d)).cdf(low / s)
        for s, d in zip(se, df, strict=True)
    ]
    row = table[np.isclose(table["bin_low"], 0.2)].iloc[0]
    assert row["n_null_expected"] == pytest.approx(sum(by_row), rel=1e-9)


def test_related_pairs_are_left_out_of_the_global_share() -> None:
    a, b = _pairs(6)
    names = np.array([f"t{i}" for i in range(6)])
    estimates = pd.DataFrame(
        {"unit": "m", "testset_a": names[a], "testset_b": names[b], "n_runs": 1, "z": 0.1, "variance": 0.04, "df": 20.0}
    )
    pairs = pd.DataFrame({"testset_a": ["t1", "t3"], "testset_b": ["t0", "t4"], "related": [True, False]})
    kept = unrelated_estimates(estimates, pairs)
    assert len(kept) == 14
    assert not ((kept["testset_a"] == "t0") & (kept["testset_b"] == "t1")).any()
    assert global_share_table(kept)["n_pairs"].tolist() == [14]
    assert len(unrelated_estimates(estimates, pairs.drop(columns="related"))) == 15


def test_resolved_sign_agreement_counts_pairs_both_models_resolve() -> None:
    estimates = pd.DataFrame(
        {
            "unit": ["a"] * 3 + ["b"] * 3,
            "testset_a": ["x", "x", "y"] * 2,
            "testset_b": ["y", "w", "w"] * 2,
            # z / 0.2: a resolves all three, b resolves the first two (p < 0.05) and not the third
            "z": [0.6, 0.5, -0.6, 0.7, -0.6, -0.1],
            "variance": 0.04,
            "df": np.inf,
        }
    )
    table = resolved_sign_agreement(estimates)
    assert table[["n_resolved_both", "n_resolved_agree"]].to_numpy().tolist() == [[2, 1]]


def test_global_share_calibration_ci_sized() -> None:
    """A CI-sized run of docs/calibration.md's grid with the default interval (corrected variance, simulated null
    count): all-null at lag-1 autocorrelation 0.9 (where the sieve's p-values lean small) and 30% non-null,
    60 replicates each, 199 sieve draws. With 60 replicates the Monte-Carlo s.e. of a 95% coverage is 0.028 and
    of a 5% type-I 0.028: the bounds (coverage >= 0.85, 3.6 s.e. below 0.95; type-I of "share > 0" by the
    interval's lower end <= 0.12, 2.5 s.e. above 0.05) fail only for a real miscalibration."""
    from gengen.calibration.global_share import GlobalCell, global_share_study

    cells = (
        GlobalCell("null", 40, 0.9, (), 0.0, n_testsets=12),
        GlobalCell("30%", 40, 0.5, (6, 4), 0.5, n_testsets=12),
    )
    table = global_share_study(cells, replicates=60, n_boot=199, seed=5)
    table = table[table["estimator"] == "storey"].set_index("cell")
    assert cells[1].true_share == pytest.approx(21 / 66)
    for cell in ("null", "30%"):
        assert table.loc[cell, "coverage"] >= 0.85, table
    assert table.loc["null", "lower_above_zero"] <= 0.12
    assert abs(table.loc["30%", "bias"]) <= 0.08


@pytest.fixture(scope="module")
def pythia_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The shared Pythia files ingested and analysed through the command line, as a user would."""
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pythia-lm-eval-v0.3"
    if not shared.is_dir():
        pytest.skip(f"{shared} is not there")
    from typer.testing import CliRunner

    from gengen.cli import app

    folder = tmp_path_factory.mktemp("pythia")
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(shared), "--store", str(folder / "store")])
    assert ingested.exit_code == 0, ingested.output
    out = folder / "analysis"
    result = runner.invoke(
        app,
        [
            "analyse",
            str(folder / "store"),
            "--id",
            "lambada_openai",
            "--metric",
            "acc",
            "--fit",
            "linear",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out, result.stdout


def test_pythia_first_screen_states_the_answer_and_every_number_is_in_the_tables(
    pythia_run: tuple[Path, str],
) -> None:
    out, stdout = pythia_run
    first = stdout.splitlines()[0]
    verdict = json.loads((out / "verdict.json").read_text())
    assert first == f"answer: {verdict['answer']}"
    shares = pd.read_csv(out / "verdict_global_share.csv")
    pairs = pd.read_csv(out / "verdict_pairs.csv")
    answer = verdict["answer"]
    for row in shares.itertuples(index=False):

        def percent(value: float) -> str:  # whole percents; one decimal below 1% so that a value above 0 never reads 0
            return f"{100 * value:.1f}" if 0 < value < 0.01 else f"{100 * value:.0f}"

        share = f"{percent(row.share)}% (95% CI {percent(row.ci_low)}–{percent(row.ci_high)}%)"
        assert share in answer and f"in {row.unit}" in answer, (share, answer)
    above = int((shares["ci_low"] > 0).sum())
    assert f"interval above zero in {above} of {len(shares)} models" in answer
    mantel = verdict["agreement"]["mantel_r"]
    assert f"Mantel r = {mantel['median']:.2f}" in answer
    assert f"95% range {mantel['chance_low']:.2f} to {mantel['chance_high']:.2f}" in answer
    resolved = verdict["resolvable"]["resolved_sign_agreement"][0]
    assert f"{resolved['n_resolved_agree']} of the {resolved['n_resolved_both']} pairs with p < 0.05" in answer
    n_resolvable = int((pairs["r_detectable"] <= 0.3).sum())
    assert f"{n_resolvable} of {len(pairs)} pairs could have been resolved at |r| = 0.3" in answer
    assert f"median detectable |r| {pairs['r_detectable'].median():.2f}" in answer
    # the share is Storey's count on each model's p-values (here one run per model: the sieve's p_sieve), counted
    # against each pair's simulated null probability of p > 0.5 (p_null_above of pairs.csv)
    runs = pd.read_csv(out / "pairs.csv")
    for row in shares.itertuples(index=False):
        rows = runs[(runs["model"] == row.unit) & runs["p_sieve"].notna()]
        if "related" in rows.columns:  # left out of the global answer
            rows = rows[~rows["related"].fillna(False).astype(bool)]
        p, q = rows["p_sieve"].to_numpy(dtype=float), rows["p_null_above"].to_numpy(dtype=float)
        # 20 null data sets per run: each pair's q is a share of 20, its mean over pairs near 0.5
        assert np.isfinite(q).all() and ((q >= 0) & (q <= 1)).all() and 0.3 < q.mean() < 0.7
        assert row.share == pytest.approx(max(0.0, 1 - np.sum(p > 0.5) / np.sum(q)), abs=1e-9)
        assert "null count simulated" in row.method
    assert re.match(r"answer: An estimated \d+% \(95% CI", first)


def test_the_docs_quote_the_pythia_answer_the_code_gives(pythia_run: tuple[Path, str]) -> None:
    # docs/analysis.md quotes the whole sentence and the README its opening: both went stale once (10% and 14%
    # quoted while the code said 1% and 2%). Each number is rounded (whole percents, r to 2 decimals), so the
    # text is the same on any CPU unless a value sits within float noise of a rounding boundary.
    out, _ = pythia_run
    answer = json.loads((out / "verdict.json").read_text())["answer"]
    root = Path(__file__).resolve().parents[1]
    docs = (root / "docs" / "analysis.md").read_text()
    start = docs.index("> An estimated ")
    quoted = " ".join(line.removeprefix("> ") for line in docs[start:].split("\n\n")[0].splitlines())
    assert quoted == answer
    readme = " ".join((root / "README.md").read_text().split())
    opening = answer[: answer.index("(Mantel r = ")]
    assert f'"{opening}' in readme, opening


def test_pythia_screening_fdr_is_benjamini_hochberg_of_the_deciding_p(pythia_run: tuple[Path, str]) -> None:
    from statsmodels.stats.multitest import multipletests

    out, _ = pythia_run
    runs = pd.read_csv(out / "pairs.csv")
    for _, group in runs.groupby(["model", "run"]):
        p = group["p_deciding"].to_numpy(dtype=float)
        assert_allclose(group["p_fdr"], multipletests(p, method="fdr_bh")[1], rtol=1e-12)
        assert group["r_detectable"].between(0, 1).all()
    verdict_pairs = pd.read_csv(out / "verdict_pairs.csv")
    assert_allclose(
        verdict_pairs["p_common_fdr"], multipletests(verdict_pairs["p_common"], method="fdr_bh")[1], rtol=1e-12
    )


def test_pythia_compare_states_the_answer_first(pythia_run: tuple[Path, str], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    out, _ = pythia_run
    result = CliRunner().invoke(app, ["compare", str(out), "--out", str(tmp_path / "compare"), "--n-perm", "99"])
    assert result.exit_code == 0, result.output
    verdict = json.loads((tmp_path / "compare" / "verdict.json").read_text())
    assert result.stdout.splitlines()[0] == f"answer: {verdict['answer']}"
    assert sum(line.startswith("answer:") for line in result.stdout.splitlines()) == 1


def test_the_answer_says_once_why_no_model_has_an_interval() -> None:
    # Four models of 6 test sets each (15 pairs): below the 12 test sets the jackknife interval is calibrated for.
    shares = pd.DataFrame(
        {
            "unit": ["olmo2-m", "olmo2-s", "opt-m", "opt-s"],
            "share": [0.73, 0.07, 1 / 3, 0.2],
            "ci_low": np.nan,
            "ci_high": np.nan,
            "ci_level": 0.95,
            "n_testsets": 6,
        }
    )
    answer = answer_sentence(
        shares, {}, pd.DataFrame(), n_resolvable=0, n_pairs=15, r_detectable_median=0.43, threshold=0.3,
        alpha=0.05, adjust="holm",
    )  # fmt: skip
    assert answer.count("no interval") == 1 and "6 test sets, fewer than the 12" in answer
    assert "73% of OOD pairs co-move beyond ID in olmo2-m, 7% in olmo2-s, 33% in opt-m and 20% in opt-s" in answer
    assert "interval above zero" not in answer


def test_resolved_sign_agreement_matches_a_loop_over_every_two_models() -> None:
    """The matrix-product counts against a direct loop (scipy's normal tail for each p), on 5 models x 45 pairs."""
    from itertools import combinations

    from scipy.stats import norm

    from gengen.across.global_share import resolved_sign_agreement

    rng = np.random.default_rng(11)
    names = [f"t{k}" for k in range(10)]
    pairs = list(combinations(names, 2))
    units = [f"m{u}" for u in range(5)]
    estimates = pd.DataFrame(
        [
            (unit, *(pair if rng.random() < 0.5 else pair[::-1]), rng.normal(0, 0.25), 0.01, float("inf"))
            for unit in units
            for pair in pairs
        ],
        columns=["unit", "testset_a", "testset_b", "z", "variance", "df"],
    )
    found = resolved_sign_agreement(estimates, alpha=0.05)
    signs = {}
    for row in estimates.itertuples():
        if 2 * norm.sf(abs(row.z) / np.sqrt(row.variance)) < 0.05:
            signs[(row.unit, frozenset((row.testset_a, row.testset_b)))] = np.sign(row.z)
    for row in found.itertuples():
        both = [key for (unit, key) in signs if unit == row.group_a and (row.group_b, key) in signs]
        agree = sum(signs[(row.group_a, key)] == signs[(row.group_b, key)] for key in both)
        assert (row.n_resolved_both, row.n_resolved_agree) == (len(both), agree)
    assert len(found) == 10 and found["n_resolved_both"].gt(0).all()


def test_null_p_values_are_the_draws_null_above_probability_counts() -> None:
    """The kept draws (what the calibration of docs/calibration.md reads) are the draws the verdict's null
    probability counts: same seed, same models; their rate of p > 0.5 is null_above_probability exactly."""
    from gengen.stats.share import null_above_probability, null_p_values

    fitted = _Fitted([[0.5], [0.3], [], [0.7]], 30)
    control = np.linspace(0.0, 1.0, 30) ** 0.5
    draws = null_p_values(fitted, control, n_draws=5, n_boot=49, seed=8)
    above = null_above_probability(fitted, control, n_draws=5, n_boot=49, seed=8)
    assert draws.shape == (5, 4, 4)
    upper = np.triu_indices(4, 1)
    assert_allclose(np.mean(draws > 0.5, axis=0)[upper], above[upper])


def test_short_runs_with_a_simulated_null_take_the_plain_jackknife() -> None:
    """docs/calibration.md: with a simulated null count, runs shorter than 40 checkpoints get the plain jackknife
    (the corrected variance said "share > 0" in 6.7% of all-null replicates at 26 checkpoints); 40 checkpoints
    and a uniform null count keep the corrected one. Reference: global_share called with each variance."""
    from gengen.stats.share import SHORT_RUN, share_variance

    a, b = _pairs(14)
    names = np.array([f"t{i:02d}" for i in range(14)])
    rng = np.random.default_rng(5)
    z = rng.normal(0.0, 0.25, len(a)) + 0.4 * ((a < 5) & (b < 5))
    null = rng.uniform(0.45, 0.55, len(a))
    p = 2 * scipy_stats.t.sf(np.abs(z / 0.2), 20.0)
    for n, simulated, expected in ((26, True, "jackknife"), (SHORT_RUN, True, "corrected"), (26, False, "corrected")):
        estimates = pd.DataFrame(
            {"unit": "m", "testset_a": names[a], "testset_b": names[b], "n_runs": 1, "z": z, "variance": 0.04,
             "df": 20.0, "p_null_above": null if simulated else np.nan, "n_checkpoints": float(n)}
        )  # fmt: skip
        assert share_variance(n, simulated) == expected
        row = global_share_table(estimates).iloc[0]
        reference = global_share(p, names[a], names[b], null_above=null if simulated else None, variance=expected)
        assert_allclose([row["se"], row["ci_low"], row["ci_high"]], [reference.se, reference.ci_low, reference.ci_high])
        assert ("plain jackknife" in row["method"]) == (expected == "jackknife")
    assert share_variance(float("nan"), True) == "corrected"


def test_with_null_above_carries_each_run_rows_null_probability_and_n() -> None:
    """Reference: an explicit loop over the estimates, each matched to the analysis' run row of its model, run and
    pair; pooled estimates (two runs) and keys met twice get NaN."""
    from gengen.across.global_share import with_null_above
    from gengen.across.heterogeneity import SIEVE

    a, b = _pairs(5)
    names = np.array([f"t{i}" for i in range(5)])
    rng = np.random.default_rng(3)
    runs = pd.DataFrame(
        {"level": "run", "model": np.repeat(["m", "k"], len(a)), "run": "seed=0", "testset_a": np.tile(names[a], 2),
         "testset_b": np.tile(names[b], 2), "p_null_above": rng.uniform(0.4, 0.6, 2 * len(a)),
         "n": np.repeat([26, 41], len(a))}
    )  # fmt: skip
    runs = pd.concat([runs, runs.iloc[[0]]], ignore_index=True)  # m's first pair met twice: ambiguous
    estimates = pd.DataFrame(
        {"model": runs["model"][:-1], "runs": "seed=0", "testset_a": runs["testset_a"][:-1],
         "testset_b": runs["testset_b"][:-1], "n_runs": [1] * (2 * len(a) - 1) + [2], "variance_method": SIEVE}
    )  # fmt: skip
    out = with_null_above(estimates, runs)
    for i, row in estimates.iterrows():
        match = runs[(runs["model"] == row["model"]) & (runs["testset_a"] == row["testset_a"])
                     & (runs["testset_b"] == row["testset_b"])]  # fmt: skip
        if row["n_runs"] == 1 and len(match) == 1:
            assert out.loc[i, "p_null_above"] == match["p_null_above"].iloc[0]
            assert out.loc[i, "n_checkpoints"] == match["n"].iloc[0]
        else:
            assert np.isnan(out.loc[i, "p_null_above"]) and np.isnan(out.loc[i, "n_checkpoints"])
    assert np.isnan(out.loc[0, "p_null_above"]) and np.isnan(out.loc[len(out) - 1, "n_checkpoints"])
