"""The report's page: its named steps, from the checked tables to the rendered HTML, and the paths it writes.

:mod:`gengen.report` hands on :func:`report`, :func:`output_paths` and the figures of :mod:`gengen.report.plots`; its
docstring describes what the page holds.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pandas as pd
from jinja2 import Environment

from gengen._files import write_text_atomic
from gengen.report import figures as fig
from gengen.report.assets import CSS, JS
from gengen.report.cache import FigureCache, digest
from gengen.report.inputs import check_analysis
from gengen.report.order import group_key
from gengen.report.page import (
    MAX_PAGE_ROWS,
    across_run_answer,
    comparison_figure_records,
    comparison_text,
    figure_record,
    figure_stem,
    level_rows,
    levels_text,
    oriented,
    section,
    static_table,
    verdict_record,
)
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
from gengen.report.rows import encode_table, pooled_settings, pooled_view, script_json, section_settings, source_column
from gengen.report.template import TEMPLATE
from gengen.report.trajectories import progress_figure, trajectory_payload

if TYPE_CHECKING:
    from gengen.across.compare import Comparison
    from gengen.across.verdict import Verdict
    from gengen.analyse.result import Analysis

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
#: Most groups that get residual and trajectory figures of their own (the tables and heatmaps hold every group;
#: ``gengen report --pair`` draws one pair in every group). About 0.7 s of CPU per group: 16 groups took 11 s.
MAX_GROUP_FIGURES = 4
#: Groups whose residual and trajectory figures are open on the page (the others fold, keeping the page short).
GROUPS_OPEN = 2
#: One level's section spec and its rows.
Level = tuple[tuple[str, str, str, str], pd.DataFrame]
LEVEL_RANK = {spec[0]: rank for rank, spec in enumerate(LEVELS)}
#: Suffixes of ``out`` that name the HTML file itself rather than a folder.
HTML_SUFFIXES = (".html", ".htm")


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


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a failure never leaves half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


def _level_sections(
    analysis: Analysis,
    levels: list[Level],
    alpha: float,
    payload: dict[str, Any],
    main_level: str,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Step 1: each level's heatmaps and pairs table into ``payload``; the sections and the main level's order."""
    sections = []
    main_order: list[str] = []
    for (level, anchor, heading, note), rows in levels:
        heatmap, table, order = section(analysis, level, rows)
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
    return sections, main_order


def _heatmap_figure(cache: FigureCache, analysis: Analysis, main_level: str, order: list[str], alpha: float) -> None:
    """Step 2: the static heatmaps of the main level and the runs' trajectories (PNG and SVG beside the page)."""
    rows = level_rows(analysis, main_level)
    columns = [c for c in ("model", "run", "testset_a", "testset_b", "r_partial", "significant") if c in rows]
    cache.figure(
        "heatmaps_partial",
        digest(rows[columns], order, main_level, alpha),
        lambda: fig.heatmaps(analysis, order=order or None, level=main_level),
    )
    if analysis.groups("run"):  # every run on its training progress (its code is not figures.py: in the key)
        code = Path(progress_figure.__code__.co_filename).read_bytes()
        settings = (analysis.settings.id_testset, list(analysis.settings.ood_resolved))
        cache.figure("scores_over_training", digest(analysis.scores, settings, code), lambda: progress_figure(analysis))


def _comparison_record(
    cache: FigureCache,
    analysis: Analysis,
    comparison: Comparison,
    verdict: Verdict,
    alpha: float,
    payload: dict[str, Any],
) -> dict[str, Any] | None:
    """Step 3: the agreement across groups (text, figures, tables); None with a single group."""
    agreement = oriented(comparison.agreement)
    key = digest(comparison.per_pair, comparison.agreement)
    n_groups = len(comparison.groups)
    if n_groups <= 1:
        cache.figure("agreement", key, lambda: fig.agreement(comparison))
        return None
    figures = [
        figure_record(
            cache,
            "agreement",
            key,
            lambda: fig.agreement(comparison),
            "Partial correlation of each pair in one group against another (first six comparisons).",
        ),
        *comparison_figure_records(cache, analysis, comparison, verdict),
    ]
    payload["tables"]["agreement"] = encode_table(agreement)
    payload["tables"]["conflicts"] = encode_table(comparison.conflicts)
    return {
        "text": comparison_text(agreement, n_groups, alpha),
        "levels": levels_text(n_groups, verdict),
        "figures": figures,
        "conflicts": not comparison.conflicts.empty,
    }


