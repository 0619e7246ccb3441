"""gengen.stats.p_adjust against statsmodels' multipletests and against R's p.adjust transcribed into numpy.

statsmodels ``multipletests(p, method=...)[1]`` shares six of R's methods; the names differ:

    R p.adjust     statsmodels
    "holm"         "holm"             (NOT statsmodels' default "hs", which is Holm–Šidák)
    "hochberg"     "simes-hochberg"
    "hommel"       "hommel"
    "bonferroni"   "bonferroni"
    "BH" / "fdr"   "fdr_bh"
    "BY"           "fdr_by"

R's NaN rule comes from its source (stats/R/p.adjust.R): ``n = length(p)`` is a lazily evaluated default,
first used after ``p <- p[nna]``, so NA p-values stay NA and are not counted in n; the references are
computed on the non-NaN subset.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from statsmodels.stats.multitest import multipletests

stats = pytest.importorskip("gengen.stats")

STATSMODELS_NAME = {
    "holm": "holm",
    "hochberg": "simes-hochberg",
    "hommel": "hommel",
    "bonferroni": "bonferroni",
    "BH": "fdr_bh",
    "fdr": "fdr_bh",
    "BY": "fdr_by",
}


def r_p_adjust(p: np.ndarray, method: str) -> np.ndarray:
    """R's ``p.adjust(p, method)`` for a vector without NA, transcribed from stats/R/p.adjust.R (R 4.x)."""
    p = np.asarray(p, dtype=np.float64)
    n = lp = len(p)
    if method == "fdr":
        method = "BH"
    if n <= 1:  # if (n <= 1) return(p0)
        return p.copy()
    if n == 2 and method == "hommel":
        method = "hochberg"
    if method == "none":
        return p.copy()
    if method == "bonferroni":  # pmin(1, n * p)
        return np.minimum(1.0, n * p)
    if method == "holm":  # pmin(1, cummax((n - i + 1L) * p[o]))[ro], o <- order(p)
        o = np.argsort(p, kind="stable")
        i = np.arange(1, lp + 1)
        out = np.empty(lp)
        out[o] = np.minimum(1.0, np.maximum.accumulate((n - i + 1) * p[o]))
        return out
    if method in ("hochberg", "BH", "BY"):  # o <- order(p, decreasing = TRUE); i <- lp:1L
        o = np.argsort(-p, kind="stable")
        i = np.arange(lp, 0, -1)
        if method == "hochberg":  # pmin(1, cummin((n + 1L - i) * p[o]))[ro]
            adjusted = (n + 1 - i) * p[o]
        elif method == "BH":  # pmin(1, cummin(n / i * p[o]))[ro]
            adjusted = n / i * p[o]
        else:  # q <- sum(1/(1L:n)); pmin(1, cummin(q * n / i * p[o]))[ro]
            adjusted = np.sum(1.0 / np.arange(1, n + 1)) * n / i * p[o]
        out = np.empty(lp)
        out[o] = np.minimum(1.0, np.minimum.accumulate(adjusted))
        return out
    if method == "hommel":
        o = np.argsort(p, kind="stable")
        ps = p[o]
        i = np.arange(1, n + 1)
        q = np.full(n, np.min(n * ps / i))  # q <- pa <- rep.int(min(n*p/i), n)
        pa = q.copy()
        for m in range(n - 1, 1, -1):  # for (m in (n-1L):2L)
            i1 = np.arange(0, n - m + 1)  # seq_len(n-m+1L), 0-based
            i2 = np.arange(n - m + 1, n)  # (n-m+2L):n, 0-based
            q1 = np.min(m * ps[i2] / np.arange(2, m + 1))
            q[i1] = np.minimum(m * ps[i1], q1)
            q[i2] = q[n - m]
            pa = np.maximum(pa, q)
        out = np.empty(n)
        out[o] = np.maximum(pa, ps)
        return out
    raise AssertionError(method)


