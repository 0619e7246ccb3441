"""Loading causal language models and tokenizers, and turning NLI examples into prompts and answer tokens.

Imported only by the training and scoring code: it imports torch and transformers.
"""

from __future__ import annotations

import importlib.util
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
import transformers

from gengen.errors import ConfigError

if TYPE_CHECKING:
    from gengen.study.config import RunSpec, StudyConfig

# Library progress bars (e.g. "Writing model shards") would interleave with gengen's own.
transformers.utils.logging.disable_progress_bar()

__all__ = [
    "Precision",
    "answer_token_ids",
    "build_trainable_model",
    "enable_checkpointing",
    "encode_prompts",
    "last_token_logits",
    "load_adapter",
    "load_model",
    "load_tokenizer",
    "precision_for",
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
    """The compute dtype for a precision setting.

    ``"auto"`` is bf16 on a CUDA device that has it, fp16 on an older CUDA device, fp32 on the CPU. ``"bf16"``
    also runs on the CPU (slowly; useful to check a bf16 setup without a GPU); ``"fp16"`` needs CUDA.
    """
    if precision == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if precision == "fp16" and device.type == "cpu":
        raise ConfigError("training.precision: 'fp16' needs a CUDA device; use 'fp32', 'bf16' or 'auto' on the CPU")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@dataclass(frozen=True)
class Precision:
    """How a model's weights are held and its forward pass computed, for training and for scoring.

    Attributes
    ----------
    weights : torch.dtype
        dtype the model is loaded in: the compute dtype for a LoRA base (it is frozen) and for scoring it;
        fp32 for full fine-tuning (the optimiser needs fp32 master weights) and for scoring its checkpoints.
    compute : torch.dtype
        autocast dtype of the forward pass (fp32: no autocast).
    """

    weights: torch.dtype
    compute: torch.dtype

    @property
    def autocast(self) -> bool:
        """Whether the forward pass runs under ``torch.autocast``."""
        return self.compute != torch.float32

    def context(self, device: torch.device) -> Any:
        """The autocast context of a forward pass on ``device`` (a no-op for fp32)."""
        return torch.autocast(device.type, dtype=self.compute, enabled=self.autocast)


def precision_for(precision: str, method: str, device: torch.device) -> Precision:
    """The one place that decides the dtypes of training, in-training evaluation and ``gengen score``.

    Both paths call this with the study's ``training.precision`` and ``training.method``, so a checkpoint
    scored during training and the same checkpoint scored later by ``gengen score`` see the same weights in the
    same dtype under the same autocast, and get the same numbers.
    """
    compute = select_dtype(precision, device)
    return Precision(weights=torch.float32 if method == "full" else compute, compute=compute)


def load_tokenizer(path: str, revision: str | None = None, family: str | None = None) -> Any:
    """A Hugging Face tokenizer that pads on the right and has a pad token.

    Right padding keeps every real token at the position it has without padding (the scores read the logits
    at each row's last real token), for every family, whatever its position encoding. A tokenizer without a
    pad token (GPT-2, Pythia) pads with the first of its family's
    :attr:`gengen.study.families.Family.pad_fallback` tokens it has (eos, else unk, else bos).
    """
    from transformers import AutoTokenizer

    from gengen.study.families import family_for

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"tokenizer {path!r}: cannot load it ({_first_line(error)})") from None
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is None:
        candidates = family_for(family or "").pad_fallback
        fallback = next((getattr(tokenizer, name) for name in candidates if getattr(tokenizer, name, None)), None)
        if fallback is None:
            raise ConfigError(f"tokenizer {path!r}: has no pad, eos, unk or bos token to pad with")
        tokenizer.pad_token = fallback
    return tokenizer


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def load_model(
    path: str,
    *,
    revision: str | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
    quantization: str = "none",
    label: str | None = None,
    device_map: str | None = None,
) -> Any:
    """A causal LM from a hub id or a local folder, in ``dtype`` on ``device``, with the KV cache off.

    Parameters
    ----------
    path, revision : str
        Hub id (and revision) or local folder.
    dtype : torch.dtype
        dtype of the weights (of the non-quantised ones with ``quantization``).
    device : torch.device
        Default: the CPU.
    quantization : {"none", "8bit", "4bit"}
        Load the weights in 8 or 4 bits (bitsandbytes, CUDA only): a QLoRA base.
    label : str, optional
        The model's name in the study, for error messages.
    device_map : str, optional
        ``"auto"``: spread the layers over every visible GPU (then the CPU) with accelerate, for a model larger
        than one GPU; ``device`` is then ignored.

    Raises
    ------
    ConfigError
        The model cannot be loaded (missing folder, unknown hub id, no network, bad files), in one line.
    """
    from transformers import AutoModelForCausalLM

    device = device or torch.device("cpu")
    where = f"model {label!r} ({path})" if label else f"model {path!r}"
    options: dict[str, Any] = {"revision": revision, "dtype": dtype}
    if quantization != "none":
        if device.type != "cuda":
            raise ConfigError(f"training.quantization: {quantization!r} needs a CUDA device (bitsandbytes)")
        if importlib.util.find_spec("bitsandbytes") is None:
            raise ConfigError(f"training.quantization: {quantization!r} needs bitsandbytes (pip install bitsandbytes)")
        from transformers import BitsAndBytesConfig

        options["quantization_config"] = BitsAndBytesConfig(
            load_in_8bit=quantization == "8bit",
            load_in_4bit=quantization == "4bit",
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=dtype,
        )
        options["device_map"] = {"": device.index or 0}
    elif device_map is not None:
        options["device_map"] = device_map
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(path, **options)
    except pickle.UnpicklingError as error:
        # transformers reads .bin weights with torch's weights-only loader: a pickle that is more than tensors
        # is refused (never run); say so in one line.
        raise ConfigError(f"{where}: refused its weights (not plain tensors: {_first_line(error)[:120]})") from None
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"{where}: cannot load it ({_first_line(error)})") from None
    # Scoring and training read one position per prompt: a KV cache would only cost memory.
    model.config.use_cache = False
    return model if quantization != "none" or device_map is not None else model.to(device)


