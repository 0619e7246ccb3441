"""lm-eval's settings and tasks as gengen checks them: what a call asks for, and the tasks it may name.

:class:`LmEvalSettings` holds what lm-eval is asked to do for every checkpoint (checked when made);
:class:`TaskCatalogue` checks the task names, loads each task's data once and refuses task folders that would
run code, all before any checkpoint is loaded or any store opened. Importing this module imports neither
lm-eval nor torch.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from gengen.errors import GengenError, InputError

__all__ = [
    "EXTRA",
    "MANIFEST_KEY",
    "TASKS_DIR",
    "LmEvalSettings",
    "TaskCatalogue",
    "first_line",
    "lm_eval_version",
    "parse_batch_size",
    "parse_limit",
    "quiet_lm_eval",
    "require_lm_eval",
    "template_refused",
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
        task is refused, naming the file (see :mod:`gengen.scoring.lm_eval.trust`).
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
def quiet_lm_eval() -> Iterator[None]:
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


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def template_refused(where: str, task: str, error: BaseException) -> GengenError:
    """A template that the sandbox stopped: one line naming the task's file."""
    from gengen.scoring.lm_eval.trust import TRUST_OPTION, TemplateRefused

    return TemplateRefused(
        f"{where}: a template of lm-eval task {task!r} was refused by the sandbox ({first_line(error)}); "
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
        from gengen.scoring.lm_eval.trust import guard, scan_task_folders

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
        with quiet_lm_eval():
            local = TaskManager(include_path=self.paths, include_defaults=False)
            if all(name in local.all_tasks for name in self.settings.tasks):
                return local
            self.full = True
            return TaskManager(include_path=self.paths)

    def _check_name(self, name: str) -> None:
        known = self.manager.all_tasks
        if name in known:
            return
        broken = self._broken_file(name)
        if broken is not None:
            raise InputError(
                f"{broken}: defines no lm-eval task (a YAML mapping with a 'task:' name is expected), so --tasks "
                f"{name!r} is unknown"
            )
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else "see `lm_eval ls tasks`"
        raise InputError(f"--tasks: unknown lm-eval task {name!r} ({hint})")

    def _broken_file(self, name: str) -> Path | None:
        """A YAML file of the user's task folders that lm-eval did not index as a task, group or tag: one named
        after the task asked for, or one that is no mapping at all (empty, a list, a scalar)."""
        from gengen.scoring.lm_eval.trust import read_task_yaml, task_yaml_files

        indexed = {str(getattr(entry, "yaml_path", "")) for entry in self.manager.task_index.values()}
        unindexed = [p for p in task_yaml_files(self.settings.include_paths) if str(p.resolve()) not in indexed]
        named = [p for p in unindexed if p.stem == name]
        if named:
            return named[0]
        return next((p for p in unindexed if not isinstance(read_task_yaml(p), dict)), None)

    def _load(self, name: str) -> tuple[str, ...]:
        """Load ``name`` (its data included) and return its leaf tasks' names."""
        from jinja2.exceptions import SecurityError

        from gengen.scoring.lm_eval.trust import TaskCodeRefused

        self._check_name(name)
        try:
            with quiet_lm_eval():
                loaded = self.manager.load([name])
        except TaskCodeRefused:
            raise
        except SecurityError as error:
            raise template_refused(self.yaml_file(name), name, error) from None
        except KeyError as error:
            if not self.full:  # a local task or group that refers to a built-in one
                self.manager = self._full_manager()
                return self._load(name)
            raise InputError(f"lm-eval task {name!r}: {first_line(error)}") from None
        except Exception as error:  # datasets, fsspec and hub errors have no common base
            raise InputError(
                f"lm-eval task {name!r}: cannot load its data ({type(error).__name__}: {first_line(error)}); "
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
        with quiet_lm_eval():
            return TaskManager(include_path=self.paths)
