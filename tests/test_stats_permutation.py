"""Permutation tests: index arrays checked by hand, Freedman–Lane p-values recomputed in numpy, and agreement
with the t-test under iid normal data.

Freedman–Lane for a pair (a, b), a < b (Freedman & Lane 1983; Winkler et al. 2014), recomputed here with numpy
``lstsq`` from the permutations ``gengen.stats.permutation_indices`` returns for the same seed:

    e_j  = residuals of scores[:, j] on [1, covar]            (the reduced model of each column)
    r*   = corr(e_a, M (P e_b)),  M = residual-maker of [1, covar], (P e)[i] = e[perm[i]]
    b    = #{permutations: |r*| >= |r| (1 - 1e-10)}           (the slack lets the identity permutation count)
    p    = (b + 1) / (m + 1)
    p_fwer(a, b) = (#{permutations: max over pairs |r*| >= |r_ab| (1 - 1e-10)} + 1) / (m + 1)

The p-values are counts over m + 1, so the recomputation must equal gengen's exactly.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose, assert_array_equal

stats = pytest.importorskip("gengen.stats")

TIE_SLACK = 1e-10


def _run(seed: int, n: int = 24, m: int = 3, k: int = 1, signal: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    covar = rng.standard_normal((n, k)) * 5 + 10
    scores = rng.standard_normal((n, m)) + covar @ rng.normal(size=(k, m)) * 0.2
    scores[:, 1] += signal * scores[:, 0]
    return scores, covar


def _freedman_lane(scores: np.ndarray, covar: np.ndarray, perms: np.ndarray, ref) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise and max-|r| family-wise p-values, (m, m) with zero diagonal, from explicit permutations."""
    m = scores.shape[1]
    e = ref.residualise(scores, covar)
    r_obs = ref.corr_columns(e, e)
    pairs = list(itertools.combinations(range(m), 2))
    r_star = np.empty((len(perms), len(pairs)))
    for row, perm in enumerate(perms):
        refit = ref.residualise(e[perm], covar)  # M P e_j for every column j at once
        r_all = ref.corr_columns(e, refit)  # r_all[a, b] = corr(e_a, M P e_b)
        r_star[row] = [r_all[a, b] for a, b in pairs]
    observed = np.array([abs(r_obs[a, b]) for a, b in pairs]) * (1 - TIE_SLACK)
    count = (np.abs(r_star) >= observed).sum(axis=0)
    count_max = (np.abs(r_star).max(axis=1)[:, None] >= observed).sum(axis=0)
    p, p_fwer = np.zeros((m, m)), np.zeros((m, m))
    for (a, b), c, cm in zip(pairs, count, count_max, strict=True):
        p[a, b] = p[b, a] = (c + 1) / (len(perms) + 1)
        p_fwer[a, b] = p_fwer[b, a] = (cm + 1) / (len(perms) + 1)
    return p, p_fwer


SCHEMES = [
    ("free", None, False),
    ("block", 3, False),
    ("block", 5, False),  # n = 24: the last block is shorter
    ("circular", None, False),
    ("circular", None, True),
]


@pytest.mark.parametrize(("scheme", "block_length", "mirror"), SCHEMES)
@pytest.mark.parametrize("seed", [1, 2])
def test_freedman_lane_recomputed_from_indices(seed: int, scheme: str, block_length, mirror: bool, ref) -> None:
    scores, covar = _run(seed, n=24, m=4, k=2)
    n_perm = 199
    kwargs = {"scheme": scheme, "block_length": block_length, "mirror": mirror, "seed": 100 + seed}
    perms = np.asarray(stats.permutation_indices(len(scores), n_perm, **kwargs))
    assert perms.shape == (n_perm, len(scores))
    want_p, want_fwer = _freedman_lane(scores, covar, perms, ref)
    got = stats.permutation_test(scores, covar, n_perm=n_perm, family_wise=True, **kwargs)
    off = ~np.eye(scores.shape[1], dtype=bool)
    where = f"seed={seed} scheme={scheme} L={block_length} mirror={mirror}"
    assert_array_equal(np.asarray(got.p_value)[off], want_p[off], err_msg=where)
    assert_array_equal(np.asarray(got.p_fwer)[off], want_fwer[off], err_msg=where)
    assert_allclose(np.asarray(got.r)[off], ref.partial_corr_matrix(scores, covar)[off], rtol=1e-10, atol=1e-14)
    assert got.n_perm == n_perm and got.scheme == scheme and got.seed == 100 + seed
    if scheme == "block":
        assert got.block_length == block_length


