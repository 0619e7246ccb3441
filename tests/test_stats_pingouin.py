"""gengen.stats.partial_corr on 124 seeded random data sets against exact, pingouin and scipy references.

Data (``conftest.random_case``): n from 5 to 500 (log-uniform; both ends pinned in ``EDGES``), k from 1 to 3
covariates, per-column scales 10**U(-3, 6) and offsets 0, +/-10**U(0, 8) or exactly 1e8, ties (data rounded to
one decimal) in a third.

What r is compared to, and why:

* **exact** (every case, rtol 1e-10): ``conftest.exact_partial_corr`` computes the (semi-)partial correlation
  of the float64 inputs in exact rational arithmetic (centred integer cross products, Schur complement in
  ``fractions.Fraction``), rounding only the final square root. It is the only reference that stays correct
  at an offset of 1e8 over a spread of 1e-3; a plain numpy ``lstsq`` on once-centred data loses up to 5e-9
  there (seed 2). ``test_exact_reference_agrees_with_mpmath`` checks it against an independent 60-digit mpmath
  regression. Spearman: the same on average ranks (``scipy.stats.rankdata``), as ppcor's ``cov(method =
  "spearman")``.
* **pingouin** ``partial_corr`` (``covar``, ``x_covar``, ``y_covar``; rtol 1e-10) on the cases it accepts:
  pingouin refuses columns that ``np.allclose`` calls identical (large common offsets), and those cases are
  skipped with that reason. Where it runs it standardises first and agrees with the exact value to ~3e-12.
* **scipy** ``pearsonr`` / ``spearmanr`` for k = 0 (r and p).

p-values: ``2 * scipy.stats.t.sf(|t|, df)`` with ``t = r * sqrt(df / (1 - r^2))``, ``df = n - 2 - k``
(ppcor 1.1: ``p.value <- 2*pt(-abs(statistic),(n-2-gp))``), evaluated at the exact r.
CI: Fisher z, ``tanh(atanh(r) -/+ z_(1+level)/2 / sqrt(n - 3 - k))`` (the standard error pingouin uses too).
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pandas as pd
import pingouin
import pytest
import scipy.stats
from numpy.testing import assert_allclose

stats = pytest.importorskip("gengen.stats")

N_CASES = 120
SEEDS = range(1000, 1000 + N_CASES)
# The ends of the ranges, pinned: n = 5 with k = 1 (df = 2), n = 6 with k = 2, n = 500 with k = 1 and k = 3.
EDGES = {1: ((5, 5), (1, 1)), 2: ((6, 6), (2, 2)), 3: ((500, 500), (1, 1)), 4: ((500, 500), (3, 3))}
CASES = [*SEEDS, *EDGES]


def _case(seed: int, ref) -> dict:
    n_range, k_range = EDGES.get(seed, ((5, 500), (1, 3)))
    return ref.random_case(seed, n_range=n_range, k_range=k_range)


METHODS = ["pearson", "spearman"]
SEMIS = [None, "y", "x"]


def _reference_r(case: dict, method: str, semi: str | None, ref) -> float:
    x, y, covar = case["x"], case["y"], case["covar"]
    if method == "spearman":
        ranks = ref.rank_columns(np.column_stack([x, y, covar]))
        x, y, covar = ranks[:, 0], ranks[:, 1], ranks[:, 2:]
    return ref.exact_partial_corr(x, y, covar, semi)


@pytest.mark.parametrize("semi", SEMIS, ids=lambda s: f"semi={s}")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", CASES)
def test_partial_corr_matches_exact(seed: int, method: str, semi: str | None, ref) -> None:
    case = _case(seed, ref)
    where = ref.describe(case) + f" method={method} semi={semi}"
    n, k = case["n"], case["k"]
    res = stats.partial_corr(case["x"], case["y"], case["covar"], method=method, semi=semi)
    r = _reference_r(case, method, semi, ref)
    df = n - 2 - k
    assert_allclose(res.r, r, rtol=1e-10, atol=0, err_msg=where)
    assert (res.n, res.k, res.df) == (n, k, df), where
    assert res.method == method and res.semi == semi, where
    t = r * np.sqrt(df / (1 - r * r))
    assert_allclose(res.statistic, t, rtol=1e-9, err_msg=where)
    assert_allclose(res.p_value, 2 * scipy.stats.t.sf(abs(t), df), rtol=1e-8, atol=1e-300, err_msg=where)
    lo, hi = ref.fisher_ci(r, n, k, 0.95)
    assert_allclose(res.ci, (lo, hi), rtol=1e-9, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("semi", SEMIS, ids=lambda s: f"semi={s}")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", CASES)
def test_partial_corr_matches_pingouin(seed: int, method: str, semi: str | None, ref) -> None:
    case = _case(seed, ref)
    names = [f"z{i}" for i in range(case["k"])]
    frame = pd.DataFrame(np.column_stack([case["x"], case["y"], case["covar"]]), columns=["x", "y", *names])
    option = {None: "covar", "y": "y_covar", "x": "x_covar"}[semi]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = pingouin.partial_corr(frame, x="x", y="y", method=method, **{option: names})
    except ValueError as err:  # pingouin: "Covariate 'z0' is numerically identical to y='y'" (np.allclose)
        pytest.skip(f"pingouin refuses this data set: {err}")
    res = stats.partial_corr(case["x"], case["y"], case["covar"], method=method, semi=semi)
    where = ref.describe(case) + f" method={method} semi={semi}"
    assert_allclose(res.r, want["r"].iloc[0], rtol=1e-10, err_msg=where)
    # pingouin: _correl_pvalue(r, n, k) = 2 * t.sf(|r| sqrt((n - 2 - k) / (1 - r^2)), n - 2 - k)
    assert_allclose(res.p_value, want["p_val"].iloc[0], rtol=1e-8, atol=1e-300, err_msg=where)
    assert int(want["n"].iloc[0]) == res.n


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(12))
def test_worst_case_offsets_match_exact(seed: int, method: str, ref) -> None:
    """Every column (covariates too) at offset +/-1e8 with a spread of 1e-3 or 1e6: the float64 inputs keep only
    ~5 significant digits of the 1e-3 columns' variation, and r must still be that of those inputs to 1e-10."""
    rng = np.random.default_rng(5000 + seed)
    n = (8, 30, 500)[seed % 3]
    k = 3
    z = rng.standard_normal((n, k))
    x = z @ rng.normal(size=k) + rng.standard_normal(n)
    y = 0.5 * x + z @ rng.normal(size=k) + rng.standard_normal(n)
    raw = np.column_stack([x, y, z])
    if seed % 2:
        raw = np.round(raw, 1)
    data = rng.choice([-1e8, 1e8], k + 2) + 10.0 ** rng.choice([-3, 6], k + 2) * raw
    values = ref.rank_columns(data) if method == "spearman" else data
    for semi in SEMIS:
        want = ref.exact_partial_corr(values[:, 0], values[:, 1], values[:, 2:], semi)
        got = stats.partial_corr(data[:, 0], data[:, 1], data[:, 2:], method=method, semi=semi)
        assert_allclose(got.r, want, rtol=1e-10, err_msg=f"seed={seed} n={n} semi={semi}")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(2000, 2020))
