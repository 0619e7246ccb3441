"""``gengen plan``: parameter counts against transformers, the paper studies, strategies and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gengen.config import TrainingConfig, load_config
from gengen.plan import KNOWN_SHAPES, model_shape, plan_study, shape_from_config, training_memory

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
    from gengen.config import ModelSpec
    from gengen.errors import ConfigError

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
    from gengen.config import parse_config
    from gengen.errors import ConfigError

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
