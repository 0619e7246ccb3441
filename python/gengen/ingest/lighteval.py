"""lighteval results files (``results_<date>.json``), one per checkpoint: a format of their own.

A lighteval file looks like lm-evaluation-harness v0.3 (a ``results`` object of tasks) but is not one:
``{"config_general": {"model_name": "org/m", "model_revision"?: "step1000", ...}, "results":
{"leaderboard|arc:challenge|25": {"acc": 0.61, "acc_stderr": 0.01, ...}, "all": {...}}, ...}``. Each task key
is ``suite|task|shots``: the task is the test set (``suite|task`` when two suites share a task name) and
``shots`` the ``shots`` column. ``all`` is lighteval's average of the tasks beside it, not a test set: it is
left out with a note. Every other key of a task is a metric but ``<metric>_stderr``, the ``stderr`` of
``<metric>``.

The model is ``--model``, else the last part of ``config_general.model_name``; the step is ``--step``,
``--step-pattern``, ``config_general.model_revision`` (``stepN``), else ``stepN`` in the file name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import InputError
from gengen.ingest._common import IngestOptions, Parsed, number, step_from_pattern
from gengen.store.database import DEFAULT_RUN, shown

__all__ = ["looks_like", "parse"]

AGGREGATE = "all"
"""lighteval's average over the tasks of a file (left out)."""

_TASK_KEY = re.compile(r"^(?P<suite>[^|]+)\|(?P<task>[^|]+)\|(?P<shots>\d+)$")
_REVISION_STEP = re.compile(r"^step[-_]?(\d+)$", re.IGNORECASE)
_STEP_IN_NAME = re.compile(r"(?:^|[^a-z])step[-_]?(\d+)(?!.*step[-_]?\d)", re.IGNORECASE)


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a lighteval results file: ``config_general``, or task keys ``suite|task|shots``."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        return False
    tasks = [key for key in data["results"] if key != AGGREGATE]
    return "config_general" in data or (bool(tasks) and all(_TASK_KEY.match(str(key)) for key in tasks))


def _general(data: dict[str, Any]) -> dict[str, Any]:
    general = data.get("config_general")
    return general if isinstance(general, dict) else {}


def _model(path: Path, data: dict[str, Any], options: IngestOptions) -> str:
    if options.model:
        return options.model
    name = _general(data).get("model_name")
    if isinstance(name, str) and name.strip("/ "):
        return name.strip("/ ").rsplit("/", 1)[-1]
    raise InputError(option="model", problem=f"is needed for {path}: no config_general.model_name")


def _step(path: Path, data: dict[str, Any], options: IngestOptions) -> int:
    if options.step is not None:
        return int(options.step)
    if options.step_pattern:
        return step_from_pattern(path, options.step_pattern)
    found = _REVISION_STEP.match(str(_general(data).get("model_revision") or "")) or _STEP_IN_NAME.search(path.stem)
    if found:
        return int(found.group(1))
    raise InputError(
        option="step",
        problem=f"(or a step pattern) is needed for {path}: no config_general.model_revision stepN and no stepN "
        "in the file name",
    )


def parse(path: Path, data: dict[str, Any], options: IngestOptions) -> Parsed:
    """Read a lighteval results file (see the module docstring)."""
    model, step = _model(path, data, options), _step(path, data, options)
    run = options.run or DEFAULT_RUN
    results = data["results"]
    tasks: list[tuple[str, str, int, dict[str, Any]]] = []
    for key, metrics in results.items():
        if key == AGGREGATE:
            continue
        found = _TASK_KEY.match(str(key))
        if found is None:
            raise InputError(
                f"{path}: key results.{shown(key)}: not a lighteval task key 'suite|task|shots' (e.g. "
                "'leaderboard|arc:challenge|25')"
            )
        if not isinstance(metrics, dict):
            raise InputError(f"{path}: key results.{key}: expected an object of metrics")
        tasks.append((found.group("suite"), found.group("task"), int(found.group("shots")), metrics))
    suites_of: dict[str, set[str]] = {}
    for suite, task, _, _ in tasks:
        suites_of.setdefault(task, set()).add(suite)
    records: list[dict[str, Any]] = []
    sources: list[str] = []
    for suite, task, shots, metrics in tasks:
        testset = task if len(suites_of[task]) == 1 else f"{suite}|{task}"
        for metric, raw in metrics.items():
            if metric.endswith("_stderr"):
                continue
            where = f"{path}: key results.{suite}|{task}|{shots}.{metric}"
            value = number(raw, where)
            stderr = number(metrics.get(f"{metric}_stderr"), f"{where}_stderr", missing=("N/A", "n/a", ""))
            records.append(
                {"model": model, "run": run, "step": step, "testset": testset, "metric": metric, "value": value,
                 "stderr": stderr, "shots": shots}
            )  # fmt: skip
            sources.append(where)
    notes = []
    if AGGREGATE in results:
        notes.append(f"{path}: left out results.{AGGREGATE}, lighteval's average of the {len(tasks)} tasks beside it")
    manifest = {"format": "lighteval", "config_general": _general(data)}
    return Parsed(pd.DataFrame.from_records(records), sources, {(model, run): manifest}, notes=notes)
