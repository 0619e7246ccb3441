r"""Calibration of the global share of co-moving pairs (:mod:`gengen.stats.share`).

A cell simulates one run of ``n_testsets`` OOD test sets around the textbook ID curve of
:mod:`gengen.calibration.simulate` (:math:`c_t = 0.3 + 0.5 (1 - e^{-5u_t})/(1 - e^{-5}) + 0.01\varepsilon_t`, OOD
:math:`y_{j,t} = 0.2 + b_j x_t + 0.02\, e_{j,t}`, :math:`b_j` from 0.1 to 0.4). The noises are stationary
unit-variance AR(1) series with coefficient ``phi``; the non-null pairs are planted as cliques: test sets of one
clique share a common AR factor, :math:`e_j = \sqrt{1 - s}\, v_j + \sqrt{s}\, F_c`, so that every pair inside
a clique has partial correlation :math:`s` given ID, and every other pair 0. The cliques' sizes give the true
share of non-null pairs exactly (``cliques=(4, 4, 4, 2)`` of 20 test sets: 19 of 190 pairs, 10%).

Each replicate is tested as the analysis does by default (:func:`gengen.stats.sieve_partial_corr_matrix`,
linear control, 1,999 sieve draws), and both candidate estimators of the share are computed on its pairs:
Storey's :math:`\hat\pi_1` on the sieve p-values (:func:`gengen.stats.share.global_share`) and a normal
mixture on Fisher z with each row's own standard error (:func:`mixture_share`); both get the same
delete-one-test-set jackknife interval.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from gengen.calibration.simulate import _stationary_ar
from gengen.stats.share import global_share, null_above_probability

__all__ = ["GLOBAL_GRID", "GLOBAL_GRID_RUNS", "GlobalCell", "global_share_study", "mixture_share"]


@dataclass(frozen=True)
class GlobalCell:
    """One cell of the global-share calibration."""

    label: str
    n: int
    phi: float
    cliques: tuple[int, ...]
    s: float
    n_testsets: int = 20
    runs: int = 1

    @property
    def true_share(self) -> float:
        """The share of non-null pairs the cliques plant."""
        pairs = self.n_testsets * (self.n_testsets - 1) / 2
        return sum(size * (size - 1) / 2 for size in self.cliques) / pairs


#: The grid of docs/calibration.md: all-null, 10% and 30% non-null pairs (of 190), Pythia-like (n = 26) and
#: paper-like (n = 40) runs, mild and strong autocorrelation, planted partial correlation 0.5 (and 0.3, where
#: the estimator's bias towards fewer non-null pairs shows).
GLOBAL_GRID: tuple[GlobalCell, ...] = (
    GlobalCell("null n=26 phi=0.5", 26, 0.5, (), 0.0),
    GlobalCell("null n=40 phi=0.5", 40, 0.5, (), 0.0),
    GlobalCell("null n=40 phi=0.9", 40, 0.9, (), 0.0),
    GlobalCell("10% n=40 phi=0.5 s=0.5", 40, 0.5, (4, 4, 4, 2), 0.5),
    GlobalCell("30% n=40 phi=0.5 s=0.5", 40, 0.5, (8, 8), 0.5),
    GlobalCell("10% n=26 phi=0.5 s=0.5", 26, 0.5, (4, 4, 4, 2), 0.5),
    GlobalCell("30% n=40 phi=0.5 s=0.3", 40, 0.5, (8, 8), 0.3),
)

#: Cells with three and ten runs (seeds) pooled per pair before the share is estimated, as the verdict does.
GLOBAL_GRID_RUNS: tuple[GlobalCell, ...] = (
    GlobalCell("null n=40 phi=0.5 3 runs", 40, 0.5, (), 0.0, runs=3),
    GlobalCell("10% n=40 phi=0.5 s=0.3 3 runs", 40, 0.5, (4, 4, 4, 2), 0.3, runs=3),
    GlobalCell("null n=40 phi=0.5 10 runs", 40, 0.5, (), 0.0, runs=10),
    GlobalCell("10% n=40 phi=0.5 s=0.3 10 runs", 40, 0.5, (4, 4, 4, 2), 0.3, runs=10),
)


#: The interval constructions compared on each single-run replicate: the default first
#: (:func:`gengen.stats.share.global_share`'s corrected variance, its null count simulated by
#: :func:`~gengen.stats.share.null_above_probability`), then the default before issue 33's last step
#: (the plain jackknife, uniform null count) and the two halves of the change on their own.
VARIANTS: dict[str, dict[str, Any]] = {
    "storey": {"variance": "corrected", "calibrated": True},
    "storey, jackknife interval": {"variance": "jackknife", "calibrated": False},
    "storey, corrected, null not simulated": {"variance": "corrected", "calibrated": False},
    "storey, jackknife, null simulated": {"variance": "jackknife", "calibrated": True},
}


def simulate_global(cell: GlobalCell, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One replicate: OOD scores (n, n_testsets) and ID scores (n,)."""
    u = np.linspace(0.0, 1.0, cell.n)
    id_scores = 0.3 + 0.5 * (1 - np.exp(-5 * u)) / (1 - np.exp(-5)) + 0.01 * rng.standard_normal(cell.n)
    x = (id_scores - 0.3) / 0.5
    noise = _stationary_ar(rng, (cell.phi,), cell.n, cell.n_testsets)
    start = 0
    for size in cell.cliques:
        factor = _stationary_ar(rng, (cell.phi,), cell.n, 1)[0]
        members = slice(start, start + size)
        noise[members] = np.sqrt(1 - cell.s) * noise[members] + np.sqrt(cell.s) * factor
        start += size
    slopes = np.linspace(0.1, 0.4, cell.n_testsets)
    scores = 0.2 + slopes[None, :] * x[:, None] + 0.02 * noise.T
    return scores, id_scores


