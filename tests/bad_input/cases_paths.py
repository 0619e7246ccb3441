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
from .cases_cli import _both, _read_only, _store


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
            "--format: parquet into {tmp}/out.csv",
            setup=_both(_store, _file("out.csv")),
            after=_unchanged("out.csv"),
        ),
    ]


def cases() -> list[Case]:
    """Every path case."""
    return [*_export_cases()]
