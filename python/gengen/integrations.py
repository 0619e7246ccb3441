"""Score the OOD suite inside the training people already run: a transformers callback and a loop function.

Both build one :class:`Evaluator` and score through :class:`gengen.scoring.hook.EvaluationHook`, the code path
of gengen's own trainer:

* :class:`GengenCallback` — a ``transformers.TrainerCallback`` for ``Trainer``, TRL's ``SFTTrainer`` or any
  trainer built on them: at the steps of a :class:`~gengen.scoring.hook.Schedule` (step 0 before the first
  update, then every N or log-spaced, and the last step) it scores the live model (no copy of its weights, no
  checkpoint written), commits each evaluation's scores to a gengen store and records the run's manifest;
* :func:`evaluate` — the same for a plain PyTorch or accelerate loop: call it with the model, its tokenizer
  and the step.

What is scored, by name: the test sets of a study file (or some of them, ``testsets=``), gengen's registered
NLI data sets (``testsets=["hans", "mnli"]``, read from the hub, with the study's prompt or the reference
protocol's), and any lm-evaluation-harness task (``tasks=["arc_easy"]``, the lm-eval extra). A resumed run
skips the evaluations already stored, so it writes no row twice. In a multi-process run every process must
take part: each scores a shard of every test set, process 0 writes, the others wait.

Imports torch and transformers; ``import gengen`` does not import this module.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from gengen.errors import ConfigError, GengenError
from gengen.scoring.hook import EvaluationHook, Schedule, joined_world
from gengen.scoring.models import Precision
from gengen.scoring.series import ScoringBackend, SeriesLabels
from gengen.store.database import Store
from gengen.study.config import StudyConfig, TaskConfig
from gengen.study.tables import DataSpec

__all__ = ["Evaluator", "GengenCallback", "Schedule", "evaluate"]

Log = Callable[[str], None]

# The TrainingArguments a run's manifest records: what changes the scores a run produces.
TRAINING_ARGUMENTS = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "max_grad_norm",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_train_epochs",
    "max_steps",
    "optim",
    "bf16",
    "fp16",
    "gradient_checkpointing",
    "seed",
    "data_seed",
    "world_size",
)
PACKAGES = ("gengen", "torch", "transformers", "peft", "accelerate", "trl", "lm_eval")


def _study(study: StudyConfig | str | Path | None) -> StudyConfig | None:
    from gengen.study.config import load_config

    if study is None or isinstance(study, StudyConfig):
        return study
    return load_config(study)


def _registry_study(names: Sequence[str], store: Path, study_name: str) -> StudyConfig:
    """A study of registered NLI data sets under the reference protocol (prompt, answers, scoring settings)."""
    return StudyConfig(
        name=study_name,
        output=store,
        id_testset=names[0],
        models=(),
        task=TaskConfig(train=DataSpec("train")),
        testsets=tuple(DataSpec(name, source=name) for name in names),
    )


def _testsets(study: StudyConfig, names: Sequence[str] | None) -> StudyConfig:
    """``study`` scoring only ``names``: its own test sets by name, or registered data sets by key."""
    from gengen.data.registry import REGISTRY

    if names is None:
        return study
    own = {spec.name: spec for spec in study.testsets}
    chosen = []
    for name in names:
        if name in own:
            chosen.append(own[name])
        elif name in REGISTRY:
            chosen.append(DataSpec(name, source=name))
        else:
            known = ", ".join([*own, *sorted(REGISTRY)])
            raise ConfigError(
                f"testsets: {name!r} is neither a test set of study {study.name!r} nor registered ({known})"
            )
    return replace(study, testsets=tuple(chosen))


class Evaluator:
    """What :class:`GengenCallback` and :func:`evaluate` score, where they write it, and when.

    Parameters
    ----------
    store : gengen.store.database.Store or path, optional
        Where the scores go (default: the study's ``output``).
    study : StudyConfig or path, optional
        A study file: its test sets, prompt, answers, ``[evaluation]`` settings and store.
    testsets : sequence of str, optional
        Test sets by name: the study's, or keys of :data:`gengen.data.REGISTRY` (default: every test set of
        the study; none without one).
    tasks : sequence of str
        Tasks, groups or tags of lm-evaluation-harness (the lm-eval extra).
    schedule : Schedule, optional
        When to score (default: the study's ``[evaluation]``; without a study, step 0 and the last step).
    model_name, family, size : str, optional
        The run's labels in the store (default: the model's folder or hub name and its ``model_type``).
    seed, data_seed, shots : int, optional
        The run's seed, data seed and few-shot count: recorded in the manifest and the run key.
    run : str, optional
        The store's run key (default: ``seed=<seed>`` and, with shots, ``,shots=<shots>,data_seed=<data_seed>``,
        as gengen's trainer names its runs).
    num_fewshot : int, optional
        For lm-eval: in-context examples.
    limit : int or float, optional
        For lm-eval: examples per task (a count, or a fraction of each task).
    include_paths : sequence of str
        For lm-eval: folders of task YAML files.
    log : callable
        Progress lines (process 0).
    """

    def __init__(
        self,
        *,
        store: Store | str | Path | None = None,
        study: StudyConfig | str | Path | None = None,
        testsets: Sequence[str] | None = None,
        tasks: Sequence[str] = (),
        schedule: Schedule | None = None,
        model_name: str | None = None,
        family: str | None = None,
        size: str = "",
        seed: int | None = None,
        data_seed: int | None = None,
        shots: int | None = None,
        run: str | None = None,
        num_fewshot: int | None = None,
        limit: int | float | None = None,
        include_paths: Sequence[str] = (),
        log: Log = print,
    ):
        config = _study(study)
        if store is None and config is None:
            raise ConfigError("store: give the store to write to (a folder or a .sqlite file), or a study file")
        if isinstance(testsets, str) or isinstance(tasks, str):
            raise ConfigError("testsets, tasks: give a list of names, not one string")
        self.store_path = store.path if isinstance(store, Store) else Path(store) if store is not None else None
        self._store = store if isinstance(store, Store) else None
        if config is None and testsets:
            location = self.store_path or Path(".")
            config = _registry_study(list(testsets), location, _default_study(location))
        elif config is not None:
            config = _testsets(config, testsets)
            if self.store_path is None:
                self.store_path = config.output
        if (config is None or not config.testsets) and not tasks:
            raise ConfigError("testsets, tasks: nothing to score (give test sets, lm-eval tasks or a study file)")
        self.config = config
        self.tasks = tuple(tasks)
        self.lm_eval = (num_fewshot, limit, tuple(include_paths))
        self.schedule = schedule or (Schedule.of(config.evaluation) if config is not None else Schedule())
        self.names = (model_name, family, size)
        self.seed, self.data_seed, self.shots, self.run_key = seed, data_seed, shots, run
        self.log = log
        self.hook: EvaluationHook | None = None

    # ------------------------------------------------------------------ set-up (at the first evaluation)
    def labels(self, model: Any) -> SeriesLabels:
        """The run's labels in the store: the names given, else read from the model's config."""
        name, family, size = self.names
        config = getattr(_base_model(model), "config", None)
        source = str(getattr(config, "_name_or_path", "") or getattr(config, "name_or_path", "") or "model")
        run = self.run_key or _run_key(self.seed, self.shots, self.data_seed)
        study = self.config.name if self.config is not None else None
        return SeriesLabels(
            name or Path(source.rstrip("/")).name or "model",
            family if family is not None else str(getattr(config, "model_type", "") or ""),
            size,
            run,
            study=study,
        )

    def backends(self) -> list[ScoringBackend]:
        """gengen's scorer for the test sets, lm-eval for the tasks."""
        found: list[ScoringBackend] = []
        if self.config is not None and self.config.testsets:
            from gengen.scoring.score import GengenBackend

            found.append(GengenBackend(self.config))
        if self.tasks:
            from gengen.scoring.lm_eval.backend import LmEvalBackend, LmEvalSettings

            num_fewshot, limit, include_paths = self.lm_eval
            batch = self.config.evaluation.batch_size if self.config is not None else 8
            settings = LmEvalSettings(
                tasks=self.tasks, num_fewshot=num_fewshot, limit=limit, batch_size=batch, include_paths=include_paths
            )
            found.append(LmEvalBackend(settings, store=self.store_path or Path("."), study=self.study_name()))
        return found

    def study_name(self) -> str | None:
        """The study column of the scores (the study's name, else the store's default)."""
        return self.config.name if self.config is not None else None

    def open_store(self) -> Store:
        """The store, opened by process 0 first (it may create it), then by the others."""
        if self._store is not None:
            return self._store
        assert self.store_path is not None  # checked in __init__
        world = joined_world()
        if not world.main:
            world.barrier()
        store = Store(self.store_path, study=self.study_name())
        if world.main and world.size > 1:
            world.barrier()
        self._store = store
        return store

    def start(
        self, model: Any, tokenizer: Any, *, precision: str = "fp32", record: Mapping[str, Any] | None = None
    ) -> EvaluationHook:
        """Build the hook for ``model`` (labels, store, backends), attach it and record the run's manifest.

        Parameters
        ----------
        model : torch.nn.Module
            The model being trained (a peft model for LoRA).
        tokenizer : transformers tokenizer
            Its tokenizer (padded with its eos token when it has no pad token; the caller's is not changed).
        precision : {"fp32", "bf16", "fp16"}
            The autocast of the scoring forward passes (the training's mixed precision).
        record : mapping, optional
            More of the run's manifest (training arguments).

        Returns
        -------
        EvaluationHook
            Attached, the run recorded; also kept as ``self.hook``.
        """
        store = self.open_store()
        labels = self.labels(model)
        self.hook = EvaluationHook(self.backends(), store, labels, log=self.log)
        device = next(model.parameters()).device
        compute = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        dtype = next(model.parameters()).dtype
        self.hook.attach(_padded(tokenizer), device, Precision(weights=dtype, compute=compute))
        self.hook.begin({**self.manifest(model, labels), **(record or {}), "status": "running"})
        return self.hook

    def manifest(self, model: Any, labels: SeriesLabels) -> dict[str, Any]:
        """The run's manifest: model, seed, data seed, shots, adapter, what is scored when, packages."""
        from gengen._versions import installed_versions

        config = getattr(_base_model(model), "config", None)
        record: dict[str, Any] = {
            "source": "gengen.integrations",
            "model": {
                "name": labels.model,
                "path": str(getattr(config, "_name_or_path", "") or ""),
                "family": labels.family,
                "size": labels.size,
            },
            "run": labels.run,
            "seed": self.seed,
            "data_seed": self.data_seed,
            "shots": self.shots,
            "method": "lora" if hasattr(model, "peft_config") else "full",
            "schedule": asdict(self.schedule),
            "testsets": [spec.name for spec in self.config.testsets] if self.config is not None else [],
            "tasks": list(self.tasks),
            "packages": installed_versions(PACKAGES, python=True),
            "argv": sys.argv,
        }
        if hasattr(model, "peft_config"):
            record["adapter"] = {name: _plain(vars(settings)) for name, settings in model.peft_config.items()}
        if self.config is not None and self.config.source is not None:
            record["config_file"] = str(self.config.source)
        return record


