"""gengen.analyse: the pairs table against gengen.stats, pingouin and an independent numpy computation.

References used here: numpy least squares + corrcoef + scipy's t distribution (the partial correlation from
its definition), pingouin.partial_corr, statsmodels' combine_effects (DerSimonian–Laird meta-analysis), and a
hand computation of the Fisher-z formulas.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin
import pytest
import scipy.stats
from numpy.testing import assert_allclose
from typer.testing import CliRunner

from gengen import stats
from gengen.analyse import Analysis, analyse, fisher_meta
from gengen.errors import GengenError

PYTHIA = "data/pythia-lm-eval-v0.3"
FAST = {"n_perm": 99, "n_boot": 99}


# ------------------------------------------------------------------------------------------ fixtures
def load_pythia(root: Path) -> pd.DataFrame:
    """The Pythia lm-eval JSON files as a score table (parsed here, independently of gengen.ingest)."""
    rows = []
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        for file in sorted(folder.glob("*.json")):
            step = int(re.search(r"step(\d+)", file.name).group(1))
            for task, metrics in json.loads(file.read_text())["results"].items():
                for metric, value in metrics.items():
                    if not metric.endswith("_stderr"):
                        rows.append(
                            {
                                "model": folder.name,
                                "run": "main",
                                "step": step,
                                "testset": task,
                                "metric": metric,
                                "value": float(value),
                            }
                        )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def pythia(shared_dir: Path) -> pd.DataFrame:
    return load_pythia(shared_dir / PYTHIA)


def synthetic(
    n_steps: int = 30,
    n_runs: int = 2,
    n_ood: int = 5,
    seed: int = 1,
    phi: float = 0.0,
    models: tuple[str, ...] = ("m1",),
) -> pd.DataFrame:
    """Score table: ID learning curve, OOD = a * ID + shared component + AR(1) noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for run in range(n_runs):
            steps = np.arange(n_steps) * 10
            id_score = 1 - np.exp(-np.arange(n_steps) / 8) + rng.normal(0, 0.02, n_steps)
            shared = rng.normal(0, 0.03, n_steps)
            for t in range(n_steps):
                rows.append(
                    {
                        "model": model,
                        "run": f"seed={run}",
                        "seed": run,
                        "step": int(steps[t]),
                        "testset": "id",
                        "metric": "acc",
                        "value": float(id_score[t]),
                    }
                )
            for j in range(n_ood):
                noise = np.zeros(n_steps)
                innovations = rng.normal(0, 0.03, n_steps)
                for t in range(n_steps):
                    noise[t] = (phi * noise[t - 1] if t else 0.0) + innovations[t]
                value = 0.3 + (0.2 + 0.1 * j) * id_score + (shared if j < 2 else 0) + noise
                for t in range(n_steps):
                    rows.append(
                        {
                            "model": model,
                            "run": f"seed={run}",
                            "seed": run,
                            "step": int(steps[t]),
                            "testset": f"ood{j}",
                            "metric": "acc",
                            "value": float(value[t]),
                        }
                    )
    table = pd.DataFrame(rows)
    # Accuracies lie in [0, 1] (gengen refuses others): one affine map for the whole table, which changes no
    # correlation, partial correlation or rank.
    low, high = table["value"].min(), table["value"].max()
    table["value"] = 0.05 + 0.9 * (table["value"] - low) / (high - low)
    return table


def numpy_partial(x: np.ndarray, y: np.ndarray, covar: np.ndarray) -> tuple[float, float, float, int]:
    """Partial correlation from its definition: residuals of lstsq on [1, covar], corrcoef, t on n-2-k df."""
    design = np.column_stack([np.ones(len(x)), covar])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    r = float(np.corrcoef(rx, ry)[0, 1])
    df = len(x) - 2 - (design.shape[1] - 1)
    t = r * np.sqrt(df / (1 - r * r))
    return r, float(t), float(2 * scipy.stats.t.sf(abs(t), df)), df


def rows_of(pairs: pd.DataFrame, model: str, run: str) -> pd.DataFrame:
    return pairs[(pairs["model"] == model) & (pairs["run"] == run)].reset_index(drop=True)


