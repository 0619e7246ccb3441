"""What an lm-eval task folder may run: nothing, unless the user says so for the run (``--trust-task-code``).

A study's ``include_paths`` (or ``--include-path``) are folders of task YAML files: data, like every file in a
study folder. lm-eval, though, treats two things in them as code:

* ``!function module.name`` (``process_docs``, ``doc_to_text``, ``class``...) imports ``module.py`` next to the
  YAML file, or any importable module, and calls it;
* Jinja templates (``doc_to_text: "{{ ... }}"``) are rendered in an unsandboxed environment, where
  ``{{ cycler.__init__.__globals__.os.system('...') }}`` runs a shell command.

Without ``trust_task_code`` (the ``trust_remote_code`` convention of transformers and datasets), gengen

1. scans the user's task folders before anything loads (:func:`scan_task_folders`): a task YAML that names code
   with ``!function`` is refused in one line naming the file and the function, as is a YAML file that cannot be
   parsed (lm-eval would skip it silently and report an unknown task) or a path that is not a regular file, and
   so is a template that reaches an attribute the sandbox refuses (``__init__``...), before any model is loaded;
2. while lm-eval loads and runs tasks (:func:`guard`), refuses every ``!function`` of a YAML file outside the
   task folders that ship with lm-eval and gengen (an ``include:`` may reach any file), and renders templates in
   Jinja's :class:`~jinja2.sandbox.SandboxedEnvironment`, which refuses attributes such as ``__init__`` and
   ``__globals__`` (a :class:`TemplateRefused` naming the task).

With ``trust_task_code=True`` lm-eval runs as it would on its own: task code is imported and templates are
rendered in lm-eval's own environment. lm-eval's and gengen's own task folders are installed code and always
trusted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gengen.errors import InputError

__all__ = [
    "TRUST_OPTION",
    "TaskCodeRefused",
    "TemplateRefused",
    "guard",
    "scan_task_folders",
    "trusted_roots",
]

TRUST_OPTION = "--trust-task-code"
"""The command-line option that lets task folders run code for one run."""

_SKIPPED_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints"})
_MAX_INCLUDE_DEPTH = 100


class TaskCodeRefused(InputError):
    """A task file names Python code (``!function``) and the run does not trust task code."""


class TemplateRefused(InputError):
    """A task's Jinja template reached for something the sandbox does not allow."""


def trusted_roots() -> tuple[Path, ...]:
    """The task folders whose code is installed code: lm-eval's own tasks and gengen's (resolved)."""
    # gengen's own task folder (the package's TASKS_DIR), found from here: importing the package would make
    # an import cycle (it imports this module).
    roots = [(Path(__file__).resolve().parent / "tasks").resolve()]
    with contextlib.suppress(ImportError):
        import lm_eval.tasks

        roots.append(Path(lm_eval.tasks.__file__).resolve().parent)
    return tuple(roots)


def _is_trusted(path: Path, roots: Iterable[Path]) -> bool:
    resolved = Path(os.path.realpath(path))
    return any(resolved == root or resolved.is_relative_to(root) for root in roots)


def _refusal(yaml_file: object, spec: str, base_dir: Path) -> TaskCodeRefused:
    module = spec.rpartition(".")[0]
    local = base_dir / f"{module.replace('.', '/')}.py"
    where = f" ({local})" if module and local.is_file() else ""
    return TaskCodeRefused(
        f"{yaml_file}: '!function {spec}' would run Python code{where} from a task folder; "
        f"pass {TRUST_OPTION} to allow task code for this run"
    )


def _yaml_files(root: Path) -> Iterator[Path]:
    """The ``*.yaml`` files lm-eval would index under ``root`` (symlinked folders not followed: no loops)."""
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".yaml"):
                yield Path(folder) / name


