"""Guards on what training does, each against one mistake that leaves every other test green.

Each test names, in its docstring, the planted change it was seen to fail on: the Yes/No targets swapped, the
data seed ignored, LoRA's ``r`` or ``alpha`` left at peft's default, gradient checkpointing dropped, a test set
cap taking the first rows, the loss of accumulated micro-batches not divided by the step's examples.
The models are the tiny ones of ``conftest.py`` (one layer, 16 wide), trained a few dozen steps on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.store.database import Store
from gengen.study.config import RunSpec, StudyConfig, load_config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.train


def _config(tmp_path: Path, text: str) -> StudyConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "study.toml"
    path.write_text(text)
    return load_config(path)


def _trainer(config: StudyConfig, run: RunSpec | None = None, *, build: bool = True) -> Any:
    from gengen.training.train import Trainer

    run = run or config.runs()[0]
    trainer = Trainer(config, run, store=Store(config.output, study=config.name), log=lambda _: None, progress=False)
    if build:
        trainer.resume()
        trainer.model.train()
    return trainer


def _direction_accuracy(model: Any, encoded: list[list[int]], labels: np.ndarray, answers: tuple[int, int]) -> float:
    """Share of examples whose gold answer has the larger answer logit, one unpadded example at a time.

    Computed here from the model's raw logits at each prompt's last token, not by gengen's scorer.
    """
    yes, no = answers
    was_training = model.training
    model.eval()
    right = 0
    with torch.no_grad():
        for ids, label in zip(encoded, labels, strict=True):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            right += int(bool(logits[yes] > logits[no]) == bool(label == 1))
    model.train(was_training)
    return right / len(labels)


# ------------------------------------------------------------------------------------------ the targets


@pytest.mark.parametrize(("loss", "steps"), [("full_vocab", 60), ("answers", 30)])
def test_training_moves_the_answer_logits_towards_the_gold_answers(
    loss: str, steps: int, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """Catches the Yes/No targets swapped in training (gold_train built the other way round, or the pair loss's
    class index flipped): the training examples would then be learned backwards (accuracy near 0, not 1).

    16 balanced shots are memorised by the tiny OPT model in a few dozen steps at a large learning rate, so the
    sign of logit(Yes) - logit(No) on them says which answer training pushed towards.
    """
    text = study_toml(assets, tmp_path / "out", families=("opt",), max_steps=steps, every=steps)
    text = text.replace("learning_rate = 5e-3", "learning_rate = 2e-2").replace(
        "train = {", f'loss = "{loss}"\ntrain = {{'
    )
    config = _config(tmp_path, text + "\n[data]\nshots = [16]\n")
    trainer = _trainer(config)
    labels = trainer.train_set["label"].to_numpy()
    assert labels.sum() == 8  # balanced: chance is 0.5 whichever answer the model starts with
    before = _direction_accuracy(trainer.model, trainer.encoded_train, labels, trainer.answers)
    for step in range(1, steps + 1):
        trainer.step(step)
    after = _direction_accuracy(trainer.model, trainer.encoded_train, labels, trainer.answers)
    assert after >= 0.85, (before, after)
    assert after >= before + 0.3, (before, after)


# ------------------------------------------------------------------------------------------ the samples


def test_data_seed_draws_the_few_shot_sample_and_the_training_seed_does_not(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """Catches the few-shot sample drawn with the training seed (or any seed but the data seed)."""
    text = study_toml(assets, tmp_path / "out", families=("opt",), seeds=(1, 2), max_steps=4, every=4)
    config = _config(tmp_path, text + "\n[data]\nshots = [16]\ndata_seeds = [0, 1]\n")
    model = config.models[0]

    def sample(seed: int, data_seed: int) -> list[tuple[str, str, int]]:
        train_set = _trainer(config, RunSpec(model, seed, 16, data_seed), build=False).train_set
        return list(train_set.itertuples(index=False, name=None))

    base = sample(1, 0)
    assert len(base) == 16
    assert sorted(sample(2, 0)) == sorted(base)  # another training seed: the same examples
    assert sorted(sample(1, 1)) != sorted(base)  # another data seed: other examples
    assert len(set(sample(1, 1)) & set(base)) < 16


def test_capped_test_set_is_a_seeded_random_subset(tmp_path: Path) -> None:
    """Catches a ``max_examples`` cap that keeps the first rows (or a subset that moves between calls)."""
    from gengen.data import load_examples
    from gengen.study.tables import DataSpec

    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(json.dumps({"premise": str(i), "hypothesis": "h", "label": i % 2}) + "\n" for i in range(1000))
    )
    capped = load_examples(DataSpec(name="d", path=str(path), max_examples=100))
    rows = capped["premise"].astype(int).to_numpy()
    assert len(rows) == 100 and len(set(rows)) == 100
    assert np.all(np.diff(rows) > 0)  # kept in the file's order
    # A uniform subset of 100 of 1000 rows: its largest row is above 900 and its mean near 500 (the first 100
    # rows have mean 49.5, largest 99); the chance of either check failing for a uniform draw is below 1e-4.
    assert rows.max() > 900 and 400 < rows.mean() < 600
    again = load_examples(DataSpec(name="d", path=str(path)), cap=100)
    pd.testing.assert_frame_equal(again, capped)


# ------------------------------------------------------------------------------------------ the model


def test_lora_adapters_have_the_configured_rank_alpha_and_dropout(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """Catches LoRA's ``r``, ``alpha`` or ``dropout`` not passed to peft (its defaults: r 8, alpha 8, dropout 0):
    every adapted layer must have rank 4 and scaling alpha / r = 12 / 4 = 3."""
    pytest.importorskip("peft")
    lora = 'method = "lora"\nlora = { r = 4, alpha = 12, dropout = 0.2, target_modules = ["q_proj", "v_proj"] }'
    config = _config(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",), extra=lora))
    trainer = _trainer(config)
    adapted = {name: m for name, m in trainer.model.named_modules() if hasattr(m, "lora_A") and m.lora_A}
    assert sorted(name.rsplit(".", 1)[-1] for name in adapted) == ["q_proj", "v_proj"]
    for module in adapted.values():
        assert module.r["default"] == 4
        assert module.scaling["default"] == pytest.approx(12 / 4)
        assert module.lora_A["default"].weight.shape[0] == 4
        assert module.lora_dropout["default"].p == pytest.approx(0.2)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_gradient_checkpointing_is_on_when_asked_and_recomputes_the_layers(
    method: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """Catches gradient checkpointing silently not enabled (full fine-tuning, or LoRA on an unquantised base):
    the model's flag must be set, and each decoder layer must run its forward pass twice in a training step
    (once forward, once recomputed in the backward pass), against once without checkpointing."""
    if method == "lora":
        pytest.importorskip("peft")
    extra = 'method = "lora"\n' if method == "lora" else ""

    def forwards_per_step(checkpointing: bool) -> tuple[bool, int]:
        flag = f"gradient_checkpointing = {'true' if checkpointing else 'false'}\n"
        folder = tmp_path / str(checkpointing)
        config = _config(folder, study_toml(assets, folder / "out", families=("opt",), extra=extra + flag))
        trainer = _trainer(config)
        base = trainer.model.get_base_model() if method == "lora" else trainer.model
        layer = next(m for m in base.modules() if type(m).__name__.endswith("DecoderLayer"))
        # A linear layer inside the block: checkpointing wraps the block's forward, which calls it again.
        linear = next(m for m in layer.modules() if isinstance(m, torch.nn.Linear))
        calls = [0]
        handle = linear.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        trainer.step(1)
        handle.remove()
        flag = getattr(base, "is_activation_checkpointing", None)  # transformers 5's name
        return bool(base.is_gradient_checkpointing if flag is None else flag), calls[0]

    assert forwards_per_step(True) == (True, 2)
    assert forwards_per_step(False) == (False, 1)


# ------------------------------------------------------------------------------------------ the step


def test_accumulated_unequal_micro_batches_give_the_full_batch_gradient(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """Catches the loss of each micro-batch not divided by the step's examples (a mean per micro-batch, or a sum):
    a step of micro-batches of 3 and 2 examples must give the gradient of the 5-example mean loss, computed here
    directly, and that of one micro-batch of 5."""

    from gengen.training.train import update_batches

    def gradients(batch_size: int, grad_accum: int) -> tuple[list[torch.Tensor], list[int]]:
        folder = tmp_path / f"b{batch_size}x{grad_accum}"
        extra = f"grad_accum = {grad_accum}\nmax_grad_norm = 0\n"
        text = study_toml(assets, folder / "out", families=("opt",), extra=extra)
        text = text.replace("batch_size = 8", f"batch_size = {batch_size}", 1)
        config = _config(folder, text + "\n[data]\nshots = [5]\n")
        trainer = _trainer(config)
        recorded: list[torch.Tensor] = []
        take_step = trainer.optimizer.step

        def record(*args: Any, **kwargs: Any) -> Any:
            recorded.extend(p.grad.detach().clone() for p in trainer.params)
            return take_step(*args, **kwargs)

        trainer.optimizer.step = record
        trainer.step(1)
        # The reference: the mean over the 5 examples of the gold answer's cross-entropy at the last token.
        model = _trainer(config).model
        yes, no = trainer.answers
        losses = []
        for ids, label in zip(trainer.encoded_train, trainer.train_set["label"], strict=True):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
            losses.append(torch.nn.functional.cross_entropy(logits[None], torch.tensor([yes if label else no])))
        torch.stack(losses).mean().backward()
        reference = [p.grad for p in model.parameters() if p.requires_grad]
        for got, want in zip(recorded, reference, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)
        sizes = [len(b) for b in update_batches(1, 5, batch_size, config.runs()[0].seed, grad_accum)]
        return recorded, sizes

    accumulated, sizes = gradients(3, 2)
    assert sizes == [3, 2]
    whole, sizes = gradients(5, 1)
    assert sizes == [5]
    for a, b in zip(accumulated, whole, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


# ------------------------------------------------------------------------------------------ the scores


class EqualAnswerLogits(torch.nn.Module):
    """A 'model' whose logits are the same for every token: logit(Yes) = logit(No) on every prompt."""

    def __init__(self, vocab: int):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(vocab))

    def forward(self, input_ids: Any, attention_mask: Any = None, logits_to_keep: Any = None, **_: Any) -> Any:
        from types import SimpleNamespace

        positions = input_ids.shape[1] if logits_to_keep is None else len(logits_to_keep)
        return SimpleNamespace(logits=self.bias.expand(input_ids.shape[0], positions, -1))


@pytest.mark.parametrize(("ties", "expected"), [("No", 0.7), ("Yes", 0.3)])
def test_ties_are_predicted_as_the_configured_answer(ties: str, expected: float) -> None:
    """Catches ties predicted "Yes" whatever ``evaluation.ties`` says (``>=`` for ``>``), or "No" when "Yes" is
    asked: with every pair of answer logits equal, accuracy is the share of gold answers equal to the tie answer
    (7 of 10 are No), and the log-probability that of a uniform distribution."""
    from gengen.scoring.score import score_encoded

    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    encoded = [[5, 6, 7][: 1 + i % 3] for i in range(10)]
    result = score_encoded(EqualAnswerLogits(50), encoded, labels, (3, 4), pad_id=0, batch_size=4, ties=ties)
    assert result.acc == pytest.approx(expected)
    assert result.logprob == pytest.approx(-np.log(50))


def test_tie_rule_is_read_from_the_study_and_refused_when_unknown(tmp_path: Path) -> None:
    from gengen.errors import ConfigError
    from gengen.study.config import parse_config

    study = {
        "study": {"name": "s", "id_testset": "mnli"},
        "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
        "task": {"train": {"source": "mnli"}},
        "testsets": [{"name": "mnli", "source": "mnli"}],
    }
    assert parse_config(study, base=tmp_path).evaluation.ties == "No"
    assert parse_config({**study, "evaluation": {"ties": "Yes"}}, base=tmp_path).evaluation.ties == "Yes"
    with pytest.raises(ConfigError, match=r"evaluation\.ties: expected one of 'No', 'Yes', got 'yes'"):
        parse_config({**study, "evaluation": {"ties": "yes"}}, base=tmp_path)