def load_adapter(model: Any, folder: str, *, name: str = "default", is_trainable: bool = False) -> Any:
    """Load the peft (LoRA) adapter in ``folder``: over a base model, or next to a PeftModel's adapters.

    Returns the PeftModel. Errors (a missing or damaged adapter, a pickle that is more than tensors, which
    peft's weights-only loader refuses without running it) are one-line ConfigErrors naming the folder.
    """
    import peft

    try:
        if isinstance(model, peft.PeftModel):
            model.load_adapter(folder, adapter_name=name, is_trainable=is_trainable)
            return model
        return peft.PeftModel.from_pretrained(model, folder, adapter_name=name, is_trainable=is_trainable)
    except pickle.UnpicklingError as error:
        raise ConfigError(
            f"adapter {folder}: refused its weights (not plain tensors: {_first_line(error)[:120]})"
        ) from None
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"adapter {folder}: cannot load it ({_first_line(error)})") from None


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


def special_prefix_length(tokenizer: Any) -> int:
    """How many special tokens (a BOS) the tokenizer puts before a text's own tokens."""
    probe = "Yes"
    with_special = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    plain = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(with_special) - len(plain) + 1):
        if with_special[start : start + len(plain)] == plain:
            return start
    return 0


def truncate_left(ids: Sequence[int], max_length: int, keep_prefix: int) -> list[int]:
    """The last tokens of ``ids`` that fit in ``max_length``, after its first ``keep_prefix`` (its BOS)."""
    ids = list(ids)
    if len(ids) <= max_length:
        return ids
    keep_prefix = min(keep_prefix, max_length - 1)
    return ids[:keep_prefix] + ids[len(ids) - (max_length - keep_prefix) :]


def truncate_right(ids: Sequence[int], max_length: int) -> list[int]:
    """The first ``max_length`` tokens of ``ids`` (a Hugging Face tokenizer's ``truncation=True``)."""
    return list(ids)[:max_length]


def encode_prompts(
    tokenizer: Any, frame: pd.DataFrame, prompt: str, max_length: int, truncation: str = "left"
) -> list[list[int]]:
    """Token ids of each example's prompt (special tokens as the tokenizer adds them).

    With ``truncation = "left"`` (the default) a prompt longer than ``max_length`` loses tokens from the start
    of its text, so that the question and the place where the answer goes are always kept; the BOS token the
    tokenizer puts first is kept too (models trained with one behave badly without it). ``"right"`` keeps the
    first ``max_length`` tokens, as the tokenizer's own ``truncation=True`` does (the question of a long
    prompt is then lost, and its last kept token is where the answer is read).
    """
    texts = [prompt.format(premise=p, hypothesis=h) for p, h in zip(frame["premise"], frame["hypothesis"], strict=True)]
    encoded = tokenizer(texts, add_special_tokens=True)["input_ids"]
    if truncation == "right":
        return [truncate_right(ids, max_length) for ids in encoded]
    prefix = special_prefix_length(tokenizer)
    return [truncate_left(ids, max_length, prefix) for ids in encoded]


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
        logits = model(
            input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=positions, use_cache=False
        ).logits
    except TypeError:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        index = last
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    return logits[rows, index].float()


def enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant: no input gradient needed)."""
    # transformers 5 renames the method (and its argument); older versions only have the first name.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def build_trainable_model(
    config: StudyConfig, run: RunSpec, device: torch.device, checkpoint: Path | None, precision: Precision
) -> Any:
    """The model to train: from the last checkpoint when resuming, else from the model's path.

    Full fine-tuning keeps fp32 master weights; LoRA freezes a base in the compute dtype (or 8/4-bit) and
    trains fp32 adapters. Gradient checkpointing, when asked for, uses the non-reentrant variant, which needs
    no gradient on the inputs (the frozen embeddings of a LoRA base have none). The settings are the model's
    family's (:meth:`gengen.study.config.StudyConfig.training_for`).
    """
    training = config.training_for(run.model)
    if training.method == "full":
        source = str(checkpoint) if checkpoint is not None else run.model.path
        revision = None if checkpoint is not None else run.model.revision
        model = load_model(source, revision=revision, dtype=precision.weights, device=device, label=run.model.name)
        if training.gradient_checkpointing:
            enable_checkpointing(model)
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
        enable_checkpointing(base)
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
