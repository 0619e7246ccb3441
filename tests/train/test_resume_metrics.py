"""Resume re-scores a test set when *any* metric the study asks for is missing (issue 36, item 8).

A study whose ``evaluation.metrics`` grew between two runs of ``gengen train`` (``["acc"]``, then
``["acc", "logprob"]``) must score every test set again at every stored step; a resume that re-scored a test set
only when *all* its metrics were missing would leave ``logprob`` empty for ever. The trainer, ``score_rows`` and
``gengen score`` decide with :func:`gengen.scoring.score.unscored`; ``score_rows`` is driven here with its model call
replaced by a stub (no model is loaded).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.train

score = pytest.importorskip("gengen.scoring.score")


def test_a_test_set_missing_one_metric_is_scored_again() -> None:
    done = {(100, "mnli", "acc"), (100, "hans", "acc"), (100, "hans", "logprob")}
    assert score.unscored(100, ["mnli", "hans"], ["acc", "logprob"], done) == ["mnli"]
    assert score.unscored(100, ["mnli", "hans"], ["acc"], done) == []
    assert score.unscored(200, ["mnli", "hans"], ["acc"], done) == ["mnli", "hans"]
    assert score.unscored(100, ["mnli"], ["acc"], None) == ["mnli"]


def test_score_rows_scores_the_grown_metric_and_skips_what_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def stub(model: Any, encoded: list[list[int]], labels: np.ndarray, answer_ids: Any, **options: Any) -> Any:
        calls.append(encoded[0][0])
        return score.ScoreResult(acc=0.75, logprob=-0.5, n_examples=len(labels), seconds=1.0)

    monkeypatch.setattr(score, "score_encoded", stub)
    testsets = [
        score.EncodedTestset("mnli", [[1]], np.array([1])),
        score.EncodedTestset("hans", [[2]], np.array([0])),
    ]
    done = {(100, "mnli", "acc"), (100, "hans", "acc"), (100, "hans", "logprob")}
    rows = score.score_rows(
        None, testsets, (1, 2), pad_id=0, batch_size=1, metrics=["acc", "logprob"], base={"step": 100}, skip=done
    )
    assert calls == [1]  # mnli only
    assert [(row["testset"], row["metric"], row["value"]) for row in rows] == [
        ("mnli", "acc", 0.75),
        ("mnli", "logprob", -0.5),
    ]
