"""Pattern-based fine-tuning with evaluation at scheduled steps, resumable at any moment.

A run (model × seed × data regime, see :meth:`gengen.study.config.StudyConfig.runs`) goes:

1. score the model before training (step 0) on every test set;
2. train with AdamW and a linear warmup/decay schedule; the loss is the cross-entropy of the answer token
   (" Yes" / " No") at the prompt's last position, over the full vocabulary or over the two answers only;
3. at each evaluation step, score every test set, commit the scores to the store at once, then save a
   checkpoint (weights, optimizer, scheduler, RNG states, step, tokens seen) atomically.

Killing the process at any moment and running the same command again resumes each unfinished run from its
last checkpoint: evaluations already in the store are skipped and no row is written twice. The order of the
training examples is a pure function of (seed, step), so a resumed run sees exactly the batches an
uninterrupted one would have seen.

Imports torch; ``import gengen`` does not import this module.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from gengen._versions import installed_versions
from gengen.errors import ConfigError
from gengen.scoring.hook import EvaluationHook
from gengen.scoring.models import (
    Precision,
    answer_token_ids,
    build_trainable_model,
    encode_prompts,
    last_token_logits,
    load_tokenizer,
    pad_batch,
    precision_for,
    select_device,
)
from gengen.scoring.score import EncodedTestset, encode_testsets
from gengen.scoring.series import SeriesLabels, training_backend
from gengen.study.config import RunIdentity, RunSpec, StudyConfig
from gengen.study.families import family_for
from gengen.study.paths import RunPaths
from gengen.study.schedule import (
    evaluation_steps,
    learning_rate_factor,
    planned_steps,
    steps_per_epoch,
    update_batches,
    update_indices,
)
from gengen.training.checkpoints import (
    STATE_FILE,
    list_checkpoints,
    load_trainer_state,
    save_checkpoint,
    set_rng_state,
)
from gengen.training.distributed import Strategy, World, current_world, strategy_for

__all__ = [
    "STATE_FILE",
    "RunOutcome",
    "TrainContext",
    "Trainer",
    "TrainerState",
    "World",
    "current_world",
    "evaluation_steps",
    "load_trainer_state",
    "planned_steps",
    "steps_per_epoch",
    "train_run",
    "update_batches",
    "update_indices",
]

Log = Callable[[str], None]
PACKAGES = (
    "gengen",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "peft",
    "accelerate",
    "numpy",
    "pandas",
)


def _package_versions() -> dict[str, str]:
    return installed_versions(PACKAGES, python=True)


# ---------------------------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunOutcome(RunIdentity):
    """What :func:`train_run` (:meth:`Trainer.fit`) did; ``model`` and ``run`` name the run (:class:`RunIdentity`).

    Attributes
    ----------
    total_steps : int
        Optimiser steps of the full run.
    resumed_from : int or None
        The checkpoint step training restarted from (None: from the start, or nothing to do).
    rows_written : int
        Score rows committed by this call.
    skipped : bool
        The run was already complete.
    seconds : float
        Wall time.
    """

    total_steps: int
    resumed_from: int | None
    rows_written: int
    skipped: bool
    seconds: float


class TrainContext:
    """What every run of a study trained in one process shares: tokenizer-dependent encodings, cached by tokenizer.

    Parameters
    ----------
    config : StudyConfig
    """

    def __init__(self, config: StudyConfig):
        self.config = config
        self.cache: dict[str, tuple[Any, tuple[int, int], pd.DataFrame, list[EncodedTestset]]] = {}

    def for_model(self, run: RunSpec) -> tuple[Any, tuple[int, int], pd.DataFrame, list[EncodedTestset]]:
        from gengen.data import load_examples

        source = run.model.tokenizer or run.model.path
        key = f"{source}@{run.model.revision}"
        if key not in self.cache:
            try:
                revision = None if run.model.tokenizer else run.model.revision
                tokenizer = load_tokenizer(source, revision, family=run.model.family)
            except ConfigError as error:
                raise ConfigError(f"model {run.model.name!r}: {error}") from None
            answers = answer_token_ids(tokenizer, self.config.task.answers)
            train = load_examples(self.config.task.train)
            testsets = encode_testsets(self.config, tokenizer)
            self.cache[key] = (tokenizer, answers, train, testsets)
        return self.cache[key]


def _training_data(config: StudyConfig, run: RunSpec, train: pd.DataFrame) -> pd.DataFrame:
    from gengen.data import few_shot_sample

    if run.shots is None:
        return train
    assert run.data_seed is not None
    return few_shot_sample(train, run.shots, run.data_seed, balanced=config.data.balanced)


def _answer_loss(logits: torch.Tensor, gold: torch.Tensor, answers: tuple[int, int], loss: str) -> torch.Tensor:
    """Cross-entropy of the gold answer token: over the vocabulary, or over the two answers only."""
    if loss == "answers":
        pair = logits[:, list(answers)]
        return torch.nn.functional.cross_entropy(pair, (gold == answers[1]).long(), reduction="sum")
    return torch.nn.functional.cross_entropy(logits, gold, reduction="sum")


def _write_run_record(
    paths: RunPaths, config: StudyConfig, run: RunSpec, total: int, steps: list[int], n_train: int
) -> dict[str, Any]:
    record = {
        "study": config.name,
        "model": asdict(run.model),
        "run": run.key,
        "seed": run.seed,
        "shots": run.shots,
        "data_seed": run.data_seed,
        "total_steps": total,
        "evaluation_steps": steps,
        "n_train": n_train,
        "config_file": str(config.source) if config.source else None,
        "config": config.raw,
        "packages": _package_versions(),
        "argv": sys.argv,
    }
    paths.folder.mkdir(parents=True, exist_ok=True)
    paths.record.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return record


def _silent(line: str) -> None:
    """Drops a progress line (the processes other than 0 of a distributed run)."""


@dataclass
class TrainerState:
    """What one run has done so far: where it resumed, the tokens it read, what it scored and wrote.

    Attributes
    ----------
    resume_step : int
        The checkpoint step training restarted from (0: the start).
    tokens : int
        Tokens read since the start of the run (restored from the checkpoint when resuming).
    tokens_at_start : int
        ``tokens`` when this process began (for its throughput).
    written : int
        Score rows committed by this process.
    scoring_seconds : float
        Wall time spent scoring.
    scored_examples : int
        Examples scored (per metric).
    """

    resume_step: int = 0
    tokens: int = 0
    tokens_at_start: int = 0
    written: int = 0
    scoring_seconds: float = 0.0
    scored_examples: int = 0

    def training_speed(self, seconds: float) -> float:
        """Tokens per second of training over ``seconds`` of wall time (scoring time excluded)."""
        return (self.tokens - self.tokens_at_start) / max(seconds - self.scoring_seconds, 1e-9)

    def scoring_speed(self) -> float:
        """Examples scored per second of scoring."""
        return self.scored_examples / max(self.scoring_seconds, 1e-9)


class Trainer:
    """One run's fine-tuning, in named steps: :meth:`resume`, :meth:`step`, :meth:`evaluate`, :meth:`save`.

    :meth:`fit` chains them: score step 0 (when starting afresh), then every optimiser step, with an
    evaluation (scores committed to the store at once) and a checkpoint at the scheduled steps. Only
    :meth:`resume` builds the model, optimiser and schedules: from the run's last checkpoint when there is one,
    with the random number generators where that checkpoint left them.

    Parameters
    ----------
    config : StudyConfig
    run : RunSpec
        One of ``config.runs()``.
    store : gengen.store.database.Store or gengen.executors.spool.RunSpool
        Where scores and the run's manifest go.
    context : TrainContext, optional
        Shared tokenizer/test-set cache (built when absent).
    log : callable
        Receives progress lines (silenced in the processes other than 0).
    progress : bool
        Show a progress bar when the output is a terminal.
    world : World, optional
        The processes training this run together (default: :func:`current_world`).
    paths : RunPaths, optional
        The run's folder, record and checkpoints, as the study driver planned them (default:
        :meth:`RunPaths.for_run` of the run, for a trainer made outside a study's execution).
    """

    # Built by resume():
    model: Any
    optimizer: Any
    scheduler: Any
    scaler: Any
    params: list[torch.Tensor]
    device: torch.device
    precision: Precision
    encoded_train: Any
    gold_train: np.ndarray

    def __init__(
        self,
        config: StudyConfig,
        run: RunSpec,
        *,
        store: Any,
        context: TrainContext | None = None,
        log: Log = print,
        progress: bool = True,
        world: World | None = None,
        paths: RunPaths | None = None,
    ):
        self.started = time.perf_counter()
        self.world = world or current_world()
        if not self.world.main:
            log, progress = _silent, False
        self.config, self.run, self.store, self.log, self.progress = config, run, store, log, progress
        self.training = config.training_for(run.model)
        context = context or TrainContext(config)
        self.tokenizer, self.answers, train_all, self.testsets = context.for_model(run)
        self.train_set = _training_data(config, run, train_all)
        self.total = planned_steps(self.training, len(self.train_set))
        self.steps = evaluation_steps(config.evaluation, self.total)
        self.metrics = list(config.evaluation.metrics)
        self.done = store.completed(run.model.name, run.key)
        self.paths = paths or RunPaths.for_run(config, run)
        self.strategy: Strategy = strategy_for(self.world, self.training)
        self.record: dict[str, Any] = {}
        self.state = TrainerState()
        # The evaluation hook of every training loop (gengen.integrations' too), over the registry's training backend.
        self.hook = EvaluationHook(
            [training_backend(config)],
            store,
            SeriesLabels(run.model.name, run.model.family, run.model.size, run.key, study=config.name),
            world=self.world,
            split_examples=self.strategy.splits_scoring(),
            log=_silent,
        )

    # ------------------------------------------------------------------ state
    def complete(self) -> bool:
        """Whether every planned evaluation is stored and the manifest says the run is complete.

        Returns
        -------
        bool
            True when there is nothing left to do.
        """
        wanted = {(s, t.name, m) for s in self.steps for t in self.testsets for m in self.metrics}
        manifest = self.store.manifest(self.run.model.name, self.run.key) or {}
        return wanted <= self.done and manifest.get("status") == "complete"

    def resume(self) -> int:
        """Record the run as running; build its model, optimiser, schedule and gradient scaler; encode its data.

        From the last checkpoint when there is one (its trainer state read without running code, the
        generators' states restored last); else from the model's path, seeded by the run's seed.

        Returns
        -------
        int
            The step training restarts from (0: the start).
        """
        run, training, world = self.run, self.training, self.world
        checkpoints = list_checkpoints(self.paths.checkpoints)  # listed by every process before process 0 can add one
        world.barrier()
        if world.main:
            self.record = _write_run_record(self.paths, self.config, run, self.total, self.steps, len(self.train_set))
            if world.size > 1:
                self.log(f"{run.model.name} {run.key}: trained {self.strategy.name} over {world.size} processes")
            self.store.write_manifest(
                run.model.name, run.key, {**self.record, "status": "running", "run_dir": str(self.paths.folder)}
            )

        self.device = select_device(training.device)
        self.precision = precision_for(training.precision, training.method, self.device)
        self.hook.attach(self.tokenizer, self.device, self.precision)
        self.state.resume_step, resume_path = checkpoints[-1] if checkpoints else (0, None)

        torch.manual_seed(run.seed)
        random.seed(run.seed)
        state = load_trainer_state(resume_path / STATE_FILE) if resume_path is not None else None
        load_on = self.strategy.load_device(self.device)
        self.model = build_trainable_model(self.config, run, load_on, resume_path, self.precision)
        self.strategy.wrap(self.model, self.device, family_for(run.model.family))
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for p in self.params if p.ndim >= 2]
        no_decay = [p for p in self.params if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": training.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=training.learning_rate,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, learning_rate_factor(self.total, training))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.compute == torch.float16)
        if state is not None:
            self._load_state(state)
            self.log(f"{run.model.name} {run.key}: resuming from step {self.state.resume_step}")
        self.state.tokens_at_start = self.state.tokens
        self.encoded_train = encode_prompts(
            self.tokenizer, self.train_set, self.config.task.prompt, training.max_length, training.truncation
        )
        self.gold_train = np.where(self.train_set["label"].to_numpy() == 1, self.answers[0], self.answers[1])
        return self.state.resume_step

    def _load_state(self, state: dict[str, Any]) -> None:
        """Optimiser, schedule, scaler, tokens seen and generators from a checkpoint's trainer state."""
        self.strategy.load_optimizer_state(self.model, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.state.tokens = int(state["tokens"])
        set_rng_state(state["rng"])

    # ------------------------------------------------------------------ steps
    def step(self, step: int) -> int:
        """Take optimiser step ``step`` over its micro-batches.

        The loss is the mean over the step's examples, whatever the micro-batches: accumulating two half
        batches gives the gradient of one full batch. Each process computes its share of every micro-batch and
        the gradients are summed over the processes (by FSDP itself when sharded).

        Parameters
        ----------
        step : int
            The optimiser step, 1-based; its examples are :func:`update_batches` of it.

        Returns
        -------
        int
            Tokens the step read (prompts and answers of its examples, over every process).
        """
        training = self.training
        batches = update_batches(step, len(self.train_set), training.batch_size, self.run.seed, training.grad_accum)
        n_step = sum(len(micro) for micro in batches)
        used_total = 0
        self.optimizer.zero_grad(set_to_none=True)
        for micro in batches:
            used = sum(len(self.encoded_train[i]) for i in micro) + len(micro)
            self.state.tokens += used
            used_total += used
            part = self.strategy.share(micro)  # this process's examples of the micro-batch
            if part is None:
                continue
            share, weight = part
            ids, mask, lengths = pad_batch(
                [self.encoded_train[i] for i in share], self.tokenizer.pad_token_id, self.device
            )
            gold = torch.from_numpy(self.gold_train[share]).to(self.device)
            with self.precision.context(self.device):
                logits = last_token_logits(self.model, ids, mask, lengths)
            loss = _answer_loss(logits, gold, self.answers, self.config.task.loss) / n_step * weight
            self.scaler.scale(loss * self.strategy.loss_factor()).backward()
        self.strategy.reduce(self.params)
        if training.max_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, training.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return used_total

    def evaluate(self, step: int) -> None:
        """Score every test set at ``step`` not yet stored and commit the rows to the store at once.

        Through the evaluation hook (:class:`gengen.scoring.hook.EvaluationHook`), as users' own loops do: each
        process scores a shard of every test set (all of it when the model is sharded: its forward passes need
        every process) and process 0 writes.

        Parameters
        ----------
        step : int
            The optimiser steps taken (0: before training), recorded with the scores.
        """
        columns = {
            "seed": self.run.seed,
            "shots": self.run.shots,
            "tokens": self.state.tokens,
            "epoch": step / steps_per_epoch(self.training, len(self.train_set)),
        }
        seconds = self.hook.seconds
        sizes = {testset.name: len(testset.labels) for testset in self.testsets}
        pending = self.hook.pending(step)[0]
        self.state.written += self.hook.evaluate(self.model, step, columns)
        self.state.scoring_seconds += self.hook.seconds - seconds
        self.state.scored_examples += sum(sizes[name] for name in pending)

    def save(self, step: int) -> None:
        """Save ``checkpoint-<step>`` when one is due (every ``checkpoint_every`` steps and at the end).

        A sharded model's full states are gathered by every process; process 0 writes them.

        Parameters
        ----------
        step : int
            The optimiser steps taken.
        """
        every = self.training.checkpoint_every
        if not (every is None or step % every == 0 or step == self.total):
            return
        gathered = self.strategy.gather(self.model, self.optimizer)
        if self.world.main:
            save_checkpoint(
                self.paths.checkpoints,
                step,
                self.model,
                self.tokenizer,
                self.optimizer,
                self.scheduler,
                self.scaler,
                self.state.tokens,
                self.training.keep_checkpoints,
                *gathered,
            )

    # ------------------------------------------------------------------ whole run
    def outcome(self, rows_written: int, skipped: bool = False) -> RunOutcome:
        """What this run did so far.

        Parameters
        ----------
        rows_written : int
            Score rows this process committed.
        skipped : bool
            The run was complete before this call.

        Returns
        -------
        RunOutcome
        """
        resumed = None if skipped else (self.state.resume_step or None)
        seconds = time.perf_counter() - self.started
        return RunOutcome(self.run.model.name, self.run.key, self.total, resumed, rows_written, skipped, seconds)

    def fit(self) -> RunOutcome:
        """Resume, score step 0 when starting afresh, then step, evaluate and save to the end of the run.

        Returns
        -------
        RunOutcome
            Skipped when the run was already complete.
        """
        if self.complete():
            return self.outcome(0, skipped=True)
        self.resume()
        if self.state.resume_step == 0:
            self.evaluate(0)
        run = self.run
        bar = _progress_bar(self.progress)
        task = bar.add_task(f"{run.model.name} {run.key}", total=self.total, completed=self.state.resume_step)
        self.model.train()
        window_tokens, window_start = 0, time.perf_counter()
        due = set(self.steps)  # membership per step: a set, not the list of up to MAX_EVALUATIONS steps
        with bar:
            for step in range(self.state.resume_step + 1, self.total + 1):
                window_tokens += self.step(step)
                bar.update(task, advance=1)
                if step in due:
                    elapsed = time.perf_counter() - window_start
                    self.evaluate(step)
                    self.save(step)
                    speed = window_tokens / max(elapsed, 1e-9)
                    bar.update(task, description=f"{run.model.name} {run.key} ({speed:,.0f} tokens/s)")
                    window_tokens, window_start = 0, time.perf_counter()
                    self.world.barrier()  # the others wait while process 0 scores and saves
        return self.finish()

    def finish(self) -> RunOutcome:
        """Drop the checkpoints when none are kept, mark the run complete and report its throughput.

        Returns
        -------
        RunOutcome
            The rows written by this process (0 in the processes other than 0).
        """
        run = self.run
        if not self.world.main:
            self.release()
            return self.outcome(0)
        if self.training.keep_checkpoints == "none":
            for _, path in list_checkpoints(self.paths.checkpoints):
                shutil.rmtree(path, ignore_errors=True)
        self.store.write_manifest(
            run.model.name,
            run.key,
            {**self.record, "status": "complete", "run_dir": str(self.paths.folder), "tokens": self.state.tokens},
        )
        outcome = self.outcome(self.state.written)
        self.log(
            f"{run.model.name} {run.key}: {self.total} steps, {self.state.written} scores written in "
            f"{outcome.seconds:.1f} s (training {self.state.training_speed(outcome.seconds):,.0f} "
            f"tokens/s, scoring {self.state.scoring_speed():,.0f} examples/s)"
        )
        self.release()
        return outcome

    def release(self) -> None:
        """Let go of the model and optimiser (their memory is freed before the next run is built)."""
        del self.model, self.optimizer


def train_run(config: StudyConfig, run: RunSpec, **options: Any) -> RunOutcome:
    """Fine-tune and score one run, resuming from its last checkpoint and skipping stored evaluations.

    The per-run function every executor calls: :meth:`Trainer.fit` of a new :class:`Trainer`.

    Parameters
    ----------
    config : StudyConfig
    run : RunSpec
        One of ``config.runs()``.
    **options
        The trainer's keywords: ``store`` (required: where scores and the run's manifest go), ``context``,
        ``log``, ``progress``, ``world`` and ``paths``, as :class:`Trainer` documents them.

    Returns
    -------
    RunOutcome
    """
    return Trainer(config, run, **options).fit()


def _progress_bar(enabled: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )
