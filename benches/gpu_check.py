"""The standing GPU check: what gengen has only ever run on the CPU, run on one GPU, reported as one Markdown table.

Run first whenever a GPU is at hand (``bash benches/gpu_check.sh``; about 5 minutes on one H100, under 8;
nothing is downloaded: every model is built from a config). Four checks, each in its own process with its own
time limit, so that one failure is reported and the others still run:

1. ``benches/gpu.py`` at the OLMo-2-1B and OPT-2.7b shapes, LoRA on a bf16 base and full fine-tuning (bf16
   autocast): training tokens/s, peak memory against ``gengen plan``, MFU, scoring examples/s;
2. ``gengen train`` of a tiny study (the demo's data, a tiny OLMo2 built from a config) on CUDA with
   ``precision = "bf16"`` and ``method = "lora"``: the run completes and every evaluation is in the store;
3. :class:`gengen.integrations.GengenCallback` inside a transformers ``Trainer`` on CUDA with bf16: every
   scheduled evaluation stored, the time each took;
4. ``benches/scoring_vs_lm_eval.py`` on the GPU: gengen's scorer against lm-eval's ``hf`` model, examples/s.

With ``--tiny`` (or ``GENGEN_GPU_CHECK_TINY=1``) every check runs on the CPU with tiny shapes: the test suite
runs it so that the script is known to work before a GPU is lent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "{premise} Question: {hypothesis} Yes or No?"
SHAPES = "allenai/OLMo-2-0425-1B,facebook/opt-2.7b"


def _run(command: list[str], limit: float) -> tuple[subprocess.CompletedProcess[str], float]:
    paths = [str(ROOT / "python"), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=limit, cwd=ROOT)
    return result, time.perf_counter() - began


def _failed(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (result.stderr + result.stdout).strip().splitlines() if line.strip()]
    return f"exit {result.returncode}: {lines[-1][:160] if lines else 'no output'}"


def tiny_study(folder: Path, device: str) -> Path:
    """The demo's data, a tokenizer and a tiny OLMo2, and a study training it with LoRA in bf16 on ``device``."""
    from gengen.demo.tasks import tokenizer_corpus, write_demo_data
    from gengen.demo.tiny import build_tiny_model, train_tokenizer

    data = write_demo_data(folder / "data", n_train=200, n_test=64, seed=3)
    tokenizer = train_tokenizer(tokenizer_corpus(PROMPT, (" Yes", " No")), folder / "tokenizer")
    model = build_tiny_model(
        "olmo2", vocab_size=len(tokenizer), hidden=32, layers=2, heads=2, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, seed=0,
    )  # fmt: skip
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    study = folder / "study.toml"
    study.write_text(f"""
[study]
name = "gpu-check"
output = "{folder / "out"}"
id_testset = "id"

[[models]]
name = "tiny-olmo2"
path = "{folder / "model"}"
family = "olmo2"
size = "tiny"

[task]
prompt = "{PROMPT}"
train = {{ path = "{data["train"]}" }}

[[testsets]]
name = "id"
path = "{data["id"]}"

[[testsets]]
name = "negation"
path = "{data["negation"]}"

[training]
method = "lora"
lora = {{ r = 4, alpha = 8, dropout = 0.0 }}
precision = "bf16"
device = "{device}"
learning_rate = 5e-3
max_steps = 8
batch_size = 8
max_length = 64
seeds = [1]

[evaluation]
every = 4
batch_size = 16
""")
    return study


def check_shapes(tiny: bool, device: str, scratch: Path) -> list[dict[str, Any]]:
    """benches/gpu.py at the paper's shapes (tiny ones on the CPU)."""
    out = scratch / "gpu.json"
    command = [sys.executable, "benches/gpu.py", "--json", str(out), "--device", device]
    if tiny:
        command += ["--models", "tiny-olmo2,tiny-opt", "--steps", "2", "--warmup", "1", "--batch", "2", "--seq", "16"]
        command += ["--score-batch", "4", "--score-batches", "2"]
    else:
        command += ["--models", SHAPES, "--modes", "lora,full"]
    result, seconds = _run(command, 360)
    if result.returncode != 0 or not out.is_file():
        return [{"check": "benches/gpu.py", "ok": False, "seconds": seconds, "figure": _failed(result)}]
    rows = []
    for row in json.loads(out.read_text()):
        name = f"benches/gpu.py {row['model'].rsplit('/', 1)[-1]} {row['mode']}"
        if "error" in row:
            rows.append({"check": name, "ok": False, "seconds": seconds, "figure": row["error"]})
            continue
        figure = (
            f"train {row['train_tokens_per_s']:,.0f} tokens/s, peak {row['train_peak_gib']:.1f} GiB "
            f"(plan {row['plan_train_gib']:.1f}), MFU {row['mfu']:.2f}; score {row['score_examples_per_s']:,.0f} "
            f"examples/s, peak {row['score_peak_gib']:.1f} GiB (plan {row['plan_score_gib']:.1f})"
        )
        rows.append({"check": name, "ok": True, "seconds": seconds, "figure": figure})
    return rows


