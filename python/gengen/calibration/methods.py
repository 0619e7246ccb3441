"""The method comparison of issue 9: every inference method of gengen on textbook AR(1) and random-walk cells.

The measure ``"methods"`` of :func:`gengen.calibration.studies.calibration_study` (``gengen simulate``; tables in
``docs/calibration.md``, "The method comparison"): for each textbook :class:`gengen.calibration.simulate.Cell` and
each of
its ``rhos``, the Rust core simulates the runs and tests them with every method in one pass
(``gengen._core.calibration_cell``, model in ``rust/src/simulate.rs``), and this module turns the tallies into
type-I error at α = 0.05 and 0.01, power and the coverage of 95% intervals, with Monte Carlo standard errors;
:func:`rate_table`, :func:`summary_line` and :func:`plot_type1_error` read the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gengen import _core
from gengen.calibration.simulate import NOISES, Cell, _noise
from gengen.errors import InvalidArgumentError

__all__ = [
    "FULL_DESIGN",
    "LAGGED_METHOD",
    "QUICK_DESIGN",
    "StudyDesign",
    "plot_type1_error",
    "rate_table",
    "run_methods",
    "summary_line",
]

#: The calibrated method of this comparison: the lagged test of r_innovation (issue 9). The analysis's default
#: is now the AR-sieve test of r_partial itself, whose calibration is the measure "grid".
LAGGED_METHOD = "lagged"
#: Basis dimension of each smooth of the lagged GAM in the study.
GAM_LAGGED_K = 5


@dataclass(frozen=True)
class StudyDesign:
    """A named list of cells and the measure that runs them; see :data:`FULL_DESIGN` and :data:`QUICK_DESIGN`."""

    name: str
    cells: tuple[Cell, ...]
    measure: str = "methods"


def _design(
    *,
    ns: Iterable[int],
    shapes: Iterable[str],
    rhos: tuple[float, ...],
    replicates: int,
    n_perm: int,
    n_boot: int,
    gam: bool,
) -> list[Cell]:
    return [
        Cell(
            label,
            n=n,
            noise="rw" if noise == "rw" else "ar",
            coef_a=(phi,),
            shape=shape,
            rhos=rhos,
            gam=gam,
            replicates=replicates,
            n_perm=n_perm,
            n_boot=n_boot,
        )
        for shape in shapes
        for n in ns
        for label, noise, phi in NOISES
    ]


#: The study of docs/calibration.md: every method at n ∈ {20, 50, 200} for a linear f (2,000 replicates per
#: cell), and the linear-versus-GAM comparison at n = 50 for the non-linear shapes (400 replicates per cell,
#: the lagged GAM being the costly part).
FULL_DESIGN = StudyDesign(
    "full",
    tuple(
        _design(
            ns=(20, 50, 200), shapes=("linear",), rhos=(0.0, 0.3), replicates=2000, n_perm=299, n_boot=299, gam=False
        )
        + _design(
            ns=(50,),
            shapes=("saturating", "nonmonotone"),
            rhos=(0.0, 0.3),
            replicates=400,
            n_perm=0,
            n_boot=0,
            gam=True,
        )
    ),
)

#: The reduced study of `gengen simulate --quick`: every linear-control method under the null at n = 50,
#: 2,000 replicates per cell, 199 permutations or bootstrap replicates per test (about 20 s on 2 cores).
QUICK_DESIGN = StudyDesign(
    "quick",
    tuple(_design(ns=(50,), shapes=("linear",), rhos=(0.0,), replicates=2000, n_perm=199, n_boot=199, gam=False)),
)


def _rate(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = count / total
        se = np.sqrt(rate * (1 - rate) / total)
    return rate, se


def _core_noise(cell: Cell) -> tuple[str, float]:
    """The core's (noise, φ) of a textbook AR(1) or random-walk cell; an error naming the cell otherwise."""
    unsupported = (
        cell.process != "textbook"
        or cell.runs != 1
        or cell.heteroskedastic
        or (cell.noise == "ar" and (len(cell.coef_a) != 1 or cell.noise_b != cell.coef_a))
    )
    if unsupported:
        raise InvalidArgumentError(
            f"cells: the method comparison simulates single textbook runs with AR(1) or random-walk noise; "
            f"cell {cell.label!r} is not one"
        )
    return _noise("rw" if cell.noise == "rw" else "ar1", cell.phi)


