"""Issue 36: nothing a user owns is deleted, escaped from or silently changed.

``gengen demo --fresh`` on folders it did not write (the demo template beside the user's files, a symbolic link
to the template, the working folder, a symbolic link to a folder); ``gengen report`` through a ``figures/`` link
out of the analysis folder; stores a failed command must leave byte-identical (schema versions gengen does not
know, missing tables, run labels out of range); values that passed one check and tripped a later step.
``after`` checks that the user's files are still there, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .case import Case


def _template(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        from gengen.demo import study_template

        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(study_template(), encoding="utf-8")

    return setup


def _linked_template(folder: Path) -> None:
    _template("template.toml")(folder)
    (folder / "p").mkdir()
    (folder / "p" / "study.toml").symlink_to(folder / "template.toml")
    (folder / "p" / "zz-notes.txt").write_text("keep me\n")


def _kept(*names: str) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        for name in names:
            assert (folder / name).exists() or (folder / name).is_symlink(), f"{name} was deleted"

    return check


def _linked_folder(folder: Path) -> None:
    _template("real/study.toml")(folder)
    (folder / "link").symlink_to(folder / "real")


def _demo_cases() -> list[Case]:
    return [
        Case(
            "safety-demo-fresh-template-beside-user-files",
            ["demo", "--out", "{tmp}/p", "--fresh"],
            "{tmp}/p/a-thesis.tex: no list of the files the demo wrote",
            files={"p/a-thesis.tex": "years of work\n"},
            setup=_template("p/study.toml"),
            after=_kept("p/a-thesis.tex", "p/study.toml"),
        ),
        Case(
            "safety-demo-fresh-symlinked-template",
            ["demo", "--out", "{tmp}/p", "--fresh"],
            "{tmp}/p/study.toml: no list of the files the demo wrote",
            setup=_linked_template,
            after=_kept("p/study.toml", "p/zz-notes.txt", "template.toml"),
        ),
        Case(
            "safety-demo-fresh-symlinked-folder",
            ["demo", "--out", "{tmp}/link", "--fresh"],
            "{tmp}/link: a symbolic link",
            setup=_linked_folder,
            after=_kept("real/study.toml", "link"),
        ),
        Case(
            "safety-demo-fresh-the-working-folder",
            ["demo", "--out", ".", "--fresh"],
            ".: is the working folder",
            files={"notes.txt": "keep me\n"},
            setup=_template("study.toml"),
            after=_kept("notes.txt", "study.toml"),
        ),
        Case(
            "safety-demo-fresh-a-file",
            ["demo", "--out", "{tmp}/notes.txt", "--fresh"],
            "{tmp}/notes.txt: not a folder",
            files={"notes.txt": "keep me\n"},
            after=_kept("notes.txt"),
        ),
    ]


def cases() -> list[Case]:
    """Every issue-36 case."""
    return [*_demo_cases()]
