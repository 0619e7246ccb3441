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

The figures on their own, as matplotlib Figures: :func:`plot_heatmaps`, :func:`plot_raw_vs_partial`,
:func:`plot_residuals`, :func:`plot_trajectories` (of an :class:`~gengen.analyse.Analysis`) and
:func:`plot_agreement` (of a :class:`~gengen.compare.Comparison`). The report reads those data objects; they
know nothing of it.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd
from jinja2 import Environment

from gengen.report import figures as fig
from gengen.report.assets import CSS, JS
from gengen.report.cache import FigureCache, digest
from gengen.report.order import cluster_order, group_key, pooled_correlation, short_labels
from gengen.report.rows import (
    PAIR_VIEW,
    encode_table,
    pairs_view,
    pooled_settings,
    pooled_view,
    round_significant,
    script_json,
    section_settings,
    source_column,
)
from gengen.report.template import TEMPLATE
from gengen.report.trajectories import trajectory_payload

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gengen.analyse.result import Analysis
    from gengen.compare import Comparison
    from gengen.verdict import Verdict

#: Sections of the page per level of the pairs table: (level, anchor, heading, note).
LEVELS = (
    (
        "run",
        "per-group",
        "Partial correlations per group",
        "One group per model and run; each pair's partial correlation across the run's checkpoints.",
    ),
    (
        "across_runs",
        "across-runs",
        "Across runs",
        "One observation per run (its last step); each cell's partial correlations between runs. Runs are "
        "exchangeable: permutations are free and bootstraps iid.",
    ),
    (
        "pooled_residuals",
        "pooled-residuals",
        "Pooled residuals",
        "Residuals of every run of a cell stacked into one series per test set.",
    ),
)
#: Most groups that get residual and trajectory figures of their own (the tables and heatmaps hold every group).
MAX_GROUP_FIGURES = 16
#: Groups whose residual and trajectory figures are open on the page (the others fold, keeping the page short).
GROUPS_OPEN = 2
LEVEL_RANK = {spec[0]: rank for rank, spec in enumerate(LEVELS)}
#: Suffixes of ``out`` that name the HTML file itself rather than a folder.
HTML_SUFFIXES = (".html", ".htm")


def _slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def _figure_stem(*names: str) -> str:
    """A figure-name stem unique per tuple of names (a group's model and run, a forest plot's pair): the slug
    (at most 60 characters, so that a 300-character name stays a valid file name) and a digest of the exact
    names, so that ``a b``, ``a_b`` and ``a/b`` (one slug) get three figures."""
    exact = hashlib.sha256("\x00".join(names).encode()).hexdigest()[:10]
    return f"{_slug('_'.join(names))[:60]}-{exact}"


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
    """A DataFrame as the template's static table record (cells escaped by the template, not here)."""
    present = [column for column in columns if column in frame.columns]
    rows = [
        [_cell(item.item() if hasattr(item, "item") else item) for item in record]
        for record in frame[present].itertuples(index=False, name=None)
    ]
    return {"columns": present, "rows": rows, "empty": empty}


def output_paths(out: str | Path, filename: str = "report.html") -> tuple[Path, Path]:
    """Where the page and its figures go: ``x.html`` and ``x_figures/``, or ``DIR/filename`` and ``DIR/figures/``.

    An existing folder is always a folder, even when its name ends in ``.html``.
    """
    path = Path(out)
    if path.suffix.lower() in HTML_SUFFIXES and not path.is_dir():
        return path, path.parent / f"{path.stem}_figures"
    return path / filename, path / "figures"


