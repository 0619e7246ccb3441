"""Type stubs of gengen._core, the Rust extension. Use gengen.stats: it validates arguments and documents them.

Matrices are float64 numpy arrays of shape (n, m) (observations × variables), in any memory order. Errors are
raised as gengen.errors.InvalidArgumentError or gengen.errors.DegenerateDataError. Results are frozen result
objects whose attributes are read-only.
"""

from typing import final

import numpy as np
from numpy.typing import NDArray

from gengen.stats.controls import Control, Gam

__version__: str

_Float2D = NDArray[np.float64]
_Float1D = NDArray[np.float64]

@final
class PartialCorrResult:
    """ppcor's pcor.test / spcor.test of one pair."""

    @property
    def r(self) -> float: ...
    @property
    def statistic(self) -> float: ...
    @property
    def p_value(self) -> float: ...
    @property
    def df(self) -> float: ...
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...

@final
class PpcorResult:
    """ppcor's pcor (semi=False) or spcor (semi=True) of every pair of columns."""

    @property
    def estimate(self) -> _Float2D: ...
    @property
    def statistic(self) -> _Float2D: ...
    @property
    def p_value(self) -> _Float2D: ...
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...

@final
class CorrMatrixResult:
    """One run's partial correlation matrices, with the df of each pair's test and the df spent per column."""

    @property
    def r(self) -> _Float2D: ...
    @property
    def statistic(self) -> _Float2D: ...
    @property
    def p_value(self) -> _Float2D: ...
    @property
    def pair_df(self) -> _Float2D: ...
    @property
    def control_df(self) -> _Float1D: ...
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...

@final
class PermutationResult:
    """One run's permutation test: r, pairwise and family-wise p-values, the block length used."""

    @property
    def r(self) -> _Float2D: ...
    @property
    def p_value(self) -> _Float2D: ...
    @property
    def p_fwer(self) -> _Float2D: ...
    @property
    def block_length(self) -> int | None: ...

@final
class BootstrapResult:
    """One run's bootstrap intervals: r, bounds, valid replicates per pair (floats), the block length used."""

    @property
    def r(self) -> _Float2D: ...
    @property
    def ci_low(self) -> _Float2D: ...
    @property
    def ci_high(self) -> _Float2D: ...
    @property
    def n_valid(self) -> _Float2D: ...
    @property
    def block_length(self) -> int | None: ...

@final
class GamFitResult:
    """fitted (n, m), residuals (n, m), edf (m,), lam (m, q), score (m,), k used per control, capped per column
    (the EDF cap raised λ), the resolved cap max_edf (inf when none)."""

    @property
    def fitted(self) -> _Float2D: ...
    @property
    def residuals(self) -> _Float2D: ...
    @property
    def edf(self) -> _Float1D: ...
    @property
    def lam(self) -> _Float2D: ...
    @property
    def score(self) -> _Float1D: ...
    @property
    def k_used(self) -> list[int]: ...
    @property
    def capped(self) -> list[bool]: ...
    @property
    def max_edf(self) -> float: ...

@final
class CalibrationTally:
    """One method's tallies over a calibration cell."""

    @property
    def method(self) -> str: ...
    @property
    def control(self) -> str: ...
    @property
    def evaluated(self) -> int: ...
    @property
    def reject_05(self) -> int: ...
    @property
    def reject_01(self) -> int: ...
    @property
    def ci_evaluated(self) -> int: ...
    @property
    def covered(self) -> int: ...
    @property
    def ci_width_sum(self) -> float: ...

@final
class LaggedResult:
    """The lagged-regression test of every pair of columns."""

    @property
    def estimate(self) -> _Float2D: ...
    @property
    def innovation_estimate(self) -> _Float2D: ...
    @property
    def statistic(self) -> _Float2D: ...
    @property
    def p_value(self) -> _Float2D: ...
    @property
    def df(self) -> _Float2D: ...
    @property
    def lag1(self) -> _Float1D: ...
    @property
    def control_df(self) -> _Float1D: ...
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...

@final
class PrewhitenedResult:
    """The AR(1)-prewhitened test of every pair of columns."""

    @property
    def estimate(self) -> _Float2D: ...
    @property
    def whitened_estimate(self) -> _Float2D: ...
    @property
    def statistic(self) -> _Float2D: ...
    @property
    def p_value(self) -> _Float2D: ...
    @property
    def naive_p_value(self) -> _Float2D: ...
    @property
    def phi(self) -> _Float1D: ...
    @property
    def lag1(self) -> _Float1D: ...
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def df(self) -> float: ...

def partial_corr(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    covar: _Float2D,
    method: str,
    semi: str | None = None,
    fit: Control | None = None,
) -> PartialCorrResult:
    """ppcor's pcor.test / spcor.test."""

