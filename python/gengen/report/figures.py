"""The report's figures, drawn with matplotlib's object API (no pyplot, no global state, any backend).

Each function returns a :class:`matplotlib.figure.Figure`; :func:`save_figure` writes it as PNG and SVG.
Groups appear in model-size order (:func:`gengen.report.order.group_key`) and test sets in one clustered order
(:func:`testset_order`) in every heatmap panel.
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter

from gengen._files import inside
from gengen.report.order import cluster_order, group_key, pooled_correlation, short_labels
from gengen.stats.pfloor import p_text

if TYPE_CHECKING:
    from gengen.across.compare import Comparison
    from gengen.analyse.result import Analysis

CMAP = "RdBu_r"
PNG_DPI = 110
#: Most residual scatter panels drawn per run.
MAX_SCATTER_PAIRS = 4
#: OOD trajectories drawn in a run's static trajectory figure (those whose scores move most), each in the legend.
TOP_TRAJECTORIES = 8
#: Scatter plots with more points than this are rasterized in the SVG (a vector file of 10⁴ dots is slow and big).
RASTERIZE_ABOVE = 400


HEATMAPS_PER_ROW = 4
#: Most groups drawn as full-size labelled heatmaps; above it, one summary heatmap of the common partial
#: correlation and every group as a small unlabelled multiple (32 labelled 64 x 64 panels took 11 s and 6 MB).
HEATMAPS_FULL_SIZE = 8
#: Opacity of the cells of pairs that are not significant in the per-group heatmaps.
FADED_ALPHA = 0.3
#: Agreement scatter panels per line of the figure (wider figures would be shrunk to illegible on the page).
AGREEMENT_PER_ROW = 3


Params = ParamSpec("Params")


def literal_text(figure: Figure) -> Figure:
    """Draw every text of ``figure`` that holds a ``$`` as it is written, not as mathtext.

    Test-set, model and metric names come from user data: ``$x^2$`` must show those five characters, and
    ``a$b`` or ``$\\frac{1}{0}$`` must neither fail to parse nor set anything as a formula. Tick labels that
    formatters write at draw time (numbers) are not touched.
    """
    for text in figure.findobj(Text):
        if "$" in text.get_text():
            text.set_parse_math(False)
    return figure


def literal(build: Callable[Params, Figure]) -> Callable[Params, Figure]:
    """Decorate a figure builder so that the names it writes are drawn literally (:func:`literal_text`)."""

    @functools.wraps(build)
    def wrapper(*args: Params.args, **kwargs: Params.kwargs) -> Figure:
        return literal_text(build(*args, **kwargs))

    return wrapper


def _tick_size(m: int, panel: float) -> float:
    """Font size (points) of test-set labels for an m × m heatmap ``panel`` inches wide: one label per cell."""
    cell_points = 0.8 * panel * 72.0 / max(m, 1)
    return float(np.clip(0.85 * cell_points, 3.0, 9.0))


def _group_label(model: str, run: str, single_run: bool) -> str:
    return model if single_run else f"{model} / {run}"


def level_of(analysis: Analysis) -> str:
    """The level the report draws: per-run groups when there are any, else the across-run cells."""
    return "run" if analysis.groups("run") else "across_runs"


def square(rows: pd.DataFrame, names: list[str], column: str) -> np.ndarray:
    """``column`` of one group's pair rows as a symmetric (m × m) matrix in the order of ``names``.

    Cells of pairs not in ``rows`` and the diagonal are NaN.
    """
    position = {name: i for i, name in enumerate(names)}
    values = np.full((len(names), len(names)), np.nan)
    i = rows["testset_a"].map(position)
    j = rows["testset_b"].map(position)
    keep = (i.notna() & j.notna()).to_numpy()
    i, j = i[keep].to_numpy(dtype=int), j[keep].to_numpy(dtype=int)
    column_values = rows[column].to_numpy()[keep].astype(float)
    values[i, j] = column_values
    values[j, i] = column_values
    return values


def group_rows(analysis: Analysis, level: str) -> dict[tuple[str, str], pd.DataFrame]:
    """The pair rows of every group at ``level``, in model-size order."""
    table = analysis.pooled_residuals if level == "pooled_residuals" else analysis.pairs
    rows = table[table["level"] == level]
    keys = sorted(dict.fromkeys(zip(rows["model"], rows["run"], strict=True)), key=lambda key: group_key(*key))
    parts = {key: part for key, part in rows.groupby(["model", "run"], sort=False)}
    return {key: parts[key] for key in keys}


def testset_order(analysis: Analysis, level: str, value: str = "r_partial") -> list[str]:
    """OOD test sets ordered by average-linkage clustering of the groups' mean ``value`` matrix (Fisher z)."""
    groups = group_rows(analysis, level)
    present: set[str] = set()
    for rows in groups.values():
        present |= set(rows["testset_a"]) | set(rows["testset_b"])
    names = [name for name in analysis.settings.ood_resolved if name in present] or sorted(present)
    if not groups:
        return names
    pooled = pooled_correlation([square(rows, names, value) for rows in groups.values()])
    return [names[i] for i in cluster_order(pooled)]


