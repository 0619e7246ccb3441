"""The study configuration: one TOML file describes models, task, test sets, training, data regime and evaluation.

:func:`load_config` reads and validates the whole file before any work starts; every problem is raised as
:class:`gengen.errors.ConfigError` with one line naming the file, the key and what is wrong, e.g.
``study.toml: training.learning_rate: expected a positive number, got -1``.

A minimal study::

    [study]
    name = "nli"
    output = "runs/nli"              # relative paths are relative to the TOML file's folder
    id_testset = "mnli"

    [[models]]
    name = "opt-125m"
    path = "facebook/opt-125m"       # a Hugging Face id or a local folder
    family = "opt"
    size = "125m"

    [task]
    prompt = "{premise} Question: {hypothesis} Yes or No?"
    answers = [" Yes", " No"]
    train = { source = "mnli", split = "train" }

    [[testsets]]
    name = "mnli"
    source = "mnli"                  # a registered data set (see gengen.data.REGISTRY) ...

    [[testsets]]
    name = "mine"
    path = "data/mine.jsonl"         # ... or a file with a column mapping
    columns = { premise = "context", hypothesis = "claim", label = "gold" }
    labels = { entailed = "Yes", refuted = "No", unknown = "drop" }

    [training]
    learning_rate = 1e-5
    epochs = 1
    batch_size = 16
    seeds = [1, 2, 3]

    [training.families.opt]          # optional: what one family changes (LoRA table, checkpointing, quantization)
    gradient_checkpointing = true

    [evaluation]
    every = 200
    max_examples = 2000

    [executor]                       # optional: where the runs go (see docs/executors.md)
    kind = "ray"                     # local (default) | ray | slurm
    retries = 1

    [resources]                      # optional: what one run asks for
    cpus = 4
    gpus = 1
    memory_gb = 32

Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import string
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gengen.analyse.options import OPTIONS, STUDY_OPTIONS, study_options
from gengen.errors import ConfigError, GengenError
from gengen.scoring.registry import BACKENDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "AnalysisConfig",
    "DataRegime",
    "DataSpec",
    "EvaluationConfig",
    "ExecutorConfig",
    "FamilySettings",
    "LmEvalConfig",
    "LoraConfig",
    "ModelSpec",
    "ResourcesConfig",
    "RunSpec",
    "StudyConfig",
    "TaskConfig",
    "TrainingConfig",
    "load_config",
    "parse_config",
]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
QUANTIZATIONS = ("none", "8bit", "4bit")
STRATEGIES = ("ddp", "fsdp")
METHODS = ("full", "lora")
LOSSES = ("full_vocab", "answers")
DEVICES = ("auto", "cpu", "cuda")
KEEP = ("all", "last", "none")
METRICS = ("acc", "logprob")
LABEL_TARGETS = ("Yes", "No", "drop")
DEFAULT_PROMPT = "{premise} Question: {hypothesis} Yes or No?"
EXECUTORS = ("local", "ray", "slurm")
NEUTRAL = ("drop", "No")
TRUNCATION_SIDES = ("left", "right")
WARMUP_RULES = ("gengen", "transformers")
TIE_ANSWERS = ("No", "Yes")

# LoRA: the linear layers of each family's blocks (what `target_modules` may name) and the default targets
# (the query and value projections, as in the LoRA paper and peft's OPT/Llama defaults). Llama-style families
# (Llama, Qwen, Mistral, SmolLM3, OLMo2, Gemma) share one set of module names.
_LLAMA_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_MODULES: Mapping[str, tuple[str, ...]] = {
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    **{
        family: _LLAMA_LINEAR
        for family in (
            *("olmo", "olmo2", "olmo3", "smollm", "smollm2", "smollm3"),
            *("llama", "qwen", "qwen2", "qwen3", "mistral", "mixtral", "gemma", "gemma2"),
        )
    },
}
LORA_DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "v_proj")
# peft keywords that are not module names.
LORA_SPECIAL_TARGETS = ("all-linear",)
SUBMITIT_CLUSTERS = ("slurm", "local", "debug")


@dataclass(frozen=True)
class ModelSpec:
    """A model to fine-tune or score.

    Attributes
    ----------
    name : str
        The label stored in the score table's ``model`` column (unique within the study).
    path : str
        A Hugging Face hub id or a local folder.
    family, size : str
        Labels stored with every score (e.g. ``"opt"``, ``"125m"``).
    revision : str or None
        A hub revision (branch, tag or commit) of ``path``.
    tokenizer : str or None
        Where to load the tokenizer from, when not from ``path``.
    """

    name: str
    path: str
    family: str
    size: str
    revision: str | None = None
    tokenizer: str | None = None


@dataclass(frozen=True)
class DataSpec:
    """Where a data set comes from and how its rows map to (premise, hypothesis, Yes/No).

    Attributes
    ----------
    name : str
        The test set's name in the score table (for the training set: ``"train"``).
    source : str or None
        A key of :data:`gengen.data.REGISTRY` (its hub id, split and label mapping apply).
    path : str or None
        A local file (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) or folder (``datasets.save_to_disk``
        output, or one holding ``<split>.jsonl``). With ``source`` it replaces the hub download and must have
        the hub's columns; without it the ``columns`` and ``labels`` mappings apply.
    split : str or None
        Split to read (default: the registry's test split; ``"train"`` for the training set).
    columns : dict
        ``{"premise": ..., "hypothesis": ..., "label": ...}``: the file's column for each role.
    labels : dict or None
        ``{raw label (as text): "Yes" | "No" | "drop"}``. For a file, the default accepts 1/0, true/false,
        yes/no, entailment/not_entailment (and contradiction/neutral as No); with ``source`` it replaces the
        registry's mapping.
    neutral : str or None
        For a registered three-way set: ``"drop"`` (the registry's default) or ``"No"`` (neutral counts as not
        entailed). Refused for two-way sets and together with ``labels``.
    max_examples : int or None
        Cap on the examples used (a fixed random subset; overrides ``evaluation.max_examples``).
    """

    name: str
    source: str | None = None
    path: str | None = None
    split: str | None = None
    columns: Mapping[str, str] = field(
        default_factory=lambda: {"premise": "premise", "hypothesis": "hypothesis", "label": "label"}
    )
    labels: Mapping[str, str] | None = None
    max_examples: int | None = None
    neutral: str | None = None


@dataclass(frozen=True)
class TaskConfig:
    """The pattern-based task: prompt, answer words, loss and training data."""

    train: DataSpec
    prompt: str = DEFAULT_PROMPT
    answers: tuple[str, str] = (" Yes", " No")
    loss: str = "full_vocab"


@dataclass(frozen=True)
class LoraConfig:
    """LoRA settings (peft) used when ``training.method = "lora"``."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: tuple[str, ...] | None = None


@dataclass(frozen=True)
class FamilySettings:
    """What one model family changes of the study's training settings (``[training.families.<family>]``).

    Each attribute left at None keeps the study's value. An OPT + OLMo2 study can so give each family its own
    LoRA targets (OPT's attention output is ``out_proj``, OLMo2's ``o_proj``), or checkpoint and quantise only
    its largest family.

    Attributes
    ----------
    lora_r, lora_alpha, lora_dropout, lora_target_modules
        The ``lora = { r, alpha, dropout, target_modules }`` table of the family.
    gradient_checkpointing : bool or None
    quantization : str or None
    """

    lora_r: int | None = None
    lora_alpha: int | None = None
    lora_dropout: float | None = None
    lora_target_modules: tuple[str, ...] | None = None
    gradient_checkpointing: bool | None = None
    quantization: str | None = None


@dataclass(frozen=True)
class TrainingConfig:
    """Optimisation settings shared by every run of the study.

    A checkpoint (weights, optimizer, scheduler and RNG states) is saved at every evaluation step, or, with
    ``checkpoint_every = N``, at the evaluation steps that are multiples of N and at the last step; a killed
    run resumes from the last one. ``keep_checkpoints`` says which survive the run: all, the last, none.

    Memory: with LoRA the frozen base is loaded in the compute dtype (bf16 where the GPU has it, else fp16;
    fp32 on the CPU unless asked), or in 8/4 bits with ``quantization`` (bitsandbytes, CUDA);
    ``gradient_checkpointing`` recomputes activations in the backward pass instead of keeping them.

    Several processes (``gengen train --gpus N``): ``strategy = "ddp"`` keeps a whole model in each and sums
    the gradients; ``"fsdp"`` shards parameters, gradients and optimiser states over them (PyTorch FSDP2), for
    models whose training state does not fit one GPU.

    ``truncation`` says which end of a prompt longer than ``max_length`` tokens is cut: ``"left"`` (the
    default: the start of the premise goes, the question stays) or ``"right"`` (the end goes, as a Hugging Face
    tokenizer's ``truncation=True`` does). ``warmup_rule``: with W warmup steps, ``"gengen"`` (W = round(ratio
    × total)) gives optimiser step s (1-based) the factor s / W; ``"transformers"`` (W = ceil(ratio × total),
    ``get_linear_schedule_with_warmup``) gives it (s − 1) / W, so its first step has learning rate 0. Both
    then decay linearly to 0 after the last step. ``families`` holds per-family changes
    (:class:`FamilySettings`); :meth:`StudyConfig.training_for` applies them.
    """

    method: str = "full"
    lora: LoraConfig = field(default_factory=LoraConfig)
    learning_rate: float = 1e-5
    epochs: float | None = 1.0
    max_steps: int | None = None
    batch_size: int = 8
    grad_accum: int = 1
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    max_length: int = 256
    precision: str = "auto"
    device: str = "auto"
    seeds: tuple[int, ...] = (0,)
    keep_checkpoints: str = "last"
    checkpoint_every: int | None = None
    gradient_checkpointing: bool = False
    quantization: str = "none"
    strategy: str = "ddp"
    truncation: str = "left"
    warmup_rule: str = "gengen"
    families: Mapping[str, FamilySettings] = field(default_factory=dict)

    def for_family(self, family: str) -> TrainingConfig:
        """These settings with ``family``'s changes applied (``families`` emptied: the result is one family's)."""
        settings = self.families.get(family.lower())
        if settings is None:
            return replace(self, families={}) if self.families else self
        lora = replace(
            self.lora,
            r=self.lora.r if settings.lora_r is None else settings.lora_r,
            alpha=self.lora.alpha if settings.lora_alpha is None else settings.lora_alpha,
            dropout=self.lora.dropout if settings.lora_dropout is None else settings.lora_dropout,
            target_modules=settings.lora_target_modules or self.lora.target_modules,
        )
        checkpointing = settings.gradient_checkpointing
        return replace(
            self,
            lora=lora,
            gradient_checkpointing=self.gradient_checkpointing if checkpointing is None else checkpointing,
            quantization=settings.quantization or self.quantization,
            families={},
        )


@dataclass(frozen=True)
class DataRegime:
    """Full data (``shots`` empty) or few-shot: one run per shot count and data seed.

    ``balanced``: a few-shot sample has half Yes and half No (the default; the odd example goes to Yes), or,
    when false, is ``shots`` examples drawn uniformly without replacement (llmft's draw, classes unbalanced).
    """

    shots: tuple[int, ...] = ()
    data_seeds: tuple[int, ...] = (0,)
    balanced: bool = True


@dataclass(frozen=True)
class LmEvalConfig:
    """What ``gengen score`` asks lm-evaluation-harness for when ``evaluation.backend = "lm-eval"``.

    Attributes
    ----------
    tasks : tuple of str
        lm-eval task, group or tag names (``hellaswag``, ``arc_easy``, ``gengen_nli``...).
    num_fewshot : int or None
        In-context examples (None: each task's default).
    limit : int, float or None
        Examples per task: a count, or a fraction (< 1) of each task; None: all.
    include_paths : tuple of str
        Folders of further task YAML files (relative paths are read against the study file's folder).
    """

    tasks: tuple[str, ...]
    num_fewshot: int | None = None
    limit: int | float | None = None
    include_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvaluationConfig:
    """When checkpoints are scored, and how.

    Step 0 (before training) and the last step are always scored; ``steps`` adds explicit steps, ``every``
    every N optimiser steps and ``log_points`` that many log-spaced steps between 1 and the last step.
    ``max_tokens`` caps the padded tokens of a scoring batch (``batch_size`` caps its rows). ``device_map``
    spreads a model too large for one GPU over all visible GPUs when ``gengen score`` loads it (accelerate).
    ``backend = "lm-eval"`` makes ``gengen score`` score the tasks of ``[evaluation.lm_eval]`` with
    lm-evaluation-harness instead of the study's test sets (which may then be left out; training, if any,
    still evaluates its ``[[testsets]]`` with gengen's scorer). ``max_examples`` keeps a random subset of a
    larger test set drawn by ``subsample_seed`` (the same for every run). ``ties``: the answer predicted when
    the two answer logits are equal (``"No"``, the default; ``"Yes"`` is what an argmax over [Yes, No] does).
    """

    steps: tuple[int, ...] = ()
    every: int | None = None
    log_points: int | None = None
    max_examples: int | None = None
    batch_size: int = 32
    metrics: tuple[str, ...] = METRICS
    max_tokens: int | None = None
    device_map: bool = False
    backend: str = "gengen"
    lm_eval: LmEvalConfig | None = None
    subsample_seed: int = 0
    ties: str = "No"


@dataclass(frozen=True)
class ResourcesConfig:
    """What one run asks of the executor: a Ray task's ``num_cpus``/``num_gpus``/``memory``, a Slurm job's
    ``cpus_per_task``/``gpus_per_node``/``mem_gb``.

    Attributes
    ----------
    cpus : int
        CPU cores per run (also the torch threads of a run unless ``executor.threads`` says otherwise).
    gpus : float
        GPUs per run; a fraction packs several small runs on one GPU under Ray (Slurm needs a whole number).
    memory_gb : float or None
        Memory per run in GiB (None: the executor's default).
    """

    cpus: int = 1
    gpus: float = 0.0
    memory_gb: float | None = None


@dataclass(frozen=True)
class ExecutorConfig:
    """Where and how the runs of a study are executed (``gengen run``; see ``docs/executors.md``).

    Attributes
    ----------
    kind : str
        ``"local"`` (one machine), ``"ray"`` (a Ray task per run) or ``"slurm"`` (a submitit job per run).
    jobs : int or None
        Runs in flight at once: local processes (default 1, in the calling process); for Ray and Slurm a cap
        on submitted runs (default: no cap, the cluster queues them).
    threads : int or None
        torch CPU threads of each run (default: ``resources.cpus``).
    retries : int
        Times a failed run is submitted again before it is reported as failed.
    address : str or None
        Ray: the cluster to join (``"auto"``, ``"ray://host:10001"``...); None starts a local Ray instance
        (or joins the one already initialised in the process).
    cluster : str
        Slurm: submitit's backend, ``"slurm"``, or ``"local"`` / ``"debug"`` to try a study without Slurm.
    partition, account, qos, constraint : str or None
        Slurm job options.
    time_minutes : int
        Slurm time limit of each job.
    setup : tuple of str
        Slurm: shell lines run before the job (``module load ...``, ``source .venv/bin/activate``).
    folder : str or None
        Slurm: folder of submitit's job files and logs (default: ``<output>/slurm``).
    additional : dict
        Slurm: other ``#SBATCH`` options (``{"mail-type": "FAIL"}``).
    """

    kind: str = "local"
    jobs: int | None = None
    threads: int | None = None
    retries: int = 0
    address: str | None = None
    cluster: str = "slurm"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time_minutes: int = 1440
    setup: tuple[str, ...] = ()
    folder: str | None = None
    additional: Mapping[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True)
class AnalysisConfig:
    """How ``gengen run`` analyses the study once every run is done (options of :func:`gengen.analyse`).

    Attributes
    ----------
    fit : {"auto", "linear", "gam"}
        How the ID score is regressed out: per run the control :func:`gengen.stats.choose_control` picks (the
        default), a line, or a capped GAM (smooth) fit.
    metric : {"acc", "logprob"}
        The score analysed.
    gam_k, gam_method, gam_basis, max_edf
        The GAM control (keys ``gam_k``, ``gam_method`` = "gcv" | "reml", ``gam_basis`` = "cr" | "tp",
        ``max_edf`` = "auto" | "none" | a number), as :func:`gengen.analyse` takes them.

    One field per entry of the analysis' option table that a study file takes
    (:data:`gengen.analyse.options.STUDY_OPTIONS`), with the table's default and check.
    """

    fit: str = OPTIONS["fit"].default
    metric: str = OPTIONS["metric"].default
    gam_k: int = OPTIONS["gam_k"].default
    gam_method: str = OPTIONS["gam_method"].default
    gam_basis: str = OPTIONS["gam_basis"].default
    max_edf: float | str | None = OPTIONS["max_edf"].default

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`gengen.pipeline.run_study_analysis`."""
        return {option.name: getattr(self, option.name) for option in STUDY_OPTIONS}


@dataclass(frozen=True)
class RunSpec:
    """One fine-tuning run: a model, a training seed and (for few-shot) a shot count and data seed."""

    model: ModelSpec
    seed: int
    shots: int | None = None
    data_seed: int | None = None

    @property
    def key(self) -> str:
        """The store's ``run`` key, e.g. ``"seed=1"`` or ``"seed=1,shots=64,data_seed=0"``."""
        key = f"seed={self.seed}"
        if self.shots is not None:
            key += f",shots={self.shots},data_seed={self.data_seed}"
        return key


@dataclass(frozen=True)
class StudyConfig:
    """A whole study, as read from its TOML file (see the module docstring)."""

    name: str
    output: Path
    id_testset: str
    models: tuple[ModelSpec, ...]
    task: TaskConfig
    testsets: tuple[DataSpec, ...]
    training: TrainingConfig = field(default_factory=TrainingConfig)
    data: DataRegime = field(default_factory=DataRegime)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    source: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def runs(self) -> list[RunSpec]:
        """Every run of the study: model × seed (× shots × data seed), in a fixed order."""
        out: list[RunSpec] = []
        for model in self.models:
            for seed in self.training.seeds:
                if not self.data.shots:
                    out.append(RunSpec(model, seed))
                    continue
                for shots in self.data.shots:
                    for data_seed in self.data.data_seeds:
                        out.append(RunSpec(model, seed, shots, data_seed))
        return out

    def select_runs(self, models: Sequence[str] | None = None) -> list[RunSpec]:
        """The runs of the models named in ``models`` (all runs when None or empty).

        Raises
        ------
        ConfigError
            A name is not a model of the study (the message lists the models that exist).
        """
        if not models:
            return self.runs()
        known = [m.name for m in self.models]
        unknown = [name for name in models if name not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"--model {unknown[0]!r}: not a model of the study ({hint}models: {', '.join(known)})")
        return [r for r in self.runs() if r.model.name in models]

    def run_dir(self, run: RunSpec) -> Path:
        """The folder of a run's checkpoints and records: ``output/runs/<model folder>/<run key>``.

        The model's folder is :func:`safe_folder_name` of its name, so no name can lead outside ``output``.
        """
        from gengen._files import inside

        runs = self.output / "runs"
        folder = runs / safe_folder_name(run.model.name) / safe_folder_name(run.key.replace(",", "_").replace("=", "-"))
        # Inside the study output as resolved: a runs/ (or run folder) linking elsewhere is refused, naming it.
        return inside(self.output, folder)

    def training_for(self, model: ModelSpec) -> TrainingConfig:
        """The training settings of ``model``: the study's, with its family's ``[training.families]`` changes."""
        return self.training.for_family(model.family)

    def lora_targets(self, model: ModelSpec) -> tuple[str, ...]:
        """The LoRA target modules of ``model``: its family's, else ``training.lora.target_modules``, else
        the default (``q_proj``, ``v_proj``)."""
        return self.training_for(model).lora.target_modules or LORA_DEFAULT_TARGETS


def safe_folder_name(name: str) -> str:
    """A folder name for ``name`` that stays one level below its parent, whatever ``name`` holds.

    Letters, digits, ``.``, ``_``, ``-`` and ``+`` are kept; anything else (``/``, ``\\``, spaces, control
    characters) becomes ``_``, leading dots are replaced (no ``..`` or hidden folders), and when anything
    changed a short hash of the real name is appended so that two names never share a folder.
    """
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", name)
    safe = re.sub(r"^\.+", lambda m: "_" * len(m.group(0)), safe)[:100]
    if safe == name:
        return name
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def check_name(value: str, where: str) -> str:
    """``value`` if it is printable text (no control, format or NUL characters), else a ConfigError."""
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise ConfigError(f"{where}: {value!r} holds the control character {bad!r}; use printable text")
    if value != value.strip():
        raise ConfigError(f"{where}: {value!r} starts or ends with white space")
    return value


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def check_model_sources(config: StudyConfig, models: Sequence[ModelSpec] | None = None) -> None:
    """Check, without loading anything, that every model (and tokenizer) path can be what it claims to be.

    A local path (absolute after resolution against the study file's folder) must be a folder holding a
    ``config.json`` (or a peft ``adapter_config.json``); anything else must look like a hub id
    (``owner/name``); whether the hub has it is only known when it is downloaded.

    Raises
    ------
    ConfigError
        Naming the model and the path.
    """
    for model in models if models is not None else config.models:
        for role, path in (("path", model.path), ("tokenizer", model.tokenizer)):
            if path is None:
                continue
            where = f"model {model.name!r}: {role} {path!r}"
            if Path(path).is_absolute():
                folder = Path(path)
                if not folder.exists():
                    raise ConfigError(f"{where}: no such folder")
                if not folder.is_dir():
                    raise ConfigError(f"{where}: not a folder (a model is a folder with a config.json)")
                wanted = ("tokenizer_config.json", "tokenizer.json", "config.json") if role == "tokenizer" else ()
                if not any((folder / name).is_file() for name in (*wanted, "config.json", "adapter_config.json")):
                    raise ConfigError(f"{where}: the folder has no config.json; is it a saved model?")
            elif not _HUB_ID.match(path):
                raise ConfigError(
                    f"{where}: neither an existing local folder nor a hub id like 'owner/name' "
                    "(relative paths are read against the study file's folder)"
                )


# ---------------------------------------------------------------------------------------------- validation

_MISSING = object()


class _Section:
    """A TOML table being read: typed getters that name the key on error, and a check for unknown keys."""

    def __init__(self, data: Any, where: str, origin: str):
        self.where = where
        self.origin = origin
        if not isinstance(data, Mapping):
            raise self.error(None, f"expected a table, got {_show(data)}")
        self.data = dict(data)
        self.seen: set[str] = set()

    def key(self, name: str | None) -> str:
        if name is None:
            return self.where or "(top level)"
        return f"{self.where}.{name}" if self.where else name

    def error(self, name: str | None, problem: str) -> ConfigError:
        return ConfigError(f"{self.origin}: {self.key(name)}: {problem}")

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        self.seen.add(name)
        if name not in self.data:
            if default is _MISSING:
                raise self.error(name, "missing (required)")
            return default
        return self.data[name]

    def string(self, name: str, default: Any = _MISSING, *, choices: Sequence[str] | None = None) -> Any:
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        if not isinstance(value, str) or not value:
            raise self.error(name, f"expected a non-empty string, got {_show(value)}")
        if choices is not None and value not in choices:
            raise self.error(name, f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value

    def number(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        integer: bool = False,
        minimum: float | None = None,
        positive: bool = False,
    ) -> Any:
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        kind = "an integer" if integer else "a number"
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or (isinstance(value, float) and not math.isfinite(value)):
            raise self.error(name, f"expected {kind}, got {_show(value)}")
        if positive and value <= 0:
            raise self.error(name, f"expected a positive {'integer' if integer else 'number'}, got {value}")
        if minimum is not None and value < minimum:
            raise self.error(name, f"expected {kind} >= {minimum:g}, got {value}")
        return int(value) if integer else float(value)

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if name in self.data and not isinstance(value, bool):
            raise self.error(name, f"expected true or false, got {_show(value)}")
        return value

    def list_of(self, name: str, check: Callable[[str, Any], Any], default: Any = _MISSING) -> Any:
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {_show(value)}")
        return tuple(check(f"{name}[{i}]", item) for i, item in enumerate(value))

    def int_item(self, label: str, value: Any, *, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(label, f"expected an integer >= {minimum}, got {_show(value)}")
        return value

    def str_item(self, label: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(label, f"expected a non-empty string, got {_show(value)}")
        return value

    def table(self, name: str, *, required: bool = True) -> _Section:
        value = self.raw(name) if required else self.raw(name, {})
        return _Section(value, self.key(name), self.origin)

    def tables(self, name: str) -> list[_Section]:
        value = self.raw(name)
        if not isinstance(value, list) or not value:
            raise self.error(name, f"expected a non-empty array of tables ([[{name}]]), got {_show(value)}")
        return [_Section(item, f"{self.key(name)}[{i}]", self.origin) for i, item in enumerate(value)]

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, sorted(self.seen), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(self.seen))})"
            raise self.error(name, f"unknown key{hint}")


def _analysis(section: _Section) -> AnalysisConfig:
    """``[analysis]``: the keys of the analysis' option table that a study takes, checked by that table
    (:func:`gengen.analyse.options.study_options`); an error names the key (``analysis.gam_k``)."""
    try:
        values = study_options(section.raw, METRICS)
    except GengenError as error:
        if error.option is None:
            raise
        raise section.error(error.option, error.problem or str(error)) from None
    section.finish()
    return AnalysisConfig(**values)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolve(path: str, base: Path, *, local: bool = False) -> str:
    """A path resolved against the config's folder.

    Data paths (``local``) always are; a model path only when it exists there or starts with ``./`` or
    ``../`` (otherwise it may be a hub id such as ``facebook/opt-125m`` and is kept as written).
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return str(candidate)
    if local or (base / candidate).exists() or path.startswith(("./", "../")):
        return str((base / candidate).resolve())
    return path


def _data_spec(section: _Section, name: str, base: Path, *, default_split: str | None) -> DataSpec:
    from gengen.data.registry import REGISTRY

    source = section.string("source", None)
    path = section.string("path", None)
    if source is None and path is None:
        raise section.error(None, "needs 'source' (a registered data set) or 'path' (a local file or folder)")
    if source is not None and source not in REGISTRY:
        close = difflib.get_close_matches(source, sorted(REGISTRY), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(REGISTRY))}"
        raise section.error("source", f"unknown data set {source!r} ({hint})")
    split = section.string("split", default_split)
    if source is not None and split is not None and split not in REGISTRY[source].splits and path is None:
        if split != "train":
            raise section.error(
                "split", f"{source} has no split {split!r} (known: {', '.join(REGISTRY[source].splits)})"
            )
    columns = {"premise": "premise", "hypothesis": "hypothesis", "label": "label"}
    if section.has("columns") and source is not None:
        # A registered set is read in the hub's schema; a silently ignored mapping would be worse than none.
        raise section.error("columns", f"not used with source = {source!r} (the registry's columns apply); drop it")
    if section.has("columns"):
        cols = section.table("columns")
        for role in columns:
            columns[role] = cols.string(role, columns[role])
        cols.finish()
    labels = None
    if section.has("labels"):
        table = section.table("labels")
        labels = {}
        for raw in list(table.data):
            labels[raw] = table.string(raw, choices=LABEL_TARGETS)
        table.finish()
        if not any(v == "Yes" for v in labels.values()) or not any(v == "No" for v in labels.values()):
            raise section.error("labels", "must map at least one label to 'Yes' and one to 'No'")
    neutral = section.string("neutral", None, choices=NEUTRAL)
    if neutral is not None:
        if source is None:
            raise section.error("neutral", "only for a registered source; map a file's labels with 'labels'")
        if REGISTRY[source].neutral is None:
            raise section.error("neutral", f"{source} is a two-way data set (it has no neutral class)")
        if labels is not None:
            raise section.error("neutral", "give either 'labels' or 'neutral', not both")
    max_examples = section.number("max_examples", None, integer=True, positive=True)
    section.finish()
    if path is not None:
        path = _resolve(path, base, local=True)
        if not Path(path).exists():
            raise section.error("path", f"no such file or folder: {path}")
    return DataSpec(
        name=name,
        source=source,
        path=path,
        split=split,
        columns=columns,
        labels=labels,
        max_examples=max_examples,
        neutral=neutral,
    )


def parse_config(data: Mapping[str, Any], *, origin: str = "config", base: Path | None = None) -> StudyConfig:
    """Validate a parsed TOML document into a :class:`StudyConfig`.

    Parameters
    ----------
    data : mapping
        The document (as :func:`tomllib.loads` returns it).
    origin : str
        The name used in error messages (usually the file name).
    base : Path, optional
        Folder against which relative paths are resolved (default: the current folder).

    Raises
    ------
    ConfigError
        The first problem found, naming the key.
    """
    base = Path.cwd() if base is None else Path(base)
    top = _Section(data, "", origin)

    study = top.table("study")
    name = check_name(study.string("name"), f"{origin}: study.name")
    output = Path(study.string("output", f"gengen-{safe_folder_name(name)}")).expanduser()
    output = output if output.is_absolute() else (base / output).resolve()
    id_testset = study.string("id_testset")
    study.finish()

    models = []
    for section in top.tables("models"):
        spec = ModelSpec(
            name=check_name(section.string("name"), f"{origin}: {section.key('name')}"),
            path=_resolve(section.string("path"), base),
            family=section.string("family"),
            size=section.string("size"),
            revision=section.string("revision", None),
            tokenizer=(lambda t: None if t is None else _resolve(t, base))(section.string("tokenizer", None)),
        )
        section.finish()
        models.append(spec)
    names = [m.name for m in models]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise top.error("models", f"model name {duplicated[0]!r} appears more than once")

    task_section = top.table("task")
    prompt = task_section.string("prompt", DEFAULT_PROMPT)
    for placeholder in ("{premise}", "{hypothesis}"):
        if placeholder not in prompt:
            raise task_section.error("prompt", f"must contain {placeholder}")
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(prompt) if f is not None]
        prompt.format(premise="", hypothesis="")
    except (KeyError, IndexError, ValueError) as error:
        raise task_section.error(
            "prompt", f"invalid template ({error!r}); only {{premise}} and {{hypothesis}}"
        ) from None
    # Attribute or index access ({premise.__class__}, {premise[0]}) would read Python internals into prompts.
    bad_field = next((f for f in fields if f not in ("premise", "hypothesis")), None)
    if bad_field is not None:
        raise task_section.error("prompt", f"field {{{bad_field}}} not allowed; only {{premise}} and {{hypothesis}}")
    answers = task_section.list_of("answers", task_section.str_item, (" Yes", " No"))
    if len(answers) != 2 or answers[0] == answers[1]:
        raise task_section.error("answers", f"expected two different strings [yes, no], got {list(answers)!r}")
    loss = task_section.string("loss", "full_vocab", choices=LOSSES)
    train = _data_spec(task_section.table("train"), "train", base, default_split="train")
    task_section.finish()
    task = TaskConfig(train=train, prompt=prompt, answers=(answers[0], answers[1]), loss=loss)

    evaluation = _evaluation(top.table("evaluation", required=False), base)
    lm_eval_tasks = evaluation.lm_eval.tasks if evaluation.lm_eval is not None else ()
    testsets = []
    # Scored by lm-eval, a study may have no test sets of its own.
    for section in top.tables("testsets") if not lm_eval_tasks or top.has("testsets") else []:
        testset_name = check_name(section.string("name"), f"{origin}: {section.key('name')}")
        testsets.append(_data_spec(section, testset_name, base, default_split=None))
    testset_names = [t.name for t in testsets]
    duplicated = sorted({n for n in testset_names if testset_names.count(n) > 1})
    if duplicated:
        raise top.error("testsets", f"test set name {duplicated[0]!r} appears more than once")
    if id_testset not in (*testset_names, *lm_eval_tasks):
        known = ", ".join((*testset_names, *lm_eval_tasks))
        raise study.error("id_testset", f"{id_testset!r} is not one of the test sets ({known})")

    training_section = top.table("training", required=False)
    training = _training(training_section, models)
    if training.method == "lora":
        _check_lora_targets(training, models, training_section)
    regime = top.table("data", required=False)
    shots = regime.list_of("shots", lambda label, v: regime.int_item(label, v, minimum=2), ())
    data_seeds = regime.list_of("data_seeds", regime.int_item, (0,))
    if not data_seeds:
        raise regime.error("data_seeds", "must not be empty")
    balanced = regime.boolean("balanced", True)
    regime.finish()

    resources = _resources(top.table("resources", required=False))
    executor = _executor(top.table("executor", required=False), base)
    analysis = _analysis(top.table("analysis", required=False))
    top.finish()
    return StudyConfig(
        name=name,
        output=output,
        id_testset=id_testset,
        models=tuple(models),
        task=task,
        testsets=tuple(testsets),
        training=training,
        data=DataRegime(shots=tuple(shots), data_seeds=tuple(data_seeds), balanced=balanced),
        evaluation=evaluation,
        executor=executor,
        resources=resources,
        analysis=analysis,
        raw=dict(data),
    )


def _lora_table(table: _Section, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a ``lora = {...}`` table (r, alpha, dropout, target_modules), validated."""
    values = {
        "r": table.number("r", defaults["r"], integer=True, positive=True),
        "alpha": table.number("alpha", defaults["alpha"], integer=True, positive=True),
        "dropout": table.number("dropout", defaults["dropout"], minimum=0.0),
        "target_modules": table.list_of("target_modules", table.str_item, None),
    }
    table.finish()
    if values["dropout"] is not None and values["dropout"] >= 1:
        raise table.error("dropout", f"expected a number in [0, 1), got {values['dropout']}")
    if values["target_modules"] is not None and not values["target_modules"]:
        raise table.error("target_modules", "must not be empty (leave it out for the default)")
    return values


def _families(section: _Section, models: Sequence[ModelSpec]) -> dict[str, FamilySettings]:
    """``[training.families.<family>]`` tables: each family must be one of the study's models' families."""
    if not section.has("families"):
        return {}
    table = section.table("families")
    known = sorted({m.family.lower() for m in models})
    out: dict[str, FamilySettings] = {}
    for family in list(table.data):
        if family.lower() not in known:
            raise table.error(family, f"no model of the study has family {family!r} (families: {', '.join(known)})")
        if family.lower() in out:
            raise table.error(family, f"family {family.lower()!r} appears twice (families are case-insensitive)")
        one = table.table(family)
        lora: dict[str, Any] = {"r": None, "alpha": None, "dropout": None, "target_modules": None}
        if one.has("lora"):
            lora = _lora_table(one.table("lora"), lora)
        out[family.lower()] = FamilySettings(
            lora_r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            lora_target_modules=lora["target_modules"],
            gradient_checkpointing=one.boolean("gradient_checkpointing", None),
            quantization=one.string("quantization", None, choices=QUANTIZATIONS),
        )
        one.finish()
    table.finish()
    return out


def _training(section: _Section, models: Sequence[ModelSpec] = ()) -> TrainingConfig:
    method = section.string("method", "full", choices=METHODS)
    lora = LoraConfig()
    if section.has("lora"):
        lora = LoraConfig(**_lora_table(section.table("lora"), {"r": 8, "alpha": 16, "dropout": 0.05}))
    families = _families(section, models)
    epochs = section.number("epochs", None, positive=True)
    max_steps = section.number("max_steps", None, integer=True, positive=True)
    if epochs is None and max_steps is None:
        epochs = 1.0
    if epochs is not None and max_steps is not None:
        raise section.error("max_steps", "give either 'epochs' or 'max_steps', not both")
    warmup_ratio = section.number("warmup_ratio", 0.0, minimum=0.0)
    if warmup_ratio >= 1:
        raise section.error("warmup_ratio", f"expected a number in [0, 1), got {warmup_ratio}")
    seeds = section.list_of("seeds", section.int_item, (0,))
    if not seeds or len(set(seeds)) != len(seeds):
        raise section.error("seeds", f"expected a non-empty list of distinct integers, got {list(seeds)!r}")
    max_grad_norm = section.number("max_grad_norm", 1.0, minimum=0.0)
    config = TrainingConfig(
        method=method,
        lora=lora,
        learning_rate=section.number("learning_rate", 1e-5, positive=True),
        epochs=epochs,
        max_steps=max_steps,
        batch_size=section.number("batch_size", 8, integer=True, positive=True),
        grad_accum=section.number("grad_accum", 1, integer=True, positive=True),
        warmup_steps=section.number("warmup_steps", 0, integer=True, minimum=0),
        warmup_ratio=warmup_ratio,
        weight_decay=section.number("weight_decay", 0.0, minimum=0.0),
        max_grad_norm=max_grad_norm if max_grad_norm > 0 else None,
        max_length=section.number("max_length", 256, integer=True, positive=True),
        precision=section.string("precision", "auto", choices=PRECISIONS),
        device=section.string("device", "auto", choices=DEVICES),
        seeds=seeds,
        keep_checkpoints=section.string("keep_checkpoints", "last", choices=KEEP),
        checkpoint_every=section.number("checkpoint_every", None, integer=True, positive=True),
        gradient_checkpointing=section.boolean("gradient_checkpointing", False),
        quantization=section.string("quantization", "none", choices=QUANTIZATIONS),
        strategy=section.string("strategy", "ddp", choices=STRATEGIES),
        truncation=section.string("truncation", "left", choices=TRUNCATION_SIDES),
        warmup_rule=section.string("warmup_rule", "gengen", choices=WARMUP_RULES),
        families=families,
    )
    for family, settings in families.items():
        lora_keys = (settings.lora_r, settings.lora_alpha, settings.lora_dropout, settings.lora_target_modules)
        if method != "lora" and any(v is not None for v in lora_keys):
            raise section.error(f"families.{family}.lora", "a family's LoRA settings need method = 'lora'")
    for family in ["", *families]:
        one = config.for_family(family) if family else config
        where = f"families.{family}.quantization" if family else "quantization"
        if one.strategy == "fsdp" and one.quantization != "none":
            raise section.error("strategy", "'fsdp' does not shard a quantised base; use 'ddp' with quantization")
        if one.quantization != "none" and one.method != "lora":
            raise section.error(where, "a quantised base can only be trained with method = 'lora'")
    if config.strategy == "fsdp" and config.precision == "fp16":
        raise section.error("strategy", "'fsdp' runs in bf16 or fp32 (fp16 needs a sharded grad scaler)")
    section.finish()
    return config


def _check_lora_targets(training: TrainingConfig, models: Sequence[ModelSpec], section: _Section) -> None:
    """LoRA targets must exist in every model's family (checked before any model loads): the family's own
    (``families.<family>.lora.target_modules``), else the study's."""
    for model in models:
        family = model.family.lower()
        targets = training.for_family(family).lora.target_modules
        own = training.families.get(family)
        key = f"families.{family}.lora.target_modules" if own and own.lora_target_modules else "lora.target_modules"
        modules = LORA_MODULES.get(family)
        if modules is None:
            if not targets:
                raise section.error(
                    key,
                    f"model {model.name!r}: family {model.family!r} has no default LoRA targets "
                    f"(known families: {', '.join(sorted(LORA_MODULES))}); list the target modules",
                )
            continue  # an unknown family: peft checks the names when the model loads
        for target in targets or LORA_DEFAULT_TARGETS:
            if target not in modules and target not in LORA_SPECIAL_TARGETS:
                raise section.error(
                    key,
                    f"{target!r} is not a linear layer of {model.family} model {model.name!r} "
                    f"(its layers: {', '.join(modules)})",
                )


def _evaluation(section: _Section, base: Path) -> EvaluationConfig:
    metrics = section.list_of("metrics", section.str_item, METRICS)
    for i, metric in enumerate(metrics):
        if metric not in METRICS:
            raise section.error(f"metrics[{i}]", f"expected one of {', '.join(map(repr, METRICS))}, got {metric!r}")
    if not metrics:
        raise section.error("metrics", "must not be empty")
    config = EvaluationConfig(
        steps=section.list_of("steps", section.int_item, ()),
        every=section.number("every", None, integer=True, positive=True),
        log_points=section.number("log_points", None, integer=True, positive=True),
        max_examples=section.number("max_examples", None, integer=True, positive=True),
        batch_size=section.number("batch_size", 32, integer=True, positive=True),
        metrics=metrics,
        max_tokens=section.number("max_tokens", None, integer=True, positive=True),
        device_map=section.boolean("device_map", False),
        backend=section.string("backend", "gengen", choices=BACKENDS),
        lm_eval=_lm_eval(section.table("lm_eval"), base) if section.has("lm_eval") else None,
        subsample_seed=section.number("subsample_seed", 0, integer=True, minimum=0),
        ties=section.string("ties", "No", choices=TIE_ANSWERS),
    )
    if config.backend == "lm-eval" and config.lm_eval is None:
        raise section.error("lm_eval", "missing: backend 'lm-eval' needs [evaluation.lm_eval] with its tasks")
    if config.backend != "lm-eval" and config.lm_eval is not None:
        raise section.error("backend", "set it to 'lm-eval' to score the tasks of [evaluation.lm_eval]")
    section.finish()
    return config


def _lm_eval(section: _Section, base: Path) -> LmEvalConfig:
    tasks = section.list_of("tasks", section.str_item)
    if not tasks or len(set(tasks)) != len(tasks):
        raise section.error("tasks", f"expected a non-empty list of distinct task names, got {list(tasks)!r}")
    limit = section.number("limit", None, positive=True)
    if limit is not None and limit >= 1 and not float(limit).is_integer():
        raise section.error("limit", f"expected a count (an integer) or a fraction below 1, got {limit}")
    include_paths = tuple(_resolve(p, base, local=True) for p in section.list_of("include_paths", section.str_item, ()))
    for i, path in enumerate(include_paths):
        if not Path(path).is_dir():
            raise section.error(f"include_paths[{i}]", f"no such folder: {path}")
    config = LmEvalConfig(
        tasks=tasks,
        num_fewshot=section.number("num_fewshot", None, integer=True, minimum=0),
        limit=None if limit is None else (int(limit) if limit >= 1 else limit),
        include_paths=include_paths,
    )
    section.finish()
    return config


def _resources(section: _Section) -> ResourcesConfig:
    config = ResourcesConfig(
        cpus=section.number("cpus", 1, integer=True, positive=True),
        gpus=section.number("gpus", 0.0, minimum=0.0),
        memory_gb=section.number("memory_gb", None, positive=True),
    )
    section.finish()
    return config


def _executor(section: _Section, base: Path) -> ExecutorConfig:
    kind = section.string("kind", "local")
    if kind not in EXECUTORS:
        close = difflib.get_close_matches(kind, EXECUTORS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(map(repr, EXECUTORS))}"
        raise section.error("kind", f"unknown executor {kind!r} ({hint})")
    additional: dict[str, str | int] = {}
    if section.has("additional"):
        table = section.table("additional")
        for key in list(table.data):
            value = table.raw(key)
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise table.error(key, f"expected a string or an integer, got {_show(value)}")
            additional[key] = value
        table.finish()
    folder = section.string("folder", None)
    config = ExecutorConfig(
        kind=kind,
        jobs=section.number("jobs", None, integer=True, positive=True),
        threads=section.number("threads", None, integer=True, positive=True),
        retries=section.number("retries", 0, integer=True, minimum=0),
        address=section.string("address", None),
        cluster=section.string("cluster", "slurm", choices=SUBMITIT_CLUSTERS),
        partition=section.string("partition", None),
        account=section.string("account", None),
        qos=section.string("qos", None),
        constraint=section.string("constraint", None),
        time_minutes=section.number("time_minutes", 1440, integer=True, positive=True),
        setup=section.list_of("setup", section.str_item, ()),
        folder=None if folder is None else _resolve(folder, base, local=True),
        additional=additional,
    )
    section.finish()
    return config


def load_config(path: str | Path) -> StudyConfig:
    """Read and validate a study TOML file.

    Parameters
    ----------
    path : str or Path
        The file. Relative paths inside it are resolved against its folder.

    Returns
    -------
    StudyConfig

    Raises
    ------
    ConfigError
        The file cannot be read or parsed, or a key is missing, unknown or invalid.
    """
    path = Path(path)
    if not path.is_file():
        if path.is_dir():
            raise ConfigError(f"{path}: a folder, expected a study TOML file")
        if path.exists():  # a FIFO, a device such as /dev/zero: reading it would block or never end
            raise ConfigError(f"{path}: not a regular file (a FIFO, device or socket), expected a study TOML file")
        raise ConfigError(f"{path}: no such file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is not TOML
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    config = parse_config(data, origin=path.name, base=path.resolve().parent)
    return replace(config, source=path.resolve())
