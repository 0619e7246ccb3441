"""``gengen score``: score an existing series of checkpoints (local folders or hub revisions) without training."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import user_errors_exit


@user_errors_exit
def score_command(
    config: Annotated[Path, typer.Argument(help="A study TOML file: its task, test sets and evaluation apply.")],
    name: Annotated[str, typer.Option("--name", help="The model's name in the store.")],
    checkpoints: Annotated[
        list[Path] | None,
        typer.Option("--checkpoints", help="A checkpoint folder, or a folder of them (repeatable)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="A hub id or folder whose --revisions are the checkpoints.")
    ] = None,
    revisions: Annotated[
        str | None, typer.Option(help="Comma-separated revisions of --model, e.g. step1000,step2000.")
    ] = None,
    family: Annotated[str, typer.Option(help="Family label stored with the scores.")] = "",
    size: Annotated[str, typer.Option(help="Size label stored with the scores.")] = "",
    run: Annotated[str, typer.Option(help="Run key stored with the scores.")] = "main",
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer (default: the first checkpoint's).")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads for torch (default: torch's).", min=1)] = None,
) -> None:
    """Score checkpoints on the study's test sets; the step of each is the last number in its name.

    Scores are committed per checkpoint to the study's store; checkpoints already scored are skipped.
    """
    from gengen.config import load_config
    from gengen.errors import GengenError

    study = load_config(config)
    if not checkpoints and model is None:
        raise GengenError("give --checkpoints or --model (with --revisions)")
    import torch

    from gengen.score import find_checkpoints, score_checkpoints

    if threads is not None:
        torch.set_num_threads(threads)
    found = find_checkpoints(
        checkpoints or (), model=model, revisions=[r for r in (revisions or "").split(",") if r.strip()]
    )
    rows = score_checkpoints(
        study, found, model_name=name, family=family, size=size, run=run, tokenizer_path=tokenizer, log=typer.echo
    )
    typer.echo(f"{len(found)} checkpoints, {len(rows)} scores written to {study.output}")


def register(app: typer.Typer) -> None:
    """Add ``gengen score`` to the CLI."""
    app.command("score")(score_command)
