"""The data of the report's "Scores over training" small multiples: one series per run, on a shared axis.

Runs differ in length (a 16k-step and a 925k-step run in one study), so the axis is each run's training
progress, ``step / last step`` in [0, 1], drawn on a logarithmic scale of that fraction (checkpoints are
usually spaced logarithmically): the first and last checkpoint of every run meet at the same places. Runs
of one model share its colour (by model size) and differ by shade and dash pattern, each named in the legend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gengen.report import figures as fig
from gengen.report.order import short_labels
from gengen.report.rows import round_significant

if TYPE_CHECKING:
    from gengen.analyse.result import Analysis

#: Dash patterns (SVG ``stroke-dasharray``) of a model's first, second, … run; they repeat after the last.
DASHES = ("", "6 3", "2 2", "8 3 2 3", "1 3", "10 4")
#: Most a run's colour is lightened towards white (its last run), so that every shade stays visible.
MAX_LIGHTEN = 0.5


def training_progress(steps: np.ndarray) -> np.ndarray:
    """Each step as a fraction of the run's last step: 0 at step 0, 1 at the last checkpoint.

    Runs whose steps do not start at or above 0 are scaled from their first to their last step instead; a
    run with a single step is all 0.

    Parameters
    ----------
    steps : ndarray
        The run's checkpoint steps.

    Returns
    -------
    ndarray
        The same shape, each in [0, 1].

    Examples
    --------
    >>> training_progress(np.array([0, 1000, 16000])).tolist()
    [0.0, 0.0625, 1.0]
    """
    values = np.asarray(steps, dtype=float)
    if values.size == 0:
        return values
    low, high = float(np.min(values)), float(np.max(values))
    if low >= 0 and high > 0:
        return values / high
    if high > low:
        return (values - low) / (high - low)
    return np.zeros_like(values)


def _hex(rgb: tuple[float, ...]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(round(255 * min(max(c, 0.0), 1.0)) for c in rgb[:3]))


def run_styles(keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
    """Colour and dash pattern of every (model, run): one hue per model (viridis by model order), its runs
    lightened step by step towards white and dashed in turn (:data:`DASHES`)."""
    from matplotlib import colormaps

    models = list(dict.fromkeys(model for model, _ in keys))
    colours = colormaps["viridis"]
    runs: dict[str, list[str]] = {}
    for model, run in keys:
        runs.setdefault(model, []).append(run)
    styles = {}
    for index, model in enumerate(models):
        base = np.asarray(colours(0.85 * index / max(len(models) - 1, 1))[:3])
        count = len(runs[model])
        for turn, run in enumerate(runs[model]):
            lighten = MAX_LIGHTEN * turn / max(count - 1, 1)
            styles[(model, run)] = {
                "color": _hex(tuple(base + (1.0 - base) * lighten)),
                "dash": DASHES[turn % len(DASHES)],
            }
    return styles


def trajectory_payload(analysis: Analysis, keys: list[tuple[str, str]], order: list[str]) -> dict[str, Any]:
    """The small multiples' data: one panel per test set (ID first), one series per run on its own progress.

    Parameters
    ----------
    analysis : Analysis
        The analysis drawn.
    keys : list of (str, str)
        The runs, in model-size order.
    order : list of str
        The OOD test sets, in the heatmaps' order.

    Returns
    -------
    dict
        ``payload``: ``groups`` (per run: ``label``, ``model``, ``run``, ``color``, ``dash``, ``steps``,
        ``progress`` in [0, 1], ``last_step``) and ``panels`` (per test set: ``name``, ``label``, ``role``,
        ``ylabel``, ``series`` aligned with the groups); ``direction``: which way the metrics run.
    """
    id_name = analysis.settings["id_testset"]
    single = len({model for model, _ in keys}) == len(keys)
    tables = [analysis.wide(model, run) for model, run in keys]
    labels, _ = short_labels(order)
    labels[id_name] = id_name
    id_metric, id_sign = fig.metric_sign(analysis, "id")
    metric, sign = fig.metric_sign(analysis, "ood")
    panels = []
    for name in [id_name, *order]:
        series = [
            round_significant(table[name].to_numpy(dtype=float), 4) if name in table.columns else None
            for table in tables
        ]
        ylabel = fig.direction_label(id_metric, id_sign) if name == id_name else fig.direction_label(metric, sign)
        panels.append(
            {
                "name": name,
                "label": labels.get(name, name),
                "role": "ID" if name == id_name else "OOD",
                "ylabel": ylabel,
                "series": series,
            }
        )
    styles = run_styles(keys)
    groups = []
    for (model, run), table in zip(keys, tables, strict=True):
        steps = table.index.to_numpy(dtype=float)
        groups.append(
            {
                "label": model if single else f"{model} / {run}",
                "model": model,
                "run": run,
                **styles[(model, run)],
                "steps": [float(step) for step in steps],
                "progress": [float(value) for value in training_progress(steps)],
                "last_step": float(steps.max()) if steps.size else 0.0,
            }
        )
    direction = f"OOD: {fig.direction_label(metric, sign)}."
    if (id_metric, id_sign) != (metric, sign):
        direction += f" ID ({id_name}): {fig.direction_label(id_metric, id_sign)}."
    return {"payload": {"groups": groups, "panels": panels}, "direction": direction}
