"""Training dynamics checked by hand: learning rates at chosen steps, gradient accumulation, exact resumption.

The numbers come from the optimiser itself (each ``AdamW.step`` call is recorded) and from closed forms
written out here, never from the training loop's own logs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gengen.executors.direct import train_study
from gengen.study.config import load_config
from gengen.study.training_config import TrainingConfig
from gengen.training.train import planned_steps, steps_per_epoch, update_batches

pytestmark = pytest.mark.train


class Interrupted(Exception):
    """Stands for the process being killed between two optimiser steps."""


class StepRecorder:
    """Counts ``AdamW.step`` calls and the learning rate each one used; can stop the run after N steps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stop_after: int | None = None):
        self.lrs: list[float] = []
        original = torch.optim.AdamW.step

        def step(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if stop_after is not None and len(self.lrs) >= stop_after:
                raise Interrupted
            self.lrs.append(optimizer.param_groups[0]["lr"])
            return original(optimizer, *args, **kwargs)

        monkeypatch.setattr(torch.optim.AdamW, "step", step)


def write_study(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


def final_weights(config: Any, step: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(config.run_dir(config.runs()[0]) / f"checkpoint-{step}" / "model.safetensors")


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], **tolerance: float) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], **tolerance)


def test_warmup_then_linear_decay_at_chosen_steps(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = StepRecorder(monkeypatch)
    text = study_toml(assets, tmp_path / "out", families=("opt",), max_steps=12, every=12)
    train_study(load_config(write_study(tmp_path, text)), log=lambda _: None, progress=False)
    peak, total = 5e-3, 12  # the fixture's learning_rate and max_steps (warmup_steps = 2)
    assert len(recorder.lrs) == total
    # Step s (1-based) of the warmup uses peak * s / warmup; then the rate falls linearly, by peak / (total -
    # warmup) per step, from peak at the first step after the warmup.
    expected = {1: peak / 2, 2: peak, 3: peak, 4: peak * 9 / 10, 8: peak * 5 / 10, 12: peak * 1 / 10}
    for step, lr in expected.items():
        assert recorder.lrs[step - 1] == pytest.approx(lr, rel=1e-12), step


def test_two_half_batches_accumulated_equal_one_full_batch(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    weights = {}
    for name, batch in (("full", "batch_size = 8"), ("accumulated", "batch_size = 4\ngrad_accum = 2")):
        text = study_toml(assets, tmp_path / name / "out", families=("opt",), max_steps=6, every=6)
        config = load_config(write_study(tmp_path / name, text.replace("batch_size = 8", batch, 1)))
        train_study(config, log=lambda _: None, progress=False)
        weights[name] = final_weights(config, 6)
    # Adam divides by the root of the squared gradients, so rounding in near-zero gradients moves a weight by a
    # few 1e-6; a lost half batch (zero_grad inside the accumulation loop) moves weights by ~lr = 5e-3 a step.
    assert_same_weights(weights["full"], weights["accumulated"], rtol=0, atol=5e-5)
    from safetensors.torch import load_file

    start = load_file(assets["models"]["opt"] / "model.safetensors")
    moved = max(float((weights["full"][k] - start[k]).abs().max()) for k in start)
    assert moved > 1e-3  # the comparison is not between two untouched models


def test_resumed_process_trains_only_the_remaining_steps(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"families": ("opt",), "max_steps": 12, "every": 6}
    reference = load_config(write_study(tmp_path / "ref", study_toml(assets, tmp_path / "ref" / "out", **options)))
    train_study(reference, log=lambda _: None, progress=False)

    path = write_study(tmp_path / "cut", study_toml(assets, tmp_path / "cut" / "out", **options))
    with monkeypatch.context() as patch:
        first = StepRecorder(patch, stop_after=8)  # dies during step 9, after the checkpoint of step 6
        with pytest.raises(Interrupted):
            train_study(load_config(path), log=lambda _: None, progress=False)
    assert len(first.lrs) == 8
    second = StepRecorder(monkeypatch)
    execution = train_study(load_config(path), log=lambda _: None, progress=False)
    assert [r.resumed_from for r in execution.results.values()] == [6]
    assert len(second.lrs) == 12 - 6  # steps 7..12, not 1..12 nor 9..12
    peak = 5e-3
    assert second.lrs[0] == pytest.approx(peak * (13 - 7) / 10, rel=1e-12)  # the schedule resumes at step 7
    assert_same_weights(final_weights(load_config(path), 12), final_weights(reference, 12), rtol=0, atol=1e-7)


def test_epochs_are_passes_over_the_data_as_in_hf_trainer() -> None:
    # 16 shots, batch 32, 40 epochs: one step of 16 distinct examples per epoch, 40 steps.
    few_shot = TrainingConfig(epochs=40.0, batch_size=32)
    assert steps_per_epoch(few_shot, 16) == 1 and planned_steps(few_shot, 16) == 40
    for step in (1, 2, 40):
        (batch,) = update_batches(step, 16, 32, seed=3)
        assert sorted(batch) == list(range(16))
    # 10 examples, micro-batches of 4, 2 per step: 3 micro-batches per epoch, so 2 steps (4+4, then 2).
    accumulated = TrainingConfig(epochs=1.5, batch_size=4, grad_accum=2)
    assert steps_per_epoch(accumulated, 10) == 2 and planned_steps(accumulated, 10) == math.ceil(1.5 * 2)
    step1, step2 = update_batches(1, 10, 4, seed=0, grad_accum=2), update_batches(2, 10, 4, seed=0, grad_accum=2)
    assert [len(b) for b in step1] == [4, 4] and [len(b) for b in step2] == [2]
    assert sorted(np.concatenate(step1 + step2)) == list(range(10))  # one epoch: every example once
    next_epoch = np.concatenate(update_batches(3, 10, 4, seed=0, grad_accum=2))
    assert len(next_epoch) == 8 and not np.array_equal(next_epoch, np.concatenate(step1))  # a new permutation


def test_gradient_checkpointing_changes_memory_not_results(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    weights = {}
    for name, flag in (("plain", "false"), ("checkpointed", "true")):
        text = study_toml(
            assets,
            tmp_path / name / "out",
            families=("olmo2",),
            max_steps=3,
            every=3,
            extra=f"gradient_checkpointing = {flag}",
        )
        config = load_config(write_study(tmp_path / name, text))
        train_study(config, log=lambda _: None, progress=False)
        weights[name] = final_weights(config, 3)
    assert_same_weights(weights["plain"], weights["checkpointed"], rtol=0, atol=5e-5)