def test_no_covariates_matches_scipy(seed: int, method: str, ref) -> None:
    case = ref.random_case(seed)
    x, y, n = case["x"], case["y"], case["n"]
    where = ref.describe(case) + f" method={method} k=0"
    want = scipy.stats.pearsonr(x, y) if method == "pearson" else scipy.stats.spearmanr(x, y)
    for covar in (None, np.empty((n, 0))):
        res = stats.partial_corr(x, y, covar, method=method)
        assert (res.k, res.df, res.n) == (0, n - 2, n), where
        assert_allclose(res.r, want.statistic, rtol=1e-10, err_msg=where)
        assert_allclose(res.p_value, want.pvalue, rtol=1e-7, atol=1e-300, err_msg=where)
        assert_allclose(res.r, _reference_r({**case, "covar": np.empty((n, 0))}, method, None, ref), rtol=1e-10)


@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.99])
def test_fisher_ci_level(level: float, ref) -> None:
    case = ref.random_case(3000, n_range=(40, 200))
    res = stats.partial_corr(case["x"], case["y"], case["covar"], ci_level=level)
    assert_allclose(res.ci, ref.fisher_ci(res.r, case["n"], case["k"], level), rtol=1e-10, atol=1e-14)
    assert res.ci[0] < res.r < res.ci[1]


