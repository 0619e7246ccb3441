"""Typed controls (``gengen.stats.Linear``, ``gengen.stats.Gam``): checked once, the same numbers as the strings.

References: numpy least squares for the linear control; mgcv (through rpy2) for the GAM control — the residuals
at mgcv's own smoothing parameter, and the partial correlation of mgcv's residuals at its optimum.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import gengen
from gengen import _core, stats
from gengen.errors import InvalidArgumentError
from gengen.stats import Gam, Linear
from gengen.stats.controls import as_control

N = 40


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(27)
    z = np.sort(rng.uniform(0, 1, N))
    scores = np.column_stack([np.sin(3 * z) + rng.normal(0, 0.15, N) for _ in range(3)])
    scores[:, 1] += 0.5 * scores[:, 0]
    return scores, z


# ----------------------------------------------------------------------------------------------------------
# The values
# ----------------------------------------------------------------------------------------------------------


def test_defaults_come_from_the_options_module() -> None:
    from gengen.stats import options

    gam = Gam()
    assert (gam.k, gam.method, gam.basis, gam.max_edf) == (
        options.DEFAULT_GAM_K,
        options.DEFAULT_GAM_METHOD,
        options.DEFAULT_GAM_BASIS,
        options.DEFAULT_GAM_MAX_EDF,
    )
    assert Linear().name == "linear" and gam.name == "gam"
    assert gengen.stats.Gam is Gam and gengen.Gam is Gam and gengen.Linear is Linear


def test_values_are_frozen_hashable_and_picklable() -> None:
    gam = Gam(k=6, method="reml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        gam.k = 7  # type: ignore[misc]
    assert gam == Gam(k=6, method="reml") and hash(gam) == hash(Gam(k=6, method="reml"))
    assert pickle.loads(pickle.dumps(gam)) == gam and pickle.loads(pickle.dumps(Linear())) == Linear()
    assert Gam(max_edf=5).max_edf == 5.0 and Gam(k=np.int64(7)).k == 7  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "option"),
    [
        ({"k": 2}, "k"),
        ({"k": 4.5}, "k"),
        ({"k": True}, "k"),
        ({"method": "GCV"}, "method"),
        ({"basis": "ps"}, "basis"),
        ({"max_edf": "none"}, "max_edf"),
        ({"max_edf": float("nan")}, "max_edf"),
    ],
)
def test_a_bad_field_is_refused_on_construction_naming_it(fields: dict[str, Any], option: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        Gam(**fields)
    assert caught.value.option == option
    assert str(caught.value).startswith(f"{option} ") and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("fit", "options", "option"),
    [
        ("gam", {"k": 2}, "k"),
        ("gam", {"gam_method": "x"}, "gam_method"),
        ("gam", {"gam_basis": "x"}, "gam_basis"),
        ("gam", {"gam_mehtod": "reml"}, "gam_mehtod"),
        ("linear", {"k": 5}, "k"),
        ("lin", {}, "fit"),
        (Gam(), {"k": 5}, "k"),
        (3, {}, "fit"),
    ],
)
def test_as_control_names_the_keyword_at_fault(fit: Any, options: dict[str, Any], option: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        as_control(fit, options)
    assert caught.value.option == option


def test_as_control_turns_names_and_options_into_values() -> None:
    assert as_control("linear") == Linear()
    assert as_control("gam") == Gam()
    assert as_control("gam", {"k": 6, "gam_method": "reml", "gam_basis": "tp", "max_edf": None}) == Gam(
        k=6, method="reml", basis="tp", max_edf=None
    )
    gam = Gam(k=8)
    assert as_control(gam) is gam
    assert as_control("gam", gam.keywords()) == gam


def test_the_binding_takes_one_control_value(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, z = data
    covar = z[:, None]
    typed = _core.partial_corr_matrix_batch([scores], [covar], "pearson", Gam(k=6))[0]
    default = _core.partial_corr_matrix_batch([scores], [covar], "pearson")[0]
    linear = _core.partial_corr_matrix_batch([scores], [covar], "pearson", Linear())[0]
    assert_array_equal(default.r, linear.r)
    assert not np.allclose(typed.r, linear.r)
    with pytest.raises(InvalidArgumentError, match=r"^fit"):
        _core.partial_corr_matrix_batch([scores], [covar], "pearson", "gam")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"^control"):
        _core.gam_fit(scores, covar, Linear())  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------------
# Typed and string forms give the same numbers
# ----------------------------------------------------------------------------------------------------------

GAM = Gam(k=7, method="reml", basis="cr", max_edf=9.0)
GAM_KEYWORDS = {"fit": "gam", "k": 7, "gam_method": "reml", "gam_basis": "cr", "max_edf": 9.0}


def _same(a: Any, b: Any) -> None:
    for name in ("r", "statistic", "p_value", "df", "ci_low", "ci_high", "se_z", "p_fwer", "r_innovation"):
        if hasattr(a, name) and getattr(a, name) is not None:
            assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)


@pytest.mark.filterwarnings("ignore:.*GAM options as keywords:FutureWarning")  # the deprecation: test_gam_keywords.py
@pytest.mark.parametrize(("typed", "named"), [(Linear(), {"fit": "linear"}), (GAM, GAM_KEYWORDS)])
def test_every_statistic_gives_identical_numbers_for_both_forms(
    data: tuple[np.ndarray, np.ndarray], typed: Any, named: dict[str, Any]
) -> None:
    scores, z = data
    x, y = scores[:, 0], scores[:, 1]
    assert stats.partial_corr(x, y, z, fit=typed) == stats.partial_corr(x, y, z, **named)
    _same(stats.partial_corr_matrix(scores, z, fit=typed), stats.partial_corr_matrix(scores, z, **named))
    _same(
        stats.permutation_test(scores, z, fit=typed, n_perm=99, seed=3, family_wise=True),
        stats.permutation_test(scores, z, n_perm=99, seed=3, family_wise=True, **named),
    )
    _same(
        stats.bootstrap_ci(scores, z, fit=typed, n_boot=50, seed=3),
        stats.bootstrap_ci(scores, z, n_boot=50, seed=3, **named),
    )
    _same(
        stats.sieve_partial_corr_matrix(scores, z, fit=typed, n_boot=40, seed=3),
        stats.sieve_partial_corr_matrix(scores, z, n_boot=40, seed=3, **named),
    )
    assert_array_equal(stats.residualise(scores, z, fit=typed), stats.residualise(scores, z, **named))
    assert_array_equal(
        stats.leave_one_out_partial_corr(scores, z, fit=typed), stats.leave_one_out_partial_corr(scores, z, **named)
    )
    lagged_named = dict(named)
    if "k" in lagged_named:
        # The lagged test takes only k by keyword; with the other options at their defaults the forms agree.
        lagged_named = {"fit": "gam", "k": 7}
        typed = Gam(k=7)
    _same(
        stats.lagged_partial_corr_matrix(scores, z, fit=typed),
        stats.lagged_partial_corr_matrix(scores, z, **lagged_named),
    )
    assert stats.partial_corr_matrix(scores, z, fit=typed).fit == named["fit"]


def test_the_lagged_test_follows_the_callers_gam_options(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, z = data
    by_name = stats.lagged_partial_corr_matrix(scores, z, fit="gam")  # k = 5, the lagged test's own default
    assert_array_equal(by_name.p_value, stats.lagged_partial_corr_matrix(scores, z, fit=Gam(k=5)).p_value)
    for other in (Gam(k=8), Gam(k=5, method="reml"), Gam(k=5, max_edf=5.0), Gam(k=5, basis="tp")):
        moved = stats.lagged_partial_corr_matrix(scores, z, fit=other)
        assert not np.allclose(moved.control_df, by_name.control_df), other
    with pytest.raises(InvalidArgumentError) as caught:
        stats.lagged_partial_corr_matrix(scores, z, fit=Gam(), k=5)
    assert caught.value.option == "k"


# ----------------------------------------------------------------------------------------------------------
# Independent references
# ----------------------------------------------------------------------------------------------------------


def test_linear_matches_numpy_least_squares(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, z = data
    design = np.column_stack([np.ones(N), z, z**2])
    beta, *_ = np.linalg.lstsq(design, scores, rcond=None)
    residuals = scores - design @ beta
    unit = residuals / np.linalg.norm(residuals, axis=0)
    reference = unit.T @ unit
    covar = np.column_stack([z, z**2])
    result = stats.partial_corr_matrix(scores, covar, fit=Linear())
    assert_allclose(result.r, reference, atol=1e-12)
    assert_allclose(stats.residualise(scores, covar, fit=Linear()), residuals, atol=1e-12)
    r = reference[0, 1]
    t = r * np.sqrt((N - 2 - 2) / (1 - r**2))
    assert_allclose(stats.partial_corr(scores[:, 0], scores[:, 1], covar, fit=Linear()).statistic, t, rtol=1e-10)


MGCV = """
function(z, y, k, method, bs, sp) {
  control <- mgcv::gam.control(mgcv.tol = 1e-10, newton = list(conv.tol = 1e-10))
  data <- data.frame(z = z, y = y)
  formula <- y ~ s(z, k = k, bs = bs)
  b <- if (length(sp)) mgcv::gam(formula, data = data, sp = sp, control = control)
       else mgcv::gam(formula, data = data, method = method, control = control)
  list(residuals = as.numeric(residuals(b)), sp = as.numeric(b$sp), score = b$gcv.ubre)
}
"""


@pytest.fixture(scope="module")
def mgcv() -> Any:
    try:
        import rpy2.robjects as ro
        from rpy2.robjects import numpy2ri

        converter = ro.default_converter + numpy2ri.converter
        function = ro.r(MGCV)
    except Exception as error:  # rpy2 raises several kinds when R or mgcv cannot be loaded
        if os.environ.get("GENGEN_REQUIRE_R") == "1":
            pytest.fail(f"GENGEN_REQUIRE_R=1 but mgcv is not usable ({error})", pytrace=False)
        pytest.skip(f"mgcv through rpy2 is not usable ({type(error).__name__}: {error})")

    def fit(z: np.ndarray, y: np.ndarray, k: int, method: str, bs: str, sp: np.ndarray | None = None) -> Any:
        with converter.context():
            out = function(z, y, k, {"gcv": "GCV.Cp", "reml": "REML"}[method], bs, np.array([]) if sp is None else sp)
            return {name: np.asarray(out[name], dtype=float).ravel() for name in ("residuals", "sp", "score")}

    return fit


@pytest.mark.r
@pytest.mark.parametrize("control", [Gam(k=8), Gam(k=6, method="reml"), Gam(k=8, basis="tp")])
def test_gam_matches_mgcv(mgcv: Any, data: tuple[np.ndarray, np.ndarray], control: Gam) -> None:
    scores, z = data
    uncapped = dataclasses.replace(control, max_edf=None)
    references = [mgcv(z, scores[:, j], control.k, control.method, control.basis) for j in range(2)]
    # At mgcv's smoothing parameter the residuals are mgcv's (the λ scale of a thin plate basis depends on its
    # internal parameterisation, so that basis is compared at the optimum only, as in tests/test_gam.py).
    for j, reference in enumerate(references):
        if control.basis == "cr":
            at = stats.residualise(scores[:, j], z, fit=uncapped, lam=reference["sp"])
            assert_allclose(at, reference["residuals"], atol=1e-6 * np.std(scores[:, j]))
    # At the optimum (where both searches find the same one) the partial correlation is that of mgcv's residuals.
    ours = stats.gam_fit(
        scores[:, :2], z, k=control.k, gam_method=control.method, gam_basis=control.basis, max_edf=None
    )
    for j, reference in enumerate(references):
        assert_allclose(ours.score[j], reference["score"][0], rtol=1e-6)
    e = [reference["residuals"] for reference in references]
    expected = np.corrcoef(e[0], e[1])[0, 1]
    result = stats.partial_corr(scores[:, 0], scores[:, 1], z, fit=uncapped)
    assert_allclose(result.r, expected, atol=1e-5)
    assert_allclose(result.r, stats.partial_corr_matrix(scores, z, fit=uncapped).r[0, 1], atol=1e-12)


def test_analyse_hands_its_gam_options_to_the_lagged_test() -> None:
    """The analysis' GAM settings (not a fixed k = 5) reach the lagged test."""
    import pandas as pd

    rng = np.random.default_rng(5)
    steps = np.arange(40) * 100
    id_acc = 0.5 + 0.35 * (1 - np.exp(-steps / 800))
    rows = [("m", "r", int(s), "id", "acc", float(v)) for s, v in zip(steps, id_acc, strict=True)]
    for j in range(3):
        values = 0.3 + 0.4 * np.sqrt(id_acc - 0.49) + np.cumsum(rng.normal(0, 0.01, 40))
        rows += [("m", "r", int(s), f"t{j}", "acc", float(v)) for s, v in zip(steps, values, strict=True)]
    table = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])
    pairs = gengen.analyse(
        table, id_testset="id", fit="gam", gam_k=8, gam_method="reml", inference="lagged", pooling=None
    ).pairs
    wide = table.pivot(index="step", columns="testset", values="value")
    reference = stats.lagged_partial_corr_matrix(wide[["t0", "t1", "t2"]], wide[["id"]], fit=Gam(k=8, method="reml"))
    upper = np.triu_indices(3, 1)
    assert_allclose(pairs["p_lagged"], np.asarray(reference.p_value)[upper], rtol=1e-10)
    fixed = stats.lagged_partial_corr_matrix(wide[["t0", "t1", "t2"]], wide[["id"]], fit="gam")
    assert not np.allclose(pairs["p_lagged"], np.asarray(fixed.p_value)[upper])
