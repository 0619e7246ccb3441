"""``gengen plan``: parameter counts against transformers, the paper studies, strategies and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gengen.study.config import load_config, parse_config
from gengen.study.plan import (
    KNOWN_SHAPES,
    PlanRow,
    fit_advice,
    format_plan,
    grid_hours,
    model_shape,
    plan_study,
    shape_from_config,
    training_memory,
)
from gengen.study.training_config import TrainingConfig

pytestmark = pytest.mark.train

STUDIES = Path(__file__).resolve().parents[2] / "studies"
PAPER = sorted(STUDIES.glob("paper-*.toml"))
PAPER_MODELS = {"olmo2-7b", "olmo2-13b", "olmo2-32b", "opt-2.7b", "opt-6.7b", "opt-13b", "opt-30b", "smollm3-3b"}


def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from gengen.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("family", ["opt", "olmo2", "smollm3"])
def test_parameter_count_equals_transformers(family: str) -> None:
    from gengen.demo.tiny import build_tiny_model

    model = build_tiny_model(family, vocab_size=301, hidden=32, layers=3, heads=4, max_positions=64)
    shape = shape_from_config(model.config.to_dict())
    assert shape.parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("family", ["opt", "olmo2", "smollm3"])
def test_lora_parameter_count_equals_peft(family: str) -> None:
    peft = pytest.importorskip("peft")
    from gengen.demo.tiny import build_tiny_model

    model = build_tiny_model(family, vocab_size=301, hidden=32, layers=3, heads=4, max_positions=64)
    shape = shape_from_config(model.config.to_dict())
    targets = ["q_proj", "v_proj"]
    lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=targets, task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert shape.lora_parameters(8, targets) == trainable


def test_known_shapes_match_published_sizes() -> None:
    # The sizes the model cards state (billions of parameters, to the precision they give).
    published = {
        "allenai/OLMo-2-1124-7B": 7.30,
        "allenai/OLMo-2-1124-13B": 13.7,
        "allenai/OLMo-2-0325-32B": 32.2,
        "facebook/opt-2.7b": 2.65,
        "facebook/opt-6.7b": 6.66,
        "facebook/opt-13b": 12.85,
        "facebook/opt-30b": 29.97,
        "HuggingFaceTB/SmolLM3-3B": 3.08,
    }
    for hub_id, billions in published.items():
        assert KNOWN_SHAPES[hub_id].parameters() / 1e9 == pytest.approx(billions, rel=0.01), hub_id


def test_paper_studies_parse_and_dry_run_offline() -> None:
    assert len(PAPER) == 4
    for path in PAPER:
        config = load_config(path)
        assert {m.name for m in config.models} == PAPER_MODELS
        assert len(config.testsets) == 8 and {"mnli", "snli"} <= {t.name for t in config.testsets}
        lora = config.training.lora
        assert (config.training.method, lora.r, lora.alpha, config.training.learning_rate) == ("lora", 8, 32, 1e-5)
        assert config.evaluation.log_points is not None and config.analysis.fit == "gam"
        assert bool(config.data.shots) == ("fewshot" in path.name)
        result = cli("train", str(path), "--dry-run")
        assert result.exit_code == 0, result.output
        assert f"{len(config.runs())} runs" in result.stdout


def test_plan_fits_four_80gib_gpus_and_not_one_24gib() -> None:
    for path in PAPER:
        fits = cli("plan", str(path), "--gpus", "4", "--gpu-memory", "80")
        assert fits.exit_code == 0, fits.output
        assert all(name in fits.stdout for name in PAPER_MODELS)
        assert "does not fit" not in fits.stdout
        small = cli("plan", str(path), "--gpus", "1", "--gpu-memory", "24")
        assert small.exit_code == 2
        (line,) = small.stderr.strip().splitlines()
        assert line.startswith("error: model 'olmo2-13b'") and "needs ~" in line and "24 GiB" in line


def test_strategy_moves_to_fsdp_when_one_gpu_is_too_small() -> None:
    config = load_config(STUDIES / "paper-mnli-full.toml")
    rows = {r.model: r for r in plan_study(config, gpus=2, gpu_memory_gib=40)}
    assert rows["opt-2.7b"].train_strategy == "1 GPU"
    assert rows["opt-30b"].train_strategy == "FSDP over 2" and rows["opt-30b"].train_gib <= 40
    assert rows["olmo2-32b"].score_strategy == "device map over 2"
    text = cli("plan", str(STUDIES / "paper-mnli-full.toml"), "--gpus", "2", "--gpu-memory", "40").stdout
    assert 'set training.strategy = "fsdp" and run gengen train --gpus 2' in text
    assert "set evaluation.device_map = true" in text


def test_memory_model_by_hand() -> None:
    # A Llama-style model, LoRA on a bf16 base, no checkpointing: every term written out.
    shape = KNOWN_SHAPES["HuggingFaceTB/SmolLM3-3B"]
    training = TrainingConfig(method="lora", batch_size=4, max_length=128, precision="bf16")
    parts = training_memory(shape, training, targets=["q_proj", "v_proj"])
    h, i, layers = 2048, 11008, 36
    assert parts["weights"] == 2 * shape.parameters()
    assert parts["gradients+optimizer"] == 16 * layers * 8 * ((h + h) + (h + 4 * 128))
    assert parts["activations"] == 4 * 128 * layers * (22 * h + 4.75 * i) * 2
    assert parts["logits"] == 4 * 128256 * 12
    sharded = training_memory(shape, training, shards=4, targets=["q_proj", "v_proj"])
    assert sharded["weights"] == parts["weights"] / 4 and sharded["activations"] == parts["activations"] / 4


def test_plan_reads_a_local_config_and_names_unknown_models(tmp_path: Path) -> None:
    from gengen.errors import ConfigError
    from gengen.study.config import ModelSpec

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "opt", **_opt_config()}))
    shape = model_shape(ModelSpec("m", str(folder), "opt", "x"))
    assert shape == KNOWN_SHAPES["facebook/opt-2.7b"]
    with pytest.raises(ConfigError, match=r"model 'z': 'org/unknown' is neither a local folder"):
        model_shape(ModelSpec("z", "org/unknown", "opt", "x"))


def _opt_config() -> dict[str, Any]:
    return {
        "hidden_size": 2560,
        "num_hidden_layers": 32,
        "ffn_dim": 10240,
        "num_attention_heads": 32,
        "vocab_size": 50272,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": 2560,
        "tie_word_embeddings": True,
    }


def test_training_strategy_is_checked_when_read(tmp_path: Path) -> None:
    from gengen.errors import ConfigError
    from gengen.study.config import parse_config

    data: dict[str, Any] = {
        "study": {"name": "s", "id_testset": "mnli"},
        "models": [{"name": "m", "path": "org/m", "family": "olmo2", "size": "1b"}],
        "task": {"train": {"source": "mnli"}},
        "testsets": [{"name": "mnli", "source": "mnli"}],
        "training": {"method": "lora", "strategy": "fsdp"},
    }
    assert parse_config(data, base=tmp_path).training.strategy == "fsdp"
    data["training"]["quantization"] = "4bit"
    with pytest.raises(ConfigError, match=r"training\.strategy: 'fsdp' does not shard a quantised base"):
        parse_config(data, origin="study.toml", base=tmp_path)
    data["training"] = {"strategy": "zero3"}
    with pytest.raises(ConfigError, match=r"training\.strategy: expected one of 'ddp', 'fsdp', got 'zero3'"):
        parse_config(data, origin="study.toml", base=tmp_path)


def test_advice_names_only_what_the_study_has_not_tried(tmp_path: Path) -> None:
    """``gengen plan`` on a study that does not fit: advice differs once checkpointing or 4-bit is set."""
    from dataclasses import replace

    import tomllib

    data = tomllib.loads((STUDIES / "paper-mnli-full.toml").read_text())
    data["study"]["output"] = str(tmp_path / "out")

    def advice(**training: Any) -> str:
        changed = {**data, "training": {**data["training"], **training}}
        config = parse_config(changed, origin="s.toml", base=tmp_path)
        return "; ".join(fit_advice(config, "olmo2-13b", gpus=1, gpu_memory_gib=24))

    plain = advice(gradient_checkpointing=False)
    assert "gradient_checkpointing = true" in plain and 'quantization = "4bit"' in plain
    checkpointed = advice(gradient_checkpointing=True)
    assert "gradient_checkpointing" not in checkpointed and 'quantization = "8bit"' in checkpointed
    four_bit = advice(gradient_checkpointing=True, quantization="4bit")
    assert "quantization" not in four_bit and "fsdp" not in four_bit  # FSDP does not shard a quantised base
    assert "batch_size = 1, grad_accum = 64" in four_bit
    # Each estimate is training_memory with that one change.
    config = parse_config({**data, "training": {**data["training"], "gradient_checkpointing": False}}, base=tmp_path)
    model = next(m for m in config.models if m.name == "olmo2-13b")
    training = replace(config.training_for(model), gradient_checkpointing=True)
    gib = sum(training_memory(model_shape(model), training, targets=config.lora_targets(model)).values()) * 1.1 / 2**30
    assert f"gradient_checkpointing = true: ~{gib + 1.0:.1f} GiB per GPU" in plain


def test_totals_leave_out_models_that_do_not_fit_and_grid_wall_clock() -> None:
    config = load_config(STUDIES / "paper-mnli-full.toml")
    rows = plan_study(config, gpus=1, gpu_memory_gib=24)
    fitting = [r for r in rows if r.fits]
    assert 0 < len(fitting) < len(rows)
    text = format_plan(rows, 1, 24, total_gpus=4)
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert f"{sum(r.runs for r in fitting)} runs, {sum(r.gpu_hours for r in fitting):,.1f} GPU-hours" in total
    assert "left out: " in total and all(r.model in total for r in rows if not r.fits)
    # Packing by hand: runs of 3, 3, 2, 2, 2 hours on two GPUs: 3 | 3, then 2 | 2, then 2 after them: 7 hours.
    row = PlanRow("a", "full data", 2, 1, 1, "1 GPU", 1, "1 GPU", 1, 0, 0, 1, 1, 6.0)
    other = PlanRow("b", "full data", 3, 1, 1, "1 GPU", 1, "1 GPU", 1, 0, 0, 1, 1, 6.0)
    assert grid_hours([row, other], 2, 1) == 3 + 2 + 2
    assert grid_hours([row, other], 5, 1) == 3
    wide = PlanRow("c", "full data", 2, 1, 1, "FSDP over 4", 1, "1 GPU", 1, 0, 0, 1, 1, 8.0)  # 4 GPUs x 1 h each
    # The three 2-hour runs take three GPUs; each 4-GPU run then waits for all four: 2 + 1 + 1 hours.
    assert grid_hours([wide, other], 4, 4) == 2 + 1 + 1
