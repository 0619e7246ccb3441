"""Every path a run owns, computed once when the run is planned and passed on from there.

A run's folder is ``<output>/runs/<model folder>/<run folder>`` (:meth:`gengen.study.config.StudyConfig.run_dir`,
whose check that the folder stays inside the study's output runs here, once per run). Inside it::

    scores/            the run's score spool, one JSON file per evaluation (gengen.executors.spool)
    manifest.json      the run's manifest, as the spool keeps it
    state.json         pending / running / done / failed (gengen.executors.state)
    result.json        a Slurm job's result (gengen.executors.results)
    run.json           the run's record: config, package versions, seeds, planned steps (gengen.training.train)
    checkpoint-<step>  the checkpoints (gengen.training.checkpoints), in the run folder itself

The study driver (:func:`gengen.executors.execute_study`) makes a :class:`RunPaths` per run with
:meth:`RunPaths.for_run` when it plans the runs (a :class:`RunPlan`) and hands it to the executors, the workers,
the trainer, checkpoint saving and the lm-eval backend; a task shipped to another process or machine carries
it, and a process started for one run (torchrun's) gets it serialised (:meth:`RunPaths.to_json`), never
recomputed. This module is the only caller of ``run_dir``.

Nothing here imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from gengen.study.config import RunSpec, StudyConfig

__all__ = [
    "MANIFEST_FILE",
    "RECORD_FILE",
    "RESULT_FILE",
    "SPOOL_DIR",
    "STATE_FILE",
    "RunPaths",
    "RunPlan",
]

SPOOL_DIR = "scores"
"""The folder, inside a run folder, holding the run's score batches."""

MANIFEST_FILE = "manifest.json"
"""The run's manifest (what :meth:`gengen.store.database.Store.write_manifest` would have stored)."""

STATE_FILE = "state.json"
"""The run's state: pending, running, done or failed."""

RESULT_FILE = "result.json"
"""A Slurm job's result, as plain JSON."""

RECORD_FILE = "run.json"
"""The run's record, written when its training starts."""


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run: its folder and every file and folder gengen keeps in it.

    Attributes
    ----------
    folder : Path
        The run folder, ``<output>/runs/<model folder>/<run folder>``.
    spool : Path
        ``folder/scores``: the score spool.
    manifest : Path
        ``folder/manifest.json``: the spool's manifest.
    state : Path
        ``folder/state.json``: the run's state.
    result : Path
        ``folder/result.json``: a Slurm job's result.
    record : Path
        ``folder/run.json``: the run's record.
    checkpoints : Path
        Where the ``checkpoint-<step>`` folders are kept: the run folder itself.
    """

    folder: Path
    spool: Path
    manifest: Path
    state: Path
    result: Path
    record: Path
    checkpoints: Path

    @classmethod
    def for_run(cls, config: StudyConfig, run: RunSpec) -> RunPaths:
        """The paths of ``run`` of the study ``config``, its folder checked to stay inside the study's output.

        Raises
        ------
        gengen.errors.InputError
            The run folder (or ``runs/`` above it) leads outside the study's output, naming it.
        """
        return cls.in_folder(config.run_dir(run))

    @classmethod
    def in_folder(cls, folder: str | os.PathLike[str]) -> RunPaths:
        """The paths of the run whose folder is ``folder`` (taken as it is, not checked)."""
        folder = Path(folder)
        return cls(
            folder=folder,
            spool=folder / SPOOL_DIR,
            manifest=folder / MANIFEST_FILE,
            state=folder / STATE_FILE,
            result=folder / RESULT_FILE,
            record=folder / RECORD_FILE,
            checkpoints=folder,
        )

    def to_json(self) -> dict[str, str]:
        """The paths as a JSON object of strings, for a process started for the run (:meth:`from_json`)."""
        return {item.name: str(getattr(self, item.name)) for item in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunPaths:
        """The paths :meth:`to_json` wrote.

        Raises
        ------
        ValueError
            ``data`` is not an object of exactly the fields of :class:`RunPaths`, each a string.
        """
        names = [item.name for item in fields(cls)]
        if not isinstance(data, Mapping) or set(data) != set(names):
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"run paths: expected the fields {', '.join(names)}, got {got}")
        bad = next((name for name in names if not isinstance(data[name], str) or not data[name]), None)
        if bad is not None:
            raise ValueError(f"run paths: {bad}: expected a path, got {data[bad]!r:.80}")
        return cls(**{name: Path(data[name]) for name in names})


class RunPlan(Sequence["RunSpec"]):
    """The runs of one execution, in order, each with its :class:`RunPaths` made once.

    A sequence of :class:`~gengen.study.config.RunSpec` (what a scoring backend's ``score_trained`` takes, so a
    backend that only reads the runs needs nothing new) whose :attr:`paths` maps each run to its paths.

    Parameters
    ----------
    runs : iterable of RunSpec
        The runs, in the order they are planned.
    paths : mapping
        ``{run: RunPaths}`` for every run of ``runs``.

    Raises
    ------
    ValueError
        A run of ``runs`` has no paths in ``paths``.
    """

    def __init__(self, runs: Iterable[RunSpec], paths: Mapping[RunSpec, RunPaths]):
        self._runs = tuple(runs)
        missing = next((run for run in self._runs if run not in paths), None)
        if missing is not None:
            raise ValueError(f"run {missing.model.name} {missing.key}: no paths planned for it")
        self._paths = MappingProxyType({run: paths[run] for run in self._runs})

    @classmethod
    def for_runs(cls, config: StudyConfig, runs: Iterable[RunSpec]) -> RunPlan:
        """``runs`` of the study ``config`` with their paths (:meth:`RunPaths.for_run`, run by run).

        Raises
        ------
        gengen.errors.InputError
            A run folder leads outside the study's output.
        """
        runs = tuple(runs)
        return cls(runs, {run: RunPaths.for_run(config, run) for run in runs})

    @property
    def paths(self) -> Mapping[RunSpec, RunPaths]:
        """``{run: RunPaths}`` (read only)."""
        return self._paths

    @overload
    def __getitem__(self, index: int) -> RunSpec: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RunSpec, ...]: ...

    def __getitem__(self, index: int | slice) -> RunSpec | tuple[RunSpec, ...]:
        return self._runs[index]

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[RunSpec]:
        return iter(self._runs)

    def __repr__(self) -> str:
        return f"RunPlan({len(self._runs)} runs)"
