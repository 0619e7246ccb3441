"""gengen.stats against R on the seeded data sets of cases.py (run through rpy2, R code in references.R).

References per data set (x, y, covariates z1..zk; see references.R for the exact R calls):

- base R: ``lm`` residuals + ``cor.test`` (Pearson; Spearman on average ranks; semi-partials);
- ``ggm::pcor`` and ``ggm::pcor.test``;
- ``psych::partial.r``;
- ``corpcor::cor2pcor`` (the partial and the whole partial-correlation matrix);
- ``cor(method = "kendall")`` (tau-b), with ppcor's normal-approximation test written out in R;
- ``stats::p.adjust`` for every method (test_p_adjust below).

Tolerances. Estimates agree to relative 1e-10 and p-values to relative 1e-8, except where R's own arithmetic
cannot deliver that; then the tolerance is the limit of the reference's precision, computed per data set:

- estimates near 0: an absolute floor of 1e-13 (a relative error means nothing for r ~ 1e-14);
- references that invert a correlation matrix (ggm::pcor, psych::partial.r, corpcor::cor2pcor, Kendall via
  the tau-b matrix) lose digits with its condition number; the tolerance is max(1e-10, 100 eps kappa^2) where
  kappa is the condition number of the column-standardised data (kappa^2 = that of the correlation matrix).
  This binds for the ``collinear`` (z2 = z1 + 1e-6 noise: kappa^2 ~ 1e12) and ``strong`` (y ~ x) cases;
- references through ``lm`` (Householder QR of [1, Z]) lose digits with the condition number of the
  standardised covariates: max(1e-10, 100 eps kappa_z); binds only for the most collinear cases;
- a p-value inherits its estimate's error amplified by |d ln p / d r| (large far in the tail), so its tolerance
  is max(1e-8, 4 |d ln p / d r| delta_r); binds for the ``strong`` cases, where p is below 1e-100. A p-value that
  underflows to 0 in R must be below 1e-300 in gengen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gengen import stats
from gengen.stats import Adjustment, Method

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
cases = sys.modules["gengen_r_cases"]  # cases.py, loaded by this folder's conftest

pytestmark = pytest.mark.r

Semi = Literal["x", "y"]

EPS = float(np.finfo(float).eps)
R_RTOL = 1e-10
R_ATOL = 1e-13
P_RTOL = 1e-8
P_METHODS = ["holm", "hochberg", "hommel", "bonferroni", "BH", "BY", "fdr", "none"]


# --- tolerance model ------------------------------------------------------------------------------------


def _condition(columns: np.ndarray) -> float:
    if columns.shape[1] < 2:
        return 1.0
    centred = columns - columns.mean(axis=0)
    standardised = centred / np.linalg.norm(centred, axis=0)
    return float(np.linalg.cond(standardised))


def inversion_rtol(data: np.ndarray) -> float:
    """Precision of an estimate from an inverted correlation matrix of ``data``."""
    return max(R_RTOL, 100 * EPS * _condition(data) ** 2)


def lm_rtol(data: np.ndarray) -> float:
    """Precision of an estimate from lm (QR) residuals on the covariates of ``data``."""
    return max(R_RTOL, 100 * EPS * _condition(data[:, 2:]))


def _log_p_slope(r: float, n: int, k: int, method: Method) -> float:
    """|d ln p / d r| of the test ppcor applies to an estimate r."""
    r = float(np.clip(abs(r), 0.0, 1 - 1e-16))
    if method == "kendall":
        se = np.sqrt(2 * (2 * (n - k) + 5) / (9 * (n - k) * (n - 1 - k)))
        z = r / se
        return float(np.exp(scipy_stats.norm.logpdf(z) - scipy_stats.norm.logsf(z)) / se)
    df = n - 2 - k
    t = r * np.sqrt(df / (1 - r * r))
    hazard = np.exp(scipy_stats.t.logpdf(t, df) - scipy_stats.t.logsf(t, df))
    return float(hazard * np.sqrt(df) * (1 - r * r) ** -1.5)


def assert_estimate(actual: float, expected: float, rtol: float, what: str, atol: float = R_ATOL) -> None:
    assert np.isfinite(actual), f"{what}: gengen gave {actual}, R {expected}"
    assert abs(actual - expected) <= rtol * abs(expected) + atol, (
        f"{what}: gengen {actual!r} vs R {expected!r} (rel diff {abs(actual - expected) / abs(expected):.3g}, "
        f"rtol {rtol:.3g})"
    )


def assert_p_value(
    actual: float, expected: float, r: float, r_rtol: float, n: int, k: int, method: Method, what: str
) -> None:
    if expected == 0.0:
        assert actual < 1e-300, f"{what}: R's p underflows to 0, gengen gives {actual!r}"
        return
    slope = _log_p_slope(r, n, k, method)
    rtol = max(P_RTOL, 4 * slope * (r_rtol * abs(r) + R_ATOL))
    assert abs(actual - expected) <= rtol * expected + 1e-300, (
        f"{what}: gengen {actual!r} vs R {expected!r} (rel diff {abs(actual - expected) / expected:.3g}, "
        f"rtol {rtol:.3g})"
    )


def split(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    covar = data[:, 2:] if data.shape[1] > 2 else None
    return data[:, 0], data[:, 1], covar


def check_test(
    result: Any, reference: dict[str, Any], case: Any, method: Method, rtol: float, label: str, prefix: str = ""
) -> None:
    """Compare a PartialCorr's r, statistic and p-value with reference[prefix + 'r' | 'statistic' | 'p_value']."""
    n, k = case.n, case.k
    expected_r = reference[f"{prefix}r"]
    assert_estimate(result.r, expected_r, rtol, f"{case.case_id} {label} r")
    statistic_key = f"{prefix}statistic"
    if statistic_key in reference:
        # t = r sqrt(df / (1 - r^2)) (Kendall: z = r / se) carries r's error amplified by 1 / (1 - r^2).
        expected_t = reference[statistic_key]
        scale = abs(expected_t / expected_r) if expected_r != 0 else 1.0
        amplification = 1 / max(1 - expected_r**2, 1e-300)
        assert_estimate(
            result.statistic,
            expected_t,
            rtol * amplification,
            f"{case.case_id} {label} statistic",
            atol=R_ATOL * scale * amplification,
        )
    p_key = "p_value" if not prefix else f"{prefix}p"
    assert_p_value(result.p_value, reference[p_key], expected_r, rtol, n, k, method, f"{case.case_id} {label} p-value")


