"""The study options that used to be hard-coded, and per-family training settings.

Warmup against transformers' own schedule, truncation against the tokenizer's own ``truncation=True``, the
test-set subset seed, the unbalanced few-shot draw, and each family's LoRA targets in an OPT + OLMo2 study.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.errors import ConfigError
from gengen.study.config import load_config
from gengen.study.tables import DataSpec
from gengen.study.training_config import TrainingConfig

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.train


def _write(tmp_path: Path, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("total", "ratio"), [(25, 0.1), (40, 0.25), (7, 0.3), (100, 0.0)])
def test_transformers_warmup_rule_is_get_linear_schedule_with_warmup(total: int, ratio: float) -> None:
    from transformers import get_linear_schedule_with_warmup

    from gengen.study.schedule import learning_rate_factor as _schedule

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    warmup = int(np.ceil(ratio * total))  # TrainingArguments.get_warmup_steps
    reference = get_linear_schedule_with_warmup(optimizer, warmup, total)
    expected = []
    for _ in range(total):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    factor = _schedule(total, TrainingConfig(warmup_ratio=ratio, warmup_rule="transformers"))
    np.testing.assert_allclose([factor(taken) for taken in range(total)], expected, rtol=0, atol=1e-12)
    # gengen's own rule: W = round(ratio x total), step s of the warmup at s / W, the same decay after it.
    own = _schedule(total, TrainingConfig(warmup_ratio=ratio))
    w = round(ratio * total)
    want = [(s / w) if s <= w and w else (total - s + 1) / (total - w) for s in range(1, total + 1)]
    np.testing.assert_allclose([own(s - 1) for s in range(1, total + 1)], want, rtol=0, atol=1e-12)


def test_truncation_sides(assets: dict[str, Any]) -> None:
    from gengen.scoring.models import encode_prompts

    tokenizer = assets["tokenizer"]
    frame = pd.DataFrame({"premise": [" ".join(["the cat sees the dog"] * 10), "a dog"], "hypothesis": "the cat"})
    prompt = "{premise} Question: {hypothesis} Yes or No?"
    full = [tokenizer(prompt.format(premise=p, hypothesis="the cat"))["input_ids"] for p in frame["premise"]]
    cap = len(full[1])  # the short prompt just fits
    assert len(full[0]) > cap + 10
    right = encode_prompts(tokenizer, frame, prompt, cap, truncation="right")
    # The tokenizer's own truncation=True keeps the first max_length tokens.
    expected = [
        tokenizer(prompt.format(premise=p, hypothesis="the cat"), truncation=True, max_length=cap)["input_ids"]
        for p in frame["premise"]
    ]
    assert right == expected
    left = encode_prompts(tokenizer, frame, prompt, cap)
    assert len(left[0]) == cap and left[0][-5:] == full[0][-5:]  # the question is kept
    assert left[1] == right[1] == full[1]  # a short prompt is left whole


def test_subsample_seed_draws_another_subset(tmp_path: Path) -> None:
    from gengen.data import load_examples

    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(json.dumps({"premise": str(i), "hypothesis": "h", "label": i % 2}) + "\n" for i in range(300))
    )
    spec = DataSpec(name="d", path=str(path))
    zero = load_examples(spec, cap=50)
    assert zero.equals(load_examples(spec, cap=50, seed=0))
    other = load_examples(spec, cap=50, seed=1)
    assert len(other) == 50 and set(other["premise"]) != set(zero["premise"])


def test_unbalanced_few_shot_draw() -> None:
    from gengen.data import few_shot_sample

    frame = pd.DataFrame({"premise": [f"p{i}" for i in range(400)], "hypothesis": "h", "label": (np.arange(400) < 80)})
    frame["label"] = frame["label"].astype(int)  # 20% Yes
    yes_shares = [few_shot_sample(frame, 20, seed, balanced=False)["label"].mean() for seed in range(40)]
    assert min(yes_shares) != max(yes_shares)  # the class counts vary with the seed
    assert 0.1 < np.mean(yes_shares) < 0.3  # and follow the training set's 20% on average
    assert all(few_shot_sample(frame, 20, seed)["label"].sum() == 10 for seed in range(5))  # balanced: 10 + 10
    with pytest.raises(Exception, match="only 400 training examples"):
        few_shot_sample(frame, 401, 0, balanced=False)


FAMILIES = """
[training.families.opt]
lora = { target_modules = ["q_proj", "k_proj", "v_proj", "out_proj"], dropout = 0.1 }

