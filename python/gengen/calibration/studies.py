r"""One calibration study of gengen's inference over simulated cells: :func:`calibration_study`.

A claim of calibration names its grid. Every study here is a list of :class:`gengen.calibration.simulate.Cell` —
textbook AR
noise around a smooth ID curve, or realistic fine-tuning learning curves, with their n, noise, link, pooled runs
and the noise correlations ρ simulated (0: the null) — and a *measure*, what is computed on each replicate:

- ``"grid"``: the default (the AR-sieve test of ``r_partial``, :mod:`gengen.stats.sieve`) and its alternatives
  (the same with a GAM control, the lagged test of ``r_innovation``, ppcor's t-test; pooled cells: meta-analysis
  with sieve variances or with ppcor's 1/(n − 3 − k)): type-I error at α = .05 and .01, power at ρ = 0.3, the
  coverage of the 95% intervals, the share of rows flagged in ``diagnostics`` and the type-I error among the
  rows not flagged. :data:`GRID` is the grid of issue 13 (AR(1) φ ∈ {0, 0.5, 0.9, 0.99}; AR(2) (0.5, 0.3) and
  (1.5, −0.56); a different φ in the two series; noise whose sd falls threefold; linear, saturating or
  non-monotone links; n ∈ {15, 25, 50, 200}; 3 and 10 seeds pooled). ``gengen simulate --grid``.
- ``"realistic"``: the public :func:`gengen.analyse` with its defaults on learning curves
  (:mod:`gengen.calibration.realistic`, :data:`REALISTIC_GRID` of issue 23). ``gengen simulate --grid --realistic``.
- ``"methods"``: every inference method on textbook AR(1) and random-walk cells, simulated and tested in the Rust
  core (:mod:`gengen.calibration.methods`, :data:`FULL_DESIGN` of issue 9). ``gengen simulate``.

``docs/calibration.md`` reports all three; the simulator is :func:`gengen.calibration.simulate.simulate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.calibration.methods import (
    FULL_DESIGN,
    LAGGED_METHOD,
    QUICK_DESIGN,
    StudyDesign,
    plot_type1_error,
    rate_table,
    run_methods,
    summary_line,
)
from gengen.calibration.realistic import (
    CONTRACT_COVERAGE,
    CONTRACT_FLAGS,
    CONTRACT_TYPE1,
    REALISTIC_COLUMNS,
    REALISTIC_GRID,
    REALISTIC_QUICK_GRID,
    realistic_contract,
    realistic_summary,
    realistic_tables,
    reference_tests,
    run_realistic,
)
from gengen.calibration.simulate import Cell, simulate, simulate_pair_runs
from gengen.errors import GengenError
from gengen.stats.meta import fisher_meta
from gengen.stats.sieve import (
    curvature_notes,
    curvature_shift,
    gam_control_z,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)

__all__ = [
    "CONTRACT_COVERAGE",
    "CONTRACT_FLAGS",
    "CONTRACT_TYPE1",
    "FULL_DESIGN",
    "GRID",
    "LAGGED_METHOD",
    "MEASURES",
    "QUICK_DESIGN",
    "QUICK_GRID",
    "REALISTIC_COLUMNS",
    "REALISTIC_GRID",
    "REALISTIC_QUICK_GRID",
    "GridCell",
    "StudyDesign",
    "calibration_study",
    "grid_study",
    "grid_tables",
    "plot_type1_error",
    "rate_table",
    "realistic_contract",
    "realistic_study",
    "realistic_summary",
    "realistic_tables",
    "simulate_pair_runs",
    "summary_line",
]

#: Correlation of the two noises under the grid's alternative.
RHO = 0.3
LABELS = ("ood_a", "ood_b")
#: The measures of :func:`calibration_study`, with their default replicates and sieve resamples.
MEASURES: dict[str, dict[str, int | None]] = {
    "methods": {"replicates": None, "n_boot": None},
    "grid": {"replicates": 400, "n_boot": 199},
    "realistic": {"replicates": 300, "n_boot": 299},
}


def GridCell(label: str, *, has_alternative: bool = True, **fields: Any) -> Cell:  # the grid's cells' old name
    """A cell of the default's grid: a textbook :class:`gengen.calibration.simulate.Cell` simulating ρ = 0 and 0.3.

    Parameters
    ----------
    label : str
    has_alternative : bool
        Whether the cell has an alternative with a known correlation (a shared component needs one AR model);
        without one it simulates the null only.
    **fields
        The other fields of the cell (``n``, ``coef_a``, ``coef_b``, ``shape``, ``heteroskedastic``, ``runs``,
        ``gam``), with :class:`~gengen.calibration.simulate.Cell`'s defaults.

    Returns
    -------
    Cell
    """
    return Cell(label, rhos=(0.0, RHO) if has_alternative else (0.0,), **fields)


def _cells() -> tuple[Cell, ...]:
    cells = [GridCell(f"ar1({phi:g})", coef_a=(phi,), gam=phi in (0.5, 0.9)) for phi in (0.0, 0.5, 0.9, 0.99)]
    cells += [
        GridCell("ar2(0.5, 0.3)", coef_a=(0.5, 0.3)),
        GridCell("ar2(1.5, -0.56)", coef_a=(1.5, -0.56)),
        GridCell("ar1(0.9) vs ar1(0)", coef_a=(0.9,), coef_b=(0.0,), has_alternative=False),
        GridCell("ar1(0.5), sd falls 3x", coef_a=(0.5,), heteroskedastic=True),
        GridCell("ar1(0.9), sd falls 3x", coef_a=(0.9,), heteroskedastic=True),
    ]
    cells += [
        GridCell(f"{shape}, ar1({phi:g})", coef_a=(phi,), shape=shape, gam=True)
        for shape in ("saturating", "nonmonotone")
        for phi in (0.5, 0.9)
    ]
    cells += [GridCell(f"ar1(0.9), n={n}", n=n) for n in (15, 25, 200)]
    cells += [GridCell("ar1(0), n=15", n=15, coef_a=(0.0,))]
    cells += [GridCell(f"ar1(0.9), {runs} seeds", runs=runs) for runs in (3, 10)]
    return tuple(cells)


#: The grid of docs/calibration.md.
GRID: tuple[Cell, ...] = _cells()
#: A small grid for a quick look (and for the test suite's smoke test).
QUICK_GRID: tuple[Cell, ...] = (
    GridCell("ar1(0.9)", gam=True),
    GridCell("ar2(1.5, -0.56)", coef_a=(1.5, -0.56)),
    GridCell("ar1(0.9), 3 seeds", runs=3),
)


def calibration_study(
    cells: StudyDesign | Sequence[Cell] = QUICK_DESIGN,
    *,
    measure: str | None = None,
    replicates: int | None = None,
    n_boot: int | None = None,
    seed: int = 2026,
    with_gam: bool = True,
    pooled_replicates: int | None = None,
    alternative_replicates: int | None = None,
    csv: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The calibration study: simulate every cell at each of its ρ and measure gengen's inference on it.

    Parameters
    ----------
    cells : StudyDesign or sequence of Cell
        The cells (:data:`GRID`, :data:`QUICK_GRID`, :data:`REALISTIC_GRID`, :data:`REALISTIC_QUICK_GRID`,
        :data:`FULL_DESIGN`, :data:`QUICK_DESIGN` or your own).
    measure : {"methods", "grid", "realistic"}, optional
        What is computed (module docstring); default the design's measure, or "methods" for a list of cells.
    replicates : int, optional
        Replicates per cell and ρ (default: "grid" 400, "realistic" 300, "methods" each cell's own).
    n_boot : int, optional
        Sieve (or bootstrap) resamples per test (default: "grid" 199, "realistic" 299, "methods" each cell's).
    seed : int
        Every random number follows from it; each cell and ρ has its own stream.
    with_gam : bool
        "grid": also run the sieve with the GAM control in the cells marked ``gam`` (slower).
    pooled_replicates, alternative_replicates : int, optional
        "realistic": replicates of pooled cells, and of each alternative (default ``replicates``).
    csv : str or Path, optional
        "realistic": append each finished (cell, ρ) to this CSV and skip those already in it (resumable).
    progress : callable, optional
        Called with one line after each cell (or cell and ρ).

    Returns
    -------
    DataFrame
        "grid": one row per cell × method (``cell, n, runs, shape, method, type1_05, se_type1_05, type1_01,
        power, se_power, coverage, flag_rate, type1_05_unflagged, tests``); "realistic": the long table of
        :func:`gengen.calibration.realistic.run_realistic`; "methods": that of
        :func:`gengen.calibration.methods.run_methods`.

    Examples
    --------
    >>> from gengen.calibration.studies import GridCell, calibration_study
    >>> table = calibration_study([GridCell("ar1(0.5)", n=30, coef_a=(0.5,))], measure="grid", replicates=5)
    >>> list(table.method)
    ['sieve', 'lagged (r_innovation)', 't-test']
    """
    if measure is None:
        measure = cells.measure if isinstance(cells, StudyDesign) else "methods"
    if measure not in MEASURES:
        raise GengenError(f"option measure: {measure!r} is not one of {', '.join(MEASURES)}")
    realistic_only = {"pooled_replicates": pooled_replicates, "alternative_replicates": alternative_replicates}
    for name, value in {**realistic_only, "csv": csv}.items():
        if value is not None and measure != "realistic":
            raise GengenError(f"option {name}: goes with measure='realistic', not {measure!r}")
    chosen = tuple(cells.cells if isinstance(cells, StudyDesign) else cells)
    defaults = MEASURES[measure]
    count = replicates if replicates is not None else defaults["replicates"]
    boot = n_boot if n_boot is not None else defaults["n_boot"]
    if measure == "methods":
        return run_methods(chosen, replicates=count, n_boot=boot, seed=seed, progress=progress)
    assert count is not None and boot is not None
    if measure == "realistic":
        return run_realistic(
            chosen, replicates=count, n_boot=boot, seed=seed, csv=csv, progress=progress, **realistic_only
        )
    return _run_grid(chosen, replicates=count, n_boot=boot, seed=seed, with_gam=with_gam, progress=progress)