# ----------------------------------------------------------------------------- table = gengen.stats
def test_pairs_equal_gengen_stats_on_the_same_inputs() -> None:
    df = synthetic()
    result = analyse(
        df, id_testset="id", inference=("t-test", "permutation", "bootstrap"), n_perm=199, n_boot=199, seed=3
    )
    table = rows_of(result.pairs, "m1", "seed=1")
    wide = df[(df["run"] == "seed=1")].pivot(index="step", columns="testset", values="value").sort_index()
    names = [f"ood{j}" for j in range(5)]
    x = wide[names].to_numpy()
    covar = wide[["id"]].to_numpy()
    pcm = stats.partial_corr_matrix(x, covar)
    perm = stats.permutation_test(
        x, covar, n_perm=199, scheme="block", block_length=stats.default_block_length(30), seed=3
    )
    boot = stats.bootstrap_ci(x, covar, n_boot=199, scheme="block", block_length=stats.default_block_length(30), seed=3)
    i, j = np.triu_indices(5, 1)
    assert list(table["testset_a"]) == [names[a] for a in i]
    assert list(table["testset_b"]) == [names[b] for b in j]
    assert_allclose(table["r_partial"], np.asarray(pcm.r)[i, j], rtol=1e-12)
    assert_allclose(table["statistic"], np.asarray(pcm.statistic)[i, j], rtol=1e-12)
    assert_allclose(table["p_value"], np.asarray(pcm.p_value)[i, j], rtol=1e-12)
    assert_allclose(table["p_perm"], np.asarray(perm.p_value)[i, j], rtol=1e-12)
    assert_allclose(table["boot_ci_low"], np.asarray(boot.ci_low)[i, j], rtol=1e-12)
    assert_allclose(table["boot_ci_high"], np.asarray(boot.ci_high)[i, j], rtol=1e-12)
    # The deciding p is a permutation p, which has no interval: the row says so rather than showing another's.
    assert table["ci_low"].isna().all() and table["ci_high"].isna().all()
    assert table["ci_method"].str.startswith("none: a permutation test").all()
    assert_allclose(table["p_adjusted"], stats.p_adjust(np.asarray(perm.p_value)[i, j], method="holm"))
    raw = [stats.partial_corr(x[:, a], x[:, b]).r for a, b in zip(i, j, strict=True)]
    assert_allclose(table["r_raw"], raw, rtol=1e-12)
    assert (table["p_adjusted_from"] == "p_perm").all()
    assert table["boot_ci_method"].str.startswith("bootstrap (block").all()
    assert table["p_perm_method"].str.startswith("permutation (block").all()
    assert (table[["n", "k"]].to_numpy() == [30, 1]).all()
    assert len(result.pairs) == 2 * 10


def test_max_t_adjustment_is_the_family_wise_permutation_p() -> None:
    df = synthetic(n_runs=1)
    result = analyse(df, id_testset="id", inference="permutation", adjust="maxT", n_perm=199, scheme="circular")
    wide = df.pivot(index="step", columns="testset", values="value").sort_index()
    x = wide[[f"ood{j}" for j in range(5)]].to_numpy()
    perm = stats.permutation_test(
        x,
        wide[["id"]].to_numpy(),
        n_perm=199,
        scheme="circular",
        block_length=stats.default_block_length(30),
        family_wise=True,
        seed=0,
    )
    i, j = np.triu_indices(5, 1)
    assert_allclose(result.pairs["p_adjusted"], np.asarray(perm.p_fwer)[i, j])
    assert_allclose(result.pairs["p_perm"], np.asarray(perm.p_value)[i, j])
    assert result.pairs["p_adjusted_from"].str.contains("maxT").all()
    with pytest.raises(GengenError, match="needs inference 'permutation'"):
        analyse(df, id_testset="id", inference="t-test", adjust="maxT")


def distinct_checkpoints(wide: pd.DataFrame) -> pd.DataFrame:
    """The checkpoints whose scores differ from the checkpoint before on some test set (Pythia's steps 0 and 1
    score identically on every task: one checkpoint, not two)."""
    repeat = wide.diff().eq(0).all(axis=1)
    return wide[~repeat]


def test_pairs_equal_pingouin_on_a_sample(pythia: pd.DataFrame) -> None:
    result = analyse(pythia, id_testset="lambada_openai", inference="t-test", pooling=None)
    sample = result.pairs.sample(12, random_state=0)
    for row in sample.itertuples(index=False):
        data = distinct_checkpoints(
            pythia[(pythia["model"] == row.model) & (pythia["metric"] == "acc")].pivot(
                index="step", columns="testset", values="value"
            )
        )
        assert len(data) == 26 and row.n == 26 and row.n_steps == 27
        expected = pingouin.partial_corr(data=data, x=row.testset_a, y=row.testset_b, covar="lambada_openai")
        assert_allclose(row.r_partial, expected["r"].iloc[0], rtol=1e-9, atol=1e-12)
        assert_allclose(
            row.p_value,
            expected["p_val"].iloc[0] if "p_val" in expected else expected["p-val"].iloc[0],
            rtol=1e-6,
            atol=1e-12,
        )
        assert row.n == expected["n"].iloc[0]


