"""Pattern-based fine-tuning with evaluation at scheduled steps, resumable at any moment.

A run (model × seed × data regime, see :meth:`gengen.config.StudyConfig.runs`) goes:

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

import datetime
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from gengen._versions import installed_versions
from gengen.config import RunSpec, StudyConfig, TrainingConfig
from gengen.errors import ConfigError, InputError
from gengen.models import (
    Precision,
    answer_token_ids,
    encode_prompts,
    last_token_logits,
    load_adapter,
    load_model,
    load_tokenizer,
    pad_batch,
    precision_for,
    select_device,
)
from gengen.plan import evaluation_steps, planned_steps, steps_per_epoch
from gengen.score import EncodedTestset, encode_testsets, score_rows

__all__ = [
    "RunOutcome",
    "TrainContext",
    "Trainer",
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
CHECKPOINT_PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.pt"
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


# ---------------------------------------------------------------------------------------------- schedule


def update_batches(step: int, n_train: int, batch_size: int, seed: int, grad_accum: int = 1) -> list[np.ndarray]:
    """The micro-batches (training-example indices) of optimiser step ``step`` (1-based).

    Epoch ``e`` reads a permutation of ``range(n_train)`` drawn from ``(seed, e)`` in consecutive micro-batches
    of ``batch_size`` (the last one smaller); step ``s`` takes ``grad_accum`` of them, the epoch's last step
    what is left (see :func:`steps_per_epoch`). Being a function of the step alone, the order survives a
    restart.
    """
    micro_batches = math.ceil(n_train / batch_size)
    per_epoch = max(1, math.ceil(micro_batches / grad_accum))
    epoch, within = divmod(step - 1, per_epoch)
    permutation = np.random.default_rng([seed, int(epoch)]).permutation(n_train)
    first = within * grad_accum
    return [
        permutation[b * batch_size : (b + 1) * batch_size] for b in range(first, min(first + grad_accum, micro_batches))
    ]


def update_indices(step: int, n_train: int, batch_size: int, seed: int, grad_accum: int = 1) -> np.ndarray:
    """All training-example indices of optimiser step ``step``: :func:`update_batches` concatenated."""
    return np.concatenate(update_batches(step, n_train, batch_size, seed, grad_accum))


# ---------------------------------------------------------------------------------------------- checkpoints


def _checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    found = []
    if run_dir.is_dir():
        for path in run_dir.iterdir():
            suffix = path.name[len(CHECKPOINT_PREFIX) :]
            if path.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit() and (path / STATE_FILE).is_file():
                found.append((int(suffix), path))
    return sorted(found)


def _rng_state() -> dict[str, Any]:
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss], "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _save_checkpoint(
    run_dir: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    tokens: int,
    keep: str,
    model_state: dict[str, Any] | None = None,
    optimizer_state: dict[str, Any] | None = None,
) -> None:
    """Write ``checkpoint-<step>`` atomically (a temporary folder renamed), then prune older ones.

    The folder is a loadable model with its tokenizer (so ``gengen score`` can read it alone) plus
    ``trainer_state.pt``: optimizer, scheduler, grad scaler and RNG states, the step and the tokens seen, as
    tensors and plain containers only, so that :func:`load_trainer_state` reads it without running code.
    ``model_state`` and ``optimizer_state`` are the full states gathered from a sharded (FSDP) model.
    """
    final = run_dir / f"{CHECKPOINT_PREFIX}{step}"
    tmp = run_dir / f".{CHECKPOINT_PREFIX}{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if model_state is not None:
        model.save_pretrained(tmp, state_dict=model_state)
    else:
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "tokens": tokens,
        "optimizer": optimizer_state if optimizer_state is not None else optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": _rng_state(),
    }
    torch.save(state, tmp / STATE_FILE)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if keep != "all":
        for old_step, path in _checkpoints(run_dir):
            if old_step < step:
                shutil.rmtree(path, ignore_errors=True)


STATE_KEYS = ("step", "tokens", "optimizer", "scheduler", "scaler", "rng")


def load_trainer_state(path: Path) -> dict[str, Any]:
    """Read a checkpoint's ``trainer_state.pt`` without ever running code from it.

    The file is unpickled by torch's ``weights_only`` loader, which builds tensors and plain containers and
    refuses anything else, so a planted file (anyone who can write the output folder can plant one) cannot
    run code as the user.

    Raises
    ------
    InputError
        The file holds something else than a trainer state (objects, code, a truncated file), in one line.
    """
    refuse = f"{path}: refused as resume state"
    advice = "delete this checkpoint folder to resume from an earlier one"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # whatever the unpickler says, the file is not ours
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{refuse} (not plain tensors and containers: {reason[:200]}); {advice}") from None
    if not isinstance(state, dict) or any(key not in state for key in STATE_KEYS):
        raise InputError(f"{refuse} (expected a table with {', '.join(STATE_KEYS)}); {advice}")
    for key in ("step", "tokens"):
        if isinstance(state[key], bool) or not isinstance(state[key], int) or state[key] < 0:
            raise InputError(f"{refuse} ({key!r} is {state[key]!r}, not a count); {advice}")
    return state


def _package_versions() -> dict[str, str]:
    return installed_versions(PACKAGES, python=True)


# ---------------------------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`train_run` (:meth:`Trainer.fit`) did.

    Attributes
    ----------
    model, run : str
        The run's identity in the store.
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

    model: str
    run: str
    total_steps: int
    resumed_from: int | None
    rows_written: int
    skipped: bool
    seconds: float


@dataclass(frozen=True)
class World:
    """The processes training one run together (torch.distributed), or just this one.

    Data parallel: every process holds the whole model, computes the gradient of its share of each micro-batch
    (examples ``rank::size``), the gradients are summed across processes, and every process takes the same
    optimiser step. Process 0 alone scores, writes the store and saves checkpoints (one writer), the others
    wait for it.
    """

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Whether this process is the one that writes."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every process (no-op alone)."""
        if self.size > 1:
            torch.distributed.barrier()

    def sum_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Sum each parameter's gradient over the processes (a process without examples contributes zeros)."""
        if self.size == 1:
            return
        for param in params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            torch.distributed.all_reduce(param.grad, op=torch.distributed.ReduceOp.SUM)


