"""``gengen export``: write a store's score table to CSV or Parquet, long or wide."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import user_errors_exit
from gengen.errors import GengenError
from gengen.formats import EXPORT_FORMATS


@user_errors_exit
def export_command(
    store: Annotated[Path, typer.Argument(help="Study folder (or .sqlite file) of the store.")],
    out: Annotated[Path, typer.Argument(help="File to write (.csv, .parquet).")],
    wide: Annotated[
        bool, typer.Option("--wide", help="One row per checkpoint, one column per test set/metric.")
    ] = False,
    format: Annotated[
        str | None, typer.Option("--format", help="csv or parquet; taken from OUT's suffix if omitted.")
    ] = None,
    study: Annotated[
        list[str] | None, typer.Option(help="Only these studies (repeatable; a store can hold several).")
    ] = None,
    model: Annotated[list[str] | None, typer.Option(help="Only these models (repeatable).")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Only these runs (repeatable).")] = None,
    testset: Annotated[list[str] | None, typer.Option(help="Only these test sets (repeatable).")] = None,
    metric: Annotated[list[str] | None, typer.Option(help="Only these metrics (repeatable).")] = None,
) -> None:
    """Export a store's score table to CSV or Parquet (long: one score per row; --wide: one row per step)."""
    if format is not None and format not in EXPORT_FORMATS:
        raise GengenError(f"--format: expected {' or '.join(EXPORT_FORMATS)}, got {format!r}")
    filters = {
        name: values
        for name, values in (
            ("study", study),
            ("model", model),
            ("run", run),
            ("testset", testset),
            ("metric", metric),
        )
        if values
    }
    from gengen.export import export  # pandas: only when a table is written, not for --help

    rows = export(store, out, wide=wide, format=format, **filters)
    typer.echo(f"wrote {rows} rows to {out}")


def register(app: typer.Typer) -> None:
    """Add ``gengen export`` to the CLI."""
    app.command("export")(export_command)
