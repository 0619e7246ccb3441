"""Loading causal language models and tokenizers, and turning NLI examples into prompts and answer tokens.

Imported only by the training and scoring code: it imports torch and transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import transformers

from gengen.errors import ConfigError

# Library progress bars (e.g. "Writing model shards") would interleave with gengen's own.
transformers.utils.logging.disable_progress_bar()

__all__ = [
    "answer_token_ids",
    "encode_prompts",
    "last_token_logits",
    "load_model",
    "load_tokenizer",
    "select_device",
    "select_dtype",
]


def select_device(preference: str = "auto") -> torch.device:
    """``"cuda"`` when asked for or (``"auto"``) available, else ``"cpu"``."""
    if preference == "cuda" and not torch.cuda.is_available():
        raise ConfigError("training.device: 'cuda' asked for but torch sees no CUDA device")
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def select_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The parameter dtype for a precision setting: ``"auto"`` is bf16 on a CUDA device that has it, else fp32."""
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if precision in ("bf16", "fp16") and device.type == "cpu":
        raise ConfigError(f"training.precision: {precision!r} needs a CUDA device; use 'fp32' or 'auto' on the CPU")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def load_tokenizer(path: str, revision: str | None = None) -> Any:
    """A Hugging Face tokenizer that pads on the right and has a pad token.

    Right padding keeps every real token at the position it has without padding (the scores read the logits
    at each row's last real token), for every family, whatever its position encoding.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is None:
        fallback = tokenizer.eos_token or tokenizer.unk_token or tokenizer.bos_token
        if fallback is None:
            raise ConfigError(f"tokenizer {path!r}: has no pad, eos, unk or bos token to pad with")
        tokenizer.pad_token = fallback
    return tokenizer


def load_model(
    path: str,
    *,
    revision: str | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> Any:
    """A causal LM from a hub id or a local folder, in ``dtype`` on ``device``."""
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(path, revision=revision, dtype=dtype)
    return model.to(device or torch.device("cpu"))


def answer_token_ids(tokenizer: Any, answers: Sequence[str]) -> tuple[int, int]:
    """The token ids of the two answer words (Yes first), checking that each is exactly one token.

    Raises
    ------
    ConfigError
        An answer is not a single token for this tokenizer (the message lists its pieces).
    """
    ids = []
    for answer in answers:
        pieces = tokenizer(answer, add_special_tokens=False)["input_ids"]
        if len(pieces) != 1:
            shown = tokenizer.convert_ids_to_tokens(pieces)
            raise ConfigError(
                f"task.answers: {answer!r} is {len(pieces)} tokens {shown} for tokenizer "
                f"{getattr(tokenizer, 'name_or_path', '')!r}; choose answer words that are one token each"
            )
        ids.append(int(pieces[0]))
    if ids[0] == ids[1]:
        raise ConfigError(f"task.answers: {answers[0]!r} and {answers[1]!r} are the same token")
    return ids[0], ids[1]


def encode_prompts(tokenizer: Any, frame: pd.DataFrame, prompt: str, max_length: int) -> list[list[int]]:
    """Token ids of each example's prompt (special tokens as the tokenizer adds them).

    A prompt longer than ``max_length`` loses tokens from its start, so that the question and the place
    where the answer goes are always kept.
    """
    texts = [prompt.format(premise=p, hypothesis=h) for p, h in zip(frame["premise"], frame["hypothesis"], strict=True)]
    encoded = tokenizer(texts, add_special_tokens=True)["input_ids"]
    return [list(ids[-max_length:]) for ids in encoded]


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and the lengths of a batch of token sequences."""
    lengths = np.array([len(s) for s in sequences])
    ids = np.full((len(sequences), int(lengths.max())), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return (
        torch.from_numpy(ids).to(device),
        torch.from_numpy(mask).to(device),
        torch.from_numpy(lengths).to(device),
    )


def last_token_logits(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """Logits at each row's last real token, shape ``(batch, vocab)``, in float32.

    Only the distinct last positions of the batch are projected onto the vocabulary (``logits_to_keep``),
    which matters for large vocabularies; models that do not take that argument return every position.
    """
    last = lengths - 1
    positions, index = torch.unique(last, return_inverse=True)
    try:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=positions).logits
    except TypeError:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        index = last
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    return logits[rows, index].float()