def test_rank_methods_match_pingouin_and_gengen_stats() -> None:
    df = synthetic(n_runs=1)
    wide = df.pivot(index="step", columns="testset", values="value")
    spearman = analyse(
        df, id_testset="id", method="spearman", inference=("permutation", "bootstrap"), n_perm=49, n_boot=49
    )
    kendall = analyse(df, id_testset="id", method="kendall", inference="t-test")
    for row in spearman.pairs.itertuples(index=False):
        expected = pingouin.partial_corr(data=wide, x=row.testset_a, y=row.testset_b, covar="id", method="spearman")
        assert_allclose(row.r_partial, expected["r"].iloc[0], rtol=1e-9)
    for row in kendall.pairs.itertuples(index=False):
        expected = stats.partial_corr(wide[row.testset_a], wide[row.testset_b], wide[["id"]], method="kendall")
        assert_allclose([row.r_partial, row.p_value], [expected.r, expected.p_value], rtol=1e-12)
    assert (spearman.pairs["method"] == "spearman").all() and spearman.pairs["p_perm"].notna().all()


# --------------------------------------------------------------------------- Pythia, end to end
def test_pythia_end_to_end_against_numpy(pythia: pd.DataFrame, tmp_path: Path) -> None:
    result = analyse(pythia, id_testset="lambada_openai", metric="acc", **FAST)
    pairs = result.pairs
    models = sorted(pythia["model"].unique())
    ood = sorted(set(pythia.loc[pythia["metric"] == "acc", "testset"]) - {"lambada_openai"})
    assert len(ood) == 64
    assert set(pairs["model"]) == set(models)
    assert len(pairs) == len(models) * 64 * 63 // 2
    # Steps 0 and 1 score identically on every task: 26 distinct checkpoints of 27.
    assert (pairs["n"] == 26).all() and (pairs["n_steps"] == 27).all()
    assert (pairs["k"] == 1).all() and (pairs["df"] == 23).all()
    assert sum("1 of 27 checkpoints repeat the scores" in warning for warning in result.warnings) == 2
    for model in models:
        wide = distinct_checkpoints(
            pythia[(pythia["model"] == model) & (pythia["metric"] == "acc")]
            .pivot(index="step", columns="testset", values="value")
            .sort_index()
        )
        table = rows_of(pairs, model, "main")
        expected = np.array(
            [
                numpy_partial(wide[a].to_numpy(), wide[b].to_numpy(), wide["lambada_openai"].to_numpy())[:3]
                for a, b in zip(table["testset_a"], table["testset_b"], strict=True)
            ]
        )
        assert_allclose(table["r_partial"], expected[:, 0], rtol=1e-8, atol=1e-10)
        assert_allclose(table["statistic"], expected[:, 1], rtol=1e-7, atol=1e-9)
        assert_allclose(table["p_value"], expected[:, 2], rtol=1e-6, atol=1e-12)
        raw = [np.corrcoef(wide[a], wide[b])[0, 1] for a, b in zip(table["testset_a"], table["testset_b"], strict=True)]
        assert_allclose(table["r_raw"], raw, rtol=1e-8, atol=1e-10)
    written = result.to_dir(tmp_path / "out")
    for name in ("pairs.csv", "pairs.parquet", "summary.json", "scores.parquet"):
        assert written[name].is_file()
    csv = pd.read_csv(tmp_path / "out" / "pairs.csv")
    required = [
        "model",
        "run",
        "testset_a",
        "testset_b",
        "metric",
        "n",
        "r_raw",
        "r_partial",
        "p_value",
        "p_adjusted",
        "ci_low",
        "ci_high",
        "fit",
        "method",
        "inference",
    ]
    assert set(required) <= set(csv.columns)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["settings"]["id_testset"] == "lambada_openai"
    assert len(summary["groups"]) == 2
    again = Analysis.from_dir(tmp_path / "out")
    assert_allclose(again.pairs["r_partial"], pairs["r_partial"])


