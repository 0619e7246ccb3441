"""The Rust boundary (issue 37, item 4): string options convert once into the core's enums, and an error raised
in Rust crosses with its fields.

Each string option of ``gengen._core`` takes exactly the names of its ``Literal`` in
:mod:`gengen.stats.options` (the Python side's independent list): every one is accepted, and an unknown name
raises :class:`~gengen.errors.InvalidArgumentError` whose ``option`` is the argument and whose message lists
those names. An error raised in Rust (an unknown name, bad data, a run of a batch) arrives with ``option``,
``problem`` and ``run``, and its message is the core's ``"<option>: <problem>"``, as before. That no Rust
function body parses a string option is checked on the sources by ``cargo test`` (rust/src/string_options.rs).
"""

from __future__ import annotations

import inspect
import pickle
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from gengen import _core
from gengen.errors import DegenerateDataError, GengenError, InvalidArgumentError
from gengen.stats import options

RNG = np.random.default_rng(37)
X = RNG.normal(size=(20, 3))
Z = RNG.normal(size=(20, 1))
EMPTY = np.ones((20, 0))


def _gam(**fields: Any) -> Any:
    """An object read as a Gam control (by its attributes), with fields Gam itself would refuse to hold."""
    return SimpleNamespace(**{"name": "gam", "k": 5, "method": "gcv", "basis": "cr", "max_edf": "auto", **fields})


#: option -> (its names, a call of the core with the option set to `name`), one call per function that takes it.
OPTION_CALLS: dict[str, tuple[tuple[str, ...], list[Callable[[Any], object]]]] = {
    "method": (
        options.METHODS,
        [
            lambda name: _core.partial_corr(X[:, 0], X[:, 1], Z, name),
            lambda name: _core.ppcor_matrices(X, name, False),
            lambda name: _core.partial_corr_matrix_batch([X], [Z], name),
        ],
    ),
    "semi": (options.SEMIS, [lambda name: _core.partial_corr(X[:, 0], X[:, 1], Z, "pearson", semi=name)]),
    "scheme": (
        options.PERMUTATION_SCHEMES,
        [
            lambda name: _core.permutation_test_batch([X], [Z], "pearson", 19, name),
            lambda name: _core.permutation_indices(20, 3, name),
        ],
    ),
    "ci_method": (
        options.INTERVAL_METHODS,
        [lambda name: _core.bootstrap_ci_batch([X], [Z], "pearson", 19, "iid", ci_method=name)],
    ),
    "gam_method": (options.GAM_METHODS, [lambda name: _core.gam_fit(X, Z, _gam(method=name))]),
    "gam_basis": (options.GAM_BASES, [lambda name: _core.gam_fit(X, Z, _gam(basis=name))]),
    "fit": (options.FITS, [lambda name: _core.partial_corr_matrix_batch([X], [Z], "pearson", _gam(name=name))]),
    "noise": (("ar1", "rw"), [lambda name: _core.simulate_run(12, 2, name, 0.5, "linear", 0.0, 0.02, 0.01, 0, 0)]),
    "shape": (
        ("linear", "saturating", "nonmonotone"),
        [lambda name: _core.simulate_run(12, 2, "ar1", 0.5, name, 0.0, 0.02, 0.01, 0, 0)],
    ),
}
#: The adjustment's argument is `method` too: its own list.
ADJUST_CALL = lambda name: _core.p_adjust(np.array([0.01, 0.2, 0.5]), name)  # noqa: E731
#: The bootstrap's schemes differ from the permutations'.
BOOTSTRAP_CALLS = [
    lambda name: _core.bootstrap_ci_batch([X], [Z], "pearson", 19, name),
    lambda name: _core.bootstrap_indices(20, 3, name),
]

#: The autocorrelation-aware tests know every method's name but compute only those with a residual form.
RESIDUAL_CALLS = [
    lambda name: _core.lagged_partial_corr(X, Z, name),
    lambda name: _core.prewhitened_partial_corr(X, Z, name),
]

CASES = [
    *((option, names, names, call) for option, (names, calls) in OPTION_CALLS.items() for call in calls),
    *(("method", options.METHODS, options.RESIDUAL_METHODS, call) for call in RESIDUAL_CALLS),
    ("method", options.ADJUSTMENTS, options.ADJUSTMENTS, ADJUST_CALL),
    *(("scheme", options.BOOTSTRAP_SCHEMES, options.BOOTSTRAP_SCHEMES, call) for call in BOOTSTRAP_CALLS),
]
IDS = [f"{option}-{index}" for index, (option, _, _, _) in enumerate(CASES)]


@pytest.mark.parametrize(("option", "names", "computed", "call"), CASES, ids=IDS)
def test_each_option_takes_its_python_names_and_refuses_others_naming_itself(
    option: str, names: tuple[str, ...], computed: tuple[str, ...], call: Callable[[Any], object]
) -> None:
    for name in computed:
        call(name)  # every name of the Python side's list is one of the core's
    with pytest.raises(InvalidArgumentError) as caught:
        call("no-such-name")
    error = caught.value
    problem = error.problem or ""
    assert error.option == option and error.run is None
    assert str(error) == f"{option}: {problem}" and "\n" not in str(error)
    listed = re.findall(r'"([^"]+)"', problem.split("expected", 1)[1])
    assert listed == list(names), problem  # the names a user may give, all of them, in the table's order
    assert problem.startswith("unknown ") and '"no-such-name"' in problem


def test_semi_lists_none_among_its_values() -> None:
    with pytest.raises(InvalidArgumentError, match=r'^semi: unknown value "z"; expected None, "x" or "y"$'):
        _core.partial_corr(X[:, 0], X[:, 1], Z, "pearson", semi="z")


