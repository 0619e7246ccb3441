"""gengen.stats against R's ppcor: the nine frozen golden cases; pcor/spcor matrices against ppcor's formulas.

Reference 1 — ``../shared/golden/ppcor/expected.json``: R ppcor 1.1 output on ``partial_corr.csv`` (n = 30),
recorded by pingouin's test suite, e.g.::

    library(ppcor)
    df <- read.csv("partial_corr.csv")
    pcor.test(df$x, df$y, df[, c("cv1", "cv2", "cv3")])  # estimate 0.4926007, p.value 0.009044164
    spcor.test(df$y, df$x, df[, c("cv1", "cv2", "cv3")])                       # z removed from df$x only

Values are rounded as printed (7 decimals for r, 7 significant digits for p), hence r to absolute 1e-7 and p
to relative 1e-6.

Reference 2 — ppcor's ``pcor``/``spcor`` matrix formulas, transcribed into numpy in ``conftest.py`` (with the
R source quoted there), evaluated on the golden data and on seeded random matrices.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from numpy.testing import assert_allclose

stats = pytest.importorskip("gengen.stats")

N_GOLDEN_CASES = 9


def _golden_call(case: dict, data: pd.DataFrame) -> list[tuple[str, object]]:
    """The gengen calls equal to one ppcor call (spcor.test(a, b, z) removes z from its second argument b)."""
    z = data[case["z"]].to_numpy()
    a, b = data[case["x"]].to_numpy(), data[case["y"]].to_numpy()
    method = case["method"]
    if case["function"] == "pcor.test":
        return [("partial_corr(x, y, z)", stats.partial_corr(a, b, z, method=method))]
    calls = [("partial_corr(a, b, z, semi='y')", stats.partial_corr(a, b, z, method=method, semi="y"))]
    # The same number seen from the other side: z removed from the first argument, i.e. semi="x".
    calls.append(("partial_corr(b, a, z, semi='x')", stats.partial_corr(b, a, z, method=method, semi="x")))
    return calls


@pytest.mark.parametrize("index", range(N_GOLDEN_CASES))
def test_golden_ppcor_case(index: int, ppcor_golden: dict) -> None:
    case = ppcor_golden["cases"][index]
    data = ppcor_golden["data"]
    n, k = len(data), len(case["z"])
    for label, res in _golden_call(case, data):
        where = f"{case['function']}({case['x']}, {case['y']}, {case['z']}, {case['method']}) as {label}"
        assert_allclose(res.r, case["estimate"], rtol=0, atol=1e-7, err_msg=where)
        assert_allclose(res.p_value, case["p_value"], rtol=1e-6, atol=0, err_msg=where)
        assert res.n == n, where
        assert res.k == k, where
        assert res.df == n - 2 - k, where
        assert res.method == case["method"], where
        # ppcor: statistic <- pcor*sqrt((n-2-gp)/(1-pcor^2)) on its own estimate
        assert_allclose(res.statistic, res.r * np.sqrt((n - 2 - k) / (1 - res.r**2)), rtol=1e-12, err_msg=where)


def test_golden_swapped_case_is_semi_x(ppcor_golden: dict) -> None:
    """spcor.test(y, x, z) (case 8) is partial_corr(x, y, z, semi="x"): z removed from x only."""
    case = ppcor_golden["cases"][7]
    assert (case["x"], case["y"]) == ("y", "x")
    data = ppcor_golden["data"]
    res = stats.partial_corr(data["x"].to_numpy(), data["y"].to_numpy(), data[case["z"]].to_numpy(), semi="x")
    assert res.semi == "x"
    assert_allclose(res.r, case["estimate"], rtol=0, atol=1e-7)
    assert_allclose(res.p_value, case["p_value"], rtol=1e-6)


def test_golden_accepts_pandas(ppcor_golden: dict) -> None:
    """Series and DataFrame inputs give the numbers of their numpy values."""
    data = ppcor_golden["data"]
    case = ppcor_golden["cases"][2]
    res = stats.partial_corr(data["x"], data["y"], data[case["z"]])
    assert_allclose(res.r, case["estimate"], rtol=0, atol=1e-7)
    assert_allclose(res.p_value, case["p_value"], rtol=1e-6)


# --------------------------------------------------------------------------------------------------
# pcor / spcor matrices
# --------------------------------------------------------------------------------------------------

METHODS = ["pearson", "spearman", "kendall"]


def _check_matrices(got: object, want: dict, method: str, where: str) -> None:
    m = want["estimate"].shape[0]
    off = ~np.eye(m, dtype=bool)
    estimate = np.asarray(got.estimate, dtype=float)
    statistic = np.asarray(got.statistic, dtype=float)
    p_value = np.asarray(got.p_value, dtype=float)
    assert estimate.shape == statistic.shape == p_value.shape == (m, m), where
    assert_allclose(estimate[off], want["estimate"][off], rtol=1e-10, atol=1e-13, err_msg=where)
    assert_allclose(statistic[off], want["statistic"][off], rtol=1e-9, atol=1e-12, err_msg=where)
    # p: a relative error e in r moves a tiny p by about t^2 e relatively (t ~ 15 at p ~ 1e-39), and the numpy
    # reference inverts the covariance matrix in plain float64, hence 1e-6 rather than the 1e-10 used for r
    assert_allclose(p_value[off], want["p_value"][off], rtol=1e-6, atol=1e-300, err_msg=where)
    assert got.n == want["n"], where
    assert got.k == want["gp"], where
    assert got.method == method, where


def _check_diagonal(got: object, where: str) -> None:
    """ppcor: diag(estimate) <- 1; diag(statistic) <- 0; diag(p.value) <- 0."""
    assert_allclose(np.diag(np.asarray(got.estimate, dtype=float)), 1.0, rtol=0, atol=0, err_msg=where)
    assert_allclose(np.diag(np.asarray(got.statistic, dtype=float)), 0.0, rtol=0, atol=0, err_msg=where)
    assert_allclose(np.diag(np.asarray(got.p_value, dtype=float)), 0.0, rtol=0, atol=0, err_msg=where)


@pytest.mark.parametrize("method", METHODS)
def test_pcor_matrix_on_golden_data(method: str, ppcor_golden: dict, ref) -> None:
    data = ppcor_golden["data"][["x", "y", "cv1", "cv2", "cv3"]].to_numpy()
    got = stats.pcor(data, method=method)
    _check_matrices(got, ref.ppcor_pcor(data, method), method, f"pcor(partial_corr.csv, {method})")


@pytest.mark.parametrize("method", METHODS)
def test_spcor_matrix_on_golden_data(method: str, ppcor_golden: dict, ref) -> None:
    data = ppcor_golden["data"][["x", "y", "cv1", "cv2", "cv3"]].to_numpy()
    got = stats.spcor(data, method=method)
    _check_matrices(got, ref.ppcor_spcor(data, method), method, f"spcor(partial_corr.csv, {method})")


@pytest.mark.parametrize("function", ["pcor", "spcor"])
def test_matrix_diagonal_follows_ppcor(function: str, ppcor_golden: dict) -> None:
    data = ppcor_golden["data"].to_numpy()
    for method in METHODS:
        _check_diagonal(getattr(stats, function)(data, method=method), f"{function}({method})")


def test_matrices_contain_the_golden_cases(ppcor_golden: dict) -> None:
    """pcor.test / spcor.test are entries [1, 2] (and [2, 1]) of the matrices (R source: pcor$est[1,2])."""
    data = ppcor_golden["data"][["x", "y", "cv1", "cv2", "cv3"]].to_numpy()
    cases = ppcor_golden["cases"]
    pc = stats.pcor(data)
    sp = stats.spcor(data)
    assert_allclose(np.asarray(pc.estimate)[0, 1], cases[2]["estimate"], atol=1e-7, rtol=0)
    assert_allclose(np.asarray(pc.p_value)[0, 1], cases[2]["p_value"], rtol=1e-6)
    assert_allclose(np.asarray(sp.estimate)[0, 1], cases[6]["estimate"], atol=1e-7, rtol=0)
    assert_allclose(np.asarray(sp.p_value)[0, 1], cases[6]["p_value"], rtol=1e-6)
    assert_allclose(np.asarray(sp.estimate)[1, 0], cases[7]["estimate"], atol=1e-7, rtol=0)
    assert_allclose(np.asarray(sp.p_value)[1, 0], cases[7]["p_value"], rtol=1e-6)
    assert_allclose(np.asarray(stats.pcor(data, method="spearman").estimate)[0, 1], cases[3]["estimate"], atol=1e-7)
    assert_allclose(np.asarray(stats.spcor(data, method="spearman").estimate)[0, 1], cases[8]["estimate"], atol=1e-7)


def test_matrix_dataframe_in_dataframe_out(ppcor_golden: dict, ref) -> None:
    frame = ppcor_golden["data"][["x", "y", "cv1", "cv2", "cv3"]]
    got = stats.pcor(frame)
    for name in ("estimate", "statistic", "p_value"):
        value = getattr(got, name)
        assert isinstance(value, pd.DataFrame), name
        assert list(value.index) == list(frame.columns) == list(value.columns), name
    assert_allclose(got.estimate.to_numpy(), ref.ppcor_pcor(frame.to_numpy())["estimate"], rtol=1e-10, atol=1e-13)


def _random_matrix(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 7))
    n = int(rng.integers(m + 8, 200))
    mixing = rng.normal(size=(m, m))
    data = rng.standard_normal((n, m)) @ mixing
    if seed % 3 == 0:
        data = np.round(data, 1)  # ties for the rank methods
    return data * 10.0 ** rng.uniform(-2, 4, m) + rng.uniform(-1e4, 1e4, m)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(8))
def test_pcor_spcor_random_matrices(seed: int, method: str, ref) -> None:
    data = _random_matrix(seed)
    where = f"seed={seed} shape={data.shape} {method}"
    _check_matrices(stats.pcor(data, method=method), ref.ppcor_pcor(data, method), method, "pcor " + where)
    _check_matrices(stats.spcor(data, method=method), ref.ppcor_spcor(data, method), method, "spcor " + where)


@pytest.mark.parametrize("method", METHODS)
def test_two_columns_is_the_plain_correlation(method: str) -> None:
    """gp = 0: pcor of two columns is cor(x, y, method) with ppcor's test (Kendall: tau_b, normal approx)."""
    rng = np.random.default_rng(31)
    data = np.round(rng.standard_normal((40, 2)) @ [[1.0, 0.5], [0.0, 1.0]], 1)
    want = {
        "pearson": scipy.stats.pearsonr,
        "spearman": scipy.stats.spearmanr,
        "kendall": scipy.stats.kendalltau,
    }[method](data[:, 0], data[:, 1]).statistic
    for function in (stats.pcor, stats.spcor):
        got = function(data, method=method)
        assert got.k == 0
        assert_allclose(np.asarray(got.estimate)[0, 1], want, rtol=1e-12)
        assert_allclose(np.asarray(got.estimate)[1, 0], want, rtol=1e-12)
