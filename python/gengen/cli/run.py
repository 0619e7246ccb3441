"""``gengen run`` and ``gengen status``: a whole study through an executor, and where its runs stand."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen.analyse.options import ANALYSIS_OPTIONS
from gengen.cli._common import OnlyModels, StudyFile, TrustTaskCode, check_output_folder, user_errors_exit

if TYPE_CHECKING:
    from gengen.study.config import StudyConfig

RUN_FAILED_EXIT_CODE = 1
#: ``gengen run`` takes its analysis options from the study file, so an error about one names the study's key.
STUDY_KEYS: dict[str, str] = {
    **{option.name: f"analysis.{option.name}" for option in ANALYSIS_OPTIONS},
    "id_testset": "study.id_testset",
}


#: ``--out`` of ``gengen run`` and ``gengen status``: the study's whole output folder.
OUT_HELP = (
    "The study's output folder (runs, store, analysis/ with the report) instead of [study] output, which it "
    "overrides; relative to the current folder. Give the same --out to every run and status of the study."
)


def _run_command(
    config: StudyFile,
    executor: Annotated[
        str | None, typer.Option(help="local, ray or slurm (default: the study's [executor] kind, else local).")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(help="Runs at once (local processes; for Ray/Slurm a cap on runs in flight).", min=1)
    ] = None,
    retries: Annotated[int | None, typer.Option(help="Times a failed run is submitted again.", min=0)] = None,
    threads: Annotated[
        int | None, typer.Option(help="torch CPU threads per run (default: resources.cpus).", min=1)
    ] = None,
    model: OnlyModels = None,
    analysis: Annotated[
        bool, typer.Option("--analysis/--no-analysis", help="Analyse, compare and report once every run is done.")
    ] = True,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    trust_task_code: TrustTaskCode = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check the study and print its runs per model with the totals (runs, steps, evaluations, GPU-hours "
            "as gengen plan estimates them on one 80 GiB GPU); run nothing.",
        ),
    ] = False,
) -> None:
    """Fine-tune and score every run of a study through an executor, then analyse, compare and report.

    Runs already complete are skipped and unfinished ones resume from their last checkpoint, so the same
    command continues an interrupted study. Failed runs are retried, then listed; the exit status is 1 when
    any run failed (the analysis then waits for a complete study). With evaluation.backend = "lm-eval" the
    runs' kept checkpoints are scored on the study's lm-eval tasks on this machine, once every run is done.
    """
    from gengen.executors.driver import execute_study
    from gengen.study.config import load_config

    study = load_config(config, output=out)
    if out is not None:  # a file, or a folder that cannot be created: one line before anything is written
        check_output_folder(study.output, "--out")
    from gengen.scoring.series import check_trainable, score_after_training

    check_trainable(study, trust_task_code=trust_task_code)
    if dry_run:
        for line in dry_run_lines(study, config, executor, model, out):
            typer.echo(line)
        return
    execution = execute_study(
        study, executor=executor, jobs=jobs, retries=retries, threads=threads, models=model or None, log=typer.echo
    )
    done = sum(r.ok for r in execution.results.values())
    typer.echo(
        f"{done + len(execution.skipped)} of {done + len(execution.skipped) + len(execution.failed)} runs complete "
        f"({len(execution.skipped)} skipped), {execution.rows_merged} scores merged into {study.output} "
        f"in {execution.seconds:.0f} s ({execution.executor})"
    )
    if execution.failed:
        for result in execution.failed:
            typer.echo(f"failed: {result.model} {result.run}: {result.error}", err=True)
        typer.echo("submit the study again to retry the failed runs; `gengen status` shows them", err=True)
        raise typer.Exit(code=RUN_FAILED_EXIT_CODE)
    rows = score_after_training(study, execution.plan, trust_task_code=trust_task_code, log=typer.echo)
    if rows is not None:
        typer.echo(f"{study.evaluation.backend}: {len(rows)} scores written to {study.output}")
    if not analysis:
        return
    from gengen.pipeline import run_study_analysis

    target = study.output / "analysis"
    report = run_study_analysis(study.output, target, study.id_testset, log=typer.echo, **study.analysis.options())
    typer.echo(f"report: {report}")


#: GPUs and memory of the dry run's estimate: ``gengen plan``'s defaults (one H100-class GPU).
DRY_RUN_GPUS, DRY_RUN_GPU_GIB = 1, 80.0


def dry_run_lines(
    study: StudyConfig, config: Path, executor: str | None, models: list[str] | None, out: Path | None = None
) -> list[str]:
    """What ``gengen run`` would do: one line per model and data regime, then the totals and the next command.

    Steps, evaluations and GPU-hours are :func:`gengen.study.plan.plan_study`'s (one GPU of 80 GiB, its default
    throughput); models that would not fit are named and left out of the totals, as ``gengen plan`` does.
    """
    from gengen.study.plan import evaluations_note, plan_study, run_command_line

    runs = study.select_runs(models)
    rows = plan_study(study, gpus=DRY_RUN_GPUS, gpu_memory_gib=DRY_RUN_GPU_GIB, models=models)
    kind = executor or study.executor.kind
    lines = [f"study {study.name}: {len(runs)} runs through the {kind} executor; output {study.output}"]
    for row in rows:
        fits = "" if row.fits else f" (does not fit {DRY_RUN_GPUS} GPU of {DRY_RUN_GPU_GIB:g} GiB: see gengen plan)"
        lines.append(
            f"  {row.model} ({row.regime}): {row.runs} runs x {row.steps} steps, {row.evaluations} evaluations each, "
            f"~{row.gpu_hours:,.1f} GPU-hours{fits}"
        )
    note = evaluations_note(study, rows)  # "26 evaluations" for "40 log-spaced steps plus step 0": say why
    if note is not None:
        lines.append(f"  {note}")
    fitting = [row for row in rows if row.fits]
    lines.append(
        f"total: {sum(r.runs for r in fitting)} runs, {sum(r.runs * r.steps for r in fitting):,} steps, "
        f"{sum(r.runs * r.evaluations for r in fitting):,} evaluations, ~{sum(r.gpu_hours for r in fitting):,.1f} "
        f"GPU-hours (gengen plan {config} for other GPUs)"
    )
    lines.append(f"next: {run_command_line(config, executor=executor, out=out, models=models)}")
    return lines


run_command = user_errors_exit(_run_command, flags=STUDY_KEYS)


@user_errors_exit
def status_command(
    study: Annotated[Path, typer.Argument(help="The study's TOML file (or the folder holding study.toml).")],
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """Show each run of a study: pending, running, done or failed (with its error), and its progress.

    Progress is evaluations stored / evaluations planned (known once a run has started).
    """
    from gengen.errors import ConfigError
    from gengen.executors.state import study_status
    from gengen.study.config import load_config

    path = study / "study.toml" if study.is_dir() else study
    if study.is_dir() and not path.is_file():
        raise ConfigError(f"{study}: a folder without study.toml; give the study's TOML file")
    config = load_config(path, output=out)
    rows = study_status(config)
    width = max([len(f"{r.model} {r.run}") for r in rows] + [3])
    counts: dict[str, int] = {}
    typer.echo(f"{'run':<{width}}  {'status':<8}  {'progress':>9}  details")
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
        details = []
        if row.attempt > 1:
            details.append(f"attempt {row.attempt}")
        if row.job_id and row.status in ("pending", "running"):
            details.append(f"job {row.job_id}")
        if row.status == "running" and row.host:
            details.append(f"on {row.host} since {row.updated_at}")
        if row.error:
            details.append(f"error: {row.error}")
        if row.note:
            details.append(row.note)
        label = f"{row.model} {row.run}"
        typer.echo(f"{label:<{width}}  {row.status:<8}  {row.progress:>9}  {'; '.join(details)}".rstrip())
    summary = ", ".join(f"{counts[s]} {s}" for s in ("done", "running", "pending", "failed") if s in counts)
    typer.echo(f"{config.name}: {len(rows)} runs: {summary}")


def register(app: typer.Typer) -> None:
    """Add ``gengen run`` and ``gengen status`` to the CLI."""
    app.command("run")(run_command)
    app.command("status")(status_command)