def current_world() -> World:
    """The distributed world this process belongs to, joining it when launched by torchrun (``WORLD_SIZE`` > 1).

    The backend is NCCL on GPUs (each process on ``cuda:LOCAL_RANK``), gloo on the CPU.
    """
    import torch.distributed as dist

    if not dist.is_available():
        return World()
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return World()
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        # Process 0 scores every test set while the others wait: allow for long evaluations.
        dist.init_process_group(backend, timeout=datetime.timedelta(hours=4))
    return World(dist.get_rank(), dist.get_world_size())


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
                tokenizer = load_tokenizer(source, None if run.model.tokenizer else run.model.revision)
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


def _shard(model: Any, device: torch.device) -> None:
    """Shard ``model`` over the processes with FSDP2: each decoder layer, then the rest, on ``device``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    for module in list(model.modules()):
        if type(module).__name__.endswith("DecoderLayer"):
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _gather_states(model: Any, optimizer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The full model and optimiser states of a sharded model, on the CPU (every process must call this)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def _enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant: no input gradient needed)."""
    # transformers 5 renames the method (and its argument); older versions only have the first name.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _build_model(
    config: StudyConfig, run: RunSpec, device: torch.device, checkpoint: Path | None, precision: Precision
) -> Any:
    """The model to train: from the last checkpoint when resuming, else from the model's path.

    Full fine-tuning keeps fp32 master weights; LoRA freezes a base in the compute dtype (or 8/4-bit) and
    trains fp32 adapters. Gradient checkpointing, when asked for, uses the non-reentrant variant, which needs
    no gradient on the inputs (the frozen embeddings of a LoRA base have none). The settings are the model's
    family's (:meth:`gengen.config.StudyConfig.training_for`).
    """
    training = config.training_for(run.model)
    if training.method == "full":
        source = str(checkpoint) if checkpoint is not None else run.model.path
        revision = None if checkpoint is not None else run.model.revision
        model = load_model(source, revision=revision, dtype=precision.weights, device=device, label=run.model.name)
        if training.gradient_checkpointing:
            _enable_checkpointing(model)
        return model
    import peft

    base = load_model(
        run.model.path,
        revision=run.model.revision,
        dtype=precision.weights,
        device=device,
        quantization=training.quantization,
        label=run.model.name,
    )
    if training.quantization != "none":
        base = peft.prepare_model_for_kbit_training(
            base,
            use_gradient_checkpointing=training.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    elif training.gradient_checkpointing:
        _enable_checkpointing(base)
    if checkpoint is not None:
        return load_adapter(base, str(checkpoint), is_trainable=True).to(device)
    lora = training.lora
    settings = peft.LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(config.lora_targets(run.model)),
        task_type="CAUSAL_LM",
    )
    try:
        return peft.get_peft_model(base, settings)
    except ValueError as error:
        raise ConfigError(f"training.lora.target_modules: model {run.model.name!r}: {error}") from None


