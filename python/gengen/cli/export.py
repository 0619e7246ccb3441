"""``gengen export``: write a store's score table to CSV or Parquet, long or wide."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import user_errors_exit
from gengen.errors import GengenError
from gengen.store.formats import EXPORT_FORMATS


@user_errors_exit
def export_command(
    store: Annotated[
        Path, typer.Argument(help="Study folder (or .sqlite file) of the store; with --table, an analysis folder.")
    ],
    out: Annotated[
        Path, typer.Argument(help="File to write (.csv, .parquet; with --table .tex, .md, or - for stdout).")
    ],
    wide: Annotated[
        bool, typer.Option("--wide", help="One row per checkpoint, one column per test set/metric.")
    ] = False,
    format: Annotated[
        str | None,
        typer.Option(
            "--format", help="csv or parquet (latex or markdown with --table); taken from OUT's suffix if omitted."
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option(
            help="A paper table of an analysis folder instead of the scores: verdict (verdict_pairs.csv) or pairs "
            "(pairs.csv), strongest first."
        ),
    ] = None,
    top: Annotated[int, typer.Option(help="Rows of a --table, strongest first (0: all).", min=0)] = 20,
    study: Annotated[
        list[str] | None, typer.Option(help="Only these studies (repeatable; a store can hold several).")
    ] = None,
    model: Annotated[list[str] | None, typer.Option(help="Only these models (repeatable).")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Only these runs (repeatable).")] = None,
    testset: Annotated[list[str] | None, typer.Option(help="Only these test sets (repeatable).")] = None,
    metric: Annotated[list[str] | None, typer.Option(help="Only these metrics (repeatable).")] = None,
) -> None:
    """Export a store's score table to CSV or Parquet (long: one score per row; --wide: one row per step), or with
    --table a paper table of an analysis folder as booktabs LaTeX or Markdown."""
    if table is not None:
        _paper_table(store, out, table, format, top)
        return
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
    from gengen.store.export import export  # pandas: only when a table is written, not for --help

    rows = export(store, out, wide=wide, format=format, **filters)
    typer.echo(f"wrote {rows} rows to {out}")


def _paper_table(folder: Path, out: Path, table: str, format: str | None, top: int) -> None:
    from gengen._files import write_text_atomic
    from gengen.report.paper_tables import TABLE_FORMATS, paper_table

    if format is None:
        by_suffix = {suffix: name for name, suffix in TABLE_FORMATS.items()}
        format = by_suffix.get(out.suffix.lower())
        if format is None:
            raise GengenError(f"--format: name latex or markdown (OUT {str(out)!r} has no .tex or .md suffix)")
    text = paper_table(folder, table, format, top=top)  # type: ignore[arg-type]
    if str(out) == "-":
        typer.echo(text, nl=False)
        return
    write_text_atomic(out, text)
    typer.echo(f"wrote the {table} table ({format}) to {out}")


def register(app: typer.Typer) -> None:
    """Add ``gengen export`` to the CLI."""
    app.command("export")(export_command)
