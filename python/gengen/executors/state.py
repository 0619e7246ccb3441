"""Run state kept in the study folder: ``runs/<model>/<run>/state.json``, written atomically.

The driver writes ``pending`` (submitted, waiting for a worker), ``done`` and ``failed`` (with the error);
the worker writes ``running`` (with its host and process id) when it starts. :func:`study_status` reads the
states together with each run's progress: evaluations stored over evaluations planned.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gengen.config import RunSpec, StudyConfig
from gengen.executors.spool import RunSpool, read_json, write_json_atomic

__all__ = ["STATE_FILE", "STATUSES", "RunStatus", "read_state", "study_status", "write_state"]

STATE_FILE = "state.json"
STATUSES = ("pending", "running", "done", "failed")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_state(config: StudyConfig, run: RunSpec, status: str, **fields: Any) -> None:
    """Record ``status`` (one of :data:`STATUSES`) and ``fields`` as the run's state, replacing the last."""
    if status not in STATUSES:
        raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {status!r}")
    record = {
        "model": run.model.name,
        "run": run.key,
        "status": status,
        "updated_at": _now(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **fields,
    }
    write_json_atomic(config.run_dir(run) / STATE_FILE, record)


def read_state(config: StudyConfig, run: RunSpec) -> dict[str, Any] | None:
    """The run's last recorded state, or None."""
    found = read_json(config.run_dir(run) / STATE_FILE)
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class RunStatus:
    """One line of ``gengen status``.

    Attributes
    ----------
    model, run : str
        The run.
    status : str
        ``pending``, ``running``, ``done`` or ``failed``.
    stored : int
        Evaluations (checkpoint steps) with every test set and metric stored, in the run's spool or the store.
    planned : int or None
        Evaluations the run will make (known once the run has started).
    attempt : int
        Attempts made so far.
    error : str or None
        Why the last attempt failed.
    host : str or None
        Where the run is (was) running.
    updated_at : str or None
        When the state was last written (UTC).
    note : str or None
        E.g. that the process of a ``running`` run on this host is gone (the driver was killed).
    job_id : str or None
        The Slurm job of the last attempt.
    """

    model: str
    run: str
    status: str
    stored: int
    planned: int | None
    attempt: int = 0
    error: str | None = None
    host: str | None = None
    updated_at: str | None = None
    note: str | None = None
    job_id: str | None = None

    @property
    def progress(self) -> str:
        """``"stored/planned"`` (``"stored/?"`` before the run starts)."""
        return f"{self.stored}/{'?' if self.planned is None else self.planned}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def study_status(config: StudyConfig, store: Any = None) -> list[RunStatus]:
    """The state and progress of every run of a study.

    Parameters
    ----------
    config : StudyConfig
    store : gengen.store.Store, optional
        The study's store (default: the one in ``config.output``, when it exists). It is opened only for
        runs without a state file: the spools hold every score of a submitted run, so status never touches
        the database that the driver is writing.

    Returns
    -------
    list of RunStatus
        In the order of ``config.runs()``.
    """
    from gengen.store import DB_NAME, Store

    grid = {(t.name, m) for t in config.testsets for m in config.evaluation.metrics}
    out = []
    for run in config.runs():
        run_dir = config.run_dir(run)
        done = RunSpool(run_dir, study=config.name).completed(run.model.name, run.key)
        state = read_state(config, run) or {}
        manifest = None
        if not state or not done:  # not trained through an executor (``gengen train``, say): the store knows
            if store is None and (config.output / DB_NAME).is_file():
                store = Store(config.output, study=config.name)
            if store is not None:
                done |= store.completed(run.model.name, run.key, study=config.name)
                manifest = store.manifest(run.model.name, run.key)
        steps: dict[int, set[tuple[str, str]]] = {}
        for step, testset, metric in done:
            steps.setdefault(step, set()).add((testset, metric))
        stored = sum(1 for pairs in steps.values() if grid <= pairs)
        record = read_json(Path(run_dir) / "run.json")
        planned = len(record["evaluation_steps"]) if isinstance(record, dict) else None
        status = state.get("status")
        if status is None:
            status = "done" if manifest is not None and manifest.get("status") == "complete" else "pending"
        note = None
        if status == "running" and state.get("host") == socket.gethostname() and not _alive(int(state["pid"])):
            note = "its process is gone: submit the study again to resume it"
        out.append(
            RunStatus(
                model=run.model.name,
                run=run.key,
                status=status,
                stored=stored,
                planned=planned,
                attempt=int(state.get("attempt", 0)),
                error=state.get("error"),
                host=state.get("host"),
                updated_at=state.get("updated_at"),
                note=note,
                job_id=state.get("job_id"),
            )
        )
    return out
