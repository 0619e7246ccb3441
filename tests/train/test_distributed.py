"""Data-parallel training over two processes (torch.distributed, gloo) equals training in one process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gengen.executors.direct import train_study
from gengen.store.database import Store
from gengen.study.config import load_config

pytestmark = [pytest.mark.train, pytest.mark.distributed]

KEY = ["model", "run", "step", "testset", "metric"]


def write_study(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


@pytest.mark.parametrize(("strategy", "method"), [("ddp", "full"), ("fsdp", "full"), ("fsdp", "lora")])
def test_two_processes_train_as_one(
    strategy: str, method: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    # Micro-batches of 5, two per step: uneven shares (3 + 2 examples), so the sum over processes matters.
    extra = f'grad_accum = 2\nstrategy = "{strategy}"\nkeep_checkpoints = "all"\n' + (
        'method = "lora"\nlora = { r = 4, alpha = 8, dropout = 0.0 }' if method == "lora" else ""
    )
    options = {"families": ("olmo2",), "max_steps": 6, "every": 3, "extra": extra}

    def text(out: Path) -> str:
        return study_toml(assets, out, **options).replace("batch_size = 8", "batch_size = 5", 1)

    single = load_config(write_study(tmp_path / "one", text(tmp_path / "one" / "out")))
    train_study(single, log=lambda _: None, progress=False)

    path = write_study(tmp_path / "two", text(tmp_path / "two" / "out"))
    # `gengen train --gpus 2` relaunches itself under torchrun: two processes, gloo without CUDA.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-c", "from gengen.cli import main; main()", "train", str(path), "--gpus", "2"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "over 2 processes" in result.stdout
    assert result.stdout.count("1 runs done") == 1  # one report, from process 0

    one = Store(tmp_path / "one" / "out").load().sort_values(KEY).reset_index(drop=True)
    two = Store(tmp_path / "two" / "out").load().sort_values(KEY).reset_index(drop=True)
    assert len(two) == len(one) == 3 * 3 * 2 and not two.duplicated(KEY).any()  # one writer
    assert two["tokens"].equals(one["tokens"])
    # Tolerance: the gradient is summed in another order (two partial sums); Adam turns rounding in near-zero
    # gradients into weight changes of a few 1e-6 (see test_dynamics), far below one step of lr = 5e-3.
    np.testing.assert_allclose(two["value"], one["value"], rtol=0, atol=1e-4)
    name = "adapter_model.safetensors" if method == "lora" else "model.safetensors"
    run_one = single.run_dir(single.runs()[0]) / "checkpoint-6" / name
    run_two = load_config(path).run_dir(load_config(path).runs()[0]) / "checkpoint-6" / name
    a, b = load_file(run_one), load_file(run_two)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(b[key].numpy(), a[key].numpy(), rtol=0, atol=5e-5, err_msg=key)
    if strategy != "fsdp":
        return
    # Resuming a sharded run from its gathered checkpoint (weights and full optimiser state) trains the
    # remaining steps to the same weights.
    shutil.rmtree(run_two.parent)
    store = Store(tmp_path / "two" / "out")
    run = load_config(path).runs()[0]
    store.write_manifest(run.model.name, run.key, {**(store.manifest(run.model.name, run.key) or {}), "status": "x"})
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming from step 3" in again.stdout
    resumed = load_file(run_two)
    for key in a:
        np.testing.assert_allclose(resumed[key].numpy(), a[key].numpy(), rtol=0, atol=5e-5, err_msg=key)


def test_executor_trains_a_run_over_the_gpus_it_asks_for(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """``resources.gpus = 2`` through an executor (local here; a Ray task the same): the run is trained by two
    processes (CPU ones without CUDA) and scores the same as one process."""
    from gengen.executors import execute_study

    options = {"families": ("opt",), "max_steps": 4, "every": 2, "extra": "grad_accum = 2"}

    def text(out: Path, resources: str = "") -> str:
        return study_toml(assets, out, **options).replace("batch_size = 8", "batch_size = 5", 1) + resources

    single = load_config(write_study(tmp_path / "one", text(tmp_path / "one" / "out")))
    train_study(single, log=lambda _: None, progress=False)
    config = load_config(write_study(tmp_path / "two", text(tmp_path / "two" / "out", "\n[resources]\ngpus = 2\n")))
    lines: list[str] = []
    execution = execute_study(config, executor="local", log=lines.append)
    assert not execution.failed, [r.error for r in execution.failed]
    assert any(line.endswith("trained data parallel over 2 processes") for line in lines), lines
    one = Store(tmp_path / "one" / "out").load().sort_values(KEY).reset_index(drop=True)
    two = Store(tmp_path / "two" / "out").load().sort_values(KEY).reset_index(drop=True)
    assert len(two) == len(one) == 3 * 3 * 2
    np.testing.assert_allclose(two["value"], one["value"], rtol=0, atol=1e-4)


def test_a_moved_output_reaches_the_processes_of_a_run(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    """``gengen run --out`` with ``resources.gpus = 2``: the torchrun processes reload the study file, so they are
    told the moved output folder; they write the run where the driver merges it, and nothing beside the study."""
    from gengen.executors import execute_study
    from gengen.study.config import with_output

    options = {"families": ("opt",), "max_steps": 4, "every": 2, "extra": "grad_accum = 2"}
    text = study_toml(assets, Path("beside"), **options).replace("batch_size = 8", "batch_size = 5", 1)
    path = write_study(tmp_path / "study", text + "\n[resources]\ngpus = 2\n")
    out = tmp_path / "elsewhere"
    config = load_config(path, output=out)
    assert config == with_output(load_config(path), out) and config.output == out
    lines: list[str] = []
    execution = execute_study(config, executor="local", log=lines.append)
    assert not execution.failed, [r.error for r in execution.failed]
    assert any(line.endswith("trained data parallel over 2 processes") for line in lines), lines
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == ["study.toml"]
    stored = Store(out).load()
    assert len(stored) == 3 * 3 * 2 and execution.rows_merged == len(stored)  # steps x test sets x metrics
    run_dir = config.run_dir(config.runs()[0])
    assert run_dir.is_relative_to(out) and (run_dir / "checkpoint-4").is_dir()
