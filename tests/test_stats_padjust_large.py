"""Hommel's adjustment on large inputs (issue 26): R's values, in O(n log n), interruptible, refused beyond a limit.

References: R's own ``p.adjust(p, "hommel")`` through rpy2 (skipped without R unless ``GENGEN_REQUIRE_R=1``) and
statsmodels' ``multipletests(p, method="hommel")``, on random vectors with ties, zeros, ones and tiny values.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose
from statsmodels.stats.multitest import multipletests

from gengen import stats
from gengen.errors import InvalidArgumentError
from gengen.stats import limits


def _vectors(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=n)
    return [
        u,
        u**6,  # many small p-values
        np.round(u, 2),  # ties, zeros and ones
        np.where(u < 0.2, 0.0, u),  # exact zeros
        np.where(u < 0.5, 1e-300 * u, u),  # tiny (their reciprocals overflow)
    ]


@pytest.mark.parametrize("index", range(5))
def test_hommel_matches_statsmodels_on_thousands_of_p_values(index: int) -> None:
    p = _vectors(3000, seed=26)[index]
    assert_allclose(stats.p_adjust(p, "hommel"), multipletests(p, method="hommel")[1], rtol=1e-12, atol=1e-300)


@pytest.fixture(scope="module")
def r_p_adjust() -> Any:
    try:
        import rpy2.robjects as ro
        from rpy2.robjects import numpy2ri

        converter = ro.default_converter + numpy2ri.converter
        function = ro.r("function(p, method) p.adjust(p, method)")
    except Exception as error:  # rpy2 raises several kinds when R cannot be loaded
        if os.environ.get("GENGEN_REQUIRE_R") == "1":
            pytest.fail(f"GENGEN_REQUIRE_R=1 but R is not usable through rpy2 ({error})", pytrace=False)
        pytest.skip(f"R through rpy2 is not usable ({type(error).__name__}: {error})")

    def adjust(p: np.ndarray, method: str) -> np.ndarray:
        with converter.context():
            return np.asarray(function(p, method), dtype=float)

    return adjust


@pytest.mark.r
@pytest.mark.parametrize("n", [3, 4, 17, 2000])
def test_hommel_matches_r(r_p_adjust: Any, n: int) -> None:
    for p in _vectors(n, seed=n):
        assert_allclose(stats.p_adjust(p, "hommel"), r_p_adjust(p, "hommel"), rtol=1e-12, atol=1e-300)
    with_nan = _vectors(n, seed=1)[0].copy()
    with_nan[:: max(n // 3, 2)] = np.nan
    assert_allclose(stats.p_adjust(with_nan, "hommel"), r_p_adjust(with_nan, "hommel"), rtol=1e-12, atol=1e-300)


def test_millions_of_p_values_keep_hommels_bounds() -> None:
    """Hommel's adjustment is at most Hochberg's and at least p, and keeps the order of the p-values.

    R's O(n²) loop takes hours here; its speed is in benches/README.md, not asserted here.
    """
    rng = np.random.default_rng(3)
    p = rng.uniform(size=2_000_000) ** 2
    adjusted = stats.p_adjust(p, "hommel")
    assert np.all(adjusted >= p) and np.all(adjusted <= stats.p_adjust(p, "hochberg") + 1e-15)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= -1e-15)


INTERRUPTED = """
import numpy as np
from gengen import stats
p = np.random.default_rng(0).uniform(size={n})
print("ready", flush=True)
try:
    for _ in range(100):
        stats.p_adjust(p, "hommel")
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_a_long_adjustment_stops_on_ctrl_c() -> None:
    code = textwrap.dedent(INTERRUPTED.format(n=10_000_000))
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    try:
        out, _ = process.communicate(timeout=120)  # a guard against a hang, not a speed check
    finally:
        process.kill()
    # The KeyboardInterrupt comes out of the call (or between calls), before the 100 adjustments finish.
    assert out.strip() == "interrupted", out


def test_an_adjustment_beyond_the_memory_limit_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "memory_budget", lambda: 2**20)
    p = np.full(100_000, 0.5)
    with pytest.raises(InvalidArgumentError) as caught:
        stats.p_adjust(p, "hommel")
    message = str(caught.value)
    assert message.startswith("p: adjusting 100000 p-values would take ") and "above the limit of 1.0 MiB" in message
    assert "\n" not in message
