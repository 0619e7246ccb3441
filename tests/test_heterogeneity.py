"""gengen.across.heterogeneity: Cochran's Q across models, sizes and shot regimes, against scipy and statsmodels.

metafor is not installed here; the reference is Cochran's Q written out in the test with scipy's chi-squared
survival function (what ``metafor::rma(yi, vi, method = "FE")$QE`` and its ``QEp`` compute).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from gengen.across.compare import Comparison, compare
from gengen.across.heterogeneity import group_estimates, heterogeneity_table, heterogeneity_test, pairwise_differences
from gengen.analyse import analyse
from gengen.calibration.simulate import simulate_trajectories

NAMES = ["arc", "boolq", "copa", "hella"]


def reference_q(z: np.ndarray, v: np.ndarray, nu: np.ndarray | None = None) -> tuple[float, float, float]:
    """Cochran's Q, its p (chi-squared; with the variances' df ``nu``, F on Satterthwaite's df) and I²."""
    w = 1 / v
    mean = np.sum(w * z) / np.sum(w)
    q = float(np.sum(w * (z - mean) ** 2))
    df = len(z) - 1
    if nu is None or not np.isfinite(nu).any():  # known variances (or all of them on the normal): the χ² limit
        p = float(scipy_stats.chi2.sf(q, df))
    else:
        p = float(scipy_stats.f.sf(q / df, df, np.sum(w) ** 2 / np.sum(w**2 / nu)))
    return q, p, max(0.0, (q - df) / q)


