"""Bootstrap intervals: index arrays checked by hand, percentile and BCa intervals recomputed in numpy.

Recomputation, from the rows ``gengen.stats.bootstrap_indices`` returns for the same seed:

* each replicate takes rows ``idx`` of the scores AND the covariates and re-residualises (numpy ``lstsq`` on
  ``[1, covar[idx]]``), giving the partial correlations r*_b;
* percentile: ``numpy.quantile(r*, [alpha/2, 1 - alpha/2])`` with numpy's default linear interpolation (R's
  type 7 — the convention gengen documents: "Quantiles interpolate linearly between order statistics");
* BCa (Efron 1987; Efron & Tibshirani 1993, ch. 14.3): ``z0 = Phi^-1(#{r* < r_hat} / B)``, acceleration
  ``a = sum((mean - theta_i)^3) / (6 [sum((mean - theta_i)^2)]^(3/2))`` from the leave-one-out (jackknife)
  estimates theta_i, and the quantiles of r* at ``Phi(z0 + (z0 + z_q) / (1 - a (z0 + z_q)))``,
  ``z_q = Phi^-1(alpha/2), Phi^-1(1 - alpha/2)``; scipy.stats.norm for Phi.

A looser, independent check runs ``scipy.stats.bootstrap(method="BCa")`` (its own resamples) on a plain
Pearson correlation and allows for the Monte Carlo error of two independent sets of 1999 resamples.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose, assert_array_equal

stats = pytest.importorskip("gengen.stats")


def _run(seed: int, n: int = 30, m: int = 3, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    covar = rng.standard_normal((n, k)) * 3 + 1
    scores = rng.standard_normal((n, m)) + covar @ rng.normal(size=(k, m)) * 0.5
    scores[:, 1] += 0.6 * scores[:, 0]
    scores[:, 2] -= 0.3 * scores[:, 1]
    return scores, covar


def _pairs(m: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(m), 2))


def _replicates(scores: np.ndarray, covar: np.ndarray, rows: np.ndarray, ref) -> np.ndarray:
    """(B, n_pairs) partial correlations, each replicate re-residualised on its own resampled rows."""
    pairs = _pairs(scores.shape[1])
    out = np.empty((len(rows), len(pairs)))
    for b, idx in enumerate(rows):
        r = ref.partial_corr_matrix(scores[idx], covar[idx])
        out[b] = [r[i, j] for i, j in pairs]
    return out


def _jackknife(scores: np.ndarray, covar: np.ndarray, ref) -> np.ndarray:
    n = len(scores)
    keep = [np.delete(np.arange(n), i) for i in range(n)]
    return _replicates(scores, covar, np.array(keep), ref)


def _bca(replicates: np.ndarray, estimate: float, jackknife: np.ndarray, level: float) -> tuple[float, float]:
    z0 = scipy.stats.norm.ppf(np.mean(replicates < estimate))
    d = jackknife.mean() - jackknife
    a = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    zq = scipy.stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    q = scipy.stats.norm.cdf(z0 + (z0 + zq) / (1 - a * (z0 + zq)))
    low, high = np.quantile(replicates, q)
    return float(low), float(high)


def _upper(matrix, m: int) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=float)
    assert matrix.shape == (m, m)
    return np.array([matrix[i, j] for i, j in _pairs(m)])


SCHEMES = [("iid", None), ("block", 4), ("circular", 3)]


@pytest.mark.parametrize(("scheme", "block_length"), SCHEMES)
@pytest.mark.parametrize("level", [0.95, 0.8])
def test_percentile_ci_recomputed_from_indices(scheme: str, block_length, level: float, ref) -> None:
    scores, covar = _run(11, k=2)
    n, m = scores.shape
    n_boot, seed = 999, 21
    rows = np.asarray(stats.bootstrap_indices(n, n_boot, scheme=scheme, block_length=block_length, seed=seed))
    assert rows.shape == (n_boot, n)
    replicates = _replicates(scores, covar, rows, ref)
    assert np.all(np.isfinite(replicates))
    want = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
    got = stats.bootstrap_ci(
        scores, covar, n_boot=n_boot, scheme=scheme, block_length=block_length, ci_level=level, seed=seed
    )
    where = f"scheme={scheme} L={block_length} level={level}"
    assert_allclose(_upper(got.ci_low, m), want[0], rtol=0, atol=1e-10, err_msg=where)
    assert_allclose(_upper(got.ci_high, m), want[1], rtol=0, atol=1e-10, err_msg=where)
    assert_allclose(_upper(got.r, m), _upper(ref.partial_corr_matrix(scores, covar), m), rtol=1e-10)
    assert np.all(_upper(got.n_valid, m) == n_boot)  # no degenerate replicate in these data
    assert_allclose(_upper(got.ci_low, m), _upper(np.asarray(got.ci_low).T, m), rtol=0, atol=0)  # symmetric
    assert got.n_boot == n_boot and got.scheme == scheme and got.ci_method == "percentile" and got.seed == seed


def test_spearman_percentile_reranks_each_resample(ref) -> None:
    """Spearman: each replicate ranks its resampled rows afresh; repeated rows are ties (average ranks)."""
    scores, covar = _run(12, n=30, k=1)
    n, m = scores.shape
    rows = np.asarray(stats.bootstrap_indices(n, 499, scheme="iid", seed=6))
    replicates = []
    for idx in rows:
        ranks = ref.rank_columns(np.column_stack([scores[idx], covar[idx]]))
        r = ref.partial_corr_matrix(ranks[:, :m], ranks[:, m:])
        replicates.append([r[i, j] for i, j in _pairs(m)])
    want = np.quantile(np.array(replicates), [0.025, 0.975], axis=0)
    got = stats.bootstrap_ci(scores, covar, n_boot=499, method="spearman", seed=6)
    assert_allclose(_upper(got.ci_low, m), want[0], rtol=0, atol=1e-10)
    assert_allclose(_upper(got.ci_high, m), want[1], rtol=0, atol=1e-10)


@pytest.mark.parametrize("seed", [3, 4])
def test_bca_recomputed_from_indices(seed: int, ref) -> None:
    scores, covar = _run(seed, n=25, k=1)
    n, m = scores.shape
    n_boot, level = 999, 0.9
    rows = np.asarray(stats.bootstrap_indices(n, n_boot, scheme="iid", seed=seed))
    replicates = _replicates(scores, covar, rows, ref)
    jackknife = _jackknife(scores, covar, ref)
    estimate = _upper(ref.partial_corr_matrix(scores, covar), m)
    got = stats.bootstrap_ci(scores, covar, n_boot=n_boot, ci_method="bca", ci_level=level, seed=seed)
    assert got.ci_method == "bca"
    low, high = _upper(got.ci_low, m), _upper(got.ci_high, m)
    for pair in range(len(estimate)):
        want = _bca(replicates[:, pair], estimate[pair], jackknife[:, pair], level)
        assert_allclose((low[pair], high[pair]), want, rtol=0, atol=1e-10, err_msg=f"seed={seed} pair={pair}")


def test_bca_close_to_scipy_bootstrap() -> None:
    """k = 0, Pearson: gengen's BCa vs scipy.stats.bootstrap(method="BCa"), within Monte Carlo error."""
    rng = np.random.default_rng(8)
    n = 40
    x = rng.standard_normal(n)
    y = 0.5 * x + rng.standard_normal(n)
    got = stats.bootstrap_ci(np.column_stack([x, y]), None, n_boot=1999, ci_method="bca", seed=2)
    want = scipy.stats.bootstrap(
        (x, y),
        lambda a, b: scipy.stats.pearsonr(a, b).statistic,
        paired=True,
        vectorized=False,
        n_resamples=1999,
        method="BCa",
        random_state=np.random.default_rng(3),
    ).confidence_interval
    # two independent sets of 1999 resamples: endpoints differ by about 0.01; allow 0.04
    assert_allclose((_upper(got.ci_low, 2)[0], _upper(got.ci_high, 2)[0]), (want.low, want.high), atol=0.04)


