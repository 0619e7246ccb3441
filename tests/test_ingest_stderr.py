"""``<metric>_stderr`` columns and rows fill the ``stderr`` of their metric at ingest (issue 33, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gengen.cli import app
from gengen.errors import InputError
from gengen.ingest import read


def _stored(path: Path, text: str) -> dict[tuple[int, str, str], tuple[float, float]]:
    path.write_text(text)
    frame, _, _ = read(path)
    return {
        (int(row.step), row.testset, row.metric): (row.value, row.stderr)
        for row in frame[["step", "testset", "metric", "value", "stderr"]].itertuples(index=False)
    }


def test_long_table_stderr_rows_become_stderr(tmp_path: Path) -> None:
    stored = _stored(
        tmp_path / "long.csv",
        "model,run,step,testset,metric,value\n"
        "m,main,0,arc_easy,acc,0.40\nm,main,0,arc_easy,acc_stderr,0.011\n"
        "m,main,100,arc_easy,acc,0.45\nm,main,100,arc_easy,acc_stderr,0.012\n"
        "m,main,0,lambada,ppl,50.0\nm,main,0,lambada,ppl_stderr,2.5\n",
    )
    assert stored == {
        (0, "arc_easy", "acc"): (0.40, 0.011),
        (100, "arc_easy", "acc"): (0.45, 0.012),
        (0, "lambada", "ppl"): (50.0, 2.5),
    }


def test_wide_and_wandb_columns_become_stderr(tmp_path: Path) -> None:
    stored = _stored(
        tmp_path / "history.csv",
        "_step,eval/downstream/arc_easy_acc,eval/downstream/arc_easy_acc_stderr,piqa/acc,piqa/acc_stderr\n"
        "0,0.4,0.011,0.6,0.02\n100,0.45,0.012,0.62,\n",
    )
    assert set(stored) == {(0, "arc_easy", "acc"), (100, "arc_easy", "acc"), (0, "piqa", "acc"), (100, "piqa", "acc")}
    assert stored[(100, "arc_easy", "acc")] == (0.45, 0.012)
    assert stored[(0, "piqa", "acc")] == (0.6, 0.02)
    value, stderr = stored[(100, "piqa", "acc")]
    assert value == 0.62 and stderr != stderr  # no standard error given: missing, not 0


def test_stderr_without_its_score_is_left_out_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text("model,run,step,testset,metric,value\nm,main,0,a,acc,0.5\nm,main,0,b,acc_stderr,0.01\n")
    result = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert "1 standard error without the score" in result.output and "'acc_stderr'" in result.output


def test_stderr_that_contradicts_the_stderr_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(
        "model,run,step,testset,metric,value,stderr\nm,main,0,a,acc,0.5,0.02\nm,main,0,a,acc_stderr,0.01,\n"
    )
    with pytest.raises(InputError, match=r"long.csv.*'acc_stderr' = 0.01, but the score's stderr column says 0.02"):
        read(path)
    result = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")])
    assert result.exit_code == 2 and "Traceback" not in result.output
