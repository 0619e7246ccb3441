"""A run's checkpoints: listing them safely, saving one atomically, reading its trainer state without running code.

A checkpoint is the folder ``<run folder>/checkpoint-<step>``: a loadable model with its tokenizer plus
``trainer_state.pt`` (optimizer, scheduler, grad scaler and RNG states, the step and the tokens seen). Every
entry named ``checkpoint-*`` (or the temporary ``.checkpoint-*.tmp``) must be a real folder inside the run
folder: a symbolic link is refused before any work starts (:func:`check_run_folders`), so nothing is read
from, written into or deleted through a link that leads elsewhere.

torch is imported only by the functions that save or load states.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gengen.errors import InputError

if TYPE_CHECKING:
    from gengen.study.paths import RunPaths

__all__ = [
    "CHECKPOINT_PREFIX",
    "STATE_FILE",
    "STATE_KEYS",
    "check_run_folders",
    "list_checkpoints",
    "load_trainer_state",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]

CHECKPOINT_PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.pt"


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise InputError(
            f"{path}: a symbolic link (to {os.readlink(path)}), not a checkpoint folder; gengen reads and writes "
            "checkpoints only inside the run folder: remove the link (or move the real folder there)"
        )


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The checkpoints in ``folder`` as (step, checkpoint folder), by step; only those with a trainer state.

    ``folder`` is a run's :attr:`~gengen.study.paths.RunPaths.checkpoints` (its run folder).

    Raises
    ------
    InputError
        An entry named like a checkpoint (or its temporary folder) is a symbolic link.
    """
    found = []
    if folder.is_dir():
        for path in folder.iterdir():
            name = path.name.lstrip(".")
            if not name.startswith(CHECKPOINT_PREFIX):
                continue
            _refuse_link(path)
            suffix = path.name[len(CHECKPOINT_PREFIX) :]
            if path.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit() and (path / STATE_FILE).is_file():
                found.append((int(suffix), path))
    return sorted(found)


def check_run_folders(paths: Iterable[RunPaths]) -> None:
    """Before anything loads: no run's checkpoints folder holds a linked checkpoint.

    Parameters
    ----------
    paths : iterable of RunPaths
        The runs' paths as planned (:meth:`gengen.study.paths.RunPaths.for_run`, which refuses a run folder
        leading outside the study's output).

    Raises
    ------
    InputError
        A checkpoint entry is a symbolic link, naming the path.
    """
    for run in paths:
        list_checkpoints(run.checkpoints)


def _remove(path: Path) -> None:
    """Delete a checkpoint folder, or only the link when it is one (never what a link points at)."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def rng_state() -> dict[str, Any]:
    import torch

    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss], "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    folder: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    tokens: int,
    keep: str,
    model_state: dict[str, Any] | None = None,
    optimizer_state: dict[str, Any] | None = None,
) -> None:
    """Write ``checkpoint-<step>`` atomically (a temporary folder renamed), then prune older ones.

    ``folder`` is the run's :attr:`~gengen.study.paths.RunPaths.checkpoints`.

    The folder is a loadable model with its tokenizer (so ``gengen score`` can read it alone) plus
    ``trainer_state.pt``: optimizer, scheduler, grad scaler and RNG states, the step and the tokens seen, as
    tensors and plain containers only, so that :func:`load_trainer_state` reads it without running code.
    ``model_state`` and ``optimizer_state`` are the full states gathered from a sharded (FSDP) model.
    """
    import torch

    final = folder / f"{CHECKPOINT_PREFIX}{step}"
    tmp = folder / f".{CHECKPOINT_PREFIX}{step}.tmp"
    _remove(tmp)
    if model_state is not None:
        model.save_pretrained(tmp, state_dict=model_state)
    else:
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "tokens": tokens,
        "optimizer": optimizer_state if optimizer_state is not None else optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": rng_state(),
    }
    torch.save(state, tmp / STATE_FILE)
    _remove(final)
    os.replace(tmp, final)
    if keep != "all":
        for old_step, path in list_checkpoints(folder):
            if old_step < step:
                _remove(path)


STATE_KEYS = ("step", "tokens", "optimizer", "scheduler", "scaler", "rng")


def load_trainer_state(path: Path) -> dict[str, Any]:
    """Read a checkpoint's ``trainer_state.pt`` without ever running code from it.

    The file is unpickled by torch's ``weights_only`` loader, which builds tensors and plain containers and
    refuses anything else, so a planted file (anyone who can write the output folder can plant one) cannot
    run code as the user.

    Raises
    ------
    InputError
        The file holds something else than a trainer state (objects, code, a truncated file), in one line.
    """
    import torch

    refuse = f"{path}: refused as resume state"
    advice = "delete this checkpoint folder to resume from an earlier one"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # whatever the unpickler says, the file is not ours
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{refuse} (not plain tensors and containers: {reason[:200]}); {advice}") from None
    if not isinstance(state, dict) or any(key not in state for key in STATE_KEYS):
        raise InputError(f"{refuse} (expected a table with {', '.join(STATE_KEYS)}); {advice}")
    for key in ("step", "tokens"):
        if isinstance(state[key], bool) or not isinstance(state[key], int) or state[key] < 0:
            raise InputError(f"{refuse} ({key!r} is {state[key]!r}, not a count); {advice}")
    return state
