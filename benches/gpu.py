"""GPU benchmark of training and scoring at the paper's model shapes, against ``gengen plan``'s estimates.

For each model shape (random weights built from the config, nothing downloaded) and each mode (LoRA on a bf16
base, full fine-tuning with fp32 master weights), it measures:

* training tokens/s over ``--steps`` optimiser steps (after ``--warmup`` untimed ones), on random prompts of
  ``--seq`` tokens, micro-batch ``--batch``, gradient checkpointing on or off;
* scoring examples/s (gengen's scoring path: last-token logits, answer-token scores, no KV cache);
* peak GPU memory (``torch.cuda.max_memory_allocated``) against :func:`gengen.study.plan.training_memory` and
  :func:`gengen.study.plan.scoring_memory` (the plan's figures without its fixed overhead and 10 % margin);
* MFU: model FLOPs per second (6 × parameters per token for full fine-tuning, 4 × for LoRA, + 2 × with
  gradient checkpointing) over the GPU's dense bf16 peak.

Usage (one GPU)::

    python benches/gpu.py                                   # OLMo2-1B, OLMo2-7B, OPT-2.7b; LoRA and full
    python benches/gpu.py --models allenai/OLMo-2-1124-7B --modes lora --batch 16 --checkpointing
    python benches/gpu.py --device cpu --models tiny-olmo2 --steps 2 --warmup 1   # a smoke run, no GPU

It prints a Markdown table for ``benches/README.md`` and, with ``--json PATH``, writes every figure. A shape that
does not fit the GPU is reported as out of memory and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

# Dense bf16 peak TFLOP/s (no sparsity) by a substring of torch.cuda.get_device_name().
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0, "4090": 165.0, "L4": 121.0}
DEFAULT_MODELS = ("allenai/OLMo-2-0425-1B", "allenai/OLMo-2-1124-7B", "facebook/opt-2.7b")
TINY = ("tiny-olmo2", "tiny-opt")


def transformers_config(name: str) -> Any:
    """A transformers config with the shape of ``name`` (a key of gengen.study.plan.KNOWN_SHAPES or a tiny shape)."""
    from transformers import Olmo2Config, OPTConfig, SmolLM3Config

    from gengen.study.plan import KNOWN_SHAPES, ModelShape

    if name == "tiny-olmo2":
        shape = ModelShape("llama", 64, 2, 256, 4, 4, 512, False, qk_norm=True)
    elif name == "tiny-opt":
        shape = ModelShape("opt", 64, 2, 256, 4, 4, 512, True, max_positions=512)
    else:
        shape = KNOWN_SHAPES[name]
    if shape.kind == "opt":
        return shape, OPTConfig(
            hidden_size=shape.hidden,
            num_hidden_layers=shape.layers,
            ffn_dim=shape.intermediate,
            num_attention_heads=shape.heads,
            vocab_size=shape.vocab,
            max_position_embeddings=shape.max_positions,
            word_embed_proj_dim=shape.hidden,
            dropout=0.0,
            attention_dropout=0.0,
            use_cache=False,
        )
    config_class = Olmo2Config if shape.qk_norm else SmolLM3Config
    return shape, config_class(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        intermediate_size=shape.intermediate,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        vocab_size=shape.vocab,
        tie_word_embeddings=shape.tied,
        max_position_embeddings=4096,
        use_cache=False,
    )


def build(name: str, mode: str, device: Any, checkpointing: bool) -> tuple[Any, Any, list[Any]]:
    """A randomly initialised model of ``name``'s shape, ready to train in ``mode``; its trainable parameters."""
    import torch
    from transformers import AutoModelForCausalLM

    from gengen.study.training_config import LORA_DEFAULT_TARGETS

    shape, config = transformers_config(name)
    dtype = torch.float32 if mode == "full" or device.type == "cpu" else torch.bfloat16
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if mode == "lora":
        import peft

        settings = peft.LoraConfig(r=8, lora_alpha=32, target_modules=list(LORA_DEFAULT_TARGETS), task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, settings)
    model.train()
    return shape, model, [p for p in model.parameters() if p.requires_grad]


