"""The data of the report's "Scores over training" small multiples: one series per run, on a shared axis.

Runs differ in length (a 16k-step and a 925k-step run in one study), so the axis is each run's training
progress, ``step / last step`` in [0, 1], drawn on a logarithmic scale of that fraction (checkpoints are
usually spaced logarithmically): the first and last checkpoint of every run meet at the same places. Runs
of one model share its colour (by model size) and differ by shade and dash pattern, each named in the legend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.report import figures as fig
from gengen.report.order import group_key, short_labels
from gengen.report.rows import round_significant

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    id_name = analysis.settings.id_testset
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


#: Panels of the static progress figure: ID and the OOD test sets whose scores move most.
PROGRESS_PANELS = 8
#: Matplotlib's dash tuples for :data:`DASHES` (on/off lengths in points).
_MPL_DASHES = tuple((0, tuple(float(n) for n in dash.split())) if dash else "solid" for dash in DASHES)


def _progress_axis(p: np.ndarray) -> np.ndarray:
    return np.log10(1.0 + 999.0 * np.clip(p, 0.0, None)) / 3.0


def _progress_value(x: np.ndarray) -> np.ndarray:
    return (10.0 ** (3.0 * np.asarray(x)) - 1.0) / 999.0


@fig.literal
def progress_figure(analysis: Analysis, testsets: list[str] | None = None) -> Figure:
    """Scores over training of every run on its training progress, one panel per test set (ID first).

    Parameters
    ----------
    analysis : Analysis
        The analysis drawn.
    testsets : list of str, optional
        The OOD test sets drawn (default the :data:`PROGRESS_PANELS` - 1 whose scores move most).

    Returns
    -------
    matplotlib.figure.Figure
        One line per run: x is ``step / the run's last step`` (as on the page: 0, then 0.1% to 100% evenly
        spaced on a log scale), colour by model,
        shade and dash by run, each run named in the legend.
    """
    from matplotlib.figure import Figure as MplFigure

    keys = sorted(analysis.groups("run"), key=lambda key: group_key(*key))
    order = list(analysis.settings.ood_resolved)
    if testsets is None:
        tables = [analysis.wide(*key) for key in keys]
        spans = pd.concat([table[[name for name in order if name in table]] for table in tables])
        testsets = fig.top_moving(spans, list(spans.columns), PROGRESS_PANELS - 1) if keys else []
    data = trajectory_payload(analysis, keys, testsets)["payload"]
    columns = min(len(data["panels"]), 4)
    lines = -(-len(data["panels"]) // max(columns, 1))
    figure = MplFigure(figsize=(3.2 * columns + 2.6, 2.6 * lines + 0.6), layout="constrained")
    axes = figure.subplots(lines, columns, squeeze=False).ravel()
    for ax, panel in zip(axes, data["panels"], strict=False):
        for group, values in zip(data["groups"], panel["series"], strict=True):
            if values is None:
                continue
            progress = np.asarray(group["progress"], dtype=float)
            style = _MPL_DASHES[DASHES.index(group["dash"])]
            ax.plot(progress, np.asarray(values, dtype=float), color=group["color"], linestyle=style,
                    linewidth=1.3, label=group["label"])  # fmt: skip
        # The page's axis: log10(1 + 999 p) / 3, so that 0 stays 0 and 0.1% … 100% are evenly spaced.
        ax.set_xscale("function", functions=(_progress_axis, _progress_value))
        ax.set_xlim(0.0, 1.0)
        ax.set_xticks([0.0, 0.01, 0.1, 1.0], labels=["0", "1%", "10%", "100%"])
        ax.set_title(panel["label"] + (" (ID)" if panel["role"] == "ID" else ""), fontsize=9)
        ax.set_xlabel("training progress (step / last step)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(data["panels"]) :]:
        ax.set_axis_off()
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize=8)
    return figure
