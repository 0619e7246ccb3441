"""benches/gpu.py runs end to end (on the CPU, tiny shapes) so that it is ready when a GPU is at hand."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

BENCH = Path(__file__).resolve().parents[2] / "benches" / "gpu.py"


def test_gpu_benchmark_smoke_run_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("peft")
    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = ["--device", "cpu", "--models", "tiny-olmo2,tiny-opt", "--steps", "2", "--warmup", "1"]
    args += [
        "--batch",
        "2",
        "--seq",
        "16",
        "--score-batch",
        "4",
        "--score-batches",
        "2",
        "--json",
        str(tmp_path / "r.json"),
    ]
    rows = bench.main(args)
    assert [(r["model"], r["mode"]) for r in rows] == [
        ("tiny-olmo2", "lora"),
        ("tiny-olmo2", "full"),
        ("tiny-opt", "lora"),
        ("tiny-opt", "full"),
    ]
    for row in rows:
        assert row["train_tokens_per_s"] > 0 and row["score_examples_per_s"] > 0
        assert math.isnan(row["train_peak_gib"]) and row["plan_train_gib"] > 0  # no CUDA: no measured peak
    shape, config = bench.transformers_config("tiny-olmo2")
    from transformers import AutoModelForCausalLM

    assert sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters()) == shape.parameters()
    assert "| tiny-opt | full |" in capsys.readouterr().out and (tmp_path / "r.json").is_file()
