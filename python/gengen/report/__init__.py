"""One self-contained HTML report of an analysis (figures inline as base64 PNG; also saved as PNG and SVG).

The report holds: per-group partial-correlation heatmaps side by side with significance marks; the
cross-group agreement figure and tables (sign agreement, Mantel correlation, conflicting pairs); the pooled
meta-analysis; for every run its strongest pairs, raw-vs-partial heatmaps, residual scatter plots and score
trajectories; the settings and package versions. It has no scripts and loads nothing from the network. Names
from user data are escaped by jinja2's autoescaping.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from jinja2 import Environment

from gengen.report import figures as fig
from gengen.report.template import TEMPLATE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gengen.analyse.result import Analysis
    from gengen.compare import Comparison

#: Rows shown in each "strongest pairs" table.
TOP_ROWS = 15


def _slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def _cell(value: Any) -> tuple[str, bool]:
    """Text of a table cell and whether it is numeric."""
    if isinstance(value, (bool,)):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, float):
        if math.isnan(value):
            return "", True
        if value.is_integer() and abs(value) >= 2:
            return str(int(value)), True
        return (f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}"), True
    if value is None or value is pd.NA:
        return "", False
    return str(value), False


def _table(frame: pd.DataFrame, columns: list[str], empty: str) -> dict[str, Any]:
    """A DataFrame as the template's table record (cells escaped by the template, not here)."""
    present = [column for column in columns if column in frame.columns]
    rows = [
        [_cell(item.item() if hasattr(item, "item") else item) for item in record]
        for record in frame[present].itertuples(index=False, name=None)
    ]
    return {"columns": present, "rows": rows, "empty": empty}


def _figure_record(figure: Figure, folder: Path, name: str, caption: str) -> dict[str, str]:
    _, _, data = fig.save_figure(figure, folder, name)
    return {"data": data, "alt": caption, "caption": caption}


