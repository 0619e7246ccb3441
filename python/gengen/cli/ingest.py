"""``gengen ingest``: import lm-evaluation-harness results, trainer logs and score tables into a store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gengen.cli._common import REQUIRED, CliOption, table_signature, user_errors_exit
from gengen.errors import GengenError
from gengen.store.formats import INGEST_FORMATS

if TYPE_CHECKING:
    from gengen.ingest.importer import IngestReport


def _mapping(items: list[str]) -> dict[str, str]:
    """``["testset=task", ...]`` as ``{"testset": "task"}``."""
    mapping: dict[str, str] = {}
    for item in items:
        name, sep, column = item.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise GengenError(f"--column: expected NAME=COLUMN (e.g. testset=task), got {item!r}")
        mapping[name.strip()] = column.strip()
    return mapping


FLAGS = {"columns": "--column"}
"""Library options of :func:`gengen.ingest.ingest` whose flag is not ``--`` and the name with dashes."""


#: The command's parameters, in the order of its help. All but --column (parsed into ``columns``) and --quiet
#: (``progress``) go on to :func:`gengen.ingest.ingest` as they are, under their own names.
OPTIONS: dict[str, CliOption] = {
    "paths": CliOption(list[Path], "Files or directories (searched recursively) to import.", REQUIRED, argument=True),
    "store": CliOption(Path, "Study folder (or .sqlite file) of the store.", REQUIRED, ("--store",)),
    "format": CliOption(
        str | None, f"Input format ({', '.join(INGEST_FORMATS)}); detected if omitted.", flags=("--format",)
    ),
    "model": CliOption(str | None, "Model of every score (overrides the files)."),
    "run": CliOption(str | None, "Run of every score (default: the file's, else 'main')."),
    "study": CliOption(str | None, "Study of every score (default: the store folder's name)."),
    "step": CliOption(
        int | None, "Step of a per-checkpoint results file, or of a table without a step column (runs: 0)."
    ),
    "step_pattern": CliOption(str | None, "Regex whose group 'step' (or first group) finds the step in each path."),
    "column": CliOption(list[str] | None, "Map a score-table column to a table column, NAME=COLUMN (repeatable)."),
    "pattern": CliOption(
        str | None,
        "Regex with groups 'testset' and 'metric' splitting score column names (default: the rule in "
        "docs/store.md, e.g. eval/downstream/arc_easy_acc -> arc_easy, acc).",
    ),
    "metric": CliOption(
        str | None, "Metric of a table whose column names carry none (each score column is a test set)."
    ),
    "run_column": CliOption(
        str | None, "Column naming the run of a per-run table (default: a run, Run or seed column)."
    ),
    "size": CliOption(str | None, "Model size of every score (e.g. 7B), for names whose size is not read from them."),
    "on_conflict": CliOption(str, "A score stored with a different value: error, replace or keep.", "error"),
    "allow_copies": CliOption(
        bool,
        "Store files whose scores the store already holds under another study (default: leave them out).",
        False,
        ("--allow-copies",),
    ),
    "quiet": CliOption(
        bool,
        "No progress bar and no read: line per file (notes, files left out and the summary still print).",
        False,
        ("--quiet", "-q"),
    ),
}


def _ingest(paths: list[Path], *, column: list[str] | None, on_conflict: str, quiet: bool, **options: Any) -> None:
    """Import score files into a store, all or nothing.

    Reads lm-evaluation-harness results (v0.3 and v0.4+), Hugging Face trainer_state.json, and CSV/Parquet
    tables (long, wide such as Weights & Biases exports, or one row per run), checks every score, then writes
    them all in one transaction. Each table without a model column is a model named after its file.
    """
    if on_conflict not in ("error", "replace", "keep"):
        raise GengenError(f"--on-conflict: expected error, replace or keep, got {on_conflict!r}")
    from gengen.ingest.importer import ingest  # pandas: only when a file is read, not for --help

    columns = _mapping(column or [])
    report = ingest(paths, columns=columns, on_conflict=on_conflict, progress=not quiet, **options)  # type: ignore[arg-type]
    _echo(report, quiet=quiet)


ingest_command = user_errors_exit(_ingest, flags=FLAGS)
ingest_command.__signature__ = table_signature(OPTIONS)  # type: ignore[attr-defined]


def _echo(report: IngestReport, *, quiet: bool = False) -> None:
    """What an import did: what each file held (not with ``quiet``), notes, files left out or skipped (stderr),
    the summary (stdout)."""
    for line in [] if quiet else report.took():
        typer.echo(f"read: {line}", err=True)
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    for path, (other, count) in report.copies.items():
        typer.echo(
            f"note: {path}: the store already holds its {count} scores as study {other!r}; left out (the same "
            f"file under another study name). --study {other} adds to that study; --allow-copies stores them again",
            err=True,
        )
    for skipped in report.skipped:
        typer.echo(f"skipped (not a known format): {skipped}", err=True)
    typer.echo(report.summary())


def register(app: typer.Typer) -> None:
    """Add ``gengen ingest`` to the CLI."""
    app.command("ingest")(ingest_command)