@pytest.mark.parametrize("ci_method", ["percentile", "bca"])
@pytest.mark.parametrize(("scheme", "block_length"), SCHEMES)
def test_same_seed_same_interval_whatever_the_threads(scheme: str, block_length, ci_method: str) -> None:
    scores, covar = _run(5)
    kwargs = {
        "n_boot": 400,
        "scheme": scheme,
        "block_length": block_length,
        "ci_method": ci_method,
        "seed": 9,
    }
    one = stats.bootstrap_ci(scores, covar, n_threads=1, **kwargs)
    two = stats.bootstrap_ci(scores, covar, n_threads=2, **kwargs)
    assert_array_equal(np.asarray(one.ci_low), np.asarray(two.ci_low))
    assert_array_equal(np.asarray(one.ci_high), np.asarray(two.ci_high))


def test_interval_contains_estimate_and_narrows_with_level() -> None:
    scores, covar = _run(6, n=60)
    wide = stats.bootstrap_ci(scores, covar, n_boot=500, ci_level=0.95, seed=1)
    narrow = stats.bootstrap_ci(scores, covar, n_boot=500, ci_level=0.5, seed=1)
    m = scores.shape[1]
    r = _upper(wide.r, m)
    assert np.all(_upper(wide.ci_low, m) <= r) and np.all(r <= _upper(wide.ci_high, m))
    assert np.all(_upper(wide.ci_low, m) <= _upper(narrow.ci_low, m))
    assert np.all(_upper(narrow.ci_high, m) <= _upper(wide.ci_high, m))


