"""Property tests (hypothesis) for gengen.stats: invariances, symmetry and ranges that hold for any data.

Data are drawn from a seed and a few shape/transform parameters rather than element by element, which keeps
every example well posed (continuous data, full-rank covariates) and the suite fast.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

stats = pytest.importorskip("gengen.stats")

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

METHODS = st.sampled_from(["pearson", "spearman", "kendall"])
SEMIS = st.sampled_from([None, "x", "y"])
# |offset| / scale <= 1e5 keeps the rounding of a * x + b near 1e-11 of the spread, far below the tolerances.
SCALES = st.floats(min_value=1e-2, max_value=1e3)
OFFSETS = st.floats(min_value=-1e3, max_value=1e3)


def _data(seed: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    x = 0.5 * z @ rng.normal(size=k) + rng.standard_normal(n)
    y = rng.uniform(-0.8, 0.8) * x + z @ rng.normal(size=k) + rng.standard_normal(n)
    return x, y, z


# n >= 12: at n = 8 the ranks of x can coincide with those of a covariate (x is then a linear function of covar
# for Spearman, which gengen rightly refuses)
SHAPES = st.tuples(st.integers(0, 2**32 - 1), st.integers(12, 80), st.integers(1, 3))


@SETTINGS
@given(shape=SHAPES, method=METHODS, semi=SEMIS, a=SCALES, b=OFFSETS, c=SCALES, d=OFFSETS)
def test_invariant_to_affine_transforms_of_x_and_y(shape, method, semi, a, b, c, d) -> None:
    x, y, z = _data(*shape)
    base = stats.partial_corr(x, y, z, method=method, semi=semi)
    moved = stats.partial_corr(a * x + b, c * y + d, z, method=method, semi=semi)
    assert_allclose(moved.r, base.r, rtol=1e-8, atol=1e-10)
    assert_allclose(moved.p_value, base.p_value, rtol=1e-6, atol=1e-12)
    flipped = stats.partial_corr(-a * x + b, y, z, method=method, semi=semi)
    assert_allclose(flipped.r, -base.r, rtol=1e-8, atol=1e-10)


@SETTINGS
@given(
    shape=SHAPES,
    method=METHODS,
    semi=SEMIS,
    scales=st.lists(SCALES, min_size=3, max_size=3),
    offsets=st.lists(OFFSETS, min_size=3, max_size=3),
    sign=st.sampled_from([-1.0, 1.0]),
)
def test_invariant_to_affine_transforms_of_covariates(shape, method, semi, scales, offsets, sign) -> None:
    x, y, z = _data(*shape)
    k = z.shape[1]
    moved_z = sign * z * np.array(scales[:k]) + np.array(offsets[:k])
    base = stats.partial_corr(x, y, z, method=method, semi=semi)
    moved = stats.partial_corr(x, y, moved_z, method=method, semi=semi)
    # also for the rank methods: reversing a covariate reverses its ranks (affine) and flips the sign of its
    # row and column in the tau matrix, which leaves the (x, y) entry of -cov2cor(inv(T)) unchanged
    assert_allclose(moved.r, base.r, rtol=1e-8, atol=1e-10)


@SETTINGS
@given(shape=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_pearson_depends_on_covariate_span_only(shape, seed) -> None:
    """Invertible mixing of the covariates (plus offsets) leaves the Pearson partial correlation unchanged."""
    x, y, z = _data(*shape)
    k = z.shape[1]
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(k, k)) + 2 * np.eye(k)
    if np.linalg.cond(mixing) > 1e3:
        mixing = np.eye(k) * 3.0
    base = stats.partial_corr(x, y, z)
    moved = stats.partial_corr(x, y, z @ mixing + rng.normal(size=k) * 100)
    assert_allclose(moved.r, base.r, rtol=1e-8, atol=1e-10)


@SETTINGS
@given(shape=SHAPES, method=METHODS)
def test_symmetric_in_x_and_y(shape, method) -> None:
    x, y, z = _data(*shape)
    xy = stats.partial_corr(x, y, z, method=method)
    yx = stats.partial_corr(y, x, z, method=method)
    assert_allclose(yx.r, xy.r, rtol=1e-12, atol=1e-14)
    assert_allclose(yx.p_value, xy.p_value, rtol=1e-10, atol=1e-300)
    # semi-partial: removing z from y in (x, y) is removing it from the first argument in (y, x)
    semi_y = stats.partial_corr(x, y, z, method=method, semi="y")
    semi_x = stats.partial_corr(y, x, z, method=method, semi="x")
    assert_allclose(semi_x.r, semi_y.r, rtol=1e-12, atol=1e-14)


@SETTINGS
@given(shape=SHAPES, method=METHODS, semi=SEMIS, level=st.floats(0.5, 0.995))
def test_ranges(shape, method, semi, level) -> None:
    x, y, z = _data(*shape)
    res = stats.partial_corr(x, y, z, method=method, semi=semi, ci_level=level)
    assert -1.0 <= res.r <= 1.0
    assert 0.0 < res.p_value <= 1.0
    assert np.isfinite(res.statistic)
    assert np.sign(res.statistic) == np.sign(res.r)
    if method != "kendall":
        assert -1.0 <= res.ci[0] <= res.r <= res.ci[1] <= 1.0


@SETTINGS
@given(shape=SHAPES, method=METHODS)
def test_partial_at_least_as_large_as_semi_partial(shape, method) -> None:
    """|semi-partial| <= |partial| for Pearson (the semi-partial divides by the larger total variance)."""
    if method != "pearson":
        return
    x, y, z = _data(*shape)
    full = stats.partial_corr(x, y, z)
    for semi in ("x", "y"):
        assert abs(stats.partial_corr(x, y, z, semi=semi).r) <= abs(full.r) * (1 + 1e-12)


@SETTINGS
@given(shape=SHAPES, method=st.sampled_from(["spearman", "kendall"]))
def test_rank_methods_ignore_monotone_transforms(shape, method) -> None:
    x, y, z = _data(*shape)
    base = stats.partial_corr(x, y, z, method=method)
    moved = stats.partial_corr(np.exp(x), y**3, np.arctan(z), method=method)
    assert_allclose(moved.r, base.r, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(shape=SHAPES, m=st.integers(3, 5), method=METHODS)
def test_matrix_is_symmetric_with_r_in_range(shape, m, method) -> None:
    seed, n, k = shape
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    scores = rng.standard_normal((n, m)) + 0.5 * z @ rng.normal(size=(k, m))
    res = stats.partial_corr_matrix(scores, z, method=method)
    r, p = np.asarray(res.r), np.asarray(res.p_value)
    off = ~np.eye(m, dtype=bool)
    assert_allclose(r, r.T, rtol=1e-12, atol=1e-14)
    assert np.all(np.abs(r[off]) <= 1.0)
    assert np.all((p[off] > 0.0) & (p[off] <= 1.0))


@settings(max_examples=15, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 2**32 - 1), st.integers(8, 40), st.integers(1, 2)),
    scheme=st.sampled_from(["free", "block", "circular"]),
    n_perm=st.integers(1, 60),
    family_wise=st.booleans(),
)
def test_permutation_p_at_least_one_over_m_plus_one(shape, scheme, n_perm, family_wise) -> None:
    seed, n, k = shape
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    scores = rng.standard_normal((n, 3)) + z @ rng.normal(size=(k, 3))
    scores[:, 1] += 3 * scores[:, 0]  # one strong pair, whose p-value is at its floor
    block_length = 2 if scheme == "block" else None
    res = stats.permutation_test(
        scores, z, n_perm=n_perm, scheme=scheme, block_length=block_length, family_wise=family_wise, seed=seed
    )
    p = np.asarray(res.p_value)
    off = ~np.eye(3, dtype=bool)
    assert np.all(p[off] >= 1.0 / (n_perm + 1) - 1e-15)
    assert np.all(p[off] <= 1.0)
    # p = (b + 1) / (m + 1) with an integer b
    b = p[off] * (n_perm + 1) - 1
    assert_allclose(b, np.round(b), atol=1e-9)
    if family_wise:
        fwer = np.asarray(res.p_fwer)
        assert np.all(fwer[off] >= p[off] - 1e-15)
        assert np.all(fwer[off] <= 1.0)


def test_lag1_autocorrelation_is_statsmodels_acf_per_column() -> None:
    """The analysis's autocorrelation check (from the core) against statsmodels' acf, column by column."""
    from statsmodels.tsa.stattools import acf

    from gengen.stats.autocorr import lag1_autocorrelation

    rng = np.random.default_rng(12)
    series = np.cumsum(rng.standard_normal((40, 4)), axis=0)
    expected = [acf(series[:, j], nlags=1, fft=False)[1] for j in range(4)]
    np.testing.assert_allclose(lag1_autocorrelation(series), expected, rtol=1e-12)
    assert np.isnan(lag1_autocorrelation(np.full(10, 3.0)))  # constant: undefined
    assert np.isnan(lag1_autocorrelation(series[:2])).all()  # two rows: undefined
