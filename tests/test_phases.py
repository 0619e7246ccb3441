"""gengen.across.phases: a correlation planted in the early checkpoints only is found, and nothing where none is
planted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats as scipy_stats

from gengen.across.phases import compare_phases, parse_phases, phase_labels
from gengen.analyse import analyse
from gengen.errors import GengenError


def planted(n: int = 80, n_runs: int = 3, rho: float = 0.8, phi: float = 0.3, seed: int = 0) -> pd.DataFrame:
    """ID learning curve; OOD = 0.3 + 0.5 ID + AR(1) noise; ood_1 and ood_2 share their shocks in the first half."""
    rng = np.random.default_rng(seed)
    rows = []
    steps = 100 * np.arange(1, n + 1)
    for run in range(n_runs):
        id_score = 0.3 + 0.5 * (1 - np.exp(-steps / steps[n // 3])) + rng.normal(0, 0.01, n)
        shocks = rng.normal(size=(3, n))
        early = np.arange(n) < n // 2
        shocks[1, early] = rho * shocks[0, early] + np.sqrt(1 - rho**2) * shocks[1, early]
        noise = np.zeros((3, n))
        for t in range(n):
            noise[:, t] = (phi * noise[:, t - 1] if t else 0) + shocks[:, t]
        values = {"id": id_score}
        for j in range(3):
            values[f"ood_{j + 1}"] = 0.3 + 0.5 * id_score + 0.02 * noise[j]
        for name, series in values.items():
            rows += [
                {"model": "m", "run": f"seed={run}", "step": s, "testset": name, "metric": "acc", "value": v}
                for s, v in zip(steps, series, strict=True)
            ]
    return pd.DataFrame(rows)


def test_an_early_only_correlation_is_found() -> None:
    phases = compare_phases(planted(), id_testset="id", n_boot=499)
    table = phases.table
    assert phases.settings["checkpoints"]["m/seed=0"] == {"early": 40, "late": 40}
    model = table[table["level"] == "model"].set_index(["testset_a", "testset_b"])
    hit = model.loc[("ood_1", "ood_2")]
    assert hit["r_early"] > 0.5 and abs(hit["r_late"]) < 0.3
    assert hit["significant_phase"] and hit["p_phase_adjusted"] < 0.01
    assert not model.drop(index=[("ood_1", "ood_2")])["significant_phase"].any()
    # the statistic is the z difference over the phases' standard errors, from each phase's own analysis
    early = phases.early.pairs
    row = early[(early["level"] == "run") & (early["run"] == "seed=1") & (early["testset_b"] == "ood_2")]
    row = row[row["testset_a"] == "ood_1"].iloc[0]
    late = phases.late.pairs
    other = late[(late["level"] == "run") & (late["run"] == "seed=1") & (late["testset_b"] == "ood_2")]
    other = other[other["testset_a"] == "ood_1"].iloc[0]
    statistic = (np.arctanh(row["r_partial"]) - np.arctanh(other["r_partial"])) / np.hypot(row["se_z"], other["se_z"])
    got = table[(table["level"] == "run") & (table["run"] == "seed=1") & (table["testset_b"] == "ood_2")]
    got = got[got["testset_a"] == "ood_1"].iloc[0]
    assert_allclose(got["statistic"], statistic, rtol=1e-10)
    assert_allclose(got["p_phase"], 2 * scipy_stats.norm.sf(abs(statistic)), rtol=1e-9)


def test_an_analysis_is_split_with_its_own_options() -> None:
    scores = planted(n_runs=1, seed=3)
    analysis = analyse(scores, id_testset="id", n_boot=199)
    phases = compare_phases(analysis, split="id", at=0.5)
    assert phases.early.settings["n_boot"] == 199
    labels = phase_labels(scores, id_testset="id", split="id", at=0.5)
    curve = scores[scores["testset"] == "id"].set_index("step")["value"]
    progress = (np.maximum.accumulate(curve.to_numpy()) - curve.iloc[0]) / (curve.max() - curve.iloc[0])
    early_steps = set(curve.index[progress < 0.5])
    assert set(scores.loc[labels == "early", "step"]) == early_steps


@pytest.mark.parametrize(
    ("text", "message"),
    [("steps:0.5", "does not start with"), ("fraction:1.5", "strictly between"), ("id:x", "not a number")],
)
def test_bad_phase_options(text: str, message: str) -> None:
    with pytest.raises(GengenError, match=message):
        parse_phases(text)


def test_a_phase_with_too_few_checkpoints_is_refused() -> None:
    with pytest.raises(GengenError, match="checkpoint"):
        compare_phases(planted(n=20, n_runs=1), id_testset="id", at=0.2, n_boot=99)


def test_compare_command_with_phases(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from gengen.cli import compare as compare_cli

    analysis = analyse(planted(n_runs=2, seed=5), id_testset="id", n_boot=199)
    analysis.to_dir(tmp_path)
    app = typer.Typer()
    compare_cli.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["compare", str(tmp_path), "--n-perm", "49", "--phases", "fraction:0.5"])
    assert result.exit_code == 0, result.output
    assert "phases fraction:0.5 (model m): 1 of 3 pairs differ" in result.output
    table = pd.read_csv(tmp_path / "compare_phases.csv")
    assert set(table["level"]) == {"run", "model"}
    assert "verdict over 3 pairs and 1 model(s)" in result.output
    bad = CliRunner().invoke(app, ["compare", str(tmp_path), "--phases", "steps:2"])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and len(bad.output.strip().splitlines()) == 1
