"""Memory-lean training and efficient scoring: LoRA per family, one dtype decision, adapter swapping, batching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from gengen.errors import ConfigError
from gengen.executors.direct import train_study
from gengen.store.database import Store
from gengen.study.config import load_config, parse_config

pytestmark = pytest.mark.train
peft = pytest.importorskip("peft")

KEY = ["step", "testset", "metric"]


def write_study(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


@pytest.mark.parametrize("family", ["olmo2", "smollm3"])
def test_lora_without_explicit_targets(family: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    extra = 'method = "lora"\nlora = { r = 4, alpha = 8 }'
    text = study_toml(assets, tmp_path / "out", families=(family,), max_steps=4, every=4, extra=extra)
    config = load_config(write_study(tmp_path, text))
    train_study(config, log=lambda _: None, progress=False)
    adapter = config.run_dir(config.runs()[0]) / "checkpoint-4" / "adapter_config.json"
    assert set(json.loads(adapter.read_text())["target_modules"]) == {"q_proj", "v_proj"}
    scores = Store(tmp_path / "out").load(metric="logprob").sort_values(KEY)
    start = scores[scores["step"] == 0]["value"].to_numpy()
    end = scores[scores["step"] == 4]["value"].to_numpy()
    assert np.abs(end - start).max() > 1e-4  # the adapters were trained


def lora_config(family: str, targets: list[str] | None = None, method: str = "lora") -> dict[str, Any]:
    lora = {"r": 8} if targets is None else {"r": 8, "target_modules": targets}
    return {
        "study": {"name": "s", "id_testset": "mnli"},
        "models": [{"name": "m", "path": "org/m", "family": family, "size": "1b"}],
        "task": {"train": {"source": "mnli"}},
        "testsets": [{"name": "mnli", "source": "mnli"}],
        "training": {"method": method, "lora": lora},
    }


def test_lora_targets_are_checked_when_the_config_is_read(tmp_path: Path) -> None:
    for family in ("opt", "OLMo2", "smollm3", "llama", "qwen2", "mistral"):
        parse_config(lora_config(family), base=tmp_path)
    parse_config(lora_config("olmo2", ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"]), base=tmp_path)
    with pytest.raises(ConfigError, match=r"'o_proj' is not a linear layer of opt model 'm' \(its layers: q_proj"):
        parse_config(lora_config("opt", ["q_proj", "o_proj"]), origin="study.toml", base=tmp_path)
    with pytest.raises(ConfigError, match=r"'out_proj' is not a linear layer of olmo2"):
        parse_config(lora_config("olmo2", ["out_proj"]), base=tmp_path)
    with pytest.raises(ConfigError, match=r"family 'gpt-j' has no default LoRA targets"):
        parse_config(lora_config("gpt-j"), base=tmp_path)
    parse_config(lora_config("gpt-j", ["q_proj"]), base=tmp_path)  # unknown family, explicit targets: peft checks
    parse_config(lora_config("gpt-j", method="full"), base=tmp_path)  # full fine-tuning needs no targets


def test_one_function_decides_the_dtypes_of_training_and_scoring() -> None:
    from gengen.scoring.models import Precision, precision_for

    cpu = torch.device("cpu")
    assert precision_for("auto", "lora", cpu) == Precision(torch.float32, torch.float32)
    assert precision_for("bf16", "lora", cpu) == Precision(torch.bfloat16, torch.bfloat16)
    # Full fine-tuning keeps fp32 master weights and computes in bf16 under autocast.
    assert precision_for("bf16", "full", cpu) == Precision(torch.float32, torch.bfloat16)
    with pytest.raises(ConfigError, match="'fp16' needs a CUDA device"):
        precision_for("fp16", "lora", cpu)


def test_bf16_lora_scores_during_training_equal_gengen_score(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU in bf16: the base is loaded in bf16 for training, and scoring the saved adapters later gives
    exactly the numbers the evaluations during training stored."""
    import gengen.scoring.models
    import gengen.scoring.score
    import gengen.training.train
    from gengen.scoring.score import find_checkpoints, score_checkpoints

    decisions: list[tuple[str, Any]] = []
    loads: list[torch.dtype] = []
    for module in (gengen.training.train, gengen.scoring.score):
        spy = (
            lambda name: (
                lambda *a: decisions.append((name, gengen.scoring.models.precision_for(*a))) or decisions[-1][1]
            )
        )(module.__name__)
        monkeypatch.setattr(module, "precision_for", spy)
    original_load = gengen.scoring.models.load_model

    def load_spy(*args: Any, **kwargs: Any) -> Any:
        loads.append(kwargs["dtype"])
        return original_load(*args, **kwargs)

    monkeypatch.setattr(gengen.scoring.models, "load_model", load_spy)  # what build_trainable_model calls
    monkeypatch.setattr(gengen.scoring.score, "load_model", load_spy)

    extra = 'method = "lora"\nkeep_checkpoints = "all"\nlora = { r = 4, alpha = 8, dropout = 0.0 }'
    text = study_toml(assets, tmp_path / "out", families=("olmo2",), max_steps=4, every=2, extra=extra)
    config = load_config(write_study(tmp_path, text.replace('precision = "fp32"', 'precision = "bf16"')))
    train_study(config, log=lambda _: None, progress=False)
    rows = score_checkpoints(
        config, find_checkpoints([config.run_dir(config.runs()[0])]), model_name="later", log=lambda _: None
    )
    assert [name for name, _ in decisions] == ["gengen.training.train", "gengen.scoring.score"]
    assert decisions[0][1] == decisions[1][1] and decisions[0][1].weights == torch.bfloat16
    assert set(loads) == {torch.bfloat16}
    trained = Store(tmp_path / "out").load()
    trained = trained[(trained["model"] == "olmo2-tiny") & (trained["step"] > 0)].sort_values(KEY)
    later = rows.sort_values(KEY)
    assert len(later) == len(trained) == 2 * 3 * 2
    np.testing.assert_array_equal(later["value"].to_numpy(), trained["value"].to_numpy())


