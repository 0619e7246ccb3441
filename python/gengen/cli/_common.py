"""Shared plumbing for the CLI commands: every user error becomes one ``error:`` line on stderr and exit status 2.

Two layers share one mapping (:func:`user_error_message`): :func:`user_errors_exit` wraps each command, and
:func:`run_app` wraps the whole application for what happens before a command runs (Typer's and click's own
parse errors: a bad option value, a missing argument, an unknown option). Library warnings are shown as one
``warning:`` line each instead of Python's two-line format with a source line.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, ParamSpec, TypedDict, TypeVar

import typer

from gengen.errors import GengenError

if TYPE_CHECKING:
    from gengen.across.verdict import Verdict

P = ParamSpec("P")
R = TypeVar("R")

USER_ERROR_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130
TERMINATED_EXIT_CODE = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that the same clean-up runs (workers ended, partial files
    removed), then reported as one ``error: terminated`` line and status 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def _interruption(error: KeyboardInterrupt) -> tuple[str, int]:
    """The ``error:`` text and exit status of Ctrl-C or SIGTERM."""
    if isinstance(error, Terminated):
        return "terminated (SIGTERM)", TERMINATED_EXIT_CODE
    return "interrupted", INTERRUPTED_EXIT_CODE


REQUIRED: Any = inspect.Parameter.empty
"""The default of a :class:`CliOption` the user must give."""


class CliOption(NamedTuple):
    """One entry of a command's option table (see :func:`table_signature`).

    Attributes
    ----------
    kind : type
        The value's type, as an annotation would give it (``str | None``).
    help : str
        The option's help text.
    default : object
        Its default (:data:`REQUIRED`: none).
    flags : tuple of str
        Its flags, where typer's own (``--`` and the name with dashes) will not do: a short flag, or a
        bool's without the ``--no-`` form.
    min, max : int, optional
        Bounds typer checks.
    argument : bool
        A positional argument rather than an option.
    """

    kind: Any
    help: str
    default: Any = None
    flags: tuple[str, ...] = ()
    min: int | None = None
    max: int | None = None
    argument: bool = False

    def info(self) -> Any:
        """The ``typer.Option`` (or ``typer.Argument``) that declares it."""
        if self.argument:
            return typer.Argument(help=self.help)
        return typer.Option(*self.flags, help=self.help, min=self.min, max=self.max)


def table_signature(table: Mapping[str, CliOption]) -> inspect.Signature:
    """The signature typer reads a command's parameters from: one per entry of ``table``, in its order.

    A command whose options mostly go on to a library call as they are declares them in such a table, once,
    sets its ``__signature__`` to this, and passes them on with ``**options``.
    """
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            inspect.Parameter(name, keyword, default=entry.default, annotation=Annotated[entry.kind, entry.info()])
            for name, entry in table.items()
        ]
    )


TRUST_TASK_CODE_HELP = (
    "lm-eval: let the task folders run code for this run (!function in task YAML imports Python files; "
    "templates are rendered unsandboxed). Without it such tasks are refused, naming the file."
)
"""The help of ``--trust-task-code`` (score, train, run): task files are data unless the user says so."""
#: ``--trust-task-code`` of the commands that may load lm-eval task folders (score, train, run).
TRUST_TASK_CODE = CliOption(bool, TRUST_TASK_CODE_HELP, False, ("--trust-task-code",))
TrustTaskCode = Annotated[bool, TRUST_TASK_CODE.info()]
#: The study file argument of the commands that run a study (plan, train, run).
StudyFile = Annotated[Path, typer.Argument(help="The study's TOML file.")]
#: ``--model`` of the commands that train a study's runs (train, run): only those models' runs.
OnlyModels = Annotated[list[str] | None, typer.Option("--model", help="Only this model's runs (repeatable).")]
#: The analysis folder argument of the commands that read ``gengen analyse``'s output (compare, report).
AnalysisDir = Annotated[Path, typer.Argument(help="Output folder of gengen analyse.")]


class Bounds(TypedDict):
    """``min`` and ``max`` of an option, to pass on as ``**bounds``."""

    min: int
    max: int


SEED_RANGE: Bounds = {"min": 0, "max": 2**64 - 1}
"""``typer.Option(**SEED_RANGE)``: seeds are unsigned 64-bit integers."""

# What a file-system error means to someone who typed the path; strerror wording varies by platform.
_ERRNO_MEANINGS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted (read-only or protected)",
    errno.EEXIST: "already exists",
    errno.ENOTDIR: "not a directory (a file is in the way)",
    errno.EISDIR: "is a directory, expected a file",
    errno.ENOENT: "no such file or directory",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "file name too long",
    errno.ELOOP: "too many levels of symbolic links",
}

# Warnings about library internals, not about the user's data.
_SILENT_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def either(choices: Sequence[str]) -> str:
    """Choices as help text reads them: ``"a, b or c"``."""
    return choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"


def one_line(text: str) -> str:
    """``text`` with its lines joined by ``"; "`` so that an error is always a single line."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def answer_line(verdict: Verdict) -> str:
    """The verdict's answer sentence for a terminal: ``Verdict.answer`` where this version has it, else the
    first sentence of ``Verdict.text``; prefixed ``answer:`` so that it reads (and greps) as the answer."""
    from gengen.report.page import answer_of

    return f"answer: {one_line(answer_of(verdict))}"


