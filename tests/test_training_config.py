"""The ``[training]`` settings are declared once: the parser's keys, defaults and choices come from the fields.

Also the schedule's limits (``gengen.study.schedule``), the plan's option ranges and checkpoint folders that are
symbolic links. None of this imports torch.
"""

from __future__ import annotations

import math
import os
from dataclasses import fields
from pathlib import Path
from typing import Any, get_args

import pytest

from gengen.errors import ConfigError, InputError
from gengen.study.config import parse_config
from gengen.study.schedule import epoch_steps, evaluation_steps, planned_steps, update_batches
from gengen.study.tables import EvaluationConfig
from gengen.study.training_config import (
    MAX_EVALUATIONS,
    MAX_STEPS,
    PRECISIONS,
    QUANTIZATIONS,
    LoraConfig,
    TrainingConfig,
    training_settings,
)

BASE: dict[str, Any] = {
    "study": {"name": "s", "id_testset": "t"},
    "models": [{"name": "m", "path": "org/m", "family": "opt", "size": "1"}],
    "task": {"train": {"source": "mnli"}},
    "testsets": [{"name": "t", "source": "mnli"}],
}


def _training(table: dict[str, Any]) -> TrainingConfig:
    return parse_config({**BASE, "training": table}, base=Path.cwd()).training


def test_an_empty_table_gives_the_dataclass_defaults() -> None:
    assert _training({}) == TrainingConfig()


def test_every_declared_key_is_read_and_listed_once() -> None:
    keys = [key for key, *_ in training_settings()]
    assert len(keys) == len(set(keys))
    declared = {f.name for f in fields(TrainingConfig) if "setting" in f.metadata}
    assert {k for k in keys if "." not in k} == declared
    assert {k.split(".", 1)[1] for k in keys if k.startswith("lora.")} == {f.name for f in fields(LoraConfig)}
    # Each default listed is the dataclass's own.
    defaults = {key: default for key, default, *_ in training_settings()}
    assert defaults["learning_rate"] == TrainingConfig().learning_rate and defaults["lora.r"] == LoraConfig().r


def test_choices_are_the_literal_types_values() -> None:
    choices = {key: values for key, _, values, _ in training_settings()}
    assert choices["precision"] == PRECISIONS == ("auto", "fp32", "bf16", "fp16")
    assert choices["quantization"] == QUANTIZATIONS == ("none", "8bit", "4bit")
    assert all(help_text for *_, help_text in training_settings())
    for key, values in choices.items():
        for value in values:  # every offered choice parses back to itself
            if key in ("quantization",) and value != "none":
                continue  # a quantised base needs LoRA
            if key == "strategy" and value == "fsdp":
                continue
            assert getattr(_training({key: value}), key) == value


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"strategy": "fsd"}, "training.strategy: expected one of 'ddp', 'fsdp', got 'fsd' (did you mean 'fsdp'?)"),
        ({"precision": 16}, "training.precision: expected a non-empty string, got 16"),
        ({"batch_size": 0}, "training.batch_size: expected a positive integer, got 0"),
        ({"warmup_ratio": 1.0}, "training.warmup_ratio: expected a number in [0, 1), got 1.0"),
        ({"lora": {"dropout": 1.5}}, "training.lora.dropout: expected a number in [0, 1), got 1.5"),
        ({"max_steps": 10**12}, "training.max_steps: 1,000,000,000,000 is above gengen's limit of 1,000,000,000"),
        ({"epochs": 1e300}, "training.epochs: 1e+300 is above gengen's limit of 1,000,000"),
        ({"seeds": list(range(10_001))}, "training.seeds: 10,001 entries, above gengen's limit of 10,000"),
        ({"max_steps": 5, "epochs": 1}, "training.max_steps: give either 'epochs' or 'max_steps', not both"),
        ({"gradient_checkpointing": "yes"}, "training.gradient_checkpointing: expected true or false"),
        ({"unknown": 1}, "training.unknown: unknown key"),
    ],
)
def test_refused_settings_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _training(table)
    assert message in str(error.value)