def direction_label(metric: str, sign: int) -> str:
    """Axis label saying which way a metric was turned: lower-is-better metrics are negated before analysis."""
    if sign < 0:
        return f"−{metric} (negated; lower raw = better)"
    return f"{metric} score (higher = better)"


def metric_sign(analysis: Analysis, role: str) -> tuple[str, int]:
    """The metric and its ``sign`` (+1, or −1 when negated) of the ID (``role="id"``) or OOD scores."""
    metric = analysis.settings.id_metric if role == "id" else analysis.settings.metric
    scores = analysis.scores
    rows = scores[scores["metric"] == metric] if "metric" in scores else scores
    if "role" in rows:
        rows = rows[rows["role"] == role] if (rows["role"] == role).any() else rows
    sign = int(rows["sign"].iloc[0]) if "sign" in rows and len(rows) else 1
    return metric, sign


def draw_heatmap(
    ax: Axes,
    matrix: pd.DataFrame,
    marks: pd.DataFrame | None,
    title: str,
    panel: float = 6.0,
    *,
    row_labels: bool = True,
    column_labels: bool = True,
    fade: bool = False,
) -> AxesImage:
    """Draw one correlation heatmap (colour scale -1…1) on ``ax``; ``marks`` (bool matrix) adds a dot.

    With ``fade``, cells not in ``marks`` are drawn at a third of their opacity, so that the colour a reader
    sees is the colour of a significant pair (at 64 test sets most cells are noise that looks like structure).

    Labels are the test-set names with shared prefixes stripped (:func:`gengen.report.order.short_labels`),
    sized to one cell of a ``panel``-inch heatmap.
    """
    values = matrix.to_numpy(dtype=float)
    m = values.shape[0]
    opacity = None
    if fade and marks is not None:
        opacity = np.where(marks.to_numpy(dtype=bool) | np.eye(m, dtype=bool), 1.0, FADED_ALPHA)
    image = ax.imshow(
        np.ma.masked_invalid(values),
        alpha=opacity,
        cmap=CMAP,
        vmin=-1.0,
        vmax=1.0,
        interpolation="nearest",
        extent=(0, m, m, 0),
        rasterized=True,
    )
    ax.set_xlim(0, m)
    ax.set_ylim(m, 0)
    size = _tick_size(m, panel)
    labels, _ = short_labels([*matrix.index, *matrix.columns])
    # No ticks at all where there are no labels: each tick is an object matplotlib lays out and draws.
    if column_labels:
        ax.set_xticks(np.arange(m) + 0.5, labels=[labels[str(c)] for c in matrix.columns])
    else:
        ax.set_xticks([])
    if row_labels:
        ax.set_yticks(np.arange(m) + 0.5, labels=[labels[str(c)] for c in matrix.index])
    else:
        ax.set_yticks([])
    ax.tick_params(length=0, labelsize=size)
    ax.tick_params(axis="x", labelrotation=90)
    if marks is not None:
        rows, cols = np.nonzero(marks.to_numpy(dtype=bool))
        ax.scatter(cols + 0.5, rows + 0.5, s=max(1.0, 900.0 / m**1.3), c="black", marker="o", linewidths=0)
    ax.set_title(title, fontsize=10)
    return image


def _label_inches(labels: list[str], points: float) -> float:
    """Rough width of the longest label at ``points`` (no text layout: that is what makes big figures slow)."""
    longest = max((len(label) for label in labels), default=1)
    return 0.58 * points * longest / 72.0 + 0.1


