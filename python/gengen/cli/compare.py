"""``gengen compare``: does the partial-correlation pattern agree across models?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import SEED_RANGE, check_output_folder, either, user_errors_exit
from gengen.limits import MAX_RESAMPLES
from gengen.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, DEFAULT_N_PERM_MANTEL


@user_errors_exit
def compare_command(
    analysis_dir: Annotated[Path, typer.Argument(help="Output folder of gengen analyse.")],
    source: Annotated[str, typer.Option(help="runs (per-run correlations) or pooled (meta-analysis).")] = "runs",
    alpha: Annotated[float, typer.Option(help="Significance level on adjusted p-values.")] = 0.05,
    n_perm: Annotated[
        int, typer.Option(help="Permutations of the Mantel test.", max=MAX_RESAMPLES)
    ] = DEFAULT_N_PERM_MANTEL,
    alternative: Annotated[
        str, typer.Option(help=f"Mantel alternative: {either(ALTERNATIVES)}.")
    ] = DEFAULT_ALTERNATIVE,
    seed: Annotated[int, typer.Option(help="Seed of the Mantel permutations.", **SEED_RANGE)] = 0,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ANALYSIS_DIR).")] = None,
) -> None:
    """Sign agreement, Mantel correlation of partial-correlation matrices, and conflicting pairs."""
    from gengen.analyse import Analysis
    from gengen.compare import compare

    if out is not None:
        check_output_folder(out)
    comparison = compare(
        Analysis.from_dir(analysis_dir),
        source_level=source,
        alpha=alpha,
        n_perm=n_perm,
        alternative=alternative,
        seed=seed,
    )
    comparison.to_dir(out or analysis_dir)
    for row in comparison.agreement.itertuples(index=False):
        typer.echo(
            f"{row.group_a} vs {row.group_b}: sign agreement {row.sign_agreement:.3f} over {row.n_pairs} "
            f"pairs; Mantel r = {row.mantel_r:.3f}, p = {row.mantel_p:.4g}"
        )
    typer.echo(f"{len(comparison.conflicts)} conflicting pair(s); wrote {out or analysis_dir}")


def register(app: typer.Typer) -> None:
    """Add ``gengen compare`` to the CLI."""
    app.command("compare")(compare_command)