def single_run_pairs(seed: int = 3, models: tuple[str, ...] = ("m1", "m2", "m3")) -> pd.DataFrame:
    """A pairs table with one run per model: r_partial and se_z drawn at random, one untestable row."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for a, b in combinations(NAMES, 2):
            rows.append(
                {
                    "level": "run",
                    "model": model,
                    "run": "main",
                    "testset_a": b if model == "m2" else a,  # pairs stored either way round must match
                    "testset_b": a if model == "m2" else b,
                    "r_partial": rng.uniform(-0.8, 0.8),
                    "se_z": rng.uniform(0.1, 0.3),
                    "p_adjusted": rng.uniform(0, 1),
                    "testable": True,
                }
            )
    table = pd.DataFrame(rows)
    untestable = (table["model"] == "m3") & (table["testset_a"] == "arc") & (table["testset_b"] == "boolq")
    table.loc[untestable, ["testable", "r_partial", "se_z"]] = [False, np.nan, np.nan]
    return table


def test_q_matches_the_written_out_statistic() -> None:
    rng = np.random.default_rng(0)
    for m in (2, 3, 7):
        z, v = rng.normal(0, 0.5, m), rng.uniform(0.01, 0.1, m)
        result = heterogeneity_test(z, v)
        q, p, i2 = reference_q(z, v)
        assert result.df == m - 1 and result.n_groups == m
        assert_allclose([result.q, result.p_value, result.i2], [q, p, i2], rtol=1e-10)
        # estimated variances: F on Satterthwaite's df, heavier-tailed than chi-squared
        nu = rng.uniform(5, 40, m)
        with_df = heterogeneity_test(z, v, df=nu)
        assert_allclose(with_df.p_value, reference_q(z, v, nu)[1], rtol=1e-9)
        assert with_df.p_value > result.p_value
    # NaN estimates and non-positive variances are left out, not counted in the df
    result = heterogeneity_test([0.1, np.nan, 0.5, 0.3], [0.02, 0.02, 0.0, 0.03])
    assert result.n_groups == 2 and result.df == 1
    assert_allclose(result.q, reference_q(np.array([0.1, 0.3]), np.array([0.02, 0.03]))[0])


def test_table_from_single_runs_against_scipy_and_holm() -> None:
    pairs = single_run_pairs()
    estimates = group_estimates(pairs)
    table = heterogeneity_table(estimates, adjust="holm")
    assert set(table["across"]) == {"model"} and len(table) == 6
    expected_p = []
    for row in table.itertuples(index=False):
        rows = pairs[
            (pairs[["testset_a", "testset_b"]].min(axis=1) == row.testset_a)
            & (pairs[["testset_a", "testset_b"]].max(axis=1) == row.testset_b)
            & pairs["testable"]
        ]
        z, v = np.arctanh(rows["r_partial"].to_numpy()), rows["se_z"].to_numpy() ** 2
        q, p, i2 = reference_q(z, v)
        assert row.n_groups_heterogeneity == len(rows)
        assert_allclose([row.q_heterogeneity, row.p_heterogeneity, row.i2_heterogeneity], [q, p, i2], rtol=1e-10)
        expected_p.append(p)
    # the untestable row is left out: arc/boolq is tested across two models, not three
    arc_boolq = table[(table["testset_a"] == "arc") & (table["testset_b"] == "boolq")].iloc[0]
    assert arc_boolq["n_groups_heterogeneity"] == 2 and arc_boolq["groups_heterogeneity"] == "m1;m2"
    assert_allclose(table["p_heterogeneity_adjusted"], multipletests(expected_p, method="holm")[1], rtol=1e-10)


def test_pairwise_differences_against_hand_computation() -> None:
    pairs = single_run_pairs()
    differences = pairwise_differences(group_estimates(pairs))
    pair = differences[(differences["testset_a"] == "copa") & (differences["testset_b"] == "hella")]
    assert len(pair) == 3
    by_model = {}
    for model in ("m1", "m2", "m3"):
        row = pairs[(pairs["model"] == model) & pairs["testset_a"].isin(["copa", "hella"])]
        row = row[row["testset_b"].isin(["copa", "hella"])].iloc[0]
        by_model[model] = (np.arctanh(row["r_partial"]), row["se_z"] ** 2)
    expected = []
    for row in pair.itertuples(index=False):
        (za, va), (zb, vb) = by_model[row.group_a], by_model[row.group_b]
        statistic = (za - zb) / np.sqrt(va + vb)
        assert_allclose(row.statistic, statistic, rtol=1e-10)
        expected.append(2 * scipy_stats.norm.sf(abs(statistic)))
    assert_allclose(pair["p_difference"], expected, rtol=1e-9)
    assert_allclose(pair["p_difference_adjusted"], multipletests(expected, method="holm")[1], rtol=1e-9)


@pytest.mark.parametrize(
    "fit",
    ["linear", "gam"],
)
def test_a_model_with_seeds_enters_with_its_pooled_random_effects_estimate(fit: str) -> None:
    frames = [
        simulate_trajectories(n=30, n_testsets=3, phi=0.5, shared=0.4, n_runs=3, seed=seed, model=model)
        for seed, model in ((1, "alpha"), (2, "beta"))
    ]
    scores = pd.concat(frames, ignore_index=True)
    analysis = analyse(scores, id_testset="id", metric="accuracy", n_boot=199, by="model", fit=fit)
    # The pooled table weighs runs by the sieve's se_z²; by default the across-model tests take the variance
    # each row's reported interval implies, which leave-one-out may widen (the hull over deletions: under the
    # GAM here two of beta's runs, p_loo_max 1, moving its random effect by 0.035 on z). With the sieve's own
    # variances the group estimate is the pooled table's random effect.
    estimates = group_estimates(analysis.pairs, interval_variance=False)
    assert set(estimates["n_runs"]) == {3}
    merged = estimates.merge(analysis.pooled, on=["model", "testset_a", "testset_b"])
    assert len(merged) == len(estimates) == 6
    # the pooled (meta) table's random-effects estimate and standard error, on Fisher's z scale
    assert_allclose(merged["z"], np.arctanh(merged["r_random"]), rtol=1e-10)
    assert_allclose(merged["variance"], merged["se_random"] ** 2, rtol=1e-10)
    table = heterogeneity_table(estimates)
    for row in table.itertuples(index=False):
        rows = merged[(merged["testset_a"] == row.testset_a) & (merged["testset_b"] == row.testset_b)]
        q, p, _ = reference_q(
            np.arctanh(rows["r_random"].to_numpy()),
            rows["se_random"].to_numpy() ** 2,
            rows["df_random"].fillna(np.inf).to_numpy(),
        )
        assert_allclose([row.q_heterogeneity, row.p_heterogeneity], [q, p], rtol=1e-9)


def test_sizes_within_a_family_and_shot_regimes() -> None:
    rng = np.random.default_rng(8)
    rows = []
    for size in ("160m", "410m", "1b"):
        for shots in (0, 5):
            for a, b in combinations(NAMES, 2):
                rows.append(
                    {
                        "model": f"pythia-{size}",
                        "family": "pythia",
                        "size": size,
                        "shots": shots,
                        "run": f"shots={shots}",
                        "testset_a": a,
                        "testset_b": b,
                        "r_partial": rng.uniform(-0.6, 0.6),
                        "se_z": 0.2,
                    }
                )
    table = heterogeneity_table(group_estimates(pd.DataFrame(rows)))
    cells = table.groupby("across")["cell"].unique().to_dict()
    assert sorted(cells) == ["model", "shots", "size"]
    assert sorted(cells["size"]) == ["family=pythia, shots=0", "family=pythia, shots=5"]
    assert len(cells["shots"]) == 3 and (table[table["across"] == "shots"]["df_heterogeneity"] == 1).all()
    # the models carry the shot regime in their label when a model has several
    assert "pythia-160m shots=0" in table["groups_heterogeneity"].iloc[0]
    size_row = table[(table["across"] == "size") & (table["cell"] == "family=pythia, shots=5")].iloc[0]
    frame = pd.DataFrame(rows)
    chosen = frame[(frame["shots"] == 5) & (frame["testset_a"] == size_row["testset_a"])]
    chosen = chosen[chosen["testset_b"] == size_row["testset_b"]]
    q, p, _ = reference_q(np.arctanh(chosen["r_partial"].to_numpy()), np.full(3, 0.04))
    assert_allclose([size_row["q_heterogeneity"], size_row["p_heterogeneity"]], [q, p], rtol=1e-10)


def test_compare_carries_the_heterogeneity_columns(tmp_path: Path) -> None:
    pairs = single_run_pairs()
    comparison = compare(pairs, n_perm=49)
    for column in ("q_heterogeneity", "df_heterogeneity", "p_heterogeneity", "p_heterogeneity_adjusted"):
        assert column in comparison.wide.columns
    assert len(comparison.differences) == 6 * 3 - 2  # arc/boolq: two models, one difference
    comparison.to_dir(tmp_path)
    again = Comparison.from_dir(tmp_path)
    assert_allclose(again.heterogeneity["q_heterogeneity"], comparison.heterogeneity["q_heterogeneity"])
    # a pairs table without variances still compares, without heterogeneity
    bare = compare(pairs.drop(columns=["se_z"]), n_perm=49)
    assert bare.heterogeneity.empty and "q_heterogeneity" not in bare.wide.columns


@pytest.mark.parametrize("bad", [{"z": [0.1, 0.2], "variance": [0.1]}])
def test_bad_input(bad: dict) -> None:
    with pytest.raises(ValueError, match="different lengths"):
        heterogeneity_test(**bad)


def test_f_tail_and_welch_differences_against_scipy() -> None:
    from gengen.across.heterogeneity import f_sf

    for x, d1, d2 in ((3.0, 3, 20.0), (0.4, 1, 4.5), (12.0, 6, 3.3), (2.2, 2, 1e4), (45.0, 3, 12.5)):
        assert_allclose(f_sf(x, d1, d2), scipy_stats.f.sf(x, d1, d2), rtol=1e-9)
    assert_allclose(f_sf(2.0, 3, np.inf), scipy_stats.chi2.sf(6.0, 3), rtol=1e-10)
    pairs = single_run_pairs().assign(df_sieve=lambda t: np.linspace(6, 30, len(t)))
    differences = pairwise_differences(group_estimates(pairs))
    row = differences.iloc[0]
    a = pairs[(pairs["model"] == row["group_a"]) & pairs["testable"]]
    b = pairs[(pairs["model"] == row["group_b"]) & pairs["testable"]]
    pick = lambda t: t[  # noqa: E731
        (t[["testset_a", "testset_b"]].min(axis=1) == row["testset_a"])
        & (t[["testset_a", "testset_b"]].max(axis=1) == row["testset_b"])
    ].iloc[0]
    one, two = pick(a), pick(b)
    va, vb = one["se_z"] ** 2, two["se_z"] ** 2
    welch = (va + vb) ** 2 / (va**2 / one["df_sieve"] + vb**2 / two["df_sieve"])
    statistic = (np.arctanh(one["r_partial"]) - np.arctanh(two["r_partial"])) / np.sqrt(va + vb)
    assert_allclose([row["df_difference"], row["statistic"]], [welch, statistic], rtol=1e-10)
    assert_allclose(row["p_difference"], 2 * scipy_stats.t.sf(abs(statistic), welch), rtol=1e-9)


def test_identical_estimates_and_extreme_statistics() -> None:
    from gengen.across.heterogeneity import f_sf

    assert heterogeneity_test([0.3, 0.3 + 1e-17], [0.02, 0.02], df=[10.0, 12.0]).p_value == 1.0
    assert f_sf(1e-300, 2, 30.0) == 1.0 and f_sf(1e300, 2, 30.0) == 0.0