def _run_grid(
    cells: tuple[Cell, ...],
    *,
    replicates: int,
    n_boot: int,
    seed: int,
    with_gam: bool,
    progress: Callable[[str], None] | None,
) -> pd.DataFrame:
    """The measure "grid": the default and its alternatives, tallied per cell and hypothesis."""
    if replicates < 1:
        raise GengenError(f"replicates: must be at least 1, got {replicates}")
    several = [cell.label for cell in cells if len(cell.rhos) > 2 or cell.rhos[0] != 0]
    if several:
        raise GengenError(f"cells: the grid measure simulates rhos (0, one alternative); {', '.join(several)} do not")
    rows: list[dict[str, Any]] = []
    for index, cell in enumerate(cells):
        started = time.perf_counter()
        tallies: dict[tuple[str, str], _Tally] = {}
        for position, rho in enumerate(cell.rhos):
            hypothesis = "null" if position == 0 else "alternative"
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, position]))
            for replicate in range(replicates):
                _, id_scores, scores = simulate(cell, rho, rng)
                if cell.runs > 1:
                    methods = _pooled_methods(scores, id_scores, n_boot, replicate * cell.runs)
                else:
                    methods = _single_run_methods(scores[0], id_scores[0], n_boot, replicate, with_gam and cell.gam)
                for method, p, interval, flags in methods:
                    tallies.setdefault((method, hypothesis), _Tally()).add(p, interval, rho, flags)
        for method in dict.fromkeys(name for name, _ in tallies):
            null = tallies.get((method, "null"), _Tally())
            alternative = tallies.get((method, "alternative"), _Tally())
            rows.append(_row(cell, method, null, alternative))
        if progress is not None:
            progress(f"[{index + 1}/{len(cells)}] {cell.label} ({time.perf_counter() - started:.1f} s)")
    return pd.DataFrame(rows)


