"""Scoring checkpoint series with lm-evaluation-harness: any lm-eval task as a test set, straight into the store.

:func:`score_with_lm_eval` loads each checkpoint of a series the way ``gengen score`` does (local folders, LoRA
adapters swapped on one base, hub revisions; dtypes from :func:`gengen.models.precision_for`), wraps the model
in lm-eval's ``HFLM`` and runs ``lm_eval.simple_evaluate`` on each task. Every task × metric lands in the
store under the checkpoint's step, with its standard error and number of examples, read from lm-eval's result
by the same code that ingests lm-eval's output files (:func:`gengen.ingest.lm_eval.parse_v04`), so scoring
here and ingesting lm-eval's own files give the same rows.

Resumable: the scores of one checkpoint on one task are written in one transaction, and a checkpoint × task
whose scores are all in the store is skipped; a killed series resumes where it stopped, without duplicates.
The run's manifest records lm-eval's version, the tasks' versions and the settings (few-shot, limit); a later
call with other settings is refused rather than mixed into the same run.

``tasks/gengen_nli/`` holds the reference NLI protocol as lm-eval tasks (``gengen_mnli`` ... ``gengen_paws``,
tag ``gengen_nli``); they are always on the task path. :data:`TASKS_DIR` is the folder to give lm-eval's own
``--include_path`` to run them without gengen's CLI.

lm-eval is an optional dependency (``pip install 'gengen[lm-eval]'``), imported only when a function here
runs; importing this module imports neither lm-eval nor torch.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gengen.errors import ConfigError, GengenError, InputError

if TYPE_CHECKING:
    import pandas as pd

    from gengen.config import EvaluationConfig, RunSpec, StudyConfig
    from gengen.score import Checkpoint
    from gengen.store import Store

__all__ = [
    "EXTRA",
    "TASKS_DIR",
    "LmEvalSettings",
    "TaskCatalogue",
    "check_trainable_with_lm_eval",
    "require_lm_eval",
    "score_trained_runs",
    "score_with_lm_eval",
    "study_settings",
]

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
"""The task folder shipped with gengen (the reference NLI protocol); always on the task path."""

EXTRA = "lm-eval"
"""The optional dependency that installs lm-evaluation-harness."""

MANIFEST_KEY = "lm_eval"
"""The key of a run's manifest under which the lm-eval backend keeps its settings and versions."""

# Settings whose change makes earlier scores of the run incomparable (a resumed run must keep them).
_BINDING_SETTINGS = ("num_fewshot", "limit", "bootstrap_iters")


@dataclass(frozen=True)
class LmEvalSettings:
    """What lm-eval is asked to do for every checkpoint.

    Attributes
    ----------
    tasks : tuple of str
        lm-eval task, group or tag names (``hellaswag``, ``arc_easy``, ``mmlu``, ``gengen_nli``...).
    num_fewshot : int or None
        In-context examples per prompt (None: each task's default; a task whose file sets 0 keeps 0).
    limit : int, float or None
        Examples per task: a count (int ≥ 1) or a fraction of the task (float < 1); None: all.
    batch_size : int or str
        Requests per forward pass, or ``"auto"`` (lm-eval finds the largest that fits).
    include_paths : tuple of str
        Folders (or YAML files' folders) of further task definitions.
    bootstrap_iters : int
        Bootstrap resamples for the standard errors of metrics without a closed form (lm-eval's default).
    trust_task_code : bool
        Let the task folders run code for this call (``--trust-task-code``): ``!function`` in their YAML files
        is imported and templates are rendered unsandboxed, as lm-eval itself does. Off by default: such a
        task is refused, naming the file (see :mod:`gengen.lm_eval_backend.trust`).
    """

    tasks: tuple[str, ...]
    num_fewshot: int | None = None
    limit: int | float | None = None
    batch_size: int | str = 8
    include_paths: tuple[str, ...] = ()
    bootstrap_iters: int = 100_000
    trust_task_code: bool = False

    def __post_init__(self) -> None:
        if not self.tasks:
            raise GengenError("--tasks: give at least one lm-eval task")
        if self.num_fewshot is not None and self.num_fewshot < 0:
            raise GengenError(f"--num-fewshot: expected an integer >= 0, got {self.num_fewshot}")
        if self.limit is not None and not (self.limit >= 1 if isinstance(self.limit, int) else 0 < self.limit < 1):
            raise GengenError(f"--limit: expected a count >= 1 or a fraction in (0, 1), got {self.limit}")
        if isinstance(self.batch_size, str):
            parse_batch_size(self.batch_size)
        if isinstance(self.batch_size, int) and self.batch_size < 1:
            raise GengenError(f"--batch-size: expected a positive integer or 'auto', got {self.batch_size}")
        for path in self.include_paths:
            if not Path(path).exists():
                raise GengenError(f"--include-path: {path}: no such folder")

    def binding(self) -> dict[str, Any]:
        """The settings a resumed run must share with the scores already stored."""
        return {name: getattr(self, name) for name in _BINDING_SETTINGS}


