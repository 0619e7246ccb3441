"""Workloads, and what gengen is compared with: numpy (vectorised), pingouin (a loop), R (a loop).

Used by ``benches/compare.py``, which runs each implementation in its own subprocess (``--worker``) so that
peak memory is measured per implementation. Every implementation reads the same data and, where the
comparison must be exact, the same permutation and resample index arrays as gengen
(:func:`gengen.stats.permutation_indices`, :func:`gengen.stats.bootstrap_indices`).

Conventions, shared with gengen: scores are (n checkpoints × m test sets) per run, the covariates
(n × k, here the in-domain score, k = 1) are regressed out of every column; for a pair a < b the later column
b is permuted (Freedman–Lane), and a permutation counts when |r*| ≥ |r| (1 − 1e-10).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

TIE_TOLERANCE = 1e-10
SEED = 20261129


# ----------------------------------------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One standard workload: ``runs`` runs of ``n`` checkpoints × ``m`` OOD test sets, one ID covariate."""

    name: str
    runs: int
    n: int
    m: int
    n_perm: int
    n_boot: int

    @property
    def pairs(self) -> int:
        return self.runs * self.m * (self.m - 1) // 2

    def scaled(self, *, n_perm: int | None = None, n_boot: int | None = None) -> Workload:
        return Workload(
            self.name,
            self.runs,
            self.n,
            self.m,
            self.n_perm if n_perm is None else n_perm,
            self.n_boot if n_boot is None else n_boot,
        )


W1 = Workload("W1", runs=50, n=100, m=7, n_perm=10_000, n_boot=2_000)
W2 = Workload("W2", runs=1, n=1_000, m=50, n_perm=10_000, n_boot=0)
W3_COLUMNS, W3_N = 1_000, 200


def trajectories(runs: int, n: int, m: int, seed: int = SEED) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Synthetic fine-tuning runs: scores (runs, n, m) and the ID score (runs, n, 1).

    The ID score is a saturating learning curve with noise; every OOD score follows it with its own loading,
    plus a factor shared by half of the test sets and AR(1) checkpoint noise, so partial correlations range
    from null to strong.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(n) / n
    scores = np.empty((runs, n, m))
    covar = np.empty((runs, n, 1))
    for run in range(runs):
        id_score = 0.5 + 0.4 * (1 - np.exp(-4 * t)) + rng.normal(0, 0.01, n)
        shared = ar1(rng, n, 0.6, 0.01)
        loadings = rng.uniform(0.3, 1.0, m)
        for j in range(m):
            share = 1.0 if j < m // 2 else 0.0
            scores[run, :, j] = loadings[j] * id_score + share * shared + ar1(rng, n, 0.5, 0.01)
        covar[run, :, 0] = id_score
    return scores, covar


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> NDArray[np.float64]:
    noise = rng.normal(0, sd, n)
    out = np.empty(n)
    level = 0.0
    for i in range(n):
        level = phi * level + noise[i]
        out[i] = level
    return out


def gam_columns(columns: int, n: int, seed: int = SEED) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """W3: ``columns`` score columns (n × columns) with a nonlinear dependence on one control (n,)."""
    rng = np.random.default_rng(seed)
    control = np.sort(rng.uniform(0, 1, n))
    phase = rng.uniform(0, np.pi, columns)
    amplitude = rng.uniform(0.1, 1.0, columns)
    y = amplitude * np.sin(3 * control[:, None] + phase) + rng.normal(0, 0.1, (n, columns))
    return y, control


# ----------------------------------------------------------------------------------------------------------
# numpy: matrix-form Freedman–Lane and weight-form bootstrap
# ----------------------------------------------------------------------------------------------------------