def bench_one(name: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train ``args.steps`` steps and score ``args.score_batches`` batches; figures and plan estimates."""
    import torch

    from gengen.scoring.models import last_token_logits
    from gengen.study.plan import GIB, scoring_memory, training_memory
    from gengen.study.tables import EvaluationConfig
    from gengen.study.training_config import LoraConfig, TrainingConfig

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    shape, model, params = build(name, mode, device, args.checkpointing)
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    generator = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, shape.vocab, (args.batch, args.seq), generator=generator).to(device)
    mask = torch.ones_like(ids)
    lengths = torch.full((args.batch,), args.seq, device=device)
    gold = torch.randint(0, shape.vocab, (args.batch,), generator=generator).to(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = last_token_logits(model, ids, mask, lengths)
        torch.nn.functional.cross_entropy(logits, gold).backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    train_peak = torch.cuda.max_memory_allocated() / GIB if cuda else float("nan")
    tokens_per_second = args.steps * args.batch * args.seq / seconds

    optimizer.zero_grad(set_to_none=True)
    optimizer.state.clear()  # free the Adam moments before measuring the scoring peak
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model.eval()
    score_ids = ids[:1].expand(args.score_batch, -1).contiguous()
    score_mask, score_lengths = torch.ones_like(score_ids), torch.full((args.score_batch,), args.seq, device=device)
    with torch.inference_mode(), autocast:
        last_token_logits(model, score_ids, score_mask, score_lengths)
        if cuda:
            torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(args.score_batches):
            logits = last_token_logits(model, score_ids, score_mask, score_lengths)
            torch.logsumexp(logits, dim=-1)
        if cuda:
            torch.cuda.synchronize()
    examples_per_second = args.score_batches * args.score_batch / (time.perf_counter() - began)
    score_peak = torch.cuda.max_memory_allocated() / GIB if cuda else float("nan")

    p = shape.parameters()
    training = TrainingConfig(
        method=mode,
        lora=LoraConfig(r=8, alpha=32),
        batch_size=args.batch,
        max_length=args.seq,
        precision="bf16" if cuda else "fp32",
        gradient_checkpointing=args.checkpointing,
    )
    plan_train = sum(training_memory(shape, training).values()) / GIB
    plan_score = sum(scoring_memory(shape, training, EvaluationConfig(batch_size=args.score_batch)).values()) / GIB
    factor = (6 if mode == "full" else 4) + (2 if args.checkpointing else 0)
    peak = args.peak_tflops or next(
        (v for k, v in PEAK_TFLOPS.items() if cuda and k in torch.cuda.get_device_name()), float("nan")
    )
    return {
        "model": name,
        "mode": mode,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "parameters": p,
        "batch": args.batch,
        "seq": args.seq,
        "checkpointing": args.checkpointing,
        "train_tokens_per_s": tokens_per_second,
        "train_peak_gib": train_peak,
        "plan_train_gib": plan_train,
        "score_examples_per_s": examples_per_second,
        "score_peak_gib": score_peak,
        "plan_score_gib": plan_score,
        "mfu": factor * p * tokens_per_second / (peak * 1e12) if math.isfinite(peak) else float("nan"),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (figures for benches/README.md)."""
    lines = [
        "| model | mode | params | tokens/s (train) | peak GiB (plan) | MFU | examples/s (score) | peak GiB (plan) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['mode']} | | {r['error']} | | | | |")
            continue
        lines.append(
            f"| {r['model']} | {r['mode']} | {r['parameters'] / 1e9:.2f}B | {r['train_tokens_per_s']:,.0f} | "
            f"{r['train_peak_gib']:.1f} ({r['plan_train_gib']:.1f}) | {r['mfu']:.2f} | "
            f"{r['score_examples_per_s']:,.0f} | {r['score_peak_gib']:.1f} ({r['plan_score_gib']:.1f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns the rows (also printed as Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated KNOWN_SHAPES keys")
    parser.add_argument("--modes", default="lora,full", help="lora, full or both")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--score-batch", type=int, default=64)
    parser.add_argument("--score-batches", type=int, default=10)
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's bf16 peak")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device; use --device cpu (with a tiny model) for a smoke run")
    rows = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            try:
                rows.append(bench_one(name, mode, args))
            except torch.OutOfMemoryError:
                rows.append({"model": name, "mode": mode, "error": "out of memory"})
                torch.cuda.empty_cache()
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(markdown(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