def test_max_steps_clears_the_default_epochs_and_zero_norm_means_no_clipping() -> None:
    config = _training({"max_steps": 7, "max_grad_norm": 0})
    assert (config.max_steps, config.epochs, config.max_grad_norm) == (7, None, None)


def test_pythia_gets_its_registry_lora_default() -> None:
    data = {**BASE, "models": [{"name": "p", "path": "org/p", "family": "pythia", "size": "70m"}]}
    config = parse_config({**data, "training": {"method": "lora"}}, base=Path.cwd())
    assert config.lora_targets(config.models[0]) == ("query_key_value",)
    with pytest.raises(ConfigError, match="'q_proj' is not a linear layer of pythia model 'p'"):
        parse_config({**data, "training": {"method": "lora", "lora": {"target_modules": ["q_proj"]}}})


def test_steps_per_epoch_is_one_formula_for_the_plan_and_the_batches() -> None:
    for n_train, batch, accum in [(16, 32, 1), (100, 8, 4), (1000, 7, 3), (5, 1, 2)]:
        per_epoch = epoch_steps(n_train, batch, accum)
        assert per_epoch == max(1, math.ceil(math.ceil(n_train / batch) / accum))
        # One epoch of update_batches covers every example exactly once.
        seen = [
            i
            for step in range(1, per_epoch + 1)
            for micro in update_batches(step, n_train, batch, 0, accum)
            for i in micro
        ]
        assert sorted(seen) == list(range(n_train))


def test_the_schedule_refuses_before_listing_a_billion_evaluations() -> None:
    with pytest.raises(ConfigError, match=r"evaluation\.every: every 1 steps .* set every to at least 10,001"):
        evaluation_steps(EvaluationConfig(every=1), MAX_STEPS)
    with pytest.raises(ConfigError, match=r"training\.epochs: 1e\+06 epochs of 100,000 steps"):
        planned_steps(TrainingConfig(epochs=1e6, batch_size=1), 100_000)
    steps = evaluation_steps(EvaluationConfig(every=10_001), MAX_STEPS)  # what the refusal asks for
    assert len(steps) <= MAX_EVALUATIONS and steps[0] == 0 and steps[-1] == MAX_STEPS


def test_plan_options_are_structured_errors() -> None:
    from gengen.study.plan import plan_study

    config = parse_config(BASE, base=Path.cwd())
    with pytest.raises(ConfigError) as error:
        plan_study(config, gpus=1, gpu_memory_gib=80, overhead_gib=-1)
    assert error.value.option == "overhead_gib" and str(error.value).startswith("overhead_gib must be a number >= 0")
    assert error.value.render(lambda name: "--overhead").startswith("--overhead must be")


def test_a_linked_checkpoint_folder_is_refused_and_never_followed(tmp_path: Path) -> None:
    from gengen.training.checkpoints import list_checkpoints

    outside = tmp_path / "elsewhere" / "checkpoint-3"
    outside.mkdir(parents=True)
    (outside / "trainer_state.pt").write_bytes(b"x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint-1").mkdir()
    (run / "checkpoint-1" / "trainer_state.pt").write_bytes(b"x")
    assert [step for step, _ in list_checkpoints(run)] == [1]
    os.symlink(outside, run / ".checkpoint-3.tmp")
    with pytest.raises(InputError, match=r"\.checkpoint-3\.tmp: a symbolic link"):
        list_checkpoints(run)
    assert sorted(p.name for p in outside.iterdir()) == ["trainer_state.pt"]


def test_literal_choices_match_the_exported_tuples() -> None:
    from gengen.study import training_config

    assert get_args(training_config.StrategyName) == training_config.STRATEGIES


