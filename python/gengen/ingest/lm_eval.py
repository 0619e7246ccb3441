"""lm-evaluation-harness results files, one per checkpoint.

**v0.3** (``{"results": {task: {"acc": 0.61, "acc_stderr": 0.01, ...}}, "versions": {...}, "config":
{"model_args": "pretrained=EleutherAI/pythia-160m,revision=step1000", "num_fewshot": 0, ...}}``): every key
of a task is a metric, except ``<metric>_stderr``, which becomes the ``stderr`` of ``<metric>``.

**v0.4+** (``results_<date>.json``; ``{"results": {task: {"alias": "...", "acc,none": 0.61,
"acc_stderr,none": 0.01}}, "n-shot": {...}, "n-samples": {task: {"original": N, "effective": n}}, "config":
{...}, ...}``): metric keys are ``<metric>,<filter>``; the metric is stored as ``<metric>`` for the ``none``
filter and as ``<metric>,<filter>`` otherwise, ``<metric>_stderr,<filter>`` becomes its ``stderr`` (``"N/A"``
is missing), ``n-samples[task].effective`` its ``n_examples``. Keys without a comma (``alias``,
``sample_len``...) are descriptions, not scores. Groups listed only under ``groups`` are read too.

Standard errors are not scores: they never become a ``value`` (and never a metric of their own) but the
``stderr`` column of the score they belong to. ``num_fewshot`` is kept as an extra column.

The model is the last part of ``pretrained=`` in ``config.model_args`` (the folder above it when that is a
``checkpoint-N`` folder), else ``model_name``; ``--model`` overrides it. The step is, in order:
``--step``, ``--step-pattern``, ``revision=stepN`` in ``model_args`` (or v0.4's ``model_revision``), ``stepN``
in the file name, ``checkpoint-N`` in ``pretrained=`` or in the path; the revision and the file name must agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import InputError
from gengen.ingest._common import IngestOptions, Parsed, number, step_from_pattern
from gengen.store.database import DEFAULT_RUN, shown

__all__ = ["looks_like_v03", "looks_like_v04", "parse_v03", "parse_v04"]

_STEP_IN_NAME = re.compile(r"(?:^|[^a-z])step[-_]?(\d+)(?!.*step[-_]?\d)", re.IGNORECASE)
_CHECKPOINT = re.compile(r"checkpoint[-_](\d+)")
_REVISION_STEP = re.compile(r"^step[-_]?(\d+)$", re.IGNORECASE)
_V04_KEYS = ("n-shot", "n-samples", "configs", "higher_is_better", "group_subtasks")
_NOT_A_NUMBER = ("N/A", "n/a", "NaN", "nan", "")


def looks_like_v03(data: Any) -> bool:
    """Whether parsed JSON is an lm-evaluation-harness v0.3 results file."""
    return _has_results(data) and not looks_like_v04(data)


def looks_like_v04(data: Any) -> bool:
    """Whether parsed JSON is an lm-evaluation-harness v0.4+ results file."""
    if not _has_results(data):
        return False
    if any(key in data for key in _V04_KEYS):
        return True
    return any(isinstance(m, dict) and any("," in k for k in m) for m in data["results"].values())


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def _has_results(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("results"), dict)
        and all(isinstance(m, dict) for m in data["results"].values())
        and "log_history" not in data
    )


def model_args(config: Any) -> dict[str, str]:
    """``config.model_args`` as a dict (it is a ``k=v,k=v`` string or already a mapping)."""
    if not isinstance(config, dict):
        return {}
    raw = config.get("model_args")
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if not isinstance(raw, str):
        return {}
    pairs = (item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {key.strip(): value.strip() for key, value in pairs}


def model_name(path: Path, data: dict[str, Any], options: IngestOptions) -> str:
    """The model a results file belongs to (see the module docstring)."""
    if options.model:
        return options.model
    pretrained = model_args(data.get("config")).get("pretrained") or model_args(data.get("config")).get("model")
    if pretrained:
        parts = [p for p in pretrained.rstrip("/").split("/") if p]
        while len(parts) > 1 and (_CHECKPOINT.fullmatch(parts[-1]) or _REVISION_STEP.match(parts[-1])):
            parts.pop()
        return parts[-1]
    if isinstance(data.get("model_name"), str) and data["model_name"]:
        return data["model_name"].rstrip("/").rsplit("/", 1)[-1]
    raise InputError(option="model", problem=f"is needed for {path}: no 'pretrained=' in config.model_args")


def checkpoint_step(path: Path, data: dict[str, Any], options: IngestOptions) -> int:
    """The checkpoint step of a results file (see the module docstring)."""
    if options.step is not None:
        return int(options.step)
    if options.step_pattern:
        return step_from_pattern(path, options.step_pattern)
    args = model_args(data.get("config"))
    revision = args.get("revision") or str(_mapping(data.get("config")).get("model_revision") or "")
    from_revision = _REVISION_STEP.match(revision)
    from_name = _STEP_IN_NAME.search(path.stem)
    if from_revision and from_name and int(from_revision.group(1)) != int(from_name.group(1)):
        raise InputError(
            option="step",
            problem=f"(or a step pattern) is needed for {path}: config.model_args revision={shown(revision)} "
            f"disagrees with step {from_name.group(1)} in the file name",
        )
    for found in (from_revision, from_name, _CHECKPOINT.search(args.get("pretrained", ""))):
        if found:
            return int(found.group(1))
    for part in reversed(path.parent.parts):
        found = _CHECKPOINT.fullmatch(part) or _REVISION_STEP.match(part)
        if found:
            return int(found.group(1))
    raise InputError(
        option="step",
        problem=f"(or a step pattern) is needed for {path}: no revision=stepN in config.model_args and no stepN "
        "in the file name",
    )


def _task_metrics(path: Path, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``results`` (plus ``groups`` not already in it), checked to be objects of objects."""
    tasks: dict[str, dict[str, Any]] = {}
    for section in ("results", "groups"):
        entries = data.get(section) or {}
        if not isinstance(entries, dict):
            raise InputError(f"{path}: key {shown(section)}: expected an object of tasks, got {type(entries).__name__}")
        for task, metrics in entries.items():
            if not isinstance(metrics, dict):
                raise InputError(f"{path}: key {section}.{task}: expected an object of metrics")
            tasks.setdefault(task, metrics)
    return tasks