@literal
def heatmaps(
    analysis: Analysis, value: str = "r_partial", order: list[str] | None = None, level: str | None = None
) -> Figure:
    """Per-group heatmaps of ``value`` side by side; a dot marks pairs with ``significant`` true.

    Groups in model-size order; test sets in ``order`` (default :func:`testset_order`) in every panel, so rows
    are labelled on the first panel of each line only and columns, being in the same order, not at all. Laid
    out by hand: constrained layout measures every label again and again (seconds at 64 test sets).
    """
    level = level or level_of(analysis)
    groups = group_rows(analysis, level)
    keys = list(groups)
    single = len({model for model, _ in keys}) == len(keys)
    order = order if order is not None else testset_order(analysis, level)
    if len(keys) > HEATMAPS_FULL_SIZE:
        return summary_heatmaps(analysis, groups, order, value, single)
    m = max(len(order), 1)
    panel = float(np.clip(0.11 * m + 2.5, 4.0, 9.0))
    labels, _ = short_labels(order)
    margin = _label_inches(list(labels.values()), _tick_size(m, panel))
    columns = min(max(len(keys), 1), HEATMAPS_PER_ROW)
    lines = -(-max(len(keys), 1) // columns)
    gap, top, bottom, bar = 0.25, 0.75, 0.25, 0.9
    width = margin + columns * panel + (columns - 1) * gap + bar
    height = top + lines * (panel + 0.4) + bottom
    figure = Figure(figsize=(width, height))
    image = None
    for index, (model, run) in enumerate(keys):
        line, column = divmod(index, columns)
        left = margin + column * (panel + gap)
        lower = height - top - line * (panel + 0.4) - panel
        ax = figure.add_axes((left / width, lower / height, panel / width, panel / height))
        rows = groups[(model, run)]
        values = square(rows, order, value)
        if value in ("r_partial", "r_raw"):
            np.fill_diagonal(values, 1.0)
        matrix = pd.DataFrame(values, index=order, columns=order)
        marks = pd.DataFrame(np.nan_to_num(square(rows, order, "significant")) > 0, index=order, columns=order)
        image = draw_heatmap(
            ax,
            matrix,
            marks,
            _group_label(model, run, single),
            panel,
            row_labels=column == 0,
            column_labels=False,
            fade=True,
        )
    if image is not None:
        cax = figure.add_axes(
            ((width - bar + 0.25) / width, (bottom + 0.5) / height, 0.18 / width, 0.5 * panel / height)
        )
        figure.colorbar(image, cax=cax, label=value.replace("_", " "))
    figure.suptitle(
        f"{value.replace('_', ' ')} (• adjusted p < {analysis.settings.alpha}; other pairs faded); columns in "
        "the order of the rows",
        fontsize=11,
        y=1 - 0.2 / height,
    )
    return figure


#: Small multiples per line below the summary heatmap, and their size (inches).
SMALL_PER_ROW = 8
SMALL_PANEL = 1.45


def summary_heatmaps(
    analysis: Analysis,
    groups: dict[tuple[str, str], pd.DataFrame],
    order: list[str],
    value: str,
    single: bool,
) -> Figure:
    """One labelled heatmap of the groups' common ``value`` (mean on Fisher's z scale), then every group as a
    small unlabelled multiple in the same order (the page's tooltips and pairs.csv name each cell)."""
    m = max(len(order), 1)
    squares = {key: square(rows, order, value) for key, rows in groups.items()}
    common = pooled_correlation(list(squares.values()))
    np.fill_diagonal(common, 1.0)
    panel = float(np.clip(0.11 * m + 2.5, 4.0, 9.0))
    labels, _ = short_labels(order)
    margin = _label_inches(list(labels.values()), _tick_size(m, panel))
    columns = min(len(squares), SMALL_PER_ROW)
    lines = -(-len(squares) // columns)
    top, bar = 0.75, 0.9
    width = max(margin + panel + bar, 0.3 + columns * (SMALL_PANEL + 0.15))
    height = top + panel + 0.8 + lines * (SMALL_PANEL + 0.5) + 0.2
    figure = Figure(figsize=(width, height))
    ax = figure.add_axes((margin / width, (height - top - panel) / height, panel / width, panel / height))
    image = draw_heatmap(
        ax,
        pd.DataFrame(common, index=order, columns=order),
        None,
        f"common {value.replace('_', ' ')}: mean of {len(squares)} groups (Fisher z)",
        panel,
        column_labels=False,
    )
    cax = figure.add_axes(
        ((margin + panel + 0.25) / width, (height - top - panel) / height, 0.18 / width, 0.5 * panel / height)
    )
    figure.colorbar(image, cax=cax, label=value.replace("_", " "))
    for index, ((model, run), values) in enumerate(squares.items()):
        line, column = divmod(index, columns)
        left = 0.3 + column * (SMALL_PANEL + 0.15)
        lower = height - top - panel - 0.8 - (line + 1) * (SMALL_PANEL + 0.5) + 0.05
        small = figure.add_axes((left / width, lower / height, SMALL_PANEL / width, SMALL_PANEL / height))
        if value in ("r_partial", "r_raw"):
            np.fill_diagonal(values, 1.0)
        marks = np.nan_to_num(square(groups[(model, run)], order, "significant")) > 0
        opacity = np.where(marks | np.eye(m, dtype=bool), 1.0, FADED_ALPHA)
        small.imshow(np.ma.masked_invalid(values), alpha=opacity, cmap=CMAP, vmin=-1.0, vmax=1.0,
                     interpolation="nearest", rasterized=True)  # fmt: skip
        small.set_xticks([])
        small.set_yticks([])
        small.set_title(model if single else f"{model}\n{run}", fontsize=6.5)  # two short lines fit the panel
    figure.suptitle(
        f"{value.replace('_', ' ')}: the groups' common value, then each group (same order; non-significant pairs "
        f"faded, adjusted p < {analysis.settings.alpha})",
        fontsize=10,
        y=1 - 0.2 / height,
    )
    return figure


@literal
def raw_vs_partial(analysis: Analysis, model: str, run: str) -> Figure:
    """Raw and partial correlation heatmaps of one run, side by side (test sets clustered)."""
    partial = analysis.matrix(model, run, "r_partial")
    order = [partial.index[i] for i in cluster_order(partial.to_numpy(dtype=float))]
    partial = partial.reindex(index=order, columns=order)
    raw = analysis.matrix(model, run, "r_raw").reindex(index=order, columns=order)
    marks = analysis.matrix(model, run, "significant").reindex(index=order, columns=order).fillna(0).astype(bool)
    m = len(raw)
    panel = float(np.clip(0.11 * m + 2.5, 4.0, 9.0))
    figure = Figure(figsize=(2 * panel + 1.0, panel + 0.8), layout="constrained")
    ax_raw, ax_partial = figure.subplots(1, 2)
    draw_heatmap(ax_raw, raw, None, "raw correlation", panel)
    title = f"partial correlation given {analysis.settings.id_testset}"
    image = draw_heatmap(ax_partial, partial, marks, title, panel)
    figure.colorbar(image, ax=[ax_raw, ax_partial], shrink=0.6)
    figure.suptitle(f"{model} / {run}", fontsize=11)
    return figure


def strongest_pairs(analysis: Analysis, model: str, run: str, count: int = MAX_SCATTER_PAIRS) -> list[tuple[str, str]]:
    """The ``count`` pairs of one run with the largest absolute partial correlation."""
    rows = analysis.pairs[
        (analysis.pairs["level"] == "run") & (analysis.pairs["model"] == model) & (analysis.pairs["run"] == run)
    ]
    top = rows.reindex(rows["r_partial"].abs().sort_values(ascending=False).index).head(count)
    return list(zip(top["testset_a"], top["testset_b"], strict=True))


@literal
def residual_scatter(analysis: Analysis, model: str, run: str, pairs: list[tuple[str, str]] | None = None) -> Figure:
    """Scatter of the residuals (after regressing out ID) of chosen pairs, coloured by step."""
    residuals = analysis.residuals(model, run)
    chosen = [
        pair
        for pair in (pairs or strongest_pairs(analysis, model, run))
        if pair[0] in residuals.columns and pair[1] in residuals.columns
    ][: 2 * MAX_SCATTER_PAIRS]
    width, height = 3.3 * max(len(chosen), 1) + 1.2, 3.6
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(1, max(len(chosen), 1), squeeze=False)[0]
    # Fixed margins instead of constrained layout (which measures every label repeatedly).
    figure.subplots_adjust(
        left=0.8 / width, right=1 - 1.2 / width, bottom=0.6 / height, top=1 - 0.7 / height, wspace=0.55
    )
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
        # the p-value that decided "significant" and the checkpoints behind it: r from 2 points means nothing
        p = float(match["p_adjusted"].iloc[0]) if len(match) and "p_adjusted" in match else float("nan")
        n = int(match["n"].iloc[0]) if len(match) and "n" in match else len(steps)
        ax.set_xlabel(f"{a} residual", fontsize=8)
        ax.set_ylabel(f"{b} residual", fontsize=8)
        ax.set_title(f"partial r = {r:.2f}, adjusted p = {p_text(p)}\n{why_not_significant(match, n)}", fontsize=8)
        ax.tick_params(labelsize=8)
    if not chosen:
        axes[0].text(0.5, 0.5, "no pairs to show", ha="center", va="center")
        axes[0].set_axis_off()
    if points is not None:
        cax = figure.add_axes((1 - 0.95 / width, 0.6 / height, 0.15 / width, 1 - 1.3 / height))
        colorbar = figure.colorbar(points, cax=cax, label="step")
        colorbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: step_text(value)))
        colorbar.ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    figure.suptitle(f"residuals given {analysis.settings.id_testset} — {model} / {run}", fontsize=10)
    return figure


