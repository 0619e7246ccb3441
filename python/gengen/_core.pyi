"""Type stubs of gengen._core, the Rust extension. Use gengen.stats: it validates arguments and documents them.

Matrices are float64 numpy arrays of shape (n, m) (observations × variables), in any memory order. Errors are
raised as gengen.errors.InvalidArgumentError or gengen.errors.DegenerateDataError. Results are frozen result
objects whose attributes are read-only. The ``*_batch`` functions take one matrix per run and return one result
per run, in the same order.
"""

from typing import Final, final

import numpy as np
from numpy.typing import NDArray

from gengen.stats.controls import Control, Gam

__version__: str

_Float2D = NDArray[np.float64]
_Float1D = NDArray[np.float64]

@final
class PartialCorrResult:
    """ppcor's pcor.test / spcor.test of one pair."""

    r: Final[float]
    statistic: Final[float]
    p_value: Final[float]
    df: Final[float]
    n: Final[int]
    k: Final[int]

@final
class PpcorResult:
    """ppcor's pcor (semi=False) or spcor (semi=True) of every pair of columns."""

    estimate: Final[_Float2D]
    statistic: Final[_Float2D]
    p_value: Final[_Float2D]
    n: Final[int]
    k: Final[int]

@final
class CorrMatrixResult:
    """One run's partial correlation matrices, with the df of each pair's test and the df spent per column."""

    r: Final[_Float2D]
    statistic: Final[_Float2D]
    p_value: Final[_Float2D]
    pair_df: Final[_Float2D]
    control_df: Final[_Float1D]
    n: Final[int]
    k: Final[int]

@final
class PermutationResult:
    """One run's permutation test: r, pairwise and family-wise p-values, the block length used."""

    r: Final[_Float2D]
    p_value: Final[_Float2D]
    p_fwer: Final[_Float2D]
    block_length: Final[int | None]

@final
class BootstrapResult:
    """One run's bootstrap intervals: r, bounds, valid replicates per pair (floats), the block length used."""

    r: Final[_Float2D]
    ci_low: Final[_Float2D]
    ci_high: Final[_Float2D]
    n_valid: Final[_Float2D]
    block_length: Final[int | None]

@final
class GamFitResult:
    """fitted (n, m), residuals (n, m), edf (m,), lam (m, q), score (m,), k used per control, capped per column
    (the EDF cap raised λ), the resolved cap max_edf (inf when none)."""

    fitted: Final[_Float2D]
    residuals: Final[_Float2D]
    edf: Final[_Float1D]
    lam: Final[_Float2D]
    score: Final[_Float1D]
    k_used: Final[list[int]]
    capped: Final[list[bool]]
    max_edf: Final[float]

@final
class CalibrationTally:
    """One method's tallies over a calibration cell."""

    method: Final[str]
    control: Final[str]
    evaluated: Final[int]
    reject_05: Final[int]
    reject_01: Final[int]
    ci_evaluated: Final[int]
    covered: Final[int]
    ci_width_sum: Final[float]

@final
class LaggedResult:
    """The lagged-regression test of every pair of columns."""

    estimate: Final[_Float2D]
    innovation_estimate: Final[_Float2D]
    statistic: Final[_Float2D]
    p_value: Final[_Float2D]
    df: Final[_Float2D]
    lag1: Final[_Float1D]
    control_df: Final[_Float1D]
    n: Final[int]
    k: Final[int]

@final
class PrewhitenedResult:
    """The AR(1)-prewhitened test of every pair of columns."""

    estimate: Final[_Float2D]
    whitened_estimate: Final[_Float2D]
    statistic: Final[_Float2D]
    p_value: Final[_Float2D]
    naive_p_value: Final[_Float2D]
    phi: Final[_Float1D]
    lag1: Final[_Float1D]
    n: Final[int]
    k: Final[int]
    df: Final[float]

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
) -> list[CorrMatrixResult]: ...
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
    """Freedman–Lane tests of every run; runs of one length see the same permutations, i drawn from (seed, i)."""

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
    """Bootstrap intervals of every run; replicate i is drawn from (seed, i) whatever n_threads."""

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

def sieve_moments(
    coef: _Float2D,
    pool: _Float2D,
    picks: NDArray[np.int64],
    spread: _Float2D,
    start: NDArray[np.float64],
    keep: int,
    basis: _Float2D,
    mix: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Σ z and Σ z² (4, m, m) of a chunk of AR-sieve replicates and their white twins (gengen.stats.sieve_kernel)."""

def sieve_bias_refit(
    coef: _Float2D,
    order: NDArray[np.int64],
    shocks: NDArray[np.float64],
    start: NDArray[np.float64],
    keep: int,
    basis: _Float2D,
    mix: NDArray[np.float64],
    exogenous: NDArray[np.float64],
    exogenous_rank: NDArray[np.int64],
) -> NDArray[np.float64]:
    """Σ over replicates of the refitted AR coefficients (m, p) of the sieve's bias simulation (sieve_kernel)."""

def t_two_sided_array(t: NDArray[np.float64], df: NDArray[np.float64]) -> NDArray[np.float64]:
    """2·P(T > |t|) entry by entry (t_two_sided over arrays)."""

def t_quantile_array(p: float, df: NDArray[np.float64]) -> NDArray[np.float64]:
    """The p quantile of Student's t on each df (t_quantile over an array)."""

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
    """(id (n,), ood (n, m)) of one simulated run (see gengen.calibration.simulate.simulate_trajectories)."""

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
