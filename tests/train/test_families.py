"""The model-family registry against transformers and peft: shapes, LoRA modules, decoder layers, pad tokens."""

from __future__ import annotations

from typing import Any

import pytest

from gengen.study.families import ARCHITECTURES, FAMILIES, family_for, is_decoder_layer, shape_from_config

pytestmark = pytest.mark.train


def _model(kind: str) -> Any:
    """A tiny randomly initialised model of each block layout the registry plans, built by transformers."""
    import transformers

    common: dict[str, Any] = {"vocab_size": 301, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
    configs = {
        "opt": transformers.OPTConfig(
            hidden_size=32, num_hidden_layers=3, num_attention_heads=4, ffn_dim=96, max_position_embeddings=64, **common
        ),
        "llama": transformers.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=80,
            **common,
        ),
        "olmo2": transformers.Olmo2Config(
            hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80, **common
        ),
        "gpt-neox": transformers.GPTNeoXConfig(
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            **common,
        ),
        "gpt2": transformers.GPT2Config(n_embd=32, n_layer=3, n_head=4, n_positions=64, **common),
    }
    return transformers.AutoModelForCausalLM.from_config(configs[kind])  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("kind", ["opt", "llama", "olmo2", "gpt-neox", "gpt2"])
def test_parameters_and_lora_counts_equal_transformers_and_peft(kind: str) -> None:
    peft = pytest.importorskip("peft")
    model = _model(kind)
    config = model.config.to_dict()
    shape = shape_from_config(config)
    assert shape.parameters() == sum(p.numel() for p in model.parameters())
    family = family_for(config["model_type"])
    assert family.known
    targets = list(family.lora_defaults or ())
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=targets, task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    assert shape.lora_parameters(4, targets) == trainable


@pytest.mark.parametrize("kind", ["opt", "llama", "olmo2", "gpt-neox", "gpt2"])
def test_registry_names_the_model_s_own_modules(kind: str) -> None:
    model = _model(kind)
    family = family_for(model.config.model_type)
    layers = [m for m in model.modules() if is_decoder_layer(m, family)]
    assert len(layers) == 3  # one unit per block for FSDP, by the family's class name
    linear_names = {
        name.rsplit(".", 1)[-1] for name, m in model.named_modules() if type(m).__name__ in ("Linear", "Conv1D")
    }
    assert family.lora_modules is not None
    assert set(family.lora_modules) <= linear_names


def test_unknown_family_is_generic_with_a_note() -> None:
    family = family_for("mamba-like")
    assert not family.known and family.lora_modules is None and family.lora_defaults is None
    assert family.note is not None and "'mamba-like'" in family.note and "DecoderLayer" in family.note
    model = _model("llama")
    assert sum(is_decoder_layer(m, family) for m in model.modules()) == 3  # by the class-name suffix


def test_every_family_points_at_an_architecture_and_labels_are_unique() -> None:
    labels = [label for f in FAMILIES for label in f.labels]
    assert len(labels) == len(set(labels))
    assert all(f.architecture in ARCHITECTURES for f in FAMILIES)


def test_a_tokenizer_without_pad_token_pads_with_its_family_s_fallback(tmp_path: Any) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from gengen.scoring.models import load_tokenizer

    core = Tokenizer(models.WordLevel({"<unk>": 0, "<eos>": 1, "a": 2}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", unk_token="<unk>").save_pretrained(tmp_path)  # type: ignore[no-untyped-call]
    tokenizer = load_tokenizer(str(tmp_path), family="pythia")
    assert tokenizer.pad_token == "<eos>" and tokenizer.padding_side == "right"


def test_the_strategy_is_chosen_once_from_the_world_and_the_setting() -> None:
    import numpy as np

    from gengen.study.training_config import TrainingConfig
    from gengen.training.distributed import Sharded, Strategy, World, strategy_for

    fsdp, ddp = TrainingConfig(strategy="fsdp"), TrainingConfig(strategy="ddp")
    assert type(strategy_for(World(0, 1), fsdp)) is Strategy  # alone: nothing to shard over
    assert type(strategy_for(World(0, 2), ddp)) is Strategy
    sharded = strategy_for(World(1, 2), fsdp)
    assert isinstance(sharded, Sharded) and sharded.loss_factor() == 2.0 and not sharded.splits_scoring()
    micro = np.array([7])
    # Rank 1 of 2 has no example of a one-example micro-batch: a whole model skips it, a sharded one takes part
    # with that example weighted 0 (its forward and backward passes are collective).
    assert Strategy(World(1, 2)).share(micro) is None and Strategy(World(1, 2)).splits_scoring()
    share, weight = sharded.share(micro) or (None, None)
    assert share is not None and share.tolist() == [7] and weight == 0.0
    share, weight = Strategy(World(0, 2)).share(np.array([1, 2, 3])) or (None, None)
    assert share is not None and share.tolist() == [1, 3] and weight == 1.0


def test_trainer_state_speeds() -> None:
    from gengen.training.train import TrainerState

    state = TrainerState(resume_step=4, tokens=1500, tokens_at_start=500, scoring_seconds=2.0, scored_examples=300)
    assert state.training_speed(12.0) == 100.0  # 1000 tokens over the 10 s not spent scoring
    assert state.scoring_speed() == 150.0