def check_train(study: Path) -> list[dict[str, Any]]:
    """``gengen train`` of the tiny study (LoRA, bf16): complete, 3 evaluations x 2 test sets x 2 metrics stored."""
    from gengen.store.database import Store

    command = [sys.executable, "-c", "from gengen.cli import main; main()", "train", str(study)]
    result, seconds = _run(command, 240)
    name = "gengen train (tiny study, LoRA, bf16)"
    if result.returncode != 0:
        return [{"check": name, "ok": False, "seconds": seconds, "figure": _failed(result)}]
    store = Store(study.parent / "out")
    rows = store.load()
    manifest = store.manifest("tiny-olmo2", "seed=1") or {}
    ok = len(rows) == 3 * 2 * 2 and manifest.get("status") == "complete"
    speed = [line for line in result.stdout.splitlines() if "tokens/s" in line]
    return [
        {"check": name, "ok": ok, "seconds": seconds, "figure": f"{len(rows)} scores; {speed[-1] if speed else ''}"}
    ]


def check_callback(study: Path, device: str) -> list[dict[str, Any]]:
    """GengenCallback inside transformers.Trainer (bf16): every scheduled step stored, its overhead."""
    from gengen.store.database import Store

    out = study.parent / "callback"
    command = [sys.executable, "tests/train/integration_run.py", "--study", str(study), "--model"]
    command += [str(study.parent / "model"), "--out", str(out / "trainer"), "--store", str(out / "store")]
    command += ["--device", device, "--bf16"]
    result, seconds = _run(command, 240)
    name = "GengenCallback in transformers.Trainer (bf16)"
    if result.returncode != 0:
        return [{"check": name, "ok": False, "seconds": seconds, "figure": _failed(result)}]
    rows = Store(out / "store").load()
    overhead = [line for line in result.stdout.splitlines() if line.startswith("done ")]
    ok = sorted(set(rows["step"])) == [0, 3, 6] and len(rows) == 3 * 2 * 2
    return [{"check": name, "ok": ok, "seconds": seconds, "figure": overhead[-1][5:] if overhead else ""}]


def check_scoring(tiny: bool, device: str) -> list[dict[str, Any]]:
    """benches/scoring_vs_lm_eval.py: gengen's scorer against lm-eval's hf model."""
    command = [sys.executable, "benches/scoring_vs_lm_eval.py", "--device", device]
    if tiny:
        command += ["--examples", "40", "--rounds", "1", "--hidden", "32", "--layers", "1", "--heads", "2"]
    else:
        command += ["--examples", "4000", "--hidden", "1024", "--layers", "8", "--heads", "8", "--dtype", "bf16"]
        command += ["--batch", "64"]
    result, seconds = _run(command, 300)
    name = "scoring: gengen vs lm-eval hf"
    if result.returncode != 0:
        return [{"check": name, "ok": False, "seconds": seconds, "figure": _failed(result)}]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    figure = "; ".join(" ".join(cell.strip() for cell in line.strip("|").split("|")[:3]) for line in table)
    return [{"check": name, "ok": bool(table), "seconds": seconds, "figure": figure}]


def markdown(rows: list[dict[str, Any]], device: str) -> str:
    """The checks as one Markdown table."""
    lines = [f"GPU check, {time.strftime('%Y-%m-%d')}, {device}", "", "| check | result | s | figures |"]
    lines.append("| --- | --- | ---: | --- |")
    for row in rows:
        lines.append(f"| {row['check']} | {'ok' if row['ok'] else 'FAILED'} | {row['seconds']:.0f} | {row['figure']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the four checks; print the table; returns its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="CPU and tiny shapes (also GENGEN_GPU_CHECK_TINY=1)")
    args = parser.parse_args(argv)
    tiny = args.tiny or os.environ.get("GENGEN_GPU_CHECK_TINY") == "1"
    import torch

    if not tiny and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --tiny (CPU, tiny shapes) to check the script itself")
    device = "cpu" if tiny else "cuda"
    label = "cpu (tiny shapes)" if tiny else torch.cuda.get_device_name()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gengen-gpu-check-") as scratch:
        folder = Path(scratch)
        study = tiny_study(folder / "study", device)
        checks: list[Callable[[], list[dict[str, Any]]]] = [
            lambda: check_shapes(tiny, device, folder),
            lambda: check_train(study),
            lambda: check_callback(study, device),
            lambda: check_scoring(tiny, device),
        ]
        for check in checks:
            try:
                found = check()
            except subprocess.TimeoutExpired as error:
                found = [{"check": " ".join(map(str, error.cmd[1:3])), "ok": False, "seconds": error.timeout,
                          "figure": "timed out"}]  # fmt: skip
            rows.extend(found)
            for row in found:
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(markdown(rows, label))
    return rows


if __name__ == "__main__":
    main()
