"""Malformed executor state files (``runs/<model>/<run>/state.json``) beyond those of ``cases_untrusted``.

Bytes that are not UTF-8, a folder or a FIFO where the file should be (a FIFO would block a plain read forever),
JSON nested past the parser's depth, a count written as ``1e400``: each is one ``error:`` line naming the file,
for ``gengen status`` (which only reads the states), ``gengen run`` and ``gengen train`` (which resume from them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .case import Case
from .cases_untrusted import EXECUTOR_STUDY

STATE = "{tmp}/out/runs/m/seed-0/state.json"


def _state(write: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        from gengen.study.config import load_config

        (folder / "study.toml").write_text(EXECUTOR_STUDY)
        config = load_config(folder / "study.toml")
        path = config.run_dir(config.runs()[0]) / "state.json"
        path.parent.mkdir(parents=True)
        write(path)

    return setup


MALFORMED: dict[str, tuple[Callable[[Path], None], str]] = {
    "not-utf8": (lambda p: p.write_bytes(b'\xff\xfe{"status": "running"}'), "not UTF-8 text"),
    "a-folder": (lambda p: p.mkdir(), "not a regular file"),
    "a-fifo": (lambda p: os.mkfifo(p), "not a regular file"),
    "nested-deep": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "JSON nested too deeply"),
    "attempt-1e400": (lambda p: p.write_text('{"status": "pending", "attempt": 1e400}'), "attempt: expected int"),
    "empty": (lambda p: p.write_text(""), "not valid JSON"),
}


def cases() -> list[Case]:
    """Every malformed-state case, for the commands that read run states."""
    return [
        Case(
            f"cli-{command}-state-{label}",
            [command, "{tmp}/study.toml"],
            f"{STATE}: {message}",
            setup=_state(write),
        )
        for label, (write, message) in MALFORMED.items()
        for command in ("status", "run", "train")
    ]
