"""Shared fixtures and independent reference implementations for the tests.

Everything here is written from the published definitions (ppcor's R source, textbook formulas), never from
gengen's own code or earlier output, so that the ``tests/test_stats_*.py`` files compare gengen against
something it could disagree with.

The references are exposed through the session-scoped ``ref`` fixture (a namespace of plain functions), so
test files need not import this module by name; data paths through ``shared_dir`` and ``ppcor_golden``.
"""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mpmath
import numpy as np
import pandas as pd
import pytest
import scipy.stats

SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"


# Read at collection, before any test runs. Starting R through rpy2 (tests/test_gam.py, tests/r) puts R's library
# folders first in LD_LIBRARY_PATH, and every process started after that (executor workers, torchrun, killed-run
# subprocesses) loads the system's libpython instead of this interpreter's: `import ssl` fails with an undefined
# _PyModule_Add. Every test's child processes get the value from before R.
LD_LIBRARY_PATH = os.environ.get("LD_LIBRARY_PATH")


@pytest.fixture(autouse=True)
def environment_before_r() -> Any:
    """LD_LIBRARY_PATH as it was before any test started R, for every process a test starts."""
    with pytest.MonkeyPatch.context() as patch:
        if LD_LIBRARY_PATH is None:
            patch.delenv("LD_LIBRARY_PATH", raising=False)
        else:
            patch.setenv("LD_LIBRARY_PATH", LD_LIBRARY_PATH)
        yield


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only shared inputs beside the checkout (``../shared``)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared inputs not found at {SHARED_DIR}")
    return SHARED_DIR


@pytest.fixture(scope="session")
def ppcor_golden(shared_dir: Path) -> dict[str, Any]:
    """R ppcor 1.1 output on ``golden/ppcor/partial_corr.csv``: ``{"data": DataFrame, "cases": [...]}``."""
    golden = shared_dir / "golden" / "ppcor"
    cases = json.loads((golden / "expected.json").read_text())["cases"]
    return {"data": pd.read_csv(golden / "partial_corr.csv"), "cases": cases}


# --------------------------------------------------------------------------------------------------
# Exact partial correlation on the float64 inputs (rational arithmetic)
# --------------------------------------------------------------------------------------------------


