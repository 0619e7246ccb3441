"""benches/gpu_check.sh runs end to end on the CPU with tiny shapes, so that it is ready when a GPU is lent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_every_check_on_the_cpu() -> None:
    pytest.importorskip("peft")
    pytest.importorskip("lm_eval")
    env = {**os.environ, "PYTHON": sys.executable, "GENGEN_GPU_CHECK_TINY": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    result = subprocess.run(
        ["bash", str(ROOT / "benches" / "gpu_check.sh")], capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert table[0] == "| check | result | s | figures |"
    checks = {line.split(" | ")[0][2:]: line.split(" | ")[1] for line in table[1:]}
    assert set(checks.values()) == {"ok"}, result.stdout
    assert {
        "benches/gpu.py tiny-olmo2 lora",
        "benches/gpu.py tiny-opt full",
        "gengen train (tiny study, LoRA, bf16)",
        "GengenCallback in transformers.Trainer (bf16)",
        "scoring: gengen vs lm-eval hf",
    } <= set(checks)