def test_aliases_give_the_same_numbers_as_their_names() -> None:
    def boot(ci_method: str) -> np.ndarray:
        return np.asarray(_core.bootstrap_ci_batch([X], [Z], "pearson", 99, "iid", ci_method=ci_method)[0].ci_low)

    assert_array_equal(boot("BCa"), boot("bca"))
    default = _core.bootstrap_ci_batch([X], [Z], "pearson", 99, "iid")[0]
    assert_array_equal(np.asarray(default.ci_low), boot("percentile"))
    assert not np.array_equal(boot("bca"), boot("percentile"))
    moving, block = (_core.bootstrap_indices(20, 4, scheme, seed=3) for scheme in ("moving", "block"))
    assert_array_equal(moving, block)
    p = np.array([0.01, 0.02, 0.3])
    assert_array_equal(_core.p_adjust(p, "fdr"), _core.p_adjust(p, "BH"))
    # The signature a user reads is unchanged: the interval's default is its name.
    assert inspect.signature(_core.bootstrap_ci_batch).parameters["ci_method"].default == "percentile"


def test_a_name_of_another_type_is_a_type_error_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=r"argument 'method'"):
        _core.partial_corr(X[:, 0], X[:, 1], Z, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument 'scheme'"):
        _core.permutation_indices(20, 3, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("max_edf", "problem"),
    [(name, f'must be a number, "auto" or None, got "{name}"') for name in ("none", "Auto")],
)
def test_a_cap_named_wrongly_names_max_edf(max_edf: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        _core.gam_fit(X, Z, _gam(max_edf=max_edf))
    assert (caught.value.option, caught.value.problem) == ("max_edf", problem)


def test_a_cap_given_as_a_number_none_or_auto_is_taken() -> None:
    auto = _core.gam_fit(X, Z, _gam(max_edf="auto"))
    assert auto.max_edf == _core.default_max_edf(20, 1)
    assert _core.gam_fit(X, Z, _gam(max_edf=None)).max_edf == np.inf
    assert _core.gam_fit(X, Z, _gam(max_edf=float("inf"))).max_edf == np.inf
    assert _core.gam_fit(X, Z, _gam(max_edf=4)).max_edf == 4.0


# ------------------------------------------------------------------------------------------ errors with fields

DATA_ERRORS = [
    (
        "constant x",
        lambda: _core.partial_corr(np.ones(20), X[:, 1], Z, "pearson"),
        DegenerateDataError,
        "x",
        "is constant",
    ),
    ("nan in covar", lambda: _core.residualise(X, np.full((20, 1), np.nan)), InvalidArgumentError, "covar", None),
    (
        "block as long as the series",
        lambda: _core.permutation_test_batch([X], [Z], "pearson", 9, "block", 20),
        InvalidArgumentError,
        "block_length",
        "20 makes one block of all 20 checkpoints",
    ),
    (
        "too many permutations",
        lambda: _core.permutation_indices(10, 2**40, "free"),
        InvalidArgumentError,
        "n_perm",
        None,
    ),
    ("ci_level", lambda: _core.bootstrap_ci_batch([X], [Z], "pearson", 9, "iid", ci_level=1.5), None, "ci_level", None),
    ("phi", lambda: _core.simulate_run(12, 2, "ar1", 1.0, "linear", 0.0, 0.02, 0.01, 0, 0), None, "phi", None),
    ("sieve shapes", lambda: _core.t_two_sided_array(np.ones(3), np.ones(2)), None, "t, df", "lengths differ"),
    ("a control that is not one", lambda: _core.gam_fit(X, Z, _gam(name="linear")), None, "control", None),
]


@pytest.mark.parametrize(
    ("label", "call", "kind", "option", "problem"), DATA_ERRORS, ids=[case[0] for case in DATA_ERRORS]
)
def test_an_error_raised_in_rust_names_its_option(
    label: str, call: Callable[[], object], kind: type[GengenError] | None, option: str, problem: str | None
) -> None:
    with pytest.raises(GengenError) as caught:
        call()
    error = caught.value
    assert isinstance(error, kind or InvalidArgumentError)
    assert error.option == option, str(error)
    assert error.problem and (problem is None or error.problem.startswith(problem)), error.problem
    assert str(error) == f"{option}: {error.problem}"  # the core's message, unchanged


def test_an_error_in_one_run_of_a_batch_names_the_run() -> None:
    constant = X.copy()
    constant[:, 1] = 2.0
    with pytest.raises(DegenerateDataError) as caught:
        _core.partial_corr_matrix_batch([X, constant], [Z, Z], "pearson")
    error = caught.value
    assert (error.run, error.option) == (1, "scores column 1")
    assert str(error) == f"run 1: scores column 1: {error.problem}"
    with pytest.raises(InvalidArgumentError) as alone:  # a batch of one run names no run, as before
        _core.permutation_test_batch([X[:4]], [EMPTY[:4]], "pearson", 9, "block", 4)
    assert alone.value.run is None and str(alone.value).startswith("block_length: ")


def test_the_fields_survive_pickling_and_a_front_end_names_the_option_its_way() -> None:
    with pytest.raises(DegenerateDataError) as caught:
        _core.partial_corr_matrix_batch([X, np.column_stack([X[:, :2], np.ones(20)])], [Z, Z], "pearson")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is DegenerateDataError
    fields = ("option", "problem", "run", "separator")
    assert [getattr(copy, f) for f in fields] == [getattr(caught.value, f) for f in fields]
    assert str(copy) == str(caught.value)
    with pytest.raises(InvalidArgumentError) as refused:
        _core.permutation_test_batch([X], [Z], "pearson", 9, "block", 20)
    flag = refused.value.render(lambda name: "--" + name.replace("_", "-"))
    assert flag == f"--block-length: {refused.value.problem}"