def mixture_share(z: ArrayLike, se: ArrayLike, df: ArrayLike) -> float:
    r"""The candidate this module compares Storey's :math:`\hat\pi_1` with: a two-component normal mixture.

    Each pair's statistic is turned into a normal score with the same two-sided p-value,
    :math:`u_i = \operatorname{sign}(z_i)\,\Phi^{-1}(1 - p_i/2)`, and modelled as
    :math:`u_i \sim \pi_0 N(0, 1) + \pi_1 N(0, 1 + \tau^2/\mathrm{se}_i^2)` (effects :math:`\theta \sim N(0,
    \tau^2)` on the Fisher-z scale); :math:`(\pi_1, \tau)` by maximum likelihood.
    """
    from scipy import optimize
    from scipy import stats as scipy_stats

    z_values, se_values, df_values = (np.asarray(v, dtype=float) for v in (z, se, df))
    keep = np.isfinite(z_values) & np.isfinite(se_values) & (se_values > 0)
    z_values, se_values, df_values = z_values[keep], se_values[keep], df_values[keep]
    statistic = np.abs(z_values / se_values)
    p = 2 * scipy_stats.t.sf(statistic, np.where(np.isfinite(df_values), df_values, 1e9))
    u = np.sign(z_values) * scipy_stats.norm.isf(np.clip(p, 1e-300, 1.0) / 2)

    def negative_log_likelihood(theta: np.ndarray) -> float:
        share, tau = 1 / (1 + np.exp(-theta[0])), np.exp(theta[1])
        null = scipy_stats.norm.pdf(u)
        spread = np.sqrt(1 + tau**2 / se_values**2)
        alternative = scipy_stats.norm.pdf(u / spread) / spread
        return float(-np.sum(np.log((1 - share) * null + share * alternative + 1e-300)))

    best = min(
        (
            optimize.minimize(negative_log_likelihood, np.array([a, b]), method="Nelder-Mead")
            for a in (-3.0, 0.0)
            for b in (-1.5, -0.5)
        ),
        key=lambda fit: fit.fun,
    )
    return float(1 / (1 + np.exp(-best.x[0])))


