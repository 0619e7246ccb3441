"""Before anything loads: how a study's runs fit on GPUs, what they cost in memory, disk and GPU-hours.

:func:`plan_study` reads only the study file, each model's ``config.json`` (a local folder) or the table of
known model shapes below (the paper's models, so that no network is needed), and the known sizes of the
registered data sets. It estimates, per model × data regime:

* the parameters (from the shapes: embeddings, attention, MLP, norms; checked against transformers' own count);
* the peak memory per GPU of training and of scoring, and the strategy that fits: one GPU per run, FSDP over
  the N GPUs (parameters, gradients and optimiser states sharded), or, for scoring, a device map over them;
* the disk of one checkpoint and the peak disk of a run (``keep_checkpoints``);
* GPU-hours from the FLOPs (6 × parameters per trained token, 2 × per scored token, plus the recomputation of
  gradient checkpointing) at an assumed throughput (``tflops`` × ``mfu``).

The memory model (bytes, per GPU)::

    weights      full: 4 P (fp32 master) + 2 P (bf16 autocast copies); LoRA: P × bytes of the base dtype
    training     full: 12 P (fp32 gradients, two Adam moments); LoRA: 16 bytes × adapter parameters
    activations  tokens × layers × a × e, or with gradient checkpointing tokens × (layers × h × e + 2 a × e)
                 a = 12 h + 2.25 i (OPT) or 22 h + 4.75 i (Llama-style) values per token and layer,
                 measured on the CPU (see :func:`activation_elements`; e: bytes of the compute dtype)
    logits       micro-batch × vocabulary × 4 × 3 (only the last position is projected)
    FSDP over N  weights, gradients and optimiser states / N, plus two gathered layers in bf16
    overhead     ``overhead_gib`` (CUDA context, allocator), and 10 % on top of the rest

with tokens = micro-batch × ``max_length`` (every prompt padded to the longest allowed: an upper bound).
Nothing here imports torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gengen.errors import ConfigError
from gengen.study.config import ModelSpec, StudyConfig
from gengen.study.families import ModelShape, shape_from_config
from gengen.study.schedule import epoch_steps, evaluation_steps, fewer_evaluations_note, planned_steps, steps_per_epoch
from gengen.study.section import number_text
from gengen.study.tables import DataSpec, EvaluationConfig
from gengen.study.training_config import LORA_DEFAULT_TARGETS, QUANTIZATIONS, TrainingConfig

__all__ = [
    "KNOWN_SHAPES",
    "ModelShape",
    "PlanRow",
    "activation_elements",
    "epoch_steps",
    "evaluation_steps",
    "model_shape",
    "plan_study",
    "planned_steps",
    "scoring_memory",
    "shape_from_config",
    "steps_per_epoch",
    "training_memory",
]

GIB = 1024**3
MAX_CONFIG_BYTES = 16 * 1024**2
"""The largest ``config.json`` :func:`model_shape` reads (real ones are a few KiB)."""


# ---------------------------------------------------------------------------------------------- schedule


# ---------------------------------------------------------------------------------------------- shapes


def _llama(
    hidden: int, layers: int, intermediate: int, heads: int, kv: int, vocab: int, tied: bool, **extra: Any
) -> ModelShape:
    return ModelShape("llama", hidden, layers, intermediate, heads, kv, vocab, tied, **extra)


def _opt(hidden: int, layers: int, heads: int) -> ModelShape:
    return ModelShape("opt", hidden, layers, 4 * hidden, heads, heads, 50272, True, max_positions=2048)


KNOWN_SHAPES: Mapping[str, ModelShape] = {
    # From each model's config.json on the hub (read once, written here so that planning needs no network).
    "allenai/OLMo-2-0425-1B": _llama(2048, 16, 8192, 16, 16, 100352, False, qk_norm=True),
    "allenai/OLMo-2-1124-7B": _llama(4096, 32, 11008, 32, 32, 100352, False, qk_norm=True),
    "allenai/OLMo-2-1124-13B": _llama(5120, 40, 13824, 40, 40, 100352, False, qk_norm=True),
    "allenai/OLMo-2-0325-32B": _llama(5120, 64, 27648, 40, 8, 100352, False, qk_norm=True),
    "facebook/opt-125m": _opt(768, 12, 12),
    "facebook/opt-1.3b": _opt(2048, 24, 32),
    "facebook/opt-2.7b": _opt(2560, 32, 32),
    "facebook/opt-6.7b": _opt(4096, 32, 32),
    "facebook/opt-13b": _opt(5120, 40, 40),
    "facebook/opt-30b": _opt(7168, 48, 56),
    "HuggingFaceTB/SmolLM3-3B": _llama(2048, 36, 11008, 16, 4, 128256, True),
}
"""Shapes of the paper's models (and a few small relatives), by hub id."""


