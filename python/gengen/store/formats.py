"""The file formats gengen reads and writes: the one table of ingest formats, and the choice lists derived from it.

Kept apart from :mod:`gengen.ingest` and :mod:`gengen.store.export` (which import pandas) so that the CLI can list
the choices in its help without loading them: an ingest format's detector and parser are named here as
``"module:function"`` and imported only when a file is read.

Adding an ingest format is one :class:`IngestFormatEntry` in :data:`INGEST_FORMAT_TABLE` (and the module
holding its two functions): ``--format`` and ``ingest(format=...)`` accept it, content detection tries it in
table order, and a file of its suffix that matches nothing names it in the error. See docs/extending.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = [
    "EXPORT_FORMATS",
    "FORMAT_GROUPS",
    "INGEST_FORMATS",
    "INGEST_FORMAT_TABLE",
    "ExportFormat",
    "IngestFormatEntry",
    "ingest_entry",
    "ingest_format_names",
    "load_function",
]


@dataclass(frozen=True)
class IngestFormatEntry:
    """One format ``gengen ingest`` reads.

    Attributes
    ----------
    name : str
        The ``--format`` / ``format=`` value.
    reads : {"json", "table"}
        JSON files (``.json``), or tables (CSV, TSV, Parquet) read by :func:`gengen.ingest.tables.read_table`.
    detect : str
        ``"module:function"`` telling a file of this format from its content: for JSON, ``f(data) -> bool``
        on the parsed document; for tables, ``f(frame) -> bool`` on the table as read.
    parse : str
        ``"module:function"`` returning the file's :class:`gengen.ingest._common.Parsed` scores: for JSON,
        ``f(path, data, options)``; for tables, ``f(path, frame, labels, options, notes)``.
    what : str
        What a file of this format is, for messages (``"a trainer_state.json"``).
    needs : str
        What its content must hold, for messages (``"'log_history' list"``: "... no 'log_history' list").
    """

    name: str
    reads: Literal["json", "table"]
    detect: str
    parse: str
    what: str
    needs: str


INGEST_FORMAT_TABLE: tuple[IngestFormatEntry, ...] = (
    IngestFormatEntry(
        "trainer-state",
        "json",
        "gengen.ingest.trainer_state:looks_like",
        "gengen.ingest.trainer_state:parse",
        "a trainer_state.json",
        "'log_history' list",
    ),
    IngestFormatEntry(
        "lighteval",
        "json",
        "gengen.ingest.lighteval:looks_like",
        "gengen.ingest.lighteval:parse",
        "a lighteval results file",
        "'config_general' object",
    ),
    IngestFormatEntry(
        "lm-eval-v0.4",
        "json",
        "gengen.ingest.lm_eval:looks_like_v04",
        "gengen.ingest.lm_eval:parse_v04",
        "an lm-evaluation-harness results file",
        "'results' object of tasks",
    ),
    IngestFormatEntry(
        "lm-eval-v0.3",
        "json",
        "gengen.ingest.lm_eval:looks_like_v03",
        "gengen.ingest.lm_eval:parse_v03",
        "an lm-evaluation-harness results file",
        "'results' object of tasks",
    ),
    IngestFormatEntry(
        "long",
        "table",
        "gengen.ingest.tables:looks_long",
        "gengen.ingest.tables:parse_long",
        "a long table",
        "columns testset, metric, value",
    ),
    IngestFormatEntry(
        "wide",
        "table",
        "gengen.ingest.tables:looks_wide",
        "gengen.ingest.tables:parse_wide",
        "a wide one",
        "a step column: step, _step, global_step...",
    ),
    IngestFormatEntry(
        "runs",
        "table",
        "gengen.ingest.tables:looks_runs",
        "gengen.ingest.tables:parse_runs",
        "one row per run",
        "a run or seed column",
    ),
)
"""Every ingest format, in the order content detection tries them."""

FORMAT_GROUPS: dict[str, tuple[str, ...]] = {"lm-eval": ("lm-eval-v0.3", "lm-eval-v0.4")}
"""Format names that stand for any of several formats, told apart by the content."""


def ingest_format_names() -> tuple[str, ...]:
    """The ``format`` values :func:`gengen.ingest.ingest` accepts: the groups, then the table's formats.

    Returns
    -------
    tuple of str
    """
    return (*FORMAT_GROUPS, *(entry.name for entry in INGEST_FORMAT_TABLE))


INGEST_FORMATS: tuple[str, ...] = ingest_format_names()
"""The ``format`` values :func:`gengen.ingest.ingest` accepts (for the CLI's help)."""

ExportFormat = Literal["csv", "parquet"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
"""The file formats :func:`gengen.store.export.export` writes."""


def ingest_entry(name: str) -> IngestFormatEntry:
    """The entry of the ingest format ``name`` (one of :data:`INGEST_FORMAT_TABLE`; not a group).

    Parameters
    ----------
    name : str
        A format name.

    Returns
    -------
    IngestFormatEntry

    Raises
    ------
    KeyError
        ``name`` is no format of the table.
    """
    for entry in INGEST_FORMAT_TABLE:
        if entry.name == name:
            return entry
    raise KeyError(name)


def load_function(reference: str) -> Callable[..., Any]:
    """The function an entry names as ``"module:function"`` (its module imported now, not with the CLI).

    Parameters
    ----------
    reference : str
        E.g. ``"gengen.ingest.tables:parse_long"``.

    Returns
    -------
    callable
    """
    module, _, name = reference.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function
