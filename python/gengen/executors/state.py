"""Run state kept in the study folder: ``runs/<model>/<run>/state.json``, written atomically.

The driver writes ``pending`` (submitted, waiting for a worker), ``done`` and ``failed`` (with the error);
the worker writes ``running`` (with its host and process id) when it starts. :func:`study_status` reads the
states together with each run's progress: evaluations stored over evaluations planned.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gengen.errors import InputError
from gengen.executors.spool import RunSpool, read_json, write_json_atomic
from gengen.study.config import RunSpec, StudyConfig
from gengen.study.paths import STATE_FILE, RunPaths, RunPlan

__all__ = [
    "JOB_ID_PATTERN",
    "STATE_FILE",
    "STATUSES",
    "RunStatus",
    "check_state",
    "read_state",
    "study_status",
    "write_state",
]

STATUSES = ("pending", "running", "done", "failed")

JOB_ID_PATTERN = re.compile(r"[A-Za-z0-9_]{1,64}")
"""What a recorded job id may be (Slurm ``123`` or ``123_4``, submitit's local and debug ids): it becomes part of a
path (``slurm/<job id>/``) and a command line, so nothing else is used."""

# The fields a state file may hold and their types (``int`` excludes ``bool``); other keys are kept as they are.
_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "run": (str,),
    "status": (str,),
    "updated_at": (str,),
    "host": (str,),
    "pid": (int,),
    "attempt": (int,),
    "executor": (str,),
    "job_id": (str,),
    "error": (str,),
    "details": (str,),
    "worker": (str,),
}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _paths(where: RunPaths | StudyConfig, run: RunSpec) -> RunPaths:
    """The run's paths as planned, or, given the study itself, the run's paths in it."""
    return where if isinstance(where, RunPaths) else RunPaths.for_run(where, run)


def write_state(where: RunPaths | StudyConfig, run: RunSpec, status: str, **fields: Any) -> None:
    """Record ``status`` (one of :data:`STATUSES`) and ``fields`` as the run's state, replacing the last.

    ``where`` is the run's :class:`~gengen.study.paths.RunPaths` as the driver planned them (or the study, for a
    caller outside a planned run: the run's paths are then made from it).
    """
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
    write_json_atomic(_paths(where, run).state, record)


def check_state(path: Path, record: Any) -> dict[str, Any]:
    """``record`` (the JSON of the state file ``path``) checked field by field; InputError naming the file.

    A state file is written by gengen, but it lies in the user's folder: a damaged or planted one must not
    become a traceback, nor a job id that leads elsewhere (see :data:`JOB_ID_PATTERN`).
    """
    fix = "delete it to let gengen start the run's state afresh"
    if not isinstance(record, dict):
        raise InputError(f"{path}: not a run state (a JSON object expected, got {type(record).__name__}); {fix}")
    for key, kinds in _FIELDS.items():
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, kinds) or (int in kinds and isinstance(value, bool)):
            raise InputError(
                f"{path}: {key}: expected {' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}; {fix}"
            )
    if record.get("status") not in (None, *STATUSES):
        raise InputError(f"{path}: status: expected one of {', '.join(STATUSES)}, got {record['status']!r}; {fix}")
    if record.get("attempt") is not None and not 0 <= record["attempt"] <= 1_000_000:
        raise InputError(f"{path}: attempt: expected an integer from 0 to 1000000, got {record['attempt']}; {fix}")
    if record.get("pid") is not None and not 1 <= record["pid"] < 2**31:
        raise InputError(f"{path}: pid: expected a process id (1 to 2^31 - 1), got {record['pid']}; {fix}")
    job_id = record.get("job_id")
    if job_id is not None and not JOB_ID_PATTERN.fullmatch(job_id):
        shown = job_id if len(job_id) <= 80 else job_id[:77] + "..."
        raise InputError(f"{path}: job_id: {shown!r} is not a job id (letters, digits and _ only); {fix}")
    return record


def read_state(where: RunPaths | StudyConfig, run: RunSpec) -> dict[str, Any] | None:
    """The run's last recorded state, or None when it has none.

    ``where`` is the run's :class:`~gengen.study.paths.RunPaths` (or the study, as for :func:`write_state`).

    Raises
    ------
    InputError
        The state file is not a JSON object of the expected fields (damaged, or written by something else).
    """
    path = _paths(where, run).state
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():  # a folder, a FIFO (reading it would block), a dangling link
        raise InputError(f"{path}: not a regular file, expected the run's state file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); the run state file is damaged") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}: not valid JSON (line {error.lineno} column {error.colno}: {error.msg}); the run state file "
            "is damaged: delete it to let gengen start the run's state afresh"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None
    return check_state(path, record)


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
    store : gengen.store.database.Store, optional
        The study's store (default: the one in ``config.output``, when it exists). It is opened only for
        runs without a state file: the spools hold every score of a submitted run, so status never touches
        the database that the driver is writing.

    Returns
    -------
    list of RunStatus
        In the order of ``config.runs()``.
    """
    from gengen.store.database import DB_NAME, Store

    grid = {(t.name, m) for t in config.testsets for m in config.evaluation.metrics}
    out = []
    plan = RunPlan.for_runs(config, config.runs())
    for run in plan:
        paths = plan.paths[run]
        done = RunSpool(paths.folder, study=config.name).completed(run.model.name, run.key)
        state = read_state(paths, run) or {}
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
        record = read_json(paths.record)
        planned = len(record["evaluation_steps"]) if isinstance(record, dict) else None
        status = state.get("status")
        if status is None:
            status = "done" if manifest is not None and manifest.get("status") == "complete" else "pending"
        note = None
        pid = state.get("pid")
        if status == "running" and state.get("host") == socket.gethostname() and pid is not None and not _alive(pid):
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