def _number(row: pd.DataFrame, column: str) -> float:
    value = pd.to_numeric(row[column], errors="coerce").iloc[0] if column in row and len(row) else float("nan")
    return float(value)


def why_not_significant(row: pd.DataFrame, checkpoints: int) -> str:
    """What stands between a large r and a small p, from one pairs-table row: the checkpoints (n), the degrees
    of freedom the test used (autocorrelation shrinks them: ``df_sieve``), and the checkpoint whose deletion
    removes most of the estimate (``influence``, its share), when that is more than a third."""
    parts = [f"n = {checkpoints}"]
    df = _number(row, "df_sieve") if "df_sieve" in row else _number(row, "df")
    if np.isfinite(df):
        parts.append(f"df = {df:.3g}")
    influence, step = _number(row, "influence"), _number(row, "influential_step")
    if np.isfinite(influence) and np.isfinite(step) and influence > 1 / 3:
        parts.append(f"deleting step {step_text(step)} removes {min(influence, 9.99):.0%} of r")
    return ", ".join(parts)


def step_text(step: float) -> str:
    """A step count in short form: 512, 13k, 1.2M."""
    size = abs(step)
    if size >= 1e6:
        return f"{step / 1e6:.3g}M"
    if size >= 1e3:
        return f"{step / 1e3:.3g}k"
    return f"{step:.0f}"