def model_shape(model: ModelSpec) -> ModelShape:
    """The shape of a study's model: its local ``config.json``, else the table of known hub models.

    Raises
    ------
    ConfigError
        Neither a local folder with a config.json nor a known hub id (the message names the model).
    """
    folder = Path(model.path)
    config_file = folder / "config.json"
    if folder.is_absolute() and config_file.is_file():
        where = f"model {model.name!r}: {config_file}"
        if config_file.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{where}: {config_file.stat().st_size:,} bytes, more than a model config's limit of "
                f"{MAX_CONFIG_BYTES:,}; is it the model's config.json?"
            )
        try:
            data = json.loads(config_file.read_text(encoding="utf-8"))
        except RecursionError:
            raise ConfigError(f"{where}: nested too deeply to be a model config") from None
        except (OSError, ValueError) as error:
            raise ConfigError(f"{where}: {error}") from None
        return shape_from_config(data, where)
    if model.path in KNOWN_SHAPES:
        return KNOWN_SHAPES[model.path]
    raise ConfigError(
        f"model {model.name!r}: {model.path!r} is neither a local folder with a config.json nor a known model "
        f"({', '.join(KNOWN_SHAPES)}); point path at a downloaded copy to plan it"
    )


# ---------------------------------------------------------------------------------------------- data sizes

# Examples kept after the label mapping (neutral dropped), per registered set and split; approximate counts of
# the hub's splits, good enough for planning.
KNOWN_SIZES: Mapping[tuple[str, str], int] = {
    ("mnli", "train"): 261_802,
    ("mnli", "validation_matched"): 6_692,
    ("mnli_mismatched", "validation_mismatched"): 6_703,
    ("snli", "train"): 366_603,
    ("snli", "test"): 6_605,
    ("scitail", "test"): 2_126,
    ("rte", "validation"): 277,
    ("rte", "train"): 2_490,
    ("hans", "validation"): 30_000,
    ("anli_r1", "test_r1"): 667,
    ("anli_r2", "test_r2"): 667,
    ("anli_r3", "test_r3"): 800,
    ("wnli", "validation"): 71,
    ("wnli", "train"): 635,
    ("paws", "test"): 8_000,
}
UNKNOWN_SIZE = 10_000


def data_size(spec: DataSpec, cap: int | None = None) -> int:
    """Examples in a data set as the plan counts them: a registered source's known size, a local file's lines,
    else :data:`UNKNOWN_SIZE`; at most ``max_examples`` (else ``cap``)."""
    return _data_size(spec, cap)


def _data_size(spec: DataSpec, cap: int | None) -> int:
    from gengen.data.registry import REGISTRY

    n: int | None = None
    if spec.source is not None:
        split = spec.split or REGISTRY[spec.source].test_split
        n = KNOWN_SIZES.get((spec.source, split))
    elif spec.path is not None and Path(spec.path).suffix in (".jsonl", ".csv", ".tsv") and Path(spec.path).is_file():
        with Path(spec.path).open("rb") as handle:
            n = sum(1 for line in handle if line.strip()) - (0 if spec.path.endswith(".jsonl") else 1)
    n = UNKNOWN_SIZE if n is None else n
    limit = spec.max_examples if spec.max_examples is not None else cap
    return min(n, limit) if limit is not None else n