def test_one_dimensional_covariate(ref) -> None:
    """A 1-D covariate is one column (ppcor: ``z <- as.data.frame(z)``)."""
    case = ref.random_case(3001, k_range=(1, 1))
    res_1d = stats.partial_corr(case["x"], case["y"], case["covar"][:, 0])
    assert res_1d.k == 1
    assert_allclose(res_1d.r, ref.exact_partial_corr(case["x"], case["y"], case["covar"]), rtol=1e-10)


@pytest.mark.parametrize("seed", [1002, 1020, 1083])
def test_exact_reference_agrees_with_mpmath(seed: int, ref) -> None:
    """The exact reference itself, against ordinary least squares in 60-digit mpmath (residual method)."""
    case = ref.random_case(seed)
    x, y, z = case["x"], case["y"], case["covar"]
    with mpmath.workdps(60):
        design = mpmath.matrix([[1, *[mpmath.mpf(float(v)) for v in row]] for row in z])

        def resid(v: np.ndarray) -> mpmath.matrix:
            vec = mpmath.matrix([mpmath.mpf(float(a)) for a in v])
            beta = mpmath.lu_solve(design.T * design, design.T * vec)
            return vec - design * beta

        ex, ey = resid(x), resid(y)
        r = mpmath.fsum(ex[i] * ey[i] for i in range(len(x))) / mpmath.sqrt(
            mpmath.fsum(v**2 for v in ex) * mpmath.fsum(v**2 for v in ey)
        )
        want = float(r)
    assert_allclose(ref.exact_partial_corr(x, y, z), want, rtol=1e-14)


# --------------------------------------------------------------------------------------------------
# residualise, partial_corr_matrix and its batch form
# --------------------------------------------------------------------------------------------------


def _scores_case(seed: int, m: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(12, 150)), int(rng.integers(1, 4))
    z = rng.standard_normal((n, k))
    scores = rng.standard_normal((n, m)) + z @ rng.normal(size=(k, m))
    covar = z * 10.0 ** rng.uniform(-2, 3, k) + rng.uniform(-100, 100, k)
    return scores * 10.0 ** rng.uniform(-2, 3, m) + rng.uniform(-1e3, 1e3, m), covar


@pytest.mark.parametrize("seed", range(10))
def test_residualise_matches_lstsq(seed: int, ref) -> None:
    scores, covar = _scores_case(seed)
    got = np.asarray(stats.residualise(scores, covar))
    assert got.shape == scores.shape
    want = ref.residualise(scores, covar)
    scale = np.abs(scores - scores.mean(axis=0)).max(axis=0)
    assert_allclose(got / scale, want / scale, rtol=0, atol=1e-11)
    # the defining property: residuals are orthogonal to [1, covar]
    design = np.column_stack([np.ones(len(covar)), covar])
    assert_allclose((design.T @ got) / scale / len(covar), 0, atol=1e-10)
    got_1d = np.asarray(stats.residualise(scores[:, 0], covar))
    assert got_1d.shape == (len(scores),)
    assert_allclose(got_1d, got[:, 0], rtol=1e-12, atol=1e-12 * scale[0])