def fail(message: str, code: int = USER_ERROR_EXIT_CODE) -> typer.Exit:
    """Print ``message`` as one ``error:`` line on stderr and return the Exit to raise."""
    print(f"error: {one_line(message)}", file=sys.stderr)
    return typer.Exit(code=code)


def describe_os_error(error: OSError) -> str:
    """One line naming the path(s) of a file-system error and what is wrong with them."""
    meaning = _ERRNO_MEANINGS.get(error.errno or -1) or (error.strerror or str(error) or type(error).__name__)
    if error.filename is None:
        return f"{meaning}" if error.strerror else one_line(str(error))
    where = str(error.filename)
    if error.filename2 is not None:
        where = f"{where} -> {error.filename2}"
    return f"{where}: {meaning}"


def check_output_folder(path: Path, option: str = "--out") -> None:
    """Refuse an output folder that could not be created, before any work is done (nothing is created).

    A file where the folder (or one of its parents) should be, or a parent folder without write permission,
    is a GengenError naming ``option`` and the path in the way.
    """
    if path.exists():
        if not path.is_dir():
            raise GengenError(f"{option}: {path} is a file, expected a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise GengenError(f"{option}: {path}: permission denied (the folder is not writable)")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise GengenError(f"{option}: {parent} is a file, so the folder {path} cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise GengenError(f"{option}: {parent}: permission denied, so the folder {path} cannot be created")


def cli_flag(name: str, flags: Mapping[str, str] | None = None) -> str:
    """The flag of a library option: the command's own (``flags``), else ``--`` and the name with dashes."""
    return (flags or {}).get(name) or "--" + name.replace("_", "-")


def user_error_message(error: BaseException, flags: Mapping[str, str] | None = None) -> str | None:
    """The ``error:`` line for an exception caused by the user's input, or None for a bug.

    User errors are :class:`GengenError` (the library's own), file-system errors (:class:`OSError`:
    permissions, a file where a folder is expected, a full disk…), SQLite errors that escaped the store's own
    mapping, and running out of memory. A GengenError about an option (its ``option`` field) names the
    option by the running command's flag: ``flags`` maps library names to flags, and any other name ``n_perm``
    is written ``--n-perm``.
    """
    if isinstance(error, GengenError):
        return error.render(lambda name: cli_flag(name, flags))
    if isinstance(error, OSError):
        return describe_os_error(error)
    if isinstance(error, _sqlite_errors()):
        return f"store: {error} (the database file or its folder may be read-only, locked or damaged)"
    if isinstance(error, MemoryError):
        return f"out of memory{': ' + str(error) if str(error) else ''}; try smaller sizes (--n-perm, --n-boot)"
    return None


def _sqlite_errors() -> tuple[type[BaseException], ...]:
    """``(sqlite3.Error,)`` once sqlite3 is imported, else nothing: an SQLite error cannot have been raised before,
    and the commands' help and start-up need not import it."""
    sqlite3 = sys.modules.get("sqlite3")
    return (sqlite3.Error,) if sqlite3 is not None else ()


def _user_error_types() -> tuple[type[BaseException], ...]:
    """The exceptions :func:`user_error_message` renders as user errors."""
    return (GengenError, OSError, MemoryError, *_sqlite_errors())


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the CLI: one ``warning:`` line, no source line."""
    if issubclass(category, _SILENT_WARNINGS):
        return
    print(f"warning: {one_line(str(message))}", file=sys.stderr)


def user_errors_exit(command: Callable[P, R], *, flags: Mapping[str, str] | None = None) -> Callable[P, R]:
    """Decorate a command so that a user error ends it with one ``error:`` line and exit status 2.

    See :func:`user_error_message` for what counts as a user error (``flags``: the command's flags of library
    options whose flag is not ``--`` and the name with dashes); Ctrl-C ends the command with one
    ``error: interrupted`` line and status 130. Anything else is a bug and propagates with its traceback.
    Warnings raised while the command runs are printed as one ``warning:`` line each.
    """

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return command(*args, **kwargs)
            except typer.Exit:
                raise
            except KeyboardInterrupt as error:
                raise fail(*_interruption(error)) from None
            except _user_error_types() as error:
                raise fail(user_error_message(error, flags) or str(error)) from None

    return wrapper


def _given_value(error: Exception, argv: Sequence[str] | None) -> str:
    """`` (got '1e11')`` for a refused option value: Typer's messages do not repeat the value."""
    param = getattr(error, "param", None)
    names = [name for name in getattr(param, "opts", []) if name.startswith("-")]
    if not names or type(error).__name__ != "BadParameter":
        return ""
    arguments = list(sys.argv[1:] if argv is None else argv)
    given = None
    for index, argument in enumerate(arguments):
        if argument in names and index + 1 < len(arguments):
            given = arguments[index + 1]
        for name in names:
            if argument.startswith(f"{name}="):
                given = argument[len(name) + 1 :]
    return "" if given is None or repr(given) in str(error) else f" (got {given!r})"


def _not_utf8(arguments: Sequence[str]) -> str | None:
    """The first argument that is not UTF-8 text (the OS passes such bytes as surrogates), its bytes escaped."""
    for argument in arguments:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = argument.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raw = argument.encode("utf-8", "backslashreplace")
            return raw.decode("utf-8", "backslashreplace")
    return None


def run_app(app: typer.Typer, argv: Sequence[str] | None = None) -> int:
    """Run the CLI application and return its exit status, with parse errors as one ``error:`` line.

    Typer's standalone mode prints click's usage errors in a box with a usage line; here they are caught
    (``standalone_mode=False``) and printed as ``error: Invalid value for '--threads': ...`` instead.

    Parameters
    ----------
    app : typer.Typer
        The application.
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 for a user error, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM), or the
        status a command exited with.
    """
    # A path or name that is not UTF-8 would fail deep inside (pyarrow, SQLite, pandas): refused first, by name.
    undecodable = _not_utf8(sys.argv[1:] if argv is None else argv)
    if undecodable is not None:
        print(f"error: {undecodable}: not valid UTF-8 (paths and names are kept as UTF-8); rename it", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    main_thread = threading.current_thread() is threading.main_thread()
    # SIGTERM (a scheduler's cancel, `kill`) ends a command as Ctrl-C does: its clean-up runs, one error: line.
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    try:
        return _run_app(app, argv)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _run_app(app: typer.Typer, argv: Sequence[str] | None) -> int:
    try:
        with warnings.catch_warnings():
            # Also for warnings raised while a command module loads, before its decorator runs.
            warnings.showwarning = _show_warning
            result = app(args=None if argv is None else list(argv), prog_name="gengen", standalone_mode=False)
    except typer.TyperException as error:
        # Typer vendors click: its usage errors (bad option value, missing argument, unknown option) derive
        # from TyperException and carry click's one-sentence message.
        context = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
            # `gengen` alone asks for the overview, which is not an error. The error was built from
            # ctx.get_help(), which with rich has printed the help already (and returned ""); without rich the
            # help is the error's message.
            overview = error.format_message() if hasattr(error, "format_message") else ""
            if overview.strip():
                print(overview)
            return 0
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        print(f"error: {one_line(message)}{_given_value(error, argv)}", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    except KeyboardInterrupt as error:
        message, code = _interruption(error)
        print(f"error: {message}", file=sys.stderr)
        return code
    except typer.Abort as error:  # click's form of Ctrl-C (or SIGTERM) outside a command's own handling
        cause = error.__cause__
        message, code = _interruption(cause if isinstance(cause, KeyboardInterrupt) else KeyboardInterrupt())
        print(f"error: {message}", file=sys.stderr)
        return code
    except _user_error_types() as error:
        # A user error raised outside a decorated command (while a command module loads, say).
        print(f"error: {one_line(user_error_message(error) or str(error))}", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    return result if isinstance(result, int) else 0
