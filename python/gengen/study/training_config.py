"""The ``[training]`` table of a study: every setting declared once, as a field with its default, type and help.

Each field of :class:`TrainingConfig` (and of :class:`LoraConfig` and :class:`FamilySettings`) carries a
:class:`Setting` in its metadata; :func:`parse_training` reads the study file's keys, defaults, ranges and
choices from those declarations (a choice's values are its ``Literal`` type's), so a new setting is one field.
:func:`training_settings` lists them (name, default, choices, help) for documentation.

Limits: the counts a study can set are checked against the ``MAX_*`` constants below before any work starts,
each refused in one line naming the key, the limit and what to give instead.

Imported by :mod:`gengen.study.config`, which re-exports every name; nothing here imports torch.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Protocol, get_args, get_origin

from gengen.stats.limits import MAX_SEED
from gengen.study.families import LORA_SPECIAL_TARGETS, family_for
from gengen.study.section import Section


class ModelSpec(Protocol):
    """What the training table needs of a study's model (:class:`gengen.study.config.ModelSpec` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def family(self) -> str: ...


__all__ = [
    "DEVICES",
    "KEEP",
    "LORA_DEFAULT_TARGETS",
    "LORA_MODULES",
    "LORA_SPECIAL_TARGETS",
    "MAX_EPOCHS",
    "MAX_EVALUATIONS",
    "MAX_RUNS",
    "MAX_SEEDS",
    "MAX_SHOTS",
    "MAX_STEPS",
    "METHODS",
    "PRECISIONS",
    "QUANTIZATIONS",
    "STRATEGIES",
    "TRUNCATION_SIDES",
    "WARMUP_RULES",
    "FamilySettings",
    "LoraConfig",
    "Setting",
    "TrainingConfig",
    "parse_training",
    "training_settings",
]

MethodName = Literal["full", "lora"]
PrecisionName = Literal["auto", "fp32", "bf16", "fp16"]
DeviceName = Literal["auto", "cpu", "cuda"]
KeepName = Literal["all", "last", "none"]
QuantizationName = Literal["none", "8bit", "4bit"]
StrategyName = Literal["ddp", "fsdp"]
TruncationName = Literal["left", "right"]
WarmupRuleName = Literal["gengen", "transformers"]

METHODS: tuple[str, ...] = get_args(MethodName)
PRECISIONS: tuple[str, ...] = get_args(PrecisionName)
DEVICES: tuple[str, ...] = get_args(DeviceName)
KEEP: tuple[str, ...] = get_args(KeepName)
QUANTIZATIONS: tuple[str, ...] = get_args(QuantizationName)
STRATEGIES: tuple[str, ...] = get_args(StrategyName)
TRUNCATION_SIDES: tuple[str, ...] = get_args(TruncationName)
WARMUP_RULES: tuple[str, ...] = get_args(WarmupRuleName)

MAX_STEPS = 1_000_000_000
"""Optimiser steps of one run (``max_steps``, or what ``epochs`` gives)."""
MAX_EPOCHS = 1_000_000
MAX_EVALUATIONS = 100_000
"""Scored steps of one run (``evaluation.every``, ``log_points`` and ``steps`` together)."""
MAX_SEEDS = 10_000
"""Entries of ``training.seeds`` and of ``data.data_seeds``."""
MAX_SHOTS = 1_000_000
"""A few-shot regime's examples (and entries of ``data.shots``)."""
MAX_RUNS = 1_000_000
"""Runs of a study: models × seeds (× shots × data seeds)."""
_MAX_BATCH = 1 << 20

LORA_DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "v_proj")
"""LoRA's targets for a family whose registry entry names none other (the query and value projections)."""


def _lora_modules() -> dict[str, tuple[str, ...]]:
    from gengen.study.families import FAMILIES

    return {label: f.lora_modules or () for f in FAMILIES for label in f.labels}


LORA_MODULES: Mapping[str, tuple[str, ...]] = _lora_modules()
"""The linear layers of each known family's blocks (what ``target_modules`` may name), by family label."""


