"""Tests that catch a wrong rule (issue 34, item 7): each fails when its rule is replaced by the plausible wrong one.

Each test computes what the rule says independently — by hand with numpy, scipy's distributions, exact
fractions or brute force — and compares it with gengen's answer on data where the right rule and the wrong one
disagree. The wrong rules, one per test (each was planted locally and the test seen to fail):

1. the verdict calls a pair "consistent positive" while one model's r is negative;
2. a one-model analysis classes every pair "undetermined (only one model could test this pair)";
3. ``split="id"`` labels each checkpoint by its own ID progress instead of the running maximum's (a dip back
   below the threshold is labelled early again);
4. phase p-values adjusted across all runs instead of within each run;
5. ``split="fraction"`` puts the checkpoint at exactly ``at`` in the late phase;
6. the measurement-noise band computed on sign-adjusted values (an error rate, negated, gets no band);
7. the automatic control's floor of two curved test sets dropped (two testable sets, one curved, give the GAM);
8. the leave-one-out p takes a carrying deletion's p instead of the larger of it and the full estimate's p.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from gengen.across.phases import compare_phases, phase_labels
from gengen.across.verdict import build_verdict
from gengen.analyse.information import column_information
from gengen.stats.control_choice import choose_control
from gengen.stats.influence import leave_one_out_test


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment, written out: the k-th smallest p times (m − k + 1), made monotone, capped at 1."""
    order = np.argsort(p)
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


# 1 ---------------------------------------------------------------------------------------------------------------
def test_a_common_effect_with_one_model_pointing_the_other_way_is_not_consistent() -> None:
    """Three models, r = 0.45, 0.45, −0.03 (se_z 0.2 each): Q is not significant (χ² on 2 df, p ≈ 0.11), the common
    effect is (p ≈ 0.007), one model's r is negative: "undetermined", not "consistent positive"."""
    r = np.array([0.45, 0.45, -0.03])
    se = 0.2
    pairs = pd.DataFrame(
        {"model": ["a", "b", "c"], "run": "main", "testset_a": "x", "testset_b": "y", "r_partial": r, "se_z": se}
    )
    z = np.arctanh(r)
    common = z.mean()  # equal weights 1/se²
    q = float(np.sum((z - common) ** 2) / se**2)
    p_q = scipy.stats.chi2.sf(q, 2)
    p_common = 2 * scipy.stats.norm.sf(abs(common) * np.sqrt(3) / se)
    assert p_q > 0.05 and p_common < 0.05  # the case the rule is about
    row = build_verdict(pairs, n_perm=99).pairs.iloc[0]
    assert row["r_common"] == pytest.approx(np.tanh(common), abs=1e-12)
    assert row["p_common"] == pytest.approx(p_common, rel=1e-6)
    assert row["p_heterogeneity"] == pytest.approx(p_q, rel=1e-6)
    assert row["n_negative"] == 1
    assert row["verdict"] == "undetermined"
    assert "other way" in row["reason"]


# 2 ---------------------------------------------------------------------------------------------------------------
def test_one_model_is_classed_by_its_own_estimates() -> None:
    """One model, three pairs: r = 0.6, −0.6, 0.05 with se_z 0.15. Holm-adjusted normal p-values (by hand) give
    consistent positive, consistent negative and undetermined (no common effect) — not "only one model"."""
    r = np.array([0.6, -0.6, 0.05])
    pairs = pd.DataFrame(
        {"model": "a", "run": "main", "testset_a": ["x", "x", "y"], "testset_b": ["y", "w", "w"], "r_partial": r}
    ).assign(se_z=0.15)
    p = 2 * scipy.stats.norm.sf(np.abs(np.arctanh(r)) / 0.15)
    adjusted = _holm(p)
    expected = [
        "undetermined" if a >= 0.05 else ("consistent positive" if value > 0 else "consistent negative")
        for a, value in zip(adjusted, r, strict=True)
    ]
    assert expected == ["consistent positive", "consistent negative", "undetermined"]
    verdict = build_verdict(pairs, n_perm=99).pairs
    assert len(verdict) == 3
    # One model: the common estimate is the model's own, so each row is found by its r.
    by_r = {round(float(row["r_common"]), 6): row for _, row in verdict.iterrows()}
    for value, cls, a in zip(r, expected, adjusted, strict=True):
        row = by_r[round(float(value), 6)]
        assert row["verdict"] == cls
        assert row["p_common_adjusted"] == pytest.approx(a, rel=1e-6)
        assert "only one model" not in row["reason"]