def fisher_ci(r: float, df: float, level: float) -> tuple[float, float]:
    """Fisher-z interval of a partial correlation whose t-test has df degrees of freedom."""

def ppcor_matrices(data: _Float2D, method: str, semi: bool) -> PpcorResult:
    """ppcor's pcor (semi=False) or spcor (semi=True)."""

def residualise(y: _Float2D, covar: _Float2D) -> _Float2D:
    """Residuals of each column of y on [1, covar]."""

def partial_corr_matrix_batch(
    scores: list[_Float2D],
    covars: list[_Float2D],
    method: str,
    fit: Control | None = None,
    n_threads: int | None = None,
) -> list[CorrMatrixResult]:
    """One result per run."""

def permutation_test_batch(
    scores: list[_Float2D],
    covars: list[_Float2D],
    method: str,
    n_perm: int,
    scheme: str,
    block_length: int | None = None,
    mirror: bool = False,
    seed: int = 0,
    fit: Control | None = None,
    n_threads: int | None = None,
) -> list[PermutationResult]:
    """One result per run."""

def bootstrap_ci_batch(
    scores: list[_Float2D],
    covars: list[_Float2D],
    method: str,
    n_boot: int,
    scheme: str,
    block_length: int | None = None,
    ci_level: float = 0.95,
    ci_method: str = "percentile",
    seed: int = 0,
    fit: Control | None = None,
    n_threads: int | None = None,
) -> list[BootstrapResult]:
    """One result per run."""

def permutation_indices(
    n: int, n_perm: int, scheme: str, block_length: int | None = None, mirror: bool = False, seed: int = 0
) -> NDArray[np.int64]: ...
def bootstrap_indices(
    n: int, n_boot: int, scheme: str, block_length: int | None = None, seed: int = 0
) -> NDArray[np.int64]: ...
def p_adjust(p: NDArray[np.float64], method: str) -> NDArray[np.float64]: ...
def default_block_length(n: int) -> int: ...
def normal_two_sided(z: float) -> float:
    """2·P(Z > |z|) for a standard normal Z."""

def normal_quantile(p: float) -> float:
    """Standard normal quantile."""

def t_two_sided(t: float, df: float) -> float:
    """2·P(T > |t|) for a Student t with df degrees of freedom."""

def t_quantile(p: float, df: float) -> float:
    """Student t quantile (NaN for df <= 0 or p outside (0, 1))."""

def ar_generate(
    coef: _Float2D, shocks: NDArray[np.float64], start: NDArray[np.float64], keep: int
) -> NDArray[np.float64]:
    """AR recursions of the AR-sieve bootstrap: the last ``keep`` steps of each (replicate, series)."""

def chi_squared_sf(x: float, df: float) -> float:
    """Upper tail of a chi-squared distribution with df degrees of freedom."""

def gam_fit(
    y: _Float2D,
    covar: _Float2D,
    control: Gam | None = None,
    lam: list[float] | None = None,
    n_threads: int | None = None,
) -> GamFitResult:
    """GAM fits of every column of y under control (None: Gam()); its max_edf caps the EDF ("auto":
    default_max_edf(n, q); None: no cap)."""

def default_max_edf(n: int, q: int = 1) -> float:
    """The default cap on a GAM fit's EDF (intercept included): 1 + q · max(1, n / 4)."""

# --- simulation study and autocorrelation-aware tests (rust/src/py/simulate.rs, issue 9) ---
def simulate_run(
    n: int,
    m: int,
    noise: str,
    phi: float,
    shape: str,
    shared: float,
    noise_sd: float,
    id_noise_sd: float,
    seed: int,
    index: int,
) -> tuple[NDArray[np.float64], _Float2D]:
    """(id (n,), ood (n, m)) of one simulated run (see gengen.simulate.simulate_trajectories)."""

def calibration_cell(
    n: int,
    noise: str,
    phi: float,
    shape: str,
    shared: float,
    replicates: int,
    seed: int,
    cell: int,
    n_perm: int,
    n_boot: int,
    gam: bool,
    gam_lagged_k: int,
    noise_sd: float,
    id_noise_sd: float,
) -> list[CalibrationTally]:
    """One tally per method."""

def lagged_partial_corr(
    scores: _Float2D,
    covar: _Float2D,
    method: str,
    fit: Control | None = None,
) -> LaggedResult:
    """The lagged test of every pair of columns under fit (None: linear)."""

def lag1_autocorrelation(series: _Float2D) -> _Float1D:
    """Lag-1 autocorrelation of every column (rows in step order); NaN when constant or under three rows."""

def prewhitened_partial_corr(
    scores: _Float2D, covar: _Float2D, method: str, bias_correction: bool = True
) -> PrewhitenedResult:
    """The prewhitened test of every pair of columns."""
