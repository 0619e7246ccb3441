"""``gengen train``: fine-tune every run of a study and score its checkpoints into the study's store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen.cli._common import OnlyModels, StudyFile, TrustTaskCode, user_errors_exit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gengen.study.config import ModelSpec, RunSpec, StudyConfig
    from gengen.study.tables import DataSpec


@user_errors_exit
def train_command(
    config: StudyFile,
    model: OnlyModels = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check the config and print the plan; train nothing.")
    ] = False,
    jobs: Annotated[int, typer.Option(help="Runs trained at once, one process each (for small models).", min=1)] = 1,
    threads: Annotated[
        int | None, typer.Option(help="CPU threads for torch per process (default: torch's).", min=1)
    ] = None,
    gpus: Annotated[
        int,
        typer.Option(
            help="Train each run data parallel over this many GPUs (torchrun, one process per GPU; "
            "without CUDA, that many CPU processes).",
            min=1,
        ),
    ] = 1,
    trust_task_code: TrustTaskCode = False,
) -> None:
    """Fine-tune and score every run of a study; re-running resumes where it stopped.

    Each evaluation's scores are committed to <output>/gengen.sqlite as soon as they are computed, and a
    checkpoint is saved at evaluation steps, so a killed run resumes from its last checkpoint. With
    evaluation.backend = "lm-eval" the kept checkpoints (and the model before training) are then scored on the
    study's lm-eval tasks.
    """
    from gengen.errors import ConfigError
    from gengen.study.config import check_model_sources, load_config
    from gengen.study.paths import RunPlan

    study = load_config(config)
    runs = study.select_runs(model)
    # Before anything loads: a local model folder that is missing fails here, in one line.
    check_model_sources(study, [m for m in study.models if any(r.model == m for r in runs)])
    from gengen.training.checkpoints import check_run_folders

    plan = RunPlan.for_runs(study, runs)  # a run folder leading outside the output is refused here
    check_run_folders(plan.paths.values())  # a linked checkpoint folder is refused before any run starts
    from gengen.scoring.series import check_trainable, score_after_training

    check_trainable(study, trust_task_code=trust_task_code)
    _check_schedules(study, runs)  # what plan and each run refuse (too many steps or evaluations), dry run too
    if dry_run:
        typer.echo(f"study {study.name}: {len(runs)} runs, {len(study.testsets)} test sets, output {study.output}")
        typer.echo(f"  train: {_data_line(study.task.train)}")
        for testset in study.testsets:
            typer.echo(f"  test set {testset.name}: {_data_line(testset, study.evaluation.max_examples)}")
        for spec in study.models:
            if any(r.model == spec for r in runs):
                typer.echo(f"  model {spec.name} ({spec.family}): {_training_line(study, spec)}")
        for run in plan:
            typer.echo(f"  {run.model.name} ({run.model.path}) {run.key} -> {plan.paths[run].folder}")
        return
    if gpus > 1 and "RANK" not in os.environ:
        if jobs > 1:
            raise ConfigError("--jobs: give either --jobs (several runs at once) or --gpus (one run over several GPUs)")
        raise typer.Exit(code=_launch(gpus, config, model, threads, trust_task_code))
    import torch

    from gengen.executors.direct import train_study

    if threads is not None:
        torch.set_num_threads(threads)
    execution = train_study(
        study,
        plan=plan,
        progress=sys.stderr.isatty(),
        log=typer.echo,
        jobs=jobs,
        threads=threads or 1,
    )
    if os.environ.get("RANK", "0") != "0":
        return  # the other processes of a data-parallel run: process 0 reports
    finished = len(execution.results) + len(execution.skipped)
    typer.echo(f"{finished} runs done, {execution.rows_merged} scores written to {study.output}")
    rows = score_after_training(study, execution.plan, trust_task_code=trust_task_code, log=typer.echo)
    if rows is not None:
        typer.echo(f"{study.evaluation.backend}: {len(rows)} scores written to {study.output}")


def _check_schedules(study: StudyConfig, runs: Sequence[RunSpec]) -> None:
    """Every run's optimiser steps and evaluation steps, checked as ``gengen plan`` and the trainer check them
    (training examples: the shot count, else the training set's size as the plan estimates it)."""
    from gengen.study.plan import data_size
    from gengen.study.schedule import evaluation_steps, planned_steps

    full = data_size(study.task.train) if any(run.shots is None for run in runs) else 0
    for run in runs:
        evaluation_steps(study.evaluation, planned_steps(study.training_for(run.model), run.shots or full))


def _data_line(spec: DataSpec, cap: int | None = None) -> str:
    """Where a data set is read from: registered source or file, split, cap."""
    from gengen.data import REGISTRY

    where = spec.source if spec.source is not None else str(spec.path)
    split = spec.split or (REGISTRY[spec.source].test_split if spec.source is not None else None)
    limit = spec.max_examples if spec.max_examples is not None else cap
    return f"{where}{f' split {split}' if split else ''}, {'all examples' if limit is None else f'at most {limit}'}"


def _training_line(study: StudyConfig, model: ModelSpec) -> str:
    """One model's training settings, with its family's changes applied."""
    training = study.training_for(model)
    line: str = training.method
    if training.method == "lora":
        lora = training.lora
        targets = ",".join(study.lora_targets(model))
        line += f" r={lora.r} alpha={lora.alpha} dropout={lora.dropout:g} targets={targets}"
    memory = ["gradient checkpointing"] if training.gradient_checkpointing else []
    memory += [f"{training.quantization} base"] if training.quantization != "none" else []
    return line + (f"; {', '.join(memory)}" if memory else "")


def _launch(gpus: int, config: Path, models: list[str] | None, threads: int | None, trust_task_code: bool) -> int:
    """Run this command again under torchrun, once per GPU; the processes form one torch.distributed world."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    command += ["-m", "gengen.cli.train"]
    command += ["train", str(config)] + [f"--model={m}" for m in models or []]
    command += [f"--threads={threads}"] if threads is not None else []
    command += ["--trust-task-code"] if trust_task_code else []
    return subprocess.call(command)


def register(app: typer.Typer) -> None:
    """Add ``gengen train`` to the CLI."""
    app.command("train")(train_command)


if __name__ == "__main__":  # the entry point of the processes _launch starts
    from gengen.cli import main

    main(sys.argv[1:])