def report(
    analysis: Analysis,
    comparison: Comparison | None = None,
    out_dir: str | Path = ".",
    *,
    scatter_pairs: list[tuple[str, str]] | None = None,
    title: str = "gengen report",
    filename: str = "report.html",
    progress: bool = False,
) -> Path:
    """Write the HTML report and its figures.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    comparison : Comparison, optional
        From :func:`gengen.compare.compare`; computed with its defaults when omitted.
    out_dir : str or Path
        Folder for the report; figures go to ``out_dir/figures/`` as PNG and SVG.
    scatter_pairs : list of (str, str), optional
        Pairs for the residual scatter plots (default each run's strongest partial correlations).
    title : str
        Page title.
    filename : str
        Name of the HTML file.
    progress : bool
        Show a progress bar over the figures.

    Returns
    -------
    Path
        The HTML file.
    """
    from gengen.compare import compare

    folder = Path(out_dir)
    figure_dir = folder / "figures"
    if comparison is None:
        comparison = compare(analysis)
    level = "run" if analysis.groups("run") else "across_runs"
    keys = analysis.groups(level)

    steps: list[tuple[str, Any]] = [("heatmaps", None), ("agreement", None)]
    if level == "run":
        steps += [("group", key) for key in keys]
    if progress:
        from rich.progress import track

        iterator: Any = track(steps, description="drawing figures", transient=True)
    else:
        iterator = steps
    figure_records: dict[str, list[dict[str, str]]] = {"heatmaps": [], "agreement": []}
    group_records = []
    for kind, key in iterator:
        if kind == "heatmaps":
            figure_records["heatmaps"].append(
                _figure_record(
                    fig.heatmaps(analysis),
                    figure_dir,
                    "heatmaps_partial",
                    "Partial correlations per group; a dot marks pairs significant after adjustment.",
                )
            )
        elif kind == "agreement":
            figure_records["agreement"].append(
                _figure_record(
                    fig.agreement(comparison),
                    figure_dir,
                    "agreement",
                    "Partial correlation of each pair in one group against another.",
                )
            )
        else:
            model, run = key
            stem = _slug(f"{model}_{run}")
            rows = analysis.pairs[
                (analysis.pairs["level"] == "run") & (analysis.pairs["model"] == model) & (analysis.pairs["run"] == run)
            ]
            top = rows.reindex(rows["r_partial"].abs().sort_values(ascending=False).index).head(TOP_ROWS)
            group_figures = [
                _figure_record(
                    fig.raw_vs_partial(analysis, model, run),
                    figure_dir,
                    f"raw_vs_partial_{stem}",
                    f"Raw and partial correlations, {model} / {run}.",
                ),
                _figure_record(
                    fig.residual_scatter(analysis, model, run, scatter_pairs),
                    figure_dir,
                    f"residuals_{stem}",
                    f"Residuals after regressing out the ID score, {model} / {run}.",
                ),
                _figure_record(
                    fig.trajectories(analysis, model, run),
                    figure_dir,
                    f"trajectories_{stem}",
                    f"ID and OOD scores over steps, {model} / {run}.",
                ),
            ]
            group_records.append(
                {
                    "label": f"{model} / {run}",
                    "table": _table(
                        top,
                        [
                            "testset_a",
                            "testset_b",
                            "n",
                            "r_raw",
                            "r_partial",
                            "statistic",
                            "df",
                            "p_value",
                            "p_perm",
                            "ci_low",
                            "ci_high",
                            "p_adjusted",
                            "significant",
                            "acf1_a",
                            "acf1_b",
                        ],
                        "no pairs",
                    ),
                    "figures": group_figures,
                }
            )

    summary_rows = pd.DataFrame(analysis.summary()["groups"])
    if not summary_rows.empty:
        summary_rows = summary_rows.drop(columns=["strongest_pair"])
    pooled = analysis.pooled
    if not pooled.empty:
        pooled = pooled.reindex(pooled["r_random"].abs().sort_values(ascending=False).index).head(TOP_ROWS)
    agreement = comparison.agreement
    comparison_text = ""
    if len(agreement):
        best = agreement.iloc[0]
        comparison_text = (
            f"{best['group_a']} vs {best['group_b']}: {best['sign_agreement']:.0%} of "
            f"{int(best['n_pairs'])} pairs have the same sign; the partial-correlation matrices "
            f"correlate at r = {best['mantel_r']:.2f} (Mantel p = {best['mantel_p']:.3g})."
        )
    tables = {
        "summary": _table(summary_rows, list(summary_rows.columns), "no groups"),
        "agreement": _table(agreement, list(agreement.columns), "only one group: nothing to compare"),
        "conflicts": _table(comparison.conflicts, list(comparison.conflicts.columns), "none"),
        "pooled": _table(
            pooled,
            [
                *analysis.settings.get("by", []),
                "testset_a",
                "testset_b",
                "n_runs",
                "r_random",
                "ci_low_random",
                "ci_high_random",
                "p_random_adjusted",
                "r_fixed",
                "i2",
                "tau2",
            ],
            "",
        )
        if not pooled.empty
        else None,
    }
    settings_rows = [
        (key, ", ".join(map(str, value)) if isinstance(value, list) else value)
        for key, value in analysis.settings.items()
        if key != "ood_resolved"
    ]
    settings_rows.append(("ood_resolved", ", ".join(analysis.settings.get("ood_resolved", []))))
    settings_rows += [(f"compare.{key}", value) for key, value in comparison.settings.items() if key != "groups"]
    environment = Environment(autoescape=True, trim_blocks=False, lstrip_blocks=False)
    html = environment.from_string(TEMPLATE).render(
        title=title,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        settings=analysis.settings,
        versions=analysis.versions,
        warnings=analysis.warnings,
        tables=tables,
        figures=figure_records,
        groups=group_records,
        comparison_text=comparison_text,
        settings_rows=settings_rows,
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(html, encoding="utf-8")
    return path


__all__ = ["report"]