def singular_in_r(references: dict[str, Any], method: Method) -> bool:
    """R's inversion of the (rank or tau-b) correlation matrix failed: the covariates are (rank-)collinear."""
    return "error" in references[f"ggm_{method}"]


def check_refused_or_defined(call: Callable[[], Any], case: Any, label: str, record_comparison: Any) -> None:
    """Where R's solve() finds the matrix singular, gengen must raise a ValueError (its documented refusal of
    collinear covariates) or, like ppcor's Moore-Penrose fallback, return a defined estimate."""
    try:
        result = call()
    except ValueError:
        record_comparison("singular in R (solve): gengen refuses with ValueError")
        return
    assert np.isfinite(result.r) and abs(result.r) <= 1 + 1e-12, f"{case.case_id} {label}: {result}"
    record_comparison("singular in R (solve): gengen returns a defined estimate")


# --- base R: lm residuals + cor.test ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_partial_corr_vs_lm_cor_test(case: Any, method: Method, r_references: Any, record_comparison: Any) -> None:
    data = case.data()
    references = r_references[case.case_id]
    call = lambda: stats.partial_corr(*split(data), method=method)  # noqa: E731
    if singular_in_r(references, method):
        check_refused_or_defined(call, case, method, record_comparison)
        return
    reference = references[f"lm_{method}"]
    result = call()
    check_test(result, reference, case, method, lm_rtol(case.r_data()), f"{method} vs lm+cor.test")
    assert result.df == reference["df"]
    assert (result.n, result.k) == (case.n, case.k)
    if case.k == 0:  # no covariates: cor.test's own p-value is the reference
        assert_p_value(
            result.p_value,
            reference["cor_test_p"],
            reference["r"],
            R_RTOL,
            case.n,
            0,
            method,
            f"{case.case_id} {method} vs cor.test p-value",
        )
    record_comparison(f"partial_corr {method} vs lm residuals + cor.test")


