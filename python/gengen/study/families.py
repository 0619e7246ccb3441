"""Model families: everything gengen knows about a kind of decoder, in one entry each.

A :class:`Family` says, for the models of a study whose ``family`` label (or ``config.json`` ``model_type``)
it matches:

* which linear layers LoRA may target, and the default targets;
* how to count its parameters, memory and FLOPs from the sizes of its ``config.json`` (an
  :class:`Architecture`: the block's linear layers, its biases and norms, the embeddings, the activations
  kept per token), for ``gengen plan``;
* which module class FSDP shards as one unit (the decoder layer);
* which special token pads when its tokenizer has no pad token.

Adding a family is one entry of :data:`FAMILIES` (and, for a block layout not yet here, one
:class:`Architecture` of :data:`ARCHITECTURES`); see ``docs/extending.md``. A family gengen does not know gets
:func:`family_for`'s generic entry: Llama-style shapes, decoder layers found by the class-name suffix
``DecoderLayer``, no default LoRA targets (the study lists them), and a note saying so.

Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gengen.errors import ConfigError

__all__ = [
    "ARCHITECTURES",
    "FAMILIES",
    "GENERIC_LAYER_SUFFIX",
    "LORA_SPECIAL_TARGETS",
    "SHAPE_LIMITS",
    "Architecture",
    "Family",
    "ModelShape",
    "family_for",
    "is_decoder_layer",
    "shape_from_config",
]

LORA_SPECIAL_TARGETS = ("all-linear",)
"""peft keywords that are not module names."""

GENERIC_LAYER_SUFFIX = "DecoderLayer"
"""How the decoder layers of a family gengen does not know are found: by their class name's suffix."""

SHAPE_LIMITS: Mapping[str, int] = {
    "hidden_size": 1 << 20,
    "num_hidden_layers": 10_000,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
    "intermediate_size": 1 << 24,
    "vocab_size": 1 << 24,
    "max_position_embeddings": 1 << 24,
}
"""The largest value each size of a ``config.json`` may take (the largest published models are far below)."""


@dataclass(frozen=True)
class ModelShape:
    """The sizes that decide a decoder's parameters, memory and FLOPs.

    Attributes
    ----------
    kind : str
        The block layout, a key of :data:`ARCHITECTURES`: ``"opt"`` (biases, learned positions, LayerNorm
        with bias, two-matrix MLP), ``"llama"`` (no biases, RMSNorm, gated three-matrix MLP; OLMo2, SmolLM3,
        Qwen, Mistral), ``"gpt-neox"`` (Pythia: fused QKV with biases, rotary, LayerNorm) or ``"gpt2"``.
    hidden, layers, intermediate, heads, kv_heads, vocab : int
    tied : bool
        The output projection shares the input embedding.
    max_positions : int
        Learned position embeddings (OPT keeps 2 extra rows; 0 for rotary layouts).
    qk_norm : bool
        OLMo2's RMSNorm on queries and keys (its two other norms sit after attention and MLP: still two).
    """

    kind: str
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    max_positions: int = 0
    qk_norm: bool = False

    @property
    def head_dim(self) -> int:
        """Features per attention head."""
        return self.hidden // self.heads

    @property
    def architecture(self) -> Architecture:
        """The formulas of this shape's block layout."""
        return ARCHITECTURES[self.kind]

    def linear_layers(self) -> list[tuple[str, int, int]]:
        """(module name, in, out) features of each linear layer of one block."""
        return self.architecture.linears(self)

    def parameters(self) -> int:
        """Number of parameters, counted as transformers builds the model."""
        block = sum(i * o for _, i, o in self.linear_layers()) + self.architecture.block_extras(self)
        head = 0 if self.tied else self.vocab * self.hidden
        return self.architecture.outside(self) + self.layers * block + head

    def lora_parameters(self, r: int, targets: Sequence[str]) -> int:
        """Adapter parameters: r × (in + out) per targeted layer of every block."""
        every = "all-linear" in targets
        return self.layers * sum(r * (i + o) for name, i, o in self.linear_layers() if every or name in targets)

    def largest_block(self) -> int:
        """Parameters of one block's linear layers (the unit FSDP gathers)."""
        return sum(i * o for _, i, o in self.linear_layers())

    def activation_elements(self) -> float:
        """Values saved for the backward pass per token and layer, in units of the compute dtype."""
        return self.architecture.activations(self)


