"""The simulated design of a calibration study: :class:`Cell` and one drawn :class:`Replicate`.

Its own module so that the simulator (:mod:`gengen.calibration.simulate`) and the learning-curve process
(:mod:`gengen.calibration.learning_curves`) both build on it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gengen.errors import GengenError

__all__ = ["LINKS", "PROCESSES", "SCHEDULES", "SHAPES", "SPECIALS", "Cell", "Replicate", "check_curve_cell"]

#: Checkpoint schedules, links and special test sets of the curves process (:mod:`gengen.calibration.learning_curves`).
SCHEDULES = ("log", "dense-early", "even")
LINKS = ("linear", "saturating")
SPECIALS = ("", "stuck", "plateau", "duplicates")

#: The processes a cell can simulate.
PROCESSES = ("textbook", "curves")
#: Links of OOD to ID of the textbook process.
SHAPES = ("linear", "saturating", "nonmonotone")


@dataclass(frozen=True)
class Cell:
    """One simulated design: the process, its length, noise and link, the runs pooled and the ρ simulated.

    Parameters
    ----------
    label : str
        The cell's name in the study's tables.
    n : int
        Checkpoints per run (the curves process counts step 0 and repeated rows).
    process : {"textbook", "curves"}
        Noise around a smooth ID curve, or realistic fine-tuning learning curves (module docstring).
    noise : {"ar", "rw"}
        Textbook: stationary unit-variance AR noise with coefficients ``coef_a``/``coef_b``, or a random walk.
    coef_a, coef_b : tuple of float
        AR coefficients of the two OOD noises (``coef_b`` None: the same as ``coef_a``); the curves process
        uses AR(1) noise with φ = ``coef_a[0]``.
    shape : str
        The link of OOD to ID: textbook "linear", "saturating" or "nonmonotone"; curves "linear" or "saturating".
    heteroskedastic : bool
        Textbook: the noise's standard deviation falls threefold over training.
    schedule : {"log", "dense-early", "even"}
        Curves: the checkpoint schedule (:mod:`gengen.calibration.learning_curves`).
    n_examples : int
        Curves: examples per test set.
    special : {"", "stuck", "plateau", "duplicates"}
        Curves: a test set b that is stuck at chance, plateaus, or has duplicated checkpoints.
    jump : tuple of float
        Curves: OOD's offset above its line through chance after step 0 (a, b): step 0 then sits ``jump`` below
        the line the fine-tuned checkpoints follow (the pre-trained model is not on the fine-tuned models' line).
    runs : int
        Runs per replicate (more than one: a group of seeds pooled by meta-analysis).
    rhos : tuple of float
        Correlations of the two OOD noises to simulate, each in [0, 1); 0 is the null hypothesis.
    gam : bool
        Whether the study also runs the GAM control here (it matters where OOD is non-linear in ID, and costs).
    well_specified : bool
        Whether the default is expected to meet the contract here (the realistic study's CI-sized test).
    replicates, n_perm, n_boot : int, optional
        The method comparison's per-cell replicates, permutations and bootstrap resamples (None: the study's).
    """

    label: str
    n: int = 50
    process: str = "textbook"
    noise: str = "ar"
    coef_a: tuple[float, ...] = (0.9,)
    coef_b: tuple[float, ...] | None = None
    shape: str = "linear"
    heteroskedastic: bool = False
    schedule: str = "log"
    n_examples: int = 1000
    special: str = ""
    jump: tuple[float, float] = (0.0, 0.0)
    runs: int = 1
    rhos: tuple[float, ...] = (0.0, 0.3)
    gam: bool = False
    well_specified: bool = True
    replicates: int | None = None
    n_perm: int = 0
    n_boot: int | None = None

    def __post_init__(self) -> None:
        if self.process not in PROCESSES:
            raise GengenError(f"process: {self.process!r} is not one of {', '.join(PROCESSES)}")
        if self.runs < 1:
            raise GengenError(f"runs: must be at least 1, got {self.runs}")
        if not self.rhos or any(not 0.0 <= rho < 1.0 for rho in self.rhos):
            raise GengenError(f"rhos: each noise correlation must lie in [0, 1), got {self.rhos}")
        if self.process == "curves":
            check_curve_cell(self)
            return
        if self.shape not in SHAPES:
            raise GengenError(f"shape: {self.shape!r} is not one of {', '.join(SHAPES)}")
        if self.noise not in ("ar", "rw"):
            raise GengenError(f"noise: unknown value {self.noise!r}; expected 'ar' or 'rw'")

    @property
    def phi(self) -> float:
        """The first AR coefficient of the noise (1 for a random walk)."""
        return 1.0 if self.noise == "rw" else float(self.coef_a[0])

    @property
    def link(self) -> str:
        """The link of OOD to ID (``shape``)."""
        return self.shape

    @property
    def noise_b(self) -> tuple[float, ...]:
        """AR coefficients of the second OOD noise."""
        return self.coef_a if self.coef_b is None else self.coef_b

    @property
    def has_alternative(self) -> bool:
        """Whether the cell simulates a correlation besides the null."""
        return any(rho > 0 for rho in self.rhos)

    @property
    def alternatives(self) -> bool:
        """The same as :attr:`has_alternative` (the name of the realistic grid)."""
        return self.has_alternative


class Replicate(NamedTuple):
    """One simulated replicate of a cell: steps (n,), ID scores (runs, n), OOD scores (runs, n, 2)."""

    steps: np.ndarray
    id_scores: np.ndarray
    scores: np.ndarray


def check_curve_cell(cell: Cell) -> None:
    """Raise a :class:`~gengen.errors.GengenError` naming the field of a curves cell that is out of range."""
    if cell.schedule not in SCHEDULES:
        raise GengenError(f"schedule: {cell.schedule!r} is not one of {', '.join(SCHEDULES)}")
    if cell.link not in LINKS:
        raise GengenError(f"link: {cell.link!r} is not one of {', '.join(LINKS)}")
    if cell.special not in SPECIALS:
        raise GengenError(f"special: {cell.special!r} is not one of {', '.join(s for s in SPECIALS if s)}")
    if cell.n < 6:
        raise GengenError(f"n: a run needs at least 6 checkpoints, got {cell.n}")
    if len(cell.coef_a) != 1 or not -1 < cell.phi < 1:
        raise GengenError(f"phi: must be one AR(1) coefficient strictly between -1 and 1, got {cell.coef_a}")
    if cell.n_examples < 10:
        raise GengenError(f"n_examples: must be at least 10, got {cell.n_examples}")
