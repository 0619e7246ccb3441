"""Paths that would destroy a store or leave the user's folder (issue 26, items 1 and 3).

``gengen export`` into the store itself (directly, by a relative path, through a symbolic link), into another
store, a read-only file or a FIFO, or in a format its suffix contradicts; study, store and analysis folders
whose ``runs/``, ``gengen.sqlite`` or ``figures/`` lead elsewhere. The corpus checks that every store in the
case folder is unchanged; ``after`` checks that nothing was written outside it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .case import Case
from .cases_cli import IN_CSV, _analysis, _both, _read_only, _store
from .cases_untrusted import EXECUTOR_STUDY


def _link(name: str, target: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / name).symlink_to(target)

    return setup


def _file(name: str, text: str = "keep me\n") -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / name).write_text(text)

    return setup


def _fifo(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        os.mkfifo(folder / name)

    return setup


def _unchanged(name: str, text: str = "keep me\n") -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        assert (folder / name).read_text() == text, f"{name} was replaced"

    return check


def _export_cases() -> list[Case]:
    store = "{tmp}/study/gengen.sqlite"
    is_store = "is the store being exported"
    return [
        Case(
            "export-out-is-the-store",
            ["export", "{tmp}/study", store, "--format", "csv"],
            f"{store}: {is_store}",
            setup=_store,
        ),
        Case(
            "export-out-is-the-store-relative",
            ["export", "study", "study/gengen.sqlite", "--format", "parquet"],
            f"study/gengen.sqlite: {is_store}",
            setup=_store,
        ),
        Case(
            "export-out-is-the-store-dot-dot",
            ["export", "study", "study/../study/gengen.sqlite", "--format", "csv"],
            f"study/../study/gengen.sqlite: {is_store}",
            setup=_store,
        ),
        Case(
            "export-out-is-the-store-through-a-folder-link",
            ["export", "{tmp}/study", "{tmp}/alias/gengen.sqlite", "--format", "csv"],
            f"{{tmp}}/alias/gengen.sqlite: {is_store}",
            setup=_both(_store, _link("alias", "study")),
        ),
        Case(
            "export-out-is-a-link-to-the-store",
            ["export", "{tmp}/study", "{tmp}/link.csv"],
            "{tmp}/link.csv: a symbolic link",
            setup=_both(_store, _link("link.csv", "study/gengen.sqlite")),
        ),
        Case(
            "export-out-is-another-store",
            ["export", "{tmp}/study", "{tmp}/other/gengen.sqlite", "--format", "csv"],
            "{tmp}/other/gengen.sqlite: an SQLite database",
            setup=_both(_store, lambda f: _store(f, "other")),
        ),
        Case(
            "export-out-is-a-read-only-file",
            ["export", "{tmp}/study", "{tmp}/ro.csv"],
            "{tmp}/ro.csv: a read-only file",
            setup=_both(_store, _file("ro.csv"), lambda f: _read_only(f / "ro.csv")),
            after=_unchanged("ro.csv"),
        ),
        Case(
            "export-out-is-a-fifo",
            ["export", "{tmp}/study", "{tmp}/pipe.csv"],
            "{tmp}/pipe.csv: not a regular file",
            setup=_both(_store, _fifo("pipe.csv")),
        ),
        Case(
            "export-format-contradicts-suffix",
            ["export", "{tmp}/study", "{tmp}/out.csv", "--format", "parquet"],
            "--format parquet into {tmp}/out.csv",
            setup=_both(_store, _file("out.csv")),
            after=_unchanged("out.csv"),
        ),
    ]


def _elsewhere(folder: Path) -> Path:
    """A folder outside the case folder's tree of writable outputs (a sibling of what the command writes)."""
    path = folder / "elsewhere"
    path.mkdir(exist_ok=True)
    return path


def _nothing_elsewhere(folder: Path) -> None:
    written = sorted(str(p.relative_to(folder)) for p in (folder / "elsewhere").rglob("*"))
    assert written == [], f"written outside the folder: {written}"


def _runs_link(folder: Path) -> None:
    (folder / "study.toml").write_text(EXECUTOR_STUDY.replace('kind = "slurm"', 'kind = "local"'))
    (folder / "out").mkdir()
    (folder / "out" / "runs").symlink_to(_elsewhere(folder))


def _store_link(target: str, *, existing: bool) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        _elsewhere(folder)
        if existing:
            _store(folder / "elsewhere", "other")
        (folder / "study").mkdir()
        (folder / "study" / "gengen.sqlite").symlink_to(folder / target)

    return setup


def _figures_link(folder: Path) -> None:
    _analysis(folder)
    (folder / "analysis" / "figures").symlink_to(_elsewhere(folder))