def test_plan_notes_a_family_it_does_not_know(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from gengen.cli import app

    model = tmp_path / "m"
    model.mkdir()
    shape = {"model_type": "mamba-like", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    (model / "config.json").write_text(json.dumps({**shape, "intermediate_size": 128, "vocab_size": 100}))
    (tmp_path / "study.toml").write_text(
        '[study]\nname = "s"\nid_testset = "t"\n[[models]]\nname = "m"\npath = "./m"\nfamily = "mamba-like"\n'
        'size = "1"\n[task]\ntrain = { source = "mnli" }\n[[testsets]]\nname = "t"\nsource = "mnli"\n'
    )
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "study.toml")])
    assert result.exit_code == 0, result.output
    assert "note: model 'm': family 'mamba-like' is not one gengen knows" in result.output
    # Planned with the Llama formulas: embeddings, two blocks (attention, gated MLP, two norms), final norm, head.
    per_block = 4 * 64 * 64 + 3 * 64 * 128 + 2 * 64
    expected = 100 * 64 + 2 * per_block + 64 + 100 * 64
    from gengen.study.plan import model_shape

    config = parse_config(
        {**BASE, "models": [{"name": "m", "path": str(model), "family": "mamba-like", "size": "1"}]}, base=tmp_path
    )
    assert model_shape(config.models[0]).parameters() == expected


# ------------------------------------------------------------------ issue 36, item 8: per-family settings


def _two_families(labels: tuple[str, str], training: dict[str, Any]) -> Any:
    models = [
        {"name": "o", "path": "org/o", "family": labels[0], "size": "1b"},
        {"name": "p", "path": "org/p", "family": labels[1], "size": "70m"},
    ]
    return parse_config({**BASE, "models": models, "training": training}, base=Path.cwd())


def test_a_familys_false_switches_off_the_studys_gradient_checkpointing() -> None:
    """Planted bug: ``settings.gradient_checkpointing or study's`` cannot say false over a study's true."""
    config = _two_families(
        ("olmo2", "pythia"),
        {"gradient_checkpointing": True, "families": {"olmo2": {"gradient_checkpointing": False}}},
    )
    olmo, pythia = config.models
    assert config.training_for(olmo).gradient_checkpointing is False
    assert config.training_for(pythia).gradient_checkpointing is True
    off = _two_families(("olmo2", "pythia"), {"families": {"pythia": {"gradient_checkpointing": True}}})
    assert off.training_for(off.models[0]).gradient_checkpointing is False
    assert off.training_for(off.models[1]).gradient_checkpointing is True


@pytest.mark.parametrize("labels", [("OLMo2", "Pythia"), ("olmo2", "PYTHIA")], ids=["as-written", "upper"])
def test_family_settings_follow_the_lower_cased_family(labels: tuple[str, str]) -> None:
    """Planted bug: settings looked up by the label as written (``"OLMo2"``) miss the family's table and
    registry entry; the study check lower-cases, so the run must too (LoRA targets, FSDP's layer class)."""
    from gengen.study.families import family_for

    training = {
        "method": "lora",
        "gradient_checkpointing": True,
        "families": {"olmo2": {"lora": {"target_modules": ["q_proj", "o_proj"]}, "gradient_checkpointing": False}},
    }
    config = _two_families(labels, training)
    olmo, pythia = config.models
    assert config.lora_targets(olmo) == ("q_proj", "o_proj")
    assert config.lora_targets(pythia) == ("query_key_value",)  # the registry's default for pythia
    assert config.training_for(olmo).gradient_checkpointing is False
    assert config.training_for(pythia).gradient_checkpointing is True
    # The class FSDP shards as one unit comes from the registry entry of the lower-cased family.
    assert family_for(olmo.family).decoder_layer == "Olmo2DecoderLayer"
    assert family_for(pythia.family).decoder_layer == "GPTNeoXLayer"
    # And the family table may be written in any case: it is stored under the lower-cased family.
    upper = _two_families(labels, {**training, "families": {"OLMo2": training["families"]["olmo2"]}})
    assert upper.lora_targets(upper.models[0]) == ("q_proj", "o_proj")