# ---------------------------------------------------------------------------------------------- memory


def _dtype_bytes(precision: str) -> int:
    """Bytes of the compute dtype on a GPU: bf16/fp16 for ``auto``, ``bf16`` and ``fp16``."""
    return 4 if precision == "fp32" else 2


def activation_elements(shape: ModelShape) -> float:
    """Values saved for the backward pass per token and layer, in units of the compute dtype.

    Measured (peak RSS of CPU fp32 training, ``benches/README.md``): OPT keeps about 12 h + 2.25 i values
    (LayerNorms, q/k/v, attention output, fc1 and its activation); Llama-style blocks about 22 h + 4.75 i
    (RMSNorms computed in fp32, OLMo2's q/k norms, rotary copies, the gated MLP's three products). Each
    family's formula is its :class:`gengen.study.families.Architecture`'s.
    """
    return shape.activation_elements()


def training_memory(
    shape: ModelShape, training: TrainingConfig, *, shards: int = 1, targets: Sequence[str] = LORA_DEFAULT_TARGETS
) -> dict[str, float]:
    """Estimated bytes per GPU of a training step, by part (see the module docstring), before overhead.

    Parameters
    ----------
    shape : ModelShape
    training : TrainingConfig
        ``method``, ``precision``, ``quantization``, ``batch_size`` (the micro-batch), ``max_length`` and
        ``gradient_checkpointing`` matter.
    shards : int
        FSDP over this many GPUs (1: one GPU); each processes ceil(batch_size / shards) examples.
    targets : sequence of str
        LoRA target modules.
    """
    p = shape.parameters()
    e = _dtype_bytes(training.precision)
    parts: dict[str, float] = {}
    if training.method == "full":
        parts["weights"] = (4 * p + (2 * p if e == 2 else 0)) / shards
        parts["gradients+optimizer"] = 12 * p / shards
    else:
        base_bytes = {"none": e, "8bit": 1.0, "4bit": 0.5 + 0.0625}[training.quantization]
        parts["weights"] = p * base_bytes / shards
        parts["gradients+optimizer"] = 16 * shape.lora_parameters(training.lora.r, targets)
    if shards > 1:
        parts["gathered layers"] = 2 * 2 * shape.largest_block()
    micro = math.ceil(training.batch_size / shards)
    tokens = micro * training.max_length
    per_layer = activation_elements(shape) * e
    if training.gradient_checkpointing:
        # Layer inputs are kept; the layer being recomputed holds its activations and their gradients.
        parts["activations"] = tokens * (shape.layers * shape.hidden * e + 2 * per_layer)
    else:
        parts["activations"] = tokens * shape.layers * per_layer
    parts["logits"] = micro * shape.vocab * 4 * 3
    return parts


def scoring_memory(
    shape: ModelShape, training: TrainingConfig, evaluation: EvaluationConfig, *, shards: int = 1
) -> dict[str, float]:
    """Estimated bytes per GPU of scoring (no gradients, one layer's activations alive), before overhead.

    The weights are held as :func:`gengen.scoring.models.precision_for` decides: fp32 for full fine-tuning, the compute
    dtype for a LoRA base; ``shards`` > 1 is a device map (layers spread over the GPUs).
    """
    p = shape.parameters()
    e = _dtype_bytes(training.precision)
    weights = 4 * p if training.method == "full" else p * e
    tokens = evaluation.batch_size * training.max_length
    if evaluation.max_tokens is not None:
        tokens = min(tokens, evaluation.max_tokens)
    return {
        "weights": weights / shards,
        "activations": tokens * (4 * shape.hidden + 3 * shape.intermediate) * e,
        "logits": evaluation.batch_size * shape.vocab * 4 * 2,
    }


