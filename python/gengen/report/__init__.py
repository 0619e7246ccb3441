"""One self-contained HTML report of an analysis, built to stay readable at 10–100 test sets and many models.

The page holds, per level of the pairs table (checkpoint series, across runs, pooled residuals): the settings
its rows used (read from their own method columns), interactive heatmaps (test sets in one clustered order in
every panel, shared prefixes stripped, full names on hover) and a searchable, sortable table of every pair with
its interval and the p-value that decided ``significant``, both with their methods, and the row's diagnostics.
Then the agreement across groups, the pooled meta-analysis, score trajectories as small multiples, residual
scatter plots per run, the options as requested and the package versions. Groups are ordered by model size
(70m < 410m < 1.4b < 12b).

The page is one file with its script inline (no library, nothing loaded from the network). Static figures are
drawn once with matplotlib, written as PNG and SVG to a folder beside the page, and the same PNG bytes are
embedded. Names from user data are escaped by jinja2's autoescaping, or reach the script as escaped JSON.

The figures on their own, as matplotlib Figures (:mod:`gengen.report.plots`, re-exported here):
:func:`plot_heatmaps`, :func:`plot_raw_vs_partial`, :func:`plot_residuals`, :func:`plot_trajectories` (of an
:class:`~gengen.analyse.Analysis`) and :func:`plot_agreement`, :func:`plot_agreement_matrix` (of a
:class:`~gengen.across.compare.Comparison`). The report reads those data objects; they know nothing of it.

:func:`report` runs named steps: the tables are checked (:mod:`gengen.report.inputs`), then each level's
section, the static heatmaps, the comparison, the pooled table, the trajectories
(:mod:`gengen.report.trajectories`) and each group's figures are built (:mod:`gengen.report.page`), and the page
is rendered from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.report.build import output_paths, report
    from gengen.report.plots import (
        plot_agreement,
        plot_agreement_matrix,
        plot_forest,
        plot_heatmaps,
        plot_progress,
        plot_raw_vs_partial,
        plot_residuals,
        plot_trajectories,
    )

# Public name -> the module defining it, imported on first use (PEP 562): a sibling such as gengen.report.order or
# gengen.report.paper_tables loads without jinja2, matplotlib and the page builder.
_MODULE_OF: dict[str, str] = {
    "output_paths": "gengen.report.build",
    "plot_agreement": "gengen.report.plots",
    "plot_agreement_matrix": "gengen.report.plots",
    "plot_forest": "gengen.report.plots",
    "plot_heatmaps": "gengen.report.plots",
    "plot_progress": "gengen.report.plots",
    "plot_raw_vs_partial": "gengen.report.plots",
    "plot_residuals": "gengen.report.plots",
    "plot_trajectories": "gengen.report.plots",
    "report": "gengen.report.build",
}

__all__ = [
    "output_paths",
    "plot_agreement",
    "plot_agreement_matrix",
    "plot_forest",
    "plot_heatmaps",
    "plot_progress",
    "plot_raw_vs_partial",
    "plot_residuals",
    "plot_trajectories",
    "report",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