@pytest.mark.parametrize("seed", range(6))
def test_partial_corr_matrix_matches_exact_pairs(seed: int, ref) -> None:
    scores, covar = _scores_case(seed, m=5)
    n, m = scores.shape
    k = covar.shape[1]
    res = stats.partial_corr_matrix(scores, covar)
    r = np.asarray(res.r)
    assert r.shape == (m, m)
    assert (res.n, res.k, res.df) == (n, k, n - 2 - k)
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            want = ref.exact_partial_corr(scores[:, i], scores[:, j], covar)
            assert_allclose(r[i, j], want, rtol=1e-10, err_msg=f"seed={seed} pair=({i},{j})")
            t = want * np.sqrt((n - 2 - k) / (1 - want**2))
            assert_allclose(np.asarray(res.statistic)[i, j], t, rtol=1e-9)
            assert_allclose(np.asarray(res.p_value)[i, j], 2 * scipy.stats.t.sf(abs(t), n - 2 - k), rtol=1e-8)


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_partial_corr_matrix_agrees_with_partial_corr(method: str) -> None:
    scores, covar = _scores_case(77, m=4)
    res = stats.partial_corr_matrix(scores, covar, method=method)
    for i, j in [(0, 1), (1, 3), (2, 0)]:
        one = stats.partial_corr(scores[:, i], scores[:, j], covar, method=method)
        assert_allclose(np.asarray(res.r)[i, j], one.r, rtol=1e-10)
        assert_allclose(np.asarray(res.p_value)[i, j], one.p_value, rtol=1e-8)


def test_partial_corr_matrix_threads_identical() -> None:
    scores, covar = _scores_case(5, m=6)
    one = stats.partial_corr_matrix(scores, covar, n_threads=1)
    two = stats.partial_corr_matrix(scores, covar, n_threads=2)
    np.testing.assert_array_equal(np.asarray(one.r), np.asarray(two.r))
    np.testing.assert_array_equal(np.asarray(one.p_value), np.asarray(two.p_value))


def test_partial_corr_matrix_labels_from_dataframe() -> None:
    scores, covar = _scores_case(6, m=3)
    frame = pd.DataFrame(scores, columns=["arc", "boolq", "piqa"])
    res = stats.partial_corr_matrix(frame, covar)
    assert list(res.labels) == ["arc", "boolq", "piqa"]
    assert_allclose(np.asarray(res.r), np.asarray(stats.partial_corr_matrix(scores, covar).r), rtol=1e-13)


def test_partial_corr_matrix_batch_equals_single_runs() -> None:
    runs = [_scores_case(seed, m=3) for seed in (11, 12, 13)]  # different n per run
    batch = stats.partial_corr_matrix_batch([s for s, _ in runs], [c for _, c in runs])
    assert len(batch) == len(runs)
    for (scores, covar), got in zip(runs, batch, strict=True):
        want = stats.partial_corr_matrix(scores, covar)
        assert got.n == len(scores)
        assert_allclose(np.asarray(got.r), np.asarray(want.r), rtol=1e-13, atol=1e-15)
        assert_allclose(np.asarray(got.p_value), np.asarray(want.p_value), rtol=1e-12, atol=1e-300)


def test_partial_corr_matrix_batch_accepts_a_3d_array() -> None:
    rng = np.random.default_rng(21)
    scores = rng.standard_normal((4, 25, 3))
    covar = rng.standard_normal((4, 25, 2))
    batch = stats.partial_corr_matrix_batch(scores, covar, method="spearman")
    assert len(batch) == 4
    for run, got in enumerate(batch):
        want = stats.partial_corr_matrix(scores[run], covar[run], method="spearman")
        assert_allclose(np.asarray(got.r), np.asarray(want.r), rtol=1e-13, atol=1e-15)
