"""One chosen pair across the whole analysis (``gengen report --pair A,B``): its trajectories and its rows.

The trajectories figure has one panel per model: test set A, test set B and the ID test set against training
progress (each run's step over its last step, on the page's log axis), one line per run in the test set's colour
(a model's runs dashed in turn). The rows are the pair's row of every table the page draws from: the per-run
pairs table, the pooled table, the verdict and the across-model heterogeneity tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.report import figures as fig
from gengen.report.order import group_key, sort_models
from gengen.report.page import static_table
from gengen.report.trajectories import DASHES, _progress_axis, _progress_value, training_progress

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gengen.across.compare import Comparison
    from gengen.across.verdict import Verdict
    from gengen.analyse.result import Analysis

#: Colours of test set A, test set B and ID in the pair's trajectories (colour-blind safe: Okabe-Ito).
PAIR_COLOURS = ("#0072B2", "#D55E00", "#000000")
#: Panels per line of the pair's trajectories.
PAIR_PANELS_PER_ROW = 4
#: Columns of the pair's rows shown per table (the rest are in the CSV files).
PAIR_COLUMNS = {
    "pairs": ("level", "model", "run", "n", "r_raw", "r_partial", "ci_low", "ci_high", "p_deciding", "p_adjusted",
              "significant", "influential_step", "influence", "diagnostics"),
    "pooled": ("model", "n_runs", "r_fixed", "r_random", "ci_low_random", "ci_high_random", "p_random_adjusted",
               "significant_random", "q", "q_df", "p_q", "i2"),
    "verdict": ("cell", "verdict", "n_groups", "r_min", "r_max", "r_common", "p_common_adjusted", "q_heterogeneity",
                "p_heterogeneity_adjusted", "reason"),
}  # fmt: skip


def _rows_of(frame: pd.DataFrame | None, a: str, b: str) -> pd.DataFrame:
    """The rows of ``frame`` about the pair (either order); empty when it has no pair columns."""
    if frame is None or frame.empty or not {"testset_a", "testset_b"} <= set(frame.columns):
        return pd.DataFrame()
    chosen = ((frame["testset_a"] == a) & (frame["testset_b"] == b)) | (
        (frame["testset_a"] == b) & (frame["testset_b"] == a)
    )
    return frame[chosen]


@fig.literal
def pair_trajectories(analysis: Analysis, a: str, b: str) -> Figure:
    """A, B and ID against training progress, one panel per model, one line per run.

    Parameters
    ----------
    analysis : Analysis
        The analysis drawn.
    a, b : str
        The pair's two OOD test sets.

    Returns
    -------
    matplotlib.figure.Figure
        One panel per model in model-size order; values are the analysis' (sign-adjusted: higher = better).
    """
    from matplotlib.figure import Figure as MplFigure

    id_name = analysis.settings["id_testset"]
    scores = analysis.scores[analysis.scores["testset"].isin([a, b, id_name])]
    models = sort_models(scores["model"].astype(str).unique())
    columns = min(max(len(models), 1), PAIR_PANELS_PER_ROW)
    lines = -(-max(len(models), 1) // columns)
    figure = MplFigure(figsize=(3.4 * columns + 1.8, 2.7 * lines + 0.7), layout="constrained")
    axes = figure.subplots(lines, columns, squeeze=False).ravel()
    for ax, model in zip(axes, models, strict=False):
        rows = scores[scores["model"] == model]
        runs = sorted(rows["run"].astype(str).unique(), key=lambda run: group_key(model, run))
        for turn, run in enumerate(runs):
            run_rows = rows[rows["run"].astype(str) == run]
            steps = np.sort(run_rows["step"].unique().astype(float))
            progress = dict(zip(steps, training_progress(steps), strict=True))
            dash = DASHES[turn % len(DASHES)]
            style = (0, tuple(float(n) for n in dash.split())) if dash else "solid"
            for name, colour in zip((a, b, id_name), PAIR_COLOURS, strict=True):
                series = run_rows[run_rows["testset"] == name].groupby("step")["value"].mean().sort_index()
                if series.empty:
                    continue
                x = [progress[float(step)] for step in series.index]
                label = f"{name}{' (ID)' if name == id_name else ''}" if turn == 0 else None
                ax.plot(x, series.to_numpy(dtype=float), color=colour, linestyle=style, linewidth=1.3, label=label)
        ax.set_xscale("function", functions=(_progress_axis, _progress_value))
        ax.set_xlim(0.0, 1.0)
        ax.set_xticks([0.0, 0.01, 0.1, 1.0], labels=["0", "1%", "10%", "100%"])
        ax.set_title(f"{model} ({len(runs)} run{'s' if len(runs) != 1 else ''})", fontsize=9)
        ax.set_xlabel("training progress (step / last step)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(models) :]:
        ax.set_axis_off()
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    figure.suptitle(f"{a} and {b} with ID over training (runs dashed in turn)", fontsize=10)
    return figure


def pair_tables(
    analysis: Analysis, comparison: Comparison, verdict: Verdict, a: str, b: str
) -> list[tuple[str, dict[str, Any]]]:
    """The pair's row of every table: (title, static table record) for the pairs, pooled, verdict and
    heterogeneity tables (a table without the pair gets a record saying so)."""
    sources: list[tuple[str, str, pd.DataFrame | None]] = [
        ("pairs", "pairs.csv: every group", analysis.pairs),
        ("pooled", "pooled.csv: runs pooled per model", analysis.pooled),
        ("verdict", "verdict_pairs.csv: across models", verdict.pairs),
        ("heterogeneity", "compare_heterogeneity.csv: does it differ between groups?", comparison.heterogeneity),
    ]
    out = []
    for key, title, frame in sources:
        rows = _rows_of(frame, a, b)
        if "model" in rows and "run" in rows:
            order = sorted(
                range(len(rows)), key=lambda i: group_key(str(rows["model"].iloc[i]), str(rows["run"].iloc[i]))
            )
            rows = rows.iloc[order]
        wanted = PAIR_COLUMNS.get(key) or tuple(c for c in rows.columns if c not in ("testset_a", "testset_b"))
        out.append((title, static_table(rows, list(wanted), f"no row for {a} / {b}")))
    return out
