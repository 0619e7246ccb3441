"""The study driver: plan the runs, skip the complete ones, hand the rest to an executor, retry, merge into the store.

:mod:`gengen.executors` hands these names on; its docstring says who writes what (run folders, spools, the store).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import ConfigError, GengenError
from gengen.executors.base import Executor, RunResult, RunTask
from gengen.executors.spool import RunSpool
from gengen.executors.state import RunStatus, read_state, study_status, write_state
from gengen.study.config import RunSpec, StudyConfig
from gengen.study.paths import RunPaths, RunPlan
from gengen.study.tables import EXECUTORS, ExecutorConfig

__all__ = [
    "EXECUTORS",
    "Executor",
    "RunResult",
    "RunStatus",
    "RunTask",
    "StudyExecution",
    "execute_study",
    "make_executor",
    "merge_run",
    "study_status",
]

Log = Callable[[str], None]


@dataclass(frozen=True)
class StudyExecution:
    """What :func:`execute_study` did.

    Attributes
    ----------
    executor : str
        The executor used.
    results : dict
        ``{(model, run): RunResult}``: the last attempt of every run submitted.
    skipped : list of tuple
        ``(model, run)`` of the runs already complete in the store (not submitted).
    attempts : dict
        ``{(model, run): attempts made}``.
    rows_merged : int
        Score rows this execution added to the store.
    seconds : float
        Wall time.
    plan : RunPlan
        Every run of the execution (skipped ones too) with its folder and files, as planned once; what scores
        the runs afterwards takes it as its runs (:func:`gengen.scoring.score_after_training`).
    """

    executor: str
    results: dict[tuple[str, str], RunResult] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    rows_merged: int = 0
    seconds: float = 0.0
    plan: RunPlan = field(default_factory=lambda: RunPlan((), {}))

    @property
    def failed(self) -> list[RunResult]:
        """The runs that failed on their last attempt."""
        return [result for result in self.results.values() if not result.ok]

    @property
    def ok(self) -> bool:
        """Every run is complete."""
        return not self.failed


def resolve_settings(
    config: StudyConfig,
    *,
    executor: str | None = None,
    jobs: int | None = None,
    retries: int | None = None,
    threads: int | None = None,
) -> ExecutorConfig:
    """The study's ``[executor]`` settings with the command line's overrides applied and checked."""
    if executor is not None and executor not in EXECUTORS:
        import difflib

        close = difflib.get_close_matches(executor, EXECUTORS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(EXECUTORS)}"
        raise ConfigError(f"--executor: unknown executor {executor!r} ({hint})")
    for option, value, minimum in (("--jobs", jobs, 1), ("--retries", retries, 0), ("--threads", threads, 1)):
        if value is not None and value < minimum:
            raise ConfigError(f"{option}: expected an integer >= {minimum}, got {value}")
    settings = config.executor
    changes: dict[str, Any] = {}
    if executor is not None:
        changes["kind"] = executor
    if jobs is not None:
        changes["jobs"] = jobs
    if retries is not None:
        changes["retries"] = retries
    if threads is not None:
        changes["threads"] = threads
    return replace(settings, **changes)


def make_executor(config: StudyConfig, settings: ExecutorConfig, *, log: Log = print) -> Executor:
    """The executor ``settings.kind`` names, configured from the study's settings and resources."""
    if settings.kind == "local":
        from gengen.executors.local import LocalExecutor

        return LocalExecutor(settings.jobs or 1, log=log)
    if settings.kind == "ray":
        from gengen.executors.ray import RayExecutor

        return RayExecutor(config.resources, address=settings.address, jobs=settings.jobs)
    from gengen._files import inside
    from gengen.executors.slurm import SlurmExecutor

    # executor.folder is the user's choice; the default lies in the study output and must stay there.
    folder = Path(settings.folder) if settings.folder else inside(config.output, "slurm")
    return SlurmExecutor(settings, config.resources, folder)


def _complete_in_store(store: Any, run: RunSpec) -> bool:
    manifest = store.manifest(run.model.name, run.key)
    return manifest is not None and manifest.get("status") == "complete"


def _prime_spool(config: StudyConfig, store: Any, run: RunSpec, paths: RunPaths) -> None:
    """Copy into the run's spool the scores the store holds for it (from ``gengen train``, or an earlier
    merge), so the run does not compute them again and its later merge cannot conflict with them."""
    stored = store.completed(run.model.name, run.key, study=config.name)
    spool = RunSpool(paths.folder, study=config.name)
    if stored - spool.completed(run.model.name, run.key):
        spool.write_scores(store.load(study=config.name, model=run.model.name, run=run.key))