@dataclass
class _Share:
    """How many of the cases counted so far were hits (a rate's numerator and denominator)."""

    hits: int = 0
    total: int = 0

    def count(self, hit: bool) -> None:
        self.hits += hit
        self.total += 1

    @property
    def rate(self) -> float:
        """``hits / total``; NaN before any case."""
        return self.hits / self.total if self.total else float("nan")


@dataclass
class _Tally:
    """Running counts of one method in one cell and hypothesis: each a share of the cases it applies to."""

    #: p < .05 and p < .01, of the finite p-values.
    reject_05: _Share = field(default_factory=_Share)
    reject_01: _Share = field(default_factory=_Share)
    #: Intervals holding the truth, of the finite intervals.
    covered: _Share = field(default_factory=_Share)
    #: Runs with a diagnostic note, of the runs whose method gives diagnostics.
    flagged: _Share = field(default_factory=_Share)
    #: p < .05, of the runs without a note.
    unflagged_reject_05: _Share = field(default_factory=_Share)

    def add(self, p: float, interval: tuple[float, float] | None, truth: float, flags: str | None) -> None:
        if not np.isfinite(p):
            return
        self.reject_05.count(p < 0.05)
        self.reject_01.count(p < 0.01)
        if interval is not None and np.isfinite(interval[0]):
            self.covered.count(interval[0] <= truth <= interval[1])
        if flags is not None:
            self.flagged.count(bool(flags))
            if not flags:
                self.unflagged_reject_05.count(p < 0.05)


