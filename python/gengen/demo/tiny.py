"""Tiny randomly initialised causal LMs and a locally trained tokenizer: models for tests and the demo, offline.

Imports torch, transformers and tokenizers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["FAMILIES", "build_tiny_model", "train_tokenizer"]

FAMILIES = ("opt", "olmo2", "smollm3")
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")


def train_tokenizer(texts: Sequence[str], folder: Path, *, vocab_size: int = 400) -> Any:
    """Train a byte-level BPE tokenizer (GPT-2/OPT style) on ``texts`` and save it as a transformers tokenizer.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        Saved in ``folder``; pads with ``<pad>`` on the right and adds no special tokens to a text.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        padding_side="right",
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def build_tiny_model(
    family: str,
    *,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    max_positions: int = 128,
    pad_token_id: int = 0,
    bos_token_id: int = 1,
    eos_token_id: int = 2,
    seed: int = 0,
) -> Any:
    """A randomly initialised causal LM of ``family`` (``"opt"``, ``"olmo2"`` or ``"smollm3"``), from its config.

    The initial weights are fixed by ``seed``; dropout is off so that training is deterministic.
    """
    from transformers import AutoModelForCausalLM, Olmo2Config, OPTConfig, SmolLM3Config

    common: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "max_position_embeddings": max_positions,
        "pad_token_id": pad_token_id,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
    }
    config: Any
    if family == "opt":
        config = OPTConfig(
            **common,
            ffn_dim=4 * hidden,
            word_embed_proj_dim=hidden,
            dropout=0.0,
            attention_dropout=0.0,
            layerdrop=0.0,
        )
    elif family in ("olmo2", "smollm3"):  # Llama-style blocks: gated MLP, no grouped-query attention
        llama_style = Olmo2Config if family == "olmo2" else SmolLM3Config
        config = llama_style(
            **common,
            intermediate_size=4 * hidden,
            num_key_value_heads=heads,
            attention_dropout=0.0,
            tie_word_embeddings=False,
        )
    else:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def count_parameters(model: Any) -> int:
    """Number of parameters of a model."""
    return sum(p.numel() for p in model.parameters())