class Progress:
    """Progress over the report's steps on stderr: a bar on a terminal, else one line per step."""

    def __init__(self, total: int, enabled: bool, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.bar: Any = None
        self.enabled = enabled
        if enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import Progress as Bar

            self.bar = Bar(console=Console(file=self.stream), transient=True)
            self.task = self.bar.add_task("report", total=total)
            self.bar.start()

    def step(self, description: str) -> None:
        """Announce the step about to run."""
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done - 1, description=description)
        else:
            print(f"report: [{self.done}/{self.total}] {description}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def figure_groups(keys: list[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    """At most ``limit`` groups for the per-group figures: every model's first run, then second runs, …

    Returned in the order of ``keys`` (model size). Figures cost about a second per group, so a study of
    10 models × 10 seeds draws a sample of runs from every model rather than 200 figures.
    """
    rank: dict[str, int] = {}
    turns = []
    for key in keys:
        turns.append(rank.get(key[0], 0))
        rank[key[0]] = turns[-1] + 1
    chosen = sorted(range(len(keys)), key=lambda index: (turns[index], index))[:limit]
    return [keys[index] for index in sorted(chosen)]


def _figure_record(cache: FigureCache, name: str, key: str, draw: Callable[[], Figure], caption: str) -> dict[str, Any]:
    """Draw (or reuse) figure ``name`` as PNG and SVG; the record embeds the same PNG bytes."""
    data, width = cache.figure(name, key, draw)
    return {"data": data, "alt": caption, "caption": caption, "width": width}


def _level_rows(analysis: Analysis, level: str) -> pd.DataFrame:
    table = analysis.pooled_residuals if level == "pooled_residuals" else analysis.pairs
    if table.empty or "level" not in table:
        return table.iloc[0:0]
    return table[table["level"] == level]


def _group_labels(rows: pd.DataFrame) -> pd.Series:
    """``model`` where each model has one group, else ``model / run``."""
    keys = rows[["model", "run"]].drop_duplicates()
    if keys["model"].is_unique:
        return rows["model"].astype(str)
    return rows["model"].astype(str) + " / " + rows["run"].astype(str)


def _section(analysis: Analysis, level: str, rows: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The heatmap and pairs-table payloads of one level, and its test-set order."""
    keys = sorted(dict.fromkeys(zip(rows["model"], rows["run"], strict=True)), key=lambda key: group_key(*key))
    present = set(rows["testset_a"]) | set(rows["testset_b"])
    names = [name for name in analysis.settings.get("ood_resolved", []) if name in present] or sorted(present)
    per_group = [rows[(rows["model"] == model) & (rows["run"] == run)] for model, run in keys]
    pooled = pooled_correlation([fig.square(group, names, "r_partial") for group in per_group])
    names = [names[i] for i in cluster_order(pooled)]
    labels, stripped = short_labels(names)
    single = len({model for model, _ in keys}) == len(keys)
    upper = np.triu_indices(len(names), 1)
    panels = []
    for (model, run), group in zip(keys, per_group, strict=True):
        values = {
            column: round_significant(fig.square(group, names, column)[upper], 3)
            for column in ("r_partial", "r_raw")
            if column in group
        }
        significant = fig.square(group, names, "significant")
        panels.append(
            {
                "title": model if single else f"{model} / {run}",
                "values": values,
                "p_adjusted": round_significant(fig.square(group, names, "p_adjusted")[upper], 3),
                "sig": "".join("1" if value == 1 else "0" for value in significant[upper]),
            }
        )
    from matplotlib import colormaps

    palette = [
        "#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in colormaps[fig.CMAP](k / 255)[:3])) for k in range(256)
    ]
    heatmap = {
        "names": names,
        "labels": [labels[name] for name in names],
        "values": [column for column in ("r_partial", "r_raw") if column in rows],
        "panels": panels,
        "palette": palette,
        "stripped": stripped,
    }
    rank = {key: index for index, key in enumerate(keys)}
    ordered = rows.assign(
        _group=[rank[key] for key in zip(rows["model"], rows["run"], strict=True)],
        _strength=-pd.to_numeric(rows["r_partial"], errors="coerce").abs(),
    ).sort_values(["_group", "_strength"], kind="stable")
    view = pairs_view(ordered, _group_labels(ordered))
    table = encode_table(view, dict(PAIR_VIEW))
    table["pageSize"] = 25
    return heatmap, table, names


def comparison_figure_records(
    cache: FigureCache, analysis: Analysis, comparison: Comparison, verdict: Verdict
) -> list[dict[str, Any]]:
    """The model × model agreement matrix and a forest plot of the verdict's strongest pair of each class."""
    from gengen.heterogeneity import group_estimates
    from gengen.report import comparison_figures as cf  # the module, not a function of this one

    records = [
        _figure_record(
            cache,
            "agreement_matrix",
            digest(comparison.agreement),
            lambda: cf.agreement_matrix(comparison),
            "Every two groups: Mantel r of their partial-correlation matrices and the share of pairs with the same "
            "sign.",
        )
    ]
    estimates = group_estimates(analysis.pairs)
    for name in ("model-dependent", "consistent positive", "consistent negative"):
        for example in verdict.examples.get(name, [])[:1]:
            a, b = example["testset_a"], example["testset_b"]
            rows = estimates[(estimates["testset_a"] == a) & (estimates["testset_b"] == b)]
            records.append(
                _figure_record(
                    cache,
                    f"forest_{_figure_stem(a, b)}",
                    digest(rows),
                    partial(cf.forest, estimates, a, b),
                    f"{a} / {b} ({name}): each model's partial correlation with its 95% interval (seeds pooled); "
                    "dashed: the common estimate.",
                )
            )
    return records


def plot_agreement_matrix(comparison: Comparison) -> Figure:
    """Model × model matrices of Mantel r and sign agreement.

    Parameters
    ----------
    comparison : Comparison
        From :func:`gengen.compare.compare`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved.
    """
    from gengen.report.comparison_figures import agreement_matrix

    return agreement_matrix(comparison)


def plot_forest(analysis: Analysis, testset_a: str, testset_b: str) -> Figure:
    """Forest plot of one pair across models: estimate and interval per model, the common estimate, Q and p.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse`.
    testset_a, testset_b : str
        The pair.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved.
    """
    from gengen.heterogeneity import group_estimates
    from gengen.report.comparison_figures import forest

    return forest(group_estimates(analysis.pairs), testset_a, testset_b)


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    """The template's verdict block: the paragraph, one row per class (count, strongest examples), agreement."""
    from gengen.verdict import CLASSES

    rows = [
        {
            "name": name,
            "count": verdict.counts.get(name, 0),
            "examples": [example["label"] for example in verdict.examples.get(name, [])],
        }
        for name in CLASSES
    ]
    agreement = ""
    mantel = verdict.agreement.get("mantel_r", {})
    if mantel and mantel.get("n_at_floor"):
        agreement = (
            f"{mantel['n_at_floor']} of {verdict.agreement['n_comparisons']} Mantel p-values are at the floor of "
            f"the permutations (p ≤ {mantel['p_floor']:.2g}): smaller p-values cannot be resolved."
        )
    return {"text": verdict.text, "rows": rows, "agreement": agreement}


def _comparison_text(agreement: pd.DataFrame, n_groups: int, alpha: float) -> str:
    """One paragraph over every comparison of two groups (not just the first)."""
    if agreement.empty:
        return "Only one group: nothing to compare."
    if len(agreement) == 1:
        best = agreement.iloc[0]
        return (
            f"{best['group_a']} vs {best['group_b']}: {best['sign_agreement']:.0%} of "
            f"{int(best['n_pairs'])} pairs have the same sign; the partial-correlation matrices "
            f"correlate at r = {best['mantel_r']:.2f} (Mantel p = {best['mantel_p']:.3g})."
        )
    sign = agreement["sign_agreement"]
    mantel = agreement["mantel_r"]
    below = int((agreement["mantel_p"] < alpha).sum())
    weakest = agreement.loc[mantel.idxmin()]
    return (
        f"{len(agreement)} comparisons of {n_groups} groups. Sign agreement ranges from {sign.min():.0%} to "
        f"{sign.max():.0%} of pairs (median {sign.median():.0%}); the partial-correlation matrices correlate at "
        f"Mantel r = {mantel.min():.2f} to {mantel.max():.2f} (median {mantel.median():.2f}); {below} of "
        f"{len(agreement)} comparisons have Mantel p < {alpha}. Least alike: {weakest['group_a']} vs "
        f"{weakest['group_b']} (r = {weakest['mantel_r']:.2f})."
    )


def _comparison_key(label: str) -> tuple[object, ...]:
    model, _, run = str(label).partition(" / ")
    return group_key(model, run)


def _oriented(agreement: pd.DataFrame) -> pd.DataFrame:
    """The agreement table with the smaller model as ``group_a`` of each row, rows in model-size order.

    Sign agreement and the Mantel correlation are symmetric in the two groups, so only the labels swap.
    """
    if agreement.empty:
        return agreement
    table = agreement.copy()
    swap = [_comparison_key(b) < _comparison_key(a) for a, b in zip(table["group_a"], table["group_b"], strict=True)]
    swap_mask = np.asarray(swap, dtype=bool)
    table.loc[swap_mask, ["group_a", "group_b"]] = table.loc[swap_mask, ["group_b", "group_a"]].to_numpy()
    order = sorted(
        range(len(table)),
        key=lambda i: (_comparison_key(table["group_a"].iloc[i]), _comparison_key(table["group_b"].iloc[i])),
    )
    return table.iloc[order].reset_index(drop=True)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a failure never leaves half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)  # mkstemp makes it private; the page is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def plot_heatmaps(analysis: Analysis, value: str = "r_partial") -> Figure:
    """Per-group heatmaps of one pairs-table column side by side, with a dot on significant pairs.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    value : str
        The column drawn (``"r_partial"``, ``"r_raw"``, ...).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.heatmaps(analysis, value=value)


def plot_raw_vs_partial(analysis: Analysis, model: str, run: str | None = None) -> Figure:
    """Raw and partial correlation heatmaps of one run, side by side (test sets clustered).

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    model : str
        The model whose run is drawn.
    run : str, optional
        Needed only when ``model`` has several runs.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.raw_vs_partial(analysis, *analysis.resolve(model, run))