@pytest.mark.parametrize("method", ["pearson", "spearman"])
@pytest.mark.parametrize("semi", ["x", "y"])
def test_semi_partial_corr_vs_lm(
    case: Any, method: Method, semi: Semi, r_references: Any, record_comparison: Any
) -> None:
    data = case.data()
    references = r_references[case.case_id]
    call = lambda: stats.partial_corr(*split(data), method=method, semi=semi)  # noqa: E731
    if singular_in_r(references, method):
        check_refused_or_defined(call, case, f"{method} semi={semi}", record_comparison)
        return
    check_test(
        call(),
        references[f"lm_{method}"],
        case,
        method,
        lm_rtol(case.r_data()),
        f"{method} semi={semi} vs lm",
        prefix=f"semi_{semi}_",
    )
    record_comparison(f"partial_corr {method} semi={semi} vs lm residuals (spcor.test semantics)")


# --- ggm ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_partial_corr_vs_ggm(case: Any, method: Method, r_references: Any, record_comparison: Any) -> None:
    """ggm::pcor on the correlation (rank, tau-b) matrix; ggm::pcor.test, or ppcor's z-test for Kendall."""
    data = case.data()
    references = r_references[case.case_id]
    call = lambda: stats.partial_corr(*split(data), method=method)  # noqa: E731
    if singular_in_r(references, method):
        check_refused_or_defined(call, case, method, record_comparison)
        return
    reference = references[f"ggm_{method}"]
    result = call()
    check_test(result, reference, case, method, inversion_rtol(case.r_data()), f"{method} vs ggm::pcor")
    if method != "kendall":
        assert result.df == reference["df"]
    record_comparison(
        f"partial_corr {method} vs ggm::pcor + " + ("ppcor's z-test" if method == "kendall" else "ggm::pcor.test")
    )


# --- Kendall -------------------------------------------------------------------------------------------------


def test_kendall_vs_r(case: Any, r_references: Any, record_comparison: Any) -> None:
    """Plain tau-b against cor(method = "kendall"); semi-partial tau from the tau-b matrix (ppcor's spcor)."""
    data = case.data()
    references = r_references[case.case_id]
    x, y, covar = split(data)
    plain = stats.partial_corr(x, y, None, method="kendall")
    assert_estimate(plain.r, references["cor_kendall"]["r"], R_RTOL, f"{case.case_id} kendall tau-b")
    record_comparison("partial_corr kendall, no covariates vs cor(method = 'kendall')")
    for semi in ("x", "y"):
        call = lambda semi=semi: stats.partial_corr(x, y, covar, method="kendall", semi=semi)  # noqa: E731
        if singular_in_r(references, "kendall"):
            check_refused_or_defined(call, case, f"kendall semi={semi}", record_comparison)
            continue
        check_test(
            call(),
            references["kendall"],
            case,
            "kendall",
            inversion_rtol(case.r_data()),
            f"kendall semi={semi}",
            prefix=f"semi_{semi}_",
        )
        record_comparison(f"partial_corr kendall semi={semi} vs the tau-b matrix (ppcor's spcor formula)")


def test_semi_partial_formula_matches_lm(case: Any, r_references: Any) -> None:
    """Checks references.R itself: its precision-matrix semi-partial (used for Kendall) equals lm's for Pearson."""
    references = r_references[case.case_id]
    if "error" in references["kendall"]:
        pytest.skip("the tau-b matrix is singular in R")
    assert_estimate(
        references["kendall"]["pearson_semi_y_from_matrix"],
        references["lm_pearson"]["semi_y_r"],
        inversion_rtol(case.r_data()),
        f"{case.case_id} semi-partial formula",
    )