def _scanning_loader(found: list[str]) -> type[Any]:
    import yaml

    base = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    def function(loader: Any, node: Any) -> str:
        spec = str(loader.construct_scalar(node))
        found.append(spec)
        return spec

    Loader.add_constructor("!function", function)
    return Loader


def _scan_file(path: Path, *, trust: bool, roots: tuple[Path, ...], seen: set[Path], depth: int) -> None:
    import yaml

    resolved = Path(os.path.realpath(path))
    if resolved in seen or _is_trusted(resolved, roots):
        return
    seen.add(resolved)
    if depth > _MAX_INCLUDE_DEPTH:
        raise InputError(f"{path}: task YAML includes nested more than {_MAX_INCLUDE_DEPTH} deep")
    if not resolved.is_file():  # a FIFO or a device would block lm-eval's reader for ever
        kind = "a folder" if resolved.is_dir() else "not a regular file" if resolved.exists() else "no such file"
        raise InputError(f"{path}: {kind}, expected a task YAML file")
    try:
        text = resolved.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); a task YAML file must be UTF-8") from None
    found: list[str] = []
    try:
        document = yaml.load(text, Loader=_scanning_loader(found))  # a safe loader plus one tag
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(f"{path}: not valid task YAML ({where}{problem})") from None
    except RecursionError:
        raise InputError(f"{path}: task YAML nested too deeply to read") from None
    if found and not trust:
        raise _refusal(path, found[0], resolved.parent)
    _check_names(path, document)
    if not trust:
        _check_templates(path, document)
    if isinstance(document, dict) and "include" in document:
        included = document["include"]
        for name in included if isinstance(included, list) else [included]:
            if not isinstance(name, str):
                raise InputError(f"{path}: include: expected a file name, got {name!r}")
            target = Path(name) if Path(name).is_absolute() else path.parent / name
            _scan_file(target, trust=trust, roots=roots, seen=seen, depth=depth + 1)


def _is_names(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, (str, dict)) for v in value))


def _check_names(path: Path, document: object) -> None:
    """``task``, ``group`` and ``tag`` are names (lm-eval's indexer fails with a traceback on a number)."""
    if not isinstance(document, dict):
        return
    for key, valid in (("task", _is_names), ("group", lambda v: isinstance(v, (str, dict))), ("tag", _is_names)):
        if key in document and not valid(document[key]):
            shown = repr(document[key])
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise InputError(f"{path}: {key}: expected a name (or a list of names), got {shown}")


def _strings(document: object, depth: int = 0) -> Iterator[str]:
    """Every string value of a YAML document (templates are strings anywhere in a task's mapping)."""
    if depth > 100:
        return
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for value in document.values():
            yield from _strings(value, depth + 1)
    elif isinstance(document, list):
        for value in document:
            yield from _strings(value, depth + 1)


def _internal_attribute(template: str) -> str | None:
    """The first attribute of ``template`` that Jinja's sandbox refuses at render time (one starting with an
    underscore: ``__init__``, ``__globals__``...), found by parsing it; None when it reaches none."""
    try:
        from jinja2 import Environment, nodes
        from jinja2.exceptions import TemplateSyntaxError
    except ImportError:  # pragma: no cover - lm-eval installs jinja2
        return None
    try:
        tree = Environment().parse(template)
    except (TemplateSyntaxError, RecursionError):
        return None  # lm-eval reports it when it renders the template
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            name: object = node.attr
        elif isinstance(node, nodes.Filter):  # x|attr('__init__')
            first = node.args[0] if node.name == "attr" and node.args else None
            name = first.value if isinstance(first, nodes.Const) else None
        else:
            key = getattr(node, "arg", None)
            name = key.value if isinstance(key, nodes.Const) else None
        if isinstance(name, str) and name.startswith("_"):
            return name
    return None


