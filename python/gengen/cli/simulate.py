"""``gengen simulate``: the calibration study of gengen's inference on simulated checkpoint trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gengen.cli._common import SEED_RANGE, user_errors_exit
from gengen.errors import GengenError


@user_errors_exit
def simulate_command(
    quick: Annotated[
        bool, typer.Option("--quick", help="The reduced study (n = 50, null cells, ~20 s) instead of the full one.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for calibration.csv and calibration_type1.png (created if absent)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random number of the study.", **SEED_RANGE)] = 2026,
    grid: Annotated[
        bool,
        typer.Option(
            "--grid",
            help="The default's calibration grid (AR(1), AR(2), heteroskedastic, non-linear, short and pooled "
            "runs; docs/calibration.md) instead of the method comparison.",
        ),
    ] = False,
    realistic: Annotated[
        bool,
        typer.Option(
            "--realistic",
            help="With --grid: the realistic learning-curve grid of issue 23 (gengen.analyse's default on "
            "log-spaced, dense-early and even schedules, fixed test sets of 200-30,000 examples, a test set stuck "
            "at chance, plateaus, duplicated checkpoints, pooled seeds; docs/calibration.md). With --quick: the "
            "three cells of the test suite.",
        ),
    ] = False,
    replicates: Annotated[
        int, typer.Option(help="--grid: simulated runs per cell and hypothesis.", min=1, max=100_000)
    ] = 300,
    pooled_replicates: Annotated[
        int | None,
        typer.Option(
            help="--grid --realistic: groups of seeds per pooled cell and hypothesis (default --replicates).",
            min=1,
            max=100_000,
        ),
    ] = None,
    alternative_replicates: Annotated[
        int | None,
        typer.Option(
            help="--grid --realistic: replicates of each alternative (rho = 0.3, 0.5); default --replicates.",
            min=1,
            max=100_000,
        ),
    ] = None,
    n_boot: Annotated[
        int, typer.Option(help="--grid --realistic: sieve resamples per run.", min=99, max=100_000)
    ] = 299,
) -> None:
    """Type-I error, power and interval coverage of every inference method on autocorrelated trajectories.

    The last line printed is ``lagged type-I at .05 (phi=0.9, n=50): X; naive t-test: Y`` (with ``--grid``:
    the largest type-I error of the default among unflagged rows, and its cell; with ``--grid --realistic``:
    how many checks of issue 23's contract hold, and the failing ones).
    """
    if realistic and not grid:
        raise GengenError("option --realistic: goes with --grid (gengen simulate --grid --realistic)")
    if grid and realistic:
        _realistic_command(
            quick=quick,
            out=out,
            seed=seed,
            replicates=replicates,
            pooled_replicates=pooled_replicates,
            alternative_replicates=alternative_replicates,
            n_boot=n_boot,
        )
        return
    if grid:
        _grid_command(quick=quick, out=out, seed=seed, replicates=replicates)
        return
    from gengen.simulate import (
        FULL_DESIGN,
        QUICK_DESIGN,
        Cell,
        calibration_study,
        plot_type1_error,
        rate_table,
        summary_line,
    )

    design = QUICK_DESIGN if quick else FULL_DESIGN
    if out is not None:
        # A bad --out is found before the study runs, not after it.
        out.mkdir(parents=True, exist_ok=True)

    def progress(index: int, total: int, cell: Cell, seconds: float) -> None:
        typer.echo(
            f"[{index + 1}/{total}] n={cell.n} {cell.label} {cell.shape} rho={cell.shared:g} ({seconds:.1f} s)",
            err=True,
        )

    table = calibration_study(design, seed=seed, progress=progress)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "calibration.csv", index=False)
        plot_type1_error(table, str(out / "calibration_type1.png"))
        typer.echo(f"wrote {out / 'calibration.csv'} and {out / 'calibration_type1.png'}")
    typer.echo("type-I error at alpha = .05, n = 50, linear f (rate ± Monte Carlo s.e.):")
    typer.echo(rate_table(table).to_string())
    typer.echo(summary_line(table))


def _grid_command(*, quick: bool, out: Path | None, seed: int, replicates: int) -> None:
    from gengen.calibration import GRID, QUICK_GRID, GridCell, grid_study, grid_tables

    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    def progress(index: int, total: int, cell: GridCell, seconds: float) -> None:
        typer.echo(f"[{index + 1}/{total}] {cell.label} ({seconds:.1f} s)", err=True)

    table = grid_study(QUICK_GRID if quick else GRID, replicates=replicates, seed=seed, progress=progress)
    if out is not None:
        table.to_csv(out / "calibration_grid.csv", index=False)
        (out / "calibration_grid.md").write_text(grid_tables(table), encoding="utf-8")
        typer.echo(f"wrote {out / 'calibration_grid.csv'} and {out / 'calibration_grid.md'}")
    typer.echo(grid_tables(table))
    default = table[table["method"] == "sieve"].dropna(subset=["type1_05_unflagged"])
    if not default.empty:
        worst = default.loc[default["type1_05_unflagged"].idxmax()]
        typer.echo(f"default type-I at .05 among unflagged rows: at most {worst.type1_05_unflagged:.3f} ({worst.cell})")


def _realistic_command(
    *,
    quick: bool,
    out: Path | None,
    seed: int,
    replicates: int,
    pooled_replicates: int | None,
    alternative_replicates: int | None,
    n_boot: int,
) -> None:
    from gengen.calibration import (
        REALISTIC_GRID,
        REALISTIC_QUICK_GRID,
        realistic_contract,
        realistic_study,
        realistic_summary,
        realistic_tables,
    )

    csv = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        # Written cell by cell: an interrupted study resumes from it, and a partial one can be read.
        csv = out / "calibration_realistic.csv"
        typer.echo(f"writing {csv} as cells finish (cells already in it are skipped)", err=True)
    table = realistic_study(
        REALISTIC_QUICK_GRID if quick else REALISTIC_GRID,
        replicates=replicates,
        pooled_replicates=pooled_replicates,
        alternative_replicates=alternative_replicates,
        n_boot=n_boot,
        seed=seed,
        csv=csv,
        progress=lambda line: typer.echo(line, err=True),
    )
    summary = realistic_summary(table)
    tables = realistic_tables(summary)
    contract = realistic_contract(summary)
    if out is not None:
        (out / "calibration_realistic.md").write_text(tables, encoding="utf-8")
        typer.echo(f"wrote {out / 'calibration_realistic.csv'} and {out / 'calibration_realistic.md'}")
    typer.echo(tables)
    failing = contract[contract["status"] == "FAIL"]
    typer.echo(
        f"contract of issue 23: {len(contract) - len(failing)} of {len(contract)} checks hold"
        + (
            f"; failing: {', '.join(f'{r.cell} {r.criterion} {r.value:.3f}' for r in failing.itertuples())}"
            if len(failing)
            else ""
        )
    )


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