# --- psych and corpcor ----------------------------------------------------------------------------------------


def psych_truncates(data: np.ndarray, method: Method) -> bool:
    """psych::partial.r inverts the covariates' correlation matrix with psych::Pinv, which treats singular values
    below sqrt(eps) (1.5e-8) of the largest as zero: for near-collinear covariates (z2 = z1 + 1e-4 noise and
    closer) psych then answers a different question (the direction is dropped). Within a factor 10 of that
    threshold psych is not a reference (R's limit, not gengen's)."""
    covar = data[:, 2:]
    if method == "spearman":
        covar = scipy_stats.rankdata(covar, axis=0)
    if covar.shape[1] < 2:
        return False
    singular_values = np.linalg.svd(np.corrcoef(covar, rowvar=False), compute_uv=False)
    return bool(singular_values[-1] < 10 * np.sqrt(EPS) * singular_values[0])


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_partial_corr_vs_psych(case: Any, method: Method, r_references: Any, record_comparison: Any) -> None:
    references = r_references[case.case_id]
    if case.k == 0:
        pytest.skip("psych::partial.r needs at least one covariate")
    if singular_in_r(references, method):
        pytest.skip("singular in R; gengen's behaviour is checked in test_partial_corr_vs_ggm")
    if psych_truncates(case.r_data(), method):
        pytest.skip("psych::Pinv drops singular values below sqrt(eps) of the covariates' correlation matrix")
    result = stats.partial_corr(*split(case.data()), method=method)
    assert_estimate(
        result.r,
        references[f"psych_{method}"]["r"],
        inversion_rtol(case.r_data()),
        f"{case.case_id} {method} vs psych::partial.r",
    )
    record_comparison(f"partial_corr {method} vs psych::partial.r")


@pytest.mark.parametrize("method", ["pearson", "kendall"])
def test_pcor_vs_corpcor(case: Any, method: Method, r_references: Any, record_comparison: Any) -> None:
    """partial_corr and the whole pcor() matrix against corpcor::cor2pcor (ppcor's pcor semantics)."""
    data = case.data()
    references = r_references[case.case_id]
    if singular_in_r(references, method):
        pytest.skip("singular in R; gengen's behaviour is checked in test_partial_corr_vs_ggm")
    rtol = inversion_rtol(case.r_data())
    result = stats.partial_corr(*split(data), method=method)
    assert_estimate(
        result.r, references[f"corpcor_{method}"]["r"], rtol, f"{case.case_id} {method} vs corpcor::cor2pcor"
    )
    matrices = stats.pcor(data, method=method)
    assert_matrices(matrices, references[f"pcor_{method}"], case, method, rtol, f"pcor({method})")
    record_comparison(f"partial_corr and pcor() matrix {method} vs corpcor::cor2pcor")


def assert_matrices(
    matrices: Any, expected: dict[str, Any], case: Any, method: Method, rtol: float, label: str
) -> None:
    m = expected["estimate"].shape[0]
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            where = f"{case.case_id} {label}[{i},{j}]"
            r = expected["estimate"][i, j]
            assert_estimate(float(np.asarray(matrices.estimate)[i, j]), r, rtol, where)
            assert_p_value(
                float(np.asarray(matrices.p_value)[i, j]),
                expected["p_value"][i, j],
                r,
                rtol,
                case.n,
                m - 2,
                method,
                where + " p-value",
            )


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_spcor_matrix_vs_lm(case: Any, method: Method, r_references: Any, record_comparison: Any) -> None:
    """The whole spcor() matrix against lm semi-partials, sr[i, j] = cor(X_i, X_j's residual on the others)."""
    data = case.data()
    references = r_references[case.case_id]
    if singular_in_r(references, method):
        pytest.skip("singular in R; gengen's behaviour is checked in test_partial_corr_vs_ggm")
    # Each entry conditions on the other columns, x and y among them: the whole matrix's conditioning counts.
    rtol = inversion_rtol(case.r_data())
    matrices = stats.spcor(data, method=method)
    assert_matrices(matrices, references[f"spcor_{method}"], case, method, rtol, f"spcor({method})")
    record_comparison(f"spcor() matrix {method} vs lm semi-partials")