# --------------------------------------------------------------------------------- sign convention
def test_lower_is_better_metric_is_negated_and_recorded() -> None:
    df = synthetic(n_runs=1)
    loss = df.assign(metric="loss", value=-df["value"])
    as_acc = analyse(df, id_testset="id", inference="t-test")
    as_loss = analyse(loss, id_testset="id", metric="loss", inference="t-test")
    assert_allclose(as_loss.pairs["r_partial"], as_acc.pairs["r_partial"], rtol=1e-12)
    assert (as_loss.pairs["sign"] == -1).all() and (as_acc.pairs["sign"] == 1).all()
    assert_allclose(as_loss.scores["value"].to_numpy(), as_acc.scores["value"].to_numpy())
    assert as_loss.summary()["sign_convention"]["negated_in_this_analysis"] == ["loss"]
    # a metric the user declares lower-is-better is negated too
    custom = analyse(
        df.assign(metric="wrongness"),
        id_testset="id",
        metric="wrongness",
        inference="t-test",
        lower_is_better=["wrongness"],
        progress=True,
    )
    assert (custom.pairs["sign"] == -1).all()


# ------------------------------------------------------------------------------------ autocorrelation
def test_autocorrelation_warning_only_when_residuals_are_autocorrelated() -> None:
    smooth = analyse(synthetic(n_runs=1, phi=0.97, n_steps=60), id_testset="id", inference="t-test")
    assert any("autocorrelated" in warning and "t-test" in warning for warning in smooth.warnings)
    assert smooth.pairs["autocorr_high"].any()
    white = analyse(synthetic(n_runs=1, phi=0.0, n_steps=60, seed=5), id_testset="id", inference="t-test")
    assert not any("autocorrelated" in warning for warning in white.warnings)
    # block schemes do not assume independence: no warning when the t-test is not asked for
    block = analyse(
        synthetic(n_runs=1, phi=0.97, n_steps=60),
        id_testset="id",
        inference="permutation",
        scheme="block",
        n_perm=49,
    )
    assert not any("autocorrelated" in warning for warning in block.warnings)


# -------------------------------------------------------------------------------------- across runs
def test_across_runs_mode_correlates_final_scores_across_runs() -> None:
    df = synthetic(n_runs=25, n_steps=6, seed=7)
    final = df[df["step"] == df["step"].max()]
    result = analyse(final, id_testset="id", inference=("permutation", "bootstrap"), **FAST)
    assert result.settings.mode_resolved == "across_runs"
    assert set(result.pairs["level"]) == {"across_runs"}
    assert (result.pairs["n"] == 25).all()
    assert result.pairs["p_perm_method"].str.startswith("permutation (free").all()
    wide = final.pivot(index="run", columns="testset", values="value")
    for row in result.pairs.itertuples(index=False):
        r, t, p, _ = numpy_partial(
            wide[row.testset_a].to_numpy(), wide[row.testset_b].to_numpy(), wide["id"].to_numpy()
        )
        assert_allclose([row.r_partial, row.statistic, row.p_value], [r, t, p], rtol=1e-7)
    forced = analyse(df, id_testset="id", mode="across_runs", inference="t-test")
    assert_allclose(forced.pairs["r_partial"], result.pairs["r_partial"], rtol=1e-12)


