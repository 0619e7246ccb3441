"""Ingest's file-first errors name the options that would fix them in each front end's terms (issue 27 item 5):
the CLI's ``error:`` line names the flags, ``str()`` in Python the keywords of :func:`gengen.ingest.ingest`."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gengen.cli import app
from gengen.errors import GengenError, InputError
from gengen.ingest import read_file

CASES = [
    (
        "odd.csv",
        "name,score\nm,0.5\n",
        "map columns with --column or --run-column, or pass --format",
        "map columns with columns or run_column, or pass format",
    ),
    ("wide.csv", "step,lr,_runtime\n0,0.1,3\n", "; pass --pattern", "; pass pattern"),
    (
        "runs.csv",
        "Run,MNLI,HANS\n1,0.8,0.5\n",
        "; pass --metric NAME if the columns are test sets",
        "; pass metric NAME if the columns are test sets",
    ),
    (
        "long.csv",
        "model,step,testset,metric,valeu\nm,1,a,acc,0.5\n",
        "; map one with --column value=COLUMN",
        "; map one with columns value=COLUMN",
    ),
]


@pytest.mark.parametrize(("name", "text", "flags", "keywords"), CASES, ids=[case[0] for case in CASES])
def test_hints_name_flags_in_the_cli_and_keywords_in_python(
    tmp_path: Path, name: str, text: str, flags: str, keywords: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GengenError) as raised:
        read_file(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and message.endswith(keywords) and "--" not in message
    result = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store"), "-q"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == [f"error: {message[: -len(keywords)]}{flags}"]


def test_a_hint_renders_its_options_and_survives_pickling() -> None:
    error = InputError("a.csv: no column is a score", hint="pass {metric} NAME, or {step_pattern} (a{2,3}b)")
    assert str(error) == "a.csv: no column is a score; pass metric NAME, or step_pattern (a{2,3}b)"
    flags = error.render(lambda name: "--" + name.replace("_", "-"))
    assert flags == "a.csv: no column is a score; pass --metric NAME, or --step-pattern (a{2,3}b)"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is InputError and again.render(lambda name: f"<{name}>").endswith("or <step_pattern> (a{2,3}b)")


def test_export_names_its_format_option_in_each_front_end(tmp_path: Path) -> None:
    from gengen.ingest import ingest
    from gengen.store.export import export

    table = tmp_path / "scores.csv"
    table.write_text("model,step,testset,metric,value\nm,1,a,acc,0.5\n", encoding="utf-8")
    ingest(table, tmp_path / "store")
    out = tmp_path / "scores.txt"
    with pytest.raises(GengenError) as raised:
        export(tmp_path / "store", out)
    assert (
        str(raised.value) == f"{out}: cannot tell the export format from the suffix '.txt'; pass format csv or parquet"
    )
    result = CliRunner().invoke(app, ["export", str(tmp_path / "store"), str(out)])
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {out}: cannot tell the export format from the suffix '.txt'; pass --format csv or parquet"
    ]