# --------------------------------------------------------------------------------------------------
# Index arrays, checked by hand
# --------------------------------------------------------------------------------------------------


def test_iid_indices() -> None:
    rows = np.asarray(stats.bootstrap_indices(6, 500, scheme="iid", seed=0))
    assert rows.shape == (500, 6)
    assert np.issubdtype(rows.dtype, np.integer)
    assert rows.min() == 0 and rows.max() == 5
    assert any(len(set(row)) < 6 for row in rows.tolist())  # with replacement
    counts = np.bincount(rows.ravel(), minlength=6) / rows.size
    assert_allclose(counts, 1 / 6, atol=0.02)


def test_moving_block_indices_n6_l2() -> None:
    """Moving blocks, n = 6, L = 2: each row is three blocks (s, s+1) with s in 0..4 (no wrap-around)."""
    rows = np.asarray(stats.bootstrap_indices(6, 300, scheme="block", block_length=2, seed=1))
    starts = set()
    for row in rows.tolist():
        for pos in (0, 2, 4):
            s = row[pos]
            assert row[pos + 1] == s + 1, row
            assert 0 <= s <= 4, row
            starts.add(s)
    assert starts == {0, 1, 2, 3, 4}


def test_moving_block_indices_cut_to_n() -> None:
    """n = 7, L = 3: blocks at positions 0, 3 and a last block cut to length 1."""
    rows = np.asarray(stats.bootstrap_indices(7, 200, scheme="block", block_length=3, seed=2))
    for row in rows.tolist():
        for pos in (0, 3):
            assert row[pos + 1] == row[pos] + 1 and row[pos + 2] == row[pos] + 2, row
            assert 0 <= row[pos] <= 4, row
        assert 0 <= row[6] <= 4, row


def test_circular_block_indices_n6_l2() -> None:
    """Circular blocks, n = 6, L = 2: blocks (s, s+1 mod 6), s in 0..5; the block (5, 0) wraps around."""
    rows = np.asarray(stats.bootstrap_indices(6, 300, scheme="circular", block_length=2, seed=3))
    starts = set()
    for row in rows.tolist():
        for pos in (0, 2, 4):
            s = row[pos]
            assert row[pos + 1] == (s + 1) % 6, row
            starts.add(s)
    assert starts == {0, 1, 2, 3, 4, 5}


def test_bootstrap_indices_reproducible() -> None:
    a = stats.bootstrap_indices(10, 20, scheme="circular", block_length=3, seed=4)
    b = stats.bootstrap_indices(10, 20, scheme="circular", block_length=3, seed=4)
    c = stats.bootstrap_indices(10, 20, scheme="circular", block_length=3, seed=5)
    assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))