def _schedule(total: int, training: TrainingConfig) -> Callable[[int], float]:
    """The learning-rate factor of ``LambdaLR``, called with the optimiser steps taken so far (0 for step 1).

    W warmup steps (``warmup_steps``, or the ``warmup_ratio`` of the total: rounded by the "gengen" rule,
    rounded up by the "transformers" one), then a linear decay: step s (1-based) gets s / W ("gengen") or
    (s - 1) / W ("transformers", ``get_linear_schedule_with_warmup``) while in the warmup, and
    (total - s + 1) / (total - W) after it.
    """
    hf = training.warmup_rule == "transformers"
    from_ratio = math.ceil(training.warmup_ratio * total) if hf else round(training.warmup_ratio * total)
    warmup = max(training.warmup_steps, from_ratio)

    def factor(taken: int) -> float:
        if warmup and taken < warmup:
            return (taken if hf else taken + 1) / warmup
        return max(0.0, (total - taken) / max(1, total - warmup))

    return factor


def _answer_loss(logits: torch.Tensor, gold: torch.Tensor, answers: tuple[int, int], loss: str) -> torch.Tensor:
    """Cross-entropy of the gold answer token: over the vocabulary, or over the two answers only."""
    if loss == "answers":
        pair = logits[:, list(answers)]
        return torch.nn.functional.cross_entropy(pair, (gold == answers[1]).long(), reduction="sum")
    return torch.nn.functional.cross_entropy(logits, gold, reduction="sum")


