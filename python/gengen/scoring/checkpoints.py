"""The checkpoints of a series: where each is loaded from, the step it stands for, and a check of its weights.

Nothing here imports torch: a series is found and its files checked before any model is loaded, so a damaged
checkpoint is refused in one line naming the file before a store is opened or another checkpoint is scored.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gengen.errors import ConfigError, InputError

__all__ = ["SAFETENSORS_MAX_HEADER", "Checkpoint", "check_safetensors", "check_weights", "find_checkpoints"]

SAFETENSORS_MAX_HEADER = 100_000_000
"""The largest header (bytes) a safetensors file may have: the safetensors library's own limit."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series: where to load it from and the training step it stands for."""

    path: str
    step: int
    revision: str | None = None


_STEP = re.compile(r"(\d+)(?!.*\d)")


def _step_of(label: str) -> int:
    found = _STEP.search(label)
    if found is None:
        raise InputError(f"checkpoint {label!r}: no step number in its name (expected e.g. 'checkpoint-1000')")
    return int(found.group(1))


def _is_checkpoint(path: Path) -> bool:
    """A model folder: full weights (``config.json``) or a peft adapter (``adapter_config.json``)."""
    return (path / "config.json").is_file() or (path / "adapter_config.json").is_file()


def find_checkpoints(
    paths: Sequence[str | Path] = (), *, model: str | None = None, revisions: Sequence[str] = ()
) -> list[Checkpoint]:
    """The checkpoints to score, sorted by step.

    Parameters
    ----------
    paths : sequence of path
        Checkpoint folders (holding a ``config.json``, or a LoRA adapter's ``adapter_config.json``), or
        folders whose subfolders are checkpoints (``checkpoint-500``, ``step1000``, ...). The step is the last
        number in the folder's name.
    model : str, optional
        A hub id (or local folder) whose ``revisions`` are the checkpoints.
    revisions : sequence of str
        Revisions of ``model`` such as ``step1000``; the step is the last number in each.

    Returns
    -------
    list of Checkpoint
        Sorted by step.

    Raises
    ------
    InputError
        A path that is not a checkpoint folder nor holds one, a name without a step number, a step twice.
    ConfigError
        ``revisions`` without ``model``.
    """
    found: list[Checkpoint] = []
    for raw in paths:
        path = Path(raw)
        if _is_checkpoint(path):
            found.append(Checkpoint(str(path), _step_of(path.name)))
        elif path.is_dir():
            subs = [p for p in sorted(path.iterdir()) if _is_checkpoint(p)]
            if not subs:
                raise InputError(f"{path}: no checkpoint folder (with a config.json or adapter_config.json) in it")
            found.extend(Checkpoint(str(p), _step_of(p.name)) for p in subs)
        else:
            raise InputError(f"{path}: no such checkpoint folder")
    if revisions and model is None:
        raise ConfigError("--revisions needs --model (the hub id the revisions belong to)")
    for revision in revisions:
        found.append(Checkpoint(str(model), _step_of(revision), revision))
    if model is not None and not revisions:
        found.append(Checkpoint(str(model), 0))
    steps = [c.step for c in found]
    if len(set(steps)) != len(steps):
        raise InputError(f"checkpoints: step {sorted(s for s in steps if steps.count(s) > 1)[0]} appears twice")
    return sorted(found, key=lambda c: c.step)


def _offsets_fit(entry: object, data_bytes: int) -> bool:
    """A header entry's ``data_offsets`` are ``[begin, end]`` inside the file's data."""
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2):
        return False
    if not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        return False
    return 0 <= offsets[0] <= offsets[1] <= data_bytes


def check_safetensors(path: str | Path) -> None:
    """Refuse a safetensors file whose header cannot be right, in one line naming the file.

    The format is an 8-byte little-endian header length, that many bytes of JSON (tensor name -> dtype, shape,
    ``data_offsets``), then the tensors' data. A file cut short, a header length beyond the safetensors limit
    (:data:`SAFETENSORS_MAX_HEADER`) or beyond the file, a header that is not a JSON object, or a tensor whose
    data lie outside the file would otherwise fail inside the model loader with a traceback.

    Parameters
    ----------
    path : str or Path
        A ``*.safetensors`` file.

    Raises
    ------
    InputError
        The file is damaged (truncated, an oversized or unreadable header), or cannot be read.
    """
    path = Path(path)
    damaged = f"{path}: a damaged safetensors file"
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise InputError(f"{damaged} (truncated: {size} bytes, shorter than its 8-byte header length)")
            length = int.from_bytes(prefix, "little")
            if length > SAFETENSORS_MAX_HEADER:
                raise InputError(
                    f"{damaged} (its header length {length:,} bytes is above the format's limit of "
                    f"{SAFETENSORS_MAX_HEADER:,})"
                )
            if 8 + length > size:
                raise InputError(f"{damaged} (truncated: its header is {length:,} bytes, the file {size:,} bytes)")
            raw = handle.read(length)
    except OSError as error:
        raise InputError(f"{path}: cannot read it ({error.strerror or type(error).__name__})") from None
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(f"{damaged} (its header is not valid JSON)") from None
    if not isinstance(header, dict):
        raise InputError(f"{damaged} (its header is not a JSON object of tensors)")
    data_bytes = size - 8 - length
    for name, entry in header.items():
        if name != "__metadata__" and not _offsets_fit(entry, data_bytes):
            raise InputError(f"{damaged} (tensor {name[:100]!r}: its data lie outside the file; truncated?)")


def check_weights(checkpoints: Sequence[Checkpoint]) -> None:
    """Check the safetensors files of every local checkpoint (:func:`check_safetensors`) before any is loaded.

    Hub revisions are not checked here (their files are not on disk yet).

    Parameters
    ----------
    checkpoints : sequence of Checkpoint

    Raises
    ------
    InputError
        The first damaged file, named.
    """
    for checkpoint in checkpoints:
        folder = Path(checkpoint.path)
        if checkpoint.revision is None and folder.is_dir():
            for file in sorted(folder.glob("*.safetensors")):
                check_safetensors(file)