def _default_study(path: Path) -> str:
    """The study name a store at ``path`` uses by default (its folder's name, or the file's stem)."""
    return path.stem if path.suffix.lower() in (".sqlite", ".db", ".sqlite3") else path.resolve().name


def _run_key(seed: int | None, shots: int | None, data_seed: int | None) -> str:
    if seed is None:
        return "main"
    key = f"seed={seed}"
    if shots is not None:
        key += f",shots={shots},data_seed={data_seed}"
    return key


def _base_model(model: Any) -> Any:
    """The transformers model inside a peft model or a DDP wrapper."""
    inner = getattr(model, "module", model)
    getter = getattr(inner, "get_base_model", None)
    return getter() if callable(getter) else inner


def _plain(value: Any) -> Any:
    """A value a JSON manifest can hold (sets and enums as lists and text)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _padded(tokenizer: Any) -> Any:
    """The tokenizer, or a copy padding with its eos token when it has no pad token."""
    if tokenizer is None:
        raise ConfigError("tokenizer: give the model's tokenizer (the Trainer's processing_class, or tokenizer=)")
    if tokenizer.pad_token_id is not None:
        return tokenizer
    if tokenizer.eos_token is None:
        raise ConfigError("tokenizer: it has no pad token and no eos token to pad with; set tokenizer.pad_token")
    padded = copy.copy(tokenizer)
    padded.pad_token = tokenizer.eos_token
    return padded


# ---------------------------------------------------------------------------------------------- Trainer


class GengenCallback(TrainerCallback):
    """Scores the ID and OOD test sets on the live model at a schedule's steps, inside a transformers Trainer.

    Add it to ``Trainer(..., callbacks=[GengenCallback(...)])`` (or TRL's ``SFTTrainer``). Step 0 is scored at
    the start of training, before the first update; the other steps of the schedule right after their optimiser
    update (``state.global_step`` counts updates, so gradient accumulation changes nothing), before the Trainer
    saves a checkpoint of that step. A run resumed from a checkpoint skips the evaluations already stored.

    Parameters
    ----------
    tokenizer : transformers tokenizer, optional
        Default: the Trainer's ``processing_class``.
    **options
        :class:`Evaluator`'s keywords (``store``, ``study``, ``testsets``, ``tasks``, ``schedule``,
        ``model_name``, ``family``, ``size``, ``shots``, ``run``, ``num_fewshot``, ``limit``, ``include_paths``,
        ``log``); the seed and data seed are the Trainer's (``args.seed``, ``args.data_seed``) unless given.

    Notes
    -----
    In a multi-process run (``torchrun``, ``accelerate launch``) each process scores a shard of every test
    set and process 0 writes the store. A model sharded over the processes (FSDP, DeepSpeed ZeRO-3) is refused:
    its parameters are not whole in any one process between steps.
    """

    def __init__(self, *, tokenizer: Any = None, **options: Any):
        self.options = options
        self.tokenizer = tokenizer
        self.evaluator: Evaluator | None = None
        self.steps: set[int] = set()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Build the evaluator, record the run and score step 0 when training starts afresh."""
        _refuse_sharded(args)
        options = {"seed": args.seed, "data_seed": args.data_seed, **self.options}
        self.evaluator = Evaluator(**options)
        tokenizer = self.tokenizer if self.tokenizer is not None else kwargs.get("processing_class")
        arguments = _training_arguments(args)
        precision = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
        hook = self.evaluator.start(model, tokenizer, precision=precision, record={"training": arguments})
        self.steps = set(self.evaluator.schedule.at(state.max_steps))
        hook.begin({"evaluation_steps": sorted(self.steps), "total_steps": state.max_steps})
        if state.global_step == 0:
            hook.evaluate(model, 0, {"epoch": 0.0})

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Score the model when ``state.global_step`` is a step of the schedule."""
        if self.evaluator is None or self.evaluator.hook is None or state.global_step not in self.steps:
            return
        self.evaluator.hook.evaluate(model, state.global_step, {"epoch": float(state.epoch or 0.0)})

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Mark the run complete when it reached its last step, and report the time scoring took."""
        hook = self.evaluator.hook if self.evaluator is not None else None
        if hook is None:
            return
        if state.global_step >= state.max_steps:
            hook.begin({"status": "complete"})
        hook.log(f"gengen: {hook.overhead()}")


