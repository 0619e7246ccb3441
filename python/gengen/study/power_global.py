r"""Power of the verdict's global answer ("the share of co-moving pairs is above 0"), predicted and measured.

The verdict answers the global question per model with Storey's :math:`\hat\pi_1` of the pairs' p-values and its
interval (:func:`gengen.across.global_share.global_share_table`); the share counts as above zero when the interval's
lower end is. Its power has no closed form: the pairs that share a test set are dependent, and the interval
resamples test sets. So :func:`predicted_global_power` simulates the design's *statistics*, not its curves:

- per run, :math:`K` independent white Gaussian series of length :math:`L = I_1 + 3` (:math:`I_1` the run's
  information about :math:`\operatorname{artanh} r`, :func:`gengen.study.power.information_per_run`), the test sets of a
  clique (:func:`clique_sizes`) sharing a common factor so that every pair inside it correlates at the observed
  :math:`\rho`; their sample correlations have :math:`\operatorname{Var}(\operatorname{artanh} r) \approx 1/I_1`
  and the exact dependence of pairs that share a test set;
- each row gets the sieve's kind of standard error, estimated on :math:`\nu = I_1 + 1` degrees of freedom
  (:math:`\mathrm{se}_z^2 = \chi^2_\nu / (\nu I_1)`, so that :math:`z/\mathrm{se}_z` is referred to
  :math:`t_\nu` as the sieve's rows are);
- the rows go through the verdict's own steps: :func:`gengen.across.heterogeneity.group_estimates` (a model's seeds
  pooled with random effects, as the verdict pools them), :func:`gengen.across.global_share.unrelated_estimates` and
  :func:`gengen.across.global_share.global_share_table`; a replicate counts when its interval's lower end is above 0.

Fewer OOD test sets than the interval needs (:data:`gengen.stats.share.MIN_TESTSETS_INTERVAL`) give no
interval and so power 0. How close the prediction comes to ``gengen.analyse``'s default on simulated learning
curves is measured by :func:`pipeline_power` (docs/power.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from gengen.errors import InvalidArgumentError

__all__ = [
    "GlobalPower",
    "clique_sizes",
    "pipeline_power",
    "predicted_global_power",
    "scores_table",
    "simulate_testsets",
]

#: Replicates of the planner's simulation per design: a Monte Carlo s.e. of at most 0.029 (at power 0.5).
PLANNER_REPLICATES = 300
#: The most run-level rows (replicates × seeds × pairs) one planner simulation draws: large designs get fewer
#: replicates (at least :data:`MIN_PLANNER_REPLICATES`), so that one design takes seconds, not minutes.
PLANNER_ROWS = 600_000
MIN_PLANNER_REPLICATES = 100


@dataclass(frozen=True)
class GlobalPower:
    """Power of the global answer (and of the chosen pair) for one design.

    Attributes
    ----------
    power : float
        Share of replicates whose global-share interval lies above 0.
    mc_se : float
        Its Monte Carlo standard error.
    mean_share : float
        Mean estimated share over the replicates.
    true_share : float
        The share of co-moving pairs the cliques plant.
    pair_power : float
        Share of replicates in which the chosen pair (the first pair of the first clique) has a Holm-adjusted
        p below alpha among the model's pairs (NaN without a clique).
    replicates : int
        Replicates simulated.
    """

    power: float
    mc_se: float
    mean_share: float
    true_share: float
    pair_power: float
    replicates: int


def clique_sizes(testsets: int, share: float) -> tuple[int, ...]:
    """Equal cliques of co-moving test sets whose pairs come closest to ``share`` of all pairs.

    Co-moving pairs are planted as cliques (test sets sharing a common factor), so that the correlations stay a
    valid correlation matrix; of the equal splits that fit in ``testsets``, the one whose within-clique pairs are
    closest to ``share`` of the :math:`K(K-1)/2` pairs (ties: fewer, larger cliques, as groups of related tasks
    co-move).

    Parameters
    ----------
    testsets : int
        OOD test sets K.
    share : float
        Wanted share of co-moving pairs, in (0, 1].

    Returns
    -------
    tuple of int
        Clique sizes (each at least 2).

    Examples
    --------
    >>> clique_sizes(12, 0.1), clique_sizes(20, 0.1), clique_sizes(20, 0.3)
    ((4,), (5, 5), (8, 8))
    """
    if testsets < 2:
        raise InvalidArgumentError(f"testsets: a pair needs two test sets, got {testsets}")
    if not 0.0 < share <= 1.0:
        raise InvalidArgumentError(f"share: must lie in (0, 1], got {share!r}")
    pairs = testsets * (testsets - 1) / 2
    wanted = share * pairs
    best: tuple[float, int, int] | None = None
    for count in range(1, testsets // 2 + 1):
        for size in range(2, testsets // count + 1):
            key = (abs(count * size * (size - 1) / 2 - wanted), count, size)
            if best is None or key < best:
                best = key
    assert best is not None
    return (best[2],) * best[1]


def _planted_share(testsets: int, cliques: tuple[int, ...]) -> float:
    return sum(size * (size - 1) / 2 for size in cliques) / (testsets * (testsets - 1) / 2)


def _names(testsets: int) -> list[str]:
    return [f"ood{j:02d}" for j in range(testsets)]


def _verdict_global(pairs: pd.DataFrame, alpha: float, *, with_pairs: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdict's global-share table of a run-level pairs table (one model per replicate), and the per-model
    estimates its pair calls start from (empty without ``with_pairs``) — the steps of
    :func:`gengen.across.verdict.build_verdict`."""
    from gengen.across.global_share import global_share_table, unrelated_estimates
    from gengen.across.heterogeneity import group_estimates

    share_estimates = unrelated_estimates(group_estimates(pairs, interval_variance=False), pairs)
    estimates = group_estimates(pairs) if with_pairs else pd.DataFrame()
    return global_share_table(share_estimates, alpha=alpha), estimates