def _mixture_jackknife(z: np.ndarray, se: np.ndarray, df: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Delete-one-test-set jackknife standard error of :func:`mixture_share`."""
    names = np.unique(np.concatenate([a, b]))
    values = np.array([mixture_share(*(v[(a != j) & (b != j)] for v in (z, se, df))) for j in names])
    return float(np.sqrt((len(values) - 1) / len(values) * np.sum((values - values.mean()) ** 2)))


def _interval_row(result: Any) -> tuple[float, ...]:
    """``share, unclipped, ci_low, ci_high, se, p_positive, unclipped low, unclipped high`` of a GlobalShare."""
    from scipy import stats as scipy_stats

    quantile = float(scipy_stats.t.ppf((1 + result.ci_level) / 2, result.n_testsets - 1))
    low, high = result.share_unclipped - quantile * result.se, result.share_unclipped + quantile * result.se
    return (
        result.share,
        result.share_unclipped,
        result.ci_low,
        result.ci_high,
        result.se,
        result.p_positive,
        low,
        high,
    )


def _pooled_share(
    cell: GlobalCell, rng: np.random.Generator, n_boot: int, a: np.ndarray, b: np.ndarray, run_draws: int
) -> dict[str, tuple[float, ...]]:
    """The global share of a replicate with several runs (seeds: the same cliques, fresh noise), pooled as the
    verdict pools them (:func:`gengen.across.heterogeneity.group_estimates`, random effects per pair) and estimated
    by :func:`gengen.across.global_share.global_share_table`'s p-values, with three intervals: the test-set
    jackknife (corrected and plain) and a percentile bootstrap over runs (``run_draws`` resamples of the runs,
    each pooled again by :func:`gengen.stats.meta.fisher_meta_rows`, Storey's share of each)."""
    from gengen.across.global_share import _p_values
    from gengen.across.heterogeneity import group_estimates
    from gengen.across.per_pair import two_sided_p_array
    from gengen.stats import sieve_partial_corr_matrix
    from gengen.stats.meta import fisher_meta_rows
    from gengen.stats.share import storey_share

    names = np.array([f"t{j:02d}" for j in range(cell.n_testsets)], dtype=object)
    tables = []
    for run in range(cell.runs):
        scores, id_scores = simulate_global(cell, rng)
        fit = sieve_partial_corr_matrix(
            scores, covar=id_scores, fit="linear", n_boot=n_boot, seed=int(rng.integers(2**31))
        )
        tables.append(
            pd.DataFrame(
                {
                    "model": "m",
                    "run": f"seed={run}",
                    "testset_a": names[a],
                    "testset_b": names[b],
                    "r_partial": np.asarray(fit.r)[a, b],
                    "se_z": np.asarray(fit.se_z)[a, b],
                    "df_sieve": np.asarray(fit.df)[a, b],
                    "n": cell.n,
                    "k": 1,
                }
            )
        )
    estimates = group_estimates(pd.concat(tables, ignore_index=True))
    p = _p_values(estimates)
    first, second = estimates["testset_a"].to_numpy(), estimates["testset_b"].to_numpy()
    out = {
        "storey": _interval_row(global_share(p, first, second)),
        "storey, jackknife interval": _interval_row(global_share(p, first, second, variance="jackknife")),
    }
    r = np.stack([table["r_partial"].to_numpy() for table in tables], axis=1)
    variance = np.stack([table["se_z"].to_numpy() ** 2 for table in tables], axis=1)
    dof = np.stack([table["df_sieve"].to_numpy() for table in tables], axis=1)

    def pooled_share(columns: np.ndarray) -> float:
        meta = fisher_meta_rows(r[:, columns], variance[:, columns], dof[:, columns], np.ones(len(r), dtype=bool))
        with np.errstate(divide="ignore", invalid="ignore"):
            statistic = np.arctanh(meta["r_random"]) / meta["se_random"]
        df = np.where(np.isfinite(meta["df_fixed"]), meta["df_fixed"], np.inf)
        return storey_share(two_sided_p_array(statistic, df))

    estimate = pooled_share(np.arange(cell.runs))
    if not np.isclose(estimate, storey_share(p), atol=1e-12):  # the pooling here is the verdict's
        raise AssertionError(f"bootstrap pooling differs from group_estimates: {estimate} != {storey_share(p)}")
    draws = np.array([pooled_share(rng.integers(cell.runs, size=cell.runs)) for _ in range(run_draws)])
    low, high = np.quantile(draws, [0.025, 0.975])
    p_positive = (1 + np.sum(draws <= 0)) / (run_draws + 1)
    out["storey, bootstrap over runs"] = (
        float(np.clip(estimate, 0, 1)), estimate, float(np.clip(low, 0, 1)), float(np.clip(high, 0, 1)),
        float(np.std(draws, ddof=1)), float(p_positive), float(low), float(high),
    )  # fmt: skip
    return out


def global_share_study(
    cells: tuple[GlobalCell, ...] = GLOBAL_GRID,
    *,
    replicates: int = 300,
    n_boot: int = 1999,
    seed: int = 0,
    mixture_replicates: int = 0,
    run_draws: int = 200,
) -> pd.DataFrame:
    """Per cell: bias, RMSE, interval coverage and the type-I error of "share > 0" of the global share.

    Parameters
    ----------
    cells : tuple of GlobalCell
        The grid.
    replicates : int
        Replicates per cell (Storey's estimator with its jackknife interval).
    n_boot : int
        Sieve draws per replicate.
    seed : int
        Seed of everything.
    mixture_replicates : int
        Replicates per cell on which the mixture candidate (and its jackknife, slow) is also computed.
    run_draws : int
        Resamples of the runs of the bootstrap over runs (cells with several runs).

    Returns
    -------
    DataFrame
        One row per cell × estimator: ``cell, estimator, true_share, replicates, mean, bias, rmse,
        coverage`` (of the interval, as reported: clipped to [0, 1]), ``coverage_unclipped``,
        ``mean_width``, ``lower_above_zero`` (share of replicates whose interval lies above 0: the answer's
        "share > 0", a type-I error where the true share is 0 and power elsewhere), ``rejection`` (the same at
        one-sided p < 0.05), ``mc_se_coverage``.
    """
    from scipy import stats as scipy_stats

    from gengen.stats import sieve_partial_corr_matrix

    rows = []
    for cell in cells:
        # keyed by the cell's label: a cell draws the same replicates alone or in a grid
        rng = np.random.default_rng([seed, zlib.crc32(cell.label.encode())])
        pairs = np.array(list(combinations(range(cell.n_testsets), 2)))
        a, b = pairs[:, 0], pairs[:, 1]
        mixture: list[tuple[float, ...]] = []
        variants: dict[str, list[tuple[float, ...]]] = {name: [] for name in VARIANTS}
        for replicate in range(replicates):
            if cell.runs > 1:
                result = _pooled_share(cell, rng, n_boot, a, b, run_draws)
                for name, row in result.items():
                    variants.setdefault(name, []).append(row)
                continue
            scores, id_scores = simulate_global(cell, rng)
            fit = sieve_partial_corr_matrix(
                scores, covar=id_scores, fit="linear", n_boot=n_boot, seed=int(rng.integers(2**31))
            )
            p = np.asarray(fit.p_value)[a, b]
            null_above = null_above_probability(fit, id_scores, fit="linear", seed=int(rng.integers(2**31)))[a, b]
            for name, options in VARIANTS.items():
                share = global_share(p, a, b, null_above=null_above if options["calibrated"] else None,
                                     variance=options["variance"])  # fmt: skip
                variants[name].append(_interval_row(share))
            if replicate < mixture_replicates:
                z = np.arctanh(np.asarray(fit.r)[a, b])
                se, df = np.asarray(fit.se_z)[a, b], np.asarray(fit.df)[a, b]
                estimate = mixture_share(z, se, df)
                jack = _mixture_jackknife(z, se, df, a, b)
                q = float(scipy_stats.t.ppf(0.975, cell.n_testsets - 1))
                low, high = estimate - q * jack, estimate + q * jack
                p_positive = float(scipy_stats.t.sf(estimate / jack, cell.n_testsets - 1)) if jack > 0 else 1.0
                mixture.append((estimate, estimate, max(low, 0.0), min(high, 1.0), jack, p_positive, low, high))
        for name, values in [*variants.items(), ("mixture", mixture)]:
            if not values:
                continue
            table = np.array(values)
            truth = cell.true_share
            share, _raw, low, high, se, p_positive, raw_low, raw_high = table.T
            covered = (low <= truth + 1e-12) & (truth - 1e-12 <= high)
            covered_raw = (raw_low <= truth) & (truth <= raw_high)
            rows.append(
                {
                    "cell": cell.label,
                    "estimator": name,
                    "n": cell.n,
                    "phi": cell.phi,
                    "s": cell.s,
                    "n_testsets": cell.n_testsets,
                    "runs": cell.runs,
                    "true_share": truth,
                    "replicates": len(table),
                    "mean": float(share.mean()),
                    "bias": float(share.mean() - truth),
                    "rmse": float(np.sqrt(np.mean((share - truth) ** 2))),
                    "coverage": float(covered.mean()),
                    "coverage_unclipped": float(covered_raw.mean()),
                    "mc_se_coverage": float(np.sqrt(0.95 * 0.05 / len(table))),
                    "mean_width": float(np.mean(high - low)),
                    "mean_se": float(np.mean(se)),
                    "lower_above_zero": float(np.mean(raw_low > 0)),
                    "rejection": float(np.mean(p_positive < 0.05)),
                }
            )
    return pd.DataFrame(rows)