# 3 ---------------------------------------------------------------------------------------------------------------
def _long(steps: np.ndarray, series: dict[str, np.ndarray], run: str = "seed=0") -> pd.DataFrame:
    return pd.concat(
        pd.DataFrame({"model": "m", "run": run, "step": steps, "testset": name, "value": values})
        for name, values in series.items()
    )


def _first_crossing_labels(values: np.ndarray, at: float) -> list[str]:
    """Early strictly before the first checkpoint whose gain over the first reaches ``at`` of the best gain."""
    gain = values.max() - values[0]
    reached = [k for k, value in enumerate(values) if value - values[0] >= at * gain]
    first = reached[0] if gain > 0 else len(values)
    return ["early" if k < first else "late" for k in range(len(values))]


def test_split_id_keeps_a_dip_after_the_crossing_in_the_late_phase() -> None:
    """ID 0.1, 0.5, 0.9, 0.3, 0.95, 0.2, 0.96 at ``at`` = 0.5 (threshold 0.53): early are the first two checkpoints
    only, although the ID score dips back below the threshold twice; and on 40 random curves with dips the labels
    match the first crossing computed by hand, for every test set of the checkpoint."""
    steps = np.arange(7) * 10
    ident = np.array([0.1, 0.5, 0.9, 0.3, 0.95, 0.2, 0.96])
    scores = _long(steps, {"id": ident, "ood": ident[::-1]})
    labels = phase_labels(scores, id_testset="id", split="id", at=0.5)
    assert labels[scores["testset"].eq("id").to_numpy()].tolist() == ["early"] * 2 + ["late"] * 5
    assert labels[scores["testset"].eq("ood").to_numpy()].tolist() == ["early"] * 2 + ["late"] * 5
    rng = np.random.default_rng(3)
    expected = []
    for run in range(40):
        curve = np.cumsum(rng.normal(0.02, 0.05, 25))  # rises with frequent dips
        at = float(rng.uniform(0.2, 0.8))
        frame = _long(np.arange(25) * 100, {"id": curve}, run=f"seed={run}")
        got = phase_labels(frame, id_testset="id", split="id", at=at).tolist()
        assert got == _first_crossing_labels(curve, at), run
        expected.append(got)
    assert any("late" in labels and "early" in labels for labels in expected)