def _training_arguments(args: Any) -> dict[str, Any]:
    """The manifest's record of the TrainingArguments that change the scores (:data:`TRAINING_ARGUMENTS`)."""
    found = {name: _plain(getattr(args, name, None)) for name in TRAINING_ARGUMENTS if name != "gradient_checkpointing"}
    # transformers 5 renamed it (reading the old name warns); 4.x has only the old one.
    renamed = (
        "activation_checkpointing" if hasattr(type(args), "activation_checkpointing") else "gradient_checkpointing"
    )
    found["gradient_checkpointing"] = _plain(getattr(args, renamed, None))
    return found


def _refuse_sharded(args: Any) -> None:
    """A model sharded over the processes cannot be scored between steps by one process's forward passes."""
    if getattr(args, "fsdp", None):
        raise GengenError("GengenCallback: an FSDP-sharded model is not supported; score saved checkpoints instead")
    from transformers.integrations import deepspeed

    if deepspeed.is_deepspeed_zero3_enabled():  # type: ignore[no-untyped-call]
        raise GengenError("GengenCallback: a DeepSpeed ZeRO-3 model is not supported; score saved checkpoints instead")


# ---------------------------------------------------------------------------------------------- loops

_EVALUATORS: dict[tuple[Any, ...], Evaluator] = {}