def _total_gib(parts: Mapping[str, float], overhead_gib: float) -> float:
    return sum(parts.values()) * 1.1 / GIB + overhead_gib


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PlanRow:
    """The plan of one model × data regime (all its seeds and data seeds).

    Attributes
    ----------
    model, regime : str
        The model's name; ``"full data"`` or ``"<k> shots"``.
    runs : int
    parameters, trainable : int
    train_strategy, score_strategy : str
        ``"1 GPU"``, ``"FSDP over N"`` / ``"device map over N"``, or ``"does not fit"``.
    train_gib, score_gib : float
        Estimated peak memory per GPU under that strategy (the single-GPU figure when nothing fits).
    checkpoint_gib, disk_gib : float
        One checkpoint; the most a run holds on disk at once.
    steps, evaluations : int
        Optimiser steps and scored steps of one run.
    gpu_hours : float
        All runs of the row, training and scoring.
    """

    model: str
    regime: str
    runs: int
    parameters: int
    trainable: int
    train_strategy: str
    train_gib: float
    score_strategy: str
    score_gib: float
    checkpoint_gib: float
    disk_gib: float
    steps: int
    evaluations: int
    gpu_hours: float

    @property
    def fits(self) -> bool:
        return "does not fit" not in (self.train_strategy, self.score_strategy)


def _strategy(single: float, sharded: float, gpus: int, memory: float, sharded_name: str) -> tuple[str, float]:
    if single <= memory:
        return "1 GPU", single
    if gpus > 1 and sharded <= memory:
        return f"{sharded_name} over {gpus}", sharded
    return "does not fit", single if gpus == 1 else sharded


MAX_GPUS = 1 << 16
"""The most GPUs a plan may assume, per run or for the whole grid."""

# What each option of plan_study may be: (low, high, low included, whole number).
_PLAN_OPTION_RANGES: Mapping[str, tuple[float, float, bool, bool]] = {
    "gpus": (1, MAX_GPUS, True, True),
    "total_gpus": (1, MAX_GPUS, True, True),
    "gpu_memory_gib": (0, 1e6, False, False),
    "tflops": (0, 1e6, False, False),
    "mfu": (0, 1, False, False),
    "tokens_per_example": (1, 1e7, True, True),
    "overhead_gib": (0, 1e6, True, False),
}


def _check_plan_options(**values: float) -> None:
    """Each option within its range of :data:`_PLAN_OPTION_RANGES`, else a ConfigError naming the option."""
    for option, value in values.items():
        low, high, low_ok, whole = _PLAN_OPTION_RANGES[option]
        above_low = value >= low if low_ok else value > low
        if whole and (isinstance(value, bool) or not isinstance(value, int)):
            above_low = False
        if not (above_low and value <= high):  # NaN fails both comparisons
            kind = "a whole number" if whole else "a number"
            bounds = f"{'>=' if low_ok else '>'} {number_text(low)} and <= {number_text(high)}"
            raise ConfigError(option=option, problem=f"must be {kind} {bounds}, got {value}")