def parse_limit(text: str | None) -> int | float | None:
    """``--limit`` as lm-eval takes it: ``"100"`` -> 100 examples, ``"0.1"`` -> a tenth of each task."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise GengenError(f"--limit: expected a count or a fraction, got {text!r}") from None
    return int(value) if value >= 1 and value.is_integer() else value


def parse_batch_size(text: str | int) -> int | str:
    """``--batch-size``: a positive integer, or ``auto`` / ``auto:N`` (lm-eval's automatic search)."""
    if isinstance(text, int):
        return text
    if text == "auto":
        return text
    if text.startswith("auto:"):
        # lm-eval reads N as how many times to search again for the largest batch; int() would fail inside it.
        tries = text[len("auto:") :]
        if not (tries.isascii() and tries.isdigit() and int(tries) >= 1):
            raise GengenError(f"--batch-size: expected auto:N with N a positive integer, got {text!r}")
        return text
    try:
        return int(text)
    except ValueError:
        raise GengenError(f"--batch-size: expected a positive integer or 'auto', got {text!r}") from None


def require_lm_eval() -> Any:
    """The ``lm_eval`` module, or a one-line error saying which extra installs it."""
    try:
        import lm_eval
        import lm_eval.evaluator  # the API used below; a broken install fails here, not mid-series
    except ImportError as error:
        raise GengenError(
            f"the lm-eval backend needs lm-evaluation-harness ({error}); install it with pip install 'gengen[{EXTRA}]'"
        ) from None
    return lm_eval


def lm_eval_version() -> str:
    """The installed lm-eval version."""
    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        return str(getattr(require_lm_eval(), "__version__", "unknown"))


@contextlib.contextmanager
def _quiet_lm_eval() -> Iterator[None]:
    """lm-eval's INFO and WARNING lines (one per task and checkpoint) would drown gengen's progress."""
    logger = logging.getLogger("lm_eval")
    level = logger.level
    logger.setLevel(logging.ERROR)
    # datasets' "Generating test split" bars, one per task and checkpoint, would too (and split error lines).
    import datasets

    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        logger.setLevel(level)
        if bars_were_on:
            datasets.enable_progress_bars()


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def _template_refused(where: str, task: str, error: BaseException) -> GengenError:
    """A template that the sandbox stopped: one line naming the task's file."""
    from gengen.lm_eval_backend.trust import TRUST_OPTION, TemplateRefused

    return TemplateRefused(
        f"{where}: a template of lm-eval task {task!r} was refused by the sandbox ({_first_line(error)}); "
        f"templates may not reach Python internals; pass {TRUST_OPTION} to render them unsandboxed for this run"
    )


class TaskCatalogue:
    """The lm-eval tasks a call may name: lm-eval's own, gengen's NLI tasks and the user's ``include_paths``.

    Names are checked, and each task's data loaded once, before any checkpoint is: an unknown name is an
    error listing close matches, and a task whose data cannot be loaded (offline, a wrong file) is an error
    naming it.

    Parameters
    ----------
    settings : LmEvalSettings
    """

    def __init__(self, settings: LmEvalSettings):
        from gengen.lm_eval_backend.trust import guard, scan_task_folders

        require_lm_eval()
        self.settings = settings
        self.paths = [str(TASKS_DIR), *(str(Path(p).resolve()) for p in settings.include_paths)]
        scan_task_folders(settings.include_paths, trust=settings.trust_task_code)
        self.full = False
        self.leaves: dict[str, tuple[str, ...]] = {}
        self.versions: dict[str, Any] = {}
        with guard(trust=settings.trust_task_code):
            self.manager = self._manager()
            for name in settings.tasks:
                self.leaves[name] = self._load(name)

    def yaml_file(self, name: str) -> str:
        """The YAML file that defines task ``name`` (for error lines), or the name when it has none."""
        entry = self.manager.task_index.get(name)
        path = getattr(entry, "yaml_path", None)
        return str(path) if path else repr(name)

    def _manager(self) -> Any:
        from lm_eval.tasks import TaskManager

        # Indexing lm-eval's ~15,000 built-in task files takes seconds: skip it when every name is a task of
        # gengen's or the user's folders (and fall back to the full index when one of them needs a built-in).
        with _quiet_lm_eval():
            local = TaskManager(include_path=self.paths, include_defaults=False)
            if all(name in local.all_tasks for name in self.settings.tasks):
                return local
            self.full = True
            return TaskManager(include_path=self.paths)

    def _check_name(self, name: str) -> None:
        known = self.manager.all_tasks
        if name in known:
            return
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else "see `lm_eval ls tasks`"
        raise InputError(f"--tasks: unknown lm-eval task {name!r} ({hint})")

    def _load(self, name: str) -> tuple[str, ...]:
        """Load ``name`` (its data included) and return its leaf tasks' names."""
        from jinja2.exceptions import SecurityError

        from gengen.lm_eval_backend.trust import TaskCodeRefused

        self._check_name(name)
        try:
            with _quiet_lm_eval():
                loaded = self.manager.load([name])
        except TaskCodeRefused:
            raise
        except SecurityError as error:
            raise _template_refused(self.yaml_file(name), name, error) from None
        except KeyError as error:
            if not self.full:  # a local task or group that refers to a built-in one
                self.manager = self._full_manager()
                return self._load(name)
            raise InputError(f"lm-eval task {name!r}: {_first_line(error)}") from None
        except Exception as error:  # datasets, fsspec and hub errors have no common base
            raise InputError(
                f"lm-eval task {name!r}: cannot load its data ({type(error).__name__}: {_first_line(error)}); "
                "offline, lm-eval reads only data already in the Hugging Face cache or local files "
                "(dataset_path: json with data_files)"
            ) from None
        for task_name, task in loaded["tasks"].items():
            self.versions[task_name] = task.VERSION
            self._check_fewshot(task_name, task)
        return tuple(sorted(loaded["tasks"]))

    def _check_fewshot(self, name: str, task: Any) -> None:
        """``--num-fewshot`` larger than the examples a task can draw from fails deep inside lm-eval (a
        sample larger than its population) once a model is loaded: refuse it here, naming the task."""
        wanted = self.settings.num_fewshot
        if not wanted:
            return
        try:
            available = len(task.fewshot_docs())
        except Exception:  # a task without a countable few-shot pool: lm-eval decides
            return
        if wanted >= available:
            raise GengenError(
                f"--num-fewshot: {wanted} examples in each prompt, but lm-eval task {name!r} has only {available} "
                "examples to draw them from (one of which may be the example scored)"
            )

    def _full_manager(self) -> Any:
        from lm_eval.tasks import TaskManager

        self.full = True
        with _quiet_lm_eval():
            return TaskManager(include_path=self.paths)


@dataclass
class _Progress:
    """Counts for the closing line."""

    scored: int = 0
    skipped: int = 0
    rows: int = 0
    seconds: float = 0.0
    per_task: dict[str, float] = field(default_factory=dict)


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
    tokenizer_path: str | None = None,
    device: str = "auto",
    precision: str = "auto",
    device_map: bool = False,
    catalogue: TaskCatalogue | None = None,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Score a checkpoint series on lm-eval tasks, committing each checkpoint × task to the store.

    Parameters
    ----------
    checkpoints : sequence of Checkpoint
        From :func:`gengen.score.find_checkpoints`, sorted by step.
    settings : LmEvalSettings
        Tasks, few-shot, limit, batch size, task folders.
    store : gengen.store.Store
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
        As ``training.precision``: the dtypes follow :func:`gengen.models.precision_for` (full checkpoints
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
    import pandas as pd

    if not checkpoints:
        raise InputError("no checkpoints to score")
    lm_eval = require_lm_eval()
    if catalogue is None or catalogue.settings != settings:
        catalogue = TaskCatalogue(settings)
    study = study if study is not None else store.study
    _check_resume(store, model_name, run, settings)
    done = {(step, testset) for step, testset, _ in store.completed(model_name, run, study=study)}

    def pending(step: int) -> list[str]:
        """The tasks of ``step`` with a leaf task that has no score yet."""
        return [t for t in settings.tasks if not all((step, leaf) in done for leaf in catalogue.leaves[t])]

    todo = [c for c in checkpoints if pending(c.step)]
    manifest = _manifest(store, model_name, run, settings, catalogue, device=device, precision=precision)
    store.write_manifest(model_name, run, manifest)
    if not todo:
        log(f"{model_name} {run}: all {len(checkpoints)} checkpoints already scored on {len(settings.tasks)} tasks")
        return pd.DataFrame()

    import torch
    from jinja2.exceptions import SecurityError
    from lm_eval.models.huggingface import HFLM

    from gengen.lm_eval_backend.trust import guard
    from gengen.models import load_tokenizer, precision_for
    from gengen.score import SeriesLoader

    torch_device = _torch_device(device)
    adapters = any(c.revision is None and (Path(c.path) / "adapter_config.json").is_file() for c in checkpoints)
    dtypes = precision_for(precision, "lora" if adapters else "full", torch_device)
    loader = SeriesLoader(dtypes, torch_device, device_map=device_map)
    first = checkpoints[0]
    tokenizer = load_tokenizer(tokenizer_path or first.path, None if tokenizer_path else first.revision)
    progress = _Progress(skipped=len(checkpoints) - len(todo))
    written: list[pd.DataFrame] = []
    for index, checkpoint in enumerate(checkpoints, start=1):
        tasks = pending(checkpoint.step)
        if not tasks:
            continue
        began = time.perf_counter()
        model = loader.load(checkpoint)
        with _quiet_lm_eval():
            lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=settings.batch_size)
        base = {"study": study, "family": family, "size": size}
        for number, task in enumerate(tasks, start=1):
            task_began = time.perf_counter()
            try:
                with _quiet_lm_eval(), dtypes.context(torch_device), guard(trust=settings.trust_task_code):
                    results = lm_eval.simple_evaluate(
                        model=lm,
                        tasks=[task],
                        num_fewshot=settings.num_fewshot,
                        limit=settings.limit,
                        bootstrap_iters=settings.bootstrap_iters,
                        task_manager=catalogue.manager,
                        log_samples=False,
                    )
            except SecurityError as error:
                raise _template_refused(catalogue.yaml_file(task), task, error) from None
            except torch.cuda.OutOfMemoryError:
                raise GengenError(
                    f"step {checkpoint.step} task {task!r}: out of GPU memory; use a smaller --batch-size"
                ) from None
            frame = _rows_from_results(results, model=model_name, run=run, step=checkpoint.step, base=base)
            store.write_scores(frame)
            written.append(frame)
            progress.rows += len(frame)
            seconds = time.perf_counter() - task_began
            log(
                f"  step {checkpoint.step:>7} [{index}/{len(checkpoints)}] task {number}/{len(tasks)} "
                f"{task}: {_headline(frame, task)} ({seconds:.1f} s)"
            )
        progress.scored += 1
        log(
            f"{model_name} {run} step {checkpoint.step}: {len(tasks)} tasks in "
            f"{time.perf_counter() - began:.1f} s (load included)"
        )
        del lm, model
    log(
        f"{model_name} {run}: {progress.scored} checkpoints scored, {progress.skipped} already in the store, "
        f"{progress.rows} scores written, {loader.base_loads} model loads"
    )
    return pd.concat(written, ignore_index=True) if written else pd.DataFrame()


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

    from gengen.models import select_device

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
                f"run {model}/{run} in {store.path} was scored with {name} = {stored[name]!r}, not {value!r}; "
                "use the same setting to resume, or another --run for new settings"
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
    be kept (``training.keep_checkpoints = "all"``), lm-eval must be installed, and the study's task folders
    must not name code unless ``trust_task_code`` (``--trust-task-code``) is given for the run.

    Raises
    ------
    ConfigError
        ``keep_checkpoints`` is not ``"all"``.
    GengenError
        lm-eval is not installed; a task YAML names code (``!function``) without ``trust_task_code``, or
        cannot be read.
    """
    if config.evaluation.backend != EXTRA:
        return
    if config.training.keep_checkpoints != "all":
        raise ConfigError(
            f"training.keep_checkpoints: evaluation.backend 'lm-eval' scores every checkpoint of a run once it is "
            f'trained, so they must be kept: set keep_checkpoints = "all" (not '
            f"{config.training.keep_checkpoints!r})"
        )
    require_lm_eval()
    from gengen.lm_eval_backend.trust import scan_task_folders

    configured = config.evaluation.lm_eval
    scan_task_folders(configured.include_paths if configured else (), trust=trust_task_code)


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
    ``checkpoint-<step>`` kept in its run folder (:meth:`gengen.config.StudyConfig.run_dir`; with
    ``training.checkpoint_every`` only the steps saved). Each series goes through :func:`score_with_lm_eval`
    with the study's settings, device, precision and ``device_map``, under the run's model and run key, so it is
    resumable per checkpoint × task like ``gengen score``.

    Parameters
    ----------
    config : StudyConfig
        The study (``evaluation.backend = "lm-eval"``, ``training.keep_checkpoints = "all"``).
    runs : sequence of RunSpec
        The trained runs to score.
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

    from gengen.score import Checkpoint, find_checkpoints
    from gengen.store import Store

    check_trainable_with_lm_eval(config, trust_task_code=trust_task_code)
    settings = study_settings(config.evaluation, trust_task_code=trust_task_code)
    store = Store(config.output, study=config.name)
    written = []
    for run in runs:
        folder = config.run_dir(run)
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