@dataclass(frozen=True)
class Architecture:
    """The formulas of one block layout, from a :class:`ModelShape`'s sizes.

    Attributes
    ----------
    name : str
        The key in :data:`ARCHITECTURES` (a :attr:`ModelShape.kind`).
    modules : tuple of str
        The linear layers' module names (what LoRA's ``target_modules`` may name).
    linears : callable
        ``shape -> [(module name, in, out), ...]`` of one block.
    block_extras : callable
        ``shape -> int``: a block's parameters besides its linear weights (biases, norms).
    outside : callable
        ``shape -> int``: embeddings, position embeddings and the final norm (not the untied output head).
    activations : callable
        ``shape -> float``: values kept for the backward pass per token and layer.
    read : callable
        ``(config.json as a mapping, where) -> ModelShape``.
    """

    name: str
    modules: tuple[str, ...]
    linears: Callable[[ModelShape], list[tuple[str, int, int]]]
    block_extras: Callable[[ModelShape], int]
    outside: Callable[[ModelShape], int]
    activations: Callable[[ModelShape], float]
    read: Callable[[Mapping[str, Any], str], ModelShape]


@dataclass(frozen=True)
class Family:
    """What gengen knows about one model family.

    Attributes
    ----------
    name : str
        The family's name (the first of ``labels``).
    architecture : str
        Its block layout, a key of :data:`ARCHITECTURES`.
    labels : tuple of str
        The ``[[models]] family`` labels of a study that mean this family (compared case-insensitively).
    model_types : tuple of str
        The ``model_type`` values of a ``config.json`` that mean it.
    decoder_layer : str or None
        The class name of its decoder layer (the unit FSDP shards); None: by the suffix ``DecoderLayer``.
    lora_defaults : tuple of str or None
        LoRA targets when the study names none; None: the study must name them.
    pad_fallback : tuple of str
        The tokenizer attributes tried in turn for a pad token when the tokenizer has none.
    known : bool
        False for the generic entry :func:`family_for` gives an unknown family.
    """

    name: str
    architecture: str
    labels: tuple[str, ...]
    model_types: tuple[str, ...] = ()
    decoder_layer: str | None = None
    lora_defaults: tuple[str, ...] | None = ("q_proj", "v_proj")
    pad_fallback: tuple[str, ...] = ("eos_token", "unk_token", "bos_token")
    known: bool = True

    @property
    def lora_modules(self) -> tuple[str, ...] | None:
        """The linear layers LoRA may target (None for an unknown family: peft checks the names)."""
        return ARCHITECTURES[self.architecture].modules if self.known else None

    @property
    def note(self) -> str | None:
        """What gengen assumes about an unknown family, in one line (None for a known one)."""
        if self.known:
            return None
        known = ", ".join(sorted({label for f in FAMILIES for label in f.labels}))
        return (
            f"family {self.name!r} is not one gengen knows ({known}): its shapes are planned as a Llama-style "
            f"decoder, FSDP shards the modules whose class name ends in {GENERIC_LAYER_SUFFIX!r}, and LoRA needs "
            "target_modules listed"
        )


# ---------------------------------------------------------------------------------------------- reading sizes


def _size(config: Mapping[str, Any], key: str, where: str, default: Any = None) -> int:
    """``config[key]`` as a whole number from 1 to its :data:`SHAPE_LIMITS` entry, else a ConfigError."""
    value = config.get(key, default)
    if value is None:
        raise ConfigError(f"{where}: {key}: missing (needed to plan the model)")
    limit = SHAPE_LIMITS.get(key, 1 << 24)
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole or not 1 <= value <= limit:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ConfigError(f"{where}: {key}: expected a whole number from 1 to {limit:,}, got {shown}")
    return int(value)


def _heads(config: Mapping[str, Any], hidden: int, where: str, kv_key: str | None) -> tuple[int, int]:
    heads = _size(config, "num_attention_heads", where)
    if hidden % heads:
        raise ConfigError(f"{where}: num_attention_heads: {heads} does not divide hidden_size {hidden}")
    kv = heads if kv_key is None else _size(config, kv_key, where, config.get(kv_key) or heads)
    if kv > heads or heads % kv:
        raise ConfigError(f"{where}: {kv_key}: {kv} does not divide num_attention_heads {heads}")
    return heads, kv


def _decoder_shape(
    kind: str,
    config: Mapping[str, Any],
    where: str,
    *,
    ffn_key: str = "intermediate_size",
    kv_key: str | None = None,
    tied: bool,
    positions: bool = False,
    qk_norm: bool = False,
) -> ModelShape:
    """The shape every family reads alike: sizes under the Hugging Face names, checked in one order.

    ``tied`` is the default of ``tie_word_embeddings``; ``positions``: the family has learned positions
    (``max_position_embeddings`` is needed).
    """
    hidden = _size(config, "hidden_size", where)
    heads, kv = _heads(config, hidden, where, kv_key)
    return ModelShape(
        kind,
        hidden,
        _size(config, "num_hidden_layers", where),
        _size(config, ffn_key, where),
        heads,
        kv,
        _size(config, "vocab_size", where),
        bool(config.get("tie_word_embeddings", tied)),
        max_positions=_size(config, "max_position_embeddings", where) if positions else 0,
        qk_norm=qk_norm,
    )


