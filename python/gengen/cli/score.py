"""``gengen score``: score an existing series of checkpoints (local folders or hub revisions) without training.

Two backends: gengen's own scorer (the study's NLI test sets, the reference protocol's prompt and answers) and
lm-evaluation-harness (``--backend lm-eval --tasks hellaswag,arc_easy``: any lm-eval task, scored by lm-eval
itself, see :mod:`gengen.lm_eval_backend`). The library chooses the backend by name and checks its options
(:func:`gengen.scoring.score_request`); this module only gathers the checkpoints and passes the rest on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen.cli._common import TrustTaskCode, user_errors_exit

if TYPE_CHECKING:
    from gengen.scoring.checkpoints import Checkpoint


def parse_checkpoint_specs(specs: list[str]) -> list[Checkpoint]:
    """The checkpoints named by ``--checkpoints`` values, sorted by step.

    Each value is a checkpoint folder, a folder of checkpoint folders, or ``HUB_ID@rev1,rev2`` (revisions of a
    hub model, e.g. ``EleutherAI/pythia-160m@step1000,step2000``); a path that exists is always read as a path.
    """
    from gengen.errors import GengenError, InputError
    from gengen.scoring.checkpoints import find_checkpoints

    found: list[Checkpoint] = []
    for spec in specs:
        if Path(spec).exists():
            found.extend(find_checkpoints([spec]))
            continue
        model, at, revisions = spec.rpartition("@")
        if not at:
            raise InputError(
                f"--checkpoints: {spec}: no such checkpoint folder (hub revisions are written ID@rev1,rev2)"
            )
        names = [r.strip() for r in revisions.split(",") if r.strip()]
        if not model or not names:
            raise GengenError(f"--checkpoints: {spec!r}: expected HUB_ID@rev1,rev2 (e.g. org/model@step1000)")
        found.extend(find_checkpoints(model=model, revisions=names))
    steps = [c.step for c in found]
    repeated = sorted({s for s in steps if steps.count(s) > 1})
    if repeated:
        raise InputError(f"--checkpoints: step {repeated[0]} appears twice")
    return sorted(found, key=lambda c: c.step)


def _split(values: list[str] | None) -> tuple[str, ...]:
    """``--tasks a,b --tasks c`` -> ``("a", "b", "c")`` (order kept, repeats dropped)."""
    names: list[str] = []
    for value in values or ():
        for piece in value.split(","):
            if piece.strip() and piece.strip() not in names:
                names.append(piece.strip())
    return tuple(names)


@user_errors_exit
def score_command(
    name: Annotated[str, typer.Option("--name", help="The model's name in the store.")],
    config: Annotated[
        Path | None,
        typer.Argument(help="A study TOML file: its task, test sets and evaluation apply (optional with lm-eval)."),
    ] = None,
    checkpoints: Annotated[
        list[str] | None,
        typer.Option(
            "--checkpoints",
            help="A checkpoint folder, a folder of them, or HUB_ID@rev1,rev2 (repeatable).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="A hub id or folder whose --revisions are the checkpoints.")
    ] = None,
    revisions: Annotated[
        str | None, typer.Option(help="Comma-separated revisions of --model, e.g. step1000,step2000.")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            help="A scoring backend: gengen (the study's NLI test sets) or lm-eval (lm-eval tasks; default: the "
            "study's evaluation.backend)."
        ),
    ] = None,
    tasks: Annotated[
        list[str] | None,
        typer.Option("--tasks", help="lm-eval tasks, groups or tags, comma-separated (repeatable)."),
    ] = None,
    num_fewshot: Annotated[
        int | None, typer.Option("--num-fewshot", help="lm-eval: in-context examples (default: each task's).", min=0)
    ] = None,
    limit: Annotated[
        str | None, typer.Option(help="lm-eval: examples per task, a count or a fraction such as 0.1.")
    ] = None,
    batch_size: Annotated[
        str | None, typer.Option("--batch-size", help="lm-eval: requests per batch, or auto (default 8 or study's).")
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="auto, cpu, cuda or cuda:N (default: the study's training.device, else auto).")
    ] = None,
    precision: Annotated[
        str | None, typer.Option(help="lm-eval without a study: auto, fp32, bf16 or fp16 (as training.precision).")
    ] = None,
    include_path: Annotated[
        list[Path] | None, typer.Option("--include-path", help="lm-eval: a folder of task YAML files (repeatable).")
    ] = None,
    store: Annotated[
        Path | None, typer.Option(help="lm-eval without a study: the store (a folder or a .sqlite file).")
    ] = None,
    family: Annotated[str, typer.Option(help="Family label stored with the scores.")] = "",
    size: Annotated[str, typer.Option(help="Size label stored with the scores.")] = "",
    run: Annotated[str, typer.Option(help="Run key stored with the scores.")] = "main",
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer (default: the first checkpoint's).")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads for torch (default: torch's).", min=1)] = None,
    trust_task_code: TrustTaskCode = False,
) -> None:
    # In the docstring below, \\[ keeps rich (the help's renderer) from reading [lm-eval] as markup and dropping it.
    """Score checkpoints on the study's test sets; the step of each is the last number in its name.

    Scores are committed per checkpoint to the study's store; checkpoints already scored are skipped.

    With --backend lm-eval (or evaluation.backend = "lm-eval" in the study), lm-evaluation-harness scores
    every checkpoint on --tasks; every task x metric goes to the store with its standard error and number of
    examples, committed per checkpoint and task (a checkpoint already scored on a task is skipped). Without
    a study file give --store, e.g. gengen score --backend lm-eval --tasks arc_easy,piqa --checkpoints
    EleutherAI/pythia-160m@step1000,step2000 --store pythia. Needs pip install 'gengen\\[lm-eval]'.
    """
    from gengen.config import load_config
    from gengen.scoring import ScoreRequest, SeriesLabels, resolve_backend, score_request

    study = load_config(config) if config is not None else None
    chosen = resolve_backend(backend, study)
    found = _series(checkpoints, model, revisions)
    request = ScoreRequest(
        study=study,
        tasks=_split(tasks),
        num_fewshot=num_fewshot,
        limit=limit,
        batch_size=batch_size,
        include_paths=tuple(str(p) for p in include_path or ()),
        precision=precision,
        store=store,
        device=device,
        tokenizer=tokenizer,
        threads=threads,
        trust_task_code=trust_task_code,
    )
    labels = SeriesLabels(name, family, size, run)
    typer.echo(score_request(chosen, found, request, labels, log=typer.echo).summary())


def _series(checkpoints: list[str] | None, model: str | None, revisions: str | None) -> list[Checkpoint]:
    """The checkpoints of ``--checkpoints`` and ``--model``/``--revisions``, sorted by step."""
    from gengen.errors import GengenError

    if not checkpoints and model is None:
        raise GengenError("give --checkpoints or --model (with --revisions)")
    found = parse_checkpoint_specs(list(checkpoints or ()))
    if model is not None:
        from gengen.scoring.checkpoints import find_checkpoints

        extra = find_checkpoints(model=model, revisions=[r for r in (revisions or "").split(",") if r.strip()])
        found = _merge(found, extra)
    elif revisions:
        raise GengenError("--revisions needs --model (the hub id the revisions belong to)")
    return found


def _merge(first: list[Checkpoint], second: list[Checkpoint]) -> list[Checkpoint]:
    from gengen.errors import InputError

    steps = {c.step for c in first}
    clash = next((c.step for c in second if c.step in steps), None)
    if clash is not None:
        raise InputError(f"checkpoints: step {clash} appears twice")
    return sorted([*first, *second], key=lambda c: c.step)


def register(app: typer.Typer) -> None:
    """Add ``gengen score`` to the CLI."""
    app.command("score")(score_command)
