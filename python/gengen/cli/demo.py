"""``gengen demo``: the bundled offline study, end to end, in a few minutes on a CPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import user_errors_exit


@user_errors_exit
def demo_command(
    out: Annotated[Path, typer.Option(help="Folder for the demo's data, models, store and report.")] = Path(
        "gengen-demo"
    ),
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Delete --out first (else an earlier demo resumes): only files the demo wrote, unchanged; "
            "any other file there makes it refuse.",
        ),
    ] = False,
    jobs: Annotated[
        int, typer.Option(help="Runs trained at once, one process each (one per core is fastest).", min=1)
    ] = 2,
    threads: Annotated[
        int, typer.Option(help="CPU threads for torch per process; 1 suits the tiny models.", min=1)
    ] = 1,
) -> None:
    """Fine-tune tiny OPT and OLMo2 models on a templated NLI task and score six OOD shifts, offline.

    Writes data, models and gengen.sqlite to --out, then the analysis report (or a score summary).
    """
    from gengen.demo import run_demo

    run_demo(out, fresh=fresh, jobs=jobs, threads=threads, log=typer.echo, progress=sys.stderr.isatty())


def register(app: typer.Typer) -> None:
    """Add ``gengen demo`` to the CLI."""
    app.command("demo")(demo_command)
