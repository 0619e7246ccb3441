"""gengen.across.verdict on the shared Pythia files: the block's numbers recomputed from the pairs table with scipy and
statsmodels, summary.json and the terminal carrying the same, and the report opening with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests
from typer.testing import CliRunner

import gengen
from gengen.across.verdict import CLASSES, build_verdict
from gengen.analyse import Analysis
from tests.test_analyse import PYTHIA, load_pythia


@pytest.fixture(scope="module")
def pythia_analysis(shared_dir: Path) -> Analysis:
    scores = load_pythia(shared_dir / PYTHIA)
    return gengen.analyse(scores, id_testset="lambada_openai", metric="acc", n_boot=199)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's adjustment with NaN kept and not counted (as R's p.adjust)."""
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    out[finite] = multipletests(p[finite], method="holm")[1]
    return out


def expected_classes(pairs: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Each pair's class written out from the per-run rows: Q (F reference) and the common z (t reference) on
    Satterthwaite's df of the sieve variances, by hand; Holm across pairs."""
    rows = pairs[pairs["level"] == "run"]
    if "testable" in rows.columns:
        rows = rows[rows["testable"].astype(bool)]
    rows = rows.assign(
        a=rows[["testset_a", "testset_b"]].min(axis=1),
        b=rows[["testset_a", "testset_b"]].max(axis=1),
        z=np.arctanh(rows["r_partial"]),
        # each model's variance the one its reported interval (the leave-one-out hull) implies, on df_sieve
        v=(
            np.maximum(
                np.arctanh(rows["ci_high"]) - np.arctanh(rows["r_partial"]),
                np.arctanh(rows["r_partial"]) - np.arctanh(rows["ci_low"]),
            )
            / scipy_stats.t.ppf(0.5 + rows["ci_level"] / 2, rows["df_sieve"])
        ).clip(lower=rows["se_z"])
        ** 2,
        nu=rows["df_sieve"],
    )
    rows = rows[np.isfinite(rows["z"]) & (rows["v"] > 0)]
    records = []
    for (a, b), group in rows.groupby(["a", "b"]):
        z, w, nu = group["z"].to_numpy(), 1 / group["v"].to_numpy(), group["nu"].to_numpy()
        mean = np.sum(w * z) / np.sum(w)
        q = np.sum(w * (z - mean) ** 2)
        df = np.sum(w) ** 2 / np.sum(w**2 / nu)  # Satterthwaite's df of the estimated weights
        records.append(
            {
                "testset_a": a,
                "testset_b": b,
                "n": len(z),
                "p_q": scipy_stats.f.sf(q / (len(z) - 1), len(z) - 1, df) if len(z) > 1 else np.nan,
                "p_common": 2 * scipy_stats.t.sf(abs(mean) * np.sqrt(np.sum(w)), df),
                # every model's z is 0: sum w z^2 / M against F(M, df)
                "p_joint": scipy_stats.f.sf(np.sum(w * z**2) / len(z), len(z), df),
                "mean": mean,
                "all_positive": bool((z > 0).all()),
                "all_negative": bool((z < 0).all()),
            }
        )
    table = pd.DataFrame(records)
    table["p_q_adj"] = holm(table["p_q"].to_numpy())
    table["p_common_adj"] = holm(table["p_common"].to_numpy())
    table["p_joint_adj"] = holm(table["p_joint"].to_numpy())

    def classify(row: pd.Series) -> str:
        if row["n"] < 2 or not row["p_joint_adj"] < alpha:
            return "undetermined"
        if row["p_q_adj"] < alpha:
            return "model-dependent"
        if row["p_common_adj"] < alpha and row["mean"] > 0 and row["all_positive"]:
            return "consistent positive"
        if row["p_common_adj"] < alpha and row["mean"] < 0 and row["all_negative"]:
            return "consistent negative"
        return "undetermined"

    table["verdict"] = table.apply(classify, axis=1)
    return table


def test_the_block_matches_the_pairs_table(pythia_analysis: Analysis) -> None:
    verdict = build_verdict(pythia_analysis, n_perm=99)
    assert verdict.groups == ["pythia-160m", "pythia-410m"]
    expected = expected_classes(pythia_analysis.pairs, alpha=0.05)
    assert len(verdict.pairs) == len(expected) == 64 * 63 // 2
    merged = verdict.pairs.merge(expected, on=["testset_a", "testset_b"], suffixes=("", "_expected"))
    assert len(merged) == len(expected)
    assert_allclose(merged["p_heterogeneity"], merged["p_q"], rtol=1e-9)
    assert_allclose(merged["p_heterogeneity_adjusted"], merged["p_q_adj"], rtol=1e-9)
    assert_allclose(merged["p_common_adjusted"], merged["p_common_adj"], rtol=1e-9)
    assert_allclose(merged["p_joint_adjusted"], merged["p_joint_adj"], rtol=1e-9)
    assert (merged["verdict"] == merged["verdict_expected"]).all()
    counts = expected["verdict"].value_counts().to_dict()
    assert verdict.counts == {name: counts.get(name, 0) for name in CLASSES}
    assert sum(verdict.counts.values()) == 2016

    # sign agreement and Mantel r of the two models, against numpy
    runs = pythia_analysis.pairs[pythia_analysis.pairs["level"] == "run"]
    small = runs[runs["model"] == "pythia-160m"].set_index(["testset_a", "testset_b"])["r_partial"]
    large = runs[runs["model"] == "pythia-410m"].set_index(["testset_a", "testset_b"])["r_partial"]
    both = pd.concat([small, large], axis=1, join="inner").dropna().to_numpy()
    sign = verdict.agreement["sign_agreement"]
    assert_allclose(sign["median"], np.mean(both[:, 0] * both[:, 1] > 0), rtol=1e-12)
    assert sign["chance_low"] <= sign["chance"] <= sign["chance_high"]
    assert_allclose(verdict.agreement["mantel_r"]["median"], np.corrcoef(both.T)[0, 1], rtol=1e-8)

    # the paragraph states the same numbers
    for name in ("consistent positive", "model-dependent", "undetermined"):
        assert str(verdict.counts[name]) in verdict.text
    assert f"{100 * sign['median']:.0f}%" in verdict.text
    for example in verdict.examples["consistent positive"]:
        row = merged[(merged["testset_a"] == example["testset_a"]) & (merged["testset_b"] == example["testset_b"])]
        assert row["verdict"].iloc[0] == "consistent positive"


def test_summary_json_and_the_report_open_with_it(pythia_analysis: Analysis, tmp_path: Path) -> None:
    from gengen.across.compare import compare
    from gengen.report import report

    verdict = build_verdict(pythia_analysis, n_perm=99)
    pythia_analysis.to_dir(tmp_path)
    verdict.to_dir(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verdict"]["counts"] == verdict.counts
    assert summary["verdict"]["text"] == verdict.text
    assert Analysis.from_dir(tmp_path).settings == pythia_analysis.settings  # still readable
    page = report(pythia_analysis, compare(pythia_analysis, n_perm=99), tmp_path, verdict=verdict).read_text()
    start = page.index('id="verdict"')
    for marker in ("<figure", "<img", 'id="per-group"', "<canvas"):
        if marker in page:
            assert start < page.index(marker), marker
    block = page[start : page.index("</section>", start)]
    for name in CLASSES:
        assert f'<td>{name}</td><td class="num">{verdict.counts[name]}</td>' in block


def test_analyse_command_states_the_answer_first_then_the_verdict(tmp_path: Path) -> None:
    import typer

    from gengen.calibration.simulate import simulate_trajectories
    from gengen.cli import analyse as analyse_cli

    frames = [
        simulate_trajectories(n=30, n_testsets=3, phi=0.3, shared=0.5, seed=seed, model=model)
        for seed, model in ((1, "m1"), (2, "m2"))
    ]
    table = tmp_path / "scores.csv"
    pd.concat(frames, ignore_index=True).to_csv(table, index=False)
    app = typer.Typer()
    analyse_cli.register(app)
    app.command("noop")(lambda: None)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["analyse", str(table), "--id", "id", "--metric", "accuracy", "--n-boot", "199", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "verdict over 3 pairs and 2 model(s)" in result.output
    lines = result.stdout.rstrip().splitlines()
    # the global answer first (issue 33), then the verdict's classes and paragraph, then where it wrote
    assert lines[0].startswith("answer: An estimated "), lines[0]
    assert any(line.startswith("Across 2 models") for line in lines)
    assert lines[-1].startswith("wrote ")
    summary = json.loads((out / "summary.json").read_text())
    assert sum(summary["verdict"]["counts"].values()) == 3
    assert lines[0] == f"answer: {summary['verdict']['answer']}"


def test_a_planted_sign_flip_is_model_dependent_and_a_shared_effect_consistent() -> None:
    from gengen.calibration.simulate import simulate_trajectories

    frames = []
    for seed, model in ((1, "a-1b"), (2, "b-1b"), (3, "c-1b")):
        scores = simulate_trajectories(n=60, n_testsets=3, phi=0.3, shared=0.7, seed=seed, model=model)
        if model == "c-1b":  # ood_2 mirrored: its partial correlation with ood_1 and ood_3 changes sign
            flip = scores["testset"] == "ood_2"
            scores.loc[flip, "value"] = 1.0 - scores.loc[flip, "value"]
        frames.append(scores)
    analysis = gengen.analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)
    verdict = build_verdict(analysis, n_perm=99)
    classes = verdict.pairs.set_index(["testset_a", "testset_b"])["verdict"].to_dict()
    assert classes[("ood_1", "ood_2")] == "model-dependent"
    assert classes[("ood_2", "ood_3")] == "model-dependent"
    assert classes[("ood_1", "ood_3")] == "consistent positive"
    assert verdict.counts == {
        "consistent positive": 1,
        "consistent negative": 0,
        "model-dependent": 2,
        "undetermined": 0,
    }
    assert verdict.examples["model-dependent"][0]["testset_b"] in ("ood_2", "ood_3")