@dataclass(frozen=True)
class Setting:
    """How one key of a study's table is read: its kind, range and help (the default is the field's).

    Attributes
    ----------
    help : str
        What the setting does, in one or two sentences.
    kind : {"choice", "boolean", "integer", "number", "integers", "strings"}
        A choice's values are the field's ``Literal`` type's.
    minimum, maximum : float or None
        Inclusive bounds; ``positive`` asks for > 0; ``below`` is an exclusive upper bound.
    max_items : int or None
        For a list: the most entries.
    """

    help: str
    kind: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False
    below: float | None = None
    max_items: int | None = None

    def kind_for(self, default: Any) -> str:
        """The declared kind, else the kind of the field's ``default`` (bool, int, float or a choice)."""
        return self.kind or {bool: "boolean", int: "integer", float: "number", str: "choice"}[type(default)]

    def read(self, section: Section, name: str, default: Any, hint: Any, like: Any = None) -> Any:
        """The key ``name`` of ``section`` (``default`` when absent), checked against this declaration.

        Without a declared ``kind``, the kind is that of ``like`` (the field's default), else of ``default``.
        """
        kind = self.kind_for(default if like is None else like)
        if kind == "choice":
            return section.string(name, default, choices=_choices(hint))
        if kind == "boolean":
            return section.boolean(name, default)
        if kind in ("integer", "number"):
            value = section.number(
                name,
                default,
                integer=kind == "integer",
                minimum=self.minimum,
                positive=self.positive,
                maximum=self.maximum,
            )
            if self.below is not None and value is not None and value >= self.below:
                raise section.error(name, f"expected a number in [{self.minimum or 0:g}, {self.below:g}), got {value}")
            return value
        item = section.int_item if kind == "integers" else section.str_item
        if kind == "integers" and self.maximum is not None:
            item = functools.partial(section.int_item, maximum=int(self.maximum))
        values = section.list_of(name, item, default, max_items=self.max_items)
        if values is not None and not values:
            raise section.error(name, "must not be empty (leave it out for the default)")
        return values


def declare(help: str, kind: str | None = None, **limits: Any) -> dict[str, Setting]:
    """A dataclass field's metadata declaring how the study file sets it (``kind`` None: from the default's type)."""
    return {"setting": Setting(help, kind, **limits)}


def _choices(hint: Any) -> tuple[str, ...]:
    """The values of a ``Literal`` type (or of the ``Literal`` inside ``X | None``)."""
    if get_origin(hint) is Literal:
        return get_args(hint)
    return next(_choices(arg) for arg in get_args(hint) if arg is not type(None))


