"""Fine-tuning end to end on tiny models: scores in the store, resumption after a kill, scoring a series."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.executors import study_status
from gengen.executors.direct import train_study
from gengen.store.database import Store
from gengen.study.config import load_config
from gengen.training.train import evaluation_steps, planned_steps, update_indices

pytestmark = pytest.mark.train

KEY = ["model", "run", "step", "testset", "metric"]


def write_study(tmp_path: Path, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("family", ["opt", "olmo2"])
def test_tiny_end_to_end_run(family: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = load_config(write_study(tmp_path, study_toml(assets, out, families=(family,), max_steps=12, every=6)))
    execution = train_study(config, log=lambda _: None, progress=False)
    assert execution.skipped == [] and [r.ok for r in execution.results.values()] == [True]
    scores = Store(out).load()
    assert sorted(scores["step"].unique()) == [0, 6, 12]
    assert sorted(scores["testset"].unique()) == ["id", "negation", "unseen_vocab"]
    assert sorted(scores["metric"].unique()) == ["acc", "logprob"]
    assert len(scores) == 3 * 3 * 2 and not scores.duplicated(KEY).any()
    row = scores.iloc[0]
    assert (row["study"], row["model"], row["family"], row["size"], row["run"], row["seed"]) == (
        "t",
        f"{family}-tiny",
        family,
        "tiny",
        "seed=1",
        1,
    )
    assert scores.loc[scores["step"] == 0, "tokens"].eq(0).all()
    assert scores.loc[scores["step"] == 12, "tokens"].gt(0).all()
    assert scores.loc[scores["step"] == 12, "epoch"].eq(12 * 8 / 400).all()
    assert scores["n_examples"].eq(40).all()
    acc = scores[scores["metric"] == "acc"]["value"]
    assert acc.between(0, 1).all()
    assert scores[scores["metric"] == "logprob"]["value"].lt(0).all()
    # The run folder records config, versions and seed; the last checkpoint is kept.
    run_dir = config.run_dir(config.runs()[0])
    assert (run_dir / "run.json").is_file() and (run_dir / "checkpoint-12" / "trainer_state.pt").is_file()
    assert not (run_dir / "checkpoint-6").exists()
    manifest = Store(out).manifest(f"{family}-tiny", "seed=1")
    assert manifest is not None and manifest["status"] == "complete" and manifest["seed"] == 1
    # The driver recorded the run's state, so `gengen status` knows a run of `gengen train`.
    assert [(row.status, row.stored, row.planned) for row in study_status(config)] == [("done", 3, 3)]
    # A second run of the same study does nothing.
    again = train_study(config, log=lambda _: None, progress=False)
    assert again.skipped == [(f"{family}-tiny", "seed=1")] and not again.results
    assert len(Store(out).load()) == len(scores)


def test_runs_in_worker_processes_equal_runs_in_this_process(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """``gengen train --jobs 2``: each run in a worker process writes the store itself, as one process would."""
    options = {"families": ("opt", "olmo2"), "max_steps": 4, "every": 2}
    one = load_config(write_study(tmp_path / "one", study_toml(assets, tmp_path / "one" / "out", **options)))
    two = load_config(write_study(tmp_path / "two", study_toml(assets, tmp_path / "two" / "out", **options)))
    train_study(one, log=lambda _: None)
    execution = train_study(two, jobs=2, threads=1, log=lambda _: None)
    assert execution.executor == "direct" and len(execution.results) == 2
    assert execution.rows_merged == 2 * 3 * 3 * 2  # rows the workers wrote: runs x steps x test sets x metrics
    expected = Store(tmp_path / "one" / "out").load().sort_values(KEY).reset_index(drop=True)
    got = Store(tmp_path / "two" / "out").load().sort_values(KEY).reset_index(drop=True)
    assert not got.duplicated(KEY).any()
    pd.testing.assert_frame_equal(got[KEY], expected[KEY])
    np.testing.assert_allclose(got["value"], expected["value"], rtol=0, atol=1e-6)
    assert {row.status for row in study_status(two)} == {"done"}


def test_learning_moves_id_accuracy(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = load_config(write_study(tmp_path, study_toml(assets, out, families=("opt",), max_steps=60, every=60)))
    train_study(config, log=lambda _: None, progress=False)
    scores = Store(out).load(testset="id", metric="logprob")
    start, end = scores.sort_values("step")["value"].to_numpy()[[0, -1]]
    assert end > start + 0.5  # the gold answer's log-probability rises from about log(1/vocab)


RUNNER = """
import sys, torch
torch.set_num_threads(1)
from gengen.study.config import load_config
from gengen.executors.direct import train_study
train_study(load_config(sys.argv[1]), progress=False)
"""


def run_subprocess(config: Path, *, kill_when: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    if kill_when is None:
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, output
        return output
    deadline = time.monotonic() + 240
    while not kill_when.exists():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    return ""


def test_killed_run_resumes_without_duplicates(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    options = {"families": ("opt",), "max_steps": 90, "every": 10, "extra": 'keep_checkpoints = "all"'}
    reference = tmp_path / "reference"
    config = load_config(write_study(reference, study_toml(assets, reference / "out", **options)))
    train_study(config, log=lambda _: None, progress=False)
    expected = Store(reference / "out").load().sort_values(KEY).reset_index(drop=True)

    killed = tmp_path / "killed"
    path = write_study(killed, study_toml(assets, killed / "out", **options))
    run_dir = load_config(path).run_dir(load_config(path).runs()[0])
    run_subprocess(path, kill_when=run_dir / "checkpoint-20")
    partial = Store(killed / "out").load()
    assert 0 < partial["step"].max() < 90, "the process was not killed mid-training"
    output = run_subprocess(path)
    assert "resuming from step" in output
    final = Store(killed / "out").load().sort_values(KEY).reset_index(drop=True)
    assert not final.duplicated(KEY).any()
    pd.testing.assert_frame_equal(final[KEY], expected[KEY])
    np.testing.assert_allclose(final["value"], expected["value"], rtol=1e-6, atol=1e-7)
    assert final["tokens"].equals(expected["tokens"])


def test_score_checkpoint_series_matches_training_scores(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    out = tmp_path / "out"
    study = write_study(
        tmp_path, study_toml(assets, out, families=("olmo2",), max_steps=12, every=4, extra='keep_checkpoints = "all"')
    )
    config = load_config(study)
    train_study(config, log=lambda _: None, progress=False)
    run_dir = config.run_dir(config.runs()[0])
    result = CliRunner().invoke(
        app,
        ["score", str(study), "--name", "series", "--checkpoints", str(run_dir), "--family", "olmo2", "--size", "tiny"],
    )
    assert result.exit_code == 0, result.output
    scores = Store(out).load()
    trained = scores[(scores["model"] == "olmo2-tiny") & (scores["step"] > 0)].sort_values(KEY[2:])
    series = scores[scores["model"] == "series"].sort_values(KEY[2:])
    assert sorted(series["step"].unique()) == [4, 8, 12]
    np.testing.assert_allclose(series["value"].to_numpy(), trained["value"].to_numpy(), rtol=1e-5, atol=1e-6)
    again = CliRunner().invoke(app, ["score", str(study), "--name", "series", "--checkpoints", str(run_dir)])
    assert again.exit_code == 0 and "0 scores written" in again.output


def test_schedule_helpers() -> None:
    from gengen.study.tables import EvaluationConfig
    from gengen.study.training_config import TrainingConfig

    assert planned_steps(TrainingConfig(epochs=2.0, batch_size=8, grad_accum=2), 100) == 14  # 2 x ceil(13 / 2)
    assert planned_steps(TrainingConfig(epochs=None, max_steps=7), 100) == 7
    assert evaluation_steps(EvaluationConfig(every=4), 10) == [0, 4, 8, 10]
    assert evaluation_steps(EvaluationConfig(log_points=4, steps=(3, 50, 2000)), 1000) == [0, 1, 3, 10, 50, 100, 1000]
    first_epoch = np.concatenate([update_indices(s, 10, 4, seed=1) for s in (1, 2)])
    assert len(set(first_epoch)) == 8  # no example repeats within an epoch
    np.testing.assert_array_equal(update_indices(3, 10, 4, seed=1), update_indices(3, 10, 4, seed=1))
    wrap = update_indices(3, 10, 4, seed=1)
    assert set(wrap[:2]) == set(range(10)) - set(first_epoch)


def test_import_gengen_does_not_import_torch() -> None:
    code = (
        "import sys, gengen, gengen.study.config, gengen.data, gengen.demo, gengen.cli; "
        "print('torch' in sys.modules or 'transformers' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert output.stdout.strip() == "False"


@pytest.mark.parametrize("family", ["opt", "olmo2"])
def test_lora_run_and_scoring_its_checkpoints(
    family: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    pytest.importorskip("peft")
    from gengen.scoring.score import find_checkpoints, score_checkpoints

    out = tmp_path / "out"
    lora = (
        'method = "lora"\nkeep_checkpoints = "all"\nlora = { r = 4, alpha = 8, target_modules = ["q_proj", "v_proj"] }'
    )
    config = load_config(
        write_study(tmp_path, study_toml(assets, out, families=(family,), max_steps=8, every=4, extra=lora))
    )
    train_study(config, log=lambda _: None, progress=False)
    run_dir = config.run_dir(config.runs()[0])
    assert (run_dir / "checkpoint-8" / "adapter_config.json").is_file()
    trained = Store(out).load()
    assert sorted(trained["step"].unique()) == [0, 4, 8]
    final = trained[(trained["step"] == 8) & (trained["metric"] == "logprob")]["value"].to_numpy()
    start = trained[(trained["step"] == 0) & (trained["metric"] == "logprob")]["value"].to_numpy()
    assert not np.allclose(final, start)  # the adapters changed the model
    rows = score_checkpoints(config, find_checkpoints([run_dir]), model_name="lora-series", log=lambda _: None)
    series = rows.sort_values(["step", "testset", "metric"])
    expected = trained[trained["step"] > 0].sort_values(["step", "testset", "metric"])
    np.testing.assert_allclose(series["value"].to_numpy(), expected["value"].to_numpy(), rtol=1e-5, atol=1e-6)


def test_few_shot_runs_are_balanced_samples(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    text = (
        study_toml(assets, out, families=("opt",), max_steps=4, every=4)
        + "\n[data]\nshots = [8]\ndata_seeds = [0, 1]\n"
    )
    config = load_config(write_study(tmp_path, text))
    assert [r.key for r in config.runs()] == ["seed=1,shots=8,data_seed=0", "seed=1,shots=8,data_seed=1"]
    train_study(config, log=lambda _: None, progress=False)
    scores = Store(out).load()
    assert sorted(scores["run"].unique()) == ["seed=1,shots=8,data_seed=0", "seed=1,shots=8,data_seed=1"]
    assert scores["shots"].eq(8).all()
    # 4 steps of 8 examples over an 8-example sample: 4 epochs.
    assert scores.loc[scores["step"] == 4, "epoch"].eq(4.0).all()


def test_find_checkpoints_orders_folders_and_revisions(tmp_path: Path) -> None:
    from gengen.errors import InputError
    from gengen.scoring.score import find_checkpoints

    for name in ("checkpoint-20", "checkpoint-100", "checkpoint-5"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "notes").mkdir()
    assert [c.step for c in find_checkpoints([tmp_path])] == [5, 20, 100]
    hub = find_checkpoints(model="EleutherAI/pythia-70m", revisions=["step2000", "step1000"])
    assert [(c.path, c.revision, c.step) for c in hub] == [
        ("EleutherAI/pythia-70m", "step1000", 1000),
        ("EleutherAI/pythia-70m", "step2000", 2000),
    ]
    with pytest.raises(InputError, match="step 1000 appears twice"):
        find_checkpoints(model="m", revisions=["step1000", "main-1000"])
    with pytest.raises(InputError, match="no step number"):
        find_checkpoints(model="m", revisions=["main"])
