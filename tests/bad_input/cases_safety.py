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
from .cases_cli import _analysis


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


def _relative_figures_link(folder: Path) -> None:
    _analysis(folder)
    (folder / "elsewhere").mkdir()
    (folder / "analysis" / "figures").symlink_to("../elsewhere")


def _figure_file_link(folder: Path) -> None:
    _analysis(folder)
    (folder / "elsewhere").mkdir()
    (folder / "elsewhere" / "mine.png").write_text("keep me\n")
    (folder / "analysis" / "figures").mkdir()
    (folder / "analysis" / "figures" / "agreement.png").symlink_to(folder / "elsewhere" / "mine.png")


def _relative_store_link(folder: Path) -> None:
    (folder / "elsewhere").mkdir()
    (folder / "study").mkdir()
    (folder / "study" / "gengen.sqlite").symlink_to("../elsewhere/new.sqlite")


def _file_link(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        _analysis(folder)
        (folder / "elsewhere").mkdir(exist_ok=True)
        (folder / "elsewhere" / "mine.txt").write_text("keep me\n")
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(folder / "elsewhere" / "mine.txt")

    return setup


def _demo_folder_link(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / "elsewhere").mkdir()
        (folder / "demo").mkdir()
        (folder / "demo" / name).symlink_to("../elsewhere")

    return setup


def _elsewhere_unchanged(folder: Path) -> None:
    found = {
        str(path.relative_to(folder / "elsewhere")): path.read_bytes()
        for path in (folder / "elsewhere").rglob("*")
        if path.is_file()
    }
    assert set(found) <= {"mine.png", "mine.txt"}, f"written outside the folder: {sorted(found)}"
    assert all(content == b"keep me\n" for content in found.values()), "a file outside the folder was changed"


def _path_cases() -> list[Case]:
    """A symbolic link planted at every folder (and a file in each) a command writes into, named relatively:
    the check joined a relative path to its folder twice and let ``figures -> ../victim`` through."""
    out = [
        Case(
            "safety-report-relative-figures-link",
            ["report", "analysis", "-q"],
            "analysis/figures: leads outside analysis",
            setup=_relative_figures_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-report-figure-file-link",
            ["report", "analysis", "-q"],
            "analysis/figures/agreement.png: leads outside analysis/figures",
            setup=_figure_file_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-ingest-relative-store-link",
            ["ingest", "in.csv", "--store", "study", "-q"],
            "study/gengen.sqlite: leads outside study",
            files={"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"},
            setup=_relative_store_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-compare-file-link",
            ["compare", "analysis", "--out", "analysis"],
            "analysis/compare_pairs.csv: leads outside analysis",
            setup=_file_link("analysis/compare_pairs.csv"),
            after=_elsewhere_unchanged,
        ),
    ]
    for name in ("data", "models", "report"):
        out.append(
            Case(
                f"safety-demo-{name}-link",
                ["demo", "--out", "demo"],
                f"demo/{name}: leads outside demo",
                setup=_demo_folder_link(name),
                after=_elsewhere_unchanged,
            )
        )
    return out


def cases() -> list[Case]:
    """Every issue-36 case."""
    return [*_demo_cases(), *_path_cases()]