def _chosen_pair_found(estimates: pd.DataFrame, first: str, second: str, alpha: float) -> np.ndarray:
    """Per model, whether the pair (first, second) has a Holm-adjusted p below alpha among its pairs."""
    from gengen.across.global_share import _p_values
    from gengen.stats import p_adjust

    found = []
    for _, cell in estimates.groupby("unit", sort=False):
        p = p_adjust(_p_values(cell), "holm")
        mask = ((cell["testset_a"] == first) & (cell["testset_b"] == second)) | (
            (cell["testset_a"] == second) & (cell["testset_b"] == first)
        )
        found.append(bool(mask.any() and np.asarray(p)[mask.to_numpy()][0] < alpha))
    return np.array(found)


def _summary(shares: pd.DataFrame, pair_found: np.ndarray, true_share: float, replicates: int) -> GlobalPower:
    above = np.isfinite(shares["ci_low"].to_numpy(float)) & (shares["ci_low"].to_numpy(float) > 0)
    power = float(above.sum()) / replicates
    return GlobalPower(
        power=power,
        mc_se=math.sqrt(max(power * (1 - power), 0.25 / replicates) / replicates),
        mean_share=float(np.nanmean(shares["share"].to_numpy(float))) if len(shares) else float("nan"),
        true_share=true_share,
        pair_power=float(pair_found.mean()) if len(pair_found) else float("nan"),
        replicates=replicates,
    )