def plan_study(
    config: StudyConfig,
    *,
    gpus: int,
    gpu_memory_gib: float,
    tflops: float = 989.0,
    mfu: float = 0.35,
    tokens_per_example: int = 64,
    overhead_gib: float = 1.0,
    models: Sequence[str] | None = None,
) -> list[PlanRow]:
    """Plan every model × data regime of a study on ``gpus`` GPUs of ``gpu_memory_gib`` GiB each.

    Parameters
    ----------
    config : StudyConfig
    gpus : int
        GPUs available to one run (FSDP shards over all of them; runs that fit one GPU go one per GPU).
    gpu_memory_gib : float
        Memory of one GPU.
    tflops : float
        Peak dense bf16 TFLOP/s of one GPU (default: an H100 SXM's 989).
    mfu : float
        Assumed model-FLOPs utilisation (share of the peak reached).
    tokens_per_example : int
        Mean prompt length in tokens (for FLOPs; memory uses ``training.max_length``).
    overhead_gib : float
        Fixed memory per GPU on top of the estimate (CUDA context, allocator reserve).
    models : sequence of str, optional
        Only these models.

    Returns
    -------
    list of PlanRow
    """
    _check_plan_options(
        gpus=gpus,
        gpu_memory_gib=gpu_memory_gib,
        tflops=tflops,
        mfu=mfu,
        tokens_per_example=tokens_per_example,
        overhead_gib=overhead_gib,
    )
    evaluation = config.evaluation
    chosen = {r.model.name for r in config.select_runs(models)}
    n_full = _data_size(config.task.train, None)
    test_examples = sum(_data_size(t, evaluation.max_examples) for t in config.testsets)
    regimes: list[tuple[str, int | None]] = (
        [(f"{k} shots", k) for k in config.data.shots] if config.data.shots else [("full data", None)]
    )
    flops_per_second = tflops * 1e12 * mfu
    rows = []
    for model in config.models:
        if model.name not in chosen:
            continue
        shape = model_shape(model)
        p = shape.parameters()
        training = config.training_for(model)  # with its family's [training.families] changes
        targets = config.lora_targets(model)
        trainable = p if training.method == "full" else shape.lora_parameters(training.lora.r, targets)
        one = _total_gib(training_memory(shape, training, targets=targets), overhead_gib)
        many = _total_gib(training_memory(shape, training, shards=gpus, targets=targets), overhead_gib)
        train_strategy, train_gib = _strategy(one, many, gpus, gpu_memory_gib, "FSDP")
        score_one = _total_gib(scoring_memory(shape, training, evaluation), overhead_gib)
        score_many = _total_gib(scoring_memory(shape, training, evaluation, shards=gpus), overhead_gib)
        score_strategy, score_gib = _strategy(score_one, score_many, gpus, gpu_memory_gib, "device map")
        checkpoint = (12 * p if training.method == "full" else 12 * trainable) / GIB
        for regime, shots in regimes:
            n_train = shots if shots is not None else n_full
            total = planned_steps(training, n_train)
            steps = evaluation_steps(evaluation, total)
            saved = [
                s for s in steps if s > 0 and (training.checkpoint_every is None or s % training.checkpoint_every == 0)
            ]
            saved = sorted(set(saved) | {total})
            kept = len(saved) if training.keep_checkpoints == "all" else min(2, len(saved))
            n_runs = len(training.seeds) * (len(config.data.data_seeds) if shots is not None else 1)
            examples = min(n_train, training.batch_size * training.grad_accum) * total
            factor = (6 if training.method == "full" else 4) + (2 if training.gradient_checkpointing else 0)
            train_flops = factor * p * examples * tokens_per_example
            score_flops = 2 * p * len(steps) * test_examples * tokens_per_example
            rows.append(
                PlanRow(
                    model=model.name,
                    regime=regime,
                    runs=n_runs,
                    parameters=p,
                    trainable=trainable,
                    train_strategy=train_strategy,
                    train_gib=train_gib,
                    score_strategy=score_strategy,
                    score_gib=score_gib,
                    checkpoint_gib=checkpoint,
                    disk_gib=checkpoint * kept,
                    steps=total,
                    evaluations=len(steps),
                    gpu_hours=n_runs * (train_flops + score_flops) / flops_per_second / 3600,
                )
            )
    return rows


