"""gengen.across.compare: sign agreement, Mantel correlation and conflicts against a direct numpy computation."""

from __future__ import annotations

import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from typer.testing import CliRunner

from gengen import stats
from gengen.across.compare import compare
from gengen.analyse import analyse
from gengen.errors import GengenError

NAMES = ["arc", "boolq", "copa", "hella", "piqa", "sciq"]


def random_matrix(rng: np.random.Generator, size: int) -> np.ndarray:
    values = rng.uniform(-0.9, 0.9, (size, size))
    values = (values + values.T) / 2
    np.fill_diagonal(values, 1.0)
    return values


def pairs_table(
    matrices: dict[str, np.ndarray],
    p_values: dict[str, np.ndarray],
    swap: str | None = None,
) -> pd.DataFrame:
    """A pairs table (the columns compare reads) from per-model matrices; ``swap`` stores pairs as (b, a)."""
    rows = []
    for model, matrix in matrices.items():
        for i, j in combinations(range(len(NAMES)), 2):
            a, b = (NAMES[j], NAMES[i]) if model == swap else (NAMES[i], NAMES[j])
            rows.append(
                {
                    "level": "run",
                    "model": model,
                    "run": "main",
                    "testset_a": a,
                    "testset_b": b,
                    "r_partial": matrix[i, j],
                    "p_adjusted": p_values[model][i, j],
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def example() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], pd.DataFrame]:
    rng = np.random.default_rng(11)
    matrices = {model: random_matrix(rng, len(NAMES)) for model in ("small", "medium", "large")}
    p_values = {model: rng.uniform(0, 0.2, (len(NAMES), len(NAMES))) for model in matrices}
    for p in p_values.values():
        p[:] = np.minimum(p, p.T)
    # plant one conflict: arc/boolq significantly positive for small, significantly negative for large
    matrices["small"][0, 1] = matrices["small"][1, 0] = 0.8
    matrices["large"][0, 1] = matrices["large"][1, 0] = -0.7
    for model in ("small", "large"):
        p_values[model][0, 1] = p_values[model][1, 0] = 0.001
    return matrices, p_values, pairs_table(matrices, p_values, swap="medium")


def test_numbers_match_numpy(example: tuple) -> None:
    matrices, p_values, table = example
    result = compare(table, n_perm=199, seed=5)
    assert result.groups == ["small", "medium", "large"]
    rows, cols = np.triu_indices(len(NAMES), 1)
    orders = np.asarray(stats.permutation_indices(len(NAMES), 199, scheme="free", seed=5))
    for group_a, group_b in combinations(["small", "medium", "large"], 2):
        a, b = matrices[group_a], matrices[group_b]
        row = result.agreement[
            (result.agreement["group_a"] == group_a) & (result.agreement["group_b"] == group_b)
        ].iloc[0]
        assert row["n_pairs"] == 15 and row["n_testsets"] == 6
        assert_allclose(row["sign_agreement"], np.mean(np.sign(a[rows, cols]) == np.sign(b[rows, cols])))
        observed = np.corrcoef(a[rows, cols], b[rows, cols])[0, 1]
        assert_allclose(row["mantel_r"], observed, rtol=1e-10)
        permuted = np.array([np.corrcoef(a[rows, cols], b[np.ix_(o, o)][rows, cols])[0, 1] for o in orders])
        assert_allclose(row["mantel_p"], (1 + np.sum(permuted >= observed - 1e-12)) / 200)
    conflicts = result.conflicts
    assert len(conflicts) >= 1
    planted = conflicts[(conflicts["testset_a"] == "arc") & (conflicts["testset_b"] == "boolq")]
    assert ("small", "large") in set(zip(planted["group_positive"], planted["group_negative"], strict=True))
    for row in conflicts.itertuples(index=False):
        assert row.r_positive > 0 > row.r_negative and max(row.p_positive, row.p_negative) < 0.05
    # every significant opposite-sign pair is listed, computed directly
    expected = 0
    for i, j in zip(rows, cols, strict=True):
        for g, h in ((g, h) for g in matrices for h in matrices if g != h):
            if (
                matrices[g][i, j] > 0
                and p_values[g][i, j] < 0.05
                and matrices[h][i, j] < 0
                and p_values[h][i, j] < 0.05
            ):
                expected += 1
    assert len(conflicts) == expected