def merge_run(
    config: StudyConfig, store: Any, run: RunSpec, result: RunResult | None = None, *, paths: RunPaths | None = None
) -> int:
    """Merge a finished run into the study's store: its scores in one transaction, then its manifest.

    Parameters
    ----------
    config : StudyConfig
    store : gengen.store.database.Store
        The study's store (the driver is its only writer).
    run : RunSpec
    result : RunResult, optional
        The worker's result: its ``scores`` and ``manifest`` are merged. Without one (or without scores in
        it) they are read from the run's spool.
    paths : RunPaths, optional
        The run's folder and files as planned (default: :meth:`RunPaths.for_run` of the run).

    Returns
    -------
    int
        Score rows added (rows already stored with equal values are not counted).

    Raises
    ------
    gengen.errors.GengenError
        The merged run lacks evaluations its manifest plans (the run is then not marked complete).
    """
    spool = RunSpool((paths or RunPaths.for_run(config, run)).folder, study=config.name)
    if result is not None and result.scores is not None:
        frame, manifest = pd.DataFrame.from_records(list(result.scores)), result.manifest
    else:
        frame, manifest = spool.frame(), spool.manifest(run.model.name, run.key)
    written = store.write_scores(frame) if len(frame) else 0
    if manifest is None:
        return written
    steps = manifest.get("evaluation_steps") or []
    wanted = {(s, t.name, m) for s in steps for t in config.testsets for m in config.evaluation.metrics}
    missing = wanted - store.completed(run.model.name, run.key, study=config.name)
    if missing and manifest.get("status") == "complete":
        step, testset, metric = min(missing)
        raise GengenError(
            f"run {run.model.name} {run.key}: {len(missing)} planned scores missing after the merge "
            f"(first: step {step}, {testset}, {metric})"
        )
    store.write_manifest(run.model.name, run.key, manifest)
    return written


def execute_study(
    config: StudyConfig,
    *,
    executor: str | Executor | None = None,
    jobs: int | None = None,
    retries: int | None = None,
    threads: int | None = None,
    models: Sequence[str] | None = None,
    log: Log = print,
    plan: RunPlan | None = None,
) -> StudyExecution:
    """Fine-tune and score every unfinished run of a study through an executor, gathering all scores.

    Runs complete in the store are skipped; the others resume from their last checkpoint and spool. A run
    that fails is submitted again up to ``retries`` times, then reported as failed while the others go on.

    Parameters
    ----------
    config : StudyConfig
    executor : {"local", "ray", "slurm"} or Executor, optional
        Overrides ``executor.kind``; or the executor itself (e.g.
        :class:`~gengen.executors.direct.DirectExecutor`, configured by its caller).
    jobs : int, optional
        Overrides ``executor.jobs`` (local: runs at once; Ray/Slurm: cap on runs in flight); not used with
        an executor given as such.
    retries : int, optional
        Overrides ``executor.retries``.
    threads : int, optional
        Overrides ``executor.threads`` (torch threads per run; default ``resources.cpus``).
    models : sequence of str, optional
        Only the runs of these models.
    log : callable
        Progress lines.
    plan : RunPlan, optional
        The runs to execute with their paths, as the caller planned them (``gengen train`` checks the run
        folders before it trains); by default the runs of ``models``, planned here. Not with ``models``.

    Returns
    -------
    StudyExecution

    Raises
    ------
    ConfigError
        An unknown executor, model or a bad option value; the executor's package is missing.
    ValueError
        Both ``models`` and ``plan`` given.
    """
    from gengen.store.database import Store

    began = time.perf_counter()
    given = executor if isinstance(executor, Executor) else None
    kind_asked = executor if isinstance(executor, str) else None
    settings = resolve_settings(config, executor=kind_asked, jobs=jobs, retries=retries, threads=threads)
    kind = given.name if given is not None else settings.kind
    task_threads = settings.threads or config.resources.cpus
    if plan is not None and models:
        raise ValueError("execute_study: give the models or the plan of the runs, not both")
    # Each run's folder and files, made once here (or by the caller) and passed on. A run folder leading outside
    # the output, a damaged or planted state or spool file is refused before anything is written.
    plan = plan if plan is not None else RunPlan.for_runs(config, config.select_runs(models))
    runs = list(plan)
    for run in runs:
        read_state(plan.paths[run], run)
        RunSpool(plan.paths[run].folder, study=config.name).records()
    store = Store(config.output, study=config.name)
    record = write_state if given is None or given.records_state else _no_state
    skipped: list[tuple[str, str]] = []
    queue: list[RunSpec] = []
    for run in plan:
        paths = plan.paths[run]
        if _complete_in_store(store, run):
            skipped.append((run.model.name, run.key))
            if (read_state(paths, run) or {}).get("status") != "done":
                record(paths, run, "done", attempt=0, executor=kind)
            continue
        if given is None or not given.writes_store:
            _prime_spool(config, store, run, paths)
        if not (read_state(paths, run) or {}).get("job_id"):
            record(paths, run, "pending", attempt=0, executor=kind)
        queue.append(run)
    if skipped:
        log(f"{len(skipped)} of {len(runs)} runs already complete, skipped")
    results: dict[tuple[str, str], RunResult] = {}
    attempts: dict[tuple[str, str], int] = {}
    merged = 0
    if queue:
        backend = given if given is not None else make_executor(config, settings, log=log)
        retried = settings.retries and not backend.writes_store  # the direct executor raises a failure
        log(f"{len(queue)} runs to {backend.name}" + (f", {settings.retries} retries each" if retried else ""))
        with backend:
            merged = _drive(config, store, backend, queue, plan, settings, task_threads, results, attempts, log, record)
    return StudyExecution(
        executor=kind,
        results=results,
        skipped=skipped,
        attempts=attempts,
        rows_merged=merged,
        seconds=time.perf_counter() - began,
        plan=plan,
    )


