"""``gengen plan --power``: the power model's closed-form parts against scipy and Monte Carlo, its prediction
against ``gengen simulate``'s learning curves analysed by ``gengen.analyse``, and the command's exits."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from gengen.errors import ConfigError
from gengen.study.config import load_config
from gengen.study.power import (
    EVALUATION_EXPONENT,
    Design,
    PowerInputs,
    assumed_inputs,
    design_steps,
    effective_n,
    format_power_plan,
    global_power,
    information_per_run,
    pair_power,
    pilot_inputs,
    plan_power,
    predict,
    reliability,
    simulated_power,
)

STUDIES = Path(__file__).resolve().parents[1] / "studies"


def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from gengen.cli import app

    return CliRunner().invoke(app, list(args))


def test_pair_power_matches_pearson_test_on_bivariate_normals() -> None:
    # Fisher z with I = n - 3 against scipy's exact Pearson test on independent draws: the approximation and
    # the Monte Carlo (s.e. <= 0.008 at 4,000 draws) together stay within 0.03.
    rng = np.random.default_rng(1)
    n, rho, draws = 30, 0.4, 4000
    cov = [[1.0, rho], [rho, 1.0]]
    hits = 0
    for _ in range(draws):
        x = rng.multivariate_normal([0.0, 0.0], cov, size=n)
        hits += stats.pearsonr(x[:, 0], x[:, 1]).pvalue < 0.05
    assert abs(pair_power(rho, n - 3, 0.05) - hits / draws) < 0.03
    assert pair_power(0.0, 50.0, 0.01) == pytest.approx(0.01, abs=1e-12)
    # Student's t reference: exactly the t test's power when delta = 0.
    assert pair_power(0.0, 10.0, 0.05, df=5) == pytest.approx(2 * stats.t.sf(stats.t.ppf(0.975, 5), 1e9), abs=1e-3)


def test_effective_n_is_bartletts_variance_of_r_for_ar1_series() -> None:
    # Var(r) of two independent AR(1) series vs 1/n_eff; 3,000 pairs of length 400: within 10%.
    rng = np.random.default_rng(2)
    phi, n, pairs = 0.6, 400, 3000
    shocks = rng.standard_normal((2, pairs, n))
    series = np.empty_like(shocks)
    series[:, :, 0] = shocks[:, :, 0] / math.sqrt(1 - phi**2)
    for t in range(1, n):
        series[:, :, t] = phi * series[:, :, t - 1] + shocks[:, :, t]
    a = series[0] - series[0].mean(axis=1, keepdims=True)
    b = series[1] - series[1].mean(axis=1, keepdims=True)
    r = (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    assert np.var(r) == pytest.approx(1 / effective_n(n, phi, phi), rel=0.10)
    assert effective_n(40, 0.0, 0.9) == 40.0


def test_global_power_simulates_the_verdicts_statistics() -> None:
    from gengen.stats.share import MIN_TESTSETS_INTERVAL
    from gengen.study.power_global import clique_sizes, predicted_global_power

    # Cliques of co-moving test sets: their within-clique pairs, counted by hand.
    assert clique_sizes(12, 0.1) == (4,)  # 6 of 66 pairs
    assert clique_sizes(20, 0.3) == (8, 8)  # 56 of 190
    assert clique_sizes(20, 0.1) == (5, 5)  # 20 of 190
    # Too few test sets for the verdict's interval: the global answer is never "above 0".
    assert global_power(0.6, 40.0, seeds=3, testsets=MIN_TESTSETS_INTERVAL - 1, share=0.3) == 0.0
    # All pairs null: the interval's lower end above 0 is a false "share > 0", which the verdict's interval keeps
    # at or below 2.5% one-sided; 300 replicates give a Monte Carlo s.e. of 0.009 there, so 0.06 is > 3 s.e. above.
    null = predicted_global_power(0.0, 10.0, seeds=1, testsets=12, share=0.3, replicates=300, seed=1)
    assert null.power <= 0.06
    # 30% of pairs strongly co-moving (two cliques of 8 of 20 test sets): every co-moving pair is found, so Storey's
    # share is the planted 56/190 less the null pairs' excess below lambda (mean 0), within 0.05.
    strong = predicted_global_power(0.9, 30.0, seeds=1, testsets=20, share=0.3, replicates=100, seed=1)
    assert strong.pair_power == 1.0 and abs(strong.mean_share - 56 / 190) < 0.05


def test_simulated_statistics_have_the_information_asked() -> None:
    # The per-run statistic of the planner's simulation: artanh r of white series of length I + 3 has variance
    # 1/I (Fisher), the closed form the power model's information means.
    rng = np.random.default_rng(2)
    information = 12.0
    x = rng.standard_normal((20000, 2, int(information) + 3))
    x -= x.mean(axis=2, keepdims=True)
    r = (x[:, 0] * x[:, 1]).sum(axis=1) / np.sqrt((x[:, 0] ** 2).sum(axis=1) * (x[:, 1] ** 2).sum(axis=1))
    assert np.var(np.arctanh(r)) * information == pytest.approx(1.0, abs=0.03)


def _even_pilot(*, phi: float, accuracy: float, information: float) -> PowerInputs:
    """What the even-spaced pilot of docs/power.md measures (20 models of 3 seeds, n = 20, N = 1,000, 12 sets)."""
    return PowerInputs(
        n=20,
        phi=phi,
        noise_sd=0.04,
        accuracy=accuracy,
        n_examples=1000,
        pairs=66,
        testsets=12,
        runs=3,
        information=information,
        measured_rho=True,
    )


@pytest.mark.slow
def test_predicted_global_power_matches_the_pipeline() -> None:
    """CI-sized version of docs/power.md's global table (design G2): one seed, 40 even checkpoints, N = 1,000,
    12 OOD test sets, 30% of pairs co-moving at noise rho 0.5; the prediction from the pilot measured there
    (log and even pilots: 20 models of 3 seeds, n = 20) against ``gengen.analyse``'s default and the verdict's
    global share on 150 simulated models. Tolerance 0.05 plus twice the Monte Carlo s.e. of the two."""
    from gengen.calibration.learning_curves import CurveCell, design_partial_corr
    from gengen.study.power import _pair_prediction
    from gengen.study.power_global import pipeline_power, predicted_global_power

    warnings.simplefilter("ignore")
    pilot = _even_pilot(phi=0.568, accuracy=0.665, information=5.163)  # the even pilot of docs/power.md (old pipeline)
    rho = design_partial_corr(CurveCell("pilot", n=20, phi=0.9, schedule="even", n_examples=1000), 0.5)
    _, observed, information = _pair_prediction(pilot, Design(1, 40, 1000, 12), rho, 0.05)
    predicted = predicted_global_power(observed, information, seeds=1, testsets=12, share=0.3, replicates=400)
    simulated = pipeline_power(
        seeds=1,
        evaluations=40,
        n_examples=1000,
        testsets=12,
        rho=0.5,
        share=0.3,
        replicates=150,
        schedule="even",
        seed=3,
    )
    tolerance = 0.05 + 2 * math.hypot(predicted.mc_se, simulated.mc_se)
    assert abs(predicted.power - simulated.power) <= tolerance, (predicted, simulated)


@pytest.mark.slow
def test_predicted_pair_from_the_simulation_matches_the_pipeline() -> None:
    """CI-sized version of docs/power.md's design G5 (3 seeds, 20 even checkpoints, N = 1,000, 12 OOD test sets,
    a clique of 10 co-moving at noise rho 0.7, 70% of pairs): with 12 or more test sets ``predict`` takes the chosen
    pair's power from the statistics simulation (Holm among the pairs, random effects), which the pipeline's Holm
    call on 150 simulated models must match within 0.05 plus twice the combined Monte Carlo s.e., as must the
    global answer. The closed form's alpha/66 (0.12 here) is far below what Holm's step-down finds."""
    from gengen.calibration.learning_curves import CurveCell, design_partial_corr
    from gengen.study.power import _pair_prediction
    from gengen.study.power_global import PLANNER_REPLICATES, pipeline_power

    warnings.simplefilter("ignore")
    # the even pilot of docs/power.md (benches/power_pipeline.py, pilot seed 7)
    pilot = _even_pilot(phi=0.566, accuracy=0.668, information=4.653)
    design = Design(3, 20, 1000, 12)
    rho = design_partial_corr(CurveCell("pilot", n=20, phi=0.9, schedule="even", n_examples=1000), 0.7)
    pair, overall, _ = predict(pilot, design, rho, share=0.7)
    closed = _pair_prediction(pilot, design, rho, 0.05)[0]
    simulated = pipeline_power(
        seeds=3, evaluations=20, n_examples=1000, testsets=12, rho=0.7, share=0.7, replicates=150, schedule="even",
        seed=3,
    )  # fmt: skip
    pair_se = math.hypot(
        math.sqrt(pair * (1 - pair) / PLANNER_REPLICATES),
        math.sqrt(simulated.pair_power * (1 - simulated.pair_power) / simulated.replicates),
    )
    global_se = math.hypot(math.sqrt(overall * (1 - overall) / PLANNER_REPLICATES), simulated.mc_se)
    assert abs(pair - simulated.pair_power) <= 0.05 + 2 * pair_se, (pair, closed, simulated)
    assert abs(overall - simulated.power) <= 0.05 + 2 * global_se, (overall, simulated)
    assert closed < pair - 0.1  # Holm's later steps are more lenient than alpha/m when most pairs co-move


def test_reliability_and_steps() -> None:
    assert reliability(0.02, 0.5, 625) == pytest.approx(0.5)
    assert reliability(0.04, 0.7, 10**9) == pytest.approx(1.0, abs=1e-6)
    steps = design_steps(10_000, 21)
    assert steps[0] == 0 and steps[-1] == 10_000 and len(steps) == 21
    early = [s for s in steps if 0 < s <= 1500]
    assert len(early) == 10  # half of the evaluations through the rise (15% of training)


@pytest.mark.slow
def test_predicted_power_matches_gengen_simulate() -> None:
    """The contract of issue 33: a pilot (3 seeds, 20 dense-early checkpoints, N = 1,000) measured by
    ``gengen.analyse``; the design it recommends for 90% power at the pilot's ρ, simulated with enough
    replicates for a Monte Carlo s.e. <= 0.02, finds the pair within ±0.05 of the prediction."""
    import gengen
    from gengen.calibration.learning_curves import CurveCell, curve_table, design_partial_corr
    from gengen.calibration.simulate import simulate

    warnings.simplefilter("ignore")
    noise_rho = 0.6
    cell = CurveCell("pilot", n=20, schedule="dense-early", n_examples=1000, runs=3)
    rng = np.random.default_rng(7)
    group = [simulate(cell, noise_rho, rng) for _ in range(20)]
    pilot = gengen.analyse(curve_table(cell, group), id_testset="id", n_boot=299, seed=1)
    inputs = pilot_inputs(pilot)
    rho = design_partial_corr(cell, noise_rho)  # the partial correlation the pilot's design carries
    seeds = next(s for s in range(1, 30) if predict(inputs, Design(s, 20, 1000, 2), rho)[0] >= 0.9)
    predicted = predict(inputs, Design(seeds, 20, 1000, 2), rho)[0]
    # Enough replicates for s.e. <= 0.02 anywhere within the tolerance of the prediction.
    worst = max(p * (1 - p) for p in np.clip([predicted - 0.05, predicted, predicted + 0.05], 0, 1))
    replicates = math.ceil(worst / 0.02**2)
    power, se, _ = simulated_power(Design(seeds, 20, 1000, 2), noise_rho, replicates=replicates, seed=11)
    assert se <= 0.02, (seeds, predicted, power, se)
    assert abs(power - predicted) <= 0.05, (seeds, predicted, power, se)


def test_information_grows_with_the_inputs_evaluation_exponent() -> None:
    # I(n) = I_ref (n / n_ref)^e, capped at Fisher's n - 3 - k of independent checkpoints (k = 1).
    base = dict(n=20, phi=0.2, noise_sd=0.04, accuracy=0.6, n_examples=1000, pairs=66, testsets=12, runs=3)
    assumed = PowerInputs(**base, information=7.0)
    assert assumed.evaluation_exponent == EVALUATION_EXPONENT == 0.5
    assert information_per_run(assumed, 40) == pytest.approx(7.0 * math.sqrt(2.0))
    assert information_per_run(assumed, 20) == pytest.approx(7.0)
    linear = PowerInputs(**base, information=7.0, evaluation_exponent=1.0)
    assert information_per_run(linear, 40) == pytest.approx(14.0)
    assert information_per_run(linear, 10) == pytest.approx(3.5)
    assert information_per_run(PowerInputs(**base, information=19.0, evaluation_exponent=1.0), 40) == 36.0
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="evaluation_exponent"):
            PowerInputs(**base, evaluation_exponent=bad)


def test_plan_power_recommends_within_budget() -> None:
    config = load_config(STUDIES / "paper-mnli-full.toml")
    inputs = assumed_inputs(config)
    plan = plan_power(config, inputs, rho=0.6, share=0.3, budget=10_000)
    current = plan.table[plan.table["label"] == "current"].iloc[0]
    # 7 OOD test sets: too few for the verdict's interval, so the current design cannot answer globally.
    assert current["power_global"] == 0.0
    assert current["power_pair"] == pytest.approx(
        predict(inputs, Design(3, int(current["evaluations"]), int(current["n_examples"]), 7), 0.6)[0]
    )
    # The cheapest-first search stops after its simulation limit here, but the most powerful design (20 seeds,
    # 40 test sets, ~7,300 GPU-hours) is simulated at 1.00 / 0.99: a design within the budget that meets both
    # targets is known, so the plan recommends one instead of saying that none reaches 80%.
    assert plan.recommended is not None
    best = plan.table.loc[plan.recommended]
    assert best["power_pair"] >= 0.8 and best["power_global"] >= 0.8 and best["gpu_hours"] <= 10_000
    assert best["testsets"] >= 12 and plan.added_testsets == best["testsets"] - 7
    shown = plan.table[(plan.table["power_pair"] >= 0.8) & (plan.table["power_global"] >= 0.8)]
    assert (shown["gpu_hours"] >= best["gpu_hours"]).all()
    assert "no candidate reaches" not in format_power_plan(plan, STUDIES / "paper-mnli-full.toml")
    tiny = plan_power(config, inputs, rho=0.3, budget=1.0)
    assert tiny.recommended is None and tiny.table["label"].iloc[-1] == "most power"


def test_plan_power_cli() -> None:
    study = str(STUDIES / "paper-mnli-full.toml")
    result = cli("plan", study, "--power", "--rho", "0.3", "--pair", "snli,hans", "--budget", "10000")
    assert result.exit_code == 0, result.output
    assert "pair snli,hans" in result.output and "the global answer's interval needs 12" in result.output
    assert "growing as n^0.5 at other numbers of evaluations (assumed" in result.output
    for bad, named in (
        (("--pair", "snli"), "--pair"),
        (("--pair", "snli,nope"), "--pair"),
        (("--rho", "1.5"), "--rho"),
    ):
        result = cli("plan", study, "--power", *bad)
        assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output
    result = cli("plan", study, "--power", "--pilot", str(STUDIES))
    assert result.exit_code == 2 and "gengen analyse" in result.output


def test_pilot_folder_feeds_the_plan(tmp_path: Path) -> None:
    import gengen
    from gengen.calibration.learning_curves import CurveCell, curve_table
    from gengen.calibration.simulate import simulate

    cell = CurveCell("pilot", n=20, schedule="dense-early", n_examples=1000, runs=2)
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = gengen.analyse(curve_table(cell, [simulate(cell, 0.5, rng) for _ in range(3)]), id_testset="id")
    folder = tmp_path / "pilot"
    analysis.to_dir(folder)
    inputs = pilot_inputs(folder)
    runs = analysis.pairs[analysis.pairs["level"] == "run"]
    assert inputs.n == 20 and inputs.runs == 2 and inputs.n_examples == 1000 and inputs.measured_rho
    assert inputs.information == pytest.approx(float(np.median(1 / runs["se_z"].to_numpy(float) ** 2)))
    study = str(STUDIES / "paper-mnli-full.toml")
    result = cli("plan", study, "--power", "--pilot", str(folder), "--rho", "0.4")
    assert result.exit_code == 0, result.output
    assert f"from pilot {folder}" in result.output
    result = cli("plan", study, "--power", "--pilot", str(folder), "--pair", "ood_a,nope")
    assert result.exit_code == 2 and "--pair" in result.output and "Traceback" not in result.output


def test_examples_from_an_accuracys_stderr() -> None:
    import pandas as pd

    from gengen.study.power import _examples

    # lm-eval's stderr of an accuracy on N examples: sqrt(p (1 - p) / (N - 1)).
    scores = pd.DataFrame(
        {
            "value": [0.3, 0.6, 0.5],
            "stderr": [math.sqrt(0.21 / 199), math.sqrt(0.24 / 999), np.nan],
            "n_examples": pd.array([pd.NA, pd.NA, 50], dtype="Int64"),
        }
    )
    assert _examples(scores).tolist() == [200.0, 1000.0, 50.0]


def test_few_shot_replicates_and_short_runs() -> None:
    config = load_config(STUDIES / "paper-mnli-fewshot.toml")
    inputs = assumed_inputs(config)
    assert inputs.runs == len(config.training.seeds) * len(config.data.data_seeds)
    plan = plan_power(config, inputs, rho=0.3, models=["opt-2.7b"])
    whole = plan_power(config, inputs, rho=0.3)
    current = plan.table[plan.table["label"] == "current"].iloc[0]
    assert current["gpu_hours"] < whole.table[whole.table["label"] == "current"].iloc[0]["gpu_hours"]
    # Every evaluation count in the table is one the run can hold: design_steps gives that many steps.
    from gengen.study.power import _total_steps

    total = _total_steps(config)
    for count in plan.table["evaluations"]:
        assert count == config_evaluations(config) or any(
            len(design_steps(total, n, 0.15)) == count for n in (20, 40, 60, 100)
        )


def config_evaluations(config: Any) -> int:
    from gengen.study.power import current_design

    return current_design(config).evaluations