def _folder_cases() -> list[Case]:
    run_dir = "{tmp}/out/runs/m/seed-0: leads outside {tmp}/out"
    return [
        Case(
            "folder-runs-is-a-link-run",
            ["run", "{tmp}/study.toml"],
            run_dir,
            setup=_runs_link,
            after=_nothing_elsewhere,
        ),
        Case("folder-runs-is-a-link-status", ["status", "{tmp}/study.toml"], run_dir, setup=_runs_link),
        Case(
            "folder-store-link-dangles",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/study", "-q"],
            "{tmp}/study/gengen.sqlite: leads outside {tmp}/study",
            files=IN_CSV,
            setup=_store_link("elsewhere/new.sqlite", existing=False),
            after=_nothing_elsewhere,
        ),
        Case(
            "folder-store-link-leaves-the-folder",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/study", "-q"],
            "{tmp}/study/gengen.sqlite: leads outside {tmp}/study",
            files=IN_CSV,
            setup=_store_link("elsewhere/other/gengen.sqlite", existing=True),
        ),
        Case(
            "folder-store-file-link-dangles",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/study/gengen.sqlite", "-q"],
            "{tmp}/study/gengen.sqlite: a symbolic link to a missing file",
            files=IN_CSV,
            setup=_store_link("elsewhere/new.sqlite", existing=False),
            after=_nothing_elsewhere,
        ),
        Case(
            "folder-figures-is-a-link",
            ["report", "{tmp}/analysis", "-q"],
            "{tmp}/analysis/figures: leads outside {tmp}/analysis",
            setup=_figures_link,
            after=_nothing_elsewhere,
        ),
    ]


def _site_figures_link(folder: Path) -> None:
    (folder / "site").mkdir()
    (folder / "site" / "page_figures").symlink_to(_elsewhere(folder))


def _report_cases() -> list[Case]:
    # Without -q: the progress lines would come before the error, had --out not been checked first.
    return [
        Case(
            "report-out-under-a-file-checked-before-progress",
            ["report", "{tmp}/analysis", "--out", "{tmp}/blocker/sub"],
            "{tmp}/blocker",
            setup=_both(_analysis, _file("blocker")),
        ),
        Case(
            "report-out-figures-link-checked-before-progress",
            ["report", "{tmp}/analysis", "--out", "{tmp}/site/page.html"],
            "{tmp}/site/page_figures: leads outside {tmp}/site",
            setup=_both(_analysis, _site_figures_link),
            after=_nothing_elsewhere,
        ),
        Case(
            "report-out-is-a-read-only-file",
            ["report", "{tmp}/analysis", "--out", "{tmp}/ro.html"],
            "{tmp}/ro.html: a read-only file",
            setup=_both(_analysis, _file("ro.html"), lambda f: _read_only(f / "ro.html")),
            after=_unchanged("ro.html"),
        ),
        Case(
            "report-out-is-a-fifo",
            ["report", "{tmp}/analysis", "--out", "{tmp}/pipe.html"],
            "{tmp}/pipe.html: not a regular file",
            setup=_both(_analysis, _fifo("pipe.html")),
        ),
    ]


def _study_file_cases() -> list[Case]:
    """A study file that is a FIFO (reading it would block), a device that never ends, or a folder: each was
    reported as 'no such file'."""
    out = []
    for command in ("run", "train", "status", "plan"):
        out.append(
            Case(
                f"study-file-fifo-{command}",
                [command, "{tmp}/study.toml"],
                "{tmp}/study.toml: not a regular file",
                setup=_fifo("study.toml"),
            )
        )
    out.append(Case("study-file-dev-zero-run", ["run", "/dev/zero"], "/dev/zero: not a regular file"))
    out.append(
        Case(
            "study-file-folder-train",
            ["train", "{tmp}/study.toml"],
            "{tmp}/study.toml: a folder",
            setup=lambda f: (f / "study.toml").mkdir(),
        )
    )
    return out


def _run_study(folder: Path) -> None:
    (folder / "study.toml").write_text(EXECUTOR_STUDY.replace('kind = "slurm"', 'kind = "local"'))


def _nothing_beside_the_study(folder: Path) -> None:
    """``gengen run --out`` refused: nothing was written, neither there nor in the study's own output."""
    assert not (folder / "out").exists(), "the study's [study] output was written"


def _run_out_cases() -> list[Case]:
    """``gengen run --out`` that cannot be the study's output folder: one line before anything is written."""
    out = []
    for dry in ((), ("--dry-run",)):
        suffix = "-dry-run" if dry else ""
        out += [
            Case(
                f"run-out-is-a-file{suffix}",
                ["run", "{tmp}/study.toml", "--out", "{tmp}/blocker", *dry],
                "--out: {tmp}/blocker is a file, expected a folder",
                setup=_both(_run_study, _file("blocker")),
                after=_both(_unchanged("blocker"), _nothing_beside_the_study),
            ),
            Case(
                f"run-out-under-a-file{suffix}",
                ["run", "{tmp}/study.toml", "--out", "{tmp}/blocker/study", *dry],
                "--out: {tmp}/blocker is a file, so the folder {tmp}/blocker/study cannot be created",
                setup=_both(_run_study, _file("blocker")),
                after=_both(_unchanged("blocker"), _nothing_beside_the_study),
            ),
        ]
    out.append(
        Case(
            "run-out-read-only-folder",
            ["run", "{tmp}/study.toml", "--out", "{tmp}/ro"],
            "{tmp}/ro",
            setup=_both(_run_study, lambda f: (f / "ro").mkdir(), lambda f: _read_only(f / "ro")),
            after=_nothing_beside_the_study,
        )
    )
    return out


def cases() -> list[Case]:
    """Every path case."""
    return [*_export_cases(), *_folder_cases(), *_report_cases(), *_study_file_cases(), *_run_out_cases()]
