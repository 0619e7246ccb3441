r"""The calibration grid of gengen's default inference: where its assumptions hold, and where they fail.

A claim of calibration names its grid. This module simulates pairs of OOD score trajectories whose partial
correlation given ID is known — zero under the null, ρ = 0.3 under the alternative — in every cell of the
grid of issue 13:

- AR(1) noise with φ ∈ {0, 0.5, 0.9, 0.99}; AR(2) noise (0.5, 0.3) and (1.5, −0.56); a different φ in the
  two series; noise whose standard deviation falls threefold over training;
- OOD linear, saturating or non-monotone in ID;
- n ∈ {15, 25, 50, 200} checkpoints; single runs, and 3 and 10 seeds pooled by meta-analysis,

and measures, for the default (the AR-sieve test of ``r_partial``, :mod:`gengen.stats.sieve`) and the alternatives
(the same with a GAM control, the lagged test of ``r_innovation``, ppcor's t-test; pooled: meta-analysis with
sieve variances or with ppcor's 1/(n − 3 − k)), the type-I error at α = .05 and .01, the power at ρ = 0.3,
the coverage of the 95% intervals, the share of rows the analysis flags in ``diagnostics``, and the type-I
error among the rows it does not flag. ``gengen simulate --grid`` runs it; ``docs/calibration.md`` reports it.

The model: n checkpoints at :math:`u_t = t/(n-1)`; ID :math:`c_t = 0.3 + 0.5 (1 - e^{-5u_t})/(1 - e^{-5}) +
0.01 \varepsilon_t`; OOD :math:`y_{j,t} = 0.2 + b_j f(x_t) + 0.02\, s_t e_{j,t}` with :math:`x_t = (c_t -
0.3)/0.5`, :math:`b = (0.3, 0.2)`, f linear, saturating :math:`(1 - e^{-4x})/(1 - e^{-4})` or non-monotone
:math:`4x(1 - x)`; :math:`s_t = 1`, or :math:`3^{1 - u_t}/\sqrt{3}` (falling threefold) in the heteroskedastic
cells. The noises are :math:`e_a = \sqrt{1-\rho}\,v_a + \sqrt\rho\, w`, :math:`e_b = \sqrt{1-\rho}\,v_b +
\sqrt\rho\, w` with :math:`v_a, v_b, w` independent stationary unit-variance AR processes (so that the
correlation of the two noises, and of their innovations, is ρ).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gengen import stats
from gengen.errors import GengenError
from gengen.stats.correlation import consistent_interval
from gengen.stats.lagged import lagged_partial_corr_matrix
from gengen.stats.meta import fisher_meta
from gengen.stats.sieve import (
    curvature_notes,
    curvature_shift,
    gam_control_z,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)

__all__ = ["GRID", "QUICK_GRID", "GridCell", "grid_study", "grid_tables", "simulate_pair_runs"]

#: Correlation of the two noises under the alternative.
RHO = 0.3
LABELS = ("ood_a", "ood_b")


@dataclass(frozen=True)
class GridCell:
    """One cell of the grid: the noise of each series, the link, the run length and how many runs are pooled."""

    label: str
    n: int = 50
    coef_a: tuple[float, ...] = (0.9,)
    coef_b: tuple[float, ...] | None = None
    shape: str = "linear"
    heteroskedastic: bool = False
    runs: int = 1
    #: Whether the cell has an alternative with a known correlation (a shared component needs one AR model).
    has_alternative: bool = field(default=True)
    #: Whether the GAM control is run too (it matters where OOD is non-linear in ID, and costs time).
    gam: bool = False

    @property
    def noise_b(self) -> tuple[float, ...]:
        return self.coef_a if self.coef_b is None else self.coef_b


def _cells() -> tuple[GridCell, ...]:
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
GRID: tuple[GridCell, ...] = _cells()
#: A small grid for a quick look (and for the test suite's smoke test).
QUICK_GRID: tuple[GridCell, ...] = (
    GridCell("ar1(0.9)", gam=True),
    GridCell("ar2(1.5, -0.56)", coef_a=(1.5, -0.56)),
    GridCell("ar1(0.9), 3 seeds", runs=3),
)


def _stationary_ar(rng: np.random.Generator, coef: tuple[float, ...], n: int, size: int) -> np.ndarray:
    """``size`` stationary, unit-variance AR series of length n (rows), started by a long burn-in."""
    burn = 2000 if max((abs(c) for c in coef), default=0.0) >= 0.95 else 500
    p = len(coef)
    out = np.zeros((size, burn + n + p))
    shocks = rng.standard_normal((size, burn + n))
    for t in range(burn + n):
        value = shocks[:, t].copy()
        for i, c in enumerate(coef):
            value += c * out[:, p + t - 1 - i]
        out[:, p + t] = value
    series = out[:, -n:]
    # Unit variance from the autocovariance of the model (ψ-weights), not from the sample.
    psi = np.zeros(5000)
    psi[0] = 1.0
    for h in range(1, psi.size):
        psi[h] = sum(c * psi[h - 1 - i] for i, c in enumerate(coef) if h - 1 - i >= 0)
    return series / np.sqrt((psi**2).sum())


def simulate_pair_runs(cell: GridCell, rho: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scores (runs, n, 2) of the two OOD test sets and ID scores (runs, n) of one replicate of ``cell``."""
    n, runs = cell.n, cell.runs
    u = np.linspace(0.0, 1.0, n)
    id_scores = 0.3 + 0.5 * (1 - np.exp(-5 * u)) / (1 - np.exp(-5)) + 0.01 * rng.standard_normal((runs, n))
    x = (id_scores - 0.3) / 0.5
    f = {
        "linear": x,
        "saturating": (1 - np.exp(-4 * x)) / (1 - np.exp(-4)),
        "nonmonotone": 4 * x * (1 - x),
    }[cell.shape]
    noise_a = _stationary_ar(rng, cell.coef_a, n, runs)
    noise_b = _stationary_ar(rng, cell.noise_b, n, runs)
    if rho:
        shared = _stationary_ar(rng, cell.coef_a, n, runs)
        noise_a = np.sqrt(1 - rho) * noise_a + np.sqrt(rho) * shared
        noise_b = np.sqrt(1 - rho) * noise_b + np.sqrt(rho) * shared
    scale = 3.0 ** (1 - u) / np.sqrt(3.0) if cell.heteroskedastic else np.ones(n)
    scores = np.stack([0.2 + 0.3 * f + 0.02 * scale * noise_a, 0.2 + 0.2 * f + 0.02 * scale * noise_b], axis=-1)
    return scores, id_scores


