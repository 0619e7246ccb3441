"""What every executor shares: the task sent to a worker, the result it sends back, and the executor interface.

An executor moves :class:`RunTask` values to workers and :class:`RunResult` values back. The driver
(:func:`gengen.executors.execute_study`) submits, waits, retries and merges; workers call the per-run function
of :mod:`gengen.training.train`. Only an executor that says so (:attr:`Executor.writes_store`: the direct executor of
``gengen train``, whose runs commit each evaluation to the store as it is computed) lets its runs touch the
study's store; the others' runs write their run folder's spool, which the driver merges.
"""

from __future__ import annotations

import abc
import socket
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from gengen.study.config import RunIdentity, RunSpec, StudyConfig
from gengen.study.paths import RunPaths

__all__ = ["Executor", "Handle", "RunResult", "RunTask", "failure", "finished"]

Handle = Any
"""An executor's token for a submitted task (a future, a Ray object reference, a submitit job)."""


@dataclass(frozen=True)
class RunTask:
    """One attempt at one run, as shipped to a worker (picklable).

    Attributes
    ----------
    config : StudyConfig
        The whole study (a worker needs its data, training and evaluation settings).
    run : RunSpec
        The run to train and score.
    attempt : int
        1 for the first submission, 2 for the first retry, ...
    threads : int
        torch CPU threads of the worker.
    paths : RunPaths
        The run's folder and files, as the driver planned them (shipped with the task, so a worker on another
        machine uses them as they are). A task made without them gets :meth:`RunPaths.for_run` of its run.
    """

    config: StudyConfig
    run: RunSpec
    attempt: int
    threads: int
    paths: RunPaths = None  # type: ignore[assignment]  # filled in by __post_init__ when not given

    def __post_init__(self) -> None:
        if self.paths is None:
            object.__setattr__(self, "paths", RunPaths.for_run(self.config, self.run))

    @property
    def label(self) -> str:
        """``"<model> <run key>"``, for log lines and job names."""
        return f"{self.run.model.name} {self.run.key}"


@dataclass(frozen=True)
class RunResult(RunIdentity):
    """What came back from one attempt; ``model`` and ``run`` name the run (:class:`RunIdentity`).

    Attributes
    ----------
    ok : bool
        The run finished (or was already complete).
    error : str or None
        One line: the exception type and message, or why the executor lost the task.
    details : str or None
        The traceback, when there is one.
    rows_written : int
        Score rows the attempt wrote to the run's spool.
    skipped : bool
        The run was already complete in its spool (or store).
    seconds : float
        Wall time of the attempt in the worker.
    host : str
        The machine that ran it.
    scores : tuple of dict or None
        Every score row of the run (its whole spool) when it finished: the driver merges these, so it never
        depends on seeing the worker's files through a network file system's caches.
    manifest : dict or None
        The run's manifest when it finished.
    resumed_from : int or None
        The checkpoint step training restarted from (None: from the start, or not known).
    """

    ok: bool
    error: str | None = None
    details: str | None = None
    rows_written: int = 0
    skipped: bool = False
    seconds: float = 0.0
    host: str = ""
    scores: tuple[dict[str, Any], ...] | None = None
    manifest: dict[str, Any] | None = None
    resumed_from: int | None = None


def failure(task: RunTask, error: BaseException | str, *, details: str | None = None) -> RunResult:
    """A failed :class:`RunResult` for ``task``: ``error`` as one line, with the traceback as details."""
    if isinstance(error, BaseException):
        details = details or "".join(traceback.format_exception(error))
        message = f"{type(error).__name__}: {error}"
    else:
        message = error
    line = " ".join(message.split()) or "failed without a message"
    return RunResult(
        task.run.model.name, task.run.key, ok=False, error=line, details=details, host=socket.gethostname()
    )


class Reported(Protocol):
    """What a finished training reports (:class:`gengen.training.train.RunOutcome`, or its part that torchrun's
    process 0
    prints); a ``resumed_from`` attribute is read when there is one."""

    @property
    def rows_written(self) -> int: ...

    @property
    def skipped(self) -> bool: ...


def finished(task: RunTask, outcome: Reported, *, seconds: float, **spooled: Any) -> RunResult:
    """A successful :class:`RunResult` for ``task`` from what its training reported.

    Parameters
    ----------
    task : RunTask
    outcome : Reported
        The rows written, whether the run was already complete and, when known, where it resumed.
    seconds : float
        Wall time of the attempt.
    **spooled
        ``scores`` and ``manifest`` of a run trained into its spool.

    Returns
    -------
    RunResult
    """
    return RunResult(
        task.run.model.name,
        task.run.key,
        ok=True,
        rows_written=outcome.rows_written,
        skipped=outcome.skipped,
        seconds=seconds,
        host=socket.gethostname(),
        resumed_from=getattr(outcome, "resumed_from", None),
        **spooled,
    )


class Executor(abc.ABC):
    """Runs :class:`RunTask` values somewhere and hands back their :class:`RunResult` values.

    Use as a context manager: entering starts (or joins) the backend, leaving releases it.
    """

    name: str = ""
    #: The runs write the study's store themselves (scores as computed, then the manifest): nothing to merge.
    writes_store: bool = False

    def __enter__(self) -> Executor:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:  # noqa: B027 - optional hook
        """Start or join the backend (default: nothing to do)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the backend (default: nothing to do)."""

    @property
    def records_state(self) -> bool:
        """Whether this process writes the runs' ``state.json`` (default True; False in all but the first of
        several processes that drive one study together under torchrun)."""
        return True

    @property
    def capacity(self) -> int | None:
        """Tasks the driver may keep in flight at once (None: no limit, the backend queues them)."""
        return None

    def job_id(self, handle: Handle) -> str | None:
        """The backend's id of a submitted task, recorded in the run's state (default: None)."""
        return None

    def reattach(self, task: RunTask, job_id: str) -> Handle | None:
        """A handle on a task submitted by an earlier driver and still alive, or None (default: None).

        Lets a re-submission wait for jobs that outlived a killed driver instead of starting them twice.
        """
        return None

    @abc.abstractmethod
    def submit(self, task: RunTask) -> Handle:
        """Start ``task`` and return a handle to wait on."""

    @abc.abstractmethod
    def wait(self, handles: Sequence[Handle]) -> list[int]:
        """Block until at least one of ``handles`` is finished; return the positions of the finished ones."""

    @abc.abstractmethod
    def result(self, handle: Handle, task: RunTask) -> RunResult:
        """The result of a finished task; a task the backend lost (a crashed worker, a cancelled job) comes
        back as a failed result, never as an exception."""
