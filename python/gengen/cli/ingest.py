"""``gengen ingest``: import lm-evaluation-harness results, trainer logs and score tables into a store."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen.cli._common import user_errors_exit
from gengen.errors import GengenError
from gengen.formats import INGEST_FORMATS

if TYPE_CHECKING:
    from gengen.ingest import IngestReport


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


@functools.partial(user_errors_exit, flags=FLAGS)
def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (searched recursively) to import.")],
    store: Annotated[Path, typer.Option("--store", help="Study folder (or .sqlite file) of the store.")],
    format: Annotated[
        str | None,
        typer.Option("--format", help=f"Input format ({', '.join(INGEST_FORMATS)}); detected if omitted."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model of every score (overrides the files).")] = None,
    run: Annotated[str | None, typer.Option(help="Run of every score (default: the file's, else 'main').")] = None,
    study: Annotated[str | None, typer.Option(help="Study of every score (default: the store folder's name).")] = None,
    step: Annotated[
        int | None,
        typer.Option(help="Step of a per-checkpoint results file, or of a table without a step column (runs: 0)."),
    ] = None,
    step_pattern: Annotated[
        str | None,
        typer.Option(help="Regex whose group 'step' (or first group) finds the step in each path."),
    ] = None,
    column: Annotated[
        list[str] | None,
        typer.Option(help="Map a score-table column to a table column, NAME=COLUMN (repeatable)."),
    ] = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            help="Regex with groups 'testset' and 'metric' splitting score column names (default: the rule in "
            "docs/store.md, e.g. eval/downstream/arc_easy_acc -> arc_easy, acc)."
        ),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(help="Metric of a table whose column names carry none (each score column is a test set)."),
    ] = None,
    run_column: Annotated[
        str | None,
        typer.Option(help="Column naming the run of a per-run table (default: a run, Run or seed column)."),
    ] = None,
    size: Annotated[
        str | None,
        typer.Option(help="Model size of every score (e.g. 7B), for names whose size is not read from them."),
    ] = None,
    on_conflict: Annotated[
        str, typer.Option(help="A score stored with a different value: error, replace or keep.")
    ] = "error",
    allow_copies: Annotated[
        bool,
        typer.Option(
            "--allow-copies",
            help="Store files whose scores the store already holds under another study (default: leave them out).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Import score files into a store, all or nothing.

    Reads lm-evaluation-harness results (v0.3 and v0.4+), Hugging Face trainer_state.json, and CSV/Parquet
    tables (long, wide such as Weights & Biases exports, or one row per run), checks every score, then writes
    them all in one transaction. Each table without a model column is a model named after its file.
    """
    if on_conflict not in ("error", "replace", "keep"):
        raise GengenError(f"--on-conflict: expected error, replace or keep, got {on_conflict!r}")
    from gengen.ingest import ingest  # pandas: only when a file is read, not for --help

    report = ingest(
        paths,
        store,
        format=format,
        model=model,
        run=run,
        study=study,
        step=step,
        step_pattern=step_pattern,
        columns=_mapping(column or []),
        pattern=pattern,
        metric=metric,
        run_column=run_column,
        size=size,
        on_conflict=on_conflict,  # type: ignore[arg-type]
        allow_copies=allow_copies,
        progress=not quiet,
    )
    _echo(report)


def _echo(report: IngestReport) -> None:
    """What an import did: what each file held, notes, files left out or skipped (stderr), the summary (stdout)."""
    for line in report.took():
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