def predicted_global_power(
    rho_observed: float,
    information: float,
    *,
    seeds: int,
    testsets: int,
    share: float,
    alpha: float = 0.05,
    replicates: int = PLANNER_REPLICATES,
    seed: int = 0,
    chosen_pair: bool = True,
) -> GlobalPower:
    """Power of the verdict's global answer for a design, from a simulation of its statistics (module docstring).

    Parameters
    ----------
    rho_observed : float
        Partial correlation of a co-moving pair as the design's data carry it.
    information : float
        Information about artanh r of one run (1/se_z²).
    seeds : int
        Runs pooled per model.
    testsets : int
        OOD test sets K (K(K - 1)/2 pairs).
    share : float
        Share of pairs co-moving (planted as :func:`clique_sizes`).
    alpha : float
        Level of the chosen pair's Holm-adjusted test (the global interval is the verdict's 95% one).
    replicates : int
        Simulated models.
    seed : int
        Seed.
    chosen_pair : bool
        Whether to measure the chosen pair's power too (NaN without: it halves the time).

    Returns
    -------
    GlobalPower
        The global power, its Monte Carlo s.e. and the chosen pair's power under Holm.

    Examples
    --------
    >>> predicted_global_power(0.5, 10.0, seeds=3, testsets=8, share=0.1, replicates=20).power
    0.0
    """
    from gengen.stats.share import MIN_TESTSETS_INTERVAL

    if not 0.0 <= rho_observed < 1.0:
        raise InvalidArgumentError(f"rho_observed: must lie in [0, 1), got {rho_observed!r}")
    if seeds < 1 or replicates < 1:
        raise InvalidArgumentError(f"seeds, replicates: must be at least 1, got {seeds}, {replicates}")
    cliques = clique_sizes(testsets, share)
    truth = _planted_share(testsets, cliques)
    if testsets < MIN_TESTSETS_INTERVAL or not information > 0:
        # no interval (too few test sets to resample), or no information: never "above zero"
        return GlobalPower(0.0, 0.0, float("nan"), truth, float("nan"), replicates)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 33, 6]))
    length = max(round(information) + 3, 5)
    a, b = np.array(list(combinations(range(testsets), 2))).T
    names = np.array(_names(testsets), dtype=object)
    frames = []
    for batch in np.array_split(np.arange(replicates), max(1, replicates // 100)):
        count = len(batch) * seeds
        series = rng.standard_normal((count, testsets, length))
        start = 0
        for size in cliques:
            factor = rng.standard_normal((count, 1, length))
            members = slice(start, start + size)
            series[:, members] = math.sqrt(1 - rho_observed) * series[:, members] + math.sqrt(rho_observed) * factor
            start += size
        series -= series.mean(axis=2, keepdims=True)
        series /= np.linalg.norm(series, axis=2, keepdims=True)
        r = np.einsum("rit,rjt->rij", series, series)[:, a, b]
        df = information + 1.0
        se_z = np.sqrt(rng.chisquare(df, size=r.shape) / (df * information))
        frames.append(
            pd.DataFrame(
                {
                    "model": np.repeat([f"rep{i}" for i in batch], seeds * len(a)),
                    "run": np.tile(np.repeat([f"seed={s}" for s in range(seeds)], len(a)), len(batch)),
                    "testset_a": np.tile(names[a], count),
                    "testset_b": np.tile(names[b], count),
                    "r_partial": np.clip(r.reshape(-1), -0.999999, 0.999999),
                    "se_z": se_z.reshape(-1),
                    "df_sieve": df,
                }
            )
        )
    pairs = pd.concat(frames, ignore_index=True)
    shares, estimates = _verdict_global(pairs, alpha, with_pairs=chosen_pair)
    found = _chosen_pair_found(estimates, names[0], names[1], alpha) if cliques and chosen_pair else np.array([])
    return _summary(shares, found, truth, replicates)


# ---------------------------------------------------------------------------------------------- the pipeline


def simulate_testsets(
    *,
    n: int,
    schedule: str,
    n_examples: int,
    runs: int,
    testsets: int,
    cliques: tuple[int, ...],
    rho: float,
    phi: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Simulate ``gengen simulate``'s learning curves with K OOD test sets: steps and counts (runs, n, 1 + K).

    The process of :mod:`gengen.calibration.learning_curves` (step 0 at chance, ID rising through the first 15% of
    training, every accuracy a count on a fixed test set) with K OOD test sets on linear links of slopes 0.4 … 0.6, each
    with AR(1) noise (coefficient ``phi``, sd 0.02) in the checkpoint index; the test sets of each clique share a
    common AR(1) factor, :math:`e_j = \sqrt{1-\rho}\,v_j + \sqrt\rho\,F_c`, so that their noises correlate at
    :math:`\rho` and every other pair's not at all.

    Parameters
    ----------
    n : int
        Checkpoints per run, step 0 included.
    schedule : {"log", "dense-early", "even"}
        Checkpoint schedule (:func:`gengen.calibration.learning_curves.checkpoint_steps`).
    n_examples : int
        Examples per test set.
    runs : int
        Seeds.
    testsets : int
        OOD test sets K.
    cliques : tuple of int
        Sizes of the groups of co-moving test sets (the first ones, in order).
    rho : float
        Correlation of the noises inside a clique.
    phi : float
        AR(1) coefficient of the noise.
    rng : numpy.random.Generator
        The randomness.

    Returns
    -------
    steps : ndarray of int64, shape (n,)
    counts : ndarray of int64, shape (runs, n, 1 + K)
        Correct answers out of ``n_examples``: ID first, then the OOD test sets.

    Examples
    --------
    >>> steps, counts = simulate_testsets(n=11, schedule="log", n_examples=200, runs=2, testsets=12,
    ...                                   cliques=(4,), rho=0.5, phi=0.9, rng=np.random.default_rng(1))
    >>> steps.shape, counts.shape
    ((11,), (2, 11, 13))
    """
    from gengen.calibration.learning_curves import (
        ID_NOISE_SD,
        NOISE_SD,
        _ar1,
        _threshold_counts,
        checkpoint_steps,
        id_curve,
    )

    if sum(cliques) > testsets:
        raise InvalidArgumentError(f"cliques: {cliques} need more than the {testsets} test sets")
    steps = checkpoint_steps(n, schedule)
    counts = np.empty((runs, n, 1 + testsets), dtype=np.int64)
    id_true = id_curve(steps)[None, :] + ID_NOISE_SD * _ar1(rng, 0.5, (runs, n))
    counts[:, 1:, 0] = _threshold_counts(rng, id_true[:, 1:], n_examples)
    x = counts[:, :, 0] / n_examples
    noise = _ar1(rng, phi, (runs * testsets, n - 1)).reshape(runs, testsets, n - 1)
    start = 0
    for size in cliques:
        factor = _ar1(rng, phi, (runs, n - 1))[:, None, :]
        members = slice(start, start + size)
        noise[:, members] = math.sqrt(1 - rho) * noise[:, members] + math.sqrt(rho) * factor
        start += size
    slopes = np.linspace(0.4, 0.6, testsets)
    for j in range(testsets):
        p = 0.5 + slopes[j] * (x[:, 1:] - 0.5) + NOISE_SD * noise[:, j]
        counts[:, 1:, j + 1] = _threshold_counts(rng, p, n_examples)
    counts[:, 0, :] = rng.binomial(n_examples, 0.5, size=(runs, 1 + testsets))
    return steps, counts


def scores_table(replicates: list[tuple[np.ndarray, np.ndarray]], n_examples: int, first: int = 0) -> pd.DataFrame:
    """Put replicates of :func:`simulate_testsets` into one score table for :func:`gengen.analyse`.

    Parameters
    ----------
    replicates : list of (steps, counts)
        Results of :func:`simulate_testsets`.
    n_examples : int
        Examples per test set.
    first : int
        Number of the first replicate's model.

    Returns
    -------
    DataFrame
        Replicate r is model ``rep{first + r}``, its runs ``seed=0``, …; values counts / N, ``n_examples`` N.
    """
    frames = []
    for offset, (steps, counts) in enumerate(replicates):
        runs, n, width = counts.shape
        names = ["id", *_names(width - 1)]
        frames.append(
            pd.DataFrame(
                {
                    "model": f"rep{first + offset}",
                    "run": np.repeat([f"seed={s}" for s in range(runs)], n * width),
                    "step": np.tile(np.repeat(steps, width), runs),
                    "testset": np.tile(names, runs * n),
                    "value": (counts / n_examples).reshape(-1),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table["metric"] = "acc"
    table["n_examples"] = n_examples
    return table


def pipeline_power(
    *,
    seeds: int,
    evaluations: int,
    n_examples: int,
    testsets: int,
    rho: float,
    share: float,
    replicates: int,
    schedule: str = "log",
    phi: float = 0.9,
    alpha: float = 0.05,
    n_boot: int = 299,
    seed: int = 0,
) -> GlobalPower:
    """Power of the global answer and of the chosen pair, measured on the full pipeline.

    Curves of :func:`simulate_testsets` analysed by :func:`gengen.analyse` with its defaults, then the verdict's
    steps.

    Parameters
    ----------
    seeds, evaluations, n_examples, testsets : int
        The design: runs per model, checkpoints per run (step 0 included), examples per test set, OOD test sets.
    rho : float
        Correlation of the noises of co-moving test sets.
    share : float
        Share of pairs co-moving (:func:`clique_sizes`).
    replicates : int
        Simulated models.
    schedule : {"log", "dense-early", "even"}
        Checkpoint schedule.
    phi : float
        AR(1) coefficient of the noise.
    alpha : float
        Level of the chosen pair's Holm-adjusted test.
    n_boot : int
        Sieve resamples per run.
    seed : int
        Seed of the simulation and the analysis.

    Returns
    -------
    GlobalPower
        Measured global and chosen-pair power with the Monte Carlo s.e. of the global one.
    """
    import gengen

    cliques = clique_sizes(testsets, share)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 33, 66]))
    batch = max(1, 60 // seeds)
    shares, found = [], []
    for first in range(0, replicates, batch):
        group = [
            simulate_testsets(
                n=evaluations,
                schedule=schedule,
                n_examples=n_examples,
                runs=seeds,
                testsets=testsets,
                cliques=cliques,
                rho=rho,
                phi=phi,
                rng=rng,
            )
            for _ in range(min(batch, replicates - first))
        ]
        analysis = gengen.analyse(
            scores_table(group, n_examples, first), id_testset="id", n_boot=n_boot, seed=seed + first
        )
        table, estimates = _verdict_global(analysis.pairs, alpha)
        shares.append(table)
        names = _names(testsets)
        found.append(_chosen_pair_found(estimates, names[0], names[1], alpha))
    return _summary(
        pd.concat(shares, ignore_index=True), np.concatenate(found), _planted_share(testsets, cliques), replicates
    )


def _as_dict(result: GlobalPower) -> dict[str, Any]:
    return {name: getattr(result, name) for name in result.__dataclass_fields__}