def top_moving(table: pd.DataFrame, names: list[str], count: int) -> list[str]:
    """The ``count`` columns of ``table`` among ``names`` whose scores span the widest range over training."""
    spans = (table[names].max() - table[names].min()).sort_values(ascending=False, kind="stable")
    return list(spans.index[:count])


@literal
def trajectories(analysis: Analysis, model: str, run: str, top: int = TOP_TRAJECTORIES) -> Figure:
    """ID (black) and the ``top`` OOD test sets whose scores move most, over steps of one run (symlog steps).

    The axis labels say which way each metric runs (``sign``): lower-is-better metrics were negated. When
    the ID metric differs from the OOD metric, ID gets its own axis on the right.
    """
    table = analysis.wide(model, run)
    id_name = analysis.settings.id_testset
    ood_all = list(table.columns[1:])
    ood = top_moving(table, ood_all, top)
    labels, _ = short_labels(ood_all)
    id_metric, id_sign = metric_sign(analysis, "id")
    metric, sign = metric_sign(analysis, "ood")
    own_axis = (id_metric, id_sign) != (metric, sign)
    width, height = 9.0, 4.4
    figure = Figure(figsize=(width, height))
    right = (2.3 if not own_axis else 3.0) / width
    ax = figure.add_axes((0.75 / width, 0.6 / height, 1 - right - 0.75 / width, 1 - 1.05 / height))
    steps = table.index.to_numpy(dtype=float)
    for name in ood:
        ax.plot(steps, table[name], linewidth=1.2, alpha=0.85, label=labels[name])
    id_ax = ax.twinx() if own_axis else ax
    id_ax.plot(steps, table[id_name], color="black", linewidth=2.2, label=f"{id_name} (ID)")
    ax.set_xscale("symlog", linthresh=1.0)
    # Plain tick text (1k, 10k): the default 10^n labels go through mathtext, slow for a simple axis.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: step_text(value)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    ax.set_xlabel("step", fontsize=9)
    ax.set_ylabel(direction_label(metric, sign), fontsize=9)
    ax.tick_params(labelsize=8)
    handles, names = ax.get_legend_handles_labels()
    if own_axis:
        id_ax.set_ylabel(f"ID: {direction_label(id_metric, id_sign)}", fontsize=9)
        id_ax.tick_params(labelsize=8)
        extra_handles, extra_names = id_ax.get_legend_handles_labels()
        handles, names = handles + extra_handles, names + extra_names
    ax.legend(handles, names, fontsize=8, ncol=1, loc="center left", bbox_to_anchor=(1.14 if own_axis else 1.01, 0.5))
    shown = f"{len(ood)} of {len(ood_all)} OOD test sets that move most" if len(ood) < len(ood_all) else "OOD"
    ax.set_title(f"scores over training — {model} / {run} ({shown})", fontsize=10)
    return figure