@dataclass(frozen=True)
class LoraConfig:
    """LoRA settings (peft) used when ``training.method = "lora"``: ``lora = { r, alpha, dropout, target_modules }``."""

    r: int = field(default=8, metadata=declare("Rank of the adapters.", positive=True, maximum=_MAX_BATCH))
    alpha: int = field(
        default=16, metadata=declare("Scaling numerator (the update is scaled by alpha / r).", positive=True)
    )
    dropout: float = field(default=0.05, metadata=declare("Dropout on the adapters' input.", minimum=0.0, below=1.0))
    target_modules: tuple[str, ...] | None = field(
        default=None,
        metadata=declare("Linear layers given adapters (default: the family's).", kind="strings", max_items=1000),
    )


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
    gradient_checkpointing: bool | None = field(
        default=None, metadata=declare("As the study's, for this family.", kind="boolean")
    )
    quantization: QuantizationName | None = field(
        default=None, metadata=declare("As the study's, for this family.", kind="choice")
    )


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
    (:class:`FamilySettings`); :meth:`gengen.study.config.StudyConfig.training_for` applies them.
    """

    method: MethodName = field(
        default="full", metadata=declare("Train every weight ('full') or LoRA adapters on a frozen base.")
    )
    lora: LoraConfig = field(default_factory=LoraConfig)
    learning_rate: float = field(default=1e-5, metadata=declare("AdamW's peak learning rate.", positive=True))
    epochs: float | None = field(
        default=1.0,
        metadata=declare("Passes over the training data (or give max_steps).", positive=True, maximum=MAX_EPOCHS),
    )
    max_steps: int | None = field(
        default=None,
        metadata=declare(
            "Optimiser steps of a run, instead of epochs.", kind="integer", positive=True, maximum=MAX_STEPS
        ),
    )
    batch_size: int = field(default=8, metadata=declare("Examples per micro-batch.", positive=True, maximum=_MAX_BATCH))
    grad_accum: int = field(
        default=1, metadata=declare("Micro-batches per optimiser step.", positive=True, maximum=_MAX_BATCH)
    )
    warmup_steps: int = field(default=0, metadata=declare("Linear warmup steps.", minimum=0, maximum=MAX_STEPS))
    warmup_ratio: float = field(
        default=0.0,
        metadata=declare("Warmup as a share of the steps (the larger warmup wins).", minimum=0.0, below=1.0),
    )
    weight_decay: float = field(default=0.0, metadata=declare("AdamW's weight decay (matrices only).", minimum=0.0))
    max_grad_norm: float | None = field(
        default=1.0, metadata=declare("Gradient clipping norm (0: no clipping).", minimum=0.0)
    )
    max_length: int = field(
        default=256,
        metadata=declare("Longest prompt in tokens (longer ones are truncated).", positive=True, maximum=_MAX_BATCH),
    )
    precision: PrecisionName = field(
        default="auto", metadata=declare("Compute dtype: bf16 (or fp16) on a GPU that has it, fp32 on the CPU.")
    )
    device: DeviceName = field(default="auto", metadata=declare("Where to train: CUDA when available, else the CPU."))
    seeds: tuple[int, ...] = field(
        default=(0,),
        metadata=declare(
            "Training seeds, one run each (distinct integers from 0 to 2**63 - 1).",
            kind="integers",
            max_items=MAX_SEEDS,
            maximum=MAX_SEED,
        ),
    )
    keep_checkpoints: KeepName = field(default="last", metadata=declare("Which checkpoints survive a run."))
    checkpoint_every: int | None = field(
        default=None,
        metadata=declare(
            "Save at the evaluation steps that are multiples of N (and the last).", kind="integer", positive=True
        ),
    )
    gradient_checkpointing: bool = field(default=False, metadata=declare("Recompute activations in the backward pass."))
    quantization: QuantizationName = field(
        default="none", metadata=declare("Load a LoRA base in 8 or 4 bits (bitsandbytes, CUDA).")
    )
    strategy: StrategyName = field(
        default="ddp", metadata=declare("Over several GPUs: whole model per process, or sharded (FSDP2).")
    )
    truncation: TruncationName = field(default="left", metadata=declare("Which end of a too-long prompt is cut."))
    warmup_rule: WarmupRuleName = field(
        default="gengen", metadata=declare("How warmup steps are counted: gengen's or transformers'.")
    )
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


def read_settings(section: Section, cls: type, *, defaults: bool = True) -> dict[str, Any]:
    """Every declared setting of dataclass ``cls`` from ``section``: the fields' defaults, or None for each."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for one in fields(cls):
        declared = one.metadata.get("setting")
        if declared is not None:
            default = one.default if defaults else None
            out[one.name] = declared.read(section, one.name, default, hints[one.name], like=one.default)
    return out


def training_settings() -> list[tuple[str, Any, tuple[str, ...], str]]:
    """(key, default, choices, help) of every ``[training]`` setting and of its ``lora`` table.

    Returns
    -------
    list of tuple
        ``lora.*`` keys after the others; choices are empty for settings that are not a choice.
    """
    rows = []
    for prefix, cls in (("", TrainingConfig), ("lora.", LoraConfig)):
        hints = typing.get_type_hints(cls)
        for one in fields(cls):
            declared = one.metadata.get("setting")
            if declared is not None:
                choices = _choices(hints[one.name]) if declared.kind_for(one.default) == "choice" else ()
                rows.append((prefix + one.name, one.default, choices, declared.help))
    return rows


def _lora_table(table: Section, *, defaults: bool) -> dict[str, Any]:
    """The keys of a ``lora = {...}`` table (r, alpha, dropout, target_modules), validated."""
    values = read_settings(table, LoraConfig, defaults=defaults)
    table.finish()
    return values


