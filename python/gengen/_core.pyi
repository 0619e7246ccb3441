"""Type stubs of gengen._core, the Rust extension. Use gengen.stats: it validates arguments and documents them.

Matrices are float64 numpy arrays of shape (n, m) (observations × variables), in any memory order. Errors are
raised as gengen.errors.InvalidArgumentError or gengen.errors.DegenerateDataError.
"""

import numpy as np
from numpy.typing import NDArray

__version__: str

_Float2D = NDArray[np.float64]

def partial_corr(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    covar: _Float2D,
    method: str,
    semi: str | None = None,
    fit: tuple[int, str, str] | None = None,
) -> tuple[float, float, float, float, int, int]:
    """(r, statistic, p_value, df, n, k) of ppcor's pcor.test / spcor.test."""

def fisher_ci(r: float, df: float, level: float) -> tuple[float, float]:
    """Fisher-z interval of a partial correlation whose t-test has df degrees of freedom."""

def ppcor_matrices(data: _Float2D, method: str, semi: bool) -> tuple[_Float2D, _Float2D, _Float2D, int, int]:
    """(estimate, statistic, p_value, n, k) of ppcor's pcor (semi=False) or spcor (semi=True)."""

def residualise(y: _Float2D, covar: _Float2D) -> _Float2D:
    """Residuals of each column of y on [1, covar]."""

def partial_corr_matrix_batch(
    scores: list[_Float2D],
    covars: list[_Float2D],
    method: str,
    fit: tuple[int, str, str] | None = None,
    n_threads: int | None = None,
) -> list[tuple[_Float2D, _Float2D, _Float2D, _Float2D, NDArray[np.float64], int, int]]:
    """Per run: (r, statistic, p_value, df per pair, df spent on the control per column, n, k)."""

def permutation_test_batch(
    scores: list[_Float2D],
    covars: list[_Float2D],
    method: str,
    n_perm: int,
    scheme: str,
    block_length: int | None = None,
    mirror: bool = False,
    seed: int = 0,
    fit: tuple[int, str, str] | None = None,
    n_threads: int | None = None,
) -> list[tuple[_Float2D, _Float2D, _Float2D, int | None]]:
    """Per run: (r, p_value, p_fwer, block_length used)."""

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
    fit: tuple[int, str, str] | None = None,
    n_threads: int | None = None,
) -> list[tuple[_Float2D, _Float2D, _Float2D, _Float2D, int | None]]:
    """Per run: (r, ci_low, ci_high, n_valid, block_length used)."""

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
    k: int = 10,
    method: str = "gcv",
    basis: str = "cr",
    lam: list[float] | None = None,
    n_threads: int | None = None,
) -> tuple[_Float2D, _Float2D, NDArray[np.float64], _Float2D, NDArray[np.float64], list[int]]:
    """(fitted (n, m), residuals (n, m), edf (m,), lam (m, q), score (m,), k used per control)."""

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
) -> list[tuple[str, str, int, int, int, int, int, float]]:
    """Per method: (method, control, evaluated, reject_05, reject_01, ci_evaluated, covered, ci_width_sum)."""

def lagged_partial_corr(
    scores: _Float2D,
    covar: _Float2D,
    method: str,
    fit: str = "linear",
    k: int = ...,  # default 5
) -> tuple[_Float2D, _Float2D, _Float2D, _Float2D, _Float2D, NDArray[np.float64], NDArray[np.float64], int, int]:
    """(estimate, innovation_estimate, statistic, p_value, df, lag1, control_df, n, k) of the lagged test."""

def prewhitened_partial_corr(
    scores: _Float2D, covar: _Float2D, method: str, bias_correction: bool = True
) -> tuple[_Float2D, _Float2D, _Float2D, _Float2D, _Float2D, NDArray[np.float64], NDArray[np.float64], int, int, float]:
    """(estimate, whitened_estimate, statistic, p_value, naive_p_value, phi, lag1, n, k, df)."""