def test_no_covariates_is_a_plain_permutation_test(ref) -> None:
    """covar=None: the reduced model is the mean alone, so r* = corr(x, P y)."""
    scores, _ = _run(6, n=18, m=3, k=1)
    perms = np.asarray(stats.permutation_indices(18, 199, scheme="block", block_length=3, seed=4))
    want_p, _ = _freedman_lane(scores, None, perms, ref)
    got = stats.permutation_test(scores, None, n_perm=199, scheme="block", block_length=3, seed=4)
    off = ~np.eye(3, dtype=bool)
    assert_array_equal(np.asarray(got.p_value)[off], want_p[off])


def test_freedman_lane_spearman_ranks_everything_first(ref) -> None:
    scores, covar = _run(5, n=20, m=3, k=1)
    perms = np.asarray(stats.permutation_indices(20, 99, scheme="free", seed=3))
    ranks = ref.rank_columns(np.column_stack([scores, covar]))
    want_p, _ = _freedman_lane(ranks[:, :3], ranks[:, 3:], perms, ref)
    got = stats.permutation_test(scores, covar, n_perm=99, method="spearman", seed=3)
    off = ~np.eye(3, dtype=bool)
    assert_array_equal(np.asarray(got.p_value)[off], want_p[off])


def test_family_wise_at_least_pairwise() -> None:
    scores, covar = _run(9, n=30, m=5, k=2)
    got = stats.permutation_test(scores, covar, n_perm=299, family_wise=True, seed=1)
    off = ~np.eye(5, dtype=bool)
    assert np.all(np.asarray(got.p_fwer)[off] >= np.asarray(got.p_value)[off])
    plain = stats.permutation_test(scores, covar, n_perm=299, family_wise=False, seed=1)
    assert plain.p_fwer is None
    assert_array_equal(np.asarray(plain.p_value), np.asarray(got.p_value))


@pytest.mark.parametrize(("scheme", "block_length", "mirror"), SCHEMES)
def test_same_seed_same_result_whatever_the_threads(scheme: str, block_length, mirror: bool) -> None:
    scores, covar = _run(4, n=24, m=4, k=1)
    kwargs = {
        "scheme": scheme,
        "block_length": block_length,
        "mirror": mirror,
        "seed": 42,
        "family_wise": True,
    }
    one = stats.permutation_test(scores, covar, n_perm=500, n_threads=1, **kwargs)
    two = stats.permutation_test(scores, covar, n_perm=500, n_threads=2, **kwargs)
    assert_array_equal(np.asarray(one.p_value), np.asarray(two.p_value))
    assert_array_equal(np.asarray(one.p_fwer), np.asarray(two.p_fwer))
    again = stats.permutation_indices(24, 50, scheme=scheme, block_length=block_length, mirror=mirror, seed=42)
    assert_array_equal(
        np.asarray(again),
        np.asarray(stats.permutation_indices(24, 50, scheme=scheme, block_length=block_length, mirror=mirror, seed=42)),
    )


def test_different_seeds_differ() -> None:
    a = np.asarray(stats.permutation_indices(20, 30, scheme="free", seed=1))
    b = np.asarray(stats.permutation_indices(20, 30, scheme="free", seed=2))
    assert not np.array_equal(a, b)


# --------------------------------------------------------------------------------------------------
# Index arrays, checked by hand
# --------------------------------------------------------------------------------------------------


def test_free_rows_are_permutations() -> None:
    perms = np.asarray(stats.permutation_indices(6, 300, scheme="free", seed=0))
    assert perms.shape == (300, 6)
    assert np.issubdtype(perms.dtype, np.integer)
    assert all(sorted(row) == list(range(6)) for row in perms.tolist())
    assert len({tuple(row) for row in perms.tolist()}) > 100  # of 720 possible orders


