"""``gengen score``: score an existing series of checkpoints (local folders or hub revisions) without training.

Two backends: gengen's own scorer (the study's NLI test sets, the reference protocol's prompt and answers) and
lm-evaluation-harness (``--backend lm-eval --tasks hellaswag,arc_easy``: any lm-eval task, scored by lm-eval
itself, see :mod:`gengen.scoring.lm_eval`). The library chooses the backend by name and checks its options
(:func:`gengen.scoring.score_request`); this module only gathers the checkpoints and passes the rest on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gengen.cli._common import REQUIRED, TRUST_TASK_CODE, CliOption, table_signature, user_errors_exit

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


#: The command's parameters, in the order of its help. Those that :func:`_score` does not name are fields of
#: :class:`gengen.scoring.ScoreRequest` and go on to it as they are.
OPTIONS: dict[str, CliOption] = {
    "name": CliOption(str, "The model's name in the store.", REQUIRED, ("--name",)),
    "config": CliOption(
        Path | None,
        "A study TOML file: its task, test sets and evaluation apply (optional with lm-eval).",
        argument=True,
    ),
    "checkpoints": CliOption(
        list[str] | None,
        "A checkpoint folder, a folder of them, or HUB_ID@rev1,rev2 (repeatable).",
        flags=("--checkpoints",),
    ),
    "model": CliOption(str | None, "A hub id or folder whose --revisions are the checkpoints.", flags=("--model",)),
    "revisions": CliOption(str | None, "Comma-separated revisions of --model, e.g. step1000,step2000."),
    "backend": CliOption(
        str | None,
        "A scoring backend: gengen (the study's NLI test sets) or lm-eval (lm-eval tasks; default: the "
        "study's evaluation.backend).",
    ),
    "tasks": CliOption(
        list[str] | None, "lm-eval tasks, groups or tags, comma-separated (repeatable).", flags=("--tasks",)
    ),
    "num_fewshot": CliOption(
        int | None, "lm-eval: in-context examples (default: each task's).", flags=("--num-fewshot",), min=0
    ),
    "limit": CliOption(str | None, "lm-eval: examples per task, a count or a fraction such as 0.1."),
    "batch_size": CliOption(
        str | None, "lm-eval: requests per batch, or auto (default 8 or study's).", flags=("--batch-size",)
    ),
    "device": CliOption(str | None, "auto, cpu, cuda or cuda:N (default: the study's training.device, else auto)."),
    "precision": CliOption(str | None, "lm-eval without a study: auto, fp32, bf16 or fp16 (as training.precision)."),
    "include_path": CliOption(
        list[Path] | None, "lm-eval: a folder of task YAML files (repeatable).", flags=("--include-path",)
    ),
    "store": CliOption(Path | None, "lm-eval without a study: the store (a folder or a .sqlite file)."),
    "family": CliOption(str, "Family label stored with the scores.", ""),
    "size": CliOption(str, "Size label stored with the scores.", ""),
    "run": CliOption(str, "Run key stored with the scores.", "main"),
    "tokenizer": CliOption(str | None, "Tokenizer (default: the first checkpoint's)."),
    "threads": CliOption(int | None, "CPU threads for torch (default: torch's).", min=1),
    "trust_task_code": TRUST_TASK_CODE,
}


def _score(
    name: str,
    config: Path | None,
    *,
    checkpoints: list[str] | None,
    model: str | None,
    revisions: str | None,
    backend: str | None,
    tasks: list[str] | None,
    include_path: list[Path] | None,
    family: str,
    size: str,
    run: str,
    **request_fields: Any,
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
    from gengen.scoring.series import ScoreRequest, SeriesLabels, resolve_backend, score_request
    from gengen.study.config import load_config

    study = load_config(config) if config is not None else None
    chosen = resolve_backend(backend, study)
    found = _series(checkpoints, model, revisions)
    paths = tuple(str(p) for p in include_path or ())
    request = ScoreRequest(study=study, tasks=_split(tasks), include_paths=paths, **request_fields)
    labels = SeriesLabels(name, family, size, run)
    typer.echo(score_request(chosen, found, request, labels, log=typer.echo).summary())


score_command = user_errors_exit(_score)
score_command.__signature__ = table_signature(OPTIONS)  # type: ignore[attr-defined]


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