def test_two_sided_alternative_and_wide_table(example: tuple) -> None:
    matrices, _, table = example
    result = compare(table, n_perm=99, alternative="two-sided", seed=2)
    assert (result.agreement["alternative"] == "two-sided").all()
    wide = result.wide
    assert len(wide) == 15
    assert {"r[small]", "sign[small]", "r[large]"} <= set(wide.columns)
    arc_boolq = wide[(wide["testset_a"] == "arc") & (wide["testset_b"] == "boolq")].iloc[0]
    assert arc_boolq["r[medium]"] == pytest.approx(matrices["medium"][0, 1])
    assert_allclose(result.matrix("small").loc["arc", "copa"], matrices["small"][0, 2])


def test_compare_an_analysis_and_its_cli(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    rows = []
    for model in ("m1", "m2"):
        id_score = np.linspace(0.2, 0.8, 25) + rng.normal(0, 0.05, 25)
        for name in ("id", *NAMES[:4]):
            values = id_score if name == "id" else 0.25 + id_score * 0.5 + rng.normal(0, 0.1, 25)
            rows += [
                {"model": model, "run": "main", "step": s, "testset": name, "metric": "acc", "value": v}
                for s, v in enumerate(values)
            ]
    analysis = analyse(pd.DataFrame(rows), id_testset="id", inference="t-test")
    result = compare(analysis, n_perm=49)
    assert result.groups == ["m1", "m2"]
    assert len(result.agreement) == 1
    analysis.to_dir(tmp_path / "a")

    import typer

    from gengen.cli import compare as compare_cli

    app = typer.Typer()
    compare_cli.register(app)
    app.command("noop")(lambda: None)
    output = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), "--n-perm", "49"])
    assert output.exit_code == 0, output.output
    assert "Mantel r" in output.output
    assert (tmp_path / "a" / "compare_agreement.csv").is_file()
    bad = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), "--source", "pooled"])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and len(bad.output.strip().splitlines()) == 1
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "nothing")])
    assert missing.exit_code == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alternative": "less"}, "option alternative"),
        ({"source_level": "seeds"}, "option source"),
        ({"n_perm": 0}, "option n_perm"),
        ({"source_level": "pooled"}, "no pooled"),
    ],
)
def test_bad_options(example: tuple, options: dict, message: str) -> None:
    with pytest.raises(GengenError, match=message):
        compare(example[2], **options)


def test_a_zero_agrees_with_nothing() -> None:
    """A partial correlation of exactly 0 has no sign: it agrees with neither a positive, a negative nor a zero."""
    rng = np.random.default_rng(21)
    matrices = {model: random_matrix(rng, len(NAMES)) for model in ("small", "large")}
    for model, cells in (("small", [(0, 1), (0, 2), (1, 3)]), ("large", [(0, 1), (2, 4), (1, 3)])):
        for i, j in cells:
            matrices[model][i, j] = matrices[model][j, i] = 0.0
    p_values = {model: np.full((len(NAMES), len(NAMES)), 0.5) for model in matrices}
    result = compare(pairs_table(matrices, p_values), n_perm=49)
    rows, cols = np.triu_indices(len(NAMES), 1)
    a, b = matrices["small"][rows, cols], matrices["large"][rows, cols]
    row = result.agreement.iloc[0]
    assert row["n_sign_agree"] == np.sum(a * b > 0)
    assert row["n_sign_agree"] < np.sum(a * b >= 0)  # counting zeros as agreement would be caught
    assert row["n_sign_agree"] < np.sum(np.sign(a) == np.sign(b))  # and so would two zeros "agreeing"
    assert_allclose(row["sign_agreement"], np.mean(a * b > 0))