def _single_run_methods(
    scores: np.ndarray, id_scores: np.ndarray, n_boot: int, seed: int, with_gam: bool
) -> Iterator[tuple[str, float, tuple[float, float] | None, str | None]]:
    """(method, p, interval, diagnostics or None) for the default and its alternatives on one run."""
    covar = id_scores[:, None]
    result = sieve_partial_corr_matrix(scores, covar, n_boot=n_boot, seed=seed)
    notes = sieve_column_notes(result, list(LABELS))
    curved = curvature_notes(
        [curvature_shift(scores, covar)[0, 1]],
        [result.se_z[0, 1]],
        p_value=[result.p_value[0, 1]],
        z_gam=[gam_control_z(scores, covar)[0, 1]],
        df=[result.df[0, 1]],
    )
    flags = "; ".join([*notes[0], *notes[1], *[note for note in curved if note]])
    yield "sieve", float(result.p_value[0, 1]), (float(result.ci_low[0, 1]), float(result.ci_high[0, 1])), flags
    if with_gam:
        try:
            gam = sieve_partial_corr_matrix(scores, covar, fit="gam", n_boot=n_boot, seed=seed)
            yield "sieve-gam", float(gam.p_value[0, 1]), (float(gam.ci_low[0, 1]), float(gam.ci_high[0, 1])), None
        except GengenError:
            yield "sieve-gam", float("nan"), None, None
    references = reference_tests(scores, covar)
    yield "lagged (r_innovation)", references.lagged_p, references.lagged_interval, None
    yield "t-test", references.ttest_p, references.ttest_interval, None


