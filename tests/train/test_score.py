"""Scoring against a hand computation: each example run alone through the model, without padding or batching."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from gengen.errors import ConfigError
from gengen.scoring.models import answer_token_ids, encode_prompts, load_model, load_tokenizer
from gengen.scoring.score import score_encoded

pytestmark = pytest.mark.train

PROMPT = "{premise} Question: {hypothesis} Yes or No?"


def hand_scores(model: Any, encoded: list[list[int]], labels: np.ndarray, yes: int, no: int) -> tuple[float, float]:
    """Accuracy and mean gold log-probability, one unpadded example at a time."""
    correct, logprob = 0, 0.0
    with torch.no_grad():
        for ids, label in zip(encoded, labels, strict=True):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
            predicted_yes = bool(logits[yes] > logits[no])
            correct += predicted_yes == bool(label)
            logprob += float(torch.log_softmax(logits, dim=-1)[yes if label else no])
    return correct / len(labels), logprob / len(labels)


@pytest.mark.parametrize("family", ["opt", "olmo2"])
def test_batched_scores_match_one_by_one(family: str, assets: dict[str, Any]) -> None:
    folder = assets["models"][family]
    tokenizer = load_tokenizer(str(folder))
    assert tokenizer.padding_side == "right"
    model = load_model(str(folder))
    # Perturb the random weights so that accuracy is neither 0 nor 1 and the logits vary between examples.
    frames = [pd.read_json(assets["data"][name], lines=True) for name in ("id", "length", "negation")]
    frame = pd.concat(frames, ignore_index=True)
    encoded = encode_prompts(tokenizer, frame, PROMPT, max_length=64)
    assert len({len(e) for e in encoded}) > 5  # mixed lengths, so batches are padded
    yes, no = answer_token_ids(tokenizer, (" Yes", " No"))
    labels = frame["label"].to_numpy()
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    result = score_encoded(model, encoded, labels, (yes, no), pad_id=tokenizer.pad_token_id, batch_size=7)
    acc, logprob = hand_scores(model, encoded, labels, yes, no)
    assert result.n_examples == len(frame)
    assert 0.0 < acc < 1.0
    assert result.acc == acc
    np.testing.assert_allclose(result.logprob, logprob, rtol=1e-5)
    # A batch size larger than the data gives the same numbers.
    again = score_encoded(model, encoded, labels, (yes, no), pad_id=tokenizer.pad_token_id, batch_size=1000)
    assert again.acc == acc
    np.testing.assert_allclose(again.logprob, logprob, rtol=1e-5)


def test_answers_must_be_single_tokens(assets: dict[str, Any]) -> None:
    tokenizer = assets["tokenizer"]
    yes, no = answer_token_ids(tokenizer, (" Yes", " No"))
    assert tokenizer.convert_ids_to_tokens([yes, no]) == ["ĠYes", "ĠNo"]
    with pytest.raises(ConfigError, match=r"task\.answers: ' Perhaps' is \d+ tokens"):
        answer_token_ids(tokenizer, (" Perhaps", " No"))


def test_long_prompts_keep_their_end(assets: dict[str, Any], tmp_path: Path) -> None:
    tokenizer = assets["tokenizer"]
    frame = pd.DataFrame(
        {"premise": ["the doctor saw the lawyer " * 20], "hypothesis": ["the doctor saw someone"], "label": [1]}
    )
    full = encode_prompts(tokenizer, frame, PROMPT, max_length=1000)[0]
    cut = encode_prompts(tokenizer, frame, PROMPT, max_length=16)[0]
    assert len(cut) == 16 and cut == full[-16:]
