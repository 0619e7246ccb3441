"""``gengen simulate``: the calibration study of gengen's inference on simulated checkpoint trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gengen.cli._common import SEED_RANGE, user_errors_exit
from gengen.errors import GengenError

#: The studies of ``--study``, each a measure of :func:`gengen.calibration.calibration_study` over its grid.
STUDIES = ("methods", "grid", "realistic")


def _replicates_option(text: str) -> Any:
    return typer.Option(help=text, min=1, max=100_000)


@user_errors_exit
def simulate_command(
    quick: Annotated[
        bool,
        typer.Option("--quick", help="The reduced grid of the study (methods: n = 50, null cells, ~20 s)."),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for the study's CSV and its tables or figure (created if absent)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random number of the study.", **SEED_RANGE)] = 2026,
    study: Annotated[
        str | None,
        typer.Option(
            help="methods: every inference method on AR(1) and random-walk noise (the default); grid: the "
            "default's calibration grid (AR(1), AR(2), heteroskedastic, non-linear, short and pooled runs); "
            "realistic: gengen.analyse's default on realistic learning curves (docs/calibration.md).",
        ),
    ] = None,
    grid: Annotated[bool, typer.Option("--grid", help="The same as --study grid.")] = False,
    realistic: Annotated[bool, typer.Option("--realistic", help="With --grid: the same as --study realistic.")] = False,
    replicates: Annotated[int, _replicates_option("grid, realistic: simulated runs per cell and hypothesis.")] = 300,
    pooled_replicates: Annotated[
        int | None,
        _replicates_option("realistic: groups of seeds per pooled cell and hypothesis (default --replicates)."),
    ] = None,
    alternative_replicates: Annotated[
        int | None,
        _replicates_option("realistic: replicates of each alternative (rho = 0.3, 0.5); default --replicates."),
    ] = None,
    n_boot: Annotated[int, typer.Option(help="realistic: sieve resamples per run.", min=99, max=100_000)] = 299,
) -> None:
    """Type-I error, power and interval coverage of every inference method on autocorrelated trajectories.

    The last line printed is ``lagged type-I at .05 (phi=0.9, n=50): X; naive t-test: Y`` (with
    ``--study grid``: the largest type-I error of the default among unflagged rows, and its cell; with
    ``--study realistic``: how many checks of issue 23's contract hold, and the failing ones).
    """
    if realistic and not grid:
        raise GengenError("option --realistic: goes with --grid (gengen simulate --grid --realistic)")
    chosen = ("realistic" if realistic else "grid") if grid else (study or "methods")
    if chosen not in STUDIES:
        raise GengenError(f"option --study: {chosen!r} is not one of {', '.join(STUDIES)}")
    if grid and study is not None and study != chosen:
        raise GengenError(f"option --study: {study!r} contradicts --grid{' --realistic' if realistic else ''}")
    if out is not None:
        # A bad --out is found before the study runs, not after it.
        out.mkdir(parents=True, exist_ok=True)
    if chosen == "realistic":
        _realistic_command(
            quick=quick,
            out=out,
            seed=seed,
            replicates=replicates,
            pooled_replicates=pooled_replicates,
            alternative_replicates=alternative_replicates,
            n_boot=n_boot,
        )
    elif chosen == "grid":
        _grid_command(quick=quick, out=out, seed=seed, replicates=replicates)
    else:
        _methods_command(quick=quick, out=out, seed=seed)


def _progress(line: str) -> None:
    typer.echo(line, err=True)


def _methods_command(*, quick: bool, out: Path | None, seed: int) -> None:
    from gengen import calibration

    table = calibration.calibration_study(
        calibration.QUICK_DESIGN if quick else calibration.FULL_DESIGN, seed=seed, progress=_progress
    )
    if out is not None:
        table.to_csv(out / "calibration.csv", index=False)
        calibration.plot_type1_error(table, str(out / "calibration_type1.png"))
        typer.echo(f"wrote {out / 'calibration.csv'} and {out / 'calibration_type1.png'}")
    typer.echo("type-I error at alpha = .05, n = 50, linear f (rate ± Monte Carlo s.e.):")
    typer.echo(calibration.rate_table(table).to_string())
    typer.echo(calibration.summary_line(table))


def _grid_command(*, quick: bool, out: Path | None, seed: int, replicates: int) -> None:
    from gengen.calibration import GRID, QUICK_GRID, calibration_study, grid_tables

    cells = QUICK_GRID if quick else GRID
    table = calibration_study(cells, measure="grid", replicates=replicates, seed=seed, progress=_progress)
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
        calibration_study,
        realistic_contract,
        realistic_summary,
        realistic_tables,
    )

    csv = None
    if out is not None:
        # Written cell by cell: an interrupted study resumes from it, and a partial one can be read.
        csv = out / "calibration_realistic.csv"
        typer.echo(f"writing {csv} as cells finish (cells already in it are skipped)", err=True)
    table = calibration_study(
        REALISTIC_QUICK_GRID if quick else REALISTIC_GRID,
        measure="realistic",
        replicates=replicates,
        pooled_replicates=pooled_replicates,
        alternative_replicates=alternative_replicates,
        n_boot=n_boot,
        seed=seed,
        csv=csv,
        progress=_progress,
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
