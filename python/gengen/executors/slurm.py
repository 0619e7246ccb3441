"""The Slurm executor, through submitit: one job per run, with the study's ``[resources]`` and Slurm options.

``executor.cluster = "local"`` runs the same jobs through submitit's local executor (a process per job on this
machine) and ``"debug"`` through its in-process one, to try a study, or test gengen, without Slurm.

A job's result comes back as the JSON file :mod:`gengen.executors.results` writes and checks, never through
submitit's result pickle: the Slurm folder lies in the user's study folder, and unpickling a file found there
(``slurm/<job>/<job>_0_result.pkl``) would run whatever code it names. A recorded job id is used only when it
is a Slurm job id (digits, ``123`` or ``123_4``).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gengen.errors import ConfigError, InputError
from gengen.executors.base import Executor, RunResult, RunTask, failure
from gengen.executors.results import read_result, write_result
from gengen.executors.worker import execute_run
from gengen.study.tables import ExecutorConfig, ResourcesConfig

__all__ = ["SlurmExecutor", "run_job"]

ALIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"})
"""Slurm job states of a job that may still deliver its result."""

POLL_SECONDS = (0.2, 5.0)
"""First and longest pause between two looks at the jobs' states."""

RESULT_WAIT_SECONDS = 15.0
"""How long a finished job's result file may take to appear (a network file system's caches)."""

SLURM_JOB_ID = re.compile(r"[0-9]{1,20}(_[0-9]{1,10})?")


def _this_job_id() -> str:
    """The id of the submitit job this process runs in (Slurm, local or debug)."""
    import submitit

    try:
        return str(submitit.JobEnvironment().job_id)
    except Exception:  # not inside a submitit job: the Slurm variable, if any
        return os.environ.get("SLURM_JOB_ID", "")


def run_job(task: RunTask) -> None:
    """What each submitted job runs: :func:`~gengen.executors.worker.execute_run`, its result written as JSON.

    Returns None, so submitit's own result pickle holds nothing; the driver reads the JSON file
    (:func:`gengen.executors.results.read_result`). In a job of several tasks (one per GPU) task 0 writes it.
    """
    result = execute_run(task)
    if os.environ.get("RANK", "0") == "0":
        write_result(task.paths.result, result, job_id=_this_job_id(), attempt=task.attempt)


