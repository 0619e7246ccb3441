"""``gengen score``: score an existing series of checkpoints (local folders or hub revisions) without training.

Two backends: gengen's own scorer (the study's NLI test sets, the reference protocol's prompt and answers) and
lm-evaluation-harness (``--backend lm-eval --tasks hellaswag,arc_easy``: any lm-eval task, scored by lm-eval
itself, see :mod:`gengen.lm_eval_backend`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gengen.cli._common import TrustTaskCode, user_errors_exit

if TYPE_CHECKING:
    from gengen.config import StudyConfig
    from gengen.score import Checkpoint

BACKENDS = ("gengen", "lm-eval")


def parse_checkpoint_specs(specs: list[str]) -> list[Checkpoint]:
    """The checkpoints named by ``--checkpoints`` values, sorted by step.

    Each value is a checkpoint folder, a folder of checkpoint folders, or ``HUB_ID@rev1,rev2`` (revisions of a
    hub model, e.g. ``EleutherAI/pythia-160m@step1000,step2000``); a path that exists is always read as a path.
    """
    from gengen.errors import GengenError, InputError
    from gengen.score import find_checkpoints

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


def _from(configured: Any, name: str) -> Any:
    """A setting of the study's ``[evaluation.lm_eval]``, or None without one."""
    return getattr(configured, name) if configured is not None else None


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
        typer.Option(help="gengen (the study's NLI test sets) or lm-eval (lm-eval tasks; default: the study's)."),
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
    from gengen.errors import GengenError

    study = load_config(config) if config is not None else None
    chosen = backend or (study.evaluation.backend if study is not None else None)
    if chosen is None:
        raise GengenError("give a study file (gengen's scorer scores its test sets) or --backend lm-eval")
    if chosen not in BACKENDS:
        raise GengenError(f"--backend: expected 'gengen' or 'lm-eval', got {chosen!r}")
    if not checkpoints and model is None:
        raise GengenError("give --checkpoints or --model (with --revisions)")
    found = parse_checkpoint_specs(list(checkpoints or ()))
    if model is not None:
        from gengen.score import find_checkpoints

        extra = find_checkpoints(model=model, revisions=[r for r in (revisions or "").split(",") if r.strip()])
        found = _merge(found, extra)
    elif revisions:
        raise GengenError("--revisions needs --model (the hub id the revisions belong to)")
    lm_options = {
        "tasks": tasks,
        "num_fewshot": num_fewshot,
        "limit": limit,
        "batch_size": batch_size,
        "include_path": include_path,
        "precision": precision,
        "store": store,
        "trust_task_code": trust_task_code,
    }
    if chosen == "gengen":
        given = [f"--{k.replace('_', '-')}" for k, v in lm_options.items() if v]
        if study is None:
            raise GengenError("the gengen backend scores a study's test sets: give the study file")
        if given:
            raise GengenError(f"{given[0]}: only with --backend lm-eval")
        _score_gengen(study, found, name, family, size, run, tokenizer, threads, device)
        return
    _score_lm_eval(study, found, name, family, size, run, tokenizer, threads, device, lm_options)


def _merge(first: list[Checkpoint], second: list[Checkpoint]) -> list[Checkpoint]:
    from gengen.errors import InputError

    steps = {c.step for c in first}
    clash = next((c.step for c in second if c.step in steps), None)
    if clash is not None:
        raise InputError(f"checkpoints: step {clash} appears twice")
    return sorted([*first, *second], key=lambda c: c.step)


def _set_threads(threads: int | None) -> None:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)


def _score_gengen(
    study: StudyConfig,
    found: list[Checkpoint],
    name: str,
    family: str,
    size: str,
    run: str,
    tokenizer: str | None,
    threads: int | None,
    device: str | None,
) -> None:
    from dataclasses import replace

    from gengen.errors import GengenError

    if device is not None:
        if device not in ("auto", "cpu", "cuda"):
            raise GengenError(f"--device: the gengen backend takes auto, cpu or cuda, got {device!r}")
        study = replace(study, training=replace(study.training, device=device))
    _set_threads(threads)
    from gengen.score import score_checkpoints

    rows = score_checkpoints(
        study, found, model_name=name, family=family, size=size, run=run, tokenizer_path=tokenizer, log=typer.echo
    )
    typer.echo(f"{len(found)} checkpoints, {len(rows)} scores written to {study.output}")


def _score_lm_eval(
    study: StudyConfig | None,
    found: list[Checkpoint],
    name: str,
    family: str,
    size: str,
    run: str,
    tokenizer: str | None,
    threads: int | None,
    device: str | None,
    options: dict[str, Any],
) -> None:
    from gengen.config import PRECISIONS
    from gengen.errors import GengenError
    from gengen.lm_eval_backend import LmEvalSettings, TaskCatalogue, parse_batch_size, parse_limit
    from gengen.store import Store

    configured = study.evaluation.lm_eval if study is not None else None
    task_names = _split(options["tasks"]) or (configured.tasks if configured is not None else ())
    if not task_names:
        raise GengenError("--tasks: give the lm-eval tasks to score (or evaluation.lm_eval.tasks in the study)")
    batch = options["batch_size"]
    limit = options["limit"]
    settings = LmEvalSettings(
        tasks=task_names,
        num_fewshot=options["num_fewshot"] if options["num_fewshot"] is not None else _from(configured, "num_fewshot"),
        limit=parse_limit(limit) if limit is not None else _from(configured, "limit"),
        batch_size=parse_batch_size(batch) if batch is not None else (study.evaluation.batch_size if study else 8),
        include_paths=(
            *(configured.include_paths if configured else ()),
            *(str(p) for p in options["include_path"] or ()),
        ),
        trust_task_code=options["trust_task_code"],
    )
    if study is not None:
        if options["store"] is not None:
            raise GengenError("--store: the study's store (study.output) is used; drop --store or the study file")
        if options["precision"] is not None:
            raise GengenError("--precision: the study's training.precision applies; drop --precision")
    store_path: Path | None = options["store"]
    if study is None and store_path is None:
        raise GengenError("--store: give the store to write to (a folder or a .sqlite file), or a study file")
    precision = options["precision"] or "auto"
    if study is None and precision not in PRECISIONS:
        raise GengenError(f"--precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    # The tasks are checked (task folders, names, data) before the store is opened: a refused task leaves no store.
    catalogue = TaskCatalogue(settings)
    if study is not None:
        target = Store(study.output, study=study.name)
        precision, device_map = study.training.precision, study.evaluation.device_map
        device = device or study.training.device
    else:
        assert store_path is not None  # checked above, before the tasks were loaded
        target = Store(store_path)
        device_map = False
    _set_threads(threads)
    from gengen.lm_eval_backend import score_with_lm_eval

    rows = score_with_lm_eval(
        found,
        settings,
        store=target,
        model_name=name,
        family=family,
        size=size,
        run=run,
        tokenizer_path=tokenizer,
        device=device or "auto",
        precision=precision,
        device_map=device_map,
        catalogue=catalogue,
        log=typer.echo,
    )
    typer.echo(f"{len(found)} checkpoints x {len(task_names)} tasks, {len(rows)} scores written to {target.path}")


def register(app: typer.Typer) -> None:
    """Add ``gengen score`` to the CLI."""
    app.command("score")(score_command)
