"""The scoring protocol and its one loop: the request, the backend protocol, choosing a backend, and the series loop.

:mod:`gengen.scoring` hands these names on; its docstring describes the loop step by step.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gengen.errors import GengenError, InputError
from gengen.scoring.registry import BACKENDS, REGISTRY

if TYPE_CHECKING:
    import pandas as pd

    from gengen.scoring.checkpoints import Checkpoint
    from gengen.store.database import Store
    from gengen.study.config import RunSpec, StudyConfig

__all__ = [
    "BACKENDS",
    "ModelLoader",
    "ScoreRequest",
    "ScoredSeries",
    "ScoringBackend",
    "SeriesLabels",
    "backend_class",
    "check_trainable",
    "open_backend",
    "refuse_options",
    "resolve_backend",
    "score_after_training",
    "score_request",
    "score_series",
    "training_backend",
]

Log = Callable[[str], None]
Done = set[tuple[int, str, str]]


@dataclass(frozen=True)
class SeriesLabels:
    """The labels of a series' scores in the store.

    Attributes
    ----------
    model, family, size, run : str
        The model's name, family and size labels, and the run key.
    study : str, optional
        The study column (default: the store's study).
    """

    model: str
    family: str = ""
    size: str = ""
    run: str = "main"
    study: str | None = None


@dataclass(frozen=True)
class ScoreRequest:
    """What ``gengen score`` was asked, beyond the checkpoints and labels: each backend takes what it uses.

    Attributes
    ----------
    study : StudyConfig, optional
        The study file given (its task, test sets, evaluation and store).
    tasks : tuple of str
        lm-eval tasks, groups or tags.
    num_fewshot : int, optional
        lm-eval: in-context examples.
    limit : str, optional
        lm-eval: examples per task, a count or a fraction, as typed.
    batch_size : str, optional
        lm-eval: requests per batch, or ``auto`` / ``auto:N``, as typed.
    include_paths : tuple of str
        lm-eval: folders of task YAML files.
    precision : str, optional
        lm-eval without a study: ``auto``, ``fp32``, ``bf16`` or ``fp16``.
    store : Path, optional
        lm-eval without a study: the store to write to.
    device : str, optional
        ``auto``, ``cpu``, ``cuda`` (or, for lm-eval, ``cuda:N``); default: the study's ``training.device``.
    tokenizer : str, optional
        Default: the first checkpoint's.
    threads : int, optional
        CPU threads for torch (set once the options are checked).
    trust_task_code : bool
        Let task folders run code for this call (lm-eval).
    """

    study: StudyConfig | None = None
    tasks: tuple[str, ...] = ()
    num_fewshot: int | None = None
    limit: str | None = None
    batch_size: str | None = None
    include_paths: tuple[str, ...] = ()
    precision: str | None = None
    store: Path | None = None
    device: str | None = None
    tokenizer: str | None = None
    threads: int | None = None
    trust_task_code: bool = False

    def given(self) -> list[str]:
        """The options set (not at their defaults), by field name, ``study`` left out."""
        return [f.name for f in fields(self) if f.name != "study" and _is_given(getattr(self, f.name))]


def _is_given(value: object) -> bool:
    """Not at its default (None, an empty tuple, False); ``0`` is given (``--num-fewshot 0``)."""
    return value is not None and value is not False and value != ()


# The command-line flag of a request field whose name differs from ``--field-name``.
_FLAGS = {"include_paths": "--include-path"}


def _flag(option: str) -> str:
    return _FLAGS.get(option, "--" + option.replace("_", "-"))


class ModelLoader(Protocol):
    """Loads the checkpoints of a series one after another (:class:`gengen.scoring.score.SeriesLoader`)."""

    base_loads: int

    def load(self, checkpoint: Checkpoint) -> Any:
        """The model of ``checkpoint``, ready to score."""
        ...


class ScoringBackend(Protocol):
    """What a scoring backend provides to :func:`score_series` (see ``docs/extending.md``).

    A backend is built for one series (its settings, and the store it writes to); its *units* are what each
    checkpoint is scored on (test sets, tasks), each with one or more metrics.
    """

    name: ClassVar[str]
    """Its name in :data:`gengen.scoring.registry.REGISTRY`."""
    unit: ClassVar[str]
    """What a unit is called in progress lines (``"test set"``, ``"task"``)."""
    accepts: ClassVar[frozenset[str]]
    """The fields of :class:`ScoreRequest` it takes; a request giving another is refused."""

    @classmethod
    def from_request(cls, request: ScoreRequest) -> ScoringBackend:
        """Check the request's options (every problem one line) and build the backend."""
        ...

    @classmethod
    def check_trainable(cls, config: StudyConfig, *, trust_task_code: bool = False) -> None:
        """Refuse, before training starts, a study whose checkpoints could not be scored once trained."""
        ...

    @classmethod
    def score_trained(
        cls, config: StudyConfig, runs: Sequence[RunSpec], *, trust_task_code: bool = False, log: Log = print
    ) -> pd.DataFrame:
        """Score the kept checkpoints of trained runs (backends not run during training)."""
        ...

    @property
    def units(self) -> tuple[str, ...]:
        """Every unit a checkpoint is scored on."""
        ...

    def open_store(self) -> Store:
        """The store the scores go to (opened only once the series passed its checks)."""
        ...

    def begin(self, store: Store, labels: SeriesLabels) -> None:
        """Check the run against the store (e.g. settings a resumed run must keep) and record what it needs."""
        ...

    def pending(self, step: int, done: Done) -> list[str]:
        """The units of ``step`` with a score missing, given the ``(step, testset, metric)`` triples stored."""
        ...

    def prepare(self, checkpoints: Sequence[Checkpoint]) -> ModelLoader:
        """Set up what every checkpoint shares (device, dtypes, tokenizer, data); return the model loader."""
        ...

    def score_checkpoint(
        self, model: Any, checkpoint: Checkpoint, units: Sequence[str], *, base: dict[str, Any], log: Log
    ) -> Iterator[pd.DataFrame]:
        """Score ``model`` on ``units``, yielding score-table rows (``base`` holds the label columns and the
        step); each frame yielded is written in one transaction before the next is computed."""
        ...

    def attach(self, tokenizer: Any, device: Any, precision: Any) -> None:
        """Set up scoring of a live model (the one being trained; no checkpoint is loaded): its tokenizer, its
        device and the :class:`gengen.scoring.models.Precision` of its forward passes. Then :meth:`score_checkpoint`
        takes the live model with ``Checkpoint(gengen.scoring.hook.LIVE, step)`` (see
        :class:`gengen.scoring.hook.EvaluationHook`)."""
        ...


def backend_class(name: str) -> type[ScoringBackend]:
    """The class of the scoring backend called ``name`` (imported only now).

    Parameters
    ----------
    name : str
        One of :data:`BACKENDS`.

    Returns
    -------
    type
        The class, implementing :class:`ScoringBackend`.

    Raises
    ------
    GengenError
        An unknown name.
    """
    entry = REGISTRY.get(name)
    if entry is None:
        raise GengenError(f"--backend: expected {' or '.join(map(repr, BACKENDS))}, got {name!r}")
    module, _, attribute = entry.target.partition(":")
    found: type[ScoringBackend] = getattr(importlib.import_module(module), attribute)
    return found


def refuse_options(request: ScoreRequest, backend: type[ScoringBackend]) -> None:
    """Refuse the options of ``request`` that ``backend`` does not take, naming the first and who takes it.

    Parameters
    ----------
    request : ScoreRequest
    backend : type
        A :class:`ScoringBackend` class.

    Raises
    ------
    GengenError
        An option given that the backend does not take.
    """
    for option in request.given():
        if option not in backend.accepts:
            owners = [name for name in BACKENDS if name != backend.name and option in backend_class(name).accepts]
            raise GengenError(f"{_flag(option)}: only with --backend {' or '.join(owners)}")


def open_backend(name: str | None, request: ScoreRequest) -> ScoringBackend:
    """The backend ``name`` (default: the study's ``evaluation.backend``) built for ``request``.

    Parameters
    ----------
    name : str, optional
        A name of :data:`BACKENDS`.
    request : ScoreRequest

    Returns
    -------
    ScoringBackend

    Raises
    ------
    GengenError
        No name and no study, an unknown name, options the backend does not take or refuses.
    """
    return backend_class(resolve_backend(name, request.study)).from_request(request)


def resolve_backend(name: str | None, study: StudyConfig | None) -> str:
    """The backend's name: ``name``, else the study's ``evaluation.backend``; checked, nothing imported.

    Parameters
    ----------
    name : str, optional
        As given (``--backend``).
    study : StudyConfig, optional
        The study file given.

    Returns
    -------
    str
        A name of :data:`BACKENDS`.

    Raises
    ------
    GengenError
        Neither a name nor a study, or an unknown name.
    """
    chosen = name or (study.evaluation.backend if study is not None else None)
    if chosen is None:
        raise GengenError("give a study file (gengen's scorer scores its test sets) or --backend lm-eval")
    if chosen not in REGISTRY:
        raise GengenError(f"--backend: expected {' or '.join(map(repr, BACKENDS))}, got {chosen!r}")
    return chosen


@dataclass(frozen=True)
class ScoredSeries:
    """What :func:`score_request` did: the rows written and where.

    Attributes
    ----------
    rows : DataFrame
        The rows written by this call.
    store : Path
        The store's file.
    checkpoints : int
        Checkpoints in the series.
    units : tuple of str
        What each was scored on.
    unit : str
        What a unit is called.
    """

    rows: pd.DataFrame
    store: Path
    checkpoints: int
    units: tuple[str, ...]
    unit: str

    def summary(self) -> str:
        """``4 checkpoints x 2 tasks, 24 scores written to <store>``."""
        return (
            f"{self.checkpoints} checkpoints x {_count(len(self.units), self.unit)}, {len(self.rows)} scores "
            f"written to {self.store}"
        )


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def score_request(
    name: str | None,
    checkpoints: Sequence[Checkpoint],
    request: ScoreRequest,
    labels: SeriesLabels,
    *,
    log: Log = print,
) -> ScoredSeries:
    """``gengen score``: choose the backend by name, check the request, score the series.

    Parameters
    ----------
    name : str, optional
        The backend (default: the study's ``evaluation.backend``).
    checkpoints : sequence of Checkpoint
        The series, sorted by step.
    request : ScoreRequest
        The options given.
    labels : SeriesLabels
        The labels of the scores.
    log : callable
        Progress lines.

    Returns
    -------
    ScoredSeries
    """
    backend = open_backend(name, request)
    if request.threads is not None:
        import torch

        torch.set_num_threads(request.threads)
    written, store = _score(backend, checkpoints, labels, log)
    return ScoredSeries(written, store.path, len(checkpoints), backend.units, backend.unit)


def score_series(
    backend: ScoringBackend, checkpoints: Sequence[Checkpoint], labels: SeriesLabels, *, log: Log = print
) -> pd.DataFrame:
    """Score a checkpoint series with ``backend``, committing as it goes; resumable (see the module docstring).

    Parameters
    ----------
    backend : ScoringBackend
        Built for this series (its settings and store).
    checkpoints : sequence of Checkpoint
        Sorted by step.
    labels : SeriesLabels
        The labels of the scores.
    log : callable
        Progress lines: the backend's per unit, one per checkpoint, one for the series.

    Returns
    -------
    DataFrame
        The rows written by this call (units already in the store are skipped).

    Raises
    ------
    InputError
        No checkpoints, or a damaged weights file.
    """
    return _score(backend, checkpoints, labels, log)[0]


def _score(
    backend: ScoringBackend, checkpoints: Sequence[Checkpoint], labels: SeriesLabels, log: Log
) -> tuple[pd.DataFrame, Store]:
    import pandas as pd

    from gengen.scoring.checkpoints import check_weights

    if not checkpoints:
        raise InputError("no checkpoints to score")
    check_weights(checkpoints)
    store = backend.open_store()
    study = labels.study if labels.study is not None else store.study
    head = f"{labels.model} {labels.run}"
    backend.begin(store, labels)
    done = store.completed(labels.model, labels.run, study=study)
    todo = {c.step: units for c in checkpoints if (units := backend.pending(c.step, done))}
    if not todo:
        log(f"{head}: all {len(checkpoints)} checkpoints already scored on {_count(len(backend.units), backend.unit)}")
        return pd.DataFrame(), store
    loader = backend.prepare(checkpoints)
    written: list[pd.DataFrame] = []
    for index, checkpoint in enumerate(checkpoints, start=1):
        if checkpoint.step not in todo:
            continue
        units = todo[checkpoint.step]
        began = time.perf_counter()
        model = loader.load(checkpoint)
        base = {**_columns(labels, study), "step": checkpoint.step}
        where = f"{head} step {checkpoint.step} [{index}/{len(checkpoints)}]"
        for frame in backend.score_checkpoint(model, checkpoint, units, base=base, log=log):
            if len(frame):
                store.write_scores(frame)
                written.append(frame)
        del model
        log(f"{where}: {_count(len(units), backend.unit)} in {time.perf_counter() - began:.1f} s (load included)")
    rows = sum(len(frame) for frame in written)
    log(
        f"{head}: {len(todo)} checkpoints scored, {len(checkpoints) - len(todo)} already in the store, "
        f"{rows} scores written, {loader.base_loads} model loads"
    )
    return (pd.concat(written, ignore_index=True) if written else pd.DataFrame()), store


def _columns(labels: SeriesLabels, study: str) -> dict[str, Any]:
    return {
        "study": study,
        "model": labels.model,
        "family": labels.family,
        "size": labels.size,
        "run": labels.run,
    }


def check_trainable(config: StudyConfig, *, trust_task_code: bool = False) -> None:
    """Refuse, before training starts, a study whose ``evaluation.backend`` could not score it once trained.

    Parameters
    ----------
    config : StudyConfig
    trust_task_code : bool
        ``--trust-task-code`` of the run.

    Raises
    ------
    GengenError
        What the study's backend refuses (nothing for one that scores during training).
    """
    name = config.evaluation.backend
    if not REGISTRY[name].during_training:
        backend_class(name).check_trainable(config, trust_task_code=trust_task_code)


def training_backend(config: StudyConfig) -> ScoringBackend:
    """The backend that scores a run of ``config`` at its evaluation steps while it trains (``gengen train``).

    The study's ``evaluation.backend`` when its registry entry scores during training, else gengen's own scorer
    (the study's ``[[testsets]]`` are scored in training whatever scores the kept checkpoints afterwards).

    Parameters
    ----------
    config : StudyConfig

    Returns
    -------
    ScoringBackend
        Built for the study; the trainer attaches it to its model (:class:`gengen.scoring.hook.EvaluationHook`).
    """
    name = config.evaluation.backend
    if not REGISTRY[name].during_training:
        name = "gengen"
    return backend_class(name).from_request(ScoreRequest(study=config))


def score_after_training(
    config: StudyConfig, runs: Sequence[RunSpec], *, trust_task_code: bool = False, log: Log = print
) -> pd.DataFrame | None:
    """Score the trained ``runs`` with the study's backend, unless it scored them during training.

    Parameters
    ----------
    config : StudyConfig
    runs : sequence of RunSpec
        The runs trained: the :class:`gengen.study.paths.RunPlan` of their execution
        (:attr:`gengen.executors.StudyExecution.plan`), so the backend finds each run's folder as planned.
    trust_task_code : bool
        ``--trust-task-code`` of the run.
    log : callable
        Progress lines.

    Returns
    -------
    DataFrame or None
        The rows written, or None when the backend scores during training (nothing to do after it).
    """
    name = config.evaluation.backend
    if REGISTRY[name].during_training:
        return None
    return backend_class(name).score_trained(config, runs, trust_task_code=trust_task_code, log=log)