# 4 ---------------------------------------------------------------------------------------------------------------
def _two_runs(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    steps = 100 * np.arange(1, n + 1)
    frames = []
    for run in range(2):
        ident = 0.3 + 0.5 * (1 - np.exp(-steps / steps[n // 3])) + rng.normal(0, 0.01, n)
        series = {"id": ident}
        for j in range(3):
            series[f"ood_{j + 1}"] = 0.3 + 0.5 * ident + 0.02 * rng.standard_normal(n)
        frames.append(_long(steps, series, run=f"seed={run}"))
    return pd.concat(frames, ignore_index=True).assign(metric="acc")


def test_phase_p_values_are_adjusted_within_each_run() -> None:
    """Two runs of three pairs: each run's ``p_phase_adjusted`` is Holm (written out) over its own three p-values,
    not over all six."""
    phases = compare_phases(_two_runs(), id_testset="id", n_boot=99, seed=1)
    table = phases.table[phases.table["level"] == "run"]
    assert phases.settings["adjust"] == "holm"
    assert table.groupby("run").size().tolist() == [3, 3]
    for _, rows in table.groupby("run"):
        np.testing.assert_allclose(rows["p_phase_adjusted"], _holm(rows["p_phase"].to_numpy()), rtol=1e-12)
    # The data are such that adjusting over all six would give other numbers.
    assert not np.allclose(_holm(table["p_phase"].to_numpy()), table["p_phase_adjusted"].to_numpy())


# 5 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("at", [0.3, 0.5, 0.7])
def test_split_fraction_puts_the_checkpoint_at_exactly_at_in_the_early_phase(at: float) -> None:
    """Steps 0, 10, …, 100 (and offset by 1,000): a step whose fraction of the run is exactly ``at`` (exact
    rational arithmetic) is early."""
    for offset in (0, 1000):
        steps = offset + np.arange(0, 101, 10)
        scores = _long(steps, {"id": np.linspace(0, 1, steps.size), "ood": np.zeros(steps.size)})
        labels = phase_labels(scores, id_testset="id", split="fraction", at=at)[scores["testset"].eq("id").to_numpy()]
        exact_at = Fraction(at).limit_denominator(100)
        expected = ["early" if Fraction(int(s - offset), 100) <= exact_at else "late" for s in steps]
        assert labels.tolist() == expected
        assert labels.tolist()[int(exact_at * 10)] == "early"  # the boundary checkpoint itself


# 6 ---------------------------------------------------------------------------------------------------------------
def test_a_lower_is_better_metric_gets_its_measurement_noise_band() -> None:
    """An error rate (sign −1, so stored negated) on N = 1,000 examples: a plateau of 15 checkpoints within
    √(p(1 − p)/N) of each other (p the median error rate) is one checkpoint, exactly as for the same values as an
    accuracy; the informative count is found by brute force."""
    rng = np.random.default_rng(2)
    error = np.concatenate([[0.5, 0.42, 0.35, 0.3, 0.26], 0.2 + rng.uniform(-0.004, 0.004, 15)])
    n, big_n = error.size, 1000
    band = np.sqrt(np.median(error) * (1 - np.median(error)) / big_n)
    longest = max(
        stop - start
        for start in range(n)
        for stop in range(start + 1, n + 1)
        if error[start:stop].max() - error[start:stop].min() <= band
    )
    informative = n - longest + 1
    assert longest >= 15 and informative < 8
    steps = np.arange(n) * 100
    ident = np.linspace(0.5, 0.9, n)
    for sign in (-1.0, 1.0):
        found = column_information(
            pd.DataFrame({"err": sign * error}),
            ident,
            steps,
            minimum=8,
            n_examples={"err": big_n},
            signs={"err": sign},
        )["err"]
        assert found.informative == informative
        assert f"within measurement noise (±{band:.2g})" in found.reason


# 7 ---------------------------------------------------------------------------------------------------------------
def test_one_curved_test_set_of_two_keeps_the_linear_control() -> None:
    """Two test sets: one a square root of ID (curvature p far below any level, checked with an ordinary
    quadratic regression in scipy), one linear (curvature p large): the rule needs two curved sets, so linear."""
    z = np.linspace(0, 1, 40)
    wiggle = 0.004 * np.cos(np.outer(np.arange(40), [2.1, 1.3]))
    scores = np.column_stack([np.sqrt(z + 0.05), 0.3 + 0.5 * z]) + wiggle
    design = np.column_stack([np.ones_like(z), z, z**2])
    for column, curved in ((0, True), (1, False)):
        beta, residual, *_ = np.linalg.lstsq(design, scores[:, column], rcond=None)
        sigma2 = residual[0] / (40 - 3)
        t = beta[2] / np.sqrt(sigma2 * np.linalg.inv(design.T @ design)[2, 2])
        p = 2 * scipy.stats.t.sf(abs(t), 37)
        assert (p < 1e-6) if curved else (p > 0.2)
    choice = choose_control(scores, z)
    assert choice.n_columns == 2 and choice.n_curved == 1
    assert choice.fit == "linear"
    both = choose_control(np.column_stack([scores[:, 0], np.log(z + 0.1) + wiggle[:, 1]]), z)
    assert both.n_curved == 2 and both.fit == "gam"  # two curved sets of two: the GAM


# 8 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("df", [1.0, 24.0])
def test_the_leave_one_out_p_is_the_larger_of_the_full_and_the_deletion_p(df: float) -> None:
    """z = 0.6, se_z = 0.2 on ``df`` degrees of freedom; deleting checkpoint 1 leaves z = 0.29 (it carries 52% of the
    estimate), with se_z √(23/22) on 1/se² + 1 df. p_max = max(p_full, p_deleted), both from scipy's t: on 1 df the
    full estimate's p is the larger (a rule taking the deletion's p would report less), on 24 df the deletion's."""
    r = np.tanh(0.6)
    deleted = np.tanh(np.array([[0.58], [0.29], [0.61], [0.6]]))
    result = leave_one_out_test([r], deleted, se_z=[0.2], df=[df], fisher_df=[23.0])
    p_full = 2 * scipy.stats.t.sf(0.6 / 0.2, df)
    se_deleted = 0.2 * np.sqrt(23 / 22)
    p_deleted = 2 * scipy.stats.t.sf(0.29 / se_deleted, 1 / se_deleted**2 + 1)
    assert (p_full > p_deleted) if df == 1.0 else (p_deleted > p_full)
    assert int(result.worst[0]) == 1
    assert float(result.p_max[0]) == pytest.approx(max(p_full, p_deleted), rel=1e-9)