def _read_opt(config: Mapping[str, Any], where: str) -> ModelShape:
    hidden = _size(config, "hidden_size", where)
    if config.get("word_embed_proj_dim", hidden) != hidden:
        raise ConfigError(f"{where}: OPT with a projected embedding (opt-350m) is not modelled")
    return _decoder_shape("opt", config, where, ffn_key="ffn_dim", tied=True, positions=True)


def _read_llama(config: Mapping[str, Any], where: str) -> ModelShape:
    qk_norm = config.get("model_type") in ("olmo2", "olmo3")
    return _decoder_shape("llama", config, where, kv_key="num_key_value_heads", tied=False, qk_norm=qk_norm)


def _read_neox(config: Mapping[str, Any], where: str) -> ModelShape:
    return _decoder_shape("gpt-neox", config, where, tied=False)


def _read_gpt2(config: Mapping[str, Any], where: str) -> ModelShape:
    renamed = {
        "hidden_size": config.get("n_embd"),
        "num_hidden_layers": config.get("n_layer"),
        "num_attention_heads": config.get("n_head"),
        "vocab_size": config.get("vocab_size"),
        "max_position_embeddings": config.get("n_positions"),
        "tie_word_embeddings": config.get("tie_word_embeddings", True),
    }
    hidden = _size(renamed, "hidden_size", where)
    renamed["intermediate_size"] = config.get("n_inner") or 4 * hidden
    return _decoder_shape("gpt2", renamed, where, tied=True, positions=True)


# ---------------------------------------------------------------------------------------------- layouts


def _opt_linears(s: ModelShape) -> list[tuple[str, int, int]]:
    h, i = s.hidden, s.intermediate
    return [("q_proj", h, h), ("k_proj", h, h), ("v_proj", h, h), ("out_proj", h, h), ("fc1", h, i), ("fc2", i, h)]


def _llama_linears(s: ModelShape) -> list[tuple[str, int, int]]:
    h, i, kv = s.hidden, s.intermediate, s.kv_heads * s.head_dim
    return [
        ("q_proj", h, h),
        ("k_proj", h, kv),
        ("v_proj", h, kv),
        ("o_proj", h, h),
        ("gate_proj", h, i),
        ("up_proj", h, i),
        ("down_proj", i, h),
    ]


def _neox_linears(s: ModelShape) -> list[tuple[str, int, int]]:
    h, i = s.hidden, s.intermediate
    return [("query_key_value", h, 3 * h), ("dense", h, h), ("dense_h_to_4h", h, i), ("dense_4h_to_h", i, h)]


def _gpt2_linears(s: ModelShape) -> list[tuple[str, int, int]]:
    h, i = s.hidden, s.intermediate
    return [("c_attn", h, 3 * h), ("c_proj", h, h), ("c_fc", h, i), ("c_proj", i, h)]


def _biases_and_layernorms(s: ModelShape) -> int:
    """Every linear layer has a bias; two LayerNorms (weight and bias) per block."""
    return sum(o for _, _, o in s.linear_layers()) + 2 * 2 * s.hidden


def _llama_norms(s: ModelShape) -> int:
    """Two RMSNorms per block (weights only), plus OLMo2's query and key norms."""
    return 2 * s.hidden + (s.hidden + s.kv_heads * s.head_dim if s.qk_norm else 0)


def _layernorm_activations(s: ModelShape) -> float:
    """Measured on OPT (peak RSS of CPU fp32 training, ``benches/README.md``): about 12 h + 2.25 i values
    (LayerNorms, q/k/v, attention output, fc1 and its activation); GPT-NeoX and GPT-2 blocks hold the same
    tensors (fused q/k/v: the same values) and are assumed alike."""
    return 12 * s.hidden + 2.25 * s.intermediate


def _llama_activations(s: ModelShape) -> float:
    """Measured like OPT's: about 22 h + 4.75 i (RMSNorms computed in fp32, OLMo2's q/k norms, rotary copies,
    the gated MLP's three products)."""
    return 22 * s.hidden + 4.75 * s.intermediate


