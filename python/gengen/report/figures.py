"""The report's figures, drawn with matplotlib's object API (no pyplot, no global state, any backend).

Each function returns a :class:`matplotlib.figure.Figure`; :func:`save_figure` writes it as PNG and SVG.
"""

from __future__ import annotations

import base64
import io
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

if TYPE_CHECKING:
    import pandas as pd

    from gengen.analyse.result import Analysis
    from gengen.compare import Comparison

CMAP = "RdBu_r"
PNG_DPI = 110
#: Most residual scatter panels drawn per run.
MAX_SCATTER_PAIRS = 4
#: Most OOD trajectories given a legend entry (beyond that the lines are drawn unlabelled).
MAX_LEGEND = 12


HEATMAPS_PER_ROW = 4


def _tick_size(m: int) -> float:
    """Font size of test-set labels for an m × m heatmap."""
    return float(np.clip(260.0 / max(m, 1), 3.0, 9.0))


def _group_label(model: str, run: str, single_run: bool) -> str:
    return model if single_run else f"{model} / {run}"


def draw_heatmap(ax: Axes, matrix: pd.DataFrame, marks: pd.DataFrame | None, title: str) -> QuadMesh:
    """Draw one correlation heatmap (colour scale -1…1) on ``ax``; ``marks`` (bool matrix) adds a dot."""
    values = matrix.to_numpy(dtype=float)
    m = values.shape[0]
    mesh = ax.pcolormesh(np.ma.masked_invalid(values), cmap=CMAP, vmin=-1.0, vmax=1.0, rasterized=True)
    ax.set_xlim(0, m)
    ax.set_ylim(m, 0)
    ax.set_aspect("equal")
    size = _tick_size(m)
    ax.set_xticks(np.arange(m) + 0.5, labels=list(matrix.columns), rotation=90, fontsize=size)
    ax.set_yticks(np.arange(m) + 0.5, labels=list(matrix.index), fontsize=size)
    ax.tick_params(length=0)
    if marks is not None:
        rows, cols = np.nonzero(marks.to_numpy(dtype=bool))
        ax.scatter(cols + 0.5, rows + 0.5, s=max(1.0, 900.0 / m**1.3), c="black", marker="o", linewidths=0)
    ax.set_title(title, fontsize=10)
    return mesh


