"""Executors: run a study's grid of fine-tuning runs on this machine, on Ray or on Slurm.

:func:`execute_study` is the one study driver, behind ``gengen run``, ``gengen train`` and the demo. It plans
the runs (each run's folder and files made once, a :class:`gengen.study.paths.RunPaths` that every task carries),
skips those complete in the study's store, hands the others to an executor
(:mod:`~gengen.executors.local`, :mod:`~gengen.executors.ray`, :mod:`~gengen.executors.slurm`, or the direct
executor of ``gengen train``, :mod:`~gengen.executors.direct`), retries failed runs up to ``retries`` times,
and merges every finished run into the store. Every executor's workers call :func:`gengen.training.train.train_run`.

Who writes what (see ``docs/executors.md``):

* a worker trains one run into its **run folder**: checkpoints, ``run.json``, and a score spool
  (:class:`~gengen.executors.spool.RunSpool`: one JSON file per evaluation, written atomically) — never the
  study's SQLite store;
* the driver is the **single writer** of the store: when a run finishes it merges the run's spool in one
  transaction (equal rows are no-ops, so a merge repeated after a crash changes nothing), then the manifest;
* run state (pending, running, done, failed) lives in ``state.json`` in each run folder
  (:mod:`~gengen.executors.state`), read by ``gengen status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.executors.base import Executor, RunResult, RunTask
    from gengen.executors.driver import StudyExecution, execute_study, make_executor, merge_run
    from gengen.executors.state import RunStatus, study_status
    from gengen.study.tables import EXECUTORS

# Public name -> the module defining it, imported on first use (PEP 562): a worker process importing one executor
# module (gengen.executors.worker, .state) does not load the study driver and pandas.
_MODULE_OF: dict[str, str] = {
    "EXECUTORS": "gengen.study.tables",
    "Executor": "gengen.executors.base",
    "RunResult": "gengen.executors.base",
    "RunStatus": "gengen.executors.state",
    "RunTask": "gengen.executors.base",
    "StudyExecution": "gengen.executors.driver",
    "execute_study": "gengen.executors.driver",
    "make_executor": "gengen.executors.driver",
    "merge_run": "gengen.executors.driver",
    "study_status": "gengen.executors.state",
}

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

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