def fit_advice(
    config: StudyConfig,
    model: str,
    *,
    gpus: int,
    gpu_memory_gib: float,
    overhead_gib: float = 1.0,
) -> list[str]:
    """What the study has not tried yet to train ``model`` on GPUs of ``gpu_memory_gib``, and what each would need.

    Each untried change is estimated alone, with the memory model of :func:`training_memory`: gradient
    checkpointing (when off), a 8- or 4-bit base (LoRA, when the base is not quantised that far), a
    micro-batch of 1 with the step kept by ``grad_accum``, FSDP over more GPUs (the fewest that fit, up to 64).
    A change already in the study is never proposed.

    Returns
    -------
    list of str
        One line per change: ``"<setting>: ~<GiB> GiB per GPU (fits)"`` or ``"(still too much)"``.
    """
    spec = next(m for m in config.models if m.name == model)
    shape, training, targets = model_shape(spec), config.training_for(spec), config.lora_targets(spec)
    options: list[tuple[str, TrainingConfig, int]] = []
    if not training.gradient_checkpointing:
        options.append(("gradient_checkpointing = true", replace(training, gradient_checkpointing=True), 1))
    if training.method == "lora":
        for bits in ("8bit", "4bit"):
            if QUANTIZATIONS.index(bits) > QUANTIZATIONS.index(training.quantization):
                options.append((f'quantization = "{bits}"', replace(training, quantization=bits), 1))
    if training.batch_size > 1:
        accum = training.batch_size * training.grad_accum
        options.append((f"batch_size = 1, grad_accum = {accum}", replace(training, batch_size=1, grad_accum=accum), 1))
    if training.quantization == "none":
        needed = next(
            (
                n
                for n in range(max(2, gpus), 65)
                if _total_gib(training_memory(shape, training, shards=n, targets=targets), overhead_gib)
                <= gpu_memory_gib
            ),
            None,
        )
        if needed is not None and needed > gpus:
            options.append((f'training.strategy = "fsdp" over {needed} GPUs', training, needed))
    lines = []
    for label, changed, shards in options:
        gib = _total_gib(training_memory(shape, changed, shards=shards, targets=targets), overhead_gib)
        verdict = "fits" if gib <= gpu_memory_gib else "still too much"
        lines.append(f"{label}: ~{gib:.1f} GiB per GPU ({verdict})")
    return lines


def grid_hours(rows: Sequence[PlanRow], total_gpus: int, gpus_per_run: int) -> float:
    """Wall-clock hours of every run that fits, on ``total_gpus`` GPUs, runs packed longest first.

    A run that fits one GPU holds one; one that needs FSDP or a device map holds ``gpus_per_run`` and takes its
    GPU-hours over that many. Each run, longest first, starts when the GPUs it needs are free (greedy list
    scheduling: at most 4/3 of the best packing); a run never waits for a shorter one.

    Examples
    --------
    >>> row = PlanRow("m", "full data", 4, 1, 1, "1 GPU", 1.0, "1 GPU", 1.0, 0.1, 0.1, 10, 3, 8.0)
    >>> grid_hours([row], 2, 1)  # four runs of 2 hours on two GPUs
    4.0
    """
    _check_plan_options(total_gpus=total_gpus)
    jobs = []
    for row in rows:
        if not row.fits or row.runs == 0:
            continue
        width = 1 if row.train_strategy == row.score_strategy == "1 GPU" else gpus_per_run
        if width > total_gpus:
            raise ConfigError(
                option="total_gpus", problem=f"{total_gpus}: model {row.model!r} needs {width} GPUs per run"
            )
        jobs += [(row.gpu_hours / row.runs / width, width)] * row.runs
    free = [0.0] * total_gpus
    end = 0.0
    for hours, width in sorted(jobs, reverse=True):
        free.sort()
        start = free[width - 1]
        for i in range(width):
            free[i] = start + hours
        end = max(end, start + hours)
    return end