def slurm_parameters(settings: ExecutorConfig, resources: ResourcesConfig) -> dict[str, Any]:
    """submitit ``AutoExecutor.update_parameters`` keywords for the study's executor and resources."""
    if resources.gpus != int(resources.gpus):
        raise ConfigError(f"resources.gpus: Slurm needs a whole number of GPUs, got {resources.gpus:g}")
    parameters: dict[str, Any] = {
        "name": "gengen",
        "timeout_min": settings.time_minutes,
        "cpus_per_task": resources.cpus,
        "slurm_partition": settings.partition,
        "slurm_account": settings.account,
        "slurm_qos": settings.qos,
        "slurm_constraint": settings.constraint,
    }
    if resources.gpus:
        parameters["gpus_per_node"] = int(resources.gpus)
    if resources.gpus > 1:
        # One task per GPU: the run trains data parallel over all of them (gengen.training.train.World), not on cuda:0.
        parameters["tasks_per_node"] = int(resources.gpus)
        parameters["cpus_per_task"] = max(1, resources.cpus // int(resources.gpus))
    if resources.memory_gb is not None:
        parameters["mem_gb"] = math.ceil(resources.memory_gb)
    if settings.setup:
        parameters["slurm_setup"] = list(settings.setup)
    if settings.additional:
        parameters["slurm_additional_parameters"] = dict(settings.additional)
    return {k: v for k, v in parameters.items() if v is not None}


class SlurmExecutor(Executor):
    """Submits each run as a Slurm job with submitit.

    Parameters
    ----------
    settings : ExecutorConfig
        Partition, time limit, account, QoS, constraint, setup lines, extra ``#SBATCH`` options and the
        submitit backend (``cluster``).
    resources : ResourcesConfig
        CPUs, GPUs and memory of each job.
    folder : Path
        Where submitit keeps job files and logs (``%j`` is the job id).
    """

    name = "slurm"

    def __init__(self, settings: ExecutorConfig, resources: ResourcesConfig, folder: Path):
        self.settings = settings
        self.resources = resources
        self.folder = Path(folder)
        self.executor: Any = None
        self.parameters = slurm_parameters(settings, resources)
        self.result_wait = RESULT_WAIT_SECONDS
        self._tasks: dict[str, RunTask] = {}

    @property
    def capacity(self) -> int | None:
        """``executor.jobs`` (None: submit every run; Slurm queues them)."""
        return self.settings.jobs

    def start(self) -> None:
        """Create the submitit executor (``cluster``: slurm, local or debug)."""
        try:
            import submitit
        except ImportError:
            raise ConfigError(
                "executor.kind: 'slurm' needs the submitit package (pip install 'gengen[cluster]')"
            ) from None
        self.folder.mkdir(parents=True, exist_ok=True)
        self.executor = submitit.AutoExecutor(folder=self.folder / "%j", cluster=self.settings.cluster)
        self.executor.update_parameters(**self.parameters)

    def job_id(self, handle: Any) -> str | None:
        """The Slurm job id."""
        return str(handle.job_id)

    def reattach(self, task: RunTask, job_id: str) -> Any:
        """The job ``job_id`` when Slurm still runs (or queues) it, or it left its result; else None.

        Raises
        ------
        InputError
            ``job_id`` (read from the run's state file) is not a Slurm job id.
        """
        if self.settings.cluster != "slurm":
            return None  # submitit's local jobs die with their driver
        if not SLURM_JOB_ID.fullmatch(job_id):
            raise InputError(
                f"{task.paths.state}: job_id {job_id[:80]!r} is not a Slurm job id (digits, or digits_digits); "
                "delete the file to submit the run afresh"
            )
        import submitit

        left = self._left_result(task, job_id)
        try:
            job: Any = submitit.SlurmJob(folder=self.folder / "%j", job_id=job_id)
            if left or job.state in ALIVE_STATES:
                self._tasks[job_id] = task
                return job
        except Exception:  # no sacct, an unknown job: submit again
            return None
        return None

    def submit(self, task: RunTask) -> Any:
        """Submit ``task`` as one job; returns the submitit job."""
        self.executor.update_parameters(name=f"gengen-{task.run.model.name}-{task.run.key}")
        job = self.executor.submit(run_job, task)
        self._tasks[str(job.job_id)] = task
        return job

    def _left_result(self, task: RunTask, job_id: str) -> bool:
        """Whether job ``job_id`` has written its result file (a damaged one counts: result() reports it)."""
        try:
            return read_result(task.paths.result, job_id=job_id, **_names(task)) is not None
        except InputError:
            return True

    def _done(self, job: Any) -> bool:
        task = self._tasks.get(str(job.job_id))
        return bool(job.done()) or (task is not None and self._left_result(task, str(job.job_id)))

    def wait(self, handles: Sequence[Any]) -> list[int]:
        """Positions of the finished jobs (at least one), polling with a growing pause."""
        pause = POLL_SECONDS[0]
        while True:
            finished = [i for i, job in enumerate(handles) if self._done(job)]
            if finished:
                return finished
            time.sleep(pause)
            pause = min(pause * 1.5, POLL_SECONDS[1])

    def result(self, handle: Any, task: RunTask) -> RunResult:
        """The run's result from the job's result file, or a failure when the job left none (it died: time
        limit, out of memory, cancelled) or a damaged one. submitit's result pickle is never read."""
        job_id = str(handle.job_id)
        path = task.paths.result
        deadline = time.monotonic() + self.result_wait
        while True:
            try:
                found = read_result(path, job_id=job_id, **_names(task))
            except InputError as error:
                return failure(task, f"job {job_id}: {error}")
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        return failure(task, f"job {job_id}: ended without writing {path} ({_state(handle)})", details=_log(handle))


def _names(task: RunTask) -> dict[str, str]:
    return {"model": task.run.model.name, "run": task.run.key}


def _state(job: Any) -> str:
    try:
        return f"Slurm state {job.state}"
    except Exception:  # no sacct
        return "Slurm state unknown"


def _log(job: Any) -> str | None:
    """The last lines of the job's error log (plain text), for the run's state."""
    try:
        path = Path(job.paths.stderr)
        if not path.is_file():  # absent, or a FIFO that would block
            return None
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 65536))
            text = handle.read().decode("utf-8", errors="replace")
    except (OSError, AttributeError):
        return None
    return "\n".join(text.splitlines()[-40:]) or None
