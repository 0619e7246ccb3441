"""The Slurm executor, through submitit: one job per run, with the study's ``[resources]`` and Slurm options.

``executor.cluster = "local"`` runs the same jobs through submitit's local executor (a process per job on this
machine) and ``"debug"`` through its in-process one, to try a study, or test gengen, without Slurm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gengen.config import ExecutorConfig, ResourcesConfig
from gengen.errors import ConfigError
from gengen.executors.base import Executor, RunResult, RunTask, failure
from gengen.executors.worker import execute_run

__all__ = ["SlurmExecutor"]

ALIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"})
"""Slurm job states of a job that may still deliver its result."""

POLL_SECONDS = (0.2, 5.0)
"""First and longest pause between two looks at the jobs' states."""


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
        # One task per GPU: the run trains data parallel over all of them (gengen.train.World), not on cuda:0.
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
        """The job ``job_id`` when Slurm still runs (or queues) it, or it left its result; else None."""
        if self.settings.cluster != "slurm":
            return None  # submitit's local jobs die with their driver
        import submitit

        try:
            job: Any = submitit.SlurmJob(folder=self.folder / "%j", job_id=job_id)
            if job.paths.result_pickle.exists() or job.state in ALIVE_STATES:
                return job
        except Exception:  # no sacct, an unknown job: submit again
            return None
        return None

    def submit(self, task: RunTask) -> Any:
        """Submit ``task`` as one job; returns the submitit job."""
        self.executor.update_parameters(name=f"gengen-{task.run.model.name}-{task.run.key}")
        return self.executor.submit(execute_run, task)

    def wait(self, handles: Sequence[Any]) -> list[int]:
        """Positions of the finished jobs (at least one), polling with a growing pause."""
        pause = POLL_SECONDS[0]
        while True:
            finished = [i for i, job in enumerate(handles) if job.done()]
            if finished:
                return finished
            time.sleep(pause)
            pause = min(pause * 1.5, POLL_SECONDS[1])

    def result(self, handle: Any, task: RunTask) -> RunResult:
        """The run's result, or a failure when the job died (time limit, out of memory, cancelled)."""
        try:
            result: RunResult = handle.result()
        except Exception as error:  # submitit's FailedJobError / UncompletedJobError, whatever the backend
            text = str(error).strip()
            first = text.splitlines()[0] if text else type(error).__name__
            return failure(task, f"job {handle.job_id}: {first}", details=text)
        return result