[training.families.olmo2]
lora = { target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"] }
gradient_checkpointing = true
"""


def test_each_family_trains_its_own_lora_targets(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from gengen.store.database import Store
    from gengen.training.train import Trainer

    text = study_toml(assets, tmp_path / "out", families=("opt", "olmo2"), extra='method = "lora"\n') + FAMILIES
    config = load_config(_write(tmp_path, text))
    by_family = {m.family: m for m in config.models}
    assert config.lora_targets(by_family["opt"]) == ("q_proj", "k_proj", "v_proj", "out_proj")
    assert config.lora_targets(by_family["olmo2"]) == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert config.training_for(by_family["opt"]).lora.dropout == 0.1
    assert config.training_for(by_family["olmo2"]).lora.dropout == 0.05  # the study's
    assert [config.training_for(by_family[f]).gradient_checkpointing for f in ("opt", "olmo2")] == [False, True]
    for run in config.runs():
        trainer = Trainer(config, run, store=Store(config.output), log=lambda _: None, progress=False)
        trainer.resume()
        adapted = {n.rsplit(".", 1)[-1] for n, m in trainer.model.named_modules() if getattr(m, "lora_A", None)}
        assert adapted == set(config.lora_targets(run.model)), run.model.family


@pytest.mark.parametrize(
    ("families", "message"),
    [
        (
            '[training.families.opt]\nlora = { target_modules = ["o_proj"] }\n',
            r"training\.families\.opt\.lora\.target_modules: 'o_proj' is not a linear layer of opt",
        ),
        (
            "[training.families.llama]\ngradient_checkpointing = true\n",
            r"training\.families\.llama: no model of the study has family 'llama' \(families: olmo2, opt\)",
        ),
        (
            "[training.families.opt]\nlora = { rank = 4 }\n",
            r"training\.families\.opt\.lora\.rank: unknown key \(known: alpha, dropout, r, target_modules\)",
        ),
        (
            '[training.families.opt]\nquantization = "4bit"\n',
            r"families\.opt\.quantization: a quantised base can only be trained with method = 'lora'",
        ),
    ],
)
def test_family_settings_are_checked_when_the_study_is_read(
    families: str, message: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    method = "" if "quantization" in families else 'method = "lora"\n'
    text = study_toml(assets, tmp_path / "out", families=("opt", "olmo2"), extra=method) + families
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, text))


def test_study_draws_unbalanced_samples_when_asked(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    from gengen.store.database import Store
    from gengen.study.config import RunSpec
    from gengen.training.train import Trainer

    def yes_counts(balanced: bool) -> list[int]:
        folder = tmp_path / str(balanced)
        regime = f"\n[data]\nshots = [16]\ndata_seeds = [0, 1, 2, 3, 4, 5, 6, 7]\nbalanced = {str(balanced).lower()}\n"
        config = load_config(_write(folder, study_toml(assets, folder / "out", families=("opt",)) + regime))
        model, store = config.models[0], Store(config.output)
        trainers = [Trainer(config, RunSpec(model, 1, 16, d), store=store, log=print) for d in config.data.data_seeds]
        return [int(t.train_set["label"].sum()) for t in trainers]

    assert yes_counts(True) == [8] * 8
    unbalanced = yes_counts(False)
    assert len(set(unbalanced)) > 1 and all(0 <= n <= 16 for n in unbalanced)  # a 50/50 training set, drawn freely


def test_study_subsample_seed_reaches_the_scored_test_sets(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    from gengen.scoring.score import encode_testsets

    def scored(seed: int) -> list[list[int]]:
        folder = tmp_path / str(seed)
        text = study_toml(assets, folder / "out", families=("opt",))
        text = text.replace("[evaluation]\n", f"[evaluation]\nmax_examples = 10\nsubsample_seed = {seed}\n")
        config = load_config(_write(folder, text))
        (first, *_) = encode_testsets(config, assets["tokenizer"])
        assert len(first.encoded) == 10
        return first.encoded

    assert scored(0) == scored(0) and scored(0) != scored(3)
