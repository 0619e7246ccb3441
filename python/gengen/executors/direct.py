"""The direct executor of ``gengen train`` and the demo: runs write the study's store as they go.

Each run trains in this process (one after another, sharing the tokenizer and test-set encodings) or in one
of ``jobs`` worker processes of this machine (:func:`~gengen.executors.local.process_pool`), and commits each
evaluation's scores to ``gengen.sqlite`` as soon as they are computed (the store is safe for several
processes), so a killed run leaves its scores in the store and resumes from its last checkpoint. A run that
fails raises its error (a user error ends the command in one line); nothing is retried.

Launched by torchrun (``gengen train --gpus N``), every process drives the same study and trains each run
together with the others (:func:`gengen.training.train.current_world`); process 0 alone writes the store and the runs'
state.

Imports torch (through :mod:`gengen.training.train`).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import torch

from gengen.errors import ConfigError
from gengen.executors.base import RunResult, RunTask, finished
from gengen.executors.driver import StudyExecution, execute_study
from gengen.executors.local import PooledExecutor
from gengen.executors.state import write_state
from gengen.study.config import StudyConfig
from gengen.study.paths import RunPlan
from gengen.training.train import RunOutcome, TrainContext, World, current_world, train_run

__all__ = ["DirectExecutor", "train_study"]

Log = Callable[[str], None]


def _train(task: RunTask, *, records_state: bool = True, **options: Any) -> RunOutcome:
    """Train ``task``'s run straight into the study's store, its state recorded as running (failed if it raises)."""
    from gengen.store.database import Store

    config, run = task.config, task.run
    if records_state:
        write_state(task.paths, run, "running", attempt=task.attempt)
    try:
        return train_run(config, run, store=Store(config.output, study=config.name), paths=task.paths, **options)
    except BaseException as error:
        if records_state:
            write_state(task.paths, run, "failed", attempt=task.attempt, error=f"{type(error).__name__}: {error}")
        raise


def _train_in_worker(task: RunTask) -> RunOutcome:
    """One run in a worker process: its own store connection, torch threads and caches."""
    torch.set_num_threads(task.threads)
    return _train(task, log=print, progress=False)


class DirectExecutor(PooledExecutor):
    """Trains runs here, in this process or in ``jobs`` worker processes, straight into the study's store.

    Parameters
    ----------
    jobs : int
        Runs trained at once: 1 trains them one after the other in this process; more, each in its own
        process (for small models on a multi-core CPU), with the driver's ``threads`` torch threads each.
    log : callable
        Progress lines of runs trained in this process (workers print theirs).
    progress : bool
        Progress bars on a terminal (in this process only).
    world : World, optional
        The processes training each run together (default :func:`gengen.training.train.current_world`).

    Raises
    ------
    ConfigError
        ``jobs`` below 1, or above 1 while several processes share each run (torchrun).
    """

    name = "direct"
    writes_store = True

    def __init__(self, jobs: int = 1, *, log: Log = print, progress: bool = False, world: World | None = None):
        if jobs < 1:
            raise ConfigError(f"--jobs: expected a positive integer, got {jobs}")
        self.world = world or current_world()
        if self.world.size > 1 and jobs > 1:
            raise ConfigError("--jobs: runs are trained one at a time when several processes share each run (torchrun)")
        self.jobs = jobs
        self.log = log
        self.progress = progress
        self.pool = None
        self.contexts: dict[int, TrainContext] = {}

    @property
    def records_state(self) -> bool:
        """Process 0 alone writes the runs' state."""
        return self.world.main

    def _context(self, config: StudyConfig) -> TrainContext:
        """The tokenizer and test-set cache shared by the study's runs in this process."""
        if id(config) not in self.contexts:
            self.contexts[id(config)] = TrainContext(config)
        return self.contexts[id(config)]

    def submit(self, task: RunTask) -> Future[RunOutcome]:
        """Train ``task``'s run now (``jobs = 1``; its error is raised) or hand it to the pool."""
        if self.pool is not None:
            return self.pool.submit(_train_in_worker, task)
        outcome = _train(
            task,
            records_state=self.world.main,
            context=self._context(task.config),
            log=self.log,
            progress=self.progress,
            world=self.world,
        )
        future: Future[RunOutcome] = Future()
        future.set_result(outcome)
        return future

    def wait(self, handles: Sequence[Future[RunOutcome]]) -> list[int]:
        """Positions of the finished runs (at least one)."""
        done, _ = concurrent.futures.wait(handles, return_when=concurrent.futures.FIRST_COMPLETED)
        return [i for i, handle in enumerate(handles) if handle in done]

    def result(self, handle: Future[RunOutcome], task: RunTask) -> RunResult:
        """The run's result; a failed run raises its error here."""
        outcome = handle.result()
        return finished(task, outcome, seconds=outcome.seconds)


def train_study(
    config: StudyConfig,
    *,
    models: Sequence[str] | None = None,
    jobs: int = 1,
    threads: int = 1,
    log: Log = print,
    progress: bool = False,
    plan: RunPlan | None = None,
) -> StudyExecution:
    """Train and score every unfinished run of a study straight into its store: ``gengen train``.

    The study driver :func:`gengen.executors.execute_study` with a :class:`DirectExecutor`.

    Parameters
    ----------
    config : StudyConfig
    models : sequence of str, optional
        Only the runs of these models.
    jobs : int
        Runs trained at once, each in its own process when more than 1.
    threads : int
        CPU threads for torch in each worker process when ``jobs > 1``.
    log : callable
        Progress lines.
    progress : bool
        Progress bars on a terminal (``jobs = 1``).
    plan : RunPlan, optional
        The runs with their paths, as the caller planned them (instead of ``models``).

    Returns
    -------
    gengen.executors.StudyExecution
        The runs trained (``results``, with the rows each wrote) and those already complete (``skipped``).
    """
    executor = DirectExecutor(jobs, log=log, progress=progress)
    # Under torchrun every process drives the study; process 0 alone reports.
    driver_log = log if executor.world.main else _silent
    return execute_study(config, executor=executor, threads=threads, models=models, log=driver_log, plan=plan)


def _silent(line: str) -> None:
    """Drops a progress line."""
