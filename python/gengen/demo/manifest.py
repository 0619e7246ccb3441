"""What ``gengen demo`` wrote, so that ``--fresh`` deletes only that.

The demo records every regular file it leaves in its folder (path, size, SHA-256) in :data:`MANIFEST_NAME`
when it ends, failed or not. ``--fresh`` (:func:`remove_demo_folder`) deletes a folder only when every entry in
it is a file of that list, unchanged: anything else (a file the user put there, an edited ``study.toml``, a
symbolic link, a FIFO) makes it refuse in one line naming the first such entry, before anything is deleted. It
never deletes through a symbolic link, the working folder, or a folder that holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from gengen.errors import InputError

__all__ = ["MANIFEST_NAME", "foreign_entries", "record_demo_files", "remove_demo_folder"]

MANIFEST_NAME = "gengen-demo-files.json"
"""The list of files the demo wrote, in the demo's folder."""

_MANIFEST_FORMAT = "gengen demo files 1"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entries(out: Path) -> list[tuple[str, os.stat_result]]:
    """Every entry under ``out`` but folders (relative POSIX path, ``lstat``), sorted; links are not followed."""
    found = []
    for folder, subfolders, files in os.walk(out, followlinks=False):
        here = Path(folder)
        names = list(files) + [name for name in subfolders if (here / name).is_symlink()]
        for name in names:
            path = here / name
            found.append((path.relative_to(out).as_posix(), path.lstat()))
    return sorted(found)


def _recorded(out: Path) -> dict[str, dict[str, object]]:
    """The manifest's files (empty when there is no readable manifest of this format)."""
    path = out / MANIFEST_NAME
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size > 64 * 2**20:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _MANIFEST_FORMAT or not isinstance(data.get("files"), dict):
        return {}
    return {name: entry for name, entry in data["files"].items() if isinstance(entry, dict)}


def foreign_entries(out: Path) -> list[str]:
    """Entries under ``out`` the demo cannot prove it wrote (relative paths, sorted).

    An entry is the demo's when it is a regular file listed in the manifest with the same size and SHA-256; the
    manifest itself is the demo's when it is a regular file. Everything else is foreign.

    Parameters
    ----------
    out : Path
        The demo's folder.

    Returns
    -------
    list of str
        The foreign entries, as paths relative to ``out``.
    """
    files = _recorded(out)
    foreign = []
    for name, status in _entries(out):
        if not stat.S_ISREG(status.st_mode):
            foreign.append(name)
        elif name == MANIFEST_NAME:
            continue
        elif (entry := files.get(name)) is None or entry.get("size") != status.st_size:
            foreign.append(name)
        elif entry.get("sha256") != _sha256(out / name):
            foreign.append(name)
    return foreign


def record_demo_files(out: Path, foreign: set[str] | frozenset[str] = frozenset()) -> None:
    """Write the manifest of ``out``: every regular file in it but those in ``foreign`` (found there before
    the demo ran, and not the demo's to delete).

    Parameters
    ----------
    out : Path
        The demo's folder.
    foreign : set of str
        Relative paths that stay out of the manifest.
    """
    from gengen._files import write_text_atomic

    files = {
        name: {"size": status.st_size, "sha256": _sha256(out / name)}
        for name, status in _entries(out)
        if stat.S_ISREG(status.st_mode) and name != MANIFEST_NAME and name not in foreign
    }
    text = json.dumps({"format": _MANIFEST_FORMAT, "files": files}, indent=1, sort_keys=True) + "\n"
    write_text_atomic(out / MANIFEST_NAME, text)


def remove_demo_folder(out: Path) -> None:
    """Delete the demo's folder ``out`` (``gengen demo --fresh``) when it holds only files the demo wrote.

    Parameters
    ----------
    out : Path
        The folder, as the user named it (messages name it so).

    Raises
    ------
    InputError
        ``out`` is a symbolic link, not a folder, the working folder or one that holds it, or it holds an
        entry the demo did not write (named); nothing is deleted then.
    """
    if out.is_symlink():
        raise InputError(
            f"{out}: a symbolic link (to {os.readlink(out)}); --fresh does not delete through a link: "
            "give the folder itself"
        )
    if not out.is_dir():
        raise InputError(f"{out}: not a folder; --fresh deletes only a folder gengen demo wrote")
    real, working = Path(os.path.realpath(out)), Path(os.path.realpath(Path.cwd()))
    if working == real or working.is_relative_to(real):
        raise InputError(
            f"{out}: is the working folder{'' if working == real else ' or holds it'}; --fresh does not delete "
            "it: give --out a folder below it"
        )
    if not any(out.iterdir()):
        return
    foreign = foreign_entries(out)
    if foreign:
        why = "no list of the files the demo wrote" if not _recorded(out) else "not written by gengen demo"
        raise InputError(
            f"{out / foreign[0]}: {why} ({len(foreign)} such entr{'y' if len(foreign) == 1 else 'ies'} in {out}); "
            "--fresh deletes only a folder gengen demo wrote: choose another --out, or delete it yourself"
        )
    for name, _ in _entries(out):
        (out / name).unlink()
    for folder, _, _ in sorted(os.walk(out), key=lambda item: -len(Path(item[0]).parts)):
        os.rmdir(folder)
