"""One table entry per inference method (issue 37, item 5): the analysis reads the deciding order, the pairs
table's columns, the "not applicable" values, where a method runs and Kendall's refusal from
:data:`gengen.analyse.options.INFERENCE`, and calls the method's function from
:data:`gengen.analyse.inference.COLUMNS_OF`. A toy method registered as docs/extending.md shows flows through
``gengen.analyse`` with nothing else edited.
"""

from __future__ import annotations

import dataclasses
import math
from typing import get_args

import numpy as np
import pytest
from scipy import stats as scipy_stats

import gengen
from gengen.analyse import options
from gengen.analyse.group_plan import PAIR_COLUMNS, GroupPlan
from gengen.analyse.inference import COLUMNS_OF, MethodColumns
from gengen.analyse.options import INFERENCE, InferenceMethod, Settings, make_settings
from gengen.analyse.untestable import inference_columns
from gengen.calibration.simulate import simulate_trajectories
from gengen.errors import GengenError


def test_the_table_names_the_literals_methods_and_gives_the_built_in_order() -> None:
    assert tuple(INFERENCE) == get_args(options.Inference)
    assert options.DECIDING_ORDER == (("sieve", "p_sieve"), ("lagged", "p_lagged"), ("permutation", "p_perm"),
                                      ("t-test", "p_value"))  # fmt: skip
    assert options.RESIDUAL_INFERENCE == ("sieve", "lagged", "permutation", "bootstrap")
    # every method's columns stand in the pairs table, in one block after ``diagnostics``
    block = [column for method in sorted(INFERENCE.values(), key=lambda m: m.column_rank) for column in method.columns]
    start = PAIR_COLUMNS.index("diagnostics") + 1
    assert list(PAIR_COLUMNS[start : start + len(block)]) == block
    for name, method in INFERENCE.items():
        assert set(method.not_applicable) - set(method.columns) <= {"sieve_ci_low", "sieve_ci_high"}, name
        assert (name in COLUMNS_OF) == bool(method.not_applicable), name  # the t-test comes with the correlations


def _toy(x: np.ndarray, covar: np.ndarray, settings: Settings, plan: GroupPlan, rows: np.ndarray, cols: np.ndarray,
         labels: list[str]) -> MethodColumns:  # fmt: skip
    """Spearman's correlation of the raw scores (ID not regressed out) with scipy's p-value: a stand-in method."""
    rho, p = [], []
    for a, b in zip(rows, cols, strict=True):
        result = scipy_stats.spearmanr(x[:, a], x[:, b])
        rho.append(float(result.statistic))
        p.append(float(result.pvalue))
    notes = [["toy note"] if value < 0 else [] for value in rho]
    return MethodColumns({"rho_toy": rho, "p_toy": p, "p_toy_method": "toy (spearman of raw scores)"}, [], notes)


TOY = InferenceMethod(
    "toy",
    "p_toy",
    ("rho_toy", "p_toy", "p_toy_method"),
    {"rho_toy": math.nan, "p_toy": math.nan, "p_toy_method": ""},
    levels=("run",),
    residual_based=True,
    deciding_rank=-1,  # decides before the sieve
    column_rank=5,
    no_interval="none: the toy test gives no interval",
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy method registered as docs/extending.md shows: its entry and its function, and its name among the
    choices (which the ``Inference`` literal gives at import; here patched in)."""
    monkeypatch.setitem(INFERENCE, "toy", TOY)
    monkeypatch.setitem(COLUMNS_OF, "toy", _toy)
    table = tuple(
        dataclasses.replace(option, choices=(*option.choices, "toy")) if option.name == "inference" else option
        for option in options.ANALYSIS_OPTIONS
    )
    monkeypatch.setattr(options, "ANALYSIS_OPTIONS", table)
    monkeypatch.setattr(options, "OPTIONS", {option.name: option for option in table})


def test_a_registered_method_flows_through_the_analysis(toy: None) -> None:
    scores = simulate_trajectories(n=30, n_testsets=3, seed=7)
    analysis = gengen.analyse(scores, id_testset="id", metric="accuracy", inference=["sieve", "toy"], n_boot=99,  # type: ignore[list-item]
                              leave_one_out=False)  # fmt: skip
    pairs = analysis.pairs
    assert analysis.settings.inference == ("sieve", "toy") and analysis.settings.primary_p == "p_toy"
    assert {"rho_toy", "p_toy", "p_toy_method", "p_sieve"} <= set(pairs.columns)
    wide = scores[scores["metric"] == "accuracy"].pivot(index="step", columns="testset", values="value")
    for _, row in pairs.iterrows():
        reference = scipy_stats.spearmanr(wide[row["testset_a"]], wide[row["testset_b"]])
        assert row["rho_toy"] == pytest.approx(reference.statistic, abs=1e-12)
        assert row["p_deciding"] == pytest.approx(reference.pvalue, rel=1e-12)  # the toy decides (rank -1)
    assert (pairs["p_adjusted_from"] == "p_toy").all() and (pairs["ci_method"] == TOY.no_interval).all()
    assert (pairs["p_deciding_method"] == "toy (spearman of raw scores)").all()
    assert (pairs["estimand"] == "r_partial").all()
    # across runs (no checkpoint order) the toy does not run: its columns hold the entry's "not applicable" values
    runs = simulate_trajectories(n=5, n_testsets=3, seed=1, n_runs=12)
    across = runs[runs["step"] == runs["step"].max()]  # one score per run
    result = gengen.analyse(across, id_testset="id", metric="accuracy", inference=["t-test", "toy"])  # type: ignore[list-item]
    assert result.settings.mode_resolved == "across_runs"
    assert result.pairs["p_toy"].isna().all() and (result.pairs["p_toy_method"] == "").all()
    assert (result.pairs["p_adjusted_from"] == "p_value").all()


def test_a_registered_residual_method_refuses_kendall_and_its_numbers_empty_on_untestable_pairs(toy: None) -> None:
    with pytest.raises(GengenError, match="kendall comes with the t-test only"):
        make_settings(id_testset="id", inference="toy", method="kendall")
    # an untestable pair loses the toy's numbers (NaN), not its method text
    assert {"rho_toy", "p_toy"} <= set(inference_columns()) and "p_toy_method" not in inference_columns()