def _column_integers(column: np.ndarray) -> list[int]:
    """The float64 values of ``column`` as integers sharing one power-of-two denominator.

    Every finite float is an integer times a power of two, so multiplying the column by its largest
    denominator is exact. A positive factor common to a column changes no correlation.
    """
    ratios = [float(v).as_integer_ratio() for v in column]
    denominator = max(q for _, q in ratios)
    return [p * (denominator // q) for p, q in ratios]


def _centred_cross_products(columns: list[np.ndarray]) -> list[list[int]]:
    """``S[a][b] = sum_i (n a_i - sum a)(n b_i - sum b)``: n^2 times the centred cross products, exactly."""
    n = len(columns[0])
    centred = []
    for column in columns:
        ints = _column_integers(column)
        total = sum(ints)
        centred.append([n * v - total for v in ints])
    size = len(centred)
    cross = [[0] * size for _ in range(size)]
    for a in range(size):
        for b in range(a, size):
            cross[a][b] = cross[b][a] = sum(u * v for u, v in zip(centred[a], centred[b], strict=True))
    return cross


def _solve_fractions(matrix: list[list[Fraction]], rhs: list[list[Fraction]]) -> list[list[Fraction]]:
    """Solve ``matrix @ X = rhs`` exactly by Gauss–Jordan elimination over the rationals."""
    size = len(matrix)
    aug = [list(matrix[i]) + list(rhs[i]) for i in range(size)]
    for col in range(size):
        pivot = next(r for r in range(col, size) if aug[r][col] != 0)
        aug[col], aug[pivot] = aug[pivot], aug[col]
        lead = aug[col][col]
        aug[col] = [v / lead for v in aug[col]]
        for r in range(size):
            if r != col and aug[r][col] != 0:
                factor = aug[r][col]
                aug[r] = [v - factor * w for v, w in zip(aug[r], aug[col], strict=True)]
    return [row[size:] for row in aug]


def _schur(cross: list[list[int]], keep: list[int], given: list[int]) -> list[list[Fraction]]:
    """Residual cross products of the ``keep`` variables after regressing them on the ``given`` ones (+ 1)."""
    s_kk = [[Fraction(cross[a][b]) for b in keep] for a in keep]
    if not given:
        return s_kk
    s_gg = [[Fraction(cross[a][b]) for b in given] for a in given]
    s_gk = [[Fraction(cross[a][b]) for b in keep] for a in given]
    beta = _solve_fractions(s_gg, s_gk)  # len(given) x len(keep)
    out = []
    for i, a in enumerate(keep):
        row = []
        for j in range(len(keep)):
            explained = sum(Fraction(cross[a][g]) * beta[gi][j] for gi, g in enumerate(given))
            row.append(s_kk[i][j] - explained)
        out.append(row)
    return out


def exact_partial_corr(x: np.ndarray, y: np.ndarray, covar: np.ndarray | None = None, semi: str | None = None) -> float:
    """Partial (or semi-partial) Pearson correlation of the float64 inputs, exact to the last bit.

    Centred cross products are exact integers; the Schur complement ``S_ab - S_aZ S_ZZ^-1 S_Zb`` (the residual
    cross products after least squares on ``[1, Z]``) is exact in :class:`fractions.Fraction`; only the final
    square root is rounded (mpmath, 50 digits). ``semi="y"`` removes ``covar`` from y only (ppcor's
    ``spcor.test(x, y, z)``): ``r = S_xy|Z / sqrt(S_xx * S_yy|Z)``; ``semi="x"`` from x only.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    covar_2d = np.empty((len(x), 0)) if covar is None else np.asarray(covar, dtype=np.float64).reshape(len(x), -1)
    columns = [x, y, *covar_2d.T]
    cross = _centred_cross_products(columns)
    given = list(range(2, len(columns)))
    resid = _schur(cross, [0, 1], given)
    s_xy, s_xx, s_yy = resid[0][1], resid[0][0], resid[1][1]
    if semi == "y":
        s_xx = Fraction(cross[0][0])
    elif semi == "x":
        s_yy = Fraction(cross[1][1])
    elif semi is not None:
        raise AssertionError(semi)
    r2 = s_xy * s_xy / (s_xx * s_yy)
    with mpmath.workdps(50):
        r = mpmath.sqrt(mpmath.mpf(r2.numerator) / r2.denominator)
        value = float(r)
    return math.copysign(value, float(s_xy)) if s_xy != 0 else 0.0


def rank_columns(data: np.ndarray) -> np.ndarray:
    """Average ranks of each column (R's ``rank(ties.method = "average")``, used by ppcor's Spearman)."""
    return scipy.stats.rankdata(np.asarray(data, dtype=np.float64), axis=0, method="average")


# --------------------------------------------------------------------------------------------------
# ppcor's formulas, in numpy
# --------------------------------------------------------------------------------------------------
# Source: CRAN ppcor, R/ppcor_v1.R (cran/ppcor on GitHub; the Kendall statistic and the matrix formulas are
# the same in ppcor 1.1's R/ppcor_v1.01.R, which changed the Pearson/Spearman p-value from pnorm to pt):
#
#   cvx  <- cov(x, method = method)          # kendall: sum sign*sign, i.e. tau_b up to a diagonal scaling
#   icvx <- solve(cvx)
#   pcor  <- -cov2cor(icvx); diag(pcor) <- 1
#   spcor <- -cov2cor(icvx)/sqrt(diag(cvx))/sqrt(abs(diag(icvx)-t(t(icvx^2)/diag(icvx)))); diag(spcor) <- 1
#   if (method == "kendall") {
#     statistic <- pcor/sqrt(2*(2*(n-gp)+5)/(9*(n-gp)*(n-1-gp)))
#     p.value <- 2*pnorm(-abs(statistic))
#   } else {
#     statistic <- pcor*sqrt((n-2-gp)/(1-pcor^2))
#     p.value <- 2*pt(-abs(statistic),(n-2-gp))
#   }
#   diag(statistic) <- 0; diag(p.value) <- 0
#
# gp = ncol(x) - 2 (the number of variables given). The golden p-values confirm the t distribution: with
# pnorm, golden case 1 (r = 0.5681692, n = 30, gp = 1) would have p = 3.3e-4, not the recorded 1.303059e-3.


def kendall_tau_matrix(data: np.ndarray) -> np.ndarray:
    """Pairwise Kendall tau_b (``scipy.stats.kendalltau``, variant "b" = R's ``cor(method = "kendall")``)."""
    data = np.asarray(data, dtype=np.float64)
    m = data.shape[1]
    tau = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            tau[i, j] = tau[j, i] = scipy.stats.kendalltau(data[:, i], data[:, j], variant="b").statistic
    return tau


def ppcor_cov(data: np.ndarray, method: str) -> np.ndarray:
    """``cov(x, method = method)`` up to a diagonal scaling (which none of ppcor's formulas depends on)."""
    data = np.asarray(data, dtype=np.float64)
    if method == "pearson":
        return np.cov(data, rowvar=False)
    if method == "spearman":
        return np.cov(rank_columns(data), rowvar=False)
    if method == "kendall":
        return kendall_tau_matrix(data)
    raise AssertionError(method)


def ppcor_statistic(estimate: np.ndarray, n: int, gp: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """ppcor's statistic and two-sided p-value for an estimate (any shape), with df = n - 2 - gp."""
    estimate = np.asarray(estimate, dtype=np.float64)
    if method == "kendall":
        statistic = estimate / np.sqrt(2 * (2 * (n - gp) + 5) / (9 * (n - gp) * (n - 1 - gp)))
        p_value = 2 * scipy.stats.norm.sf(np.abs(statistic))
    else:
        df = n - 2 - gp
        with np.errstate(divide="ignore", invalid="ignore"):
            statistic = estimate * np.sqrt(df / (1 - estimate**2))
        p_value = 2 * scipy.stats.t.sf(np.abs(statistic), df)
    return statistic, p_value


def ppcor_pcor(data: np.ndarray, method: str = "pearson") -> dict[str, Any]:
    """ppcor's ``pcor(x, method)`` in numpy: estimate, statistic, p_value, n, gp."""
    data = np.asarray(data, dtype=np.float64)
    n, m = data.shape
    icvx = np.linalg.inv(ppcor_cov(data, method))
    d = np.sqrt(np.diag(icvx))
    estimate = -icvx / np.outer(d, d)
    np.fill_diagonal(estimate, 1.0)
    statistic, p_value = ppcor_statistic(estimate, n, m - 2, method)
    np.fill_diagonal(statistic, 0.0)
    np.fill_diagonal(p_value, 0.0)
    return {"estimate": estimate, "statistic": statistic, "p_value": p_value, "n": n, "gp": m - 2}


def ppcor_spcor(data: np.ndarray, method: str = "pearson") -> dict[str, Any]:
    """ppcor's ``spcor(x, method)`` in numpy; ``estimate[i, j]`` removes the others from column j only."""
    data = np.asarray(data, dtype=np.float64)
    n, m = data.shape
    cvx = ppcor_cov(data, method)
    icvx = np.linalg.inv(cvx)
    d = np.sqrt(np.diag(icvx))
    dg = np.diag(icvx)
    with np.errstate(divide="ignore"):
        estimate = (
            -icvx
            / np.outer(d, d)
            / np.sqrt(np.diag(cvx))[:, None]
            / np.sqrt(np.abs(dg[:, None] - icvx**2 / dg[None, :]))
        )
    np.fill_diagonal(estimate, 1.0)
    statistic, p_value = ppcor_statistic(estimate, n, m - 2, method)
    np.fill_diagonal(statistic, 0.0)
    np.fill_diagonal(p_value, 0.0)
    return {"estimate": estimate, "statistic": statistic, "p_value": p_value, "n": n, "gp": m - 2}


def fisher_ci(r: float, n: int, k: int, level: float = 0.95) -> tuple[float, float]:
    """Fisher-z interval ``tanh(atanh(r) -/+ z_{(1+level)/2} / sqrt(n - 3 - k))``.

    The standard error 1/sqrt(n - 3 - k) is the usual one for a partial correlation with k covariates
    (pingouin's ``compute_esci(stat=r, nx=n - k, ny=n - k, eftype="r")`` uses the same, rounded to 6
    decimals).
    """
    z = math.atanh(r)
    half = scipy.stats.norm.ppf((1 + level) / 2) / math.sqrt(n - 3 - k)
    return math.tanh(z - half), math.tanh(z + half)


# --------------------------------------------------------------------------------------------------
# Residuals and correlations of residuals, in numpy (for permutation / bootstrap recomputation)
# --------------------------------------------------------------------------------------------------


def _centre(values: np.ndarray) -> np.ndarray:
    """Subtract the column means twice: the second pass removes the rounding error of the first mean, which
    matters when an offset of 1e8 sits on a spread of 1e-3 (the first subtraction is exact by Sterbenz)."""
    once = values - values.mean(axis=0)
    return once - once.mean(axis=0)


def residualise(values: np.ndarray, covar: np.ndarray | None) -> np.ndarray:
    """Least-squares residuals of each column of ``values`` on ``[1, covar]`` (numpy lstsq, centred data)."""
    values = np.asarray(values, dtype=np.float64)
    centred = _centre(values)
    if covar is None or np.asarray(covar).size == 0:
        return centred
    z = np.asarray(covar, dtype=np.float64).reshape(len(values), -1)
    zc = _centre(z)
    beta, *_ = np.linalg.lstsq(zc, centred, rcond=None)
    return centred - zc @ beta


def corr_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of every column of ``a`` with every column of ``b`` (an (ma, mb) array)."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    return (a.T @ b) / np.outer(np.sqrt((a * a).sum(axis=0)), np.sqrt((b * b).sum(axis=0)))


def partial_corr_matrix(scores: np.ndarray, covar: np.ndarray | None) -> np.ndarray:
    """Pearson partial correlation of every pair of columns of ``scores`` given ``covar`` (via residuals)."""
    resid = residualise(scores, covar)
    out = corr_columns(resid, resid)
    np.fill_diagonal(out, 1.0)
    return out


# --------------------------------------------------------------------------------------------------
# Seeded random data sets
# --------------------------------------------------------------------------------------------------


def random_case(seed: int, *, n_range: tuple[int, int] = (5, 500), k_range: tuple[int, int] = (1, 3)) -> dict:
    """A seeded data set ``x, y, covar`` with a scale and offset per column, sometimes with ties.

    n is log-uniform in ``n_range`` (at least k + 4 so that df = n - 2 - k >= 2); each column gets a scale
    ``10**U(-3, 6)`` and an offset that is 0, or ``+/-10**U(0, 8)``, or exactly ``1e8``; with probability 1/3
    the data are rounded to one decimal before scaling (ties). Data sets whose covariates are degenerate
    (a constant column or fewer than three distinct values) are redrawn.
    """
    rng = np.random.default_rng(seed)
    k = int(rng.integers(k_range[0], k_range[1] + 1))
    lo = max(n_range[0], k + 4)
    n = round(math.exp(rng.uniform(math.log(lo), math.log(n_range[1]))))
    ties = bool(rng.random() < 1 / 3)
    while True:
        z = rng.standard_normal((n, k))
        x = z @ rng.normal(0, 1, k) + rng.standard_normal(n)
        y = 0.5 * x + z @ rng.normal(0, 1, k) + rng.standard_normal(n)
        raw = np.column_stack([x, y, z])
        if ties:
            raw = np.round(raw, 1)
        if (
            all(len(np.unique(col)) >= 3 for col in raw.T)
            and np.linalg.matrix_rank(np.column_stack([np.ones(n), raw[:, 2:]])) == k + 1
        ):
            break
    scales = 10.0 ** rng.uniform(-3, 6, k + 2)
    choice = rng.integers(0, 3, k + 2)
    offsets = np.where(
        choice == 0,
        0.0,
        np.where(choice == 1, rng.choice([-1, 1], k + 2) * 10.0 ** rng.uniform(0, 8, k + 2), 1e8),
    )
    data = offsets + scales * raw
    return {
        "x": data[:, 0].copy(),
        "y": data[:, 1].copy(),
        "covar": data[:, 2:].copy(),
        "n": n,
        "k": k,
        "ties": ties,
        "scales": scales,
        "offsets": offsets,
        "seed": seed,
    }


def describe(case: dict) -> str:
    """One line identifying a random case in assertion messages."""
    return (
        f"seed={case['seed']} n={case['n']} k={case['k']} ties={case['ties']} "
        f"scales={np.array2string(case['scales'], precision=2)} "
        f"offsets={np.array2string(case['offsets'], precision=2)}"
    )


@pytest.fixture(scope="session")
def ref() -> SimpleNamespace:
    """Independent reference implementations (see this module's docstring)."""
    return SimpleNamespace(
        exact_partial_corr=exact_partial_corr,
        rank_columns=rank_columns,
        kendall_tau_matrix=kendall_tau_matrix,
        ppcor_cov=ppcor_cov,
        ppcor_statistic=ppcor_statistic,
        ppcor_pcor=ppcor_pcor,
        ppcor_spcor=ppcor_spcor,
        fisher_ci=fisher_ci,
        residualise=residualise,
        corr_columns=corr_columns,
        partial_corr_matrix=partial_corr_matrix,
        random_case=random_case,
        describe=describe,
    )