@dataclass
class _Tally:
    """Running counts of one method in one cell and hypothesis."""

    tests: int = 0
    reject_05: int = 0
    reject_01: int = 0
    covered: int = 0
    intervals: int = 0
    flagged: int = 0
    unflagged: int = 0
    unflagged_reject_05: int = 0

    def add(self, p: float, interval: tuple[float, float] | None, truth: float, flags: str | None) -> None:
        if not np.isfinite(p):
            return
        self.tests += 1
        self.reject_05 += p < 0.05
        self.reject_01 += p < 0.01
        if interval is not None and np.isfinite(interval[0]):
            self.intervals += 1
            self.covered += interval[0] <= truth <= interval[1]
        if flags is not None:
            if flags:
                self.flagged += 1
            else:
                self.unflagged += 1
                self.unflagged_reject_05 += p < 0.05


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
    lagged = lagged_partial_corr_matrix(scores, covar)
    low, high = consistent_interval(
        np.asarray(lagged.r_innovation)[0, 1], np.asarray(lagged.statistic)[0, 1], np.asarray(lagged.df)[0, 1], 0.95
    )
    yield "lagged (r_innovation)", float(np.asarray(lagged.p_value)[0, 1]), (float(low), float(high)), None
    naive = stats.partial_corr_matrix(scores, covar)
    low, high = consistent_interval(naive.r[0, 1], naive.statistic[0, 1], np.asarray(naive.df).max(), 0.95)
    yield "t-test", float(naive.p_value[0, 1]), (float(low), float(high)), None


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


def grid_study(
    grid: tuple[GridCell, ...] = GRID,
    *,
    replicates: int = 400,
    n_boot: int = 199,
    seed: int = 2026,
    with_gam: bool = True,
    progress: Callable[[int, int, GridCell, float], None] | None = None,
) -> pd.DataFrame:
    """Type-I error, power, coverage and flag rates of the default and its alternatives on ``grid``.

    Parameters
    ----------
    grid : tuple of GridCell
    replicates : int
        Simulated runs (or pooled groups of runs) per cell and hypothesis.
    n_boot : int
        Sieve replicates per test.
    seed : int
        Every random number follows from it (cell i, hypothesis h use their own stream).
    with_gam : bool
        Also run the sieve with the GAM control in the cells marked ``gam`` (slower).
    progress : callable, optional
        Called as ``progress(index, total, cell, seconds)`` after each cell.

    Returns
    -------
    DataFrame
        One row per cell × method: ``cell, n, runs, method, type1_05, type1_01, power, coverage, flag_rate,
        type1_05_unflagged, tests`` and the Monte Carlo standard errors ``se_type1_05`` and ``se_power``.
    """
    if replicates < 1:
        raise GengenError(f"replicates: must be at least 1, got {replicates}")
    rows: list[dict[str, Any]] = []
    for index, cell in enumerate(grid):
        started = time.perf_counter()
        tallies: dict[tuple[str, str], _Tally] = {}
        hypotheses = (("null", 0.0), ("alternative", RHO)) if cell.has_alternative else (("null", 0.0),)
        for hypothesis, rho in hypotheses:
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, int(rho > 0)]))
            for replicate in range(replicates):
                scores, id_scores = simulate_pair_runs(cell, rho, rng)
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
            progress(index, len(grid), cell, time.perf_counter() - started)
    return pd.DataFrame(rows)


def _rate(count: int, total: int) -> float:
    return count / total if total else float("nan")


def _row(cell: GridCell, method: str, null: _Tally, alternative: _Tally) -> dict[str, Any]:
    type1 = _rate(null.reject_05, null.tests)
    power = _rate(alternative.reject_05, alternative.tests)
    flagged = null.flagged + null.unflagged
    return {
        "cell": cell.label,
        "n": cell.n,
        "runs": cell.runs,
        "shape": cell.shape,
        "method": method,
        "type1_05": type1,
        "se_type1_05": np.sqrt(type1 * (1 - type1) / null.tests) if null.tests else float("nan"),
        "type1_01": _rate(null.reject_01, null.tests),
        "power": power,
        "se_power": np.sqrt(power * (1 - power) / alternative.tests) if alternative.tests else float("nan"),
        "coverage": _rate(alternative.covered, alternative.intervals),
        "flag_rate": _rate(null.flagged, flagged) if flagged else float("nan"),
        "type1_05_unflagged": _rate(null.unflagged_reject_05, null.unflagged) if flagged else float("nan"),
        "tests": null.tests,
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
