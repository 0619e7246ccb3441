"""The Ray executor: each run is a Ray task asking for the study's ``[resources]``.

Joins the cluster at ``executor.address`` (``"auto"``, ``"ray://head:10001"``), or the Ray instance already
initialised in this process, or starts a local one (shut down again at the end). Ray's own retries are off
(``max_retries = 0``): the driver retries failed runs itself, so that every attempt is counted and reported
the same way under every executor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gengen.errors import ConfigError
from gengen.executors.base import Executor, RunResult, RunTask, failure
from gengen.executors.worker import execute_run
from gengen.study.tables import ResourcesConfig

__all__ = ["RayExecutor"]


class RayExecutor(Executor):
    """Runs each run as a Ray task.

    Parameters
    ----------
    resources : ResourcesConfig
        ``num_cpus``, ``num_gpus`` and ``memory`` of every task.
    address : str or None
        The cluster to join; None joins the instance initialised in this process or starts a local one.
    jobs : int or None
        Tasks in flight at once (None: all; Ray queues what does not fit).
    """

    name = "ray"

    def __init__(self, resources: ResourcesConfig, *, address: str | None = None, jobs: int | None = None):
        self.resources = resources
        self.address = address
        self.jobs = jobs
        self.owned = False
        self.remote: Any = None

    @property
    def capacity(self) -> int | None:
        """``jobs`` (None: no cap)."""
        return self.jobs

    def start(self) -> None:
        """Join or start Ray and declare the task with the study's resources."""
        try:
            import ray
        except ImportError:
            raise ConfigError("executor.kind: 'ray' needs the ray package (pip install 'gengen[cluster]')") from None
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=True)
            except ConnectionError as error:
                raise ConfigError(f"executor.address: cannot join Ray at {self.address!r}: {error}") from None
            self.owned = True
        options: dict[str, Any] = {
            "num_cpus": self.resources.cpus,
            "num_gpus": self.resources.gpus,
            "max_retries": 0,
        }
        if self.resources.memory_gb is not None:
            options["memory"] = math.ceil(self.resources.memory_gb * 2**30)
        self.remote = ray.remote(**options)(execute_run)

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self.owned:
            import ray

            ray.shutdown()
            self.owned = False

    def submit(self, task: RunTask) -> Any:
        """Submit ``task`` as a Ray task; returns its object reference."""
        return self.remote.options(name=f"gengen {task.label}").remote(task)

    def wait(self, handles: Sequence[Any]) -> list[int]:
        """Positions of the finished tasks (at least one)."""
        import ray

        refs = list(handles)
        ray.wait(refs, num_returns=1)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        finished = set(ready)
        return [i for i, ref in enumerate(refs) if ref in finished]

    def result(self, handle: Any, task: RunTask) -> RunResult:
        """The run's result, or a failure when Ray lost the task (a crashed worker, a lost node)."""
        import ray

        try:
            result: RunResult = ray.get(handle)
        except ray.exceptions.RayError as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            return failure(task, f"ray: {type(error).__name__}: {first}", details=str(error))
        return result
