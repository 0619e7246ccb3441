"""Bad input to gengen.stats: a GengenError (a ValueError) whose message names the argument at fault.

Issue 2: NaN/inf, mismatched lengths, too few observations for the degrees of freedom, a constant column,
a covariate identical to or collinear with x or y, a singular covariate matrix, an unknown method name —
never a Rust panic across the boundary (pyo3's PanicException is not a ValueError, so it fails these
tests), never a silent NaN. Singularity is judged by a condition number, not by ppcor's scale-dependent
``det(cvx) < .Machine$double.eps`` — so well-conditioned data at a tiny scale must still work.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

stats = pytest.importorskip("gengen.stats")
from gengen.errors import GengenError  # noqa: E402


def _names(*names: str) -> str:
    """A regex matching any of the argument names as a whole word."""
    return r"\b(" + "|".join(names) + r")\b"


def _data(n: int = 20, k: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    x = z @ rng.normal(size=k) + rng.standard_normal(n)
    y = 0.5 * x + rng.standard_normal(n)
    return x, y, z


def _with(array: np.ndarray, index: tuple | int, value: float) -> np.ndarray:
    out = np.array(array, dtype=float, copy=True)
    out[index] = value
    return out


def _bad_partial_corr_inputs() -> list[tuple[str, dict, str]]:
    x, y, z = _data()
    n = len(x)
    cases = [
        ("nan in x", {"x": _with(x, 3, np.nan)}, _names("x")),
        ("inf in x", {"x": _with(x, 0, np.inf)}, _names("x")),
        ("nan in y", {"y": _with(y, 5, np.nan)}, _names("y")),
        ("-inf in y", {"y": _with(y, 5, -np.inf)}, _names("y")),
        ("nan in covar", {"covar": _with(z, (2, 1), np.nan)}, _names("covar")),
        ("inf in covar", {"covar": _with(z, (2, 0), np.inf)}, _names("covar")),
        ("y shorter than x", {"y": y[:-1]}, _names("x", "y")),
        ("covar rows differ", {"covar": z[:-2]}, _names("covar")),
        (
            "too few observations (df = 0)",
            {"x": x[:4], "y": y[:4], "covar": z[:4]},
            _names("x", "y", "covar", "n"),
        ),
        (
            "too few observations, no covariates",
            {"x": x[:2], "y": y[:2], "covar": None},
            _names("x", "y", "n"),
        ),
        ("constant x", {"x": np.full(n, 3.5)}, _names("x")),
        ("constant y", {"y": np.full(n, -1.0)}, _names("y")),
        (
            "constant covariate column",
            {"covar": np.column_stack([z[:, 0], np.full(n, 2.0)])},
            _names("covar"),
        ),
        ("covariate identical to x", {"covar": np.column_stack([z[:, 0], x])}, _names("covar", "x")),
        ("covariate identical to y", {"covar": np.column_stack([y, z[:, 1]])}, _names("covar", "y")),
        (
            "covariate collinear with x",
            {"covar": np.column_stack([z[:, 0], 2.5 * x - 7])},
            _names("covar", "x"),
        ),
        (
            "x a linear combination of the covariates",
            {"x": 2 * z[:, 0] - 3 * z[:, 1] + 1},
            _names("covar", "x"),
        ),
        ("two identical covariates", {"covar": np.column_stack([z[:, 0], z[:, 0]])}, _names("covar")),
        (
            "singular covariate matrix (col3 = col1 + col2)",
            {"covar": np.column_stack([z[:, 0], z[:, 1], z[:, 0] + z[:, 1]])},
            _names("covar"),
        ),
        ("unknown method", {"method": "pearsonn"}, _names("method")),
        ("unknown semi", {"semi": "z"}, _names("semi")),
        ("ci_level above 1", {"ci_level": 1.5}, _names("ci_level")),
        ("ci_level 0", {"ci_level": 0.0}, _names("ci_level")),
        ("x two-dimensional", {"x": np.column_stack([x, x])}, _names("x")),
        ("x not numeric", {"x": np.array(["a"] * n)}, _names("x")),
    ]
    return cases


BAD_PARTIAL_CORR = _bad_partial_corr_inputs()


@pytest.mark.parametrize(("label", "change", "pattern"), BAD_PARTIAL_CORR, ids=[c[0] for c in BAD_PARTIAL_CORR])
def test_partial_corr_rejects(label: str, change: dict, pattern: str) -> None:
    x, y, z = _data()
    kwargs = {"x": x, "y": y, "covar": z, **change}
    with pytest.raises(GengenError, match=pattern) as info:
        stats.partial_corr(kwargs.pop("x"), kwargs.pop("y"), kwargs.pop("covar"), **kwargs)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value).strip(), "the message is one line"


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_rank_methods_reject_constant_and_nan(method: str) -> None:
    x, y, z = _data()
    with pytest.raises(GengenError, match=_names("x")):
        stats.partial_corr(np.ones_like(x), y, z, method=method)
    with pytest.raises(GengenError, match=_names("y")):
        stats.partial_corr(x, _with(y, 1, np.nan), z, method=method)


def test_tiny_scale_is_not_singular(ref) -> None:
    """ppcor would call this singular (det(cov) ~ 1e-60 < eps) and use ginv; it is perfectly conditioned."""
    x, y, z = _data(n=40, k=3, seed=4)
    scale = 1e-6
    res = stats.partial_corr(x * scale, y * scale, z * scale)
    assert_allclose(res.r, ref.exact_partial_corr(x * scale, y * scale, z * scale), rtol=1e-10)


# --------------------------------------------------------------------------------------------------
# The other entry points
# --------------------------------------------------------------------------------------------------


def _scores(n: int = 20, m: int = 3, k: int = 1, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    return rng.standard_normal((n, m)) + z @ rng.normal(size=(k, m)), z


def test_pcor_spcor_reject() -> None:
    scores, _ = _scores(m=4)
    for function in (stats.pcor, stats.spcor):
        with pytest.raises(GengenError, match=_names("data")):
            function(_with(scores, (0, 1), np.nan))
        with pytest.raises(GengenError, match=_names("data")):
            function(scores[:, :1])  # one column: nothing to correlate
        with pytest.raises(GengenError, match=_names("data", "n")):
            function(scores[:4])  # n = 4, m = 4: df = n - 2 - (m - 2) = 0
        with pytest.raises(GengenError, match=_names("data")):
            function(np.column_stack([scores, scores[:, 0] - scores[:, 1]]))  # singular
        with pytest.raises(GengenError, match=_names("method")):
            function(scores, method="kendal")


def test_residualise_rejects() -> None:
    scores, z = _scores()
    with pytest.raises(GengenError, match=_names("y")):
        stats.residualise(_with(scores, (0, 0), np.nan), z)
    with pytest.raises(GengenError, match=_names("covar")):
        stats.residualise(scores, np.column_stack([z, z]))
    with pytest.raises(GengenError, match=_names("covar", "y")):
        stats.residualise(scores, z[:-1])
    with pytest.raises(GengenError, match=_names("fit")):
        stats.residualise(scores, z, fit="cubic")


def test_partial_corr_matrix_rejects() -> None:
    scores, z = _scores()
    with pytest.raises(GengenError, match=_names("scores")):
        stats.partial_corr_matrix(_with(scores, (3, 2), np.inf), z)
    with pytest.raises(GengenError, match=_names("scores")):
        stats.partial_corr_matrix(np.column_stack([scores, np.zeros(len(scores))]), z)
    with pytest.raises(GengenError, match=_names("covar")):
        stats.partial_corr_matrix(scores, z[:-3])
    with pytest.raises(GengenError, match=_names("covar")):
        stats.partial_corr_matrix(scores, np.column_stack([z, 3 * z]))
    with pytest.raises(GengenError, match=_names("method")):
        stats.partial_corr_matrix(scores, z, method="pearsn")
    with pytest.raises(GengenError, match=_names("fit")):
        stats.partial_corr_matrix(scores, z, fit="spline")


def test_batch_rejects_mismatched_lists() -> None:
    scores, z = _scores()
    with pytest.raises(GengenError, match=_names("list_of_covar", "list_of_scores", "covar", "scores")):
        stats.partial_corr_matrix_batch([scores, scores], [z])


def test_permutation_test_rejects() -> None:
    scores, z = _scores()
    n = len(scores)
    bad = [
        ({"n_perm": 0}, "n_perm"),
        ({"scheme": "shuffle"}, "scheme"),
        ({"scheme": "block", "block_length": 0}, "block_length"),
        ({"scheme": "block", "block_length": n + 1}, "block_length"),
        ({"scheme": "block", "block_length": -2}, "block_length"),
        ({"method": "kendal"}, "method"),
        ({"method": "kendall"}, "method"),  # Freedman–Lane needs residuals: Pearson or Spearman only
        ({"fit": "quadratic"}, "fit"),
    ]
    for change, name in bad:
        with pytest.raises(GengenError, match=_names(name)):
            stats.permutation_test(scores, z, **{"n_perm": 9, **change})
    with pytest.raises(GengenError, match=_names("scores")):
        stats.permutation_test(_with(scores, (0, 0), np.nan), z, n_perm=9)
    for columns in (1, 0):  # no pair to test, as partial_corr_matrix and bootstrap_ci already refuse
        with pytest.raises(GengenError, match=_names("scores")):
            stats.permutation_test(scores[:, :columns], z, n_perm=9)
    with pytest.raises(GengenError, match=_names("covar")):
        stats.permutation_test(scores, np.column_stack([z, z]), n_perm=9)


def test_bootstrap_ci_rejects() -> None:
    scores, z = _scores()
    n = len(scores)
    bad = [
        ({"n_boot": 0}, "n_boot"),
        ({"scheme": "wild"}, "scheme"),
        ({"scheme": "block", "block_length": 0}, "block_length"),
        ({"scheme": "circular", "block_length": n + 1}, "block_length"),
        ({"ci_level": 1.0}, "ci_level"),
        ({"ci_level": -0.1}, "ci_level"),
        ({"ci_method": "basic"}, "ci_method"),
        ({"method": "pearsonr"}, "method"),
        ({"method": "kendall"}, "method"),
    ]
    for change, name in bad:
        with pytest.raises(GengenError, match=_names(name)):
            stats.bootstrap_ci(scores, z, **{"n_boot": 9, **change})
    with pytest.raises(GengenError, match=_names("scores")):
        stats.bootstrap_ci(_with(scores, (1, 1), -np.inf), z, n_boot=9)


def test_index_generators_reject() -> None:
    for function, count in ((stats.permutation_indices, "n_perm"), (stats.bootstrap_indices, "n_boot")):
        scheme = "free" if function is stats.permutation_indices else "iid"
        with pytest.raises(GengenError, match=_names("n")):
            function(0, 5, scheme=scheme)
        with pytest.raises(GengenError, match=_names(count)):
            function(10, -1, scheme=scheme)  # 0 is allowed here: an empty (0, n) array
        with pytest.raises(GengenError, match=_names("scheme")):
            function(10, 5, scheme="random")
        with pytest.raises(GengenError, match=_names("block_length")):
            function(10, 5, scheme="block", block_length=11)


@pytest.mark.parametrize("method", ["holm-sidak", "fdr_bh", "sidak", ""])
def test_p_adjust_rejects_unknown_method(method: str) -> None:
    with pytest.raises(GengenError, match=_names("method")):
        stats.p_adjust(np.array([0.1, 0.2]), method=method)


@pytest.mark.parametrize("gap", [1e-3, 1e-5])
def test_nearly_collinear_covariates_still_work(gap: float, ref) -> None:
    """Covariates with correlation 1 - O(gap^2) (condition number ~ 1/gap) are not singular: gengen must give
    the exact answer to a tolerance that grows with the conditioning, not refuse."""
    rng = np.random.default_rng(12)
    n = 60
    z1 = rng.standard_normal(n)
    covar = np.column_stack([z1, z1 + gap * rng.standard_normal(n)])
    x = covar @ [1.0, -0.5] + rng.standard_normal(n)
    y = 0.3 * x + covar @ [0.2, 0.4] + rng.standard_normal(n)
    for semi in (None, "x", "y"):
        res = stats.partial_corr(x, y, covar, semi=semi)
        assert_allclose(res.r, ref.exact_partial_corr(x, y, covar, semi), rtol=1e-16 / gap * 100)


def test_x_nearly_in_the_covariate_span_still_works(ref) -> None:
    """x = covariates + tiny noise (1e-6 of their spread): a valid, if extreme, partial correlation."""
    rng = np.random.default_rng(13)
    n = 50
    covar = rng.standard_normal((n, 2))
    x = covar @ [2.0, -1.0] + 1e-6 * rng.standard_normal(n)
    y = rng.standard_normal(n) + covar[:, 0]
    res = stats.partial_corr(x, y, covar)
    assert_allclose(res.r, ref.exact_partial_corr(x, y, covar), rtol=1e-6)


@pytest.mark.parametrize("bad", [1.5, -0.1, np.inf])
def test_p_adjust_rejects_values_outside_the_unit_interval(bad: float) -> None:
    """Not an error in R's p.adjust, which would return min(1, ...) of the nonsense; gengen refuses it."""
    with pytest.raises(GengenError, match=_names("p")):
        stats.p_adjust(np.array([0.1, bad, 0.3]))
