"""A row reports only what its data can tell (issue 23): repeated checkpoints, stuck test sets, one checkpoint
deciding a verdict. References: numpy least squares and np.corrcoef for the leave-one-out estimates, scipy's
Student t for their tests, brute-force counts for the information measures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from numpy.testing import assert_allclose

import gengen
from gengen import stats
from gengen.analyse.information import (
    collapse_repeats,
    column_information,
    longest_plateau,
    measurement_noise,
    pair_distinct_rows,
)


def long_table(steps: np.ndarray, columns: dict[str, np.ndarray], n_examples: int | None = None) -> pd.DataFrame:
    rows = [
        {"model": "m", "run": "r", "step": int(step), "testset": name, "metric": "acc", "value": float(values[i])}
        for name, values in columns.items()
        for i, step in enumerate(steps)
    ]
    table = pd.DataFrame(rows)
    if n_examples is not None:
        table["n_examples"] = n_examples
    return table


def learning_curve(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """Log-spaced steps with step 0, an ID accuracy jumping from chance and saturating."""
    rng = np.random.default_rng(seed)
    steps = np.concatenate([[0], np.unique(np.geomspace(10, 10_000, n - 1).astype(int))])
    id_acc = 0.5 + 0.35 * (1 - np.exp(-steps / 800))
    return steps, id_acc, rng


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> np.ndarray:
    e = np.zeros(n)
    e[0] = rng.normal(0, sd / np.sqrt(1 - phi**2))
    for t in range(1, n):
        e[t] = phi * e[t - 1] + rng.normal(0, sd)
    return e


# ------------------------------------------------------------------------------ information measures
def test_longest_plateau_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = np.round(rng.normal(0, 1, rng.integers(1, 30)), 1)
        tolerance = float(rng.choice([0.0, 0.1, 0.5]))
        start, stop = longest_plateau(values, tolerance)
        best = max(
            j - i for i in range(values.size) for j in range(i + 1, values.size + 1) if np.ptp(values[i:j]) <= tolerance
        )
        assert stop - start == best and np.ptp(values[start:stop]) <= tolerance


def test_pair_distinct_rows_matches_numpy_unique() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        n, m = int(rng.integers(5, 20)), int(rng.integers(2, 6))
        id_values = rng.integers(0, 4, n).astype(float) / 4
        scores = rng.integers(0, 3, (n, m)).astype(float) / 3
        rows, cols = np.triu_indices(m, 1)
        expected = [
            np.unique(np.column_stack([id_values, scores[:, a], scores[:, b]]), axis=0).shape[0]
            for a, b in zip(rows, cols, strict=True)
        ]
        assert_allclose(pair_distinct_rows(scores, id_values, rows, cols), expected)


def test_consecutive_repeats_are_one_checkpoint_and_others_stay() -> None:
    table = pd.DataFrame({"id": [0.5, 0.5, 0.6, 0.6, 0.5], "a": [0.4, 0.4, 0.5, 0.51, 0.4]}, index=[0, 1, 2, 4, 8])
    kept, dropped = collapse_repeats(table)
    assert dropped == [1] and list(kept.index) == [0, 2, 4, 8]  # step 8 repeats step 0, not the step before


def test_binomial_measurement_noise() -> None:
    assert measurement_noise(np.array([0.5, 0.5]), 30_000) == pytest.approx(np.sqrt(0.25 / 30_000))
    assert measurement_noise(np.array([0.5, 2.0]), 1000) == 0.0  # not proportions
    assert measurement_noise(np.array([0.5]), None) == 0.0


def test_a_test_set_at_chance_after_step_0_counts_two_informative_checkpoints() -> None:
    steps, id_acc, rng = learning_curve(11, 0)
    hans = 0.5 + rng.integers(-3, 4, steps.size) / 30_000
    hans[0] = 0.47
    scores = pd.DataFrame({"hans": hans, "rte": id_acc + rng.normal(0, 0.01, steps.size)})
    info = column_information(scores, id_acc, steps, minimum=5, n_examples={"hans": 30_000, "rte": 100_000})
    assert info["hans"].informative == 2
    assert info["hans"].reason == (
        f"hans: 0.500 on checkpoints 2–11 (steps {steps[1]}–{steps[-1]}), 10 of 11 within measurement noise "
        "(±0.0029); nothing left to correlate"
    )
    assert info["rte"].reason == "" and info["rte"].informative >= 9
    # Without the number of examples only equal values form a plateau: then the leave-one-out rule has to act.
    assert column_information(scores, id_acc, steps, minimum=5)["hans"].reason == ""


# ---------------------------------------------------------------------------------- leave one out
def numpy_partial(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    design = np.column_stack([np.ones_like(c), c])
    residual = [y - design @ np.linalg.lstsq(design, y, rcond=None)[0] for y in (a, b)]
    return float(np.corrcoef(residual[0], residual[1])[0, 1])


def test_leave_one_out_estimates_equal_numpy_refits() -> None:
    rng = np.random.default_rng(2)
    c = np.linspace(0.5, 0.9, 15)
    x = c[:, None] + rng.normal(0, 0.02, (15, 3))
    loo = stats.leave_one_out_partial_corr(x, c)
    assert loo.shape == (15, 3, 3)
    for t in range(15):
        keep = np.arange(15) != t
        for a, b in ((0, 1), (0, 2), (1, 2)):
            assert_allclose(loo[t, a, b], numpy_partial(x[keep, a], x[keep, b], c[keep]), rtol=1e-10)


def test_leave_one_out_test_against_scipy() -> None:
    """p_max is the largest directional p over the full estimate and the deletions that remove more than half of
    it; the interval is the hull of theirs (scipy's t for every p and quantile)."""
    rng = np.random.default_rng(3)
    r = np.array([0.6, -0.4, 0.05, 0.5])
    deleted = np.clip(r + rng.normal(0, 0.05, (12, 4)), -0.99, 0.99)
    deleted[4, 0] = 0.02  # one checkpoint carries the first pair
    deleted[7, 1] = 0.1  # and flips the second's sign
    deleted[2, 3] = np.nan  # without it the fourth has no estimate
    se = np.array([0.2, 0.25, 0.3, 0.2])
    df = 1 / se**2 + 1
    fisher_df = np.full(4, 20.0)
    result = stats.leave_one_out_test(r, deleted, se, df, fisher_df=fisher_df, ci_level=0.95)
    se_deleted = se * np.sqrt(20 / 19)
    df_deleted = 1 / se_deleted**2 + 1
    sign = np.sign(r)
    for j in range(4):
        z = np.arctanh(r[j])
        z_deleted = np.arctanh(deleted[:, j])
        removed = np.where(np.isnan(z_deleted), np.inf, 1 - sign[j] * z_deleted / abs(z))
        carrying = removed > 0.5
        directional = sign[j] * z_deleted[carrying] / se_deleted[j]
        p_deleted = np.where(directional > 0, 2 * scipy.stats.t.sf(directional, df_deleted[j]), 1.0)
        p_full = 2 * scipy.stats.t.sf(abs(z) / se[j], df[j])
        assert_allclose(result.p_max[j], max([p_full, *p_deleted]), rtol=1e-9)
        assert result.worst[j] == int(np.argmax(removed))
        q_full, q_deleted = scipy.stats.t.ppf(0.975, df[j]), scipy.stats.t.ppf(0.975, df_deleted[j])
        kept = z_deleted[carrying & np.isfinite(z_deleted)]
        low = min([z - q_full * se[j], *(kept - q_deleted * se_deleted[j])])
        high = max([z + q_full * se[j], *(kept + q_deleted * se_deleted[j])])
        if np.isnan(z_deleted[carrying]).any():
            low, high = min(low, 0.0), max(high, 0.0)
        assert_allclose([result.ci_low[j], result.ci_high[j]], np.tanh([low, high]), rtol=1e-9, atol=1e-15)
        # The hull excludes 0 exactly when p_max is below 1 - level.
        assert (result.ci_low[j] > 0 or result.ci_high[j] < 0) == (result.p_max[j] < 0.05)
    assert result.worst[0] == 4 and result.r_worst[0] == pytest.approx(0.02)
    assert result.influence[1] > 1 and result.p_max[1] == 1.0  # a deletion that flips the sign
    assert result.influence[3] == 1.0 and result.p_max[3] == 1.0
    # Ordinary variation (no deletion removes half): the full estimate's p decides.
    calm = stats.leave_one_out_test([0.5], np.full((12, 1), 0.48), [0.2], [26.0], fisher_df=[20.0])
    assert_allclose(calm.p_max, 2 * scipy.stats.t.sf(np.arctanh(0.5) / 0.2, 26.0), rtol=1e-9)


# --------------------------------------------------------------------------------------- the analysis
def spike_at_step_0(n: int, seed: int) -> pd.DataFrame:
    """HANS-like: one OOD set at chance after step 0; another whose step-0 score lies off its line in ID (a
    curved link does that), AR(1) 0.9 noise otherwise; independent of each other."""
    steps, id_acc, rng = learning_curve(n, seed)
    curved = 0.5 + 0.8 * (id_acc - 0.5) + ar1(rng, steps.size, 0.9, 0.004)
    curved[0] -= 0.06
    hans = 0.5 + rng.integers(-3, 4, steps.size) / 30_000
    hans[0] = 0.46
    other = 0.5 + 0.5 * (id_acc - 0.5) + ar1(rng, steps.size, 0.9, 0.004)
    return long_table(steps, {"id": id_acc, "curved": curved, "hans": hans, "other": other})


def test_no_single_checkpoint_decides_a_verdict() -> None:
    """The spike at step 0 gives a nominally significant sieve p on most of these nulls; the deciding p (which
    must survive deleting any checkpoint that carries more than half of the estimate) does not, and the row
    names step 0."""
    nominal = decided = named = 0
    for seed in range(20):
        pairs = gengen.analyse(spike_at_step_0(20, seed), id_testset="id", n_boot=99, pooling=None).pairs
        row = pairs[(pairs["testset_a"] == "curved") & (pairs["testset_b"] == "hans")].iloc[0]
        nominal += row["p_sieve"] < 0.05
        decided += row["significant"]
        if row["p_sieve"] < 0.05:
            named += row["influential_step"] == 0 and row["verdict_note"].startswith("significance rests on step 0")
    assert nominal >= 15  # the failure is there
    assert decided == 0 and named == nominal
    without = gengen.analyse(spike_at_step_0(20, 0), id_testset="id", n_boot=99, pooling=None, leave_one_out=False)
    assert without.pairs["p_deciding"].equals(without.pairs["p_sieve"])


def test_a_stuck_test_set_with_known_examples_is_untestable_with_its_reason() -> None:
    table = spike_at_step_0(11, 1).assign(n_examples=30_000)
    result = gengen.analyse(table, id_testset="id", n_boot=99)
    pairs = result.pairs
    stuck = (pairs["testset_a"] == "hans") | (pairs["testset_b"] == "hans")
    assert not pairs.loc[stuck, "testable"].any() and pairs.loc[~stuck, "testable"].all()
    assert pairs.loc[stuck, ["r_partial", "p_deciding", "p_adjusted", "se_z", "ci_low"]].isna().all().all()
    assert pairs.loc[stuck, "untestable_reason"].str.contains("hans: 0.500 on checkpoints 2–11").all()
    assert np.isfinite(pairs.loc[~stuck, "p_deciding"]).all()


def test_duplicated_checkpoints_are_counted_once() -> None:
    """A 12-checkpoint run in which 'length' sits at 0.50 on 11 of 12 checkpoints and two evaluations repeat the
    same scores: r_partial was 0.99983 with p_adjusted 2.6e-5; now the rows say what is there."""
    steps, id_acc, rng = learning_curve(12, 4)
    id_acc = np.round(id_acc, 3)
    length = np.full(12, 0.5)
    length[0] = 0.4
    negation = np.round(0.5 + 0.6 * (id_acc - 0.5) + ar1(rng, 12, 0.5, 0.01), 3)
    spelling = np.round(0.5 + 0.7 * (id_acc - 0.5) + ar1(rng, 12, 0.5, 0.01), 3)
    columns = {"id": id_acc, "length": length, "negation": negation, "spelling": spelling}
    for values in columns.values():
        values[6] = values[5]  # two evaluations of the same weights
    result = gengen.analyse(long_table(steps, columns), id_testset="id", n_boot=99)
    pairs = result.pairs
    assert (pairs["n"] == 11).all() and (pairs["n_steps"] == 12).all()
    assert any("1 of 12 checkpoints repeat the scores" in warning for warning in result.warnings)
    with_length = (pairs["testset_a"] == "length") | (pairs["testset_b"] == "length")
    assert not pairs.loc[with_length, "testable"].any()
    assert pairs.loc[with_length, "untestable_reason"].str.startswith("length: 0.500 on checkpoints 2–11").all()
    tested = pairs[pairs["testable"]]
    assert (tested["r_partial"].abs() < 0.999).all() and (tested["p_deciding"] > 0).all()


def test_a_plateau_never_gives_more_information_than_its_informative_checkpoints() -> None:
    """A test set flat for the last 30 of 40 checkpoints: its pairs are tested on 11 informative checkpoints,
    so se_z is at least Fisher's 1/sqrt(11 - 3 - 1)."""
    steps, id_acc, rng = learning_curve(40, 5)
    flat = 0.5 + 0.6 * (id_acc - 0.5) + rng.normal(0, 0.01, steps.size)
    flat[10:] = 0.7
    other = 0.5 + 0.5 * (id_acc - 0.5) + rng.normal(0, 0.01, steps.size)
    third = 0.5 + 0.4 * (id_acc - 0.5) + rng.normal(0, 0.01, steps.size)
    table = long_table(steps, {"id": id_acc, "flat": flat, "other": other, "third": third})
    pairs = gengen.analyse(table, id_testset="id", n_boot=99, pooling=None).pairs
    row = pairs[(pairs["testset_a"] == "flat") & (pairs["testset_b"] == "other")].iloc[0]
    assert row["n_informative"] == 11 and row["testable"]
    assert row["se_z"] >= 1 / np.sqrt(11 - 3 - 1) - 1e-12
    assert row["df_sieve"] == pytest.approx(1 / row["se_z"] ** 2 + 1)


def test_pooling_leaves_untestable_runs_out_and_says_so() -> None:
    tables = [spike_at_step_0(11, seed).assign(run=f"seed={seed}", n_examples=30_000) for seed in range(3)]
    result = gengen.analyse(pd.concat(tables, ignore_index=True), id_testset="id", n_boot=99)
    pooled = result.pooled
    stuck = (pooled["testset_a"] == "hans") | (pooled["testset_b"] == "hans")
    assert (pooled.loc[stuck, "runs_excluded"] == 3).all() and pooled.loc[stuck, "r_random"].isna().all()
    assert pooled.loc[stuck, "diagnostics"].str.contains("left out: hans: 0.500").all()
    assert not pooled.loc[stuck, "significant_random"].any()
    assert (pooled.loc[~stuck, "runs_excluded"] == 0).all() and (pooled.loc[~stuck, "n_runs"] == 3).all()


def curved_pretraining_curves(n: int = 40, m: int = 12, seed: int = 0) -> pd.DataFrame:
    """OLMo-2-like: ID = C4 cross-entropy falling over log-spaced steps; every task a saturating function of it
    (its own height and curvature) plus its own AR(0.7) noise — independent given ID."""
    rng = np.random.default_rng(seed)
    steps = np.unique(np.geomspace(100, 900_000, n).astype(int))
    loss = 3.5 - 1.2 * (1 - np.exp(-steps / 150_000))
    progress = loss.max() - loss
    columns: dict[str, np.ndarray] = {}
    for j in range(m):
        height, curvature = rng.uniform(0.3, 0.6), rng.uniform(1.5, 3.0)
        columns[f"task{j}"] = np.clip(
            0.25 + height * (1 - np.exp(-curvature * progress)) + ar1(rng, steps.size, 0.7, 0.004), 0, 1
        )
    table = long_table(steps, columns)
    c4 = long_table(steps, {"c4": loss}).assign(metric="CrossEntropyLoss")
    return pd.concat([table, c4], ignore_index=True)


def test_the_default_control_follows_curved_learning_curves() -> None:
    """Under the line, a curved ID dependence makes most independent pairs 'significant' while every row is
    noted non-linear (OLMo-2's 351 of 351); the default (fit='auto') takes the capped GAM there and does not."""
    table = curved_pretraining_curves()
    options = {"id_testset": "c4", "id_metric": "CrossEntropyLoss", "n_boot": 199, "pooling": None}
    linear = gengen.analyse(table, fit="linear", **options)
    assert linear.pairs["significant"].mean() > 0.5
    assert linear.pairs["diagnostics"].str.contains("non-linear").mean() > 0.9
    assert any("66 of 66 pairs: the ID effect looks non-linear; rerun with --fit gam" in w for w in linear.warnings)
    default = gengen.analyse(table, **options)
    pairs = default.pairs
    assert (pairs["fit"] == "gam").all() and pairs["fit_reason"].str.contains("test sets curve in ID").all()
    assert pairs["significant"].mean() < 0.1
    assert not pairs["diagnostics"].str.contains("non-linear").any()
    assert default.settings.fit == "auto" and default.warnings[0].startswith("control (fit='auto')")
    # On straight dependence the default keeps the line.
    steps, id_acc, rng = learning_curve(40, 6)
    straight = {
        "id": id_acc,
        **{f"t{j}": 0.5 + 0.6 * (id_acc - 0.5) + ar1(rng, steps.size, 0.5, 0.01) for j in range(4)},
    }
    assert (gengen.analyse(long_table(steps, straight), id_testset="id", n_boot=99).pairs["fit"] == "linear").all()


def test_exactly_collinear_residuals_are_untestable_not_p_zero() -> None:
    """Five checkpoints where one test set mirrors another: r_partial would be -1 with t = -inf and p = 0."""
    steps = np.array([0, 100, 200, 300, 400])
    id_acc = np.array([0.50, 0.60, 0.65, 0.70, 0.72])
    a = np.array([0.31, 0.29, 0.34, 0.30, 0.33])
    columns = {"id": id_acc, "a": a, "b": 0.64 - a, "c": np.array([0.28, 0.31, 0.30, 0.33, 0.29])}
    pairs = gengen.analyse(long_table(steps, columns), id_testset="id", inference="t-test", pooling=None).pairs
    row = pairs[(pairs["testset_a"] == "a") & (pairs["testset_b"] == "b")].iloc[0]
    assert not row["testable"] and np.isnan(row["r_partial"]) and np.isnan(row["p_deciding"])
    assert row["untestable_reason"] == (
        "a and b: their residuals are exactly collinear over 5 checkpoints (r_partial = -1.000); nothing left to test"
    )
    assert pairs.loc[pairs["testable"], "p_value"].gt(0).all()