def parse_v03(path: Path, data: dict[str, Any], options: IngestOptions) -> Parsed:
    """Read an lm-evaluation-harness v0.3 results file."""
    model = model_name(path, data, options)
    run = options.run or DEFAULT_RUN
    step = checkpoint_step(path, data, options)
    config = _mapping(data.get("config"))
    fewshot = config.get("num_fewshot")
    records: list[dict[str, Any]] = []
    sources: list[str] = []
    for task, metrics in _task_metrics(path, data).items():
        for key, raw in metrics.items():
            if key.endswith("_stderr"):
                continue
            where = f"{path}: key results.{task}.{key}"
            value = number(raw, where)
            stderr = number(
                metrics.get(f"{key}_stderr"),
                f"{path}: key results.{task}.{key}_stderr",
                missing=_NOT_A_NUMBER,
            )
            records.append(
                {
                    "model": model,
                    "run": run,
                    "step": step,
                    "testset": task,
                    "metric": key,
                    "value": value,
                    "stderr": stderr,
                    "num_fewshot": fewshot,
                }
            )
            sources.append(where)
    manifest = {"format": "lm-eval-v0.3", "config": config, "versions": data.get("versions")}
    return Parsed(pd.DataFrame.from_records(records), sources, {(model, run): manifest})


def parse_v04(path: Path, data: dict[str, Any], options: IngestOptions) -> Parsed:
    """Read an lm-evaluation-harness v0.4+ results file."""
    model = model_name(path, data, options)
    run = options.run or DEFAULT_RUN
    step = checkpoint_step(path, data, options)
    shots = _mapping(data.get("n-shot"))
    samples = _mapping(data.get("n-samples"))
    records: list[dict[str, Any]] = []
    sources: list[str] = []
    for task, metrics in _task_metrics(path, data).items():
        counts = _mapping(samples.get(task))
        n_examples = counts.get("effective", counts.get("original"))
        for key, raw in metrics.items():
            if "," not in key:
                continue
            metric, filter_name = key.split(",", 1)
            if metric.endswith("_stderr"):
                continue
            where = f"{path}: key results.{task}.{key}"
            value = number(raw, where)
            stderr_key = f"{metric}_stderr,{filter_name}"
            stderr = number(metrics.get(stderr_key), f"{path}: key results.{task}.{stderr_key}", missing=_NOT_A_NUMBER)
            records.append(
                {
                    "model": model,
                    "run": run,
                    "step": step,
                    "testset": task,
                    "metric": metric if filter_name == "none" else key,
                    "value": value,
                    "stderr": stderr,
                    "n_examples": n_examples,
                    "num_fewshot": shots.get(task),
                }
            )
            sources.append(where)
    keep = ("config", "versions", "n-shot", "git_hash", "date", "model_name", "transformers_version")
    manifest = {"format": "lm-eval-v0.4", **{k: data[k] for k in keep if k in data}}
    return Parsed(pd.DataFrame.from_records(records), sources, {(model, run): manifest})
