"""The local executor: runs one after another in this process, or ``jobs`` at a time in worker processes.

:func:`process_pool` is the one process pool of gengen (``gengen train --jobs`` uses it too): spawned
workers, each with its own torch threads and store connection, that die with the process that started them,
so killing a driver never leaves orphans training a run that the next submission resumes.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from gengen.executors.base import Executor, RunResult, RunTask, failure
from gengen.executors.worker import execute_run

__all__ = ["LocalExecutor", "PooledExecutor", "process_pool"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when its parent dies (elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes that die with this one.

    Parameters
    ----------
    workers : int
        Processes in the pool.

    Returns
    -------
    concurrent.futures.ProcessPoolExecutor
    """
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent
    )


class PooledExecutor(Executor):
    """An executor that runs tasks in this process (``jobs = 1``) or in a :func:`process_pool` of ``jobs``.

    The one place the pool is started and stopped, for :class:`LocalExecutor` and
    :class:`gengen.executors.direct.DirectExecutor`; a subclass sets ``jobs`` and submits to ``pool``.
    """

    jobs: int = 1
    pool: ProcessPoolExecutor | None = None

    @property
    def capacity(self) -> int:
        """``jobs``: the driver submits no more than the pool runs."""
        return self.jobs

    def start(self) -> None:
        """Start the worker pool (none for ``jobs = 1``)."""
        if self.jobs > 1:
            self.pool = process_pool(self.jobs)

    def close(self) -> None:
        """Stop the worker pool, waiting for the runs in it."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


class LocalExecutor(PooledExecutor):
    """Runs on this machine: in this process (``jobs = 1``) or in a pool of ``jobs`` processes.

    Parameters
    ----------
    jobs : int
        Runs at once.
    log : callable
        Progress lines of runs executed in this process (workers print theirs).
    """

    name = "local"

    def __init__(self, jobs: int = 1, *, log: Callable[[str], None] = print):
        self.jobs = jobs
        self.log = log
        self.pool = None

    def submit(self, task: RunTask) -> Future[RunResult]:
        """Run ``task`` now (``jobs = 1``) or hand it to the pool."""
        if self.pool is None:
            future: Future[RunResult] = Future()
            future.set_result(execute_run(task, self.log))
            return future
        try:
            return self.pool.submit(execute_run, task)
        except BrokenProcessPool:  # a worker died (out of memory...): start a fresh pool
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = process_pool(self.jobs)
            return self.pool.submit(execute_run, task)

    def wait(self, handles: Sequence[Future[RunResult]]) -> list[int]:
        """Positions of the finished futures (at least one)."""
        done, _ = concurrent.futures.wait(handles, return_when=concurrent.futures.FIRST_COMPLETED)
        return [i for i, handle in enumerate(handles) if handle in done]

    def result(self, handle: Future[RunResult], task: RunTask) -> RunResult:
        """The run's result, or a failure when its worker process died."""
        try:
            return handle.result()
        except BrokenProcessPool as error:
            return failure(task, f"worker process died: {error}")