# ------------------------------------------------------------------------------------ meta-analysis
def test_fisher_meta_matches_hand_computation() -> None:
    r = np.array([0.20, 0.55, 0.62])
    n = np.array([20, 30, 25])
    k = np.array([1, 1, 1])
    z = [0.5 * np.log((1 + value) / (1 - value)) for value in r]
    v = [1 / (count - 3 - 1) for count in n]
    w = [1 / item for item in v]
    z_fixed = sum(wi * zi for wi, zi in zip(w, z, strict=True)) / sum(w)
    q = sum(wi * (zi - z_fixed) ** 2 for wi, zi in zip(w, z, strict=True))
    tau2 = max(0.0, (q - 2) / (sum(w) - sum(wi**2 for wi in w) / sum(w)))
    w_star = [1 / (vi + tau2) for vi in v]
    z_random = sum(wi * zi for wi, zi in zip(w_star, z, strict=True)) / sum(w_star)
    # Hartung–Knapp's spread about z_random widens the variance where it exceeds 1, on R - 1 = 2 df
    spread = sum(wi * (zi - z_random) ** 2 for wi, zi in zip(w_star, z, strict=True)) / 2
    assert spread > 1
    se_random = np.sqrt(spread / sum(w_star))
    result = fisher_meta(r, n, k)
    assert result.n_runs == 3 and result.q_df == 2 and result.df_random == 2
    assert_allclose(result.r_fixed, np.tanh(z_fixed), rtol=1e-12)
    assert_allclose(result.se_fixed, 1 / np.sqrt(sum(w)), rtol=1e-12)
    assert_allclose(result.q, q, rtol=1e-12)
    assert_allclose(result.i2, max(0.0, (q - 2) / q), rtol=1e-12)
    assert_allclose(result.tau2, tau2, rtol=1e-12)
    assert_allclose(result.r_random, np.tanh(z_random), rtol=1e-12)
    assert_allclose(result.ci_low_random, np.tanh(z_random - scipy.stats.t.ppf(0.975, 2) * se_random), rtol=1e-10)
    assert_allclose(result.p_random, 2 * scipy.stats.t.sf(abs(z_random / se_random), 2), rtol=1e-10)
    assert_allclose(result.p_q, scipy.stats.chi2.sf(q, 2), rtol=1e-10)
    # and against statsmodels' DerSimonian–Laird implementation
    from statsmodels.stats.meta_analysis import combine_effects

    reference = combine_effects(np.array(z), np.array(v), method_re="dl")
    assert_allclose(np.arctanh(result.r_random), reference.mean_effect_re, rtol=1e-10)
    assert_allclose(np.arctanh(result.r_fixed), reference.mean_effect_fe, rtol=1e-10)
    assert_allclose(result.tau2, reference.tau2, rtol=1e-10)
    assert_allclose(result.se_random, np.sqrt(reference.var_hksj_re), rtol=1e-10)  # statsmodels' HKSJ


def test_pooled_table_meta_analyses_the_run_rows() -> None:
    df = synthetic(n_runs=3)
    result = analyse(df, id_testset="id", inference="t-test")
    assert len(result.pooled) == 10
    row = result.pooled.iloc[0]
    runs = result.pairs[
        (result.pairs["testset_a"] == row["testset_a"]) & (result.pairs["testset_b"] == row["testset_b"])
    ]
    expected = fisher_meta(runs["r_partial"].to_numpy(), runs["n"].to_numpy(), runs["k"].to_numpy())
    assert_allclose(row["r_random"], expected.r_random, rtol=1e-12)
    assert row["n_runs"] == 3 and row["n_total"] == 90
    assert_allclose(result.pooled["p_random_adjusted"], stats.p_adjust(result.pooled["p_random"].to_numpy()))


def test_pooled_residuals_against_numpy() -> None:
    df = synthetic(n_runs=3, n_steps=20)
    result = analyse(df, id_testset="id", inference="t-test", pooling="residuals")
    pooled = result.pooled_residuals
    assert len(pooled) == 10 and (pooled["level"] == "pooled_residuals").all()
    assert (pooled["n"] == 60).all() and (pooled["df"] == 60 - 2 * 3 - 1).all()
    residuals = {}
    for _, rows in df.groupby("run"):
        wide = rows.pivot(index="step", columns="testset", values="value").sort_index()
        design = np.column_stack([np.ones(len(wide)), wide["id"]])
        for name in wide.columns:
            y = wide[name].to_numpy()
            residuals.setdefault(name, []).append(y - design @ np.linalg.lstsq(design, y, rcond=None)[0])
    for row in pooled.itertuples(index=False):
        a = np.concatenate(residuals[row.testset_a])
        b = np.concatenate(residuals[row.testset_b])
        r = np.corrcoef(a, b)[0, 1]
        t = r * np.sqrt(53 / (1 - r * r))
        assert_allclose([row.r_partial, row.p_value], [r, 2 * scipy.stats.t.sf(abs(t), 53)], rtol=1e-7)