def _pooled_record(analysis: Analysis, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Step 4: the pooled (meta-analysis) table, strongest first; None without one."""
    if analysis.pooled.empty:
        return None
    pooled = analysis.pooled
    if "r_random" in pooled:
        strength = pd.to_numeric(pooled["r_random"], errors="coerce").abs()
        pooled = pooled.reindex(strength.sort_values(ascending=False, kind="stable").index)
    total = len(pooled)
    limit = MAX_PAGE_ROWS // 2
    if total > limit:  # the strongest rows and every significant one; pooled.csv holds them all
        flag = pooled.get("significant_random", pd.Series(False, index=pooled.index))
        significant = flag.fillna(False).astype(bool)
        strongest = pd.Series(range(total), index=pooled.index) < limit - int(significant.sum())
        pooled = pooled[strongest | significant]
    table = encode_table(pooled_view(pooled, list(analysis.settings.by)))
    table["total"] = total
    table["kept"] = "every significant row and the strongest |r_random|"
    table["file"] = "pooled.csv"
    payload["tables"]["pooled"] = table
    return {"settings": pooled_settings(analysis.pooled)}


def _group_records(
    cache: FigureCache,
    analysis: Analysis,
    keys: list[tuple[str, str]],
    single: bool,
    main_level: str,
    scatter_pairs: list[tuple[str, str]] | None,
    meter: Progress,
) -> list[dict[str, Any]]:
    """Step 5: the residual and trajectory figures of each chosen group."""
    main_rows = level_rows(analysis, main_level)
    directions = (fig.metric_sign(analysis, "id"), fig.metric_sign(analysis, "ood"))
    records = []
    for model, run in keys:
        stem = figure_stem(model, run)
        label = model if single else f"{model} / {run}"
        rows = main_rows[(main_rows["model"] == model) & (main_rows["run"] == run)]
        inputs = (
            analysis.wide(model, run),
            model,
            run,
            analysis.settings.fit,
            analysis.settings.id_testset,
        )
        meter.step(f"residuals {label}")
        residuals = figure_record(
            cache,
            f"residuals_{stem}",
            digest(*inputs, rows[["testset_a", "testset_b", "r_partial"]], scatter_pairs),
            partial(fig.residual_scatter, analysis, model, run, scatter_pairs),
            f"Residuals after regressing out the ID score, {label}: the strongest partial correlations.",
        )
        meter.step(f"trajectories {label}")
        lines = figure_record(
            cache,
            f"trajectories_{stem}",
            digest(*inputs, directions, fig.TOP_TRAJECTORIES),
            partial(fig.trajectories, analysis, model, run),
            f"ID and the OOD test sets that move most over training, {label}.",
        )
        records.append({"label": label, "figures": [residuals, lines]})
    return records


def _pair_records(
    cache: FigureCache,
    analysis: Analysis,
    comparison: Comparison,
    verdict: Verdict,
    chosen: list[tuple[str, str]],
) -> list[dict[str, Any]]:
    """The chosen pairs (``--pair A,B``): each one's trajectories in every model and run, and its row of every
    table (its residual scatter is in every group's figures below)."""
    from gengen.report.pair import pair_tables, pair_trajectories

    records = []
    id_name = analysis.settings.id_testset
    for a, b in chosen:
        scores = analysis.scores[analysis.scores["testset"].isin([a, b, id_name])]
        figure = figure_record(
            cache,
            f"pair_{figure_stem(a, b)}",
            digest(scores[["model", "run", "step", "testset", "value"]], a, b, id_name),
            partial(pair_trajectories, analysis, a, b),
            f"{a} and {b} (and ID) over training in every model and run.",
        )
        tables = pair_tables(analysis, comparison, verdict, a, b)
        records.append(
            {"label": f"{a} / {b}", "anchor": f"pair-{figure_stem(a, b)}", "figure": figure, "tables": tables}
        )
    return records


def _summary_table(analysis: Analysis) -> dict[str, Any]:
    """The counts per group (the methods, lists per group in summary.json, are in each section's settings)."""
    summary = pd.DataFrame(analysis.summary()["groups"])
    if not summary.empty:
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
        if "n_steps" in summary and (summary["level"] == "across_runs").all():
            summary = summary.rename(columns={"n_steps": "n_runs"})  # one score per run: the rows count runs
    return static_table(summary, list(summary.columns), "no groups")


def _settings_rows(analysis: Analysis, comparison: Comparison) -> list[tuple[str, Any]]:
    """The options as requested: the analysis' settings, then the comparison's."""
    rows = [  # as summary.json records them: an option an older analysis did not record stays out
        (key, ", ".join(map(str, value)) if isinstance(value, list) else value)
        for key, value in analysis.settings.as_dict().items()
        if key not in ("ood_resolved", "related_pairs")
    ]
    rows.append(("ood_resolved", ", ".join(analysis.settings.ood_resolved)))
    related = analysis.settings.related_pairs  # one row per pair in summary.json; counted here
    rows.append(("related_pairs", f"{len(related)} (the pairs table's related column)"))
    rows += [(f"compare.{key}", value) for key, value in comparison.settings.items() if key != "groups"]
    return rows


def _contents(levels: list[Level], parts: dict[str, Any]) -> list[tuple[str, str]]:
    """The page's table of contents: the verdict, each level, then the parts the page has."""
    contents = [
        ("verdict", "Verdict"),
        *((pair["anchor"], f"Pair {pair['label']}") for pair in parts.get("pairs") or []),
        *((spec[1], spec[2]) for spec, _ in levels),
    ]
    for key, anchor, heading in (
        ("comparison", "across-groups", "Across groups"),
        ("pooled", "pooled", "Pooled across runs"),
        ("trajectories", "trajectories", "Scores over training"),
        ("groups", "residuals", "Residuals and trajectories per group"),
    ):
        if parts.get(key):
            contents.append((anchor, heading))
    return [*contents, ("settings", "Options as requested"), ("versions", "Package versions")]


#: The model a warning is about: ``model 'pythia-2.8b'``.
_WARNING_MODEL = re.compile(r"model '([^']+)'")


def warnings_by_model(warnings: list[str]) -> list[str]:
    """The warnings with those about one model in model-size order (70m < 2.8b < 12b, not as strings sort them);
    warnings about no model first, in their order."""
    from gengen.report.order import model_key

    def key(item: tuple[int, str]) -> tuple[object, ...]:
        found = _WARNING_MODEL.search(item[1])
        return (0, item[0]) if found is None else (1, model_key(found.group(1)), item[0])

    return [text for _, text in sorted(enumerate(warnings), key=key)]


def _requested_p(analysis: Analysis) -> str | None:
    """The ``primary_p`` the analysis' options asked for (None when its record did not say which tests)."""
    return None if "inference" in analysis.settings.unrecorded else analysis.settings.primary_p


def deciding_note(deciding: list[str], requested: Any) -> str:
    """Why the p-value that decided differs from the ``primary_p`` the options asked for (empty when it does not)."""
    if not requested or deciding == [requested]:
        return ""
    if deciding == ["p_loo_max"]:
        return (
            f"primary_p {requested} as requested, taken at its largest over the deletions of any checkpoint that "
            "carries more than half of the estimate"
        )
    return f"the options asked for primary_p {requested}; the rows record {', '.join(deciding) or 'none'}"


def _render(
    analysis: Analysis,
    comparison: Comparison,
    levels: list[Level],
    parts: dict[str, Any],
    payload: dict[str, Any],
    title: str,
    figure_dir: Path,
) -> str:
    """Step 6: the page, from the parts built by the steps before."""
    deciding = sorted(
        {source_column(value) for _, rows in levels for value in pd.unique(rows.get("p_adjusted_from", pd.Series()))}
        - {""}
    )
    environment = Environment(autoescape=True, trim_blocks=False, lstrip_blocks=False)
    return environment.from_string(TEMPLATE).render(
        title=title,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        settings=analysis.settings.as_dict(),  # the values as recorded, for the page's text
        versions=analysis.versions,
        warnings=warnings_by_model(analysis.warnings),
        n_groups=sum(len(rows[["model", "run"]].drop_duplicates()) for _, rows in levels),
        deciding=", ".join(deciding) or "p_adjusted",
        deciding_note=deciding_note(deciding, _requested_p(analysis)),
        figure_folder=figure_dir.name,
        contents=_contents(levels, parts),
        tables={"summary": _summary_table(analysis)},
        settings_rows=_settings_rows(analysis, comparison),
        groups_open=GROUPS_OPEN,
        css=CSS,
        script=JS,
        payload=script_json(payload),
        **parts,
    )


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
        From :func:`gengen.across.compare.compare`; computed with its defaults when omitted.
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
        From :func:`gengen.across.verdict.build_verdict`; computed when omitted.

    Returns
    -------
    Path
        The HTML file.

    Raises
    ------
    GengenError
        A pairs or scores table the report cannot draw (:func:`gengen.report.inputs.check_analysis`), or an
        output folder whose figures folder leads out of it.
    """
    from gengen._files import check_replaceable, inside
    from gengen.across.compare import compare
    from gengen.across.verdict import build_verdict

    path, figure_dir = output_paths(out_dir, filename)
    inside(path.parent, figure_dir.name)  # a figures/ linking elsewhere is not written through
    check_replaceable(path, "the report")
    check_analysis(analysis)
    comparison = comparison if comparison is not None else compare(analysis)
    verdict = verdict if verdict is not None else build_verdict(analysis, comparison)
    alpha = analysis.settings.alpha
    levels = [(spec, level_rows(analysis, spec[0])) for spec in LEVELS]
    levels = [(spec, rows) for spec, rows in levels if not rows.empty]
    run_keys = sorted(analysis.groups("run"), key=lambda key: group_key(*key))
    main_level = fig.level_of(analysis)
    figure_keys = figure_groups(run_keys, MAX_GROUP_FIGURES)
    meter = Progress(2 + 2 * len(figure_keys) + 1, progress)
    cache = FigureCache(figure_dir)
    try:
        payload: dict[str, Any] = {"tables": {}, "heatmaps": {}, "trajectories": {}}
        sections, main_order = _level_sections(analysis, levels, alpha, payload, main_level)
        meter.step("heatmaps")
        _heatmap_figure(cache, analysis, main_level, main_order, alpha)
        meter.step("agreement across groups")
        parts: dict[str, Any] = {
            "sections": sections,
            "verdict": verdict_record(verdict),
            "across_answer": across_run_answer(analysis, alpha),
            "comparison": _comparison_record(cache, analysis, comparison, verdict, alpha, payload),
            "pooled": _pooled_record(analysis, payload),
            "trajectories": trajectory_payload(analysis, run_keys, main_order) if run_keys else None,
            "groups_left_out": len(run_keys) - len(figure_keys),
        }
        if parts["trajectories"]:
            payload["trajectories"]["scores"] = parts["trajectories"]["payload"]
        single = len({model for model, _ in run_keys}) == len(run_keys)
        parts["groups"] = _group_records(cache, analysis, figure_keys, single, main_level, scatter_pairs, meter)
        parts["pairs"] = _pair_records(cache, analysis, comparison, verdict, scatter_pairs or [])
        meter.step(f"page ({cache.drawn} figures drawn, {cache.reused} unchanged since the last report)")
        html = _render(analysis, comparison, levels, parts, payload, title, figure_dir)
        cache.save()
        _write_atomic(path, html)
    finally:
        meter.close()
    return path


#: The old private name of :func:`gengen.report.page.figure_stem` (tests and callers import it from here).
_figure_stem = figure_stem

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
