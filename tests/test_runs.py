"""What a run is (issue 33, item 1): a replicate of a condition; conditions are never pooled as replicates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gengen
from gengen.across.verdict import build_verdict
from gengen.calibration.simulate import simulate_trajectories
from gengen.cli import app
from gengen.store.run_keys import parse_run_label, run_attributes


@pytest.mark.parametrize(
    ("label", "attributes", "rest"),
    [
        ("seed=1,shots=64,data_seed=0", {"seed": "1", "shots": "64", "data_seed": "0"}, ""),
        ("zero-shot", {"shots": "0"}, ""),
        ("five-shot", {"shots": "5"}, ""),
        ("5shot", {"shots": "5"}, ""),
        ("1B-0.5xC", {"compute": "0.5xC"}, "1B"),
        ("10xC seed=3", {"seed": "3", "compute": "10xC"}, ""),
        ("lr=1e-4;prompt=chat seed=2", {"lr": "1e-4", "prompt": "chat", "seed": "2"}, ""),
        ("main", {}, "main"),
        ("few-shot", {}, "few-shot"),
    ],
)
def test_run_labels_carry_attributes(label: str, attributes: dict[str, str], rest: str) -> None:
    assert run_attributes(label) == (attributes, rest)


def test_shot_words_are_stored_as_shots() -> None:
    assert parse_run_label("five-shot") == {"shots": 5}
    assert parse_run_label("zero-shot") == {"shots": 0}
    assert parse_run_label("seed=2,shots=64,data_seed=1") == {"seed": 2, "shots": 64, "data_seed": 1}


def _runs(labels: dict[str, float], models: tuple[str, ...] = ("a", "b")) -> pd.DataFrame:
    """Per model, one simulated run per label (label -> shared noise correlation of the OOD sets)."""
    frames = []
    for m, model in enumerate(models):
        for r, (label, shared) in enumerate(labels.items()):
            run = simulate_trajectories(n=30, n_testsets=3, shared=shared, seed=100 * m + r, model=model)
            frames.append(run.drop(columns=["seed", "shots"]).assign(run=label))
    return pd.concat(frames, ignore_index=True)


def test_shot_conditions_are_not_pooled_as_seeds() -> None:
    table = _runs({"zero-shot": 0.0, "five-shot seed=1": 0.5, "five-shot seed=2": 0.5})
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99)
    shots = analysis.pairs.drop_duplicates(["model", "run"]).set_index(["model", "run"])["shots"]
    assert shots.loc[("a", "zero-shot")] == 0 and shots.loc[("a", "five-shot seed=2")] == 5
    # only the two seeds of five-shot are pooled, and the pooled table says over what
    pooled = analysis.pooled
    assert set(pooled["shots"]) == {5} and set(pooled["n_runs"]) == {2}
    assert set(pooled["pooled_over"]) == {"seed: 1, 2"}
    verdict = build_verdict(analysis, n_perm=19)
    assert verdict.groups == ["a shots=5", "a shots=0", "b shots=5", "b shots=0"]
    assert set(verdict.pairs["cell"]) == {"shots=0", "shots=5"}
    assert verdict.settings["pooled_over"] == {
        "a shots=5": "2 runs pooled as replicates: five-shot seed=1, five-shot seed=2",
        "b shots=5": "2 runs pooled as replicates: five-shot seed=1, five-shot seed=2",
    }


def test_compute_ladder_is_a_condition_and_warned() -> None:
    table = _runs({"1B-0.5xC seed=1": 0.0, "1B-2xC seed=1": 0.5, "1B-2xC seed=2": 0.5})
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99)
    assert analysis.settings["conditions"] == ["compute=0.5xC", "compute=2xC"]
    assert analysis.settings["pooling_cells"][-1] == "condition" and "condition" not in analysis.settings["by"]
    assert set(analysis.pooled["condition"]) == {"compute=2xC"}
    assert any("differ in compute" in warning and "never as replicates" in warning for warning in analysis.warnings)
    verdict = build_verdict(analysis, n_perm=19)
    assert set(verdict.groups) == {"a compute=0.5xC", "a compute=2xC", "b compute=0.5xC", "b compute=2xC"}


def test_labels_that_tell_no_replicates_apart_are_not_pooled_unless_declared() -> None:
    table = _runs({"main": 0.3, "rerun": 0.3})
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99)
    assert analysis.pooled.empty
    warning = next(w for w in analysis.warnings if "carry no" in w)
    assert "'main', 'rerun'" in warning and "--replicate-key run" in warning
    declared = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99, replicate_key="run")
    assert set(declared.pooled["pooled_over"]) == {"run labels: main, rerun"}
    assert set(declared.pooled["n_runs"]) == {2}


def test_by_accepts_any_run_attribute(tmp_path: Path) -> None:
    table = _runs({"lr=1e-4 seed=1": 0.0, "lr=1e-4 seed=2": 0.0, "lr=3e-4 seed=1": 0.0})
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99, by="model,lr")
    assert set(analysis.pairs["lr"]) == {"1e-4", "3e-4"}
    assert set(analysis.pooled["lr"]) == {"1e-4"} and "condition" not in analysis.pooled.columns
    per_run = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99, by="model,run")
    assert per_run.pooled.empty  # each run its own cell
    path = tmp_path / "scores.csv"
    table.to_csv(path, index=False)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")]).exit_code == 0
    ok = runner.invoke(app, ["analyse", str(tmp_path / "store"), "--id", "id", "--metric", "accuracy", "--by",
                             "model,run", "--out", str(tmp_path / "out"), "--n-boot", "99"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["analyse", str(tmp_path / "store"), "--id", "id", "--metric", "accuracy", "--by",
                              "model,colour", "--out", str(tmp_path / "bad")])  # fmt: skip
    assert bad.exit_code == 2 and "Traceback" not in bad.output and "'colour'" in bad.output


def test_the_verdict_paragraph_names_what_was_pooled() -> None:
    table = _runs({"seed=1": 0.0, "seed=2": 0.0})
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=99)
    text = build_verdict(analysis, n_perm=19).text
    assert text.endswith("Runs pooled as replicates of one model and condition (a: seed=1, seed=2; b: seed=1, seed=2).")


def test_across_runs_the_runs_of_a_cell_are_its_observations() -> None:
    """Final scores of 12 runs with free labels: exchangeable observations, analysed together (not kept apart)."""
    rng = np.random.default_rng(4)
    rows = []
    for index in range(12):
        latent = rng.normal()
        for name in ("id", "x", "y", "z"):
            rows.append(("m", f"run-{index}", 0, name, "accuracy", 0.5 + 0.05 * latent + rng.normal(0, 0.02)))
    table = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear")
    assert set(analysis.pairs["level"]) == {"across_runs"} and set(analysis.pairs["run"]) == {"across 12 runs"}
    assert not any("carry no" in warning for warning in analysis.warnings)
