"""lighteval results files are their own format, and W&B names are split only when whole (issue 36).

A lighteval file was read as lm-evaluation-harness v0.3: its ``all`` aggregate stored as a test set beside
the tasks it averages, and ``leaderboard|arc:challenge|25`` as a test set name holding the shot count. A W&B
column ``eval/downstream_bpb/`` (no leaf) became a test set ``downstream``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gengen.errors import InputError
from gengen.ingest import detect_format, ingest
from gengen.store.database import load

LIGHTEVAL = {
    "config_general": {"model_name": "allenai/OLMo-2-0425-1B", "model_revision": "step1000"},
    "results": {
        "leaderboard|arc:challenge|25": {"acc": 0.41, "acc_stderr": 0.014, "acc_norm": 0.44, "acc_norm_stderr": 0.015},
        "leaderboard|hellaswag|10": {"acc": 0.52, "acc_stderr": 0.005},
        "lighteval|hellaswag|0": {"acc": 0.50, "acc_stderr": 0.005},
        "all": {"acc": 0.4767, "acc_stderr": 0.008},
    },
    "versions": {"leaderboard|arc:challenge|25": 0},
}


def test_a_lighteval_file_is_its_own_format(tmp_path: Path) -> None:
    path = tmp_path / "results_2025-01-01.json"
    path.write_text(json.dumps(LIGHTEVAL))
    assert detect_format(path) == "lighteval"
    report = ingest(path, tmp_path / "store")
    scores = load(tmp_path / "store").sort_values(["testset", "metric"])
    rows = [
        (r.model, r.step, r.testset, r.metric, r.value, r.stderr, r.shots)
        for r in scores[["model", "step", "testset", "metric", "value", "stderr", "shots"]].itertuples()
    ]
    assert rows == [
        ("OLMo-2-0425-1B", 1000, "arc:challenge", "acc", 0.41, 0.014, 25),
        ("OLMo-2-0425-1B", 1000, "arc:challenge", "acc_norm", 0.44, 0.015, 25),
        ("OLMo-2-0425-1B", 1000, "leaderboard|hellaswag", "acc", 0.52, 0.005, 10),
        ("OLMo-2-0425-1B", 1000, "lighteval|hellaswag", "acc", 0.50, 0.005, 0),
    ]
    assert "all" not in set(scores["testset"])
    assert any("left out results.all, lighteval's average of the 3 tasks" in note for note in report.notes)


def test_a_lighteval_task_key_that_is_not_suite_task_shots_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**LIGHTEVAL, "results": {"leaderboard|arc": {"acc": 0.4}}}))
    with pytest.raises(InputError, match=r"results\.json: key results\.'leaderboard\|arc': not a lighteval task key"):
        ingest(path, tmp_path / "store", step=1)
    assert not (tmp_path / "store").exists() or load(tmp_path / "store").empty


@pytest.mark.parametrize("column", ["eval/downstream_bpb/", "eval//arc_easy_acc", "/eval/arc_easy/acc"])
def test_a_wandb_name_with_an_empty_part_is_refused(tmp_path: Path, column: str) -> None:
    path = tmp_path / "history.csv"
    path.write_text(f"_step,eval/downstream/arc_easy_acc,{column}\n100,0.5,0.6\n200,0.55,0.62\n")
    with pytest.raises(InputError, match=rf"history\.csv: column '{column}': an empty part in its name"):
        ingest(path, tmp_path / "store", model="m")