def _families(section: Section, models: Sequence[ModelSpec]) -> dict[str, FamilySettings]:
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
        lora = _lora_table(one.table("lora"), defaults=False) if one.has("lora") else {}
        out[family.lower()] = FamilySettings(
            **{f"lora_{key}": value for key, value in lora.items()}, **read_settings(one, FamilySettings)
        )
        one.finish()
    table.finish()
    return out


def parse_training(section: Section, models: Sequence[ModelSpec] = ()) -> TrainingConfig:
    """The ``[training]`` table as a :class:`TrainingConfig`, every key read from its field's declaration.

    Raises
    ------
    ConfigError
        The first problem found, naming the key: an unknown key, a value of the wrong type or out of range, a
        choice not offered, or settings that do not go together.
    """
    values = read_settings(section, TrainingConfig)
    if section.has("max_steps"):
        if section.has("epochs"):
            raise section.error("max_steps", "give either 'epochs' or 'max_steps', not both")
        values["epochs"] = None
    if len(set(values["seeds"])) != len(values["seeds"]):
        raise section.error("seeds", f"expected a non-empty list of distinct integers, got {list(values['seeds'])!r}")
    values["max_grad_norm"] = values["max_grad_norm"] or None  # 0: no clipping
    lora = LoraConfig(**_lora_table(section.table("lora"), defaults=True)) if section.has("lora") else LoraConfig()
    families = _families(section, models)
    config = TrainingConfig(**values, lora=lora, families=families)
    _check_combinations(config, section)
    section.finish()
    return config


def _check_combinations(config: TrainingConfig, section: Section) -> None:
    """Settings that do not go together, for the study and for each family's changes."""
    for family, settings in config.families.items():
        lora_keys = (settings.lora_r, settings.lora_alpha, settings.lora_dropout, settings.lora_target_modules)
        if config.method != "lora" and any(v is not None for v in lora_keys):
            raise section.error(f"families.{family}.lora", "a family's LoRA settings need method = 'lora'")
    for family in ["", *config.families]:
        one = config.for_family(family) if family else config
        where = f"families.{family}.quantization" if family else "quantization"
        if one.strategy == "fsdp" and one.quantization != "none":
            raise section.error("strategy", "'fsdp' does not shard a quantised base; use 'ddp' with quantization")
        if one.quantization != "none" and one.method != "lora":
            raise section.error(where, "a quantised base can only be trained with method = 'lora'")
    if config.strategy == "fsdp" and config.precision == "fp16":
        raise section.error("strategy", "'fsdp' runs in bf16 or fp32 (fp16 needs a sharded grad scaler)")


def lora_targets(training: TrainingConfig, family: str) -> tuple[str, ...]:
    """The LoRA targets of ``family``: its ``[training.families]`` table's, the study's, else the registry's."""
    targets = training.for_family(family).lora.target_modules
    return targets or family_for(family).lora_defaults or LORA_DEFAULT_TARGETS


def check_lora_targets(training: TrainingConfig, models: Sequence[ModelSpec], section: Section) -> None:
    """LoRA targets must exist in every model's family (checked before any model loads): the family's own
    (``families.<family>.lora.target_modules``), else the study's, else the family's default."""
    for model in models:
        family = model.family.lower()
        targets = training.for_family(family).lora.target_modules
        own = training.families.get(family)
        key = f"families.{family}.lora.target_modules" if own and own.lora_target_modules else "lora.target_modules"
        entry = family_for(family)
        if entry.lora_modules is None:
            if not targets:
                raise section.error(
                    key,
                    f"model {model.name!r}: family {model.family!r} has no default LoRA targets "
                    f"(known families: {', '.join(sorted(LORA_MODULES))}); list the target modules",
                )
            continue  # an unknown family: peft checks the names when the model loads
        for target in targets or entry.lora_defaults or LORA_DEFAULT_TARGETS:
            if target not in entry.lora_modules and target not in LORA_SPECIAL_TARGETS:
                raise section.error(
                    key,
                    f"{target!r} is not a linear layer of {model.family} model {model.name!r} "
                    f"(its layers: {', '.join(entry.lora_modules)})",
                )
