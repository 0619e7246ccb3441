"""The function every executor runs for one run: train and score it into its run folder's spool.

It is a plain module-level function of one picklable argument, so a process pool, a Ray task and a submitit
job can all call it. It never raises for a failed run: the error comes back in the :class:`RunResult`, so
the executor's own failure reporting is only needed when a worker dies outright.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from gengen.executors.base import RunResult, RunTask, failure
from gengen.executors.spool import RunSpool
from gengen.executors.state import read_state, write_state

__all__ = ["execute_run"]


def _print(line: str) -> None:
    print(line, flush=True)


def _join_slurm_tasks() -> None:
    """In a Slurm job of several tasks (one per GPU), export torch.distributed's variables for this task.

    gengen.train then trains the run data parallel over the tasks; task 0 writes the spool and its result is
    the job's.
    """
    if int(os.environ.get("SLURM_NTASKS", "1")) <= 1 or "RANK" in os.environ:
        return
    from submitit.helpers import TorchDistributedEnvironment

    # Every task sees every GPU of the node; gengen.train picks cuda:LOCAL_RANK.
    TorchDistributedEnvironment().export(set_cuda_visible_devices=False)


def execute_run(task: RunTask, log: Callable[[str], None] = _print) -> RunResult:
    """Train and score one run into its spool (resuming it), and report how it went.

    Parameters
    ----------
    task : RunTask
        The study, the run, the attempt number and the torch threads to use.
    log : callable
        Progress lines (printed, so that they reach the executor's log).

    Returns
    -------
    RunResult
        ``ok`` with the rows written, or the error as one line with its traceback.
    """
    config, run = task.config, task.run
    start = time.perf_counter()
    try:
        _join_slurm_tasks()
        job_id = os.environ.get("SLURM_JOB_ID") or (read_state(config, run) or {}).get("job_id")
        if os.environ.get("RANK", "0") == "0":  # one writer of the run's state
            write_state(config, run, "running", attempt=task.attempt, **({"job_id": job_id} if job_id else {}))
        import torch

        from gengen.train import train_run

        torch.set_num_threads(task.threads)
        spool = RunSpool(config.run_dir(run), study=config.name)
        outcome = train_run(config, run, store=spool, log=log, progress=False)
        scores = tuple(spool.records())
        manifest = spool.manifest(run.model.name, run.key)
    except Exception as error:  # a failed run is reported, never raised: the other runs go on
        return failure(task, error)
    return RunResult(
        run.model.name,
        run.key,
        ok=True,
        rows_written=outcome.rows_written,
        skipped=outcome.skipped,
        seconds=time.perf_counter() - start,
        host=socket.gethostname(),
        scores=scores,
        manifest=manifest,
    )
