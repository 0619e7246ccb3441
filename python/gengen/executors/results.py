"""A job's result as a JSON file that gengen writes and checks: ``runs/<model>/<run>/result.json``.

submitit hands a job's return value back as a pickle in its folder (``slurm/<job>/<job>_0_result.pkl``), and
unpickling runs whatever code the pickle names. The folder is the user's, so a planted or swapped pickle would
run when the driver reattaches to the job. The Slurm executor therefore never reads submitit's pickles: each
job writes its :class:`~gengen.executors.base.RunResult` here (the run's :attr:`~gengen.study.paths.RunPaths.result`)
as plain JSON (with the job id and attempt it belongs to), and the driver reads it back through
:func:`read_result`, which checks every field's type and that the file belongs to the job and run it is read for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gengen.errors import InputError
from gengen.executors.base import RunResult
from gengen.executors.spool import write_json_atomic
from gengen.study.paths import RESULT_FILE

__all__ = ["RESULT_FILE", "RESULT_FORMAT", "read_result", "write_result"]

RESULT_FORMAT = "gengen-run-result/1"
"""The ``format`` field of a result file (a later layout changes the number)."""

_SCALARS = (str, int, float, bool, type(None))
# RunResult's fields and the JSON types each may take.
_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "run": (str,),
    "ok": (bool,),
    "error": (str, type(None)),
    "details": (str, type(None)),
    "rows_written": (int,),
    "skipped": (bool,),
    "seconds": (int, float),
    "host": (str,),
    "scores": (list, type(None)),
    "manifest": (dict, type(None)),
    "resumed_from": (int, type(None)),
}


def write_result(path: Path, result: RunResult, *, job_id: str, attempt: int) -> None:
    """Write ``result`` of job ``job_id`` (attempt ``attempt``) to ``path``, atomically."""
    record: dict[str, Any] = {"format": RESULT_FORMAT, "job_id": job_id, "attempt": attempt}
    for name in _FIELDS:
        value = getattr(result, name)
        record[name] = list(value) if name == "scores" and value is not None else value
    write_json_atomic(path, record)


def read_result(path: Path, *, job_id: str, model: str, run: str) -> RunResult | None:
    """The result job ``job_id`` left in ``path`` for ``model``/``run``, or None when it left none.

    A file of another job (an earlier attempt's) counts as none.

    Raises
    ------
    InputError
        The file is not a result file gengen wrote: not a regular file, not JSON, another format, a field of
        the wrong type, a score row that is not a flat record, or the result of another run.
    """
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        raise InputError(f"{path}: not a regular file, expected a job's result file")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise InputError(f"{path}: not a gengen result file ({type(error).__name__}); it is damaged") from None
    if not isinstance(record, dict) or record.get("format") != RESULT_FORMAT:
        raise InputError(f"{path}: not a gengen result file (format {RESULT_FORMAT!r} expected)")
    if record.get("job_id") != job_id:
        return None
    for name, kinds in _FIELDS.items():
        value = record.get(name)
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise InputError(f"{path}: {name}: expected {' or '.join(k.__name__ for k in kinds)}, got {value!r:.60}")
    if (record["model"], record["run"]) != (model, run):
        raise InputError(f"{path}: the result of run {record['model']} {record['run']}, not of {model} {run}")
    scores = record["scores"]
    if scores is not None:
        for number, row in enumerate(scores, start=1):
            if not isinstance(row, dict) or not all(isinstance(v, _SCALARS) for v in row.values()):
                raise InputError(f"{path}: scores: row {number} is not a record of plain values")
    fields = {name: record[name] for name in _FIELDS}
    fields["scores"] = tuple(scores) if scores is not None else None
    return RunResult(**fields)
