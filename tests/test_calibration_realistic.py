"""The realistic calibration grid of issue 23: the simulator against closed forms, and the contract on a CI-sized grid.

The simulator's checks use closed forms: a count of examples under a fixed threshold set is Binomial(N, p), and two
counts of the same examples at p1 ≤ p2 have the empirical-CDF covariance N p1 (1 − p2); AR(1) noise has lag-1
autocorrelation φ; the alternative's noises correlate at ρ.

The contract (docs/calibration.md, "Realistic learning curves") is asserted on :data:`REALISTIC_QUICK_GRID` with
Monte Carlo-aware bounds: a count of rejections among T testable rows fails only above the 99.9% quantile of
Binomial(T, 0.065), so a default at the contract's edge passes and one that rejects twice as often fails. The
stuck-at-chance null (issue 23: 95-99% false positives before) is asserted separately, together with the proof that
the cell still defeats ppcor's t-test on all rows (so that the simulation has not become easy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from gengen.calibration.learning_curves import (
    CurveCell,
    _ar1,
    _threshold_counts,
    checkpoint_steps,
    curve_table,
    design_partial_corr,
    simulate_curve_runs,
    true_partial_corr,
)
from gengen.calibration.studies import (
    CONTRACT_TYPE1,
    REALISTIC_QUICK_GRID,
    realistic_contract,
    realistic_study,
    realistic_summary,
    realistic_tables,
)
from gengen.errors import GengenError

#: Replicates per hypothesis of the CI-sized study (the whole file: 26 s on 2 shared cores).
REPLICATES = 60


def bound(testable: int, rate: float = CONTRACT_TYPE1, level: float = 0.999) -> float:
    """The largest count of Binomial(testable, rate) that is not improbable (its `level` quantile)."""
    return float(scipy_stats.binom.ppf(level, testable, rate))


# ---------------------------------------------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------------------------------------------


def test_schedules_start_at_step_0_and_follow_their_spacing() -> None:
    log = checkpoint_steps(20, "log", total=100_000)
    np.testing.assert_allclose(log[1:], np.round(np.geomspace(1_000, 100_000, 19)))
    dense = checkpoint_steps(21, "dense-early", total=100_000)
    assert dense[0] == 0 and (dense[1:] <= 15_000).sum() == 10  # half of the evaluations in the first 15%
    even = checkpoint_steps(11, "even", total=100_000)
    np.testing.assert_array_equal(even, np.arange(0, 100_001, 10_000))
    with pytest.raises(GengenError, match="schedule"):
        checkpoint_steps(10, "cosine")


def test_threshold_counts_are_binomial_with_the_empirical_cdf_covariance() -> None:
    """Each count is Binomial(N, p); two counts of the same examples covary as N p1 (1 - p2) (p1 <= p2)."""
    rng = np.random.default_rng(3)
    big_n, p1, p2, rows = 400, 0.6, 0.7, 40_000
    counts = _threshold_counts(rng, np.tile([p2, p1], (rows, 1)), big_n)  # unsorted on purpose
    np.testing.assert_allclose(counts.mean(axis=0), [big_n * p2, big_n * p1], rtol=2e-3)
    np.testing.assert_allclose(counts.var(axis=0), [big_n * p2 * (1 - p2), big_n * p1 * (1 - p1)], rtol=0.04)
    np.testing.assert_allclose(np.cov(counts.T)[0, 1], big_n * p1 * (1 - p2), rtol=0.05)
    # The same examples: the count at the larger p is never below the count at the smaller one.
    assert (counts[:, 0] >= counts[:, 1]).all()


def test_ar1_noise_has_unit_variance_and_lag1_autocorrelation_phi() -> None:
    noise = _ar1(np.random.default_rng(4), 0.9, (200, 2_000))
    assert noise.var() == pytest.approx(1.0, rel=0.05)
    lag1 = np.mean(noise[:, 1:] * noise[:, :-1]) / np.mean(noise * noise)
    assert lag1 == pytest.approx(0.9, abs=0.01)


def test_measured_scores_are_counts_and_step_0_is_chance() -> None:
    cell = CurveCell("base", n=20, n_examples=1000, runs=400)
    steps, counts = simulate_curve_runs(cell, 0.0, np.random.default_rng(5))
    assert steps[0] == 0 and counts.dtype.kind == "i" and counts.min() >= 0 and counts.max() <= 1000
    # Step 0: every test set Binomial(N, 0.5), independently.
    np.testing.assert_allclose(counts[:, 0, :].mean(axis=0), 500, atol=3)
    np.testing.assert_allclose(counts[:, 0, :].std(axis=0), np.sqrt(250), rtol=0.15)
    # The learning curve: ID ends near 0.85, OOD a near 0.5 + 0.6 * 0.35.
    np.testing.assert_allclose(counts[:, -1, :2].mean(axis=0) / 1000, [0.85, 0.71], atol=0.01)
    table = curve_table(cell, [(steps, counts[:2])])
    assert set(table.columns) >= {"model", "run", "step", "testset", "metric", "value", "n_examples"}
    assert np.allclose(table["value"] * 1000, np.round(table["value"] * 1000))  # k / N


def test_the_alternative_correlates_the_noises_at_rho() -> None:
    """With N large the measured residuals of the two test sets correlate at true_partial_corr ≈ ρ."""
    cell = CurveCell("big", n=100, n_examples=30000, phi=0.5, runs=300)
    rng = np.random.default_rng(6)
    steps, counts = simulate_curve_runs(cell, 0.5, rng)
    x = counts[:, 1:, 0] / cell.n_examples
    residuals = [counts[:, 1:, j + 1] / cell.n_examples - (0.5 + b * (x - 0.5)) for j, b in enumerate((0.6, 0.4))]
    r = np.mean([np.corrcoef(a, b)[0, 1] for a, b in zip(*residuals, strict=True)])
    # The closed form: ρ σ² / √((σ² + v_a)(σ² + v_b)), v_j the mean binomial variance p(1 - p)/N of test set j.
    id_true = 0.5 + 0.35 * (1 - np.exp(-steps[1:] / 5_000))
    variances = [np.mean(p * (1 - p)) / 30_000 for p in (0.5 + 0.6 * (id_true - 0.5), 0.5 + 0.4 * (id_true - 0.5))]
    expected = 0.5 * 0.02**2 / np.sqrt((0.02**2 + variances[0]) * (0.02**2 + variances[1]))
    assert true_partial_corr(cell, 0.5) == pytest.approx(expected, rel=1e-9)
    assert r == pytest.approx(true_partial_corr(cell, 0.5), abs=0.03)
    assert true_partial_corr(cell, 0.0) == 0.0


def test_design_partial_corr_is_what_the_runs_carry() -> None:
    """The design's partial correlation (coverage's truth) is the mean of ppcor's r_partial over many runs (up to the
    small-sample bias of r), above the white-noise closed form (the fit on ID absorbs persistent measurement error),
    and zero under the null."""
    from gengen import stats

    cell = CurveCell("base", n=40, n_examples=1000, runs=3000)
    _, counts = simulate_curve_runs(cell, 0.5, np.random.default_rng(8))
    values = counts / 1000
    r = [stats.partial_corr_matrix(run[:, 1:], run[:, :1]).r[0, 1] for run in values]
    design = design_partial_corr(CurveCell("base", n=40, n_examples=1000), 0.5)
    assert np.mean(r) == pytest.approx(design, abs=0.03)
    assert design > true_partial_corr(cell, 0.5) + 0.05
    assert design_partial_corr(cell, 0.0) == 0.0


def test_special_test_sets() -> None:
    rng = np.random.default_rng(7)
    _, stuck = simulate_curve_runs(CurveCell("s", n=20, n_examples=30000, special="stuck", runs=50), 0.0, rng)
    assert np.abs(stuck[:, 1:, 2] - 15000).max() <= 10  # 0.500 ± a few / N after step 0
    assert np.abs(stuck[:, 0, 2] - 15000).std() > 30  # step 0: a guessing model, ± √(N/4) ≈ 87
    _, plateau = simulate_curve_runs(CurveCell("p", n=20, special="plateau", runs=5), 0.0, rng)
    assert (plateau[:, 10:, 2] == plateau[:, [9], 2]).all() and not (plateau[:, 10:, 1] == plateau[:, [9], 1]).all()
    _, duplicated = simulate_curve_runs(CurveCell("d", n=20, special="duplicates", runs=5), 0.0, rng)
    repeats = (np.diff(duplicated, axis=1) == 0).all(axis=2).sum(axis=1)
    assert (repeats == 5).all()  # a quarter of 20 rows repeat the row before them
    with pytest.raises(GengenError, match="special"):
        CurveCell("x", special="spike")


# ---------------------------------------------------------------------------------------------------------------
# The contract on the CI-sized grid
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return realistic_study(REALISTIC_QUICK_GRID, replicates=REPLICATES, n_boot=199, seed=23)


def tally(study: pd.DataFrame, cell: str, method: str, hypothesis: str = "H0") -> pd.Series:
    rows = study[(study["cell"] == cell) & (study["method"] == method) & (study["hypothesis"] == hypothesis)]
    assert len(rows) == 1, (cell, method, hypothesis)
    return rows.iloc[0]


def test_well_specified_null_type1_coverage_and_flags(study: pd.DataFrame) -> None:
    null = tally(study, "log n=20", "default")
    assert null["testable"] >= 0.9 * null["replicates"], "the base cell is testable"
    assert null["reject"] <= bound(int(null["testable"])), f"type-I {null['reject']}/{null['testable']}"
    # Coverage of 0 by the 95% interval: misses are rejections of a consistent interval, bounded the same way.
    assert null["intervals"] - null["covered"] <= bound(int(null["intervals"]), 0.075)
    assert null["flagged"] <= bound(int(null["testable"]), 0.20), f"flags {null['flagged']}/{null['testable']}"


def test_power_is_reported_beside_the_lagged_test_and_the_t_test(study: pd.DataFrame) -> None:
    for method in ("default", "lagged", "t-test"):
        for hypothesis in ("rho=0.3", "rho=0.5"):
            assert tally(study, "log n=20", method, hypothesis)["testable"] > 0
    strong, weak = tally(study, "log n=20", "default", "rho=0.5"), tally(study, "log n=20", "default", "H0")
    # ρ = 0.5 (true partial correlation 0.31) is detected more often than the null is rejected.
    assert strong["reject"] / strong["testable"] > weak["reject"] / weak["testable"]


def test_stuck_at_chance_null_is_not_called_significant(study: pd.DataFrame) -> None:
    """Issue 23: a test set at 0.500 ± a few / N after step 0 against one linear in ID, truly independent.

    The cell must still defeat ppcor's t-test on all rows (the spike at step 0 decides it), and the default must
    not: its rejections among rows reported testable stay within the contract's Monte Carlo bound.
    """
    naive = tally(study, "stuck n=20 N=30000", "t-test")
    assert naive["reject"] >= 0.5 * naive["testable"], "the simulated cell no longer reproduces the failure"
    default = tally(study, "stuck n=20 N=30000", "default")
    assert default["reject"] <= bound(max(int(default["testable"]), 1)), (
        f"the default calls {default['reject']} of {default['testable']} testable stuck-at-chance nulls significant"
    )


def test_pooled_seeds_type1_and_coverage(study: pd.DataFrame) -> None:
    for kind in ("fixed", "random"):
        null = tally(study, "log n=20, 3 seeds", f"pooled {kind}")
        assert null["replicates"] == REPLICATES
        assert null["reject"] <= bound(int(null["testable"])), f"pooled {kind}: {null['reject']}/{null['testable']}"
        assert null["intervals"] - null["covered"] <= bound(int(null["intervals"]), 0.075)


def test_summary_tables_and_contract_read_the_study(study: pd.DataFrame) -> None:
    summary = realistic_summary(study)
    assert list(summary["cell"]) == [cell.label for cell in REALISTIC_QUICK_GRID]
    base = summary.set_index("cell").loc["log n=20"]
    null = tally(study, "log n=20", "default")
    assert base["type1"] == pytest.approx(null["reject"] / null["testable"])
    assert base["flag_if_reject"] == pytest.approx(null["flagged_reject"] / null["reject"]) if null["reject"] else True
    text = realistic_tables(summary)
    assert "| log n=20 |" in text and "Pooled seeds" in text
    contract = realistic_contract(summary)
    assert set(contract["status"]) <= {"ok", "over", "FAIL"}
    assert {"type-I", "pooled fixed type-I", "flags under H0"} <= set(contract["criterion"])


# ---------------------------------------------------------------------------------------------------------------
# Incremental CSV and the CLI
# ---------------------------------------------------------------------------------------------------------------


def test_the_csv_is_written_per_cell_and_a_rerun_resumes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    grid = (CurveCell("tiny", n=11),)
    path = tmp_path / "realistic.csv"
    first = realistic_study(grid, replicates=3, n_boot=99, csv=path)
    on_disk = pd.read_csv(path, keep_default_na=False, na_values=[""])
    assert len(on_disk) == len(first) == 9  # 3 hypotheses x 3 methods
    again = realistic_study(grid, replicates=3, n_boot=99, csv=path)  # nothing left to run
    assert len(again) == 9 and len(pd.read_csv(path)) == 9
    pd.testing.assert_series_equal(again["reject"].astype(int), first["reject"].astype(int), check_names=False)


def test_cli_realistic_needs_grid_and_writes_its_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gengen.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["simulate", "--realistic"])
    assert result.exit_code == 2 and "--realistic" in result.output and "Traceback" not in result.output
    result = runner.invoke(
        app,
        ["simulate", "--grid", "--realistic", "--quick", "--replicates", "2", "--n-boot", "99", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "calibration_realistic.csv").exists() and (tmp_path / "calibration_realistic.md").exists()
    assert "contract of issue 23" in result.output