def _check_templates(path: Path, document: object) -> None:
    """Refuse, before anything loads, a template the sandbox would refuse once a model is loaded (or after a
    whole training run, with ``gengen train``/``run``)."""
    for text in _strings(document):
        if "{{" not in text and "{%" not in text:
            continue
        name = _internal_attribute(text)
        if name is not None:
            raise TemplateRefused(
                f"{path}: a template reaches Python internals ({name!r}), which the sandbox refuses; pass "
                f"{TRUST_OPTION} to render them unsandboxed for this run"
            )


def read_task_yaml(path: Path) -> object:
    """The document of a task YAML file (``!function`` read as its text), or None when it cannot be read."""
    import yaml

    try:
        return yaml.load(path.read_bytes().decode("utf-8"), Loader=_scanning_loader([]))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None


def task_yaml_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """The ``*.yaml`` files lm-eval indexes under the include ``paths``."""
    for root in paths:
        yield from _yaml_files(Path(root))


def scan_task_folders(paths: Iterable[str | os.PathLike[str]], *, trust: bool) -> None:
    """Check the user's task folders before lm-eval reads them.

    Parameters
    ----------
    paths : iterable of path
        The include paths (folders of task YAML files, or YAML files).
    trust : bool
        ``--trust-task-code`` was given: ``!function`` is allowed (broken files are still refused).

    Raises
    ------
    TaskCodeRefused
        A YAML file (or a file it includes) has a ``!function`` and ``trust`` is False.
    InputError
        A YAML file is not UTF-8, not valid YAML, not a regular file, or includes one that is not.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "t.yaml").write_text("task: t\\nprocess_docs: !function evil.process\\n")
    >>> try:
    ...     scan_task_folders([folder], trust=False)
    ... except TaskCodeRefused as error:
    ...     print(str(error).split(": ", 1)[1].split(";")[0])
    '!function evil.process' would run Python code from a task folder
    >>> scan_task_folders([folder], trust=True)
    >>> import shutil; shutil.rmtree(folder)
    """
    roots = trusted_roots()
    seen: set[Path] = set()
    for root in paths:
        for path in _yaml_files(Path(root)):
            _scan_file(path, trust=trust, roots=roots, seen=seen, depth=0)


def _sandboxed_environment(original: Any) -> Any:
    """A :class:`~jinja2.sandbox.SandboxedEnvironment` with lm-eval's settings and filters."""
    from jinja2 import BaseLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    sandbox = SandboxedEnvironment(loader=BaseLoader(), undefined=StrictUndefined, keep_trailing_newline=True)
    sandbox.filters.update({k: v for k, v in original.filters.items() if k not in sandbox.filters})
    return sandbox


@contextlib.contextmanager
def guard(*, trust: bool) -> Iterator[None]:
    """While lm-eval loads and runs tasks: no task code and sandboxed templates, unless ``trust``.

    Patches lm-eval's YAML ``!function`` constructor (refusing, with :class:`TaskCodeRefused`, functions named
    by YAML files outside :func:`trusted_roots`) and its template environment (``lm_eval.utils.env``), and
    restores both on exit. With ``trust`` nothing is changed.
    """
    if trust:
        yield
        return
    from lm_eval import utils
    from lm_eval.tasks import _yaml_loader

    roots = trusted_roots()
    make_ctor = _yaml_loader._mk_function_ctor

    def guarded_ctor(base_dir: Path, resolve: bool) -> Any:
        inner = make_ctor(base_dir, resolve)
        if not resolve or _is_trusted(Path(base_dir), roots):
            return inner

        def refuse(loader: Any, node: Any) -> Any:
            spec = str(loader.construct_scalar(node))
            name = getattr(node.start_mark, "name", None) or base_dir
            raise _refusal(name, spec, Path(base_dir))

        return refuse

    environment = utils.env
    _yaml_loader._mk_function_ctor = guarded_ctor
    utils.env = _sandboxed_environment(environment)
    try:
        yield
    finally:
        _yaml_loader._mk_function_ctor = make_ctor
        utils.env = environment