def test_adapter_swap_scores_equal_reload_scores(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    from gengen.scoring.score import find_checkpoints, score_checkpoints

    extra = 'method = "lora"\nkeep_checkpoints = "all"\nlora = { r = 4, alpha = 8 }'
    text = study_toml(assets, tmp_path / "out", families=("opt",), max_steps=6, every=2, extra=extra)
    config = load_config(write_study(tmp_path, text))
    train_study(config, log=lambda _: None, progress=False)
    series = find_checkpoints([config.run_dir(config.runs()[0])])
    assert [c.step for c in series] == [2, 4, 6]
    lines: list[str] = []
    swapped = score_checkpoints(config, series, model_name="swap", log=lines.append)
    reloaded = score_checkpoints(config, series, model_name="reload", log=lines.append, swap_adapters=False)
    assert "swap main: 3 checkpoints scored, 0 already in the store, 18 scores written, 1 model loads" in lines
    assert "reload main: 3 checkpoints scored, 0 already in the store, 18 scores written, 3 model loads" in lines
    a, b = swapped.sort_values(KEY), reloaded.sort_values(KEY)
    np.testing.assert_array_equal(a["value"].to_numpy(), b["value"].to_numpy())
    assert a.groupby("step")["value"].sum().nunique() == 3  # three different adapters were scored


def test_token_budget_batches() -> None:
    from gengen.scoring.score import length_batches

    lengths = [5, 9, 3, 9, 4, 7]
    # Longest first: 9, 9, 7, 5, 4, 3 (indices 1, 3, 5, 0, 4, 2).
    assert length_batches(lengths, batch_size=4) == [[1, 3, 5, 0], [4, 2]]
    # At most 20 padded tokens: [9, 9] = 18; [7, 5] = 14 (three rows would be 21); [4, 3] = 8 ...
    assert length_batches(lengths, batch_size=4, max_tokens=20) == [[1, 3], [5, 0], [4, 2]]
    assert length_batches([30, 2], batch_size=4, max_tokens=20) == [[0], [1]]  # too long alone still goes


def test_token_budget_does_not_change_scores(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    from gengen.scoring.models import load_model, load_tokenizer
    from gengen.scoring.score import encode_testsets, score_rows
    from gengen.study.tables import EvaluationConfig

    config = load_config(write_study(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",))))
    tokenizer = load_tokenizer(str(assets["models"]["opt"]))
    model = load_model(str(assets["models"]["opt"]))
    testsets = encode_testsets(config, tokenizer)
    assert isinstance(config.evaluation, EvaluationConfig)
    common = {"pad_id": tokenizer.pad_token_id, "batch_size": 16, "metrics": ["acc", "logprob"], "base": {"step": 0}}
    plain = pd.DataFrame(score_rows(model, testsets, (5, 6), **common))
    budget = pd.DataFrame(score_rows(model, testsets, (5, 6), max_tokens=60, **common))
    np.testing.assert_allclose(plain["value"], budget["value"], rtol=1e-6, atol=1e-6)


def test_truncation_keeps_the_bos_token(assets: dict[str, Any], tmp_path: Path) -> None:
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    from gengen.scoring.models import encode_prompts, special_prefix_length

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(assets["models"]["opt"]))
    bos = tokenizer.bos_token_id
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    assert special_prefix_length(tokenizer) == 1
    frame = pd.DataFrame({"premise": ["the cat sat on the mat " * 10], "hypothesis": ["a cat sat"], "label": [1]})
    full = tokenizer(PROMPT.format(premise=frame["premise"][0], hypothesis="a cat sat"))["input_ids"]
    (short,) = encode_prompts(tokenizer, frame, PROMPT, max_length=12)
    assert len(full) > 12 and len(short) == 12
    assert short[0] == bos and short[1:] == full[-11:]  # BOS, then the end of the prompt


PROMPT = "{premise} Question: {hypothesis} Yes or No?"


def test_checkpointing_is_switched_on(assets: dict[str, Any]) -> None:
    from gengen.scoring.models import enable_checkpointing as _enable_checkpointing
    from gengen.scoring.models import load_model

    model = load_model(str(assets["models"]["olmo2"]))
    assert model.config.use_cache is False
    _enable_checkpointing(model)
    assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules())


def registry_copy(folder: Path) -> Path:
    """A local copy of an MNLI split in the hub's schema (labels 0 entailment, 1 neutral, 2 contradiction)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": i % 3, "idx": i} for i in range(9)]
    (folder / "validation_matched.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_neutral_class_drop_or_no_and_labels_with_a_source(tmp_path: Path) -> None:
    from gengen.data import load_examples

    copy = registry_copy(tmp_path / "mnli")

    def spec(**options: Any) -> Any:
        data = lora_config("opt", method="full")
        data["testsets"] = [{"name": "mnli", "source": "mnli", "path": str(copy), **options}]
        return parse_config(data, origin="study.toml", base=tmp_path).testsets[0]

    assert load_examples(spec())["label"].tolist() == [1, 0, 1, 0, 1, 0]  # neutral (1) dropped
    assert load_examples(spec(neutral="No"))["label"].tolist() == [1, 0, 0] * 3
    # A study's labels replace the registry's mapping (here: neutral counts as entailed)...
    labels = {"0": "Yes", "1": "Yes", "2": "No"}
    assert load_examples(spec(labels=labels))["label"].tolist() == [1, 1, 0] * 3
    # ... and must then map every label the data holds.
    with pytest.raises(Exception, match=r"label '2' has no mapping"):
        load_examples(spec(labels={"0": "Yes", "1": "No"}))
    with pytest.raises(ConfigError, match=r"testsets\[1\]\.neutral: hans is a two-way data set"):
        data = lora_config("opt", method="full")
        data["testsets"] = [{"name": "mnli", "source": "mnli"}, {"name": "h", "source": "hans", "neutral": "No"}]
        parse_config(data, origin="study.toml", base=tmp_path)
    with pytest.raises(ConfigError, match=r"columns: not used with source = 'mnli'"):
        spec(columns={"premise": "x"})
    with pytest.raises(ConfigError, match=r"give either 'labels' or 'neutral'"):
        spec(labels=labels, neutral="No")


def test_device_map_scoring_equals_plain_scoring(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    """``evaluation.device_map`` loads through accelerate's device map (all on the CPU here): same numbers."""
    from gengen.scoring.score import find_checkpoints, score_checkpoints

    extra = 'method = "lora"\nkeep_checkpoints = "all"\nlora = { r = 4, alpha = 8 }'
    text = study_toml(assets, tmp_path / "out", families=("smollm3",), max_steps=4, every=2, extra=extra)
    config = load_config(write_study(tmp_path, text))
    train_study(config, log=lambda _: None, progress=False)
    series = find_checkpoints([config.run_dir(config.runs()[0])])
    plain = score_checkpoints(config, series, model_name="plain", log=lambda _: None)
    mapped_config = load_config(write_study(tmp_path, text + "device_map = true\n"))
    assert mapped_config.evaluation.device_map
    mapped = score_checkpoints(mapped_config, series, model_name="mapped", log=lambda _: None)
    np.testing.assert_array_equal(
        mapped.sort_values(KEY)["value"].to_numpy(), plain.sort_values(KEY)["value"].to_numpy()
    )


@pytest.mark.parametrize("layout", ["data/validation-00000-of-00001.parquet", "plain_text/validation/0000.parquet"])
def test_registered_sets_read_local_copies_of_the_hubs_parquet_files(layout: str, tmp_path: Path) -> None:
    """HANS in the hub's parquet layouts (push_to_hub's data/ and the refs/convert/parquet branch), read offline."""
    from gengen.data import load_examples
    from gengen.data.registry import REGISTRY

    rows = pd.DataFrame(
        {"premise": ["a b", "c d", "e f"], "hypothesis": ["a", "c", "f"], "label": [0, 1, 0], "heuristic": ["x"] * 3}
    )
    target = tmp_path / "hans" / layout
    target.parent.mkdir(parents=True)
    rows.to_parquet(target)
    data = lora_config("opt", method="full")
    data["testsets"] = [
        {"name": "mnli", "source": "mnli"},
        {"name": "hans", "source": "hans", "path": str(tmp_path / "hans")},
    ]
    spec = parse_config(data, base=tmp_path).testsets[1]
    assert load_examples(spec)["label"].tolist() == [1, 0, 1]  # 0 entailment -> Yes (1)
    # The hub download goes to the parquet conversion, not the loading script.
    assert (REGISTRY["hans"].revision, REGISTRY["hans"].data_dir) == ("refs/convert/parquet", "plain_text")


def test_quantised_base_needs_lora_cuda_and_bitsandbytes(assets: dict[str, Any], tmp_path: Path) -> None:
    from gengen.scoring.models import load_model

    with pytest.raises(ConfigError, match=r"training\.quantization: '4bit' needs a CUDA device"):
        load_model(str(assets["models"]["opt"]), quantization="4bit", device=torch.device("cpu"))
    data = lora_config("opt", method="full")
    data["training"]["quantization"] = "8bit"
    with pytest.raises(ConfigError, match=r"training\.quantization: a quantised base can only be trained with"):
        parse_config(data, origin="study.toml", base=tmp_path)