# --- p.adjust -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", P_METHODS)
def test_p_adjust_vs_r(p_vector: np.ndarray, method: Adjustment, r_session: Any, record_comparison: Any) -> None:
    """stats::p.adjust on vectors with ties, exact 0 and 1, tiny values and NaN (kept, not counted)."""
    expected = np.atleast_1d(np.asarray(r_session.call("p.adjust", p_vector, method=method), dtype=np.float64))
    actual = np.asarray(stats.p_adjust(p_vector, method=method), dtype=np.float64)
    assert actual.shape == p_vector.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    # The adjustments are products, sums and running extrema of the inputs: a few ulps apart at most.
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=0, equal_nan=True)
    record_comparison(f"p_adjust {method} vs stats::p.adjust")


# --- ppcor itself, when R can load it ---------------------------------------------------------------------------


# ppcor inverts the covariance matrix with solve(), but where its determinant is below machine epsilon (a rule
# that depends on the columns' units, not on how well conditioned the matrix is) it switches to MASS::ginv,
# which zeroes every singular value below sqrt(eps) times the largest. With near-collinear covariates
# (z2 = z1 + 1e-5 noise) that throws away the direction in which z2 differs from z1, so ppcor then reports the
# partial correlation given a projection of the covariates, not given the covariates. Those rows are decided by
# the exact rational reference of tests/conftest.py instead of ppcor.
EXACT_ATOL = 1e-10
# Data sets where ppcor 1.1 takes that path for Pearson (found by running every case; asserted below so that the
# list cannot go stale silently).
PPCOR_GINV_CASES = ("collinear-011", "collinear-016")


def exact_reference(data: np.ndarray, method: Method, ref: Any) -> float:
    """The partial correlation of ``data`` (x, y | z...) in exact rational arithmetic (Spearman: on ranks)."""
    values = ref.rank_columns(data) if method == "spearman" else data
    x, y, covar = split(values)
    return float(ref.exact_partial_corr(x, y, covar))


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_against_ppcor_live(
    case: Any, method: Method, ppcor_session: Any, r_references: Any, ref: Any, record_comparison: Any
) -> None:
    """ppcor::pcor.test, spcor.test (covariates removed from y) and pcor() on the same data sets."""
    if case.k == 0:
        pytest.skip("ppcor's pcor.test needs at least one covariate")
    if singular_in_r(r_references[case.case_id], method):
        pytest.skip("singular in R (ppcor falls back to a generalised inverse with a warning)")
    data = case.data()
    reference = ppcor_session.call("reference_ppcor", case.r_data(), method)
    if "error" in reference:
        pytest.skip(f"ppcor fails on this data set in R: {reference['error']}")
    x, y, covar = split(data)
    if reference["ginv"] == 1:
        assert method == "pearson" and case.case_id in PPCOR_GINV_CASES, (
            f"{case.case_id} {method}: ppcor used its generalised inverse on a data set not in PPCOR_GINV_CASES"
        )
        gengen_r = stats.partial_corr(x, y, covar, method=method).r
        exact = exact_reference(data, method, ref)
        assert abs(gengen_r - exact) <= EXACT_ATOL, f"{case.case_id}: gengen {gengen_r!r}, exact {exact!r}"
        assert abs(reference["r"] - exact) > 1e3 * abs(gengen_r - exact), (reference["r"], exact)
        record_comparison(f"ppcor {method} on its generalised-inverse path: gengen equals the exact value, ppcor off")
        return
    assert case.case_id not in PPCOR_GINV_CASES or method != "pearson", f"{case.case_id}: ppcor no longer uses ginv"
    rtol = inversion_rtol(case.r_data())
    check_test(stats.partial_corr(x, y, covar, method=method), reference, case, method, rtol, f"{method} vs ppcor")
    check_test(
        stats.partial_corr(x, y, covar, method=method, semi="y"),
        reference,
        case,
        method,
        rtol,
        f"{method} semi=y vs ppcor::spcor.test",
        prefix="semi_y_",
    )
    assert_matrices(
        stats.pcor(data, method=method),
        {"estimate": reference["pcor_estimate"], "p_value": reference["pcor_p_value"]},
        case,
        method,
        rtol,
        f"pcor({method}) vs ppcor::pcor",
    )
    record_comparison(f"partial_corr, semi='y' and pcor() {method} vs ppcor {ppcor_session.version('ppcor')} live")