def _no_state(paths: RunPaths, run: RunSpec, status: str, **fields: Any) -> None:
    """Stands for :func:`write_state` in the processes that leave run state to another."""


def _drive(
    config: StudyConfig,
    store: Any,
    backend: Executor,
    queue: list[RunSpec],
    plan: RunPlan,
    settings: ExecutorConfig,
    threads: int,
    results: dict[tuple[str, str], RunResult],
    attempts: dict[tuple[str, str], int],
    log: Log,
    record: Callable[..., None] = write_state,
) -> int:
    """Submit, wait, retry and merge until every run is done or out of attempts; return rows merged (or, when
    the runs write the store themselves, rows written)."""
    merged = 0
    waiting: list[RunSpec] = []
    flight: list[tuple[Any, RunTask]] = []
    for run in queue:
        state = read_state(plan.paths[run], run) or {}
        handle = None
        if state.get("executor") == backend.name and state.get("job_id") and state.get("status") != "failed":
            attempt = max(1, int(state.get("attempt", 1)))
            task = RunTask(config, run, attempt, threads, plan.paths[run])
            handle = backend.reattach(task, str(state["job_id"]))
        if handle is None:
            waiting.append(run)
            continue
        attempts[(run.model.name, run.key)] = task.attempt
        flight.append((handle, task))
        log(f"{task.label}: job {state['job_id']} of an earlier submission is still alive; waiting for it")
    while waiting or flight:
        while waiting and (backend.capacity is None or len(flight) < backend.capacity):
            run = waiting.pop(0)
            key = (run.model.name, run.key)
            attempts[key] = attempts.get(key, 0) + 1
            task = RunTask(config, run, attempts[key], threads, plan.paths[run])
            record(task.paths, run, "pending", attempt=task.attempt, executor=backend.name)
            handle = backend.submit(task)
            job_id = backend.job_id(handle)
            if job_id is not None:
                record(task.paths, run, "pending", attempt=task.attempt, executor=backend.name, job_id=job_id)
            flight.append((handle, task))
        finished = set(backend.wait([handle for handle, _ in flight]))
        for position in sorted(finished):
            handle, task = flight[position]
            result = backend.result(handle, task)
            run, key = task.run, (task.run.model.name, task.run.key)
            rows = 0
            if result.ok and backend.writes_store:
                rows = result.rows_written
            elif result.ok:
                try:
                    rows = merge_run(config, store, run, result, paths=task.paths)
                except GengenError as error:
                    result = replace(result, ok=False, error=str(error))
            results[key] = result
            if result.ok:
                merged += rows
                record(task.paths, run, "done", attempt=task.attempt, executor=backend.name, worker=result.host)
                how = "written" if backend.writes_store else "merged"
                log(f"{task.label}: done ({rows} scores {how}, {result.seconds:.1f} s on {result.host})")
            elif task.attempt <= settings.retries:
                record(task.paths, run, "pending", attempt=task.attempt, error=result.error, executor=backend.name)
                log(f"{task.label}: attempt {task.attempt} failed ({result.error}); retrying")
                waiting.append(run)
            else:
                record(
                    task.paths,
                    run,
                    "failed",
                    attempt=task.attempt,
                    error=result.error,
                    details=result.details,
                    executor=backend.name,
                )
                log(f"{task.label}: failed after {task.attempt} attempt(s): {result.error}")
        flight = [entry for position, entry in enumerate(flight) if position not in finished]
    return merged
