"""The function every executor runs for one run: train and score it into its run folder's spool.

It is a plain module-level function of one picklable argument, so a process pool, a Ray task and a submitit
job can all call it. It never raises for a failed run: the error comes back in the :class:`RunResult`, so
the executor's own failure reporting is only needed when a worker dies outright.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from gengen.executors.base import Reported, RunResult, RunTask, failure, finished
from gengen.executors.spool import RunSpool
from gengen.executors.state import read_state, write_state

__all__ = ["execute_run"]


def _print(line: str) -> None:
    print(line, flush=True)


OUTCOME_PREFIX = "gengen-outcome: "


class _Outcome:
    """What the processes of a data-parallel run report back (process 0's RunOutcome, in part)."""

    def __init__(self, rows_written: int, skipped: bool):
        self.rows_written = rows_written
        self.skipped = skipped


def _train_over_processes(task: RunTask, log: Callable[[str], None]) -> _Outcome | None:
    """A run asking for several GPUs (``resources.gpus`` > 1) in one process (a Ray task, a local worker):
    train it data parallel under torchrun, one process per GPU (without CUDA: CPU processes), into the same
    spool. None when this process is already one of several (torchrun, a Slurm job's tasks) or one GPU suffices.

    The processes get the study file's path, the run's key, the study's output folder (which ``gengen run
    --out`` may have moved away from the file's ``[study] output``) and the run's paths as the driver planned
    them (:meth:`~gengen.study.paths.RunPaths.to_json`), never a pickle: nothing in the study folder is executed,
    and every process writes where the driver reads.
    """
    from gengen.errors import ConfigError

    gpus = int(task.config.resources.gpus)
    if gpus <= 1 or "RANK" in os.environ or int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return None
    if task.config.source is None:
        raise ConfigError("resources.gpus > 1: the study must be loaded from its file (the processes read it)")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    command += ["-m", "gengen.executors.worker", str(task.config.source), task.run.model.name, task.run.key]
    command += [str(task.threads), str(task.config.output), json.dumps(task.paths.to_json())]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    reported = [line for line in finished.stdout.splitlines() if line.startswith(OUTCOME_PREFIX)]
    for line in finished.stdout.splitlines():
        if not line.startswith(OUTCOME_PREFIX):
            log(line)
    if finished.returncode != 0 or not reported:
        tail = " | ".join(finished.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{gpus} training processes failed (exit status {finished.returncode}): {tail}")
    outcome = json.loads(reported[-1][len(OUTCOME_PREFIX) :])
    return _Outcome(int(outcome["rows_written"]), bool(outcome["skipped"]))


def _process_main(argv: list[str]) -> None:
    """One of the processes _train_over_processes starts: train its share of the run; process 0 reports."""
    import torch

    from gengen.study.config import load_config
    from gengen.study.paths import RunPaths
    from gengen.training.train import train_run

    path, model, key, threads, output, planned = argv
    config = load_config(path, output=output)
    run = next(r for r in config.runs() if r.model.name == model and r.key == key)
    paths = RunPaths.from_json(json.loads(planned))
    torch.set_num_threads(int(threads))
    spool = RunSpool(paths.folder, study=config.name)
    outcome = train_run(config, run, store=spool, paths=paths, log=_print, progress=False)
    if os.environ.get("RANK", "0") == "0":
        _print(OUTCOME_PREFIX + json.dumps({"rows_written": outcome.rows_written, "skipped": outcome.skipped}))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _join_slurm_tasks() -> None:
    """In a Slurm job of several tasks (one per GPU), export torch.distributed's variables for this task.

    gengen.training.train then trains the run data parallel over the tasks; task 0 writes the spool and its result is
    the job's.
    """
    if int(os.environ.get("SLURM_NTASKS", "1")) <= 1 or "RANK" in os.environ:
        return
    from submitit.helpers import TorchDistributedEnvironment

    # Every task sees every GPU of the node; gengen.training.train picks cuda:LOCAL_RANK.
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
    config, run, paths = task.config, task.run, task.paths
    start = time.perf_counter()
    try:
        _join_slurm_tasks()
        job_id = os.environ.get("SLURM_JOB_ID") or (read_state(paths, run) or {}).get("job_id")
        if os.environ.get("RANK", "0") == "0":  # one writer of the run's state
            write_state(paths, run, "running", attempt=task.attempt, **({"job_id": job_id} if job_id else {}))
        import torch

        from gengen.training.train import train_run

        torch.set_num_threads(task.threads)
        spool = RunSpool(paths.folder, study=config.name)
        outcome: Reported | None = _train_over_processes(task, log)
        if outcome is None:
            outcome = train_run(config, run, store=spool, paths=paths, log=log, progress=False)
        scores = tuple(spool.records())
        manifest = spool.manifest(run.model.name, run.key)
    except Exception as error:  # a failed run is reported, never raised: the other runs go on
        return failure(task, error)
    return finished(task, outcome, seconds=time.perf_counter() - start, scores=scores, manifest=manifest)


if __name__ == "__main__":
    _process_main(sys.argv[1:])