def heatmaps(analysis: Analysis, value: str = "r_partial") -> Figure:
    """Per-group heatmaps of ``value`` side by side; a dot marks pairs with ``significant`` true."""
    level = "run" if analysis.groups("run") else "across_runs"
    keys = analysis.groups(level)
    single = len({model for model, _ in keys}) == len(keys)
    m = max((len(analysis.matrix(model, run, value, level)) for model, run in keys), default=1)
    panel = float(np.clip(0.11 * m + 2.5, 4.0, 9.0))
    # Wrap into rows so that many groups stay readable side by side instead of shrinking to stamps.
    columns = min(max(len(keys), 1), HEATMAPS_PER_ROW)
    rows = -(-max(len(keys), 1) // columns)
    figure = Figure(figsize=(panel * columns + 1.0, (panel + 0.4) * rows + 0.4), layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    axes = list(grid.ravel())
    for unused in axes[len(keys) :]:
        unused.set_axis_off()
    mesh = None
    for ax, (model, run) in zip(axes, keys, strict=False):
        matrix = analysis.matrix(model, run, value, level)
        marks = analysis.matrix(model, run, "significant", level).fillna(0).astype(bool)
        mesh = draw_heatmap(ax, matrix, marks, _group_label(model, run, single))
    if mesh is not None:
        figure.colorbar(mesh, ax=axes, shrink=0.6, label=value.replace("_", " "))
    figure.suptitle(f"{value.replace('_', ' ')} (• adjusted p < {analysis.settings['alpha']})", fontsize=11)
    return figure


def raw_vs_partial(analysis: Analysis, model: str, run: str) -> Figure:
    """Raw and partial correlation heatmaps of one run, side by side."""
    raw = analysis.matrix(model, run, "r_raw")
    partial = analysis.matrix(model, run, "r_partial")
    marks = analysis.matrix(model, run, "significant").fillna(0).astype(bool)
    m = len(raw)
    panel = float(np.clip(0.11 * m + 2.5, 4.0, 9.0))
    figure = Figure(figsize=(2 * panel + 1.0, panel + 0.8), layout="constrained")
    ax_raw, ax_partial = figure.subplots(1, 2)
    draw_heatmap(ax_raw, raw, None, "raw correlation")
    mesh = draw_heatmap(ax_partial, partial, marks, f"partial correlation given {analysis.settings['id_testset']}")
    figure.colorbar(mesh, ax=[ax_raw, ax_partial], shrink=0.6)
    figure.suptitle(f"{model} / {run}", fontsize=11)
    return figure


def strongest_pairs(analysis: Analysis, model: str, run: str, count: int = MAX_SCATTER_PAIRS) -> list[tuple[str, str]]:
    """The ``count`` pairs of one run with the largest absolute partial correlation."""
    rows = analysis.pairs[
        (analysis.pairs["level"] == "run") & (analysis.pairs["model"] == model) & (analysis.pairs["run"] == run)
    ]
    top = rows.reindex(rows["r_partial"].abs().sort_values(ascending=False).index).head(count)
    return list(zip(top["testset_a"], top["testset_b"], strict=True))


def residual_scatter(analysis: Analysis, model: str, run: str, pairs: list[tuple[str, str]] | None = None) -> Figure:
    """Scatter of the residuals (after regressing out ID) of chosen pairs, coloured by step."""
    residuals = analysis.residuals(model, run)
    chosen = [
        pair
        for pair in (pairs or strongest_pairs(analysis, model, run))
        if pair[0] in residuals.columns and pair[1] in residuals.columns
    ][: 2 * MAX_SCATTER_PAIRS]
    figure = Figure(figsize=(3.3 * max(len(chosen), 1) + 0.8, 3.4), layout="constrained")
    axes = figure.subplots(1, max(len(chosen), 1), squeeze=False)[0]
    steps = residuals.index.to_numpy(dtype=float)
    norm = LogNorm(vmin=max(steps.min(), 1.0), vmax=max(steps.max(), 2.0))
    points = None
    rows = analysis.pairs[
        (analysis.pairs["level"] == "run") & (analysis.pairs["model"] == model) & (analysis.pairs["run"] == run)
    ]
    for ax, (a, b) in zip(axes, chosen, strict=False):
        points = ax.scatter(residuals[a], residuals[b], c=np.maximum(steps, 1.0), cmap="viridis", norm=norm, s=18)
        match = rows[
            ((rows["testset_a"] == a) & (rows["testset_b"] == b))
            | ((rows["testset_a"] == b) & (rows["testset_b"] == a))
        ]
        r = float(match["r_partial"].iloc[0]) if len(match) else float("nan")
        ax.set_xlabel(f"{a} residual", fontsize=8)
        ax.set_ylabel(f"{b} residual", fontsize=8)
        ax.set_title(f"partial r = {r:.2f}", fontsize=9)
        ax.tick_params(labelsize=7)
    if not chosen:
        axes[0].text(0.5, 0.5, "no pairs to show", ha="center", va="center")
        axes[0].set_axis_off()
    if points is not None:
        figure.colorbar(points, ax=list(axes), label="step", shrink=0.8)
    figure.suptitle(f"residuals given {analysis.settings['id_testset']} — {model} / {run}", fontsize=10)
    return figure


def trajectories(analysis: Analysis, model: str, run: str) -> Figure:
    """ID (black) and OOD scores over steps of one run (symmetric-log step axis)."""
    table = analysis.wide(model, run)
    id_name = analysis.settings["id_testset"]
    figure = Figure(figsize=(8.0, 4.2), layout="constrained")
    ax = figure.subplots()
    steps = table.index.to_numpy(dtype=float)
    ood = list(table.columns[1:])
    for name in ood:
        ax.plot(
            steps,
            table[name],
            linewidth=0.9,
            alpha=0.75 if len(ood) <= MAX_LEGEND else 0.35,
            label=name if len(ood) <= MAX_LEGEND else None,
        )
    ax.plot(steps, table[id_name], color="black", linewidth=2.2, label=f"{id_name} (ID)")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("step")
    sign = "−" if int(analysis.scores.loc[analysis.scores["testset"] == id_name, "sign"].iloc[0]) < 0 else ""
    ax.set_ylabel(f"{sign}score (higher = better)")
    ax.legend(fontsize=7, ncol=2 if len(ood) > 6 else 1, loc="best")
    ax.set_title(
        f"scores over training — {model} / {run}" + ("" if len(ood) <= MAX_LEGEND else f" ({len(ood)} OOD test sets)"),
        fontsize=10,
    )
    return figure


def agreement(comparison: Comparison) -> Figure:
    """For every two groups: their partial correlations pair by pair, with Mantel r, p and sign agreement."""
    groups = comparison.groups
    couples = list(combinations(groups, 2))[:6]
    figure = Figure(figsize=(3.8 * max(len(couples), 1) + 0.4, 3.9), layout="constrained")
    axes = figure.subplots(1, max(len(couples), 1), squeeze=False)[0]
    if not couples:
        axes[0].text(0.5, 0.5, "one group only: nothing to compare", ha="center", va="center")
        axes[0].set_axis_off()
        return figure
    long = comparison.per_pair
    for ax, (group_a, group_b) in zip(axes, couples, strict=False):
        both = long[long["group"] == group_a].merge(
            long[long["group"] == group_b], on=["testset_a", "testset_b"], suffixes=("_a", "_b")
        )
        agree = both["sign_a"] == both["sign_b"]
        ax.axhline(0, color="grey", linewidth=0.6)
        ax.axvline(0, color="grey", linewidth=0.6)
        ax.plot([-1, 1], [-1, 1], color="grey", linewidth=0.6, linestyle="--")
        ax.scatter(
            both.loc[agree, "r_a"],
            both.loc[agree, "r_b"],
            s=7,
            alpha=0.6,
            color="tab:blue",
            label="same sign",
        )
        ax.scatter(
            both.loc[~agree, "r_a"],
            both.loc[~agree, "r_b"],
            s=7,
            alpha=0.6,
            color="tab:red",
            label="opposite sign",
        )
        row = comparison.agreement[
            (comparison.agreement["group_a"] == group_a) & (comparison.agreement["group_b"] == group_b)
        ].iloc[0]
        ax.set_title(
            f"Mantel r = {row['mantel_r']:.2f}, p = {row['mantel_p']:.3g}\n"
            f"sign agreement {row['sign_agreement']:.0%} of {int(row['n_pairs'])} pairs",
            fontsize=9,
        )
        ax.set_xlabel(f"partial r, {group_a}", fontsize=8)
        ax.set_ylabel(f"partial r, {group_b}", fontsize=8)
        ax.set_xlim(-1, 1)
        ax.set_ylim(-1, 1)
        ax.set_aspect("equal")
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7, loc="lower right")
    return figure


def save_figure(figure: Figure, folder: Path, name: str) -> tuple[Path, Path, str]:
    """Write ``figure`` to ``folder/name.png`` and ``folder/name.svg``.

    Returns
    -------
    png, svg : Path
    png_base64 : str
        The PNG, base64-encoded, for embedding in HTML.
    """
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI)
    figure.set_layout_engine("none")  # keep the layout just computed; the SVG need not redo it
    png = folder / f"{name}.png"
    png.write_bytes(buffer.getvalue())
    svg = folder / f"{name}.svg"
    figure.savefig(svg, format="svg")
    return png, svg, base64.b64encode(buffer.getvalue()).decode("ascii")