def _write_run_record(
    run_dir: Path, config: StudyConfig, run: RunSpec, total: int, steps: list[int], n_train: int
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
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return record


def _silent(line: str) -> None:
    """Drops a progress line (the processes other than 0 of a distributed run)."""


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
    store : gengen.store.Store or gengen.executors.spool.RunSpool
        Where scores and the run's manifest go.
    context : TrainContext, optional
        Shared tokenizer/test-set cache (built when absent).
    log : callable
        Receives progress lines (silenced in the processes other than 0).
    progress : bool
        Show a progress bar when the output is a terminal.
    world : World, optional
        The processes training this run together (default: :func:`current_world`).
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
        self.run_dir = config.run_dir(run)
        self.sharded = self.world.size > 1 and self.training.strategy == "fsdp"
        self.record: dict[str, Any] = {}
        self.resume_step = 0
        self.tokens = 0
        self.tokens_at_start = 0
        self.written = 0
        self.scoring_seconds = 0.0
        self.scored_examples = 0

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
        checkpoints = _checkpoints(self.run_dir)  # listed by every process before process 0 can add one
        world.barrier()
        if world.main:
            self.record = _write_run_record(self.run_dir, self.config, run, self.total, self.steps, len(self.train_set))
            if world.size > 1:
                how = "sharded (FSDP)" if training.strategy == "fsdp" else "data parallel"
                self.log(f"{run.model.name} {run.key}: trained {how} over {world.size} processes")
            self.store.write_manifest(
                run.model.name, run.key, {**self.record, "status": "running", "run_dir": str(self.run_dir)}
            )

        self.device = select_device(training.device)
        self.precision = precision_for(training.precision, training.method, self.device)
        self.resume_step, resume_path = checkpoints[-1] if checkpoints else (0, None)

        torch.manual_seed(run.seed)
        random.seed(run.seed)
        state = load_trainer_state(resume_path / STATE_FILE) if resume_path is not None else None
        # A sharded model is loaded on the CPU, then each process keeps its shard on its device.
        load_on = torch.device("cpu") if self.sharded else self.device
        self.model = _build_model(self.config, run, load_on, resume_path, self.precision)
        if self.sharded:
            _shard(self.model, self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for p in self.params if p.ndim >= 2]
        no_decay = [p for p in self.params if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": training.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=training.learning_rate,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _schedule(self.total, training))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.compute == torch.float16)
        if state is not None:
            self._load_state(state)
            self.log(f"{run.model.name} {run.key}: resuming from step {self.resume_step}")
        self.tokens_at_start = self.tokens
        self.encoded_train = encode_prompts(
            self.tokenizer, self.train_set, self.config.task.prompt, training.max_length, training.truncation
        )
        self.gold_train = np.where(self.train_set["label"].to_numpy() == 1, self.answers[0], self.answers[1])
        return self.resume_step

    def _load_state(self, state: dict[str, Any]) -> None:
        """Optimiser, schedule, scaler, tokens seen and generators from a checkpoint's trainer state."""
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            options = StateDictOptions(full_state_dict=True)
            set_optimizer_state_dict(self.model, self.optimizer, optim_state_dict=state["optimizer"], options=options)
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.tokens = int(state["tokens"])
        _set_rng_state(state["rng"])

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
        training, world = self.training, self.world
        batches = update_batches(step, len(self.train_set), training.batch_size, self.run.seed, training.grad_accum)
        n_step = sum(len(micro) for micro in batches)
        used_total = 0
        self.optimizer.zero_grad(set_to_none=True)
        for micro in batches:
            used = sum(len(self.encoded_train[i]) for i in micro) + len(micro)
            self.tokens += used
            used_total += used
            share = micro[world.rank :: world.size]  # this process's examples of the micro-batch
            weight = 1.0
            if len(share) == 0:
                if not self.sharded:
                    continue
                # FSDP's forward and backward are collective: take part with an example that counts 0.
                share, weight = micro[:1], 0.0
            ids, mask, lengths = pad_batch(
                [self.encoded_train[i] for i in share], self.tokenizer.pad_token_id, self.device
            )
            gold = torch.from_numpy(self.gold_train[share]).to(self.device)
            with self.precision.context(self.device):
                logits = last_token_logits(self.model, ids, mask, lengths)
            loss = _answer_loss(logits, gold, self.answers, self.config.task.loss) / n_step * weight
            if self.sharded:
                loss = loss * world.size  # FSDP averages the gradients over processes; the step needs their sum
            self.scaler.scale(loss).backward()
        if not self.sharded:
            world.sum_gradients(self.params)
        if training.max_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, training.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return used_total

    def evaluate(self, step: int) -> None:
        """Score every test set at ``step`` not yet stored and commit the rows to the store at once.

        A sharded model needs every process in its forward passes; otherwise process 0 scores alone.

        Parameters
        ----------
        step : int
            The optimiser steps taken (0: before training), recorded with the scores.
        """
        world, run = self.world, self.run
        if (not world.main and not self.sharded) or all(
            (step, t.name, m) in self.done for t in self.testsets for m in self.metrics
        ):
            return
        base = {
            "study": self.config.name,
            "model": run.model.name,
            "family": run.model.family,
            "size": run.model.size,
            "run": run.key,
            "seed": run.seed,
            "shots": run.shots,
            "step": step,
            "tokens": self.tokens,
            "epoch": step / steps_per_epoch(self.training, len(self.train_set)),
        }
        began = time.perf_counter()
        with self.precision.context(self.device):
            rows = score_rows(
                self.model,
                self.testsets,
                self.answers,
                pad_id=self.tokenizer.pad_token_id,
                batch_size=self.config.evaluation.batch_size,
                metrics=self.metrics,
                base=base,
                skip=self.done,
                log=None,
                max_tokens=self.config.evaluation.max_tokens,
                ties=self.config.evaluation.ties,
            )
        self.scoring_seconds += time.perf_counter() - began
        self.scored_examples += sum(int(r["n_examples"]) for r in rows if r["metric"] == self.metrics[0])
        if rows and world.main:
            self.written += self.store.write_scores(pd.DataFrame(rows))
            self.done = self.done | {(step, r["testset"], r["metric"]) for r in rows}

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
        gathered = _gather_states(self.model, self.optimizer) if self.sharded else (None, None)
        if self.world.main:
            _save_checkpoint(
                self.run_dir,
                step,
                self.model,
                self.tokenizer,
                self.optimizer,
                self.scheduler,
                self.scaler,
                self.tokens,
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
        resumed = None if skipped else (self.resume_step or None)
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
        if self.resume_step == 0:
            self.evaluate(0)
        run = self.run
        bar = _progress_bar(self.progress)
        task = bar.add_task(f"{run.model.name} {run.key}", total=self.total, completed=self.resume_step)
        self.model.train()
        window_tokens, window_start = 0, time.perf_counter()
        with bar:
            for step in range(self.resume_step + 1, self.total + 1):
                window_tokens += self.step(step)
                bar.update(task, advance=1)
                if step in self.steps:
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
            for _, path in _checkpoints(self.run_dir):
                shutil.rmtree(path, ignore_errors=True)
        self.store.write_manifest(
            run.model.name,
            run.key,
            {**self.record, "status": "complete", "run_dir": str(self.run_dir), "tokens": self.tokens},
        )
        outcome = self.outcome(self.written)
        train_seconds = max(outcome.seconds - self.scoring_seconds, 1e-9)
        self.log(
            f"{run.model.name} {run.key}: {self.total} steps, {self.written} scores written in "
            f"{outcome.seconds:.1f} s (training {(self.tokens - self.tokens_at_start) / train_seconds:,.0f} "
            f"tokens/s, scoring {self.scored_examples / max(self.scoring_seconds, 1e-9):,.0f} examples/s)"
        )
        self.release()
        return outcome

    def release(self) -> None:
        """Let go of the model and optimiser (their memory is freed before the next run is built)."""
        del self.model, self.optimizer


def train_run(
    config: StudyConfig,
    run: RunSpec,
    *,
    store: Any,
    context: TrainContext | None = None,
    log: Log = print,
    progress: bool = True,
    world: World | None = None,
) -> RunOutcome:
    """Fine-tune and score one run, resuming from its last checkpoint and skipping stored evaluations.

    The per-run function every executor calls: :meth:`Trainer.fit` of a new :class:`Trainer`.

    Parameters
    ----------
    config : StudyConfig
    run : RunSpec
        One of ``config.runs()``.
    store : gengen.store.Store
        Where scores and the run's manifest go.
    context : optional
        Shared tokenizer/test-set cache (built when absent).
    log : callable
        Receives progress lines.
    progress : bool
        Show a progress bar when the output is a terminal.
    world : World, optional
        The processes training this run together (default: :func:`current_world`).

    Returns
    -------
    RunOutcome
    """
    trainer = Trainer(config, run, store=store, context=context, log=log, progress=progress, world=world)
    return trainer.fit()


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
