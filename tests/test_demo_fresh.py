"""``gengen demo --fresh`` deletes only what the demo wrote (issue 36, item 1).

The demo keeps a list of its files (size and SHA-256) in ``gengen-demo-files.json``; ``--fresh`` deletes a
folder only when every entry in it is on that list, unchanged. These tests build demo folders by hand (a few
files and the list, as :func:`record_demo_files` writes it at the end of a demo) rather than training models.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from gengen.cli import app
from gengen.demo import study_template
from gengen.demo.manifest import MANIFEST_NAME, foreign_entries, record_demo_files, remove_demo_folder
from gengen.errors import InputError


def _demo_folder(root: Path) -> Path:
    out = root / "demo"
    (out / "data").mkdir(parents=True)
    (out / "models" / "opt-s").mkdir(parents=True)
    (out / "study.toml").write_text(study_template(), encoding="utf-8")
    (out / "data" / "train.jsonl").write_text('{"premise": "a"}\n')
    (out / "models" / "opt-s" / "config.json").write_text("{}\n")
    record_demo_files(out)
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_the_list_holds_every_file_with_its_size_and_hash(tmp_path: Path) -> None:
    out = _demo_folder(tmp_path)
    files = json.loads((out / MANIFEST_NAME).read_text())["files"]
    assert sorted(files) == ["data/train.jsonl", "models/opt-s/config.json", "study.toml"]
    data = (out / "study.toml").read_bytes()
    assert files["study.toml"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert foreign_entries(out) == []


def test_fresh_deletes_a_folder_of_the_demos_own_files(tmp_path: Path) -> None:
    out = _demo_folder(tmp_path)
    remove_demo_folder(out)
    assert not out.exists()


def test_fresh_on_an_empty_folder_deletes_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    remove_demo_folder(tmp_path / "empty")
    assert (tmp_path / "empty").is_dir()


def test_the_study_template_beside_other_files_deletes_nothing(tmp_path: Path) -> None:
    """The issue's first case: study.toml equal to the template was the only check; now the list is."""
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "study.toml").write_text(study_template(), encoding="utf-8")
    (folder / "thesis.tex").write_text("years of work\n")
    before = _snapshot(folder)
    with pytest.raises(InputError, match=r"p/study\.toml: no list of the files the demo wrote \(2 such entries"):
        remove_demo_folder(folder)
    assert _snapshot(folder) == before


def test_a_symlinked_template_deletes_nothing(tmp_path: Path) -> None:
    template = tmp_path / "template.toml"
    template.write_text(study_template(), encoding="utf-8")
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "study.toml").symlink_to(template)
    (folder / "notes.txt").write_text("keep\n")
    with pytest.raises(InputError, match=r"p/notes\.txt: no list"):
        remove_demo_folder(folder)
    assert (folder / "notes.txt").read_text() == "keep\n" and template.is_file()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda out: (out / "mine.txt").write_text("mine\n"), "mine.txt"),
        (lambda out: (out / "study.toml").write_text(study_template() + "# edited\n"), "study.toml"),
        (lambda out: (out / "data" / "train.jsonl").write_text('{"premise": "b"}\n'), "data/train.jsonl"),
        (lambda out: (out / "models" / "link").symlink_to(out.parent), "models/link"),
        (lambda out: os.mkfifo(out / "data" / "pipe"), "data/pipe"),
    ],
    ids=["a-new-file", "an-edited-study", "same-size-other-bytes", "a-symlink", "a-fifo"],
)
def test_anything_the_demo_did_not_write_is_named_and_nothing_is_deleted(tmp_path: Path, change, named) -> None:  # type: ignore[no-untyped-def]
    out = _demo_folder(tmp_path)
    change(out)
    before = _snapshot(out)
    with pytest.raises(InputError, match=rf"demo/{named}: not written by gengen demo \(1 such entry"):
        remove_demo_folder(out)
    assert _snapshot(out) == before


def test_the_working_folder_and_its_parents_are_never_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's second case: ``cd p && gengen demo --out . --fresh`` emptied the working folder."""
    out = _demo_folder(tmp_path)
    (out / "sub").mkdir()
    before = _snapshot(out)
    monkeypatch.chdir(out)
    with pytest.raises(InputError, match=r"^\.: is the working folder; --fresh does not delete it"):
        remove_demo_folder(Path("."))
    monkeypatch.chdir(out / "sub")
    with pytest.raises(InputError, match=r"^\.\.: is the working folder or holds it"):
        remove_demo_folder(Path(".."))
    assert _snapshot(out) == before


def test_a_symlinked_folder_is_named(tmp_path: Path) -> None:
    out = _demo_folder(tmp_path)
    (tmp_path / "link").symlink_to(out)
    with pytest.raises(InputError, match=r"link: a symbolic link \(to .*demo\); --fresh does not delete through"):
        remove_demo_folder(tmp_path / "link")
    assert (out / "study.toml").is_file()


def test_the_cli_refuses_in_one_line_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "study.toml").write_text(study_template(), encoding="utf-8")
    (folder / "data.csv").write_text("x\n1\n")
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(app, ["demo", "--out", ".", "--fresh"])
    assert result.exit_code == 2
    assert sorted(p.name for p in folder.iterdir()) == ["data.csv", "study.toml"]
