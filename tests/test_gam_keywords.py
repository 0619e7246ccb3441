"""The GAM's options as keywords of gengen.stats are deprecated (issue 37, item 3): the controls travel alone.

Every public statistic that takes ``**gam_options`` still gives the control form's numbers bit for bit, with one
``FutureWarning`` that names the statistic and the control value to pass instead and points at the caller's line;
the control form, and the names ``"linear"``/``"gam"`` alone, warn of nothing; a bad keyword is refused as before,
before any warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from gengen import stats
from gengen.errors import InvalidArgumentError

KEYWORDS = {"k": 7, "gam_method": "reml", "gam_basis": "cr", "max_edf": 9.0}
CONTROL = stats.Gam(k=7, method="reml", basis="cr", max_edf=9.0)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    z = np.sort(rng.uniform(0, 1, 40))
    scores = np.column_stack([np.sin(3 * z), z**2, np.cos(2 * z)]) + rng.normal(0, 0.1, (40, 3))
    return scores, z


def _calls(scores: np.ndarray, z: np.ndarray) -> dict[str, Callable[..., Any]]:
    """Each deprecated statistic, called on the data with its control given by ``**control``."""
    return {
        "partial_corr": lambda **c: stats.partial_corr(scores[:, 0], scores[:, 1], z, **c),
        "partial_corr_matrix": lambda **c: stats.partial_corr_matrix(scores, z, **c),
        "partial_corr_matrix_batch": lambda **c: stats.partial_corr_matrix_batch([scores], [z[:, None]], **c)[0],
        "residualise": lambda **c: stats.residualise(scores, z, **c),
        "permutation_test": lambda **c: stats.permutation_test(scores, z, n_perm=49, seed=1, **c),
        "permutation_test_batch": lambda **c: stats.permutation_test_batch([scores], [z], n_perm=49, seed=1, **c)[0],
        "bootstrap_ci": lambda **c: stats.bootstrap_ci(scores, z, n_boot=30, seed=1, **c),
        "bootstrap_ci_batch": lambda **c: stats.bootstrap_ci_batch([scores], [z], n_boot=30, seed=1, **c)[0],
        "sieve_partial_corr_matrix": lambda **c: stats.sieve_partial_corr_matrix(scores, z, n_boot=30, seed=1, **c),
        "leave_one_out_partial_corr": lambda **c: stats.leave_one_out_partial_corr(scores, z, **c),
    }


NAMES = list(_calls(np.zeros((3, 3)), np.zeros(3)))


def _numbers(result: Any) -> list[np.ndarray]:
    if isinstance(result, np.ndarray):
        return [result]
    names = ("r", "statistic", "p_value", "df", "ci_low", "ci_high", "se_z", "estimate")
    return [np.asarray(getattr(result, name), dtype=float) for name in names if hasattr(result, name)]


@pytest.mark.parametrize("name", NAMES)
def test_keywords_warn_once_naming_the_control_and_give_its_numbers(
    data: tuple[np.ndarray, np.ndarray], name: str
) -> None:
    call = _calls(*data)[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        typed = call(fit=CONTROL)
    assert not [w for w in caught if issubclass(w.category, FutureWarning)]
    with pytest.warns(FutureWarning) as record:
        named = call(fit="gam", **KEYWORDS)
    future = [w for w in record if issubclass(w.category, FutureWarning)]
    assert len(future) == 1
    message = str(future[0].message)
    assert message.startswith(f"gengen.stats.{name}: GAM options as keywords (k=7, gam_method='reml', ")
    assert message.endswith("pass fit=Gam(k=7, method='reml', basis='cr', max_edf=9.0) instead")
    assert future[0].filename == __file__  # points at the caller's line, not inside gengen.stats
    numbers = _numbers(typed)
    assert numbers, name
    for ours, theirs in zip(numbers, _numbers(named), strict=True):
        assert_array_equal(ours, theirs)


@pytest.mark.parametrize("fit", ["gam", "linear", stats.Linear(), stats.Gam(k=5)])
def test_a_name_or_a_control_alone_warns_of_nothing(data: tuple[np.ndarray, np.ndarray], fit: Any) -> None:
    scores, z = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        stats.partial_corr_matrix(scores, z, fit=fit)
        stats.residualise(scores, z, fit=fit)


def test_a_bad_keyword_is_refused_before_any_warning(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, z = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with pytest.raises(InvalidArgumentError) as caught:
            stats.partial_corr_matrix(scores, z, fit="gam", gam_mehtod="reml")
    assert caught.value.option == "gam_mehtod"


def test_residualise_takes_fixed_smoothing_parameters_as_its_own_keyword(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, z = data
    fit = stats.gam_fit(scores, z, k=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        at = stats.residualise(scores[:, 0], z, fit=stats.Gam(k=7), lam=fit.lam[0])
    assert_array_equal(at, stats.gam_fit(scores[:, 0], z, k=7, lam=fit.lam[0]).residuals)
    with pytest.raises(InvalidArgumentError, match=r"^lam"):
        stats.residualise(scores[:, 0], z, lam=fit.lam[0])