def format_plan(rows: Sequence[PlanRow], gpus: int, gpu_memory_gib: float, total_gpus: int | None = None) -> str:
    """The plan as a fixed-width table, with totals over the models that fit (and, with ``total_gpus``, the
    wall-clock of the grid on that many GPUs)."""
    header = (
        f"{'model':<14} {'regime':<11} {'runs':>5} {'params':>7} {'trainable':>9}  {'training':<14} {'GiB/GPU':>7}  "
        f"{'scoring':<19} {'GiB/GPU':>7}  {'ckpt GiB':>8} {'disk/run':>8} {'steps':>7} {'evals':>5} {'GPU-h':>9}"
    )
    lines = [f"plan: each run on up to {gpus} GPU(s) of {gpu_memory_gib:g} GiB", header]
    for r in rows:
        lines.append(
            f"{r.model[:14]:<14} {r.regime:<11} {r.runs:>5} {_count(r.parameters):>7} {_count(r.trainable):>9}  "
            f"{r.train_strategy:<14} {r.train_gib:>7.1f}  {r.score_strategy:<19} {r.score_gib:>7.1f}  "
            f"{r.checkpoint_gib:>8.2f} {r.disk_gib:>8.2f} {r.steps:>7} {r.evaluations:>5} {r.gpu_hours:>9.1f}"
        )
    fitting = [r for r in rows if r.fits]
    runs = sum(r.runs for r in fitting)
    disk = sum(r.runs * r.disk_gib for r in fitting)
    hours = sum(r.gpu_hours for r in fitting)
    left_out = sorted({r.model for r in rows if not r.fits})
    scope = f" (models that fit; left out: {', '.join(left_out)})" if left_out else ""
    lines.append(f"total{scope}: {runs} runs, {hours:,.1f} GPU-hours, {disk:,.1f} GiB of checkpoints")
    if total_gpus is not None and fitting:
        wall = grid_hours(fitting, total_gpus, gpus)
        lines.append(
            f"wall-clock for these runs on {total_gpus} GPU(s) in all: ~{wall:,.1f} hours ({wall / 24:,.1f} days)"
        )
    return "\n".join(lines)


def evaluations_note(config: StudyConfig, rows: Sequence[PlanRow]) -> str | None:
    """The ``note:`` line saying why a plan's runs get fewer evaluations than ``log_points`` asks, or None.

    One line for the row with the fewest evaluations (the shortest run crowds the most log-spaced steps
    together); ``gengen plan`` and ``gengen run --dry-run`` both print it.

    Parameters
    ----------
    config : StudyConfig
        The study planned.
    rows : sequence of PlanRow
        :func:`plan_study`'s rows.

    Returns
    -------
    str or None
        ``note: <model> (<regime>): <the reason>`` (:func:`gengen.study.schedule.fewer_evaluations_note`).
    """
    notes = [(row, fewer_evaluations_note(config.evaluation, row.steps)) for row in rows]
    short = [(row, note) for row, note in notes if note is not None]
    if not short:
        return None
    row, note = min(short, key=lambda entry: entry[0].evaluations)
    return f"note: {row.model} ({row.regime}): {note}"


def run_command_line(
    study: str | Path,
    *,
    executor: str | None = None,
    out: str | Path | None = None,
    models: Sequence[str] | None = None,
    dry_run: bool = False,
) -> str:
    """The ``gengen run`` command that runs a study, quoted for a POSIX shell (the ``next:`` of plan and dry run).

    Parameters
    ----------
    study : str or Path
        The study file, as the user named it.
    executor : str, optional
        ``--executor``.
    out : str or Path, optional
        ``--out``.
    models : sequence of str, optional
        ``--model`` for each.
    dry_run : bool
        Add ``--dry-run``.

    Returns
    -------
    str

    Examples
    --------
    >>> run_command_line("my study.toml", executor="slurm", out="/scratch/s")
    "gengen run 'my study.toml' --executor slurm --out /scratch/s"
    """
    import shlex

    words = ["gengen", "run", str(study)]
    if executor is not None:
        words += ["--executor", executor]
    if out is not None:
        words += ["--out", str(out)]
    for model in models or ():
        words += ["--model", model]
    if dry_run:
        words.append("--dry-run")
    return shlex.join(words)


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


__all__ += ["KNOWN_SIZES", "evaluations_note", "fit_advice", "format_plan", "grid_hours", "run_command_line"]
