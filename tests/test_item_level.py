"""The item-level simulator of issue 34 against closed forms and scipy's numerical integration.

References: scipy.integrate.quad for the logistic-normal and probit-normal integrals and for the moments of a
set's accuracy when item effects persist and churn; the binomial variance; the class-prior set's two values
38/104 and 66/104; the schedules' definitions. Tolerances are stated per test (Monte Carlo checks: four
standard errors of the estimate).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats
from typer.testing import CliRunner

from gengen.calibration.item_level import (
    CLASS_PRIOR_EXAMPLES,
    CLASS_PRIOR_MINORITY,
    ItemCell,
    _counts,
    expected_accuracy,
    item_partial_corr,
    item_table,
    simulate_items,
)
from gengen.calibration.items import ITEMS_QUICK_GRID, items_summary, run_items
from gengen.errors import GengenError


def _normal_integral(f: Callable[[float], float], sd: float) -> float:
    """∫ f(s z) φ(z) dz by adaptive quadrature."""
    value, _ = scipy.integrate.quad(lambda z: f(sd * z) * scipy.stats.norm.pdf(z), -12, 12, epsabs=1e-13)
    return float(value)


@pytest.mark.parametrize("theta", [-3.0, -0.7, 0.0, 1.2, 4.0])
@pytest.mark.parametrize("sd", [0.3, 1.0, 2.5])
def test_expected_accuracy_matches_numerical_integration(theta: float, sd: float) -> None:
    """Logistic: Gauss–Hermite against quad to 1e-8; probit: the closed form against quad to 1e-10."""
    logistic = _normal_integral(lambda v: scipy.special.expit(theta + v), sd)
    probit = _normal_integral(lambda v: scipy.stats.norm.cdf(theta + v), sd)
    assert float(expected_accuracy(theta, sd, "logistic")) == pytest.approx(logistic, abs=1e-8)
    assert float(expected_accuracy(theta, sd, "probit")) == pytest.approx(probit, abs=1e-10)


def test_a_sets_accuracy_has_the_moments_of_persisting_and_churning_item_effects() -> None:
    """At a fixed ability, identical examples with a persistent effect u (sd 0.6) and a churning effect w (sd 0.5,
    redrawn w.p. 0.3): mean q = E F(θ − u − w), Var(acc_t) = q(1 − q)/N, and between consecutive checkpoints
    Cov = [0.7 E F(θ − u − w)² + 0.3 E_u (E_w F(θ − u − w))² − q²]/N (examples independent), all by quad.
    Monte Carlo over 6,000 runs of N = 50: within four standard errors."""
    theta, persist, churn_sd, churn, big_n = 0.8, 0.6, 0.5, 0.3, 50
    cell = ItemCell("moments", n=6, n_examples=big_n, item_sd=0.0, persist_sd=persist, churn_sd=churn_sd, churn=churn)
    total = np.hypot(persist, churn_sd)
    q = _normal_integral(lambda v: scipy.special.expit(theta + v), total)
    same = _normal_integral(lambda v: scipy.special.expit(theta + v) ** 2, total)
    inner = _normal_integral(
        lambda u: _normal_integral(lambda w: scipy.special.expit(theta + u + w), churn_sd) ** 2, persist
    )
    runs = 6000
    counts = _counts(np.random.default_rng(5), cell, np.full((runs, 2), theta), np.zeros(big_n))
    accuracy = counts / big_n
    variance = q * (1 - q) / big_n
    covariance = (1 - churn) * same + churn * inner - q * q
    assert abs(accuracy.mean() - q) < 4 * np.sqrt(variance / (2 * runs))
    sample_var = accuracy[:, 0].var(ddof=1)
    assert abs(sample_var / variance - 1) < 4 * np.sqrt(2 / runs)
    sample_cov = np.cov(accuracy[:, 0], accuracy[:, 1])[0, 1]
    assert abs(sample_cov - covariance / big_n) < 4 * variance / np.sqrt(runs)
    assert covariance > 0.05 * q * (1 - q)  # the effects do persist: consecutive accuracies correlate


def test_without_item_effects_a_count_is_binomial() -> None:
    """item_sd = persist = churn = 0: Binomial(N, F(θ)), checkpoints independent (variance within 4 s.e.)."""
    cell = ItemCell("binomial", n=6, n_examples=300, item_sd=0.0, persist_sd=0.0, churn_sd=0.0)
    theta = np.full((8000, 2), -0.4)
    counts = _counts(np.random.default_rng(2), cell, theta, np.zeros(300))
    p = scipy.special.expit(-0.4)
    assert counts.var(ddof=1, axis=0) / (300 * p * (1 - p)) == pytest.approx([1, 1], abs=4 * np.sqrt(2 / 8000))
    assert abs(np.corrcoef(counts.T)[0, 1]) < 4 / np.sqrt(8000)


def test_the_class_prior_set_takes_its_two_values_and_switches_at_its_rate() -> None:
    """Accuracy exactly 38/104 or 66/104; the class switches between checkpoints w.p. 0.25 (within 4 s.e.)."""
    cell = ItemCell("wsc", n=50, n_examples=100, runs=40, specials=("class-prior",), rhos=(0.0,))
    values = simulate_items(cell, 0.0, np.random.default_rng(3)).accuracy[0, :, :, -1]
    low, high = CLASS_PRIOR_MINORITY / CLASS_PRIOR_EXAMPLES, 1 - CLASS_PRIOR_MINORITY / CLASS_PRIOR_EXAMPLES
    assert set(np.round(values.ravel() * CLASS_PRIOR_EXAMPLES).astype(int)) == {38, 66}
    assert np.allclose(np.minimum(abs(values - low), abs(values - high)), 0)
    switches = (np.diff(values, axis=1) != 0).mean()
    assert abs(switches - 0.25) < 4 * np.sqrt(0.25 * 0.75 / (40 * 49))


def test_the_stuck_set_sits_at_chance_and_the_ood_sets_climb() -> None:
    """Symmetric difficulties and effects: over replicates (each its own examples) the stuck set's mean accuracy
    is 1/2 (within 4 s.e.); ID climbs fast (half its rise in the first tenth of the checkpoints of an even
    schedule) and keeps drifting up."""
    cell = ItemCell("stuck", n=40, n_examples=200, schedule="even", specials=("stuck",), rhos=(0.0,))
    rng = np.random.default_rng(4)
    replicates = np.concatenate([simulate_items(cell, 0.0, rng).accuracy[0] for _ in range(40)])
    stuck = replicates[:, :, 3].mean(axis=1)
    assert abs(stuck.mean() - 0.5) < 4 * stuck.std(ddof=1) / np.sqrt(40)
    ident = replicates[:, :, 0].mean(axis=0)
    assert ident[4] - 0.5 > 0.5 * (ident[-1] - 0.5)
    assert ident[-1] > ident[len(ident) // 2] > ident[4]


@pytest.mark.parametrize("schedule", ["log", "dense-early", "even"])
def test_schedules_have_their_shapes(schedule: str) -> None:
    """Log: constant ratios from T/100 (the first checkpoint after step 0); even: constant gaps; dense-early:
    half the checkpoints in the first 15% of training."""
    steps = simulate_items(ItemCell("s", n=21, schedule=schedule, n_examples=50), 0.0, np.random.default_rng(0)).steps
    assert steps.size == 21 and steps[0] > 0 and np.all(np.diff(steps) > 0) and steps[-1] == 100_000
    if schedule == "log":
        ratios = steps[1:] / steps[:-1]
        np.testing.assert_allclose(ratios, 10 ** (2 / 20), rtol=2e-3)  # rounding of the steps to integers
    elif schedule == "even":
        np.testing.assert_allclose(np.diff(steps), 100_000 / 21, atol=1)
    else:
        assert (steps <= 15_000).sum() == 10


def test_simulation_is_seeded_and_deterministic() -> None:
    cell = ItemCell("seeded", n=12, n_examples=80, runs=2, models=2, specials=("stuck", "class-prior"))
    first = simulate_items(cell, 0.3, np.random.default_rng(9)).accuracy
    again = simulate_items(cell, 0.3, np.random.default_rng(9)).accuracy
    other = simulate_items(cell, 0.3, np.random.default_rng(10)).accuracy
    assert first.shape == (2, 2, 12, 5)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    counts = first[..., :4] * 80  # ID, the main pair and the stuck set: counts out of N
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)


def test_the_simulated_partial_correlation_is_zero_under_the_null_and_grows_with_rho() -> None:
    """Under the null within 4 Monte Carlo s.e. of 0; at ρ = 0.3 < 0.6 below ρ (measurement error attenuates)."""
    cell = ItemCell("truth", n=12, n_examples=200)
    null = item_partial_corr(cell, 0.0, draws=200, seed=1)
    low = item_partial_corr(cell, 0.3, draws=200, seed=1)
    high = item_partial_corr(cell, 0.6, draws=200, seed=1)
    assert abs(null.value) < 4 * null.se and null.se < 0.03
    assert 0 < low.value < 0.3 and low.value < high.value < 0.6


def test_a_latent_id_null_leaves_a_partial_correlation_that_shrinks_with_ids_measurement_error() -> None:
    """OOD abilities independent given the *latent* ID ability: the observed accuracies share ID's measurement
    error, so their partial correlation given the measured ID is positive (beyond 4 Monte Carlo s.e.) and falls
    as N grows (the error's variance falls as 1/N), while the measured-ID null stays at 0."""
    small = item_partial_corr(ItemCell("latent", n=12, n_examples=200, id_dependence="latent"), 0.0, draws=200)
    large = item_partial_corr(ItemCell("latent", n=12, n_examples=3000, id_dependence="latent"), 0.0, draws=200)
    assert small.value > 4 * small.se and large.value > 0
    assert small.value - large.value > 4 * np.hypot(small.se, large.se)


def test_the_probit_link_is_simulated_through_the_normal_cdf() -> None:
    """Identical examples, no effects: Binomial(N, Φ(θ)) — the mean count within 4 s.e."""
    cell = ItemCell("probit", n=6, n_examples=200, link="probit", item_sd=0.0, persist_sd=0.0, churn_sd=0.0)
    counts = _counts(np.random.default_rng(6), cell, np.full((5000, 1), 0.5), np.zeros(200))
    p = scipy.stats.norm.cdf(0.5)
    assert abs(counts.mean() / 200 - p) < 4 * np.sqrt(p * (1 - p) / (200 * 5000))


def test_bad_cells_are_refused_naming_the_field() -> None:
    with pytest.raises(GengenError, match="link"):
        ItemCell("bad", link="cauchy")
    with pytest.raises(GengenError, match="churn"):
        ItemCell("bad", churn=1.5)
    with pytest.raises(GengenError, match="specials"):
        ItemCell("bad", specials=("hans",))
    with pytest.raises(GengenError, match="id_dependence"):
        ItemCell("bad", id_dependence="true")
    with pytest.raises(GengenError, match="rho"):
        simulate_items(ItemCell("ok", n=8, n_examples=20), 1.0, np.random.default_rng(0))


def test_the_ci_sized_study_runs_the_default_on_item_level_tables() -> None:
    """The simulator's sanity through gengen.analyse (not calibration): every row is counted once, the
    class-prior set (two values) is always reported untestable, the main pair mostly testable."""
    cell = ITEMS_QUICK_GRID[0]
    table = run_items((cell,), replicates=6, n_boot=99, seed=1)
    summary = items_summary(table).set_index("rows")
    assert int(summary.loc["all pairs", "replicates"]) == 6 * 6  # 4 OOD sets: 6 pairs per run
    assert summary.loc["with class_prior", "untestable"] == 1.0
    assert summary.loc["main pair", "untestable"] <= 0.5
    tidy = item_table(cell, [simulate_items(cell, 0.0, np.random.default_rng(0))])
    assert set(tidy.loc[tidy.testset == "class_prior", "n_examples"]) == {CLASS_PRIOR_EXAMPLES}


def test_the_cli_runs_the_items_study(tmp_path: Path) -> None:
    from gengen.cli import app

    result = CliRunner().invoke(
        app, ["simulate", "--study", "items", "--quick", "--replicates", "2", "--n-boot", "99", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "calibration_items.csv").exists() and "main pair" in result.output
