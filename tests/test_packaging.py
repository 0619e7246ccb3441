"""Packaging habits that CI enforces: one version everywhere, numpydoc docstrings on the public API."""

from __future__ import annotations

import inspect
import sys
from importlib import metadata
from pathlib import Path

import pytest
from numpydoc.validate import validate

import gengen
from gengen import _core, stats

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_cargo_tomls_everywhere() -> None:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))["package"]["version"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # pyproject.toml names no version of its own: maturin takes Cargo.toml's.
    assert "version" not in project
    assert "version" in project["dynamic"]
    assert metadata.version("gengen") == cargo
    assert _core.__version__ == cargo
    assert gengen.__version__ == cargo


# numpydoc checks left out: extended summary (ES01), See Also (SA01) and Examples (EX01) are not required of
# every function (the examples that exist run as doctests in CI); SS05 (summary starts with an infinitive)
# misreads the house style's noun-phrase summaries ("Residuals of ...") as third-person verbs.
IGNORED_CHECKS = {"ES01", "SA01", "EX01", "SS05"}
# Result classes document their fields under "Attributes"; numpydoc would want them as constructor "Parameters".
IGNORED_FOR_CLASSES = {"PR01", "PR02"}


def _public_api() -> dict[str, object]:
    found: dict[str, object] = {}
    for module in (gengen, stats):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return dict(sorted(found.items()))


PUBLIC_API = _public_api()


def test_the_checked_set_covers_the_headline_api() -> None:
    names = {path.rsplit(".", 1)[-1] for path in PUBLIC_API}
    assert {"analyse", "compare", "load", "partial_corr", "partial_corr_matrix", "p_adjust"} <= names
    assert {"permutation_test", "bootstrap_ci", "sieve_partial_corr_matrix", "fisher_meta"} <= names


@pytest.mark.parametrize("path", list(PUBLIC_API))
def test_public_docstring_is_valid_numpydoc(path: str) -> None:
    ignored = IGNORED_CHECKS | (IGNORED_FOR_CLASSES if inspect.isclass(PUBLIC_API[path]) else set())
    errors = [f"{code} {message}" for code, message in validate(path)["errors"] if code not in ignored]
    assert not errors, f"{path}:\n" + "\n".join(errors)


def _documented_badly(x: int, y: int) -> int:
    """Add two numbers.

    Parameters
    ----------
    x : int
        The first.

    Returns
    -------
    int
        The sum.
    """
    return x + y


def test_the_check_catches_an_undocumented_parameter() -> None:
    codes = {code for code, _ in validate(f"{__name__}._documented_badly")["errors"]} - IGNORED_CHECKS
    assert codes == {"PR01"}