@pytest.mark.parametrize("case_id", PPCOR_GINV_CASES)
def test_near_collinear_cases_gengen_exact_ppcor_off(
    case_id: str, ppcor_session: Any, r_references: Any, ref: Any, record_comparison: Any
) -> None:
    """collinear-011 (gengen r = 0.2590, ppcor 0.2648) and collinear-016 (-0.00894 vs -0.00536): gengen is right.

    The exact partial correlation (rational arithmetic on the float64 inputs, tests/conftest.py) agrees with
    gengen to ~1e-12 and with R's own lm residuals, while ppcor is off by 2% and 40%: the determinant of the
    5 x 5 covariance matrix is ~1e-20 and ~1e-24 (< eps), so ppcor inverts it with MASS::ginv, whose sqrt(eps)
    cut-off drops the two small singular values (1e-11 to 1e-14 of the largest) that carry z2 - z1 and z3 - z1.
    solve() itself succeeds (it gives 0.2589716 and -0.0089432): the matrix is ill-conditioned, not singular.
    """
    case = cases.make_case(case_id)
    data = case.data()
    x, y, covar = split(data)
    exact = exact_reference(data, "pearson", ref)
    ppcor = ppcor_session.call("reference_ppcor", case.r_data(), "pearson")
    assert ppcor["ginv"] == 1, "ppcor no longer takes its generalised-inverse path here"
    gengen_r = stats.partial_corr(x, y, covar).r
    lm_r = r_references[case_id]["lm_pearson"]["r"]
    assert abs(gengen_r - exact) <= EXACT_ATOL
    assert abs(lm_r - exact) <= lm_rtol(case.r_data()) * abs(exact) + R_ATOL
    assert abs(ppcor["r"] - exact) > 1e-3 * abs(exact), "ppcor would be right after all"
    record_comparison("near-collinear ppcor disagreements decided by the exact reference (gengen right)")


# --- frozen ppcor output: the R references above reproduce ppcor's numbers -----------------------------------


def test_references_reproduce_frozen_ppcor(r_session: Any, record_comparison: Any) -> None:
    """references.R on ../shared/golden/ppcor/partial_corr.csv gives ppcor's printed values (r 1e-7, p 1e-6)."""
    import json

    import pandas as pd

    golden = SHARED / "golden" / "ppcor"
    data = pd.read_csv(golden / "partial_corr.csv")
    for item in json.loads((golden / "expected.json").read_text())["cases"]:
        columns = [item["x"], item["y"], *item["z"]]
        matrix = data[columns].to_numpy()
        method = item["method"]
        reference = r_session.call("reference_lm", matrix, method)
        key = "" if item["function"] == "pcor.test" else "semi_y_"
        r = reference[f"{key}r"]
        p = reference["p_value"] if not key else reference["semi_y_p"]
        np.testing.assert_allclose(r, item["estimate"], atol=1e-7, err_msg=str(item))
        np.testing.assert_allclose(p, item["p_value"], rtol=1e-6, err_msg=str(item))
        x, y, covar = split(matrix)
        semi: Semi | None = None if not key else "y"
        result = stats.partial_corr(x, y, covar, method=method, semi=semi)
        np.testing.assert_allclose(result.r, item["estimate"], atol=1e-7, err_msg=str(item))
        np.testing.assert_allclose(result.p_value, item["p_value"], rtol=1e-6, err_msg=str(item))
        record_comparison("frozen ppcor values (golden/ppcor) vs references.R and gengen")
