"""Reading gengen's own output files (an analysis folder, a comparison) with one clear error per bad file, and
keeping what gengen writes inside the folder it writes to.

A truncated ``summary.json``, a damaged ``pairs.parquet`` or an empty CSV raise
:class:`gengen.errors.InputError` naming the file and the problem, instead of the parser's own exception
(which names neither the file nor what to do). :func:`inside` resolves a path gengen is about to write under a
study, store or analysis folder and refuses one that leaves the folder (a symbolic link to elsewhere, ``..``);
:func:`atomic_target` writes a file through a temporary one renamed into place, so that a failure never leaves
half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import GengenError, InputError

__all__ = ["atomic_target", "inside", "read_csv", "read_json", "read_parquet", "write_text_atomic"]


def inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """``path`` (under the folder ``root``), checked to resolve inside ``root`` before gengen writes it.

    ``root`` itself may be a symbolic link (the user chose it); what lies under it may not lead out of it: a
    ``runs/`` or ``figures/`` that links elsewhere, a ``gengen.sqlite`` that links (or dangles) elsewhere, a
    ``..`` in a name. Every symbolic link on the way is followed, dangling ones included.

    Parameters
    ----------
    root : path
        The folder the path must stay in.
    path : path
        A path under ``root``: absolute, or relative to ``root`` (not to the working folder: pass
        ``"figures"``, not ``root / "figures"`` when ``root`` is relative).

    Returns
    -------
    Path
        ``path`` as given (joined to ``root`` when relative), for the caller to write.

    Raises
    ------
    InputError
        ``path`` resolves outside ``root``; the message names the path and where it leads.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> inside(root, "figures/a.png") == root / "figures" / "a.png"
    True
    >>> os.symlink("/tmp", root / "figures")
    >>> try:
    ...     inside(root, "figures/a.png")
    ... except InputError as error:
    ...     print(str(error).split(" (to ")[1])
    /tmp/a.png, through a symbolic link); gengen writes only inside the folder
    >>> os.unlink(root / "figures"); os.rmdir(root)
    """
    base = Path(os.path.realpath(root))
    given = Path(path) if Path(path).is_absolute() else Path(root) / path
    target = Path(os.path.realpath(given))
    if target == base or target.is_relative_to(base):
        return given
    how = "through a symbolic link" if ".." not in given.parts else "through '..'"
    raise InputError(f"{given}: leads outside {root} (to {target}, {how}); gengen writes only inside the folder")


def check_replaceable(path: str | os.PathLike[str], writer: str, example: str = "") -> os.stat_result | None:
    """Refuse a path that a command would replace when replacing it destroys what the user did not mean to:
    a folder, a device, FIFO or socket, a read-only file. Returns the file's status (None: nothing there).

    Parameters
    ----------
    path : path
        The file the command writes (as the user gave it: the message names it so).
    writer : str
        The command, for the message (``"export"``, ``"the report"``).
    example : str
        A file name to suggest when ``path`` is a folder.

    Returns
    -------
    os.stat_result or None
        The status of the file the path resolves to, or None when there is none.

    Raises
    ------
    GengenError
        The path is a folder, not a regular file, or read-only.
    """
    real = os.path.realpath(path)
    try:
        status = os.stat(real)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(status.st_mode):
        raise GengenError(f"{path}: is a directory, expected a file name{f' (e.g. {example})' if example else ''}")
    if not stat.S_ISREG(status.st_mode):
        raise GengenError(f"{path}: not a regular file (a device, FIFO or socket); {writer} does not replace it")
    if not status.st_mode & 0o222 or not os.access(real, os.W_OK):
        raise GengenError(f"{path}: a read-only file; {writer} does not replace it (remove it or give another path)")
    return status


@contextlib.contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` for the block to write; renamed onto ``path`` when the block ends.

    The file becomes an ordinary one (``0o666`` less the umask; ``mkstemp`` makes it private) and replaces
    ``path`` in one rename; when the block raises, it is removed and ``path`` is left as it was.

    Parameters
    ----------
    path : Path
        The file to write; its folder must exist.

    Yields
    ------
    Path
        The temporary file, in the same folder.
    """
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield Path(temporary)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`atomic_target`."""
    with atomic_target(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON document in ``path``; InputError naming the file when it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); the file is damaged") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        problem = "empty" if not text.strip() else f"line {error.lineno} column {error.colno}: {error.msg}"
        raise InputError(f"{path}: not valid JSON ({problem}); the file is truncated or damaged") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None


def read_csv(path: str | os.PathLike[str], **options: Any) -> pd.DataFrame:
    """``pandas.read_csv(path)``; InputError naming the file when it is empty, not UTF-8 or malformed."""
    path = Path(path)
    try:
        return pd.read_csv(path, **options)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file, expected a CSV table with a header row") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); save the CSV as UTF-8") from None
    except pd.errors.ParserError as error:
        raise InputError(f"{path}: malformed CSV ({_first_line(error)})") from None


def read_parquet(path: str | os.PathLike[str], **options: Any) -> pd.DataFrame:
    """``pandas.read_parquet(path)``; InputError naming the file when it is not a readable Parquet file."""
    path = Path(path)
    try:
        return pd.read_parquet(path, **options)
    except (OSError, ValueError) as error:
        # pyarrow raises ArrowInvalid (a ValueError) or ArrowIOError/OSError for truncated or foreign bytes.
        if isinstance(error, OSError) and getattr(error, "filename", None) is not None:
            raise
        raise InputError(f"{path}: not a readable Parquet file ({_first_line(error)}); it is damaged") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