ARCHITECTURES: Mapping[str, Architecture] = {
    "opt": Architecture(
        "opt",
        ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
        _opt_linears,
        _biases_and_layernorms,
        lambda s: s.vocab * s.hidden + (s.max_positions + 2) * s.hidden + 2 * s.hidden,
        _layernorm_activations,
        _read_opt,
    ),
    "llama": Architecture(
        "llama",
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        _llama_linears,
        _llama_norms,
        lambda s: s.vocab * s.hidden + s.hidden,
        _llama_activations,
        _read_llama,
    ),
    "gpt-neox": Architecture(
        "gpt-neox",
        ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
        _neox_linears,
        _biases_and_layernorms,
        lambda s: s.vocab * s.hidden + 2 * s.hidden,
        _layernorm_activations,
        _read_neox,
    ),
    "gpt2": Architecture(
        "gpt2",
        ("c_attn", "c_proj", "c_fc"),
        _gpt2_linears,
        _biases_and_layernorms,
        lambda s: s.vocab * s.hidden + s.max_positions * s.hidden + 2 * s.hidden,
        _layernorm_activations,
        _read_gpt2,
    ),
}
"""The block layouts gengen can plan, by :attr:`ModelShape.kind`."""


def _llama_like(name: str, layer: str, *labels: str, model_types: tuple[str, ...] | None = None) -> Family:
    return Family(name, "llama", (name, *labels), model_types or (name,), layer)


FAMILIES: tuple[Family, ...] = (
    Family("opt", "opt", ("opt",), ("opt",), "OPTDecoderLayer"),
    _llama_like("llama", "LlamaDecoderLayer", "smollm", "smollm2"),
    _llama_like("smollm3", "SmolLM3DecoderLayer"),
    _llama_like("olmo", "OlmoDecoderLayer"),
    _llama_like("olmo2", "Olmo2DecoderLayer"),
    _llama_like("olmo3", "Olmo3DecoderLayer"),
    _llama_like("qwen2", "Qwen2DecoderLayer", "qwen"),
    _llama_like("qwen3", "Qwen3DecoderLayer"),
    _llama_like("mistral", "MistralDecoderLayer"),
    _llama_like("mixtral", "MixtralDecoderLayer"),
    _llama_like("gemma", "GemmaDecoderLayer"),
    _llama_like("gemma2", "Gemma2DecoderLayer"),
    Family(
        "gpt-neox", "gpt-neox", ("gpt-neox", "pythia", "gpt_neox"), ("gpt_neox",), "GPTNeoXLayer", ("query_key_value",)
    ),
    Family("gpt2", "gpt2", ("gpt2",), ("gpt2",), "GPT2Block", ("c_attn",)),
)
"""Every family gengen knows: one entry each (see the module docstring)."""

_BY_LABEL = {label: family for family in FAMILIES for label in family.labels}
_BY_MODEL_TYPE = {model_type: family for family in FAMILIES for model_type in family.model_types}


def family_for(label: str, model_type: str | None = None) -> Family:
    """The registry entry of a study's ``family`` label (else of a ``config.json``'s ``model_type``).

    Parameters
    ----------
    label : str
        The ``[[models]] family`` of a study (case-insensitive).
    model_type : str, optional
        The model's ``config.json`` ``model_type``, tried when the label is unknown.

    Returns
    -------
    Family
        The known entry, or a generic one (``known`` False, with a :attr:`Family.note`).

    Examples
    --------
    >>> family_for("Pythia").decoder_layer
    'GPTNeoXLayer'
    >>> family_for("mine").known
    False
    """
    found = _BY_LABEL.get(label.lower()) or (_BY_MODEL_TYPE.get(model_type) if model_type else None)
    if found is not None:
        return found
    return Family(label.lower(), "llama", (label.lower(),), decoder_layer=None, lora_defaults=None, known=False)


def is_decoder_layer(module: Any, family: Family) -> bool:
    """Whether ``module`` is one of ``family``'s decoder layers (the unit FSDP shards).

    A known family names its layer's class; an unknown one is matched by the suffix
    :data:`GENERIC_LAYER_SUFFIX`.
    """
    name = type(module).__name__
    return name == family.decoder_layer if family.decoder_layer else name.endswith(GENERIC_LAYER_SUFFIX)


def shape_from_config(config: Any, where: str = "config.json") -> ModelShape:
    """A :class:`ModelShape` from a transformers ``config.json``, by its ``model_type``'s family.

    An unknown ``model_type`` is read as a Llama-style decoder. Every size must be a whole number within
    :data:`SHAPE_LIMITS` (and the heads must divide the hidden size).

    Raises
    ------
    ConfigError
        The config is not a JSON object, or a size is missing, not a whole number or out of range, naming
        ``where`` and the key.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"{where}: expected a JSON object of the model's settings, got {type(config).__name__}")
    model_type = config.get("model_type")
    family = _BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None
    architecture = ARCHITECTURES[family.architecture if family is not None else "llama"]
    return architecture.read(config, where)