def test_a_zero_agrees_with_nothing_at_the_chance_level() -> None:
    """The permutation chance level and its p-value count a zero as agreeing with nothing, like the observed
    agreement: checked against the same permutations evaluated by hand with numpy, and against a closed form
    (a matrix of zeros agrees with nothing under any permutation)."""
    from gengen.across.compare import chance_levels
    from gengen.stats import permutation_indices

    rng = np.random.default_rng(5)
    a, b = random_matrix(rng, 7), random_matrix(rng, 7)
    for i, j in ((0, 1), (0, 2), (3, 5), (4, 6)):
        a[i, j] = a[j, i] = 0.0
    for i, j in ((0, 1), (2, 5), (1, 6)):
        b[i, j] = b[j, i] = 0.0
    rows, cols = np.triu_indices(7, 1)
    x = a[rows, cols]
    orders = np.asarray(permutation_indices(7, 99, scheme="free", seed=3))
    agree = np.array([np.mean(b[np.ix_(order, order)][rows, cols] * x > 0) for order in orders])
    observed = np.mean(x * b[rows, cols] > 0)
    levels = chance_levels(a, b, 99, 3)
    assert_allclose(levels["sign_agreement_chance"], agree.mean(), rtol=1e-12)
    assert_allclose(levels["p_sign_agreement"], (1 + np.sum(agree >= observed - 1e-12)) / 100, rtol=1e-12)
    with warnings.catch_warnings():  # a constant matrix has no Mantel r under any permutation (all NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        nothing = chance_levels(a, np.eye(7), 99, 3)
    assert nothing["sign_agreement_chance"] == 0.0 and nothing["sign_agreement_chance_high"] == 0.0
    assert nothing["p_sign_agreement"] == 1.0  # every permutation's 0 is ≥ the observed 0


def test_model_level_adjustment_is_within_each_model() -> None:
    """source_level="models": each model's p = 2 Φ(−|z|/se) is Holm-adjusted across that model's pairs only
    (scipy's normal tail and statsmodels' Holm by hand), not across every model's pairs."""
    import scipy.stats
    from statsmodels.stats.multitest import multipletests

    from gengen.across.heterogeneity import group_estimates
    from gengen.calibration.simulate import simulate_trajectories

    frames = [
        simulate_trajectories(n=40, n_testsets=5, phi=0.3, shared=0.5, n_runs=2, seed=seed, model=model)
        for seed, model in ((4, "alpha"), (5, "beta"))
    ]
    analysis = analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)
    per_pair = compare(analysis, source_level="models", n_perm=9).per_pair
    estimates = group_estimates(analysis.pairs)
    p = 2 * scipy.stats.norm.sf(np.abs(estimates["z"] / np.sqrt(estimates["variance"])))
    within = np.empty(len(p))
    for _, index in estimates.groupby("unit").indices.items():
        within[index] = multipletests(p[index], method="holm")[1]
    across_all = multipletests(p, method="holm")[1]
    expected = estimates.assign(p=within, across=across_all)
    swap = expected["testset_a"] > expected["testset_b"]
    expected["a"] = np.where(swap, expected["testset_b"], expected["testset_a"])
    expected["b"] = np.where(swap, expected["testset_a"], expected["testset_b"])
    merged = per_pair.merge(
        expected, left_on=["group", "testset_a", "testset_b"], right_on=["unit", "a", "b"], suffixes=("", "_hand")
    )
    assert len(merged) == len(per_pair) == len(estimates) == 20
    assert_allclose(merged["p"], merged["p_hand"], rtol=1e-8)
    assert not np.allclose(merged["p_hand"], merged["across"])  # the data tell the two adjustments apart


def test_pooled_adjustment_is_within_each_cell() -> None:
    """The pooled table adjusts its p-values across the pairs of one cell (one model's seeds), not all cells."""
    from statsmodels.stats.multitest import multipletests

    from gengen.calibration.simulate import simulate_trajectories

    frames = [
        simulate_trajectories(n=40, n_testsets=5, phi=0.3, shared=0.5, n_runs=2, seed=seed, model=model)
        for seed, model in ((4, "alpha"), (5, "beta"))
    ]
    analysis = analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)
    pooled = analysis.pooled
    assert sorted(pooled["model"].unique()) == ["alpha", "beta"]
    for column in ("p_random", "p_fixed"):
        across_all = multipletests(pooled[column].to_numpy(), method="holm")[1]
        within = np.empty(len(pooled))
        for _, index in pooled.groupby("model").indices.items():
            within[index] = multipletests(pooled[column].to_numpy()[index], method="holm")[1]
        assert_allclose(pooled[f"{column}_adjusted"], within, rtol=1e-10)
        assert not np.allclose(within, across_all)  # the data tell the two adjustments apart
