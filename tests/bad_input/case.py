"""One bad input: the files it needs, the command it runs, and the culprit its error line must name.

Every ``cases_*.py`` module in this folder exposes ``cases() -> list[Case]``; ``test_corpus.py`` runs them all
and asserts, for each: exit status 2, exactly one ``error:`` line on stderr naming ``culprit``, no traceback,
and every store in the case folder unchanged (a dump before and after).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """A bad input for the ``gengen`` CLI.

    Attributes
    ----------
    name : str
        Unique, readable id (used as the pytest id), e.g. ``"ingest-csv-inf-score"``.
    argv : list of str
        Arguments after ``gengen``; the text ``{tmp}`` in any argument is replaced by the case's folder.
    culprit : str
        Text the ``error:`` line must contain (the file, row, column or option at fault), compared
        case-insensitively; ``{tmp}`` is replaced as in ``argv``.
    files : dict of str to bytes or str
        Files to write into the case's folder before the command runs (relative path -> content).
    setup : callable, optional
        Extra preparation given the case's folder (build a store, make a folder read-only, ...), run after
        ``files`` are written.
    after : callable, optional
        A check of the case's folder once the command has run (a planted payload did not run, a file was not
        replaced, nothing was written outside the folder); it raises AssertionError when the check fails.
    """

    name: str
    argv: list[str]
    culprit: str
    files: dict[str, bytes | str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    after: Callable[[Path], None] | None = None
