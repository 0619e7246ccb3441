"""``gengen plan``: how a study's runs fit on GPUs, before anything loads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen.cli._common import StudyFile, user_errors_exit

if TYPE_CHECKING:
    from gengen.study.config import StudyConfig

FLAGS = {
    "gpus": "--gpus",
    "total_gpus": "--total-gpus",
    "gpu_memory_gib": "--gpu-memory",
    "tflops": "--tflops",
    "mfu": "--mfu",
    "tokens_per_example": "--tokens-per-example",
    "overhead_gib": "--overhead",
    "rho": "--rho",
    "budget": "--budget",
    "target": "--target",
    "share": "--share",
    "phi": "--phi",
    "noise_sd": "--noise-sd",
    "accuracy": "--accuracy",
    "pair": "--pair",
}
"""The flag of each :func:`gengen.study.plan.plan_study` option an error may name."""


@user_errors_exit
def plan_command(
    config: StudyFile,
    gpus: Annotated[
        int, typer.Option("--gpus", help="GPUs one run may use (FSDP or a device map spreads a run over them).")
    ] = 1,
    total_gpus: Annotated[
        int | None,
        typer.Option("--total-gpus", help="GPUs for the whole grid, for its wall-clock estimate (default: --gpus)."),
    ] = None,
    gpu_memory: Annotated[float, typer.Option("--gpu-memory", help="Memory of one GPU, GiB.")] = 80.0,
    tflops: Annotated[float, typer.Option(help="Peak dense bf16 TFLOP/s of one GPU (H100 SXM: 989).")] = 989.0,
    mfu: Annotated[float, typer.Option(help="Assumed share of the peak reached (model-FLOPs utilisation).")] = 0.35,
    tokens_per_example: Annotated[int, typer.Option(help="Mean prompt length in tokens, for the FLOPs.")] = 64,
    overhead: Annotated[float, typer.Option(help="Fixed GiB per GPU on top (CUDA context, allocator).")] = 1.0,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only this model (repeatable).")] = None,
    power: Annotated[
        bool,
        typer.Option(
            "--power",
            help="Plan the design: seeds, evaluations, examples and pairs for the target power (docs/power.md).",
        ),
    ] = False,
    pilot: Annotated[
        Path | None, typer.Option("--pilot", help="--power: a pilot's gengen analyse folder (else assumed curves).")
    ] = None,
    examples: Annotated[
        int | None,
        typer.Option("--examples", help="--power --pilot: examples per test set, where the scores do not say."),
    ] = None,
    rho: Annotated[float, typer.Option("--rho", help="--power: partial correlation of a co-moving pair.")] = 0.3,
    budget: Annotated[
        float | None, typer.Option("--budget", help="--power: GPU-hours the whole study may take.")
    ] = None,
    pair: Annotated[str | None, typer.Option("--pair", help="--power: the chosen pair, A,B.")] = None,
    target: Annotated[float, typer.Option("--target", help="--power: power wanted for both questions.")] = 0.8,
    share: Annotated[
        float, typer.Option("--share", help="--power: share of pairs co-moving, for the global question.")
    ] = 0.1,
    phi: Annotated[
        float, typer.Option("--phi", help="--power without --pilot: residual lag-1 autocorrelation assumed.")
    ] = 0.5,
    noise_sd: Annotated[
        float, typer.Option("--noise-sd", help="--power: sd of a test set's own deviations from its ID trend.")
    ] = 0.04,
    accuracy: Annotated[
        float, typer.Option("--accuracy", help="--power without --pilot: typical OOD accuracy assumed.")
    ] = 0.7,
) -> None:
    """Plan a study on GPUs: strategy, memory per GPU, checkpoint disk and GPU-hours per model and regime.

    Reads only the study file, local config.json files and gengen's table of known model shapes (no network),
    and ends with the command that runs the study. Exits with status 2, naming the model, when a model cannot
    be trained or scored on the GPUs given.
    With --power: the design instead (seeds, evaluations, examples, pairs) that reaches the target power for a
    chosen pair and for the global question within --budget, from a --pilot analysis or assumed curves.
    """
    from gengen.errors import ConfigError, GengenError
    from gengen.study.config import load_config
    from gengen.study.families import family_for
    from gengen.study.plan import evaluations_note, fit_advice, format_plan, plan_study, run_command_line

    study = load_config(config)
    if power:
        _power(
            study,
            config,
            pilot,
            examples,
            rho,
            budget,
            pair,
            target,
            share,
            phi,
            noise_sd,
            accuracy,
            gpus,
            gpu_memory,
            tflops,
            mfu,
            tokens_per_example,
            model,
        )
        return
    try:
        rows = plan_study(
            study,
            gpus=gpus,
            gpu_memory_gib=gpu_memory,
            tflops=tflops,
            mfu=mfu,
            tokens_per_example=tokens_per_example,
            overhead_gib=overhead,
            models=model,
        )
        text = format_plan(rows, gpus, gpu_memory, total_gpus if total_gpus is not None else gpus)
    except GengenError as error:
        if error.option is None:
            raise
        raise ConfigError(error.render(lambda name: FLAGS.get(name, name))) from None
    typer.echo(text)
    short = evaluations_note(study, rows)  # "evals 26" for "40 log-spaced steps plus step 0": say why
    if short is not None:
        typer.echo(short)
    for spec in study.models:
        note = family_for(spec.family).note
        if note is not None and any(r.model == spec.name for r in rows):
            typer.echo(f"note: model {spec.name!r}: {note}")
    if any(r.train_strategy.startswith("FSDP") for r in rows) and study.training.strategy != "fsdp":
        typer.echo(f'note: training needs FSDP: set training.strategy = "fsdp" and run gengen train --gpus {gpus}')
    if any(r.score_strategy.startswith("device map") for r in rows) and not study.evaluation.device_map:
        typer.echo("note: scoring needs a device map over the GPUs: set evaluation.device_map = true")
    too_big = next((r for r in rows if not r.fits), None)
    if too_big is not None:
        part = "training" if too_big.train_strategy == "does not fit" else "scoring"
        need = too_big.train_gib if part == "training" else too_big.score_gib
        if part == "training":
            advice = fit_advice(study, too_big.model, gpus=gpus, gpu_memory_gib=gpu_memory, overhead_gib=overhead)
            hint = "; ".join(advice) if advice else "every memory setting is already used; use GPUs with more memory"
        else:
            hint = "set evaluation.device_map = true with more GPUs, or a smaller evaluation.batch_size / max_tokens"
        raise ConfigError(
            f"model {too_big.model!r} ({too_big.regime}): {part} needs ~{need:.1f} GiB per GPU, more than "
            f"{gpus} GPU(s) of {gpu_memory:g} GiB hold; not yet tried: {hint}"
        )
    command = run_command_line(config, executor=study.executor.kind, models=model)
    typer.echo(f"next: {command}   (add --dry-run to list its runs first; --out DIR to write them elsewhere)")


def _power(
    study: StudyConfig,
    config: Path,
    pilot: Path | None,
    examples: int | None,
    rho: float,
    budget: float | None,
    pair: str | None,
    target: float,
    share: float,
    phi: float,
    noise_sd: float,
    accuracy: float,
    gpus: int,
    gpu_memory: float,
    tflops: float,
    mfu: float,
    tokens_per_example: int,
    models: list[str] | None,
) -> None:
    """``gengen plan --power``: :func:`gengen.study.power.plan_power` from a pilot or assumed curves, printed."""
    from gengen.errors import ConfigError, GengenError
    from gengen.study.power import assumed_inputs, format_power_plan, pilot_inputs, plan_power

    chosen: tuple[str, str] | None = None
    if pair is not None:
        names = [name.strip() for name in pair.split(",")]
        if len(names) != 2 or not all(names):
            raise ConfigError(f"option --pair: expected two OOD test sets as A,B, got {pair!r}")
        chosen = (names[0], names[1])
    try:
        if pilot is not None:
            inputs = pilot_inputs(pilot, pair=chosen, n_examples=examples, noise_sd=noise_sd)
        else:
            inputs = assumed_inputs(study, phi=phi, noise_sd=noise_sd, accuracy=accuracy)
        plan = plan_power(
            study,
            inputs,
            rho=rho,
            budget=budget,
            target=target,
            share=share,
            pair=chosen,
            gpus=gpus,
            gpu_memory_gib=gpu_memory,
            tflops=tflops,
            mfu=mfu,
            tokens_per_example=tokens_per_example,
            models=models,
        )
    except GengenError as error:
        if error.option is None:
            raise
        raise ConfigError(error.render(lambda name: FLAGS.get(name, name))) from None
    typer.echo(format_power_plan(plan, config))


def register(app: typer.Typer) -> None:
    """Add ``gengen plan`` to the CLI."""
    app.command("plan")(plan_command)