def _pooled_methods(
    scores: np.ndarray, id_scores: np.ndarray, n_boot: int, seed: int
) -> Iterator[tuple[str, float, tuple[float, float] | None, str | None]]:
    """Fixed- and random-effects pooling of the runs' r_partial with sieve and with independence variances."""
    r, se, df, n = [], [], [], []
    for run in range(scores.shape[0]):
        result = sieve_partial_corr_matrix(scores[run], id_scores[run][:, None], n_boot=n_boot, seed=seed + run)
        r.append(float(result.r[0, 1]))
        se.append(float(result.se_z[0, 1]))
        df.append(float(result.df[0, 1]))
        n.append(scores.shape[1])
    k = np.ones(len(r))
    choices = (("meta, sieve variances", np.square(se), np.array(df)), ("meta, 1/(n-3-k)", None, None))
    for name, variance, dof in choices:
        meta = fisher_meta(np.array(r), np.array(n), k, variance=variance, df=dof)
        yield f"{name}, fixed", meta.p_fixed, (meta.ci_low_fixed, meta.ci_high_fixed), None
        yield f"{name}, random", meta.p_random, (meta.ci_low_random, meta.ci_high_random), None


def _row(cell: Cell, method: str, null: _Tally, alternative: _Tally) -> dict[str, Any]:
    type1, tests = null.reject_05.rate, null.reject_05.total
    power, alternative_tests = alternative.reject_05.rate, alternative.reject_05.total
    return {
        "cell": cell.label,
        "n": cell.n,
        "runs": cell.runs,
        "shape": cell.shape,
        "method": method,
        "type1_05": type1,
        "se_type1_05": np.sqrt(type1 * (1 - type1) / tests) if tests else float("nan"),
        "type1_01": null.reject_01.rate,
        "power": power,
        "se_power": np.sqrt(power * (1 - power) / alternative_tests) if alternative_tests else float("nan"),
        "coverage": alternative.covered.rate,
        "flag_rate": null.flagged.rate,
        "type1_05_unflagged": null.unflagged_reject_05.rate,
        "tests": tests,
    }


def grid_tables(table: pd.DataFrame) -> str:
    """The study as Markdown: one table per quantity, cells as rows, methods as columns."""

    def fmt(value: float, se: float | None = None) -> str:
        if not np.isfinite(value):
            return "–"
        return f"{value:.3f}" if se is None or not np.isfinite(se) else f"{value:.3f} ± {se:.3f}"

    sections = []
    for title, column, se_column in (
        ("Type-I error at α = 0.05 (± Monte Carlo s.e.)", "type1_05", "se_type1_05"),
        ("Type-I error at α = 0.01", "type1_01", None),
        ("Power at ρ = 0.3, α = 0.05", "power", "se_power"),
        ("Coverage of the 95% intervals of ρ = 0.3", "coverage", None),
    ):
        methods = list(dict.fromkeys(table["method"]))
        lines = [f"**{title}**", "", "| cell | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
        for cell, rows in table.groupby("cell", sort=False):
            by_method = rows.set_index("method")
            values = [
                fmt(by_method.at[m, column], by_method.at[m, se_column] if se_column else None)
                if m in by_method.index
                else ""
                for m in methods
            ]
            lines.append(f"| {cell} | " + " | ".join(values) + " |")
        sections.append("\n".join(lines))
    default = table[table["method"] == "sieve"]
    if not default.empty:
        lines = [
            "**The default's diagnostics under the null: share of rows flagged, and type-I error among the rest**",
            "",
            "| cell | flagged | type-I (unflagged) |",
            "|---|---|---|",
        ]
        for row in default.itertuples(index=False):
            lines.append(f"| {row.cell} | {fmt(row.flag_rate)} | {fmt(row.type1_05_unflagged)} |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def grid_study(
    grid: tuple[Cell, ...] = GRID,
    *,
    replicates: int = 400,
    n_boot: int = 199,
    seed: int = 2026,
    with_gam: bool = True,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """``calibration_study(grid, measure="grid", ...)``, under its former name (same parameters and table)."""
    return calibration_study(
        grid, measure="grid", replicates=replicates, n_boot=n_boot, seed=seed, with_gam=with_gam, progress=progress
    )


def realistic_study(grid: tuple[Cell, ...] = REALISTIC_GRID, **options: Any) -> pd.DataFrame:
    """``calibration_study(grid, measure="realistic", ...)``, under its former name (same options and table)."""
    return calibration_study(grid, measure="realistic", **options)
