"""The simulator, the autocorrelation-aware tests and a reduced calibration study (issue 9).

References are independent: numpy least squares and scipy's t distribution for the lagged and prewhitened
tests, sample moments for the simulator. The calibration check runs 2,000 replicates per cell (about 2 s) and
asserts the type-I bounds of docs/calibration.md widened by three Monte Carlo standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from typer.testing import CliRunner

from gengen import _core

pytestmark = pytest.mark.skipif(
    not hasattr(_core, "calibration_cell"),
    reason="gengen._core was built without the simulate bindings (rust/src/py/simulate.rs)",
)

COLUMNS = [
    "study",
    "model",
    "family",
    "size",
    "run",
    "seed",
    "shots",
    "step",
    "tokens",
    "epoch",
    "testset",
    "metric",
    "value",
    "n_examples",
]


def _wide(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.pivot_table(index=["run", "step"], columns="testset", values="value").sort_index()


def _residuals(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    x = np.column_stack([np.ones(len(y)), design])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return y - x @ beta


def _lag1(x: np.ndarray) -> float:
    c = x - x.mean()
    return float(c[1:] @ c[:-1] / (c @ c))


# ----------------------------------------------------------------------------------------------------------
# Simulator
# ----------------------------------------------------------------------------------------------------------


def test_trajectories_have_the_store_format() -> None:
    from gengen.calibration.simulate import simulate_trajectories

    scores = simulate_trajectories(n=12, n_testsets=3, n_runs=2, seed=4)
    assert list(scores.columns) == COLUMNS
    assert len(scores) == 2 * 12 * 4
    assert set(scores.testset) == {"id", "ood_1", "ood_2", "ood_3"}
    assert set(scores.run) == {"seed=0", "seed=1"}
    assert scores.step.dtype == np.int64 and scores.seed.dtype == "Int64"
    assert not scores.duplicated(["model", "run", "step", "testset", "metric"]).any()
    pd.testing.assert_frame_equal(scores, simulate_trajectories(n=12, n_testsets=3, n_runs=2, seed=4))
    assert not simulate_trajectories(n=12, seed=5).value.equals(simulate_trajectories(n=12, seed=4).value)


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_ar1_noise_has_lag1_autocorrelation_phi(phi: float) -> None:
    from gengen.calibration.simulate import simulate_trajectories

    n = 20_000
    wide = _wide(simulate_trajectories(n=n, phi=phi, seed=1))
    noise = _residuals(wide["ood_1"].to_numpy(), wide["id"].to_numpy())
    # sd of the lag-1 estimate ≈ √((1 − φ²)/n) ≤ 0.0071; the regression on ID adds O(1/n)
    assert abs(_lag1(noise) - phi) < 0.03


def test_random_walk_differences_are_white() -> None:
    from gengen.calibration.simulate import simulate_trajectories

    wide = _wide(simulate_trajectories(n=10_000, noise="rw", seed=2))
    ood = wide["ood_1"].to_numpy() - 0.2 - 0.3 * (wide["id"].to_numpy() - 0.3) / 0.5
    assert abs(_lag1(np.diff(ood))) < 0.05
    assert _lag1(ood) > 0.95


def test_shared_component_sets_the_noise_correlation() -> None:
    from gengen.calibration.simulate import simulate_trajectories

    wide = _wide(simulate_trajectories(n=20_000, phi=0.0, shared=0.3, seed=3))
    a = _residuals(wide["ood_1"].to_numpy(), wide["id"].to_numpy())
    b = _residuals(wide["ood_2"].to_numpy(), wide["id"].to_numpy())
    # sd of r ≈ (1 − ρ²)/√n = 0.0064
    assert abs(np.corrcoef(a, b)[0, 1] - 0.3) < 0.03


def test_bad_designs_are_named() -> None:
    from gengen.calibration.simulate import simulate_trajectories
    from gengen.errors import GengenError

    with pytest.raises(GengenError, match="phi"):
        simulate_trajectories(phi=1.0)
    with pytest.raises(GengenError, match="noise"):
        simulate_trajectories(noise="garch")
    with pytest.raises(GengenError, match="shape"):
        simulate_trajectories(shape="cubic")
    with pytest.raises(GengenError, match="shared"):
        simulate_trajectories(shared=1.5)


# ----------------------------------------------------------------------------------------------------------
# The tests themselves, against numpy/scipy
# ----------------------------------------------------------------------------------------------------------


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e = np.empty(n)
    e[0] = rng.normal()
    for t in range(1, n):
        e[t] = phi * e[t - 1] + math.sqrt(1 - phi * phi) * rng.normal()
    return e


def test_lagged_test_matches_least_squares_and_scipy() -> None:
    from gengen.stats.lagged import lagged_partial_corr_matrix

    rng = np.random.default_rng(7)
    n = 45
    z = np.linspace(0.3, 0.8, n) + rng.normal(0, 0.01, n)
    scores = np.column_stack([2 * z + 0.05 * _ar1(rng, n, 0.8) for _ in range(3)])
    result = lagged_partial_corr_matrix(pd.DataFrame(scores, columns=["a", "b", "c"]), z)
    innovations = [_residuals(scores[1:, j], np.column_stack([scores[:-1, j], z[1:], z[:-1]])) for j in range(3)]
    r = np.corrcoef(innovations[0], innovations[2])[0, 1]
    df = (n - 1) - 2 - 3
    t = r * math.sqrt(df / (1 - r * r))
    assert (result.df.to_numpy()[~np.eye(3, dtype=bool)] == df).all() and list(result.control_df) == [3, 3, 3]
    np.testing.assert_allclose(result.r_innovation.loc["a", "c"], r, rtol=1e-10)
    np.testing.assert_allclose(result.p_value.loc["c", "a"], 2 * scipy.stats.t.sf(abs(t), df), rtol=1e-8)
    ordinary = [_residuals(scores[:, j], z) for j in range(3)]
    np.testing.assert_allclose(result.r.loc["a", "b"], np.corrcoef(ordinary[0], ordinary[1])[0, 1], rtol=1e-10)
    np.testing.assert_allclose(result.lag1[1], _lag1(ordinary[1]), rtol=1e-10)
    assert result.inference == "lagged" and result.fit == "linear"


def test_lagged_gam_removes_a_nonlinear_link() -> None:
    from gengen.stats.lagged import lagged_partial_corr_matrix

    rng = np.random.default_rng(9)
    n = 60
    z = 1 - np.exp(-np.arange(n) / 10) + rng.normal(0, 0.01, n)
    scores = np.column_stack([np.sin(5 * z) + 0.05 * _ar1(rng, n, 0.5) for _ in range(2)])
    gam = lagged_partial_corr_matrix(scores, z, fit="gam")
    linear = lagged_partial_corr_matrix(scores, z)
    # the shared sin(5z) leftover makes the linear control see a correlation the GAM does not
    assert abs(linear.r_innovation[0, 1]) > abs(gam.r_innovation[0, 1])
    assert (gam.control_df >= 3 - 1e-6).all() and gam.df[0, 1] == pytest.approx(n - 3 - gam.control_df.mean())


def test_prewhitened_test_matches_numpy_and_scipy() -> None:
    from gengen.stats.lagged import prewhitened_partial_corr_matrix

    rng = np.random.default_rng(8)
    n = 60
    z = np.linspace(0.3, 0.8, n)
    scores = np.column_stack([z + 0.05 * _ar1(rng, n, 0.6) for _ in range(2)])
    result = prewhitened_partial_corr_matrix(scores, z)
    filtered = []
    for j in range(2):
        e = _residuals(scores[:, j], z)
        r1 = _lag1(e)
        phi = min(1.0, max(-1.0, r1 + (1 + 3 * r1 + 2) / n))
        np.testing.assert_allclose(result.phi[j], phi, rtol=1e-10)
        filtered.append(e[1:] - phi * e[:-1])
    r = np.corrcoef(*filtered)[0, 1]
    df = n - 1 - 2 - 1
    t = r * math.sqrt(df / (1 - r * r))
    np.testing.assert_allclose(result.p_value[0, 1], 2 * scipy.stats.t.sf(abs(t), df), rtol=1e-8)
    r_naive = np.corrcoef(*[_residuals(scores[:, j], z) for j in range(2)])[0, 1]
    t_naive = r_naive * math.sqrt((n - 3) / (1 - r_naive**2))  # ppcor: df = n − 2 − k
    np.testing.assert_allclose(result.naive_p_value[0, 1], 2 * scipy.stats.t.sf(abs(t_naive), n - 3), rtol=1e-8)


def test_autocorrelation_warning() -> None:
    from gengen.stats.autocorr import AUTOCORR_THRESHOLD, autocorrelation_warning

    # One threshold, the one docs/calibration.md gives, and one piece of advice: the calibrated default.
    assert AUTOCORR_THRESHOLD == 0.25
    message = autocorrelation_warning("run", np.array([0.3, 0.4]), ["t-test"])
    assert message is not None and "'sieve'" in message and "block" not in message.split("sieve")[0]
    assert autocorrelation_warning("run", np.array([0.9, 0.8]), []) is None
    assert autocorrelation_warning("run", np.array([0.1, 0.2]), ["t-test"]) is None


# ----------------------------------------------------------------------------------------------------------
# Reduced calibration study
# ----------------------------------------------------------------------------------------------------------

REPLICATES = 2000


@pytest.fixture(scope="module")
def reduced_study() -> pd.DataFrame:
    from gengen.calibration.simulate import Cell
    from gengen.calibration.studies import calibration_study

    cells = [Cell(f"ar1({phi:g})", coef_a=(phi,), rhos=(0.0,), replicates=REPLICATES) for phi in (0.0, 0.5, 0.9)]
    return calibration_study(cells, measure="methods", seed=11)


def test_lagged_test_keeps_type_one_error_in_bounds(reduced_study: pd.DataFrame) -> None:
    from gengen.calibration.studies import LAGGED_METHOD

    tolerance = 3 * math.sqrt(0.05 * 0.95 / REPLICATES)  # three Monte Carlo standard errors at the nominal rate
    default = reduced_study[reduced_study.method == LAGGED_METHOD]
    assert len(default) == 3 and (default.replicates == REPLICATES).all()
    for phi, rate in zip(default.phi, default.reject_05, strict=True):
        assert 0.035 - tolerance <= rate <= 0.065 + tolerance, (phi, rate)
    for rate in default.reject_01:
        assert rate <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / REPLICATES)


def test_naive_t_test_is_anticonservative_at_phi_09(reduced_study: pd.DataFrame) -> None:
    naive = reduced_study[(reduced_study.method == "t-test") & (reduced_study.phi == 0.9)].reject_05.iloc[0]
    assert naive > 0.065 + 3 * math.sqrt(0.065 * 0.935 / REPLICATES)
    white = reduced_study[(reduced_study.method == "t-test") & (reduced_study.phi == 0.0)].reject_05.iloc[0]
    assert abs(white - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / REPLICATES)


def test_study_is_reproducible_and_has_standard_errors(reduced_study: pd.DataFrame) -> None:
    from gengen.calibration.simulate import Cell
    from gengen.calibration.studies import calibration_study

    cell = [Cell("ar1(0.9)", n=50, coef_a=(0.9,), rhos=(0.0,), replicates=REPLICATES, n_boot=0)]
    again = calibration_study(cell, seed=11)
    np.testing.assert_allclose(
        reduced_study.reject_05_se,
        np.sqrt(reduced_study.reject_05 * (1 - reduced_study.reject_05) / reduced_study.replicates),
    )
    pd.testing.assert_frame_equal(again, calibration_study(cell, seed=11))


def test_cli_quick_prints_the_summary_last(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import gengen.calibration.studies as calibration
    from gengen.calibration.simulate import Cell
    from gengen.cli import app

    small = calibration.StudyDesign(
        "test",
        tuple(
            Cell(f"ar1({phi:g})", coef_a=(phi,), rhos=(0.0,), replicates=300, n_perm=49, n_boot=49)
            for phi in (0.0, 0.9)
        ),
    )
    monkeypatch.setattr(calibration, "QUICK_DESIGN", small)
    result = CliRunner().invoke(app, ["simulate", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("lagged type-I at .05 (phi=0.9, n=50): ")
    assert "; naive t-test: " in last
    assert (tmp_path / "calibration.csv").exists() and (tmp_path / "calibration_type1.png").exists()


# ----------------------------------------------------------------------------------------------------------
# One cell type, one simulator, one study function
# ----------------------------------------------------------------------------------------------------------


def test_one_simulator_draws_both_processes_from_the_same_streams() -> None:
    from gengen.calibration.learning_curves import CurveCell, simulate_curve_runs
    from gengen.calibration.simulate import Cell, simulate, simulate_pair_runs
    from gengen.calibration.studies import GridCell

    textbook = GridCell("ar1(0.5), 2 seeds", n=25, coef_a=(0.5,), runs=2)
    curves = CurveCell("log n=11", n=11, runs=2)
    assert isinstance(textbook, Cell) and isinstance(curves, Cell)
    assert (textbook.process, textbook.rhos, curves.process, curves.rhos) == (
        "textbook",
        (0.0, 0.3),
        "curves",
        (0.0, 0.3, 0.5),
    )
    steps, id_scores, scores = simulate(textbook, 0.3, np.random.default_rng(3))
    reference, reference_id = simulate_pair_runs(textbook, 0.3, np.random.default_rng(3))
    np.testing.assert_array_equal(scores, reference)
    np.testing.assert_array_equal(id_scores, reference_id)
    np.testing.assert_array_equal(steps, 100 * np.arange(1, 26))
    steps, id_scores, scores = simulate(curves, 0.3, np.random.default_rng(4))
    curve_steps, counts = simulate_curve_runs(curves, 0.3, np.random.default_rng(4))
    np.testing.assert_array_equal(steps, curve_steps)
    np.testing.assert_array_equal(id_scores, counts[:, :, 0] / 1000)
    np.testing.assert_array_equal(scores, counts[:, :, 1:] / 1000)


def test_textbook_random_walk_and_shared_noise_against_moments() -> None:
    """A random walk scaled by 1/sqrt(n) has variance t/n at step t; the alternative's noises correlate at rho."""
    from gengen.calibration.simulate import Cell, simulate_pair_runs

    n, runs = 40, 20_000
    cell = Cell("rw", n=n, noise="rw", runs=runs)
    scores, id_scores = simulate_pair_runs(cell, 0.0, np.random.default_rng(6))
    x = (id_scores - 0.3) / 0.5
    noise = (scores[:, :, 0] - 0.2 - 0.3 * x) / 0.02
    np.testing.assert_allclose(noise.var(axis=0), np.arange(1, n + 1) / n, rtol=0.05)
    ar = Cell("ar1(0.5)", n=n, coef_a=(0.5,), runs=runs)
    scores, id_scores = simulate_pair_runs(ar, 0.4, np.random.default_rng(7))
    x = (id_scores - 0.3) / 0.5
    a, b = (scores[:, -1, 0] - 0.2 - 0.3 * x[:, -1]) / 0.02, (scores[:, -1, 1] - 0.2 - 0.2 * x[:, -1]) / 0.02
    assert abs(np.corrcoef(a, b)[0, 1] - 0.4) < 0.03
    assert abs(a.var() - 1.0) < 0.05


@pytest.mark.parametrize(
    ("cells", "options", "message"),
    [
        ("textbook", {"measure": "bogus"}, "measure"),
        ("textbook", {"measure": "grid", "csv": "x.csv"}, "csv"),
        ("curves", {"measure": "methods"}, "method comparison"),
        ("textbook", {"measure": "realistic"}, "learning curves"),
        ("curves", {"measure": "grid", "replicates": 1}, "one alternative"),
    ],
)
def test_calibration_study_names_what_does_not_fit(cells: str, options: dict[str, object], message: str) -> None:
    from gengen.calibration.learning_curves import CurveCell
    from gengen.calibration.simulate import Cell
    from gengen.calibration.studies import calibration_study
    from gengen.errors import GengenError

    chosen = [Cell("ar1(0.9)", replicates=10)] if cells == "textbook" else [CurveCell("log n=11", n=11)]
    with pytest.raises(GengenError, match=message):
        calibration_study(chosen, **options)


def test_cli_study_option_and_its_contradictions() -> None:
    from gengen.cli import app

    runner = CliRunner()
    for argv, message in (
        (["simulate", "--study", "bogus"], "--study"),
        (["simulate", "--study", "methods", "--grid"], "contradicts"),
    ):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
