"""The evaluation hook: score a live model at a training step and commit the scores, one code path for every loop.

gengen's own trainer (:meth:`gengen.training.train.Trainer.evaluate`), the transformers callback
(:class:`gengen.integrations.GengenCallback`) and the function for plain or accelerate loops
(:func:`gengen.integrations.evaluate`) all call :meth:`EvaluationHook.evaluate`. The hook holds one or more
scoring backends (:class:`gengen.scoring.ScoringBackend`, each given the live model's tokenizer and device by
``attach``) and the store; at a step it

1. asks the store which units (test sets, tasks) of the step are not yet scored; process 0 decides and tells the
   others, so that every process runs the same forward passes and a resumed run writes no row twice;
2. scores them on the model as it is (no copy of the weights, nothing written to disk): a backend that tallies
   (:class:`TallyingBackend`, gengen's scorer) scores a shard of every test set in each process and the tallies
   are summed over the processes; any other backend (lm-eval) scores in process 0 while the others wait;
3. writes the rows in process 0, one transaction per backend, and makes every process wait for it.

Imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch

from gengen.scoring.checkpoints import Checkpoint
from gengen.scoring.series import ScoringBackend, SeriesLabels
from gengen.training.distributed import World

if TYPE_CHECKING:
    import pandas as pd

    from gengen.scoring.models import Precision
    from gengen.store.database import Store
    from gengen.study.tables import EvaluationConfig

__all__ = ["LIVE", "EvaluationHook", "Schedule", "Shard", "TallyingBackend", "joined_world"]

LIVE = "<live model>"
"""The ``path`` of the :class:`Checkpoint` that stands for the model being trained (nothing is loaded from it)."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class Schedule:
    """The steps at which a run is scored: step 0 (before the first update), the last step, and those asked for.

    Attributes
    ----------
    every : int, optional
        Every N optimiser steps.
    log_points : int, optional
        That many steps spaced evenly in log(step) between 1 and the last step.
    steps : tuple of int
        Explicit steps (those beyond the last step are ignored).

    Examples
    --------
    >>> Schedule(log_points=5).at(100)
    [0, 1, 3, 10, 32, 100]
    >>> Schedule(every=40).at(100)
    [0, 40, 80, 100]
    """

    every: int | None = None
    log_points: int | None = None
    steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        from gengen.errors import ConfigError

        if self.every is not None and self.every < 1:
            raise ConfigError(f"schedule: every must be at least 1, got {self.every}")
        if self.log_points is not None and self.log_points < 2:
            raise ConfigError(f"schedule: log_points must be at least 2, got {self.log_points}")
        if any(step < 0 for step in self.steps):
            raise ConfigError(f"schedule: steps must be 0 or more, got {list(self.steps)}")

    @classmethod
    def of(cls, evaluation: EvaluationConfig) -> Schedule:
        """The schedule of a study's ``[evaluation]`` (its ``every``, ``log_points`` and ``steps``)."""
        return cls(every=evaluation.every, log_points=evaluation.log_points, steps=tuple(evaluation.steps))

    def at(self, total: int) -> list[int]:
        """The steps of a run of ``total`` optimiser steps, sorted (:func:`gengen.study.schedule.evaluation_steps`)."""
        from gengen.study.schedule import evaluation_steps
        from gengen.study.tables import EvaluationConfig

        evaluation = EvaluationConfig(steps=self.steps, every=self.every, log_points=self.log_points)
        return evaluation_steps(evaluation, total)


@dataclass(frozen=True)
class Shard:
    """The examples of a test set that this process scores: ``rank::size`` (all of them when ``size`` is 1)."""

    rank: int = 0
    size: int = 1

    def indices(self, n: int) -> np.ndarray:
        """The indices of this process's examples among ``n``."""
        return np.arange(self.rank, n, self.size)


@runtime_checkable
class TallyingBackend(Protocol):
    """A backend whose scores are sums over examples, so that each process can score a shard of every unit.

    ``tally`` returns one row of sums per unit (the same columns in every process), which the hook adds up
    over the processes before ``rows`` turns them into score-table rows.
    """

    def tally(self, model: Any, units: Sequence[str], shard: Shard) -> np.ndarray:
        """Sums over this process's examples of each unit: an array of shape ``(len(units), k)``."""
        ...

    def rows(self, tallies: np.ndarray, units: Sequence[str], base: Mapping[str, Any]) -> pd.DataFrame:
        """Score-table rows of the summed tallies (``base`` holds the label columns and the step)."""
        ...