def evaluate(
    model: Any,
    tokenizer: Any,
    step: int,
    *,
    total_steps: int | None = None,
    precision: str = "fp32",
    **options: Any,
) -> int:
    """Score the live model at ``step`` in a plain PyTorch or accelerate loop, through the callback's code path.

    The first call with a set of options builds an :class:`Evaluator` (test sets encoded once, the run's
    manifest recorded); later calls with the same options reuse it. Every process of a multi-process run must
    call it at the same steps.

    Parameters
    ----------
    model : torch.nn.Module
        The model being trained (a peft model for LoRA; an accelerate- or DDP-wrapped one is unwrapped).
    tokenizer : transformers tokenizer
        Its tokenizer.
    step : int
        Optimiser updates taken (0: before the first).
    total_steps : int, optional
        The run's length: with it, only the steps of the schedule are scored (other calls return 0 at once);
        without it, every call scores.
    precision : {"fp32", "bf16", "fp16"}
        The autocast of the scoring forward passes.
    **options
        :class:`Evaluator`'s keywords (``store``, ``study``, ``testsets``, ``tasks``, ``schedule``, ``seed``...).

    Returns
    -------
    int
        Score rows written by this process (0 when nothing was due or all was stored, and in processes other
        than 0).

    Raises
    ------
    GengenError
        Nothing to score, no store, an unknown test set, a tokenizer without pad or eos token.
    """
    if precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"precision: expected 'fp32', 'bf16' or 'fp16', got {precision!r}")
    key = tuple(sorted((name, _key(value)) for name, value in options.items()))
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        evaluator = _EVALUATORS[key] = Evaluator(**options)
    if total_steps is not None and step not in evaluator.schedule.at(total_steps):
        return 0
    inner = getattr(model, "module", model)  # DistributedDataParallel, accelerate's wrapper
    hook = evaluator.hook or evaluator.start(inner, tokenizer, precision=precision)
    return hook.evaluate(inner, step)


def _key(value: Any) -> Any:
    """An option as part of a dict key (lists as tuples, objects by identity)."""
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, (str, int, float, bool, type(None), Path)):
        return value
    return id(value)
