"""A test set on its class priors (always one answer) carries no information at those checkpoints (issue 33,
item 3), with N read from ``n_examples`` or implied by lm-eval's standard error."""

from __future__ import annotations

import numpy as np
import pandas as pd

import gengen
from gengen.analyse.data import examples_per_row
from gengen.analyse.information import class_prior_checkpoints
from gengen.calibration.simulate import simulate_trajectories

N_WSC = 104
LOW, HIGH = 38, 66  # Pythia's wsc: 38/104 = 0.365 and 66/104 = 0.635


def test_complementary_counts_far_from_chance_are_priors() -> None:
    counts = np.array([58, 60, 46, 38, 66, 38, 66, 66, 38, 40, 38, 38, 39, 38])
    on, priors = class_prior_checkpoints(counts / N_WSC, N_WSC)
    assert on.tolist() == [c in (LOW, HIGH) for c in counts]
    assert priors == (LOW / N_WSC, HIGH / N_WSC)
    # 58/104 and 46/104 are complementary too, but 0.06 from 0.5, within 2 sd of chance (0.098): not priors
    assert not on[[0, 2]].any()


def test_nothing_is_detected_without_the_signature() -> None:
    near_chance = np.array([50, 54, 50, 54, 50, 54]) / N_WSC  # 0.481 / 0.519: guessing, not one answer
    assert not class_prior_checkpoints(near_chance, N_WSC)[0].any()
    twice = np.array([38, 66, 45, 47, 49, 51]) / N_WSC  # the pair taken only twice: may be chance
    assert not class_prior_checkpoints(twice, N_WSC)[0].any()
    assert not class_prior_checkpoints(np.array([LOW, HIGH, LOW, HIGH]) / N_WSC, None)[0].any()
    not_counts = np.array([0.3651, 0.6349, 0.3651, 0.6349])  # not whole counts out of 104
    assert not class_prior_checkpoints(not_counts, N_WSC)[0].any()


def test_examples_implied_by_lm_eval_stderr() -> None:
    p = np.array([LOW, HIGH, 58]) / N_WSC
    table = pd.DataFrame({"value": p, "sign": 1, "stderr": np.sqrt(p * (1 - p) / (N_WSC - 1))})
    implied = examples_per_row(table)
    assert implied is not None and implied.tolist() == [N_WSC] * 3
    counted = examples_per_row(table.assign(n_examples=[200.0, np.nan, np.nan]))
    assert counted is not None and counted.tolist() == [200, N_WSC, N_WSC]


def _with_flipping_set(stderr_only: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """Two simulated OOD sets and ``wsc``, a 104-example set on its priors at 16 of 40 checkpoints."""
    scores = simulate_trajectories(n=40, n_testsets=2, seed=5)
    wide = scores.pivot(index="step", columns="testset", values="value")
    rng = np.random.default_rng(2)
    counts = rng.integers(44, 61, size=len(wide))  # 0.42-0.58: reading, noisily
    flips = np.arange(4, 40, 2)[:16]
    counts[flips] = np.where(np.arange(16) % 3 == 0, HIGH, LOW)
    wide["wsc"] = counts / N_WSC
    long = wide.reset_index().melt(id_vars="step", var_name="testset", value_name="value")
    long = long.assign(model="m", run="main", metric="accuracy")
    is_wsc = long["testset"] == "wsc"
    p = long["value"]
    if stderr_only:
        long["stderr"] = np.where(is_wsc, np.sqrt(p * (1 - p) / (N_WSC - 1)), np.nan)
    else:
        long["n_examples"] = np.where(is_wsc, N_WSC, np.nan)
    return long, counts


def test_analysis_counts_prior_checkpoints_as_no_information() -> None:
    for stderr_only in (False, True):
        table, counts = _with_flipping_set(stderr_only)
        on_priors = int(np.isin(counts, (LOW, HIGH)).sum())
        analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=199)
        rows = analysis.pairs[(analysis.pairs["testset_a"] == "wsc") | (analysis.pairs["testset_b"] == "wsc")]
        assert len(rows) == 2
        assert (rows["n_informative"] <= 40 - on_priors).all()
        # the sieve's standard error is never below Fisher's on the informative checkpoints (k = 1)
        assert (rows["se_z"] >= 1 / np.sqrt(rows["n_informative"] - 4) - 1e-12).all()
        other = analysis.pairs[(analysis.pairs["testset_a"] != "wsc") & (analysis.pairs["testset_b"] != "wsc")]
        assert (other["n_informative"] > 40 - on_priors).all()
        note = [w for w in analysis.warnings if "class priors" in w]
        assert note and f"at {on_priors} of 40 checkpoints" in note[0] and "0.365 / 0.635" in note[0]