def unit_residuals(
    scores: NDArray[np.float64], covar: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Unit-length residuals E (runs, n, m) of every column on [1, covar], and the basis Q (runs, n, k)."""
    zc = covar - covar.mean(axis=1, keepdims=True)
    q, _ = np.linalg.qr(zc)
    e = scores - scores.mean(axis=1, keepdims=True)
    for _ in range(2):
        e = e - q @ (q.transpose(0, 2, 1) @ e)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    return e, q


def numpy_permutation(
    scores: NDArray[np.float64],
    covar: NDArray[np.float64],
    indices: NDArray[np.int64],
    chunk: int = 128,
    threads: int = 2,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Freedman–Lane p-values for every pair of every run, all runs and pairs sharing each permutation.

    With M the residual-maker of [1, covar] (a projection) and e_a = M e_a:
    r*_ab = ⟨e_a, P e_b⟩ / √(1 − ‖Qᵀ P e_b‖²). A task is one run and a chunk of permutations: one gather
    (n, chunk·m) and one GEMM, [E Q]ᵀ (m + k, n) × gathered (n, chunk·m). Tasks run on ``threads`` threads
    (numpy releases the GIL in ``take`` and ``matmul``); BLAS itself should be single-threaded for these small
    products (see ``compare.py``).

    Returns the observed r (runs, m, m), p (runs, m, m) and the max-|r| family-wise p (runs, m, m).
    """
    runs, n, m = scores.shape
    e, q = unit_residuals(scores, covar)
    r = e.transpose(0, 2, 1) @ e
    left = np.ascontiguousarray(np.concatenate([e, q], axis=2).transpose(0, 2, 1))  # (runs, m + k, n)
    a, b = np.triu_indices(m, 1)
    threshold = np.abs(r[:, a, b]) * (1 - TIE_TOLERANCE)  # (runs, pairs)
    columns = np.ascontiguousarray(indices.T)  # (n, n_perm): row i holds perm[i] of every permutation

    def task(run: int, start: int) -> tuple[int, NDArray[np.int64], NDArray[np.int64]]:
        order = columns[:, start : start + chunk]
        p = order.shape[1]
        gathered = np.take(e[run], order, axis=0).reshape(n, p * m)  # (n, p, m): e[perm[i]] of each perm
        products = (left[run] @ gathered).reshape(-1, p, m)
        explained = np.einsum("kpb,kpb->pb", products[m:], products[m:])
        length = np.sqrt(np.maximum(1.0 - explained, 0.0))  # (p, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            r_star = np.where(length[:, b].T > 0, products[a, :, b] / length[:, b].T, 0.0)  # (pairs, p)
        magnitude = np.abs(r_star)
        limit = threshold[run][:, None]
        counts = (magnitude >= limit).sum(axis=1)
        family = (magnitude.max(axis=0)[None, :] >= limit).sum(axis=1)
        return run, counts, family

    counts = np.zeros((runs, len(a)), dtype=np.int64)
    family = np.zeros((runs, len(a)), dtype=np.int64)
    tasks = [(run, start) for run in range(runs) for start in range(0, indices.shape[0], chunk)]
    with ThreadPoolExecutor(threads) as pool:
        for run, c, f in pool.map(lambda t: task(*t), tasks):
            counts[run] += c
            family[run] += f
    total = indices.shape[0] + 1.0
    return r, pair_matrix((counts + 1) / total, m), pair_matrix((family + 1) / total, m)


def pair_matrix(values: NDArray[np.float64], m: int) -> NDArray[np.float64]:
    """(runs, pairs) upper-triangle values to symmetric (runs, m, m) matrices with a zero diagonal."""
    a, b = np.triu_indices(m, 1)
    out = np.zeros((values.shape[0], m, m))
    out[:, a, b] = values
    out[:, b, a] = values
    return out


def numpy_permutation_r_star(
    scores: NDArray[np.float64], covar: NDArray[np.float64], indices: NDArray[np.int64]
) -> NDArray[np.float64]:
    """r* (runs, perms, pairs) for a few permutations: the numbers the loop baselines are checked against."""
    m = scores.shape[2]
    e, q = unit_residuals(scores, covar)
    gathered = e[:, indices, :]  # (runs, perms, n, m)
    numerator = np.einsum("rna,rpnb->rpab", e, gathered)
    explained = (np.einsum("rnk,rpnb->rpkb", q, gathered) ** 2).sum(axis=2)
    r_star = numerator / np.sqrt(1 - explained)[:, :, None, :]
    a, b = np.triu_indices(m, 1)
    return r_star[:, :, a, b]


def numpy_bootstrap_replicates(
    scores: NDArray[np.float64], covar: NDArray[np.float64], indices: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Partial correlations (runs, B, pairs) of every bootstrap resample, from resampling weights.

    The moments of resample b are weighted sums over the original rows, w_b = counts of each row, so the
    replicates' cross-product matrices of all runs are one GEMM: W (B × n) × [vec(d_i d_iᵀ)] (n × p²).
    Data are centred on their full-sample means first, which keeps the final centring well conditioned.
    """
    runs, n, m = scores.shape
    k = covar.shape[2]
    data = np.concatenate([scores, covar], axis=2)
    data = data - data.mean(axis=1, keepdims=True)
    width = m + k
    flat = (indices + n * np.arange(indices.shape[0])[:, None]).ravel()
    weights = np.bincount(flat, minlength=indices.size).reshape(indices.shape[0], n).astype(np.float64)
    outer = (data[:, :, :, None] * data[:, :, None, :]).reshape(runs, n, width * width)
    moments = np.concatenate([outer, data], axis=2)  # (runs, n, p² + p)
    sums = weights @ moments / n  # (runs, B, p² + p)
    second = sums[..., : width * width].reshape(runs, -1, width, width)
    mean = sums[..., width * width :]
    cov = second - mean[..., :, None] * mean[..., None, :]
    sxx, sxz, szz = cov[..., :m, :m], cov[..., :m, m:], cov[..., m:, m:]
    partial = sxx - sxz @ np.linalg.solve(szz, sxz.transpose(0, 1, 3, 2))
    d = np.sqrt(np.diagonal(partial, axis1=2, axis2=3))
    r = partial / (d[..., :, None] * d[..., None, :])
    a, b = np.triu_indices(m, 1)
    return np.clip(r[..., a, b], -1.0, 1.0)


def numpy_bootstrap(
    scores: NDArray[np.float64],
    covar: NDArray[np.float64],
    indices: NDArray[np.int64],
    level: float = 0.95,
    chunk: int = 500,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile intervals (runs, pairs) for every pair of every run."""
    replicates = np.concatenate(
        [numpy_bootstrap_replicates(scores, covar, indices[s : s + chunk]) for s in range(0, len(indices), chunk)],
        axis=1,
    )
    alpha = 1 - level
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=1)
    return low, high


# ----------------------------------------------------------------------------------------------------------
# pingouin: the loop a user would write
# ----------------------------------------------------------------------------------------------------------


def pingouin_pairs(runs: int, m: int) -> Iterator[tuple[int, int, int]]:
    for run in range(runs):
        for a in range(m):
            for b in range(a + 1, m):
                yield run, a, b


def timed_loop(calls: Iterator[Callable[[], float]], budget: float, most: int) -> tuple[list[float], float]:
    """Runs calls until ``budget`` seconds or ``most`` calls; returns the values and seconds per call."""
    values: list[float] = []
    start = time.perf_counter()
    for call in calls:
        values.append(call())
        if len(values) >= most or time.perf_counter() - start > budget:
            break
    return values, (time.perf_counter() - start) / max(len(values), 1)


def freedman_lane_parts(y: NDArray[np.float64], z: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """Fitted values and residuals of y on [1, z] (least squares): the reduced model a loop permutes."""
    design = np.column_stack([np.ones(len(y)), z])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    fitted = design @ beta
    return fitted, y - fitted
