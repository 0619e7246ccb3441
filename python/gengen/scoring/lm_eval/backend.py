"""lm-evaluation-harness as a scoring backend: the backend, its settings from a request or a study, and the series runs.

:mod:`gengen.scoring.lm_eval` hands these names on; its docstring describes how checkpoints are scored, resumed and
recorded. Importing this module imports neither lm-eval nor torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from gengen.errors import ConfigError, GengenError, InputError
from gengen.scoring.lm_eval.catalogue import (
    EXTRA,
    MANIFEST_KEY,
    TASKS_DIR,
    LmEvalSettings,
    TaskCatalogue,
    lm_eval_version,
    parse_batch_size,
    parse_limit,
    quiet_lm_eval,
    require_lm_eval,
    template_refused,
)
from gengen.scoring.series import ScoreRequest

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack

    from gengen.scoring.checkpoints import Checkpoint
    from gengen.scoring.series import SeriesLabels
    from gengen.store.database import Store
    from gengen.study.config import RunSpec, StudyConfig
    from gengen.study.tables import EvaluationConfig

__all__ = [
    "EXTRA",
    "TASKS_DIR",
    "LmEvalBackend",
    "LmEvalOptions",
    "LmEvalSettings",
    "TaskCatalogue",
    "check_trainable_with_lm_eval",
    "parse_batch_size",
    "parse_limit",
    "request_backend",
    "request_settings",
    "require_lm_eval",
    "score_trained_runs",
    "score_with_lm_eval",
    "study_settings",
]


def _rows_from_results(
    results: dict[str, Any], *, model: str, run: str, step: int, base: dict[str, Any]
) -> pd.DataFrame:
    """Score-table rows of one lm-eval result, read by the lm-eval output-file reader."""
    from gengen.ingest._common import IngestOptions
    from gengen.ingest.lm_eval import parse_v04

    keep = ("results", "groups", "n-shot", "n-samples", "versions", "higher_is_better", "group_subtasks")
    data = {key: results[key] for key in keep if key in results}
    parsed = parse_v04(Path(f"lm-eval result of step {step}"), data, IngestOptions(model=model, run=run, step=step))
    frame = parsed.frame
    for column, value in base.items():
        frame[column] = value
    return frame


class LmEvalBackend:
    """lm-evaluation-harness as a scoring backend (:class:`gengen.scoring.ScoringBackend`, name ``"lm-eval"``).

    Each checkpoint is wrapped in lm-eval's ``HFLM`` and scored by ``lm_eval.simple_evaluate`` on each task in
    turn; every task's rows (each metric with its standard error and number of examples) are written in one
    transaction. The run's manifest records lm-eval's version, the tasks' versions and the settings, and a
    resumed run must keep the settings of its stored scores.

    Parameters
    ----------
    settings : LmEvalSettings
        Tasks, few-shot, limit, batch size, task folders.
    store : gengen.store.database.Store or path
        Where the scores go (a path is opened once the series passed its checks).
    study : str, optional
        The study a store path is opened for (default: the store's).
    tokenizer_path : str, optional
        Default: the first checkpoint's (for adapters: the adapter folder's, else its base's).
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    precision : {"auto", "fp32", "bf16", "fp16"}
        As ``training.precision``: the dtypes follow :func:`gengen.scoring.models.precision_for`.
    device_map : bool
        Spread each model over every visible GPU (accelerate).
    catalogue : TaskCatalogue, optional
        The tasks of ``settings``, already checked and loaded; default: loaded here.
    """

    name: ClassVar[str] = EXTRA
    unit: ClassVar[str] = "task"
    accepts: ClassVar[frozenset[str]] = frozenset(f.name for f in fields(ScoreRequest)) - {"study"}

    def __init__(
        self,
        settings: LmEvalSettings,
        *,
        store: Store | Path,
        study: str | None = None,
        tokenizer_path: str | None = None,
        device: str = "auto",
        precision: str = "auto",
        device_map: bool = False,
        catalogue: TaskCatalogue | None = None,
    ):
        require_lm_eval()
        self.settings = settings
        self.catalogue = catalogue if catalogue is not None and catalogue.settings == settings else None
        if self.catalogue is None:
            self.catalogue = TaskCatalogue(settings)
        self.store = store
        self.study = study
        self.tokenizer_path = tokenizer_path
        self.device = device
        self.precision = precision
        self.device_map = device_map
        self._session: _Session | None = None

    @classmethod
    def from_request(cls, request: ScoreRequest) -> LmEvalBackend:
        """:meth:`gengen.scoring.ScoringBackend.from_request` for lm-eval: :func:`request_backend`."""
        return request_backend(request)

    @classmethod
    def check_trainable(cls, config: StudyConfig, *, trust_task_code: bool = False) -> None:
        """:func:`check_trainable_with_lm_eval`."""
        check_trainable_with_lm_eval(config, trust_task_code=trust_task_code)

    @classmethod
    def score_trained(
        cls,
        config: StudyConfig,
        runs: Sequence[RunSpec],
        *,
        trust_task_code: bool = False,
        log: Callable[[str], None] = print,
    ) -> pd.DataFrame:
        """:func:`score_trained_runs`."""
        return score_trained_runs(config, runs, trust_task_code=trust_task_code, log=log)

    @property
    def units(self) -> tuple[str, ...]:
        """The tasks (or groups, tags) asked for."""
        return self.settings.tasks

    def open_store(self) -> Store:
        """The store given, opened."""
        from gengen.store.database import Store

        return self.store if isinstance(self.store, Store) else Store(self.store, study=self.study)

    def _tasks(self) -> TaskCatalogue:
        assert self.catalogue is not None  # set in __init__
        return self.catalogue

    def begin(self, store: Store, labels: SeriesLabels) -> None:
        """Refuse settings other than the run's stored scores', then record them in the run's manifest."""
        _check_resume(store, labels.model, labels.run, self.settings)
        manifest = _manifest(
            store, labels.model, labels.run, self.settings, self._tasks(), device=self.device, precision=self.precision
        )
        store.write_manifest(labels.model, labels.run, manifest)

    def pending(self, step: int, done: set[tuple[int, str, str]]) -> list[str]:
        """The tasks of ``step`` with a leaf task that has no score yet."""
        scored = {(s, testset) for s, testset, _ in done}
        leaves = self._tasks().leaves
        return [t for t in self.settings.tasks if not all((step, leaf) in scored for leaf in leaves[t])]

    def prepare(self, checkpoints: Sequence[Checkpoint]) -> Any:
        """Device, dtypes (a LoRA base's when the series has adapters), the model loader and the tokenizer."""
        from gengen.scoring.models import load_tokenizer, precision_for
        from gengen.scoring.score import SeriesLoader

        device = _torch_device(self.device)
        adapters = any(c.revision is None and (Path(c.path) / "adapter_config.json").is_file() for c in checkpoints)
        dtypes = precision_for(self.precision, "lora" if adapters else "full", device)
        first = checkpoints[0]
        tokenizer_path = self.tokenizer_path
        tokenizer = load_tokenizer(tokenizer_path or first.path, None if tokenizer_path else first.revision)
        self._session = _Session(device, dtypes, tokenizer)
        return SeriesLoader(dtypes, device, device_map=self.device_map)

    def attach(self, tokenizer: Any, device: Any, precision: Any) -> None:
        """Score a live model (:class:`gengen.scoring.hook.EvaluationHook`): its tokenizer, device and autocast."""
        self._session = _Session(device, precision, tokenizer)

    def score_checkpoint(
        self,
        model: Any,
        checkpoint: Checkpoint,
        units: Sequence[str],
        *,
        base: dict[str, Any],
        log: Callable[[str], None],
    ) -> Iterator[pd.DataFrame]:
        """One frame per task of ``units``, each scored by ``lm_eval.simple_evaluate``."""
        from lm_eval.models.huggingface import HFLM

        session = self._session
        if session is None:
            raise RuntimeError("LmEvalBackend.prepare was not called")
        with quiet_lm_eval():
            lm = HFLM(pretrained=model, tokenizer=session.tokenizer, batch_size=self.settings.batch_size)
        for number, task in enumerate(units, start=1):
            began = time.perf_counter()
            results = self._evaluate(lm, task, checkpoint.step, session)
            frame = _rows_from_results(
                results, model=base["model"], run=base["run"], step=checkpoint.step, base=_labels(base)
            )
            log(
                f"  step {checkpoint.step:>7} task {number}/{len(units)} {task}: {_headline(frame, task)} "
                f"({time.perf_counter() - began:.1f} s)"
            )
            yield frame

    def _evaluate(self, lm: Any, task: str, step: int, session: _Session) -> dict[str, Any]:
        """lm-eval's result of ``task``, its refusals and out-of-memory as one line."""
        import torch
        from jinja2.exceptions import SecurityError

        from gengen.scoring.lm_eval.trust import guard

        settings = self.settings
        try:
            with quiet_lm_eval(), session.dtypes.context(session.device), guard(trust=settings.trust_task_code):
                results: dict[str, Any] = require_lm_eval().simple_evaluate(
                    model=lm,
                    tasks=[task],
                    num_fewshot=settings.num_fewshot,
                    limit=settings.limit,
                    bootstrap_iters=settings.bootstrap_iters,
                    task_manager=self._tasks().manager,
                    log_samples=False,
                )
        except SecurityError as error:
            raise template_refused(self._tasks().yaml_file(task), task, error) from None
        except torch.cuda.OutOfMemoryError:
            raise GengenError(
                f"step {step} task {task!r}: out of GPU memory", hint="use a smaller {batch_size}"
            ) from None
        return results


@dataclass(frozen=True)
class _Session:
    """What every checkpoint of a series shares under :class:`LmEvalBackend`."""

    device: Any
    dtypes: Any
    tokenizer: Any


def _from(configured: Any, name: str) -> Any:
    """A setting of the study's ``[evaluation.lm_eval]``, or None without one."""
    return getattr(configured, name) if configured is not None else None


def request_settings(request: ScoreRequest) -> LmEvalSettings:
    """The lm-eval settings of ``gengen score``: its options, else the study's ``[evaluation.lm_eval]``.

    Parameters
    ----------
    request : gengen.scoring.ScoreRequest

    Returns
    -------
    LmEvalSettings

    Raises
    ------
    GengenError
        No tasks, or an option out of range (:class:`LmEvalSettings`).
    """
    study = request.study
    configured = study.evaluation.lm_eval if study is not None else None
    tasks = request.tasks or (configured.tasks if configured is not None else ())
    if not tasks:
        raise GengenError("--tasks: give the lm-eval tasks to score (or evaluation.lm_eval.tasks in the study)")
    batch, limit = request.batch_size, request.limit
    return LmEvalSettings(
        tasks=tasks,
        num_fewshot=request.num_fewshot if request.num_fewshot is not None else _from(configured, "num_fewshot"),
        limit=parse_limit(limit) if limit is not None else _from(configured, "limit"),
        batch_size=parse_batch_size(batch) if batch is not None else (study.evaluation.batch_size if study else 8),
        include_paths=(*(configured.include_paths if configured else ()), *request.include_paths),
        trust_task_code=request.trust_task_code,
    )


def request_backend(request: ScoreRequest) -> LmEvalBackend:
    """The lm-eval backend of ``gengen score``: settings checked and tasks loaded before any store is opened.

    With a study, its store, ``training.device``/``precision`` and ``evaluation.device_map`` apply; without
    one, ``--store`` is required and ``--precision`` is taken.

    Parameters
    ----------
    request : gengen.scoring.ScoreRequest

    Returns
    -------
    LmEvalBackend

    Raises
    ------
    GengenError
        Options that contradict the study or each other, lm-eval missing, a task refused or unknown.
    """
    from gengen.study.training_config import PRECISIONS

    settings = request_settings(request)
    study = request.study
    if study is not None:
        if request.store is not None:
            raise GengenError("--store: the study's store (study.output) is used; drop --store or the study file")
        if request.precision is not None:
            raise GengenError("--precision: the study's training.precision applies; drop --precision")
    elif request.store is None:
        raise GengenError("--store: give the store to write to (a folder or a .sqlite file), or a study file")
    precision = request.precision or "auto"
    if study is None and precision not in PRECISIONS:
        raise GengenError(f"--precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    # The tasks are checked (task folders, names, data) before the store is opened: a refused task leaves no store.
    catalogue = TaskCatalogue(settings)
    if study is None:
        assert request.store is not None  # checked above, before the tasks were loaded
        return LmEvalBackend(
            settings, store=request.store, tokenizer_path=request.tokenizer, device=request.device or "auto",
            precision=precision, catalogue=catalogue,
        )  # fmt: skip
    return LmEvalBackend(
        settings,
        store=study.output,
        study=study.name,
        tokenizer_path=request.tokenizer,
        device=request.device or study.training.device,
        precision=study.training.precision,
        device_map=study.evaluation.device_map,
        catalogue=catalogue,
    )


def _labels(base: dict[str, Any]) -> dict[str, Any]:
    """The label columns lm-eval's reader does not set (it sets model, run and step)."""
    return {key: base[key] for key in ("study", "family", "size")}


class LmEvalOptions(TypedDict, total=False):
    """How :class:`LmEvalBackend` loads each checkpoint: the keywords :func:`score_with_lm_eval` passes on to it
    (their defaults are the backend's)."""

    tokenizer_path: str | None
    device: str
    precision: str
    device_map: bool
    catalogue: TaskCatalogue | None


def score_with_lm_eval(
    checkpoints: Sequence[Checkpoint],
    settings: LmEvalSettings,
    *,
    store: Store,
    model_name: str,
    family: str = "",
    size: str = "",
    run: str = "main",
    study: str | None = None,
    log: Callable[[str], None] = print,
    **options: Unpack[LmEvalOptions],
) -> pd.DataFrame:
    """Score a checkpoint series on lm-eval tasks, committing each checkpoint × task to the store.

    :func:`gengen.scoring.score_series` with :class:`LmEvalBackend`.

    Parameters
    ----------
    checkpoints : sequence of Checkpoint
        From :func:`gengen.scoring.score.find_checkpoints`, sorted by step.
    settings : LmEvalSettings
        Tasks, few-shot, limit, batch size, task folders.
    store : gengen.store.database.Store
        Where the scores go.
    model_name, family, size, run : str
        The labels of the scores in the store.
    study : str, optional
        The study column (default: the store's).
    tokenizer_path : str, optional
        Default: the first checkpoint's (for adapters: the adapter folder's, else its base's).
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    precision : {"auto", "fp32", "bf16", "fp16"}
        As ``training.precision``: the dtypes follow :func:`gengen.scoring.models.precision_for` (full checkpoints
        in fp32 weights under autocast, a LoRA base in the compute dtype).
    device_map : bool
        Spread each model over every visible GPU (accelerate), for a model too large for one.
    catalogue : TaskCatalogue, optional
        The tasks of ``settings``, already checked and loaded (the CLI loads them before it opens the store,
        so that a refused task leaves nothing behind); default: loaded here.
    log : callable
        Progress lines: one per checkpoint × task, and one per checkpoint.

    Returns
    -------
    DataFrame
        The rows written by this call (checkpoint × task pairs already in the store are skipped).

    Raises
    ------
    GengenError
        lm-eval missing, an unknown task, data that cannot be loaded, settings that differ from the scores
        already in the run, a checkpoint that cannot be loaded.
    """
    from gengen.scoring.series import SeriesLabels, score_series

    if not checkpoints:
        raise InputError("no checkpoints to score")
    backend = LmEvalBackend(settings, store=store, **options)
    return score_series(backend, checkpoints, SeriesLabels(model_name, family, size, run, study=study), log=log)


def _headline(frame: pd.DataFrame, task: str) -> str:
    """``acc 0.512 ± 0.016 (n=1000)`` for the task's first metric (the group's when it is one)."""
    rows = frame[frame["testset"] == task]
    if rows.empty:
        rows = frame
    if rows.empty:
        return "no scores"
    row = rows.iloc[0]
    stderr = row.get("stderr")
    spread = f" ± {stderr:.3f}" if stderr is not None and stderr == stderr else ""
    n = row.get("n_examples")
    count = f" (n={int(n)})" if n is not None and n == n else ""
    more = f", {len(frame)} scores" if len(frame) > 1 else ""
    return f"{row['metric']} {row['value']:.4f}{spread}{count}{more}"


def _torch_device(device: str) -> Any:
    """``--device`` as a torch device: ``auto`` picks CUDA when present."""
    import torch

    from gengen.scoring.models import select_device

    if device in ("auto", "cpu", "cuda"):
        return select_device(device)
    if device.startswith("cuda:") and device[5:].isdigit():
        if not torch.cuda.is_available() or int(device[5:]) >= torch.cuda.device_count():
            raise ConfigError(f"--device: {device!r} asked for but torch sees {torch.cuda.device_count()} CUDA devices")
        return torch.device(device)
    raise ConfigError(f"--device: expected auto, cpu, cuda or cuda:N, got {device!r}")


def _check_resume(store: Store, model: str, run: str, settings: LmEvalSettings) -> None:
    """Refuse settings that differ from those the run's stored lm-eval scores were made with."""
    manifest = store.manifest(model, run) or {}
    earlier = manifest.get(MANIFEST_KEY)
    if not isinstance(earlier, dict):
        return
    stored = earlier.get("settings", {})
    for name, value in settings.binding().items():
        if name in stored and stored[name] != value:
            raise GengenError(
                f"run {model}/{run} in {store.path} was scored with {name} = {stored[name]!r}, not {value!r}",
                hint="use the same setting to resume, or another {run} for new settings",
            )


def _manifest(
    store: Store,
    model: str,
    run: str,
    settings: LmEvalSettings,
    catalogue: TaskCatalogue,
    *,
    device: str,
    precision: str,
) -> dict[str, Any]:
    """The run's manifest with the lm-eval backend's part added (an existing manifest keeps its own keys)."""
    manifest = dict(store.manifest(model, run) or {})
    found = manifest.get(MANIFEST_KEY)
    earlier: dict[str, Any] = found if isinstance(found, dict) else {}
    tasks = sorted({*earlier.get("tasks", []), *settings.tasks})
    manifest[MANIFEST_KEY] = {
        "backend": "lm-eval",
        "lm_eval_version": lm_eval_version(),
        "tasks": tasks,
        "task_versions": {**earlier.get("task_versions", {}), **catalogue.versions},
        "settings": {**asdict(settings), "include_paths": list(catalogue.paths[1:])},
        "device": device,
        "precision": precision,
    }
    return manifest


def study_settings(evaluation: EvaluationConfig, *, trust_task_code: bool = False) -> LmEvalSettings:
    """The lm-eval settings of a study's ``[evaluation]`` (``backend = "lm-eval"``).

    ``trust_task_code`` is never read from the study file: only the command line of a run may give it.
    """
    configured = evaluation.lm_eval
    if evaluation.backend != EXTRA or configured is None:
        raise ConfigError("evaluation.backend: the study does not score with lm-eval (set backend = 'lm-eval')")
    return LmEvalSettings(
        tasks=configured.tasks,
        num_fewshot=configured.num_fewshot,
        limit=configured.limit,
        batch_size=evaluation.batch_size,
        include_paths=configured.include_paths,
        trust_task_code=trust_task_code,
    )


def check_trainable_with_lm_eval(config: StudyConfig, *, trust_task_code: bool = False) -> None:
    """Refuse, before any training starts, a study whose lm-eval tasks could not be scored once it is trained.

    With ``evaluation.backend = "lm-eval"`` the runs' checkpoints are scored after training, so every one must
    be kept (``training.keep_checkpoints = "all"``), lm-eval must be installed, the study's task folders must
    not name code unless ``trust_task_code`` (``--trust-task-code``) is given for the run, and its tasks must load
    (:class:`TaskCatalogue`: known names, readable data, a few-shot pool larger than ``num_fewshot``).

    Parameters
    ----------
    config : StudyConfig
        The study.
    trust_task_code : bool
        ``--trust-task-code`` of the run.

    Raises
    ------
    ConfigError
        ``keep_checkpoints`` is not ``"all"``.
    GengenError
        lm-eval is not installed; a task YAML names code (``!function``) without ``trust_task_code``, or
        cannot be read; a task is unknown, its data cannot be loaded, or ``num_fewshot`` exceeds its pool.
    """
    if config.evaluation.backend != EXTRA:
        return
    if config.training.keep_checkpoints != "all":
        raise ConfigError(
            f"training.keep_checkpoints: evaluation.backend 'lm-eval' scores every checkpoint of a run once it is "
            f'trained, so they must be kept: set keep_checkpoints = "all" (not '
            f"{config.training.keep_checkpoints!r})"
        )
    # The tasks as scoring will load them (folders scanned, names, data, few-shot pools), before hours of training.
    TaskCatalogue(study_settings(config.evaluation, trust_task_code=trust_task_code))


def score_trained_runs(
    config: StudyConfig,
    runs: Sequence[RunSpec],
    *,
    trust_task_code: bool = False,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Score the checkpoints of a study's trained runs on its lm-eval tasks (``evaluation.backend = "lm-eval"``).

    What ``gengen train`` and ``gengen run`` do after training such a study. A run's series is its model before
    training (step 0: ``model.path``, as the training's own step-0 evaluation) followed by every
    ``checkpoint-<step>`` kept in its run folder (:attr:`gengen.study.paths.RunPaths.checkpoints`; with
    ``training.checkpoint_every`` only the steps saved). Each series goes through :func:`score_with_lm_eval`
    with the study's settings, device, precision and ``device_map``, under the run's model and run key, so it is
    resumable per checkpoint × task like ``gengen score``.

    Parameters
    ----------
    config : StudyConfig
        The study (``evaluation.backend = "lm-eval"``, ``training.keep_checkpoints = "all"``).
    runs : sequence of RunSpec
        The trained runs to score: a :class:`gengen.study.paths.RunPlan` (the runs with their paths as the study
        driver planned them), or runs whose paths are then made from ``config``.
    trust_task_code : bool
        Let the study's task folders run code (``--trust-task-code`` of ``gengen train``/``run``).
    log : callable
        Progress lines.

    Returns
    -------
    DataFrame
        The rows written (checkpoint × task pairs already in the store are skipped).

    Raises
    ------
    ConfigError
        The study does not score with lm-eval, or does not keep its checkpoints.
    InputError
        A run's folder holds no checkpoint (the run was not trained, or its checkpoints were removed).
    """
    import pandas as pd

    from gengen.scoring.score import Checkpoint, find_checkpoints
    from gengen.store.database import Store
    from gengen.study.paths import RunPlan

    check_trainable_with_lm_eval(config, trust_task_code=trust_task_code)
    plan = runs if isinstance(runs, RunPlan) else RunPlan.for_runs(config, runs)
    settings = study_settings(config.evaluation, trust_task_code=trust_task_code)
    store = Store(config.output, study=config.name)
    written = []
    for run in plan:
        folder = plan.paths[run].checkpoints
        saved = (
            [c for c in find_checkpoints([folder]) if not Path(c.path).name.startswith(".")] if folder.is_dir() else []
        )
        if not saved:
            raise InputError(f"{folder}: no checkpoint of run {run.model.name} {run.key} to score with lm-eval")
        before = [] if saved[0].step == 0 else [Checkpoint(run.model.path, 0, run.model.revision)]
        written.append(
            score_with_lm_eval(
                [*before, *saved],
                settings,
                store=store,
                model_name=run.model.name,
                family=run.model.family,
                size=run.model.size,
                run=run.key,
                study=config.name,
                tokenizer_path=run.model.tokenizer,
                device=config.training.device,
                precision=config.training.precision,
                device_map=config.evaluation.device_map,
                log=log,
            )
        )
    frames = [frame for frame in written if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
