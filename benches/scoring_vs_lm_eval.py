"""gengen's scorer against lm-evaluation-harness's ``hf`` model on the same NLI task, model and examples.

The task is the reference NLI protocol as gengen ships it to lm-eval (``tasks/gengen_nli/_template_yaml``: the
prompt ``"{premise} Question: {hypothesis} Yes or No?"``, choices ``[" Yes", " No"]``, accuracy from the answers'
log-likelihoods) on local examples (the demo's in-domain set, so nothing is downloaded); the model is a causal
LM built from a config (random weights, nothing downloaded). Both score the same examples with the same model
object in the same process, in turns (gengen, lm-eval, gengen, ...), so the machine's load falls on both alike:

* gengen: :func:`gengen.scoring.score.score_encoded` after tokenising the prompts (tokenisation timed too) — one
  forward pass per example, batched by length, the logits of the last position only, the two answer logits
  read from it;
* lm-eval: ``lm_eval.simple_evaluate`` with ``HFLM(pretrained=model, batch_size=B)`` — two log-likelihood
  requests per example (context + " Yes", context + " No"), the full vocabulary's log-softmax over the
  continuation positions (its own task loading and request building timed too, as a user meets them).

Usage (from the repository root)::

    python benches/scoring_vs_lm_eval.py                          # 1000 examples, OPT 256 x 4, 3 rounds
    python benches/scoring_vs_lm_eval.py --examples 200 --rounds 1 --hidden 64 --layers 2   # a smoke run
    python benches/scoring_vs_lm_eval.py --device cuda            # on a GPU (benches/gpu_check.sh runs this)

It prints one Markdown table (median examples/s of each, the ratio, both accuracies) and, with ``--json``,
writes every round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT = "{premise} Question: {hypothesis} Yes or No?"


def build(args: argparse.Namespace, folder: Path) -> tuple[Any, Any, Any]:
    """The tokenizer (trained on the demo's corpus), the model (from a config) and the examples."""
    import torch

    from gengen.demo.tasks import generate_id, tokenizer_corpus
    from gengen.demo.tiny import build_tiny_model, train_tokenizer

    tokenizer = train_tokenizer(tokenizer_corpus(PROMPT, (" Yes", " No")), folder / "tokenizer")
    model = build_tiny_model(
        args.family,
        # A real model's output layer (Pythia's 50,304 rows by default): rows past the tokenizer's are never
        # read, but every forward pass computes them, as it would for a real vocabulary.
        vocab_size=max(len(tokenizer), args.vocab),
        hidden=args.hidden,
        layers=args.layers,
        heads=args.heads,
        max_positions=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        seed=0,
    )
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = model.to(device=args.device, dtype=dtype).eval()
    frame = generate_id(args.examples, seed=1)
    return tokenizer, model, frame


def task_folder(frame: Any, folder: Path) -> Path:
    """An lm-eval task over ``frame`` with the template gengen ships for its NLI tasks (local JSON data)."""
    from gengen.scoring.lm_eval import TASKS_DIR

    data = folder / "examples.jsonl"
    frame.assign(gold=1 - frame["label"])[["premise", "hypothesis", "gold"]].to_json(data, orient="records", lines=True)
    tasks = folder / "tasks"
    tasks.mkdir(exist_ok=True)
    template = (Path(TASKS_DIR) / "gengen_nli" / "_template_yaml").read_text()
    # The shipped template (prompt, choices, metric) with the data read from the local file.
    (tasks / "bench_nli.yaml").write_text(
        template.replace("tag: gengen_nli\n", "")
        + f"task: bench_nli\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
    )
    return tasks


def run_gengen(model: Any, tokenizer: Any, frame: Any, args: argparse.Namespace) -> tuple[float, float, float]:
    """Wall and CPU seconds and accuracy of gengen's scorer (tokenising included)."""
    import torch

    from gengen.scoring.models import answer_token_ids, encode_prompts
    from gengen.scoring.score import score_encoded

    began, cpu = time.perf_counter(), time.process_time()
    encoded = encode_prompts(tokenizer, frame, PROMPT, 512)
    answers = answer_token_ids(tokenizer, (" Yes", " No"))
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
        result = score_encoded(
            model, encoded, frame["label"].to_numpy(), answers, pad_id=tokenizer.pad_token_id, batch_size=args.batch
        )
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - began, time.process_time() - cpu, result.acc


def run_lm_eval(
    model: Any, tokenizer: Any, manager: Any, args: argparse.Namespace
) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of ``simple_evaluate`` (task building and requests included), wall seconds of its
    log-likelihood computation alone, and accuracy; the task index (``manager``) is built once, untimed."""
    import lm_eval
    import torch
    from lm_eval.models.huggingface import HFLM

    began, cpu = time.perf_counter(), time.process_time()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=args.batch)
    inner = lm.loglikelihood
    spent = [0.0]

    def timed(requests: Any, *rest: Any, **options: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(requests, *rest, **options)
        finally:
            spent[0] += time.perf_counter() - start

    lm.loglikelihood = timed
    results = lm_eval.simple_evaluate(
        model=lm, tasks=["bench_nli"], task_manager=manager, bootstrap_iters=0, log_samples=False
    )
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    return seconds, cpu_seconds, spent[0], float(results["results"]["bench_nli"]["acc,none"])


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the comparison; returns the rounds (the table is printed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--family", default="opt", choices=("opt", "olmo2", "smollm3"))
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=50304, help="rows of the output layer")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import logging

    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    rounds = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        tokenizer, model, frame = build(args, folder)
        from lm_eval.tasks import TaskManager

        manager = TaskManager(include_path=str(task_folder(frame, folder)), include_defaults=False)
        run_gengen(model, tokenizer, frame.head(8), args)  # warm-up (first-call costs of both paths)
        run_lm_eval(model, tokenizer, manager, args)
        for number in range(args.rounds):
            gengen_seconds, gengen_cpu, gengen_acc = run_gengen(model, tokenizer, frame, args)
            lm_eval_seconds, lm_eval_cpu, loglikelihood_seconds, lm_eval_acc = run_lm_eval(
                model, tokenizer, manager, args
            )
            rounds.append(
                {
                    "round": number,
                    "gengen_s": gengen_seconds,
                    "lm_eval_s": lm_eval_seconds,
                    "lm_eval_loglikelihood_s": loglikelihood_seconds,
                    "gengen_cpu_s": gengen_cpu,
                    "lm_eval_cpu_s": lm_eval_cpu,
                    "gengen_acc": gengen_acc,
                    "lm_eval_acc": lm_eval_acc,
                }
            )
            print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    n = args.examples
    rates = {
        key: n / statistics.median(r[key] for r in rounds)
        for key in ("gengen_s", "lm_eval_s", "lm_eval_loglikelihood_s", "gengen_cpu_s", "lm_eval_cpu_s")
    }
    parameters = sum(p.numel() for p in model.parameters())
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu, {args.threads} thread(s)"
    print(
        f"{n} examples, {args.family} {args.hidden} x {args.layers} ({parameters / 1e6:.2f} M parameters, "
        f"{args.dtype}), batch {args.batch}, {device}; median of {args.rounds} rounds\n"
    )
    gengen_rate = rates["gengen_s"]
    print("| scorer | examples/s (wall) | gengen's ratio | examples per CPU-second | gengen's ratio | accuracy |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    gengen_cpu_rate = rates["gengen_cpu_s"]
    acc = rounds[-1]["gengen_acc"]
    print(
        f"| gengen `score_encoded` (tokenising included) | {gengen_rate:,.0f} | 1.00x | {gengen_cpu_rate:,.0f} | "
        f"1.00x | {acc:.3f} |"
    )
    acc = rounds[-1]["lm_eval_acc"]
    wall, cpu_rate = rates["lm_eval_s"], rates["lm_eval_cpu_s"]
    print(
        f"| lm-eval `hf`: `simple_evaluate` | {wall:,.0f} | {gengen_rate / wall:.2f}x | {cpu_rate:,.0f} | "
        f"{gengen_cpu_rate / cpu_rate:.2f}x | {acc:.3f} |"
    )
    wall = rates["lm_eval_loglikelihood_s"]
    print(f"| lm-eval `hf`: its log-likelihoods alone | {wall:,.0f} | {gengen_rate / wall:.2f}x | | | {acc:.3f} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "rounds": rounds}, indent=2))
    return rounds


if __name__ == "__main__":
    main()
