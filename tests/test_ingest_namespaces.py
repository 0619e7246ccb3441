"""Issue 26 item 5 and issue 27 item 5 for ingest: W&B namespaces read as namespaces, what each file was taken
to hold, the same files under another study name, sizes per file, errors in each front end's terms.

Every expectation here is written by hand from the file contents, not computed by gengen.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gengen.cli import app
from gengen.errors import GengenError, InputError, UnknownFormatError
from gengen.ingest import ingest
from gengen.ingest.tables import split_name
from gengen.store.database import Store, load, shown

# An OLMo-2 W&B history export in miniature: the three qualified namespaces next to the plain one.
OLMO_HEADER = (
    "_step,_runtime,optim/LR (group 0),eval/downstream/arc_easy_val_rc_5shot_len_norm,"
    "eval/downstream_bpb/arc_easy_val_rc_5shot_bpb,eval/downstream_soft/arc_easy_val_rc_5shot_soft,"
    "eval/downstream_soft_log/arc_easy_val_rc_5shot_soft_log,eval/downstream_bpb/piqa_val_rc_5shot_bpb,"
    "eval/c4_en-validation/CrossEntropyLoss"
)
OLMO_ROWS = ["1000,10.5,0.0004,0.51,1.21,0.41,-0.91,1.11,3.5", "2000,20.5,0.0004,0.62,1.12,0.46,-0.82,1.02,3.25"]
OLMO_SCORES = {
    (1000, "arc_easy_val_rc_5shot", "len_norm", 0.51),
    (1000, "arc_easy_val_rc_5shot", "bpb", 1.21),
    (1000, "arc_easy_val_rc_5shot", "soft", 0.41),
    (1000, "arc_easy_val_rc_5shot", "soft_log", -0.91),
    (1000, "piqa_val_rc_5shot", "bpb", 1.11),
    (1000, "c4_en-validation", "CrossEntropyLoss", 3.5),
    (2000, "arc_easy_val_rc_5shot", "len_norm", 0.62),
    (2000, "arc_easy_val_rc_5shot", "bpb", 1.12),
    (2000, "arc_easy_val_rc_5shot", "soft", 0.46),
    (2000, "arc_easy_val_rc_5shot", "soft_log", -0.82),
    (2000, "piqa_val_rc_5shot", "bpb", 1.02),
    (2000, "c4_en-validation", "CrossEntropyLoss", 3.25),
}


def _olmo(folder: Path, name: str = "OLMo-2-1124-7B.csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join([OLMO_HEADER, *OLMO_ROWS]) + "\n")
    return path


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("eval/downstream_bpb/arc_easy_val_rc_5shot_bpb", ("arc_easy_val_rc_5shot", "bpb")),
        ("eval/downstream_soft/arc_easy_val_rc_5shot_soft", ("arc_easy_val_rc_5shot", "soft")),
        ("eval/downstream_soft_log/arc_easy_val_rc_5shot_soft_log", ("arc_easy_val_rc_5shot", "soft_log")),
        ("eval/downstream_soft_log/mmlu_stem_var_soft_log", ("mmlu_stem_var", "soft_log")),
        ("eval/downstream_bpb/hellaswag", ("hellaswag", "bpb")),  # no suffix: the namespace's metric
        ("eval/downstream_bpb/mmlu/stem_bpb", ("mmlu/stem", "bpb")),
        ("eval/downstream/arc_easy_val_rc_5shot_len_norm", ("arc_easy_val_rc_5shot", "len_norm")),
        ("downstream_bpb/piqa_bpb", ("piqa", "bpb")),
    ],
)
def test_qualified_namespaces(name: str, expected: tuple[str, str]) -> None:
    assert split_name(name) == expected


def test_an_olmo_wandb_export_gives_tasks_and_metrics(tmp_path: Path) -> None:
    path = _olmo(tmp_path / "files")
    report = ingest(path, tmp_path / "study")
    frame = load(tmp_path / "study")
    assert {(r.step, r.testset, r.metric, r.value) for r in frame.itertuples()} == OLMO_SCORES
    assert not any(testset.startswith("downstream") for testset in frame["testset"])
    assert set(zip(frame["family"], frame["size"], strict=True)) == {("OLMo-2-1124", "7B")}
    assert report.took() == [
        f"{path}: 3 test sets × 5 metrics (arc_easy_val_rc_5shot, piqa_val_rc_5shot, c4_en-validation; "
        "len_norm, bpb, soft, soft_log, …)"
    ]


def test_took_groups_files_holding_the_same_names(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    a = _olmo(folder, "a-1B.csv")
    b = _olmo(folder, "b-1B.csv")
    other = folder / "c-1B.csv"
    other.write_text("step,piqa/acc\n0,0.5\n")
    report = ingest(folder, tmp_path / "study")
    assert report.took() == [
        f"{a} … {b} (2 files): 3 test sets × 5 metrics (arc_easy_val_rc_5shot, piqa_val_rc_5shot, "
        "c4_en-validation; len_norm, bpb, soft, soft_log, …)",
        f"{other}: 1 test set × 1 metric (piqa; acc)",
    ]


def test_the_same_files_under_another_study_name_are_recognised(tmp_path: Path) -> None:
    files = tmp_path / "files"
    path = _olmo(files)
    ingest(files, tmp_path / "first")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "gengen.sqlite").write_bytes((tmp_path / "first" / "gengen.sqlite").read_bytes())
    report = ingest(files, copy)  # the default study is now "copy"
    assert report.written == 0 and report.copies == {path: ("first", 12)}
    assert "left out 1 file already stored as study 'first'" in report.summary()
    assert Store(copy).studies() == ["first"] and len(load(copy)) == 12
    # Under its own study name it is a plain re-import: nothing new, nothing left out.
    again = ingest(files, copy, study="first")
    assert (again.written, again.rows, again.copies) == (0, 12, {})
    # Asked for, the copy is stored as a second study.
    forced = ingest(files, copy, allow_copies=True)
    assert forced.written == 12 and Store(copy).studies() == ["copy", "first"]


def test_a_file_partly_in_another_study_is_not_a_copy(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([{"study": "old", "model": "m-1m", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5}])
    table = tmp_path / "m-1m.csv"
    table.write_text("model,step,testset,metric,value\nm-1m,0,piqa,acc,0.5\nm-1m,1,piqa,acc,0.6\n")
    report = ingest(table, tmp_path / "s")
    assert report.copies == {} and report.written == 2
    # Another value for the same key is new data, not a copy.
    other = tmp_path / "m-1m-b.csv"
    other.write_text("model,step,testset,metric,value\nm-1m,0,piqa,acc,0.7\n")
    assert ingest(other, tmp_path / "s", study="third").written == 1


def test_size_set_per_file_and_read_from_names(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    for name in ("1B-1xC.csv", "peteish13.csv", "mystery.csv"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("step,piqa/acc\n0,0.5\n")
    ingest(folder, tmp_path / "s")
    frame = load(tmp_path / "s")
    assert dict(zip(frame["model"], zip(frame["family"], frame["size"], strict=True), strict=True)) == {
        "1B-1xC": ("1xC", "1B"),
        "peteish13": ("peteish", "13B"),
        "mystery": ("mystery", ""),
    }
    ingest(folder / "mystery.csv", tmp_path / "t", size="350M")
    assert load(tmp_path / "t")["size"].tolist() == ["350M"]


def test_errors_name_the_option_in_each_front_ends_terms(tmp_path: Path) -> None:
    table = tmp_path / "long.csv"
    table.write_text("model,step,task,metric,value\nm-1m,0,piqa,acc,0.5\n")
    with pytest.raises(InputError) as caught:
        ingest(table, tmp_path / "s", columns={"testset": "tsk"})
    assert caught.value.option == "columns"
    assert str(caught.value).startswith(f"columns testset=tsk: {table} has no column 'tsk'")
    with pytest.raises(UnknownFormatError) as unknown:
        ingest(table, tmp_path / "s", format="xml")
    assert unknown.value.option == "format" and str(unknown.value).startswith("format must be one of lm-eval")
    with pytest.raises(GengenError) as size:
        ingest(table, tmp_path / "s", size="7\nB")
    assert size.value.option == "size"
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(table), "--store", str(tmp_path / "s"), "--column", "testset=tsk"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --column testset=tsk: {table} has no column 'tsk'; did you mean 'task'?; columns are "
        "'model', 'step', 'task', 'metric', 'value'"
    ]
    result = runner.invoke(app, ["ingest", str(table), "--store", str(tmp_path / "s"), "--format", "xml"])
    assert re.fullmatch(r"error: --format must be one of lm-eval, .*, got 'xml'", result.stderr.strip())


def test_a_huge_value_is_not_echoed_whole(tmp_path: Path) -> None:
    """Issue 26: a 1 GiB string score was echoed whole in its error line; a 5 MB one stands in for it here."""
    huge = "x" * 5_000_000
    table = tmp_path / "long.parquet"
    row = {"model": "m-1m", "step": 0, "testset": "piqa", "metric": "acc"}
    pd.DataFrame([{**row, "value": huge}]).to_parquet(table)
    wide = tmp_path / "wide.parquet"
    pd.DataFrame({"step": [0], "piqa/acc": [huge]}).to_parquet(wide)
    results = tmp_path / "160m_step1000.json"
    data = {"results": {"piqa": {"acc": huge}}, "config": {"model_args": "pretrained=EleutherAI/pythia-160m"}}
    results.write_text(json.dumps(data))
    for path in (table, wide, results):
        with pytest.raises(InputError) as caught:
            ingest(path, tmp_path / "s")
        message = str(caught.value)
        assert len(message) < len(str(path)) + 200, message[:300]
        assert "(5000000 characters)" in message


def test_shown_cuts_long_values() -> None:
    assert shown("abc") == "'abc'"
    assert shown("y" * 100, limit=10) == "'yyyyyyyyy… (100 characters)"
    assert shown(list(range(100)), limit=12) == "[0, 1, 2, 3…"
    assert shown(1.5) == "1.5"


def test_the_cli_prints_what_each_file_held_and_the_copies(tmp_path: Path) -> None:
    files = tmp_path / "files"
    path = _olmo(files)
    runner = CliRunner()
    first = runner.invoke(app, ["ingest", str(files), "--store", str(tmp_path / "first")])  # -q: no read: line
    assert first.exit_code == 0, first.output
    assert f"read: {path}: 3 test sets × 5 metrics (arc_easy_val_rc_5shot, " in first.stderr
    assert first.stdout.startswith("12 new scores (0 already stored) from 1 files (1 wide)")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "gengen.sqlite").write_bytes((tmp_path / "first" / "gengen.sqlite").read_bytes())
    again = runner.invoke(app, ["ingest", str(files), "--store", str(copy), "-q"])
    assert again.exit_code == 0, again.output
    assert (
        f"note: {path}: the store already holds its 12 scores as study 'first'; left out (the same file under "
        "another study name). --study first adds to that study; --allow-copies stores them again"
    ) in again.stderr.splitlines()
    assert "left out 1 file already stored as study 'first'" in again.stdout
    forced = runner.invoke(app, ["ingest", str(files), "--store", str(copy), "-q", "--allow-copies"])
    assert forced.exit_code == 0 and forced.stdout.startswith("12 new scores")
