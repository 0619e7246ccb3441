"""Simulated checkpoint trajectories and the calibration study of gengen's inference methods.

:func:`simulate_trajectories` generates score tables (the store's long format) with the structure real
fine-tuning runs have: a smooth in-domain (ID) learning curve, and out-of-distribution (OOD) scores that are a
linear, saturating or non-monotone function of it plus serially correlated noise (AR(1) or a random walk);
under the null the OOD noises are independent, under the alternative they share a component.

:func:`calibration_study` measures, for every inference method gengen offers, the type-I error at α = 0.05 and
0.01, the power and the coverage of 95% intervals, with Monte Carlo standard errors. Both run on the Rust
core (``gengen._core``); the model is documented in ``rust/src/simulate.rs`` and ``docs/calibration.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gengen import _core
from gengen.errors import InvalidArgumentError

#: The calibrated method of this comparison: the lagged test of r_innovation (issue 9). The analysis's default
#: is now the AR-sieve test of r_partial itself, whose calibration grid is :mod:`gengen.calibration`.
LAGGED_METHOD = "lagged"

__all__ = [
    "FULL_DESIGN",
    "QUICK_DESIGN",
    "Cell",
    "StudyDesign",
    "calibration_study",
    "plot_type1_error",
    "rate_table",
    "simulate_trajectories",
    "summary_line",
]

#: Noise models of the study: (label, noise, φ).
NOISES: tuple[tuple[str, str, float], ...] = (
    ("ar1(0)", "ar1", 0.0),
    ("ar1(0.5)", "ar1", 0.5),
    ("ar1(0.9)", "ar1", 0.9),
    ("ar1(0.99)", "ar1", 0.99),
    ("random walk", "rw", 1.0),
)

SHAPES = ("linear", "saturating", "nonmonotone")


def _noise(noise: str, phi: float) -> tuple[str, float]:
    if noise in ("rw", "random_walk", "random walk"):
        return "rw", 1.0
    if noise != "ar1":
        raise InvalidArgumentError(f"noise: unknown value {noise!r}; expected 'ar1' or 'rw'")
    if not -1.0 < phi < 1.0:
        raise InvalidArgumentError(f"phi: an AR(1) coefficient must lie strictly between -1 and 1, got {phi}")
    return "ar1", float(phi)


def simulate_trajectories(
    *,
    n: int = 50,
    n_testsets: int = 2,
    noise: str = "ar1",
    phi: float = 0.9,
    shape: str = "linear",
    shared: float = 0.0,
    n_runs: int = 1,
    noise_sd: float = 0.02,
    id_noise_sd: float = 0.01,
    seed: int = 0,
    study: str = "simulated",
    model: str = "simulated",
) -> pd.DataFrame:
    """Simulated score trajectories in the store's long format.

    Parameters
    ----------
    n : int
        Checkpoints per run (steps 100, 200, …).
    n_testsets : int
        OOD test sets per run, named ``ood_1`` … ; the ID test set is ``id``.
    noise : {"ar1", "rw"}
        AR(1) noise with coefficient ``phi`` (unit variance) or a random walk scaled by 1/√n.
    phi : float
        The AR(1) coefficient, in (−1, 1).
    shape : {"linear", "saturating", "nonmonotone"}
        The function f with OOD = 0.2 + b_j f(x) + σ e_j, x the rescaled ID score.
    shared : float
        Correlation ρ ∈ [0, 1) of the OOD noises (0: the null hypothesis).
    n_runs : int
        Independent runs (``run`` = "seed=0", "seed=1", …).
    noise_sd, id_noise_sd : float
        σ of the OOD noise and of the white measurement noise of the ID score.
    seed : int
        Everything random follows from it (run i uses stream i).
    study, model : str
        Values of the ``study`` and ``model`` columns.

    Returns
    -------
    pandas.DataFrame
        Columns ``study, model, family, size, run, seed, shots, step, tokens, epoch, testset, metric, value,
        n_examples``; metric "accuracy"; one row per (run, step, test set).

    Examples
    --------
    >>> from gengen.simulate import simulate_trajectories
    >>> scores = simulate_trajectories(n=20, n_testsets=2, phi=0.5, seed=1)
    >>> scores.shape, sorted(scores.testset.unique())
    ((60, 14), ['id', 'ood_1', 'ood_2'])
    """
    noise, phi = _noise(noise, phi)
    if n_runs < 1:
        raise InvalidArgumentError(f"n_runs: must be at least 1, got {n_runs}")
    if seed < 0:
        raise InvalidArgumentError(f"seed: must be a non-negative integer, got {seed}")
    frames = []
    for run in range(n_runs):
        id_score, ood = _core.simulate_run(n, n_testsets, noise, phi, shape, shared, noise_sd, id_noise_sd, seed, run)
        values = np.column_stack([id_score, ood])
        names = ["id"] + [f"ood_{j + 1}" for j in range(n_testsets)]
        steps = 100 * np.arange(1, n + 1, dtype=np.int64)
        frame = pd.DataFrame(
            {
                "step": np.tile(steps, len(names)),
                "testset": np.repeat(names, n),
                "value": values.T.reshape(-1),
            }
        )
        frame.insert(0, "run", f"seed={run}")
        frame.insert(1, "seed", run)
        frames.append(frame)
    scores = pd.concat(frames, ignore_index=True)
    out = pd.DataFrame(
        {
            "study": study,
            "model": model,
            "family": "simulated",
            "size": f"{shape}-{noise}{'' if noise == 'rw' else f'({phi:g})'}",
            "run": scores["run"].astype(str),
            "seed": scores["seed"].astype("Int64"),
            "shots": pd.array([pd.NA] * len(scores), dtype="Int64"),
            "step": scores["step"].astype(np.int64),
            "tokens": pd.array([pd.NA] * len(scores), dtype="Int64"),
            "epoch": np.full(len(scores), np.nan),
            "testset": scores["testset"].astype(str),
            "metric": "accuracy",
            "value": scores["value"].astype(np.float64),
            "n_examples": pd.array([pd.NA] * len(scores), dtype="Int64"),
        }
    )
    return out


@dataclass(frozen=True)
class Cell:
    """One design of the study: checkpoints, noise, shape, noise correlation, and how many replicates."""

    n: int
    noise: str
    phi: float
    label: str
    shape: str
    shared: float
    replicates: int
    n_perm: int
    n_boot: int
    gam: bool


@dataclass(frozen=True)
class StudyDesign:
    """A list of cells; see :data:`FULL_DESIGN` and :data:`QUICK_DESIGN`."""

    name: str
    cells: tuple[Cell, ...]


def _grid(
    *,
    ns: Iterable[int],
    noises: Iterable[tuple[str, str, float]],
    shapes: Iterable[str],
    shared: Iterable[float],
    replicates: int,
    n_perm: int,
    n_boot: int,
    gam: bool,
) -> list[Cell]:
    return [
        Cell(n, noise, phi, label, shape, rho, replicates, n_perm, n_boot, gam)
        for shape in shapes
        for n in ns
        for label, noise, phi in noises
        for rho in shared
    ]


#: The study of docs/calibration.md: every method at n ∈ {20, 50, 200} for a linear f (2,000 replicates per
#: cell), and the linear-versus-GAM comparison at n = 50 for the non-linear shapes (400 replicates per cell,
#: the lagged GAM being the costly part).
FULL_DESIGN = StudyDesign(
    "full",
    tuple(
        _grid(
            ns=(20, 50, 200),
            noises=NOISES,
            shapes=("linear",),
            shared=(0.0, 0.3),
            replicates=2000,
            n_perm=299,
            n_boot=299,
            gam=False,
        )
        + _grid(
            ns=(50,),
            noises=NOISES,
            shapes=("saturating", "nonmonotone"),
            shared=(0.0, 0.3),
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
    tuple(
        _grid(
            ns=(50,),
            noises=NOISES,
            shapes=("linear",),
            shared=(0.0,),
            replicates=2000,
            n_perm=199,
            n_boot=199,
            gam=False,
        )
    ),
)

#: Basis dimension of each smooth of the lagged GAM in the study.
GAM_LAGGED_K = 5


def _rate(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = count / total
        se = np.sqrt(rate * (1 - rate) / total)
    return rate, se


def calibration_study(
    design: StudyDesign | Sequence[Cell] = QUICK_DESIGN,
    *,
    seed: int = 2026,
    progress: Callable[[int, int, Cell, float], None] | None = None,
) -> pd.DataFrame:
    """Type-I error, power and interval coverage of every inference method over a design.

    Parameters
    ----------
    design : StudyDesign or sequence of Cell
        :data:`QUICK_DESIGN` (seconds), :data:`FULL_DESIGN` (minutes) or your own cells.
    seed : int
        Everything random follows from it; cell i uses its own streams, so results do not depend on the
        number of threads.
    progress : callable, optional
        Called after each cell as ``progress(i, n_cells, cell, seconds)``.

    Returns
    -------
    pandas.DataFrame
        One row per (cell, method): ``n, noise, phi, shape, shared, hypothesis`` ("H0" when shared = 0,
        else "H1"; not "null", which CSV readers take for a missing value), ``method, control, default``
        (whether it is gengen's default inference),
        ``replicates`` (evaluated), ``reject_05, reject_05_se, reject_01, reject_01_se`` (type-I error under
        the null, power under the alternative, with Monte Carlo standard errors √(p(1 − p)/R)),
        ``coverage, coverage_se`` (of 95% intervals for ρ; NaN for tests without an interval), ``ci_width``.

    Examples
    --------
    >>> from gengen.simulate import Cell, calibration_study
    >>> cell = Cell(50, "ar1", 0.9, "ar1(0.9)", "linear", 0.0, 200, 0, 0, False)
    >>> table = calibration_study([cell], seed=1)
    >>> sorted(table.method)[:3]
    ['lagged', 'neff-bartlett', 'neff-pyper-peterman']
    """
    cells = tuple(design.cells if isinstance(design, StudyDesign) else design)
    if seed < 0:
        raise InvalidArgumentError(f"seed: must be a non-negative integer, got {seed}")
    rows = []
    for index, cell in enumerate(cells):
        started = time.perf_counter()
        tallies = _core.calibration_cell(
            cell.n,
            cell.noise,
            cell.phi,
            cell.shape,
            cell.shared,
            cell.replicates,
            seed,
            index,
            cell.n_perm,
            cell.n_boot,
            cell.gam,
            GAM_LAGGED_K,
            0.02,
            0.01,
        )
        for tally in tallies:
            method, control, evaluated = tally.method, tally.control, tally.evaluated
            reject_05, reject_01, ci_evaluated = tally.reject_05, tally.reject_01, tally.ci_evaluated
            covered, width_sum = tally.covered, tally.ci_width_sum
            rows.append(
                {
                    "n": cell.n,
                    "noise": cell.label,
                    "phi": cell.phi,
                    "shape": cell.shape,
                    "shared": cell.shared,
                    "hypothesis": "H0" if cell.shared == 0 else "H1",
                    "method": method,
                    "control": control,
                    "default": method == LAGGED_METHOD,
                    "replicates": evaluated,
                    "reject_05_count": reject_05,
                    "reject_01_count": reject_01,
                    "ci_evaluated": ci_evaluated,
                    "covered": covered,
                    "ci_width_sum": width_sum,
                }
            )
        if progress is not None:
            progress(index, len(cells), cell, time.perf_counter() - started)
    table = pd.DataFrame(rows)
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
    >>> from gengen.simulate import Cell, calibration_study, rate_table
    >>> cells = [Cell(50, "ar1", phi, f"ar1({phi:g})", "linear", 0.0, 100, 0, 0, False) for phi in (0.0, 0.9)]
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
