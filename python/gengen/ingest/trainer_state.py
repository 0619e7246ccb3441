"""Hugging Face ``trainer_state.json``: the ``eval_*`` entries of ``log_history``.

Each ``log_history`` entry holding ``eval_*`` keys is one evaluation at ``entry["step"]`` (``entry["epoch"]``
kept as the epoch). The Trainer names the keys ``eval_<metric>`` for one evaluation set and
``eval_<name>_<metric>`` for a dict of sets; the set names are those ``<name>`` with an ``eval_<name>_loss``
key (the Trainer always logs the loss). Keys of the first kind go to test set ``eval``. A ``pattern`` with
groups ``testset`` and ``metric`` replaces this rule (matched against the whole key; keys that do not match
are skipped). Timing keys (``eval_runtime``, ``..._per_second``...) are not scores.

The model is ``--model``, else the name of the training output folder (the folder holding the file, or the
one above a ``checkpoint-N`` folder).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import InputError
from gengen.ingest._common import IngestOptions, Parsed, number, pattern_groups
from gengen.store.database import DEFAULT_RUN, shown

__all__ = ["looks_like", "parse"]

_TIMING = (
    "runtime",
    "samples_per_second",
    "steps_per_second",
    "jit_compilation_time",
    "model_preparation_time",
)
_CHECKPOINT = re.compile(r"checkpoint[-_]\d+")
DEFAULT_TESTSET = "eval"


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a Hugging Face ``trainer_state.json``."""
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def _model(path: Path, options: IngestOptions) -> str:
    if options.model:
        return options.model
    folder = path.resolve().parent
    if _CHECKPOINT.fullmatch(folder.name) and folder.parent.name:
        folder = folder.parent
    return folder.name


def _split_key(key: str, sets: list[str], pattern: re.Pattern[str] | None) -> tuple[str, str] | None:
    """``(testset, metric)`` of an ``eval_*`` key, or None for keys that are not scores."""
    if pattern is not None:
        match = pattern.fullmatch(key)
        if match is None:
            return None
        testset_group, metric_group = pattern_groups(pattern)
        testset, metric = match.group(testset_group), match.group(metric_group) if metric_group else None
        if not testset or not metric:
            return None
    else:
        rest = key[len("eval_") :]
        testset, metric = DEFAULT_TESTSET, rest
        for name in sets:
            if rest.startswith(f"{name}_"):
                testset, metric = name, rest[len(name) + 1 :]
                break
    if metric in _TIMING:
        return None
    return testset, metric


def parse(path: Path, data: dict[str, Any], options: IngestOptions) -> Parsed:
    """Read the evaluation scores of a ``trainer_state.json``."""
    model = _model(path, options)
    run = options.run or DEFAULT_RUN
    pattern = re.compile(options.pattern) if options.pattern else None
    history = data["log_history"]
    keys = {k for entry in history if isinstance(entry, dict) for k in entry if k.startswith("eval_")}
    sets = sorted(
        (k[len("eval_") : -len("_loss")] for k in keys if k.endswith("_loss") and k != "eval_loss"),
        key=len,
        reverse=True,
    )
    records: list[dict[str, Any]] = []
    sources: list[str] = []
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise InputError(f"{path}: key log_history[{index}]: expected an object, got {type(entry).__name__}")
        scores = [k for k in entry if k.startswith("eval_")]
        if not scores:
            continue
        if "step" not in entry:
            raise InputError(f"{path}: key log_history[{index}]: an evaluation without 'step'")
        step = entry["step"]
        if isinstance(step, bool) or not isinstance(step, int):
            raise InputError(f"{path}: key log_history[{index}].step: {shown(step)} is not an integer")
        epoch = number(entry.get("epoch"), f"{path}: key log_history[{index}].epoch")
        for key in scores:
            split = _split_key(key, sets, pattern)
            if split is None:
                continue
            where = f"{path}: key log_history[{index}].{key}"
            records.append(
                {
                    "model": model,
                    "run": run,
                    "step": step,
                    "epoch": epoch,
                    "testset": split[0],
                    "metric": split[1],
                    "value": number(entry[key], where),
                }
            )
            sources.append(where)
    manifest = {
        "format": "trainer-state",
        "trainer_state": {k: v for k, v in data.items() if k != "log_history"},
    }
    return Parsed(pd.DataFrame.from_records(records), sources, {(model, run): manifest})