@literal
def agreement(comparison: Comparison) -> Figure:
    """For every two groups: their partial correlations pair by pair, with Mantel r, p and sign agreement."""
    groups = sorted(comparison.groups, key=lambda label: group_key(*[*label.split(" / ", 1), ""][:2]))
    couples = list(combinations(groups, 2))[:6]
    columns = min(max(len(couples), 1), AGREEMENT_PER_ROW)
    lines = -(-max(len(couples), 1) // columns)
    width, height = 3.8 * columns + 0.4, 3.9 * lines
    figure = Figure(figsize=(width, height))
    axes = list(figure.subplots(lines, columns, squeeze=False).ravel())
    figure.subplots_adjust(
        left=0.6 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.7 / height, wspace=0.4, hspace=0.55
    )
    for unused in axes[len(couples) :]:
        unused.set_axis_off()
    if not couples:
        axes[0].text(0.5, 0.5, "one group only: nothing to compare", ha="center", va="center")
        axes[0].set_axis_off()
        return figure
    long = comparison.per_pair
    for ax, (group_a, group_b) in zip(axes, couples, strict=False):
        both = long[long["group"] == group_a].merge(
            long[long["group"] == group_b], on=["testset_a", "testset_b"], suffixes=("_a", "_b")
        )
        agree = both["r_a"] * both["r_b"] > 0  # as the agreement table counts: a zero agrees with nothing
        dense = len(both) > RASTERIZE_ABOVE
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
            rasterized=dense,
        )
        ax.scatter(
            both.loc[~agree, "r_a"],
            both.loc[~agree, "r_b"],
            s=7,
            alpha=0.6,
            color="tab:red",
            label="opposite sign",
            rasterized=dense,
        )
        table = comparison.agreement
        row = table[
            ((table["group_a"] == group_a) & (table["group_b"] == group_b))
            | ((table["group_a"] == group_b) & (table["group_b"] == group_a))
        ].iloc[0]
        at_floor = bool(row.get("mantel_p_at_floor", False))
        p_text = f"p ≤ {row['mantel_p']:.2g} (permutation floor)" if at_floor else f"p = {row['mantel_p']:.3g}"
        chance = row.get("sign_agreement_chance", float("nan"))
        chance_text = f" (chance {chance:.0%})" if np.isfinite(chance) else ""
        ax.set_title(
            f"Mantel r = {row['mantel_r']:.2f}, {p_text}\n"
            f"sign agreement {row['sign_agreement']:.0%} of {int(row['n_pairs'])} pairs{chance_text}",
            fontsize=9,
        )
        ax.set_xlabel(f"partial r, {group_a}", fontsize=8)
        ax.set_ylabel(f"partial r, {group_b}", fontsize=8)
        ax.set_xlim(-1, 1)
        ax.set_ylim(-1, 1)
        ax.set_aspect("equal")
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=8, loc="lower right")
    return figure


def css_width(figure: Figure) -> int:
    """Width in CSS pixels (96 per inch) at which a figure shows its fonts at their point size."""
    return round(float(figure.get_size_inches()[0]) * 96)


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
    if figure.get_layout_engine() is not None:
        figure.set_layout_engine("none")  # keep the layout just computed; the SVG need not redo it
    # A figure file linking out of the folder is not written through (the folder itself is checked by the report).
    png = inside(folder, f"{name}.png")
    png.write_bytes(buffer.getvalue())
    svg = inside(folder, f"{name}.svg")
    # Text as SVG <text>, not glyph outlines: editable and searchable in the file, and a fifth of the report's
    # CPU at 32 groups x 64 test sets went into outlining every label's glyphs.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(svg, format="svg")
    return png, svg, base64.b64encode(buffer.getvalue()).decode("ascii")
