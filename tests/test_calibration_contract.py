"""The contract of issue 34, item 6, CI-sized: each path offered by default stays calibrated on a small grid.

:data:`gengen.calibration.contract.CONTRACT_QUICK_GRID` (n = 30 log-spaced checkpoints, N = 300 examples per set:
one run with a stuck and a class-prior set and an alternative, 3 pooled seeds with a real pair beside the null one,
4 models) runs through :func:`gengen.calibration.contract.run_contract` with few replicates. The tolerances come
from the Monte Carlo s.e. of a rate: a path is said to have collapsed when a rate the contract bounds by 0.065 is
above 0.065 + 3 √(0.065 · 0.935 / R) on R rows. A calibrated path (true rate 0.05) crosses that line with
probability below 0.1%, one at the bound (0.065) below 0.6% (binomial, R = 60 to 180; checked below with scipy); a
collapsed one at 0.25 (the t-test's rate on realistic curves) stays under it with probability below 5% on the 60
rows of a main pair, pooled effect or verdict, below 0.001% on the 180 null-pair rows of the single-run cell.
The draws are seeded, so the test is deterministic;
the bounds say which changes it can tell from chance. The full grid, with ≥ 300 null replicates per cell, is
docs/calibration.md's "The contract on the extended grid (issue 34, item 6)".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from gengen.calibration.contract import (
    CONTRACT_PATHS,
    CONTRACT_QUICK_GRID,
    ContractCell,
    _draw_table,
    _oracle,
    contract_checks,
    contract_comparison,
    contract_summary,
    contract_tables,
    run_contract,
)
from gengen.calibration.item_level import ItemCell
from gengen.calibration.realistic import contract_status
from gengen.errors import GengenError

NULL_REPLICATES = 60
ALTERNATIVE_REPLICATES = 30


def _collapse_bound(rows: float, bound: float = 0.065) -> float:
    return bound + 3.0 * float(np.sqrt(bound * (1.0 - bound) / rows))


def test_the_collapse_bound_separates_a_calibrated_from_a_collapsed_path() -> None:
    # P(rate > line | true rate) and P(rate <= line | collapsed rate), exactly from the binomial.
    for rows, collapsed_passes in ((60, 0.05), (120, 0.001), (180, 1e-5)):
        count = np.floor(_collapse_bound(rows) * rows)
        assert scipy_stats.binom.sf(count, rows, 0.05) < 0.001
        assert scipy_stats.binom.sf(count, rows, 0.065) < 0.006
        assert scipy_stats.binom.cdf(count, rows, 0.25) < collapsed_passes


@pytest.fixture(scope="module")
def quick() -> pd.DataFrame:
    return run_contract(
        CONTRACT_QUICK_GRID, replicates=NULL_REPLICATES, alternative_replicates=ALTERNATIVE_REPLICATES, n_boot=99
    )


@pytest.fixture(scope="module")
def summary(quick: pd.DataFrame) -> pd.DataFrame:
    return contract_summary(quick)


def _row(summary: pd.DataFrame, cell: str, method: str, rows: str, hypothesis: str = "H0") -> pd.Series:
    found = summary[
        (summary["cell"] == cell)
        & (summary["method"] == method)
        & (summary["rows"] == rows)
        & (summary["hypothesis"] == hypothesis)
    ]
    assert len(found) == 1, (cell, method, rows, hypothesis)
    return found.iloc[0]


@pytest.mark.parametrize("path", list(CONTRACT_PATHS))
@pytest.mark.parametrize("cell", [cell.label for cell in CONTRACT_QUICK_GRID])
def test_no_path_offered_by_default_collapses_on_null_rows(summary: pd.DataFrame, path: str, cell: str) -> None:
    for rows in ("null pairs", "main pair"):
        row = _row(summary, cell, path, rows)
        # Most main-pair rows are decided (a path that calls everything untestable would pass vacuously); the
        # null pairs also hold the class-prior set's, untestable by design.
        if rows == "main pair":
            assert row["testable"] >= 0.9 * row["replicates"], (rows, row["untestable"])
        assert row["reject"] <= _collapse_bound(row["testable"]), (rows, row["reject"], row["testable"])
        # Coverage of 0: 0.95 - 0.025 less three MC s.e. of 0.925 (and not above 1, trivially).
        floor = 0.925 - 3.0 * np.sqrt(0.925 * 0.075 / row["testable"])
        assert row["coverage"] >= floor, (rows, row["coverage"])


def test_the_stuck_set_never_makes_a_path_fail_silently(summary: pd.DataFrame) -> None:
    cell = CONTRACT_QUICK_GRID[0].label
    for path in CONTRACT_PATHS:
        row = _row(summary, cell, path, "with stuck")
        rejected = row["reject"] * row["testable"]
        assert rejected <= _collapse_bound(row["replicates"]) * row["replicates"], (path, row["reject"])
        prior = _row(summary, cell, path, "with class_prior")
        assert prior["untestable"] == 1.0  # two distinct values: never a testable row


@pytest.mark.parametrize("path", list(CONTRACT_PATHS))
def test_pooled_seeds_keep_the_null_pair_beside_real_ones(summary: pd.DataFrame, path: str) -> None:
    cell = CONTRACT_QUICK_GRID[1].label
    for kind in ("fixed", "random"):
        null = _row(summary, cell, f"{path} pooled {kind}", "main pair")
        assert null["testable"] == NULL_REPLICATES
        assert null["reject"] <= _collapse_bound(NULL_REPLICATES), (kind, null["reject"])
        # The real pairs (ood_c holds both main sets' examples, r ≈ 0.7) are found: a path that refuses
        # everything fails here.
        real = _row(summary, cell, f"{path} pooled {kind}", "real pairs")
        assert real["reject"] >= 0.8, (kind, real["reject"])


@pytest.mark.parametrize("path", list(CONTRACT_PATHS))
def test_the_verdict_across_models_keeps_its_level(summary: pd.DataFrame, path: str) -> None:
    cell = CONTRACT_QUICK_GRID[2].label
    for name in ("Q", "joint test", "wrong"):
        row = _row(summary, cell, f"{path} verdict {name}", "null pairs")
        assert row["testable"] >= 0.9 * NULL_REPLICATES, name
        assert row["reject"] <= _collapse_bound(row["testable"]), (name, row["reject"])


def test_power_is_reported_beside_the_lagged_test_and_the_oracle(summary: pd.DataFrame) -> None:
    cell = CONTRACT_QUICK_GRID[0].label
    methods = ("default", "lagged", "oracle", "GLS oracle")
    found = {m: _row(summary, cell, m, "main pair", "rho=0.5") for m in methods}
    assert {row["replicates"] for row in found.values()} == {ALTERNATIVE_REPLICATES}
    # The oracle's critical value is the null's own 95% quantile of |r|: on the null's rows it rejects ~5%.
    assert 0.0 <= found["oracle"]["reject"] <= 1.0
    # The GLS oracle (it knows the simulated noise covariance) keeps its level on the same null replicates.
    null = _row(summary, cell, "GLS oracle", "main pair")
    assert null["testable"] == NULL_REPLICATES
    assert null["reject"] <= _collapse_bound(NULL_REPLICATES), null["reject"]
    assert found["GLS oracle"]["testable"] == ALTERNATIVE_REPLICATES
    assert 0.0 < found["default"]["true_r"] < 0.5


def test_the_tables_and_the_comparison_name_every_cell(quick: pd.DataFrame) -> None:
    text = contract_tables(quick)
    for cell in CONTRACT_QUICK_GRID:
        assert cell.label in text
    assert "Power on the main pair" in text and "The contract:" in text
    compared = contract_comparison(quick, quick.iloc[:0])
    assert compared.count("\n") > 10 and "| – | – |" in compared


def test_oracle_rejects_above_the_nulls_95_percent_quantile() -> None:
    null = np.arange(1, 101) / 100.0  # the 95% quantile (linear interpolation) is 0.9505
    found = _oracle(null, np.array([0.95, 0.951, 0.99, 0.2]))
    assert found == {"replicates": 4, "testable": 4, "reject": 2}
    assert _oracle(np.empty(0), np.array([0.5]))["testable"] == 0


def test_contract_status_against_two_monte_carlo_standard_errors() -> None:
    assert contract_status(0.05, 0.0, 0.065, 300) == "ok"
    # 0.08 on 300 rows: s.e. √(0.08 · 0.92 / 300) = 0.0157; 0.015 over the bound is within two s.e.
    assert contract_status(0.08, 0.0, 0.065, 300) == "over"
    assert contract_status(0.20, 0.0, 0.065, 300) == "FAIL"
    # A rate of 0 is not exact: its s.e. is at least that of 0.05 (coverage 1.0 on 40 rows is "over").
    assert contract_status(1.0, 0.925, 0.975, 40) == "over"


def test_checks_judge_planted_rates() -> None:
    base = {
        "cell": "c",
        "kind": "single",
        "well_specified": True,
        "hypothesis": "H0",
        "rho": 0.0,
        "true_r": 0.0,
        "true_r_se": 0.0,
        "rows": "null pairs",
        "replicates": 300,
        "testable": 300,
        "intervals": 300,
        "flagged_reject": 0,
        "unflagged": 300,
        "unflagged_reject": 0,
        "sum_r": 0.0,
        "gam_rows": 0,
        "n_boot": 99,
        "cpu_s": 0.0,
        "default_settings": "",
    }
    table = pd.DataFrame(
        [
            {**base, "method": "default", "reject": 15, "covered": 285, "flagged": 90},  # flags 30%: FAIL
            {**base, "method": "lagged", "reject": 60, "covered": 240, "flagged": 0},  # type-I 0.2: FAIL
            {**base, "method": "t-test (warned)", "reject": 120, "covered": 0, "flagged": 0},  # not judged
            # a pooled cell's null pair: its fixed effect's flags are judged (56%, "any run flagged" at 10 seeds)
            {
                **base,
                "method": "default pooled fixed",
                "rows": "main pair",
                "reject": 15,
                "covered": 285,
                "flagged": 167,
            },
            {
                **base,
                "method": "default pooled random",
                "rows": "main pair",
                "reject": 15,
                "covered": 285,
                "flagged": 167,
            },
        ]
    )
    checks = contract_checks(contract_summary(table)).set_index(["method", "criterion"])["status"]
    assert checks[("default pooled fixed", "flags")] == "FAIL"
    assert ("default pooled random", "flags") not in checks.index  # the same rows' notes: checked once
    assert checks[("default", "type-I")] == "ok" and checks[("default", "coverage")] == "ok"
    assert checks[("default", "flags")] == "FAIL"
    assert checks[("lagged", "type-I")] == "FAIL" and checks[("lagged", "coverage")] == "FAIL"
    assert "t-test (warned)" not in checks.index.get_level_values("method")


def test_pooled_cells_get_a_set_of_both_main_sets_examples() -> None:
    cell = ContractCell(ItemCell("p", n=11, n_examples=100, runs=2, rhos=(0.0,)), kind="pooled")
    table, _ = _draw_table(cell, 0.0, np.random.default_rng(0), 2, 0)
    wide = table.pivot_table(index=["model", "run", "step"], columns="testset", values="value")
    np.testing.assert_allclose(wide["ood_c"], (wide["ood_a"] + wide["ood_b"]) / 2, rtol=0, atol=1e-15)
    assert set(table.loc[table["testset"] == "ood_c", "n_examples"]) == {200}


def test_bad_cells_and_kinds_are_refused_in_one_line() -> None:
    with pytest.raises(GengenError, match="kind: 'pooled' needs"):
        ContractCell(ItemCell("one run", rhos=(0.0,)), kind="pooled")
    with pytest.raises(GengenError, match="kind: 'mixed' is not one of"):
        ContractCell(ItemCell("x", rhos=(0.0,)), kind="mixed")
    with pytest.raises(GengenError, match="cell: 'nope' is not a cell"):
        run_contract(CONTRACT_QUICK_GRID, cells=["nope"], replicates=1)


def test_cli_refuses_a_cell_of_another_study_or_grid_without_a_traceback() -> None:
    from gengen.cli import app

    runner = CliRunner()
    for argv, message in (
        (["simulate", "--study", "items", "--cell", "log n=40"], "option --cell"),
        (["simulate", "--study", "contract", "--cell", "nope", "--replicates", "1"], "cell: 'nope'"),
    ):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