def run_methods(
    cells: Sequence[Cell],
    *,
    replicates: int | None = None,
    n_boot: int | None = None,
    seed: int = 2026,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Type-I error, power and interval coverage of every inference method over textbook cells.

    The measure ``"methods"`` of :func:`gengen.calibration.studies.calibration_study`.

    Parameters
    ----------
    cells : sequence of Cell
        Textbook cells with AR(1) or random-walk noise, single runs; each of a cell's ``rhos`` is simulated.
    replicates, n_boot : int, optional
        Replicates and bootstrap resamples of the cells that do not set their own (``n_boot`` default 0: no
        bootstrap methods).
    seed : int
        Everything random follows from it; the i-th (cell, ρ) uses its own streams, so results do not depend on
        the number of threads.
    progress : callable, optional
        Called with one line after each (cell, ρ).

    Returns
    -------
    pandas.DataFrame
        One row per (cell, ρ, method): ``n, noise`` (the cell's label), ``phi, shape, shared`` (ρ),
        ``hypothesis`` ("H0" when ρ = 0, else "H1"; not "null", which CSV readers take for a missing value),
        ``method, control, default`` (whether it is the calibrated lagged test),
        ``replicates`` (evaluated), ``reject_05, reject_05_se, reject_01, reject_01_se`` (type-I error under
        the null, power under the alternative, with Monte Carlo standard errors √(p(1 − p)/R)),
        ``coverage, coverage_se`` (of 95% intervals for ρ; NaN for tests without an interval), ``ci_width``.

    Examples
    --------
    >>> from gengen.calibration.methods import run_methods
    >>> from gengen.calibration.simulate import Cell
    >>> table = run_methods([Cell("ar1(0.9)", rhos=(0.0,), replicates=200)], seed=1)
    >>> sorted(table.method)[:3]
    ['lagged', 'neff-bartlett', 'neff-pyper-peterman']
    """
    if seed < 0:
        raise InvalidArgumentError(f"seed: must be a non-negative integer, got {seed}")
    runs = [(cell, rho, _core_noise(cell)) for cell in cells for rho in cell.rhos]
    rows = []
    for index, (cell, rho, (noise, phi)) in enumerate(runs):
        started = time.perf_counter()
        count = cell.replicates if cell.replicates is not None else replicates
        if count is None or count < 1:
            raise InvalidArgumentError(f"replicates: cell {cell.label!r} needs at least 1, got {count}")
        boot = cell.n_boot if cell.n_boot is not None else (n_boot or 0)
        tallies = _core.calibration_cell(
            cell.n,
            noise,
            phi,
            cell.shape,
            rho,
            count,
            seed,
            index,
            cell.n_perm,
            boot,
            cell.gam,
            GAM_LAGGED_K,
            0.02,
            0.01,
        )
        for tally in tallies:
            rows.append(
                {
                    "n": cell.n,
                    "noise": cell.label,
                    "phi": cell.phi,
                    "shape": cell.shape,
                    "shared": rho,
                    "hypothesis": "H0" if rho == 0 else "H1",
                    "method": tally.method,
                    "control": tally.control,
                    "default": tally.method == LAGGED_METHOD,
                    "replicates": tally.evaluated,
                    "reject_05_count": tally.reject_05,
                    "reject_01_count": tally.reject_01,
                    "ci_evaluated": tally.ci_evaluated,
                    "covered": tally.covered,
                    "ci_width_sum": tally.ci_width_sum,
                }
            )
        if progress is not None:
            seconds = time.perf_counter() - started
            progress(f"[{index + 1}/{len(runs)}] n={cell.n} {cell.label} {cell.shape} rho={rho:g} ({seconds:.1f} s)")
    return _rates(pd.DataFrame(rows))


def _rates(table: pd.DataFrame) -> pd.DataFrame:
    """Counts to rates with Monte Carlo standard errors."""
    if table.empty:
        return table
    evaluated = table["replicates"].to_numpy(dtype=float)
    table["reject_05"], table["reject_05_se"] = _rate(table.pop("reject_05_count").to_numpy(float), evaluated)
    table["reject_01"], table["reject_01_se"] = _rate(table.pop("reject_01_count").to_numpy(float), evaluated)
    ci_evaluated = table.pop("ci_evaluated").to_numpy(dtype=float)
    table["coverage"], table["coverage_se"] = _rate(table.pop("covered").to_numpy(float), ci_evaluated)
    with np.errstate(invalid="ignore", divide="ignore"):
        table["ci_width"] = table.pop("ci_width_sum").to_numpy(float) / ci_evaluated
    return table


def summary_line(table: pd.DataFrame) -> str:
    """``lagged type-I at .05 (phi=0.9, n=50): X; naive t-test: Y`` from a study table.

    Uses the null cell with a linear f, AR(1) φ = 0.9 and n = 50; raises if the table lacks it.
    """
    cell = table[
        (table["n"] == 50) & (table["phi"] == 0.9) & (table["shape"] == "linear") & (table["hypothesis"] == "H0")
    ]
    default = cell.loc[cell["method"] == LAGGED_METHOD, "reject_05"]
    naive = cell.loc[cell["method"] == "t-test", "reject_05"]
    if default.empty or naive.empty:
        raise InvalidArgumentError("table: has no null cell with phi=0.9, n=50 and a linear shape")
    return f"lagged type-I at .05 (phi=0.9, n=50): {default.iloc[0]:.3f}; naive t-test: {naive.iloc[0]:.3f}"


def rate_table(
    table: pd.DataFrame, *, n: int = 50, shape: str = "linear", hypothesis: str = "H0", column: str = "reject_05"
) -> pd.DataFrame:
    """One study column as a methods × noise table (formatted "rate ± se" strings) for one n and shape.

    Examples
    --------
    >>> from gengen.calibration.studies import calibration_study, rate_table
    >>> from gengen.calibration.simulate import Cell
    >>> cells = [Cell(f"ar1({phi:g})", coef_a=(phi,), rhos=(0.0,), replicates=100) for phi in (0.0, 0.9)]
    >>> list(rate_table(calibration_study(cells)).columns)
    ['ar1(0)', 'ar1(0.9)']
    """
    rows = table[(table["n"] == n) & (table["shape"] == shape) & (table["hypothesis"] == hypothesis)]
    se_column = f"{column}_se"
    formatted = rows.assign(
        cell=[
            "–" if not np.isfinite(v) else f"{v:.3f} ± {s:.3f}"
            for v, s in zip(rows[column], rows[se_column], strict=True)
        ]
    )
    order = list(dict.fromkeys(rows["method"]))
    noises = list(dict.fromkeys(rows["noise"]))
    return formatted.pivot(index="method", columns="noise", values="cell").reindex(index=order, columns=noises)


def plot_type1_error(
    table: pd.DataFrame, path: str, *, n: int = 50, shapes: Sequence[str] = ("linear", "nonmonotone")
) -> None:
    """Save the figure of type-I error at α = 0.05 against the noise, one panel per shape of f, to ``path``.

    One line per method (±2 Monte Carlo standard errors); gengen's default is drawn thick and black (solid:
    linear control, dashed: GAM control). Shapes absent from the table are skipped.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [shape for shape in shapes if ((table["shape"] == shape) & (table["n"] == n)).any()]
    if not present:
        raise InvalidArgumentError(f"table: has no cell with n={n} and shape in {list(shapes)}")
    figure, axes = plt.subplots(1, len(present), figsize=(7.5 * len(present), 5.5), squeeze=False)
    palette = plt.get_cmap("tab20")
    methods = list(dict.fromkeys(table["method"]))
    for axis, shape in zip(axes[0], present, strict=True):
        rows = table[(table["n"] == n) & (table["shape"] == shape) & (table["hypothesis"] == "H0")]
        noises = list(dict.fromkeys(rows["noise"]))
        positions = {label: i for i, label in enumerate(noises)}
        axis.axhspan(0.035, 0.065, color="0.9", label="target [0.035, 0.065]")
        axis.axhline(0.05, color="0.5", linewidth=0.8)
        for method, group in rows.groupby("method", sort=False):
            x = [positions[label] for label in group["noise"]]
            if method == LAGGED_METHOD:
                style: dict[str, object] = {"linewidth": 3, "color": "black", "zorder": 5}
            elif method == f"gam-{LAGGED_METHOD}":
                style = {"linewidth": 3, "color": "black", "linestyle": "--", "zorder": 5}
            else:
                style = {"linewidth": 1.2, "color": palette(methods.index(method) % 20)}
            axis.errorbar(
                x,
                group["reject_05"].clip(lower=1e-3),
                yerr=2 * group["reject_05_se"],
                marker="o",
                markersize=3,
                label=method,
                capsize=2,
                **style,
            )
        axis.set_xticks(range(len(noises)), noises)
        axis.set_yscale("log")
        axis.set_ylim(0.002, 1.2)
        axis.set_xlabel("noise of the OOD scores")
        axis.set_ylabel("type-I error at α = 0.05 (±2 MC s.e.)")
        axis.set_title(f"{shape} f, n = {n} checkpoints")
        axis.legend(fontsize=7, ncol=2, loc="lower right" if shape != "linear" else "lower left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
