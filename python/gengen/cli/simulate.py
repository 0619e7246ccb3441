"""``gengen simulate``: the calibration study of gengen's inference on simulated checkpoint trajectories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from gengen.cli._common import SEED_RANGE, Bounds, CliOption, table_signature, user_errors_exit
from gengen.errors import GengenError

_OUTPUTS = (
    "calibration.csv",
    "calibration_type1.png",
    "calibration_grid.csv",
    "calibration_grid.md",
    "calibration_realistic.csv",
    "calibration_realistic.md",
    "calibration_items.csv",
    "calibration_items.md",
    "calibration_contract.csv",
    "calibration_contract.md",
)


def _inside(out: Path, name: str) -> Path:
    """``out / name``, refused when it leads out of ``out`` (a file linking elsewhere is not written through)."""
    from gengen._files import inside

    return inside(out, name)


#: The studies of ``--study``, each a measure of :func:`gengen.calibration.studies.calibration_study` over its grid.
STUDIES = ("methods", "grid", "realistic", "items", "contract")


#: Bounds of the replicate counts.
_REPLICATES: Bounds = {"min": 1, "max": 100_000}

#: The command's options, in the order of its help. --study, --grid and --realistic choose the study; the others
#: go on to it (each study's function takes the ones it uses).
OPTIONS: dict[str, CliOption] = {
    "quick": CliOption(
        bool, "The reduced grid of the study (methods: n = 50, null cells, ~20 s).", False, ("--quick",)
    ),
    "out": CliOption(Path | None, "Folder for the study's CSV and its tables or figure (created if absent)."),
    "seed": CliOption(int, "Seed of every random number of the study.", 2026, **SEED_RANGE),
    "study": CliOption(
        str | None,
        "methods: every inference method on AR(1) and random-walk noise (the default); grid: the "
        "default's calibration grid (AR(1), AR(2), heteroskedastic, non-linear, short and pooled runs); "
        "realistic: gengen.analyse's default on realistic learning curves (docs/calibration.md); items: "
        "the same on item-level trajectories (fixed examples, logistic/probit links, stuck and class-prior sets); "
        "contract: issue 34's contract on the extended grid, every inference path offered by default.",
    ),
    "grid": CliOption(bool, "The same as --study grid.", False, ("--grid",)),
    "realistic": CliOption(bool, "With --grid: the same as --study realistic.", False, ("--realistic",)),
    "replicates": CliOption(
        int, "grid, realistic, items, contract: simulated runs per cell and hypothesis.", 300, **_REPLICATES
    ),
    "pooled_replicates": CliOption(
        int | None,
        "realistic: groups of seeds per pooled cell and hypothesis (default --replicates).",
        **_REPLICATES,
    ),
    "alternative_replicates": CliOption(
        int | None,
        "realistic, contract: replicates of each alternative (rho = 0.3, 0.5); default --replicates.",
        **_REPLICATES,
    ),
    "n_boot": CliOption(int, "realistic, items, contract: sieve resamples per run.", 299, min=99, max=100_000),
    "cell": CliOption(
        list[str] | None,
        "contract: only this cell of the grid (repeatable; default all), so that cells run side by side.",
    ),
}


def _simulate(*, study: str | None, grid: bool, realistic: bool, **options: Any) -> None:
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
    if options["cell"] and chosen != "contract":
        raise GengenError(f"option --cell: chooses cells of --study contract, not of --study {chosen}")
    if options["out"] is not None:
        # A bad --out is found before the study runs, not after it.
        options["out"].mkdir(parents=True, exist_ok=True)
        for name in _OUTPUTS:  # a file in it linking elsewhere too (issue 36)
            _inside(options["out"], name)
    commands: dict[str, Callable[..., None]] = {
        "methods": _methods_command,
        "grid": _grid_command,
        "realistic": _realistic_command,
        "items": _items_command,
        "contract": _contract_command,
    }
    commands[chosen](**options)


simulate_command = user_errors_exit(_simulate)
simulate_command.__signature__ = table_signature(OPTIONS)  # type: ignore[attr-defined]


def _progress(line: str) -> None:
    typer.echo(line, err=True)


def _methods_command(*, quick: bool, out: Path | None, seed: int, **_others: Any) -> None:
    from gengen.calibration import studies as calibration

    table = calibration.calibration_study(
        calibration.QUICK_DESIGN if quick else calibration.FULL_DESIGN, seed=seed, progress=_progress
    )
    if out is not None:
        table.to_csv(_inside(out, "calibration.csv"), index=False)
        calibration.plot_type1_error(table, str(_inside(out, "calibration_type1.png")))
        typer.echo(f"wrote {out / 'calibration.csv'} and {out / 'calibration_type1.png'}")
    typer.echo("type-I error at alpha = .05, n = 50, linear f (rate ± Monte Carlo s.e.):")
    typer.echo(calibration.rate_table(table).to_string())
    typer.echo(calibration.summary_line(table))


def _grid_command(*, quick: bool, out: Path | None, seed: int, replicates: int, **_others: Any) -> None:
    from gengen.calibration.studies import GRID, QUICK_GRID, calibration_study, grid_tables

    cells = QUICK_GRID if quick else GRID
    table = calibration_study(cells, measure="grid", replicates=replicates, seed=seed, progress=_progress)
    if out is not None:
        table.to_csv(_inside(out, "calibration_grid.csv"), index=False)
        _inside(out, "calibration_grid.md").write_text(grid_tables(table), encoding="utf-8")
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
    **_others: Any,
) -> None:
    from gengen.calibration.studies import (
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
        csv = _inside(out, "calibration_realistic.csv")
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
        _inside(out, "calibration_realistic.md").write_text(tables, encoding="utf-8")
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


def _items_command(*, quick: bool, out: Path | None, seed: int, replicates: int, n_boot: int, **_others: Any) -> None:
    from gengen.calibration.items import ITEMS_GRID, ITEMS_QUICK_GRID, items_tables, run_items

    csv = None
    if out is not None:
        # Written cell by cell, as the realistic study: a rerun resumes, a partial file can be read.
        csv = _inside(out, "calibration_items.csv")
        typer.echo(f"writing {csv} as cells finish (cells already in it are skipped)", err=True)
    table = run_items(
        ITEMS_QUICK_GRID if quick else ITEMS_GRID,
        replicates=replicates,
        n_boot=n_boot,
        seed=seed,
        csv=csv,
        progress=_progress,
    )
    tables = items_tables(table)
    if out is not None:
        _inside(out, "calibration_items.md").write_text(tables, encoding="utf-8")
        typer.echo(f"wrote {out / 'calibration_items.csv'} and {out / 'calibration_items.md'}")
    typer.echo(tables)


def _contract_command(
    *,
    quick: bool,
    out: Path | None,
    seed: int,
    replicates: int,
    alternative_replicates: int | None,
    n_boot: int,
    cell: list[str] | None,
    **_others: Any,
) -> None:
    from gengen.calibration.contract import (
        CONTRACT_GRID,
        CONTRACT_QUICK_GRID,
        contract_checks,
        contract_summary,
        contract_tables,
        run_contract,
    )

    csv = None
    if out is not None:
        # Written cell by cell: a rerun resumes, and processes running other --cell values may share the file.
        csv = _inside(out, "calibration_contract.csv")
        typer.echo(f"writing {csv} as cells finish (cells already in it are skipped)", err=True)
    table = run_contract(
        CONTRACT_QUICK_GRID if quick else CONTRACT_GRID,
        cells=cell,
        replicates=replicates,
        alternative_replicates=alternative_replicates,
        n_boot=n_boot,
        seed=seed,
        csv=csv,
        progress=_progress,
    )
    tables = contract_tables(table)
    if out is not None:
        _inside(out, "calibration_contract.md").write_text(tables, encoding="utf-8")
        typer.echo(f"wrote {out / 'calibration_contract.csv'} and {out / 'calibration_contract.md'}")
    typer.echo(tables)
    checks = contract_checks(contract_summary(table))
    failing = [
        f"{row.cell} {row.hypothesis} {row.method} {row.rows} {row.criterion} {row.value:.3f}"
        for row in checks[checks["status"] == "FAIL"].itertuples()
    ]
    held = f"contract of issue 34, item 6: {len(checks) - len(failing)} of {len(checks)} checks hold"
    typer.echo(held + (f"; failing: {', '.join(failing)}" if failing else ""))


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
