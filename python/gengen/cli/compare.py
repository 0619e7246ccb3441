"""``gengen compare``: does the partial-correlation pattern agree across models?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gengen.cli._common import (
    SEED_RANGE,
    AnalysisDir,
    answer_line,
    check_output_folder,
    either,
    user_errors_exit,
)
from gengen.stats.limits import MAX_RESAMPLES
from gengen.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, DEFAULT_N_PERM_MANTEL


@user_errors_exit
def compare_command(
    analysis_dir: AnalysisDir,
    source: Annotated[
        str,
        typer.Option(help="runs (per-run correlations), pooled (meta-analysis cells) or models (seeds pooled)."),
    ] = "runs",
    alpha: Annotated[float, typer.Option(help="Significance level on adjusted p-values.")] = 0.05,
    n_perm: Annotated[
        int, typer.Option(help="Permutations of the Mantel test.", max=MAX_RESAMPLES)
    ] = DEFAULT_N_PERM_MANTEL,
    alternative: Annotated[
        str, typer.Option(help=f"Mantel alternative: {either(ALTERNATIVES)}.")
    ] = DEFAULT_ALTERNATIVE,
    seed: Annotated[int, typer.Option(help="Seed of the Mantel permutations.", **SEED_RANGE)] = 0,
    phases: Annotated[
        str | None,
        typer.Option(
            help="Also split each run's checkpoints into an early and a late phase and test each pair's difference: "
            "fraction:AT (share of the run's steps) or id:AT (share of its ID gain), e.g. fraction:0.5; writes "
            "compare_phases.csv."
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ANALYSIS_DIR).")] = None,
) -> None:
    """Sign agreement, Mantel correlation, conflicting pairs, and whether each pair differs between models.

    Writes compare_*.csv (compare_heterogeneity.csv: Cochran's Q per pair across models, sizes and shot
    regimes; compare_differences.csv: every two models), verdict.json and verdict_pairs.csv, and ends with the
    verdict.
    """
    from gengen.across.compare import compare
    from gengen.across.phases import compare_phases, parse_phases
    from gengen.across.verdict import build_verdict
    from gengen.analyse import Analysis
    from gengen.executors.heartbeat import heartbeat

    split = parse_phases(phases) if phases is not None else None
    if out is not None:
        check_output_folder(out)
    analysis = Analysis.from_dir(analysis_dir)
    target = out or analysis_dir
    # Each step takes ~5 s at 32 groups x 64 test sets: progress lines on a non-terminal while one runs.
    with heartbeat("compare", f"comparing {analysis.pairs[['model', 'run']].drop_duplicates().shape[0]} groups"):
        comparison = compare(
            analysis,
            source_level=source,
            alpha=alpha,
            n_perm=n_perm,
            alternative=alternative,
            seed=seed,
        )
        comparison.to_dir(target)
    with heartbeat("compare", "stating the verdict"):
        verdict = build_verdict(analysis, n_perm=n_perm, seed=seed, alpha=alpha)
        verdict.to_dir(target)
    # The answer first (one line), then the run-vs-run table it summarises, then the verdict's detail.
    typer.echo(answer_line(verdict))
    for row in comparison.agreement.itertuples(index=False):
        p_text = (
            f"p <= {row.mantel_p:.2g} (the floor of {row.n_perm} permutations)"
            if row.mantel_p_at_floor
            else (f"p = {row.mantel_p:.4g}")
        )
        typer.echo(
            f"{row.group_a} vs {row.group_b}: sign agreement {row.sign_agreement:.3f} over {row.n_pairs} pairs "
            f"(chance {row.sign_agreement_chance:.3f}); Mantel r = {row.mantel_r:.3f}, {p_text}"
        )
    for line in heterogeneity_lines(comparison.heterogeneity):
        typer.echo(line)
    typer.echo(f"{len(comparison.conflicts)} conflicting pair(s); wrote {target}")
    if split is not None:
        phase_comparison = compare_phases(analysis, split=split[0], at=split[1])
        phase_comparison.to_dir(target)
        for (level, model, run), rows in phase_comparison.table.groupby(["level", "model", "run"], sort=False):
            label = model if level == "model" else f"{model} / {run}"
            typer.echo(
                f"phases {phases} ({level} {label}): {int(rows['significant_phase'].sum())} of {len(rows)} pairs "
                "differ between early and late checkpoints (adjusted p < alpha)"
            )
    for line in verdict.lines():
        if line.startswith("answer: "):  # printed first, above
            continue
        typer.echo(line)


def heterogeneity_lines(table: Any) -> list[str]:
    """One line per comparison and cell: how many pairs differ significantly between its groups."""
    lines: list[str] = []
    if table is None or table.empty:
        return lines
    for (across, cell), rows in table.groupby(["across", "cell"], sort=False):
        groups = max(rows["groups_heterogeneity"].astype(str), key=len).split(";")
        where = "" if cell == "all" else f" ({cell})"
        lines.append(
            f"heterogeneity across {across}s{where}: {int(rows['significant_heterogeneity'].sum())} of {len(rows)} "
            f"pairs differ between {len(groups)} groups (Cochran's Q, adjusted p < alpha)"
        )
    return lines


def register(app: typer.Typer) -> None:
    """Add ``gengen compare`` to the CLI."""
    app.command("compare")(compare_command)
