"""A run's own score spool: the scores and manifest of one run, as files in its run folder.

A worker never opens the study's SQLite store. It writes each evaluation's scores into its run folder as one
JSON file, written to a temporary name and renamed into place, so a reader sees a batch completely or not at
all. The file's name is a digest of its content: writing the same batch twice (a resumed run, two attempts
racing after a lost driver) yields the same file. Only renames within one folder are relied upon, which
network file systems (NFS) do atomically; no file locking is needed, because only one process writes a run
folder at a time and every file it writes is complete before it appears.

:class:`RunSpool` offers the part of :class:`gengen.store.database.Store` that :func:`gengen.training.train.train_run`
uses
(``completed``, ``write_scores``, ``manifest``, ``write_manifest``), so a run trains into it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen._files import inside
from gengen.errors import InputError
from gengen.store.database import KEY, normalise_scores
from gengen.study.paths import MANIFEST_FILE, SPOOL_DIR, RunPaths

__all__ = ["MANIFEST_FILE", "SPOOL_DIR", "RunSpool", "read_json", "write_json_atomic"]


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a uniquely named temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True, default=str)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The JSON content of ``path``, or None when it does not exist (or is not complete JSON)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _batch(path: Path) -> list[dict[str, Any]]:
    """The score records of one spool batch file, checked."""
    fix = "delete it and submit the study again (the run scores that evaluation again)"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InputError(f"{path}: a damaged score batch (not JSON); {fix}") from None
    if not isinstance(rows, list):
        raise InputError(f"{path}: a damaged score batch (a JSON list of score records expected); {fix}")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or any(not isinstance(row.get(k), (str, int)) for k in KEY):
            raise InputError(f"{path}: score record {number} lacks {', '.join(KEY)}; {fix}")
    return rows


def _plain(value: Any) -> Any:
    """A table cell as a JSON value (numpy scalars unwrapped, missing values as None; NaN stays NaN)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return value
    return value


class RunSpool:
    """The scores and manifest of one run, kept as atomically written files in its run folder.

    Parameters
    ----------
    folder : Path
        The run folder (:attr:`gengen.study.paths.RunPaths.folder`); the spool and manifest are where
        :meth:`~gengen.study.paths.RunPaths.in_folder` puts them.
    study : str
        The study of rows written without one.
    """

    def __init__(self, folder: str | os.PathLike[str], *, study: str):
        self.folder = Path(folder)
        self.paths = RunPaths.in_folder(self.folder)
        self.study = study
        self._keys: set[tuple[Any, ...]] | None = None

    def __repr__(self) -> str:
        return f"RunSpool({str(self.folder)!r}, study={self.study!r})"

    def _batches(self) -> list[Path]:
        spool = self.paths.spool
        if not spool.is_dir():
            return []
        return sorted(p for p in spool.iterdir() if p.suffix == ".json" and not p.name.startswith("."))

    def records(self) -> list[dict[str, Any]]:
        """Every spooled score row (one record per key; the first written wins).

        Raises
        ------
        InputError
            A batch file is damaged: not JSON, not a list of score records, a record without its key fields.
            (Batches are written whole and renamed into place, so a damaged one is never work in progress; taking
            it for an empty batch would mark the run complete without its scores.)
        """
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        for path in self._batches():
            for record in _batch(path):
                seen.setdefault(tuple(record[k] for k in KEY), record)
        return list(seen.values())

    def frame(self) -> pd.DataFrame:
        """The spooled scores as a table ready for :meth:`gengen.store.database.Store.write_scores` (may be empty)."""
        return pd.DataFrame.from_records(self.records())

    def completed(self, model: str, run: str) -> set[tuple[int, str, str]]:
        """The ``(step, testset, metric)`` triples spooled for a run."""
        return {
            (int(r["step"]), r["testset"], r["metric"])
            for r in self.records()
            if r["model"] == model and r["run"] == run
        }

    def write_scores(self, data: pd.DataFrame | Iterable[Mapping[str, Any]]) -> int:
        """Spool the rows not spooled yet as one batch file; return how many that was."""
        frame = normalise_scores(data, study=self.study)
        if self._keys is None:  # read the folder once; afterwards this writer knows what it wrote
            self._keys = {tuple(r[k] for k in KEY) for r in self.records()}
        stored = self._keys
        rows = [{name: _plain(value) for name, value in record.items()} for record in frame.to_dict(orient="records")]
        rows = [r for r in rows if tuple(r[k] for k in KEY) not in stored]
        if not rows:
            return 0
        text = json.dumps(rows, sort_keys=True, default=str)
        first = min(int(r["step"]) for r in rows)
        name = f"step-{first:09d}-{hashlib.sha1(text.encode()).hexdigest()[:12]}.json"
        write_json_atomic(inside(self.folder, Path(SPOOL_DIR) / name), rows)
        stored.update(tuple(r[k] for k in KEY) for r in rows)
        return len(rows)

    def manifest(self, model: str, run: str) -> dict[str, Any] | None:
        """The run's manifest, or None before the run wrote one."""
        found = read_json(self.paths.manifest)
        return found if isinstance(found, dict) else None

    def write_manifest(self, model: str, run: str, manifest: Mapping[str, Any]) -> None:
        """Replace the run's manifest."""
        write_json_atomic(inside(self.folder, MANIFEST_FILE), dict(manifest))