def test_block_rows_n6_l2() -> None:
    """n = 6, L = 2: blocks (0 1), (2 3), (4 5); every row is the three blocks in some order, and all 3! = 6
    orders appear in 200 draws."""
    perms = np.asarray(stats.permutation_indices(6, 200, scheme="block", block_length=2, seed=5))
    blocks = [[0, 1], [2, 3], [4, 5]]
    allowed = {tuple(itertools.chain(*order)) for order in itertools.permutations(blocks)}
    assert allowed == {
        (0, 1, 2, 3, 4, 5),
        (0, 1, 4, 5, 2, 3),
        (2, 3, 0, 1, 4, 5),
        (2, 3, 4, 5, 0, 1),
        (4, 5, 0, 1, 2, 3),
        (4, 5, 2, 3, 0, 1),
    }
    seen = {tuple(row) for row in perms.tolist()}
    assert seen <= allowed
    assert seen == allowed


def test_block_rows_with_a_short_last_block() -> None:
    """n = 7, L = 3: blocks (0 1 2), (3 4 5), (6)."""
    perms = np.asarray(stats.permutation_indices(7, 200, scheme="block", block_length=3, seed=6))
    blocks = [[0, 1, 2], [3, 4, 5], [6]]
    allowed = {tuple(itertools.chain(*order)) for order in itertools.permutations(blocks)}
    seen = {tuple(row) for row in perms.tolist()}
    assert seen <= allowed
    assert seen == allowed


def test_circular_rows_n6() -> None:
    """Rotations of 0..5: (s, s+1, ..., s+5) mod 6; all six shifts appear."""
    perms = np.asarray(stats.permutation_indices(6, 200, scheme="circular", seed=7))
    rotations = {tuple((s + j) % 6 for j in range(6)) for s in range(6)}
    assert (0, 1, 2, 3, 4, 5) in rotations and (4, 5, 0, 1, 2, 3) in rotations
    assert {tuple(row) for row in perms.tolist()} == rotations


def test_circular_mirrored_rows_n6() -> None:
    """With mirror: rotations and reversed rotations (s, s-1, ..., s-5) mod 6; all twelve appear."""
    perms = np.asarray(stats.permutation_indices(6, 400, scheme="circular", mirror=True, seed=8))
    rotations = {tuple((s + j) % 6 for j in range(6)) for s in range(6)}
    reversed_rotations = {tuple((s - j) % 6 for j in range(6)) for s in range(6)}
    assert (5, 4, 3, 2, 1, 0) in reversed_rotations and (2, 1, 0, 5, 4, 3) in reversed_rotations
    assert {tuple(row) for row in perms.tolist()} == rotations | reversed_rotations


def test_default_block_length() -> None:
    """The default block length is documented as ceil(n^(1/3))."""
    for n, want in [(1, 1), (8, 2), (9, 3), (27, 3), (28, 4), (1000, 10), (1001, 11)]:
        assert stats.default_block_length(n) == want, n


# --------------------------------------------------------------------------------------------------
# Monte Carlo agreement with the t-test
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_permutation_p_agrees_with_t_test_under_normality(seed: int) -> None:
    """iid normal data: the Freedman–Lane p estimates the exact t-test p (df = n - 2 - k).

    With m permutations the estimate's standard error is sqrt(p (1 - p) / m); allow 4 of them, plus 0.015 for
    the small difference between the permutation and the t distribution at n = 40 (Anderson & Legendre 1999
    report Freedman–Lane's type-I error within about 1 percentage point of nominal for such sizes).
    """
    rng = np.random.default_rng(seed)
    n, m, k, n_perm = 40, 3, 1 + seed % 2, 499
    covar = rng.standard_normal((n, k))
    scores = rng.standard_normal((n, m)) + covar @ rng.normal(size=(k, m))
    scores[:, 1] += rng.uniform(0.0, 0.4) * scores[:, 0]
    got = stats.permutation_test(scores, covar, n_perm=n_perm, seed=seed)
    t_test = stats.partial_corr_matrix(scores, covar)
    for a, b in itertools.combinations(range(m), 2):
        p_t = float(np.asarray(t_test.p_value)[a, b])
        r = float(np.asarray(t_test.r)[a, b])
        df = n - 2 - k
        assert_allclose(p_t, 2 * scipy.stats.t.sf(abs(r) * np.sqrt(df / (1 - r * r)), df), rtol=1e-8)
        p_perm = float(np.asarray(got.p_value)[a, b])
        tolerance = 4 * np.sqrt(max(p_t * (1 - p_t), 0.01) / n_perm) + 0.015
        assert abs(p_perm - p_t) <= tolerance, f"seed={seed} pair=({a},{b}) p_perm={p_perm} p_t={p_t}"
