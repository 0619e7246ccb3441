"""What the refusals of ``cases_audit.py`` still accept: UTF-8 names of any script, a demo's own folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("argument", ["café.csv", "模型/gengen.sqlite", "--model=Ölmo", "", "a b"])
def test_utf8_arguments_of_any_script_pass(argument: str) -> None:
    from gengen.cli._common import _not_utf8

    assert _not_utf8(["ingest", argument]) is None


@pytest.mark.parametrize(
    ("argument", "shown"),
    [("in\udcff.csv", "in\\xff.csv"), ("caf\udce9", "caf\\xe9"), ("\ud800x", "\\ud800x")],
    ids=["byte-ff", "latin-1-e-acute", "lone-surrogate"],
)
def test_an_argument_not_utf8_is_shown_with_its_bytes_escaped(argument: str, shown: str) -> None:
    from gengen.cli._common import _not_utf8

    assert _not_utf8(["export", "store", argument]) == shown


def test_fresh_accepts_the_demos_own_folder_and_an_empty_one(tmp_path: Path) -> None:
    from gengen.demo import study_template
    from gengen.demo.manifest import record_demo_files, remove_demo_folder

    (tmp_path / "empty").mkdir()
    remove_demo_folder(tmp_path / "empty")
    demo = tmp_path / "demo"
    (demo / "data").mkdir(parents=True)
    (demo / "study.toml").write_text(study_template(), encoding="utf-8")
    (demo / "data" / "train.jsonl").write_text("{}\n")
    record_demo_files(demo)
    remove_demo_folder(demo)
    assert not demo.exists()