# --------------------------------------------------------------------------------------- bad options
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"id_testset": "nope"}, "id_testset 'nope' is not a test set of the score table"),
        ({"id_testset": "id", "ood": "ood1,nope"}, "ood 'nope' is not a test set with metric 'acc'"),
        ({"id_testset": "id", "ood": "id,ood1"}, "ood lists 'id', the in-domain test set"),
        ({"id_testset": "id", "ood": "ood1"}, "ood needs at least 2 test sets to form a pair, got 'ood1'"),
        ({"id_testset": "id", "fit": "cubic"}, "fit must be one of linear, gam, auto, got 'cubic'"),
        ({"id_testset": "id", "scheme": "shuffle"}, "scheme must be one of free, iid, block, circular, got 'shuffle'"),
        ({"id_testset": "id", "inference": "bayes"}, "inference must be one of sieve, lagged, t-test,"),
        ({"id_testset": "id", "adjust": "magic"}, "adjust must be one of holm,"),
        ({"id_testset": "id", "method": "kendall"}, "method kendall comes with the t-test only"),
        (
            {"id_testset": "id", "by": "colour"},
            "by names 'colour', which is neither a column of the score table nor a key of its run labels (run "
            "attributes: ",
        ),
        ({"id_testset": "id", "replicate_key": "lr"}, "replicate_key names 'lr', which is neither a column"),
        (
            {"id_testset": "id", "metric": "f1", "id_metric": "acc"},
            "metric 'f1' is not a metric of the score table, so fewer than two",
        ),
        ({"id_testset": "id", "metric": "f1"}, "metric 'f1' is not a metric of the score table"),
        ({"id_testset": "id", "n_perm": 0}, "n_perm must be an integer from 1 to 10000000, got 0"),
        ({"id_testset": "id", "alpha": "0.05"}, "alpha must lie strictly between 0 and 1, got '0.05'"),
        ({"id_testset": "id", "seed": -1}, "seed must be an integer from 0 to 18446744073709551615, got -1"),
    ],
)
def test_bad_options_raise_one_clear_error(options: dict, message: str) -> None:
    with pytest.raises(GengenError, match=re.escape(message)) as info:
        analyse(synthetic(n_runs=1), **options)
    assert "\n" not in str(info.value)


def test_too_few_checkpoints_for_the_df() -> None:
    df = synthetic(n_runs=1, n_steps=4)
    with pytest.raises(GengenError, match=r"4 checkpoints .* need at least 5 checkpoints"):
        analyse(df, id_testset="id")
    with pytest.raises(GengenError, match="missing column"):
        analyse(df.drop(columns="step"), id_testset="id")


# ----------------------------------------------------------------------------------------------- CLI
def cli_app():
    import typer

    from gengen.cli import analyse as analyse_cli

    app = typer.Typer()
    analyse_cli.register(app)

    @app.command("noop")
    def _noop() -> None:
        """Keep typer in multi-command mode."""

    return app


