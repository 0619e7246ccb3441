"""``gengen report``: one self-contained HTML report (figures also as PNG and SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import AnalysisDir, user_errors_exit
from gengen.errors import GengenError


def _pairs(values: list[str] | None) -> list[tuple[str, str]] | None:
    """``A,B`` strings as (A, B) tuples."""
    if not values:
        return None
    out = []
    for value in values:
        parts = [part.strip() for part in value.split(",")]
        if len(parts) != 2 or not all(parts):
            raise GengenError(f"--pair: expected two test sets as A,B, got {value!r}")
        out.append((parts[0], parts[1]))
    return out


@user_errors_exit
def report_command(
    analysis_dir: AnalysisDir,
    out: Annotated[
        Path | None,
        typer.Option(
            help="A file ending in .html (figures go to <name>_figures/ beside it), or a folder for report.html "
            "and figures/ (default: ANALYSIS_DIR)."
        ),
    ] = None,
    pair: Annotated[
        list[str] | None,
        typer.Option(
            help="A pair A,B (repeatable): its trajectories (A, B and ID over training) in every model and run, its "
            "row of every table, and its residual scatter in each group."
        ),
    ] = None,
    title: Annotated[str, typer.Option(help="Title of the report.")] = "gengen report",
    study: Annotated[
        str | None,
        typer.Option(
            help="Report one study of an analysis of several (its rows in every table; the comparison is computed "
            "again for its groups). An error when the analysis records no study or not this one."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
) -> None:
    """Write report.html: heatmaps, agreement across models, residuals, trajectories, tables, settings."""
    from gengen._files import inside
    from gengen.across.compare import Comparison, compare
    from gengen.across.verdict import build_verdict
    from gengen.analyse import Analysis
    from gengen.cli._common import check_output_folder
    from gengen.executors.heartbeat import heartbeat
    from gengen.report.build import output_paths, report
    from gengen.report.inputs import check_analysis, select_study

    # --out is checked before any work (and before the first progress line): a file in the way, a folder that
    # cannot be written, a figures/ folder linking out of it.
    page, figures = output_paths(out or analysis_dir)
    check_output_folder(page.parent, "--out")
    inside(page.parent, figures.name)
    analysis = Analysis.from_dir(analysis_dir)
    check_analysis(analysis, analysis_dir)  # a tampered table: one line naming its file, before any drawing
    whole = analysis
    if study is not None:
        analysis = select_study(analysis, study, str(analysis_dir))
    scatter = _pairs(pair)
    known = set(analysis.settings.ood_resolved)
    for a, b in scatter or []:
        for name in (a, b):
            if name not in known:
                raise GengenError(f"--pair: {name!r} is not an OOD test set of this analysis")
    # Comparing and the verdict take ~5 s each at 32 groups x 64 test sets, before the first figure's line.
    with heartbeat("report", "comparing the groups and stating the verdict", enabled=not quiet):
        if analysis is whole and (analysis_dir / "compare_long.csv").exists():
            comparison = Comparison.from_dir(analysis_dir)
        else:
            comparison = compare(analysis)
        verdict = build_verdict(analysis, comparison)
    path = report(
        analysis,
        comparison,
        out or analysis_dir,
        scatter_pairs=scatter,
        title=title,
        progress=not quiet,
        verdict=verdict,
    )
    typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add ``gengen report`` to the CLI."""
    app.command("report")(report_command)