def _p_vectors() -> list[np.ndarray]:
    rng = np.random.default_rng(42)
    vectors = [
        np.array([0.01, 0.02, 0.03, 0.04, 0.05]),
        np.array([0.05, 0.05, 0.05, 0.5, 1.0, 0.0]),  # ties, a zero and a one
        np.array([1e-12, 0.2, 0.8, 0.3, 1e-3]),
        np.array([0.5, 0.01]),  # n = 2: R's hommel is hochberg
        np.array([0.3, 0.1, 0.2]),
    ]
    for length in (3, 7, 10, 25, 60):
        mix = np.where(rng.random(length) < 0.3, rng.uniform(0, 1e-3, length), rng.uniform(0, 1, length))
        vectors.append(mix)
        vectors.append(np.round(mix, 2))  # ties
    return vectors


P_VECTORS = _p_vectors()


@functools.cache
def _statsmodels(index: int, method: str) -> np.ndarray:
    """statsmodels' adjustment of ``P_VECTORS[index]``, computed once (its "holm" calls gc.collect())."""
    return multipletests(P_VECTORS[index], method=STATSMODELS_NAME[method])[1]


@pytest.mark.parametrize("method", list(STATSMODELS_NAME))
@pytest.mark.parametrize("index", range(len(P_VECTORS)))
def test_p_adjust_matches_statsmodels_and_r(index: int, method: str) -> None:
    p = P_VECTORS[index]
    got = np.asarray(stats.p_adjust(p, method=method))
    assert got.shape == p.shape
    where = f"p={p.tolist()} method={method}"
    assert_allclose(got, _statsmodels(index, method), rtol=1e-12, atol=1e-15, err_msg=where)
    assert_allclose(got, r_p_adjust(p, method), rtol=1e-12, atol=1e-15, err_msg=where)


def test_r_transcription_matches_statsmodels() -> None:
    """The numpy transcription of R, on its own, agrees with statsmodels (so the two references are one)."""
    for index, p in enumerate(P_VECTORS):
        for method in STATSMODELS_NAME:
            assert_allclose(r_p_adjust(p, method), _statsmodels(index, method), rtol=1e-12, atol=1e-15)


def test_default_is_holm_not_holm_sidak() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.2])
    got = np.asarray(stats.p_adjust(p))
    assert_allclose(got, multipletests(p, method="holm")[1], rtol=1e-12)
    assert not np.allclose(got, multipletests(p, method="hs")[1], rtol=1e-9)


@pytest.mark.parametrize("index", range(len(P_VECTORS)))
def test_none_is_identity_and_fdr_is_bh(index: int) -> None:
    p = P_VECTORS[index]
    assert_array_equal(np.asarray(stats.p_adjust(p, method="none")), p)
    assert_array_equal(np.asarray(stats.p_adjust(p, method="fdr")), np.asarray(stats.p_adjust(p, method="BH")))


@pytest.mark.parametrize("method", [*STATSMODELS_NAME, "none"])
def test_nan_kept_and_not_counted(method: str) -> None:
    p = np.array([0.01, np.nan, 0.04, 0.03, np.nan, 0.2, 0.5])
    got = np.asarray(stats.p_adjust(p, method=method))
    finite = ~np.isnan(p)
    assert_array_equal(np.isnan(got), ~finite)
    want = r_p_adjust(p[finite], method)
    assert_allclose(got[finite], want, rtol=1e-12, atol=1e-15)
    if method in STATSMODELS_NAME:
        reference = multipletests(p[finite], method=STATSMODELS_NAME[method])[1]
        assert_allclose(got[finite], reference, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("method", [*STATSMODELS_NAME, "none"])
def test_small_inputs(method: str) -> None:
    """R: ``if (n <= 1) return(p0)``; all-NaN stays all-NaN."""
    assert_array_equal(np.asarray(stats.p_adjust(np.array([0.03]), method=method)), [0.03])
    assert np.asarray(stats.p_adjust(np.array([], dtype=float), method=method)).shape == (0,)
    assert np.all(np.isnan(np.asarray(stats.p_adjust(np.array([np.nan, np.nan]), method=method))))
    assert_allclose(np.asarray(stats.p_adjust(np.array([np.nan, 0.03]), method=method))[1], 0.03, rtol=0)


def test_accepts_lists_and_pandas() -> None:
    import pandas as pd

    p = [0.01, 0.04, 0.03]
    want = multipletests(np.array(p), method="holm")[1]
    assert_allclose(np.asarray(stats.p_adjust(p, method="holm")), want, rtol=1e-12)
    assert_allclose(np.asarray(stats.p_adjust(pd.Series(p), method="holm")), want, rtol=1e-12)
