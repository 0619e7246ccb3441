"""Shared set-up for the R cross-validation tests (tests/r/).

Without R (``Rscript``), rpy2 or the R packages ggm, psych, corpcor and mgcv, every test here is skipped with
the reason, unless the environment sets ``GENGEN_REQUIRE_R=1`` (CI does), in which case they fail instead.
ppcor (``scripts/install.sh`` installs it from CRAN, or from ``../shared/r/ppcor_1.1.tar.gz`` offline) is taken
through the ``ppcor_session`` fixture: without it those tests skip, and under ``GENGEN_REQUIRE_R=1`` fail.

Test functions taking a ``case`` argument are parametrised over every data set of ``cases.py``; the number of
data sets and comparisons that ran is printed at the end of the session (``R cross-validation: ...``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"
REQUIRED_R_PACKAGES = ("ggm", "psych", "corpcor", "mgcv")


def _load_cases() -> Any:
    spec = importlib.util.spec_from_file_location("gengen_r_cases", HERE / "cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cases = _load_cases()


def _r_missing() -> str | None:
    """Why the R tests cannot run here, or None when they can."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return "R is not installed (no Rscript on PATH; Debian: apt-get install r-base-core)"
    # Starting R through rpy2 rewrites LD_LIBRARY_PATH in os.environ (R's own lib folders first). R is loaded by
    # then, but every later subprocess would inherit it and load system libraries in place of the interpreter's
    # (the training tests' subprocesses then fail to import ssl): put the variable back as it was.
    saved = os.environ.get("LD_LIBRARY_PATH")
    try:
        import rpy2.robjects  # noqa: F401
    except Exception as error:  # rpy2 raises several kinds when R's shared library does not load
        return f"rpy2 is not usable ({type(error).__name__}: {error}); pip install 'rpy2>=3.5,<3.6'"
    finally:
        if saved is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved
    check = "cat(Filter(function(p) !requireNamespace(p, quietly = TRUE), commandArgs(TRUE)))"
    result = subprocess.run([rscript, "-e", check, *REQUIRED_R_PACKAGES], capture_output=True, text=True, timeout=60)
    missing = result.stdout.split()
    if result.returncode != 0 or missing:
        return (
            f"R package(s) {', '.join(missing) or '?'} missing (Debian: r-cran-ggm r-cran-psych "
            "r-cran-corpcor r-cran-mgcv)"
        )
    return None


@pytest.fixture(scope="session")
def _r_available() -> None:
    reason = _r_missing()
    if reason is None:
        return
    if require_r():
        pytest.fail(f"GENGEN_REQUIRE_R=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _require_r(_r_available: None) -> None:
    """Every test in tests/r/ needs R; skip (or, under GENGEN_REQUIRE_R=1, fail) without it."""


class RSession:
    """rpy2's embedded R with the reference functions of references.R loaded.

    Calls convert numpy arrays to R and R results back to numpy inside a local converter context (not rpy2's
    deprecated global activation).
    """

    def __init__(self) -> None:
        import rpy2.robjects as ro
        from rpy2.robjects import numpy2ri, pandas2ri

        self._ro = ro
        self._converter = ro.default_converter + numpy2ri.converter + pandas2ri.converter
        ro.r["source"](str(HERE / "references.R"))
        self.has_ppcor = bool(ro.r('isTRUE(requireNamespace("ppcor", quietly = TRUE))')[0])

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call R function ``function`` and convert its result (named lists become nested dicts)."""
        with self._converter.context():
            result = self._ro.r[function](*args, **kwargs)
            return _to_python(result)

    def version(self, package: str) -> str:
        return str(self._ro.r(f'as.character(packageVersion("{package}"))')[0])


def _to_python(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "items"):
        return {str(key): _to_python(item) for key, item in value.items()}
    array = np.asarray(value)
    if array.ndim == 1 and array.size == 1:
        return array.item()
    return array


@pytest.fixture(scope="session")
def r_session(_r_available: None) -> RSession:
    return RSession()


PPCOR_MISSING = (
    "R package ppcor not installed (bash scripts/install.sh installs it from CRAN or ../shared/r/ppcor_1.1.tar.gz; "
    "needs r-cran-mass)"
)


def require_r() -> bool:
    """True when the environment asks for every R comparison to run (CI): missing pieces fail, not skip."""
    return os.environ.get("GENGEN_REQUIRE_R") == "1"


@pytest.fixture(scope="session")
def ppcor_session(r_session: RSession) -> RSession:
    """The R session, for tests that call ppcor: skipped without ppcor, failed under GENGEN_REQUIRE_R=1."""
    if not r_session.has_ppcor:
        if require_r():
            pytest.fail(f"GENGEN_REQUIRE_R=1 but {PPCOR_MISSING}", pytrace=False)
        pytest.skip(PPCOR_MISSING)
    return r_session


@pytest.fixture(scope="session")
def r_references(r_session: RSession) -> dict[str, dict[str, Any]]:
    """R's references per case id, computed once per case on first use."""
    return _LazyReferences(r_session)


class _LazyReferences(dict):  # type: ignore[type-arg]
    def __init__(self, session: RSession) -> None:
        super().__init__()
        self._session = session

    def __missing__(self, case_id: str) -> dict[str, Any]:
        case = cases.make_case(case_id)
        value = self._session.call("reference_case", case.r_data())
        self[case_id] = value
        return value


# --- case counts, printed at the end of the session so CI's log shows what ran -----------------------------

_COUNTS: Counter[str] = Counter()


@pytest.fixture(scope="session")
def record_comparison() -> Any:
    """``record_comparison(name, count=1)`` adds to the summary line printed after the run."""

    def record(name: str, count: int = 1) -> None:
        _COUNTS[name] += count

    return record


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", cases.CASES, ids=[c.case_id for c in cases.CASES])
    if "p_vector" in metafunc.fixturenames:
        vectors = cases.p_value_vectors()
        metafunc.parametrize("p_vector", vectors, ids=[f"pvec{i:02d}-m{v.size}" for i, v in enumerate(vectors)])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _COUNTS:
        return
    terminalreporter.section("R cross-validation")
    kinds = ", ".join(f"{kind} {count}" for kind, count in cases.KIND_COUNTS.items())
    terminalreporter.write_line(f"data sets: {len(cases.CASES)} ({kinds})")
    for name, count in sorted(_COUNTS.items()):
        terminalreporter.write_line(f"{count:5d} passed  {name}")