def joined_world() -> World:
    """The torch.distributed group this process has joined, or this process alone.

    A launcher or the training framework started the group; unlike :func:`gengen.training.distributed.current_world`
    this never starts one.

    Returns
    -------
    World
        Rank and size of the group (0 and 1 alone).
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size())
    return World()


class EvaluationHook:
    """Scores a live model at a step with its backends and commits the rows (see the module docstring).

    Parameters
    ----------
    backends : sequence of ScoringBackend
        Each attached to the model's tokenizer and device (:meth:`attach`) before the first evaluation.
    store : gengen.store.database.Store or gengen.executors.spool.RunSpool
        Where the scores go (written by process 0 only).
    labels : SeriesLabels
        The run's labels in the store (model, family, size, run, study).
    world : World, optional
        The processes training the model (default: :func:`joined_world`).
    split_examples : bool
        Each process scores a shard of every test set (a whole model in each process). False: every process
        scores every example (a model sharded over the processes needs all of them in each forward pass).
    log : callable
        Progress lines (process 0 only).
    """

    def __init__(
        self,
        backends: Sequence[ScoringBackend],
        store: Store | Any,
        labels: SeriesLabels,
        *,
        world: World | None = None,
        split_examples: bool = True,
        log: Log = print,
    ):
        if not backends:
            raise ValueError("EvaluationHook: give at least one scoring backend")
        self.backends = list(backends)
        self.store = store
        self.labels = labels
        self.world = world or joined_world()
        self.shard = Shard(self.world.rank, self.world.size) if split_examples else Shard()
        self.log: Log = log if self.world.main else _silent
        self.study = labels.study if labels.study is not None else store.study
        self.done = _completed(store, labels, self.study) if self.world.main else set()
        self.seconds = 0.0
        self.evaluations: list[tuple[int, float]] = []

    @property
    def units(self) -> tuple[str, ...]:
        """Every unit scored at a step, over the backends."""
        return tuple(unit for backend in self.backends for unit in backend.units)

    def begin(self, record: Mapping[str, Any] | None = None) -> None:
        """Record the run (process 0): ``record`` merged into its manifest, then each backend's checks and record.

        Parameters
        ----------
        record : mapping, optional
            What the run is (model, seed, data seed, shots, training arguments, schedule, status).
        """
        if not self.world.main:
            return
        if record is not None:
            manifest = {**(self.store.manifest(self.labels.model, self.labels.run) or {}), **record}
            self.store.write_manifest(self.labels.model, self.labels.run, manifest)
        for backend in self.backends:
            backend.begin(self.store, self.labels)

    def attach(self, tokenizer: Any, device: torch.device, precision: Precision) -> None:
        """Give every backend the live model's tokenizer, device and dtypes (it encodes its data once, here).

        Parameters
        ----------
        tokenizer : transformers tokenizer
            The live model's.
        device : torch.device
            Where the model is.
        precision : gengen.scoring.models.Precision
            The autocast of the forward passes.
        """
        for backend in self.backends:
            backend.attach(tokenizer, device, precision)

    def pending(self, step: int) -> list[list[str]]:
        """The units of ``step`` not yet in the store, per backend; process 0's answer in every process."""
        todo = [backend.pending(step, self.done) for backend in self.backends] if self.world.main else []
        if self.world.size > 1:
            shared: list[Any] = [todo]
            torch.distributed.broadcast_object_list(shared, src=0)
            todo = shared[0]
        return todo

    def evaluate(self, model: Any, step: int, columns: Mapping[str, Any] | None = None) -> int:
        """Score ``model`` at ``step`` on every unit not yet stored; commit the rows (process 0).

        Every process of the world must call it at the same steps.

        Parameters
        ----------
        model : torch.nn.Module
            The model as it is now (put in eval mode for the scoring, then back).
        step : int
            Optimiser updates taken (0: before the first).
        columns : mapping, optional
            Further columns of every row (``seed``, ``shots``, ``epoch``, ``tokens``).

        Returns
        -------
        int
            Rows written by this process (0 in the processes other than 0, and when all was stored).
        """
        todo = self.pending(step)
        if not any(todo):
            return 0
        began = time.perf_counter()
        base = {**_label_columns(self.labels, self.study), **(columns or {}), "step": step}
        written = 0
        for backend, units in zip(self.backends, todo, strict=True):
            if units:
                written += self._score(backend, model, step, units, base)
        self.world.barrier()  # the others wait while process 0 writes
        seconds = time.perf_counter() - began
        self.seconds += seconds
        self.evaluations.append((step, seconds))
        self.log(f"{self.labels.model} {self.labels.run} step {step}: {len(self.units)} units in {seconds:.2f} s")
        return written

    def _score(self, backend: ScoringBackend, model: Any, step: int, units: list[str], base: dict[str, Any]) -> int:
        frames: list[pd.DataFrame] = []
        if isinstance(backend, TallyingBackend):
            tallies = backend.tally(model, units, self.shard)
            if self.world.size > 1 and self.shard.size > 1:
                tallies = _summed(tallies)
            if self.world.main:
                frames.append(backend.rows(tallies, units, base))
        elif self.world.main:
            frames.extend(backend.score_checkpoint(model, Checkpoint(LIVE, step), units, base=base, log=self.log))
        written = 0
        for frame in frames:
            if len(frame):
                written += self.store.write_scores(frame)
                self.done = self.done | {(step, t, m) for t, m in zip(frame["testset"], frame["metric"], strict=True)}
        return written

    def overhead(self) -> str:
        """``3 evaluations, 0.41 s each (median), 1.2 s in all``: the time the hook took from training."""
        if not self.evaluations:
            return "no evaluation"
        each = float(np.median([seconds for _, seconds in self.evaluations]))
        count = len(self.evaluations)
        return f"{count} evaluation{'' if count == 1 else 's'}, {each:.2f} s each (median), {self.seconds:.1f} s in all"


def _summed(tallies: np.ndarray) -> np.ndarray:
    """The tallies added over the processes (on the GPU under NCCL, which reduces no CPU tensor)."""
    nccl = torch.distributed.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
    summed = torch.from_numpy(np.ascontiguousarray(tallies, dtype=np.float64)).to(device)
    torch.distributed.all_reduce(summed, op=torch.distributed.ReduceOp.SUM)
    return summed.cpu().numpy()


def _completed(store: Any, labels: SeriesLabels, study: str) -> set[tuple[int, str, str]]:
    """The run's stored ``(step, testset, metric)``: of this study in a store, all of a run's spool."""
    from gengen.store.database import Store

    if isinstance(store, Store):
        return store.completed(labels.model, labels.run, study=study)
    found: set[tuple[int, str, str]] = store.completed(labels.model, labels.run)
    return found


def _label_columns(labels: SeriesLabels, study: str) -> dict[str, Any]:
    return {"study": study, "model": labels.model, "family": labels.family, "size": labels.size, "run": labels.run}


def _silent(line: str) -> None:
    """Drops a progress line (the processes other than 0)."""