def plot_residuals(
    analysis: Analysis, model: str, run: str | None = None, pairs: list[tuple[str, str]] | None = None
) -> Figure:
    """Scatter plots of the residuals (after regressing out ID) of chosen pairs of one run, coloured by step.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    model : str
        The model whose run is drawn.
    run : str, optional
        Needed only when ``model`` has several runs.
    pairs : list of (str, str), optional
        The pairs drawn (default the run's strongest partial correlations).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.residual_scatter(analysis, *analysis.resolve(model, run), pairs=pairs)


def plot_trajectories(analysis: Analysis, model: str, run: str | None = None) -> Figure:
    """ID and the OOD test sets whose scores move most, over the steps of one run.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    model : str
        The model whose run is drawn.
    run : str, optional
        Needed only when ``model`` has several runs.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.trajectories(analysis, *analysis.resolve(model, run))


def plot_agreement(comparison: Comparison) -> Figure:
    """The cross-group agreement figure: partial correlations pair by pair, with Mantel r, p and sign agreement.

    Parameters
    ----------
    comparison : Comparison
        From :func:`gengen.compare.compare`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.agreement(comparison)


def report(
    analysis: Analysis,
    comparison: Comparison | None = None,
    out_dir: str | Path = ".",
    *,
    scatter_pairs: list[tuple[str, str]] | None = None,
    title: str = "gengen report",
    filename: str = "report.html",
    progress: bool = False,
    verdict: Verdict | None = None,
) -> Path:
    """Write the HTML report and its figures; the page opens with the verdict.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    comparison : Comparison, optional
        From :func:`gengen.compare.compare`; computed with its defaults when omitted.
    out_dir : str or Path
        A folder (the page is ``out_dir/filename``, figures go to ``out_dir/figures/``) or a file name ending
        in ``.html`` (figures go to ``<stem>_figures/`` beside it).
    scatter_pairs : list of (str, str), optional
        Pairs for the residual scatter plots (default each run's strongest partial correlations).
    title : str
        Page title.
    filename : str
        Name of the HTML file when ``out_dir`` is a folder.
    progress : bool
        Report progress on stderr: a bar on a terminal, one line per step otherwise.
    verdict : Verdict, optional
        From :func:`gengen.verdict.build_verdict`; computed when omitted.

    Returns
    -------
    Path
        The HTML file.
    """
    from gengen.compare import compare
    from gengen.verdict import build_verdict

    path, figure_dir = output_paths(out_dir, filename)
    from gengen._files import inside

    inside(path.parent, figure_dir)  # a figures/ linking elsewhere is not written through
    if comparison is None:
        comparison = compare(analysis)
    if verdict is None:
        verdict = build_verdict(analysis, comparison)
    alpha = float(analysis.settings.get("alpha", 0.05))
    levels = [(spec, _level_rows(analysis, spec[0])) for spec in LEVELS]
    levels = [(spec, rows) for spec, rows in levels if not rows.empty]
    run_keys = sorted(analysis.groups("run"), key=lambda key: group_key(*key))
    main_level = fig.level_of(analysis)
    figure_keys = figure_groups(run_keys, MAX_GROUP_FIGURES)
    steps_total = 2 + 2 * len(figure_keys) + 1
    meter = Progress(steps_total, progress)
    cache = FigureCache(figure_dir)
    try:
        payload: dict[str, Any] = {"tables": {}, "heatmaps": {}, "trajectories": {}}
        sections = []
        main_order: list[str] = []
        for (level, anchor, heading, note), rows in levels:
            heatmap, table, order = _section(analysis, level, rows)
            payload["heatmaps"][level] = heatmap
            payload["tables"][level] = table
            if level == main_level:
                main_order = order
            sections.append(
                {
                    "key": level,
                    "anchor": anchor,
                    "heading": heading,
                    "note": note,
                    "settings": section_settings(rows, alpha),
                    "stripped": heatmap["stripped"],
                }
            )

        meter.step("heatmaps")
        main_rows = _level_rows(analysis, main_level)
        heatmap_columns = ("model", "run", "testset_a", "testset_b", "r_partial", "significant")
        cache.figure(
            "heatmaps_partial",
            digest(main_rows[[c for c in heatmap_columns if c in main_rows]], main_order, main_level, alpha),
            lambda: fig.heatmaps(analysis, order=main_order or None, level=main_level),
        )

        meter.step("agreement across groups")
        agreement = _oriented(comparison.agreement)
        comparison_record = None
        comparison_key = digest(comparison.per_pair, comparison.agreement)
        n_groups = len(comparison.groups)
        if n_groups > 1:
            comparison_record = {
                "text": _comparison_text(agreement, n_groups, alpha),
                "figures": [
                    _figure_record(
                        cache,
                        "agreement",
                        comparison_key,
                        lambda: fig.agreement(comparison),
                        "Partial correlation of each pair in one group against another (first six comparisons).",
                    ),
                    *comparison_figure_records(cache, analysis, comparison, verdict),
                ],
                "conflicts": not comparison.conflicts.empty,
            }
            payload["tables"]["agreement"] = encode_table(agreement)
            payload["tables"]["conflicts"] = encode_table(comparison.conflicts)
        else:
            cache.figure("agreement", comparison_key, lambda: fig.agreement(comparison))

        pooled_record = None
        if not analysis.pooled.empty:
            pooled = analysis.pooled
            if "r_random" in pooled:
                strength = pd.to_numeric(pooled["r_random"], errors="coerce").abs()
                pooled = pooled.reindex(strength.sort_values(ascending=False, kind="stable").index)
            payload["tables"]["pooled"] = encode_table(pooled_view(pooled, list(analysis.settings.get("by", []))))
            pooled_record = {"settings": pooled_settings(analysis.pooled)}

        trajectories = None
        if run_keys:
            trajectories = trajectory_payload(analysis, run_keys, main_order)
            payload["trajectories"]["scores"] = trajectories["payload"]

        group_records = []
        single = len({model for model, _ in run_keys}) == len(run_keys)
        for model, run in figure_keys:
            stem = _figure_stem(model, run)
            label = model if single else f"{model} / {run}"
            wide = analysis.wide(model, run)
            rows = main_rows[(main_rows["model"] == model) & (main_rows["run"] == run)]
            inputs = (wide, model, run, analysis.settings.get("fit"), analysis.settings.get("id_testset"))
            meter.step(f"residuals {label}")
            residuals = _figure_record(
                cache,
                f"residuals_{stem}",
                digest(*inputs, rows[["testset_a", "testset_b", "r_partial"]], scatter_pairs),
                partial(fig.residual_scatter, analysis, model, run, scatter_pairs),
                f"Residuals after regressing out the ID score, {label}: the strongest partial correlations.",
            )
            meter.step(f"trajectories {label}")
            directions = (fig.metric_sign(analysis, "id"), fig.metric_sign(analysis, "ood"))
            lines = _figure_record(
                cache,
                f"trajectories_{stem}",
                digest(*inputs, directions, fig.TOP_TRAJECTORIES),
                partial(fig.trajectories, analysis, model, run),
                f"ID and the OOD test sets that move most over training, {label}.",
            )
            group_records.append({"label": label, "figures": [residuals, lines]})

        meter.step(f"page ({cache.drawn} figures drawn, {cache.reused} unchanged since the last report)")
        summary = pd.DataFrame(analysis.summary()["groups"])
        if not summary.empty:
            # Counts only: the methods (lists per group in summary.json) are in each section's settings.
            summary = summary[
                [c for c in summary.columns if not summary[c].map(lambda v: isinstance(v, (list, dict))).any()]
            ]
            summary = summary.iloc[
                sorted(
                    range(len(summary)),
                    key=lambda i: (
                        LEVEL_RANK.get(summary["level"].iloc[i], len(LEVEL_RANK)),
                        *group_key(summary["model"].iloc[i], summary["run"].iloc[i]),
                    ),
                )
            ]
        settings_rows = [
            (key, ", ".join(map(str, value)) if isinstance(value, list) else value)
            for key, value in analysis.settings.items()
            if key != "ood_resolved"
        ]
        settings_rows.append(("ood_resolved", ", ".join(analysis.settings.get("ood_resolved", []))))
        settings_rows += [(f"compare.{key}", value) for key, value in comparison.settings.items() if key != "groups"]
        deciding_columns = sorted(
            {source_column(value) for rows in (rows for _, rows in levels) for value in rows.get("p_adjusted_from", [])}
            - {""}
        )
        contents = [("verdict", "Verdict"), *((spec[1], spec[2]) for spec, _ in levels)]
        if comparison_record:
            contents.append(("across-groups", "Across groups"))
        if pooled_record:
            contents.append(("pooled", "Pooled across runs"))
        if trajectories:
            contents.append(("trajectories", "Scores over training"))
        if group_records:
            contents.append(("residuals", "Residuals and trajectories per group"))
        contents += [("settings", "Options as requested"), ("versions", "Package versions")]
        environment = Environment(autoescape=True, trim_blocks=False, lstrip_blocks=False)
        html = environment.from_string(TEMPLATE).render(
            title=title,
            generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            settings=analysis.settings,
            versions=analysis.versions,
            warnings=analysis.warnings,
            n_groups=sum(len(dict.fromkeys(zip(rows["model"], rows["run"], strict=True))) for _, rows in levels),
            deciding=", ".join(deciding_columns) or "p_adjusted",
            figure_folder=figure_dir.name,
            contents=contents,
            tables={"summary": _table(summary, list(summary.columns), "no groups")},
            sections=sections,
            comparison=comparison_record,
            verdict=verdict_record(verdict),
            pooled=pooled_record,
            trajectories=trajectories,
            groups=group_records,
            groups_left_out=len(run_keys) - len(figure_keys),
            groups_open=GROUPS_OPEN,
            settings_rows=settings_rows,
            css=CSS,
            script=JS,
            payload=script_json(payload),
        )
        cache.save()
        _write_atomic(path, html)
    finally:
        meter.close()
    return path


__all__ = [
    "output_paths",
    "plot_agreement",
    "plot_agreement_matrix",
    "plot_forest",
    "plot_heatmaps",
    "plot_raw_vs_partial",
    "plot_residuals",
    "plot_trajectories",
    "report",
]
