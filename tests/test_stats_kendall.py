"""Kendall partial correlation: tau_b against scipy, partial tau against ppcor's precision-matrix definition.

ppcor (CRAN ppcor, R/ppcor_v1.R, function ``pcor``; unchanged in 1.1)::

    cvx  <- cov(x, method = "kendall")     # = D T D, T the tau_b matrix, D diagonal
    icvx <- solve(cvx)
    pcor <- -cov2cor(icvx)                 # = -cov2cor(solve(T)): cov2cor removes D
    statistic <- pcor/sqrt(2*(2*(n-gp)+5)/(9*(n-gp)*(n-1-gp)))
    p.value   <- 2*pnorm(-abs(statistic))

(verified against the stored source of cran/ppcor ``R/ppcor_v1.R`` and the ppcor 1.1 text of the same file).
References here: T from pairwise ``scipy.stats.kendalltau(variant="b")`` (R's ``cor(method = "kendall")`` is
tau_b), then the formulas above in numpy (``conftest.ppcor_pcor`` / ``ppcor_spcor`` / ``ppcor_statistic``).
Note the statistic is ppcor's normal approximation without a tie correction, so for k = 0 only r (not p) is
compared with scipy's own test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose

stats = pytest.importorskip("gengen.stats")


def _case(seed: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(max(8, k + 5), 150))
    z = rng.standard_normal((n, k))
    x = z @ rng.normal(size=k) + rng.standard_normal(n)
    y = 0.4 * x + z @ rng.normal(size=k) + rng.standard_normal(n)
    data = np.column_stack([x, y, z])
    if seed % 2 == 0:
        data = np.round(data, 1)  # ties: tau_b, not tau_a
    data = data * 10.0 ** rng.uniform(-3, 5, k + 2) + rng.uniform(-1e6, 1e6, k + 2)
    return data[:, 0], data[:, 1], data[:, 2:]


@pytest.mark.parametrize("seed", range(30))
def test_kendall_no_covariates_matches_scipy(seed: int, ref) -> None:
    x, y, _ = _case(seed, 0)
    n = len(x)
    res = stats.partial_corr(x, y, None, method="kendall")
    want = scipy.stats.kendalltau(x, y, variant="b").statistic
    assert_allclose(res.r, want, rtol=1e-12, atol=1e-15, err_msg=f"seed={seed} n={n}")
    assert (res.n, res.k) == (n, 0)
    statistic, p_value = ref.ppcor_statistic(want, n, 0, "kendall")
    # ppcor with gp = 0: tau / sqrt(2 (2n + 5) / (9 n (n - 1))), p = 2 pnorm(-|stat|)
    assert_allclose(statistic, want / np.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1))), rtol=1e-14)
    assert_allclose(res.statistic, statistic, rtol=1e-10, atol=1e-14, err_msg=f"seed={seed}")
    assert_allclose(res.p_value, p_value, rtol=1e-9, atol=1e-300, err_msg=f"seed={seed}")


def test_kendall_no_ties_matches_scipy_exact_p_for_large_n() -> None:
    """Without ties the normal approximation is scipy's asymptotic test (method="asymptotic")."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(120)
    y = 0.2 * x + rng.standard_normal(120)
    res = stats.partial_corr(x, y, None, method="kendall")
    want = scipy.stats.kendalltau(x, y, method="asymptotic")
    assert_allclose(res.r, want.statistic, rtol=1e-12)
    assert_allclose(res.p_value, want.pvalue, rtol=1e-9)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", range(100, 110))
def test_kendall_partial_matches_precision_matrix(seed: int, k: int, ref) -> None:
    x, y, z = _case(seed, k)
    n = len(x)
    data = np.column_stack([x, y, z])
    tau = ref.kendall_tau_matrix(data)
    precision = np.linalg.inv(tau)
    want = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])  # -cov2cor(solve(T))[1, 2]
    where = f"seed={seed} n={n} k={k}"
    res = stats.partial_corr(x, y, z, method="kendall")
    assert_allclose(res.r, want, rtol=1e-10, atol=1e-14, err_msg=where)
    assert_allclose(res.r, ref.ppcor_pcor(data, "kendall")["estimate"][0, 1], rtol=1e-10, atol=1e-14)
    statistic, p_value = ref.ppcor_statistic(want, n, k, "kendall")
    assert_allclose(res.statistic, statistic, rtol=1e-9, atol=1e-14, err_msg=where)
    assert_allclose(res.p_value, p_value, rtol=1e-8, atol=1e-300, err_msg=where)
    assert (res.n, res.k) == (n, k)


@pytest.mark.parametrize("semi", ["y", "x"])
@pytest.mark.parametrize("seed", range(200, 206))
def test_kendall_semipartial_matches_ppcor_spcor(seed: int, semi: str, ref) -> None:
    """spcor(method = "kendall")[1, 2] removes z from y; [2, 1] from x."""
    x, y, z = _case(seed, 2)
    data = np.column_stack([x, y, z])
    spcor = ref.ppcor_spcor(data, "kendall")
    want = spcor["estimate"][0, 1] if semi == "y" else spcor["estimate"][1, 0]
    want_p = spcor["p_value"][0, 1] if semi == "y" else spcor["p_value"][1, 0]
    res = stats.partial_corr(x, y, z, method="kendall", semi=semi)
    assert_allclose(res.r, want, rtol=1e-10, atol=1e-14, err_msg=f"seed={seed} semi={semi}")
    assert_allclose(res.p_value, want_p, rtol=1e-8, atol=1e-300, err_msg=f"seed={seed} semi={semi}")


def test_kendall_ignores_monotone_transforms() -> None:
    """tau_b depends on the orderings only."""
    x, y, z = _case(301, 2)
    base = stats.partial_corr(x, y, z, method="kendall")
    zt = np.column_stack([np.exp((z[:, 0] - z[:, 0].mean()) / z[:, 0].std()), z[:, 1] ** 3])
    moved = stats.partial_corr(np.arctan(x - np.median(x)), y * 2.5 - 3, zt, method="kendall")
    assert_allclose(moved.r, base.r, rtol=1e-12)