def test_cli_analyse_writes_the_tables(tmp_path: Path) -> None:
    source = tmp_path / "scores.csv"
    synthetic(n_runs=2).to_csv(source, index=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli_app(),
        ["analyse", str(source), "--id", "id", "--n-perm", "99", "--n-boot", "99", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert (out / "pairs.csv").is_file() and (out / "summary.json").is_file() and (out / "pooled.csv").is_file()
    assert "significant" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--id", "nope"], "error: --id 'nope' is not a test set"),
        (["--id", "id", "--ood", "id,ood1"], "error: --ood lists 'id', the in-domain test set"),
        (["--id", "id", "--fit", "cubic"], "error: --fit must be one of linear, gam, auto, got 'cubic'"),
        (["--id", "id", "--boot-ci-method", "bc"], "error: --boot-ci-method must be one of percentile, bca, got 'bc'"),
    ],
)
def test_cli_analyse_bad_options_exit_2_with_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    source = tmp_path / "scores.csv"
    synthetic(n_runs=1).to_csv(source, index=False)
    result = CliRunner().invoke(cli_app(), ["analyse", str(source), *arguments, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error:")


def test_cli_analyse_too_few_checkpoints_and_missing_store(tmp_path: Path) -> None:
    source = tmp_path / "scores.csv"
    synthetic(n_runs=1, n_steps=3).to_csv(source, index=False)
    result = CliRunner().invoke(cli_app(), ["analyse", str(source), "--id", "id", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "too few" in result.output
    result = CliRunner().invoke(cli_app(), ["analyse", str(tmp_path / "missing.csv"), "--id", "id"])
    assert result.exit_code == 2 and "no such file" in result.output


def test_contract_table_pools_seeds_per_model_size_shots() -> None:
    df = synthetic(n_runs=4, n_steps=15)
    df["study"] = "s"
    df["family"] = "toy"
    df["size"] = "tiny"
    df["seed"] = pd.array(df["seed"], dtype="Int64")
    # two shot counts; runs 0, 1 at full data (<NA>), runs 2, 3 with 64 examples
    df["shots"] = pd.array([pd.NA if run in ("seed=0", "seed=1") else 64 for run in df["run"]], dtype="Int64")
    result = analyse(df, id_testset="id", inference="t-test")
    assert result.settings.by == ("model", "size", "shots")
    assert len(result.pooled) == 2 * 10
    assert (result.pooled["n_runs"] == 2).all()
    assert set(result.pooled["shots"].dropna()) == {64} and result.pooled["shots"].isna().sum() == 10
    assert {"study", "family", "size", "seed", "shots"} <= set(result.pairs.columns)


# ---------------------------------------------------------------------------------- default inference
def test_lagged_inference_matches_a_numpy_lagged_regression() -> None:
    """inference="lagged": each OOD score on [1, y(t-1), ID(t), ID(t-1)], the residuals correlated and t-tested
    on (n - 1) - 2 - 3 degrees of freedom; the rows then decide about r_innovation, and say so."""
    df = synthetic(n_runs=1, phi=0.9, n_steps=40, seed=11)
    # The reference regresses on ID(t), ID(t-1) linearly: the linear control, named (fit="auto" may pick the GAM).
    result = analyse(df, id_testset="id", inference="lagged", fit="linear")
    assert (result.pairs["p_adjusted_from"] == "p_lagged").all()
    assert (result.pairs["estimand"] == "r_innovation").all()
    # No interval of r_partial comes from a test of another quantity: the innovation interval has its own columns.
    assert result.pairs["ci_low"].isna().all()
    assert result.pairs["ci_method"].str.startswith("none: the lagged test is about r_innovation").all()
    assert result.pairs["p_lagged_method"].str.startswith("lagged regression").all()
    wide = df.pivot(index="step", columns="testset", values="value").sort_index()
    z = wide["id"].to_numpy()
    residuals = {}
    for name in [c for c in wide.columns if c != "id"]:
        y = wide[name].to_numpy()
        design = np.column_stack([np.ones(len(y) - 1), y[:-1], z[1:], z[:-1]])
        coefficients, *_ = np.linalg.lstsq(design, y[1:], rcond=None)
        residuals[name] = y[1:] - design @ coefficients
    df_lagged = (len(z) - 1) - 2 - 3
    for row in result.pairs.itertuples(index=False):
        r = np.corrcoef(residuals[row.testset_a], residuals[row.testset_b])[0, 1]
        t = r * np.sqrt(df_lagged / (1 - r**2))
        assert_allclose(row.r_innovation, r, rtol=1e-9)
        assert row.df_lagged == df_lagged
        assert_allclose(row.p_lagged, 2 * scipy.stats.t.sf(abs(t), df_lagged), rtol=1e-8)
        # Its interval excludes 0 exactly when p_lagged < 0.05, and holds r_innovation.
        assert row.ci_low_innovation <= row.r_innovation <= row.ci_high_innovation
        assert (row.p_lagged < 0.05) == (row.ci_low_innovation > 0 or row.ci_high_innovation < 0)
    assert_allclose(
        result.pairs["p_adjusted"], stats.p_adjust(result.pairs["p_lagged"].to_numpy(), method="holm"), rtol=1e-12
    )
    assert not any("autocorrelat" in warning for warning in result.warnings)


def test_gam_control_rows_equal_gengen_stats_with_edf() -> None:
    df = synthetic(n_runs=1, n_steps=40, seed=13)
    result = analyse(df, id_testset="id", fit="gam", inference="t-test")
    wide = df.pivot(index="step", columns="testset", values="value").sort_index()
    names = sorted(c for c in wide.columns if c != "id")
    expected = stats.partial_corr_matrix(wide[names].to_numpy(), wide[["id"]].to_numpy(), fit="gam")
    i, j = np.triu_indices(len(names), 1)
    table = result.pairs.set_index(["testset_a", "testset_b"]).loc[
        [(names[a], names[b]) for a, b in zip(i, j, strict=True)]
    ]
    assert_allclose(table["r_partial"], expected.r[i, j], rtol=1e-12)
    assert_allclose(table["df"], expected.df[i, j], rtol=1e-12)
    assert_allclose(table["p_value"], expected.p_value[i, j], rtol=1e-12)
    assert_allclose(table["edf_a"], expected.edf[i], rtol=1e-12)
    assert_allclose(table["edf_b"], expected.edf[j], rtol=1e-12)
    assert (table["fit"] == "gam").all()


def test_a_test_set_stuck_after_the_first_checkpoint_is_untestable_and_the_others_are_tested() -> None:
    """A test set stuck at one value after the first checkpoint holds one informative checkpoint: its pairs are
    untestable rows that say why (NaN, not significant, not counted by the adjustment); the other pairs get
    the lagged test as without it."""
    df = synthetic(n_runs=1, n_steps=30, seed=17)
    stuck = (df["testset"] == "ood0") & (df["step"] > df["step"].min())
    df.loc[stuck, "value"] = 0.5
    result = analyse(df, id_testset="id", inference="lagged")
    pairs = result.pairs
    involved = (pairs["testset_a"] == "ood0") | (pairs["testset_b"] == "ood0")
    assert not pairs.loc[involved, "testable"].any() and pairs.loc[~involved, "testable"].all()
    for column in ("r_partial", "p_lagged", "p_value", "p_adjusted", "ci_low"):
        assert pairs.loc[involved, column].isna().all(), column
    assert pairs.loc[involved, "untestable_reason"].str.startswith("ood0: 0.500 on checkpoints 2–30").all()
    assert pairs.loc[involved, "untestable_reason"].str.endswith("nothing left to correlate").all()
    assert (pairs.loc[involved, "n_informative"] == 2).all()
    assert not pairs.loc[involved, "significant"].any()
    assert pairs.loc[~involved, "p_lagged"].notna().all()
    assert any("ood0: 0.500" in warning and "untestable" in warning for warning in result.warnings)
    wide = df.pivot(index="step", columns="testset", values="value").sort_index()
    for row in pairs[~involved].itertuples(index=False):
        pair = stats.lagged_partial_corr_matrix(wide[[row.testset_a, row.testset_b]].to_numpy(), wide["id"].to_numpy())
        assert_allclose(row.p_lagged, np.asarray(pair.p_value)[0, 1], rtol=1e-12)
    valid = pairs.loc[~involved, "p_lagged"].to_numpy()
    assert_allclose(pairs.loc[~involved, "p_adjusted"], stats.p_adjust(valid, method="holm"), rtol=1e-12)


def test_a_test_set_explained_by_id_is_left_out_with_a_note_not_an_error() -> None:
    """A test set that is a linear function of ID (or, for the rank methods, monotone in it) has nothing left
    after ID is regressed out; the analysis leaves it out, says so, and the other pairs are as without it."""
    base = synthetic(n_runs=1, n_ood=3, phi=0.5, n_steps=30, seed=2)
    id_rows = base[base["testset"] == "id"]
    linear = id_rows.assign(testset="linear", value=0.5 * id_rows["value"] + 0.25)
    cubed = id_rows.assign(testset="cubed", value=id_rows["value"] ** 3)
    for method, extra, left_out in (("pearson", linear, "linear"), ("spearman", cubed, "cubed")):
        with_extra = pd.concat([base, extra], ignore_index=True)
        result = analyse(with_extra, id_testset="id", method=method, inference="t-test")
        note = [w for w in result.warnings if "explained by 'id'" in w]
        assert len(note) == 1 and left_out in note[0], result.warnings
        assert left_out not in set(result.pairs["testset_a"]) | set(result.pairs["testset_b"])
        alone = analyse(base, id_testset="id", method=method, inference="t-test").pairs
        pd.testing.assert_frame_equal(
            result.pairs[["testset_a", "testset_b", "r_partial", "p_value"]].reset_index(drop=True),
            alone[["testset_a", "testset_b", "r_partial", "p_value"]].reset_index(drop=True),
        )
    # Monotone but not linear: Pearson keeps it (its residual is not zero).
    kept = analyse(pd.concat([base, cubed], ignore_index=True), id_testset="id", inference="t-test")
    assert "cubed" in set(kept.pairs["testset_a"]) | set(kept.pairs["testset_b"])


def test_an_analysis_folder_is_written_whole(tmp_path: Path) -> None:
    """A second analysis into the same folder leaves nothing of the first: no stale pooled table (the report
    would show it), no comparison or verdict of the earlier analysis; a file that links out is refused."""
    df = synthetic(n_runs=2, n_steps=20, seed=4)
    out = tmp_path / "analysis"
    analyse(df, id_testset="id", n_boot=99).to_dir(out)
    assert (out / "pooled.csv").is_file()
    (out / "compare_pairs.csv").write_text("stale\n")
    (out / "verdict.json").write_text("{}\n")
    written = analyse(df, id_testset="id", n_boot=99, pooling=None).to_dir(out)
    assert "pooled.csv" not in written
    for name in ("pooled.csv", "pooled.parquet", "compare_pairs.csv", "verdict.json"):
        assert not (out / name).exists(), name
    outside = tmp_path / "elsewhere.csv"
    (out / "pairs.csv").unlink()
    (out / "pairs.csv").symlink_to(outside)
    with pytest.raises(GengenError, match=r"pairs\.csv: leads outside"):
        analyse(df, id_testset="id", n_boot=99).to_dir(out)
    assert not outside.exists()
