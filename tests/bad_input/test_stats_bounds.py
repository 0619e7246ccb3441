"""Bad sizes given to ``gengen.stats`` and to the Rust binding ``gengen._core``: an error, never a panic, abort or hang.

Issue 16: ``bootstrap_indices(2**62, 4)`` panicked (capacity overflow), ``bootstrap_indices(10**6, 10**6)``
aborted the interpreter (an 8 TB allocation), ``n_threads=10**6`` and ``n_perm=2**40`` hung, and
``permutation_test(..., block_length=n)`` returned p = 1 without a word. Every size argument is now checked
against the limits of :mod:`gengen.stats.limits` before anything is allocated.

Each case is an expression evaluated with ``stats``, ``_core``, ``np`` and small data sets in scope; it must raise
:class:`gengen.errors.GengenError` (a ValueError) whose message contains the culprit. Cases that could abort or
hang the interpreter on a faulty build run in a subprocess under a timeout, so a regression fails one test
instead of killing or stalling the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gengen import _core, stats
from gengen.errors import GengenError, InvalidArgumentError
from gengen.stats import limits


@dataclass(frozen=True)
class StatsCase:
    """A call expected to raise a GengenError naming ``culprit``; ``isolate``: run it in a subprocess."""

    name: str
    expression: str
    culprit: str
    isolate: bool = False


SETUP = """
import numpy as np
from gengen import _core, stats
rng = np.random.default_rng(16)
X = rng.normal(size=(20, 3))
Z = rng.normal(size=(20, 1))
EMPTY = np.ones((20, 0))
"""

HUGE_INDEX_SHAPES = {
    "n-2e62": ("2**62", "4"),
    "both-1e6": ("10**6", "10**6"),
    "rows-2e62": ("4", "2**62"),
    "n-2e62-no-rows": ("2**62", "0"),
    "rows-1e9": ("10**5", "10**9"),
    "n-1e12": ("10**12", "2"),
}
BAD_COUNTS = {"zero": "0", "negative": "-1", "float": "1.5", "bool": "True", "text": "'10'"}
ABOVE_CAP = {
    "2e40": "2**40",
    "1e11": "10**11",
    "2e63": "2**63",
    "2e64": "2**64",
    "cap+1": str(limits.MAX_RESAMPLES + 1),
}
BAD_THREADS = {"zero": "0", "negative": "-4", "1e6": "10**6", "2e64": "2**64", "float": "2.0"}


def _stats_cases() -> list[StatsCase]:
    out: list[StatsCase] = []
    # Index tables: through gengen.stats and straight into the binding.
    for label, (n, rows) in HUGE_INDEX_SHAPES.items():
        out.append(StatsCase(f"bootstrap_indices-{label}", f"stats.bootstrap_indices({n}, {rows})", "n_boot", True))
        out.append(StatsCase(f"permutation_indices-{label}", f"stats.permutation_indices({n}, {rows})", "n_perm", True))
        out.append(
            StatsCase(f"core-bootstrap_indices-{label}", f"_core.bootstrap_indices({n}, {rows}, 'iid')", "n_boot", True)
        )
        out.append(
            StatsCase(
                f"core-permutation_indices-{label}", f"_core.permutation_indices({n}, {rows}, 'free')", "n_perm", True
            )
        )
    # Resample counts: malformed, and above the cap (these used to run for days).
    for function, argument, minimum in (
        ("permutation_test", "n_perm", 1),
        ("bootstrap_ci", "n_boot", 2),
        ("permutation_test_batch", "n_perm", 1),
        ("bootstrap_ci_batch", "n_boot", 2),
    ):
        data = "[X]" if function.endswith("batch") else "X"
        for label, value in {**BAD_COUNTS, "below-minimum": str(minimum - 1), **ABOVE_CAP}.items():
            out.append(
                StatsCase(
                    f"{function}-{argument}-{label}",
                    f"stats.{function}({data}, {argument}={value})",
                    argument,
                    isolate=label in ("2e40", "1e11"),
                )
            )
    for label, value in ABOVE_CAP.items():
        if int(eval(value)) < 2**64:
            out.append(
                StatsCase(
                    f"core-permutation_test_batch-n_perm-{label}",
                    f"_core.permutation_test_batch([X], [EMPTY], 'pearson', {value}, 'free')",
                    "n_perm",
                    True,
                )
            )
            out.append(
                StatsCase(
                    f"core-bootstrap_ci_batch-n_boot-{label}",
                    f"_core.bootstrap_ci_batch([X], [EMPTY], 'pearson', {value}, 'iid')",
                    "n_boot",
                    True,
                )
            )
    # Threads: a pool of a million threads never finished starting.
    for call in (
        "stats.permutation_test(X, n_perm=99, n_threads={})",
        "stats.bootstrap_ci(X, n_boot=99, n_threads={})",
        "stats.partial_corr_matrix(X, Z, n_threads={})",
        "stats.gam_fit(X, Z, n_threads={})",
    ):
        function = call.split("(")[0].split(".")[1]
        for label, value in BAD_THREADS.items():
            out.append(
                StatsCase(f"{function}-n_threads-{label}", call.format(value), "n_threads", isolate=label == "1e6")
            )
    for label, call in {
        "permutation": "_core.permutation_test_batch([X], [EMPTY], 'pearson', 9, 'free', n_threads=10**6)",
        "bootstrap": "_core.bootstrap_ci_batch([X], [EMPTY], 'pearson', 9, 'iid', n_threads=10**6)",
        "matrix": "_core.partial_corr_matrix_batch([X], [EMPTY], 'pearson', n_threads=10**6)",
        "gam": "_core.gam_fit(X, Z, n_threads=10**6)",
    }.items():
        out.append(StatsCase(f"core-{label}-n_threads-1e6", call, "n_threads", True))
    # A single block leaves nothing to resample: p = 1 or a zero-width interval, said nowhere.
    for label, call in {
        "permutation-block-n": "stats.permutation_test(X, n_perm=99, scheme='block', block_length=20)",
        "permutation-batch-block-n": "stats.permutation_test_batch([X], n_perm=99, scheme='block', block_length=20)",
        "permutation-indices-block-n": "stats.permutation_indices(20, 5, scheme='block', block_length=20)",
        "bootstrap-block-n": "stats.bootstrap_ci(X, n_boot=99, scheme='block', block_length=20)",
        "bootstrap-circular-n": "stats.bootstrap_ci(X, n_boot=99, scheme='circular', block_length=20)",
        "bootstrap-indices-block-n": "stats.bootstrap_indices(20, 5, scheme='block', block_length=20)",
        "permutation-block-above-n": "stats.permutation_test(X, n_perm=99, scheme='block', block_length=21)",
        "permutation-block-zero": "stats.permutation_test(X, n_perm=99, scheme='block', block_length=0)",
        "bootstrap-block-negative": "stats.bootstrap_ci(X, n_boot=99, scheme='block', block_length=-2)",
        "core-permutation-block-n": "_core.permutation_test_batch([X], [EMPTY], 'pearson', 9, 'block', 20)",
        "core-bootstrap-block-n": "_core.bootstrap_ci_batch([X], [EMPTY], 'pearson', 9, 'block', 20)",
    }.items():
        out.append(StatsCase(f"block_length-{label}", call, "block_length"))
    # Simulations: sizes bounded before anything is simulated.
    simulate = "_core.simulate_run({n}, {m}, 'ar1', 0.5, 'linear', 0.0, 1.0, 0.1, 0, 0)"
    for label, (n, m, culprit) in {
        "huge-n": ("10**12", "2", "simulating"),
        "huge-m": ("50", "10**12", "simulating"),
        "both-1e6": ("10**6", "10**6", "simulating"),
    }.items():
        out.append(StatsCase(f"core-simulate_run-{label}", simulate.format(n=n, m=m), culprit, True))
    cell = "_core.calibration_cell(50, 'ar1', 0.5, 'linear', 0.0, {r}, 0, 0, {p}, {b}, False, 6, 1.0, 0.1)"
    for label, (replicates, n_perm, n_boot, culprit) in {
        "replicates-2e40": ("2**40", "0", "0", "replicates"),
        "n_perm-2e40": ("10", "2**40", "0", "n_perm"),
        "n_boot-2e40": ("10", "0", "2**40", "n_boot"),
    }.items():
        out.append(
            StatsCase(f"core-calibration_cell-{label}", cell.format(r=replicates, p=n_perm, b=n_boot), culprit, True)
        )
    # Issue 26: values outside their domain were left out (r > 1) or used (n < 0) without a word, and Ljung-Box
    # with 0 lags, or more lags than the series has points, returned a p-value.
    for label, (call, culprit) in {
        "fisher_meta-r-above-1": ("stats.fisher_meta([0.5, 1.2], [20, 30], [0, 0])", "r: correlations must lie in"),
        "fisher_meta-r-below-minus-1": ("stats.fisher_meta([-3.0], [20], [0])", "r: correlations must lie in"),
        "fisher_meta-n-negative": ("stats.fisher_meta([0.5, 0.3], [20, -30], [0, 0])", "n: counts must be >= 0"),
        "fisher_meta-k-negative": ("stats.fisher_meta([0.5], [20], [-1])", "k: counts must be >= 0"),
        "ljung_box-0-lags": ("stats.ljung_box(X[:, 0], 0)", "lags: expected an integer >= 1"),
        "ljung_box-negative-lags": ("stats.ljung_box(X[:, 0], -2)", "lags: expected an integer >= 1"),
        "ljung_box-float-lags": ("stats.ljung_box(X[:, 0], 2.5)", "lags: expected an integer >= 1"),
        "ljung_box-more-lags-than-points": ("stats.ljung_box(X[:, 0], 19)", "lags: 19 autocorrelations need"),
    }.items():
        out.append(StatsCase(label, call, culprit))
    return out


STATS_CASES = _stats_cases()


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(SETUP, namespace)
    return namespace


def _isolated_script(cases: list[StatsCase]) -> str:
    """A script evaluating ``cases`` one after the other, printing one ``name<TAB>outcome<TAB>message`` line each."""
    body = [SETUP, "from gengen.errors import GengenError"]
    for case in cases:
        body.append(
            textwrap.dedent(
                f"""
                try:
                    {case.expression}
                except GengenError as error:
                    print({case.name!r}, "refused", " ".join(str(error).split()), sep="\\t", flush=True)
                else:
                    print({case.name!r}, "accepted", "", sep="\\t", flush=True)
                """
            )
        )
    return "\n".join(body)


def _run_isolated(cases: list[StatsCase], timeout: float) -> tuple[dict[str, tuple[str, str]], str]:
    """Outcomes of the cases a subprocess got through, and its stderr (a crash or a hang ends the run early)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _isolated_script(cases)], capture_output=True, text=True, timeout=timeout
        )
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        err = f"timed out after {timeout} s"
    outcomes = {}
    for line in out.splitlines():
        name, outcome, message = line.split("\t", 2)
        outcomes[name] = (outcome, message)
    return outcomes, err


@pytest.fixture(scope="module")
def isolated_outcomes() -> dict[str, tuple[str, str]]:
    """Every isolated case in one subprocess (fast); a case it did not get through is retried on its own."""
    outcomes, _ = _run_isolated([case for case in STATS_CASES if case.isolate], timeout=300)
    return outcomes


@pytest.mark.parametrize("case", STATS_CASES, ids=[case.name for case in STATS_CASES])
def test_bad_size_is_refused(case: StatsCase, isolated_outcomes: dict[str, tuple[str, str]]) -> None:
    if case.isolate:
        if case.name in isolated_outcomes:
            outcome, message = isolated_outcomes[case.name]
        else:  # the shared run crashed or hung at this case (or before it): run it alone to blame it
            alone, err = _run_isolated([case], timeout=120)
            assert case.name in alone, f"{case.expression}: no answer\n{err[-2000:]}"
            outcome, message = alone[case.name]
        assert outcome == "refused", f"{case.expression}: {outcome}"
    else:
        with pytest.raises(GengenError) as raised:
            eval(case.expression, _namespace())
        message = str(raised.value)
        assert "\n" not in message.strip(), message
    assert case.culprit in message, message


# ------------------------------------------------------------------------------------------ messages and limits


def test_memory_errors_say_how_much_it_would_take() -> None:
    with pytest.raises(InvalidArgumentError, match=r"7\.3 TiB"):
        stats.bootstrap_indices(10**6, 10**6)
    with pytest.raises(InvalidArgumentError, match=r"7\.3 TiB"):
        _core.bootstrap_indices(10**6, 10**6, "iid")


def test_the_limits_still_allow_ordinary_sizes() -> None:
    # Just below the caps and the budget, calls go through (the limits only refuse the absurd).
    rows = stats.bootstrap_indices(7, 3, seed=1)
    assert rows.shape == (3, 7)
    assert limits.check_resamples("n_perm", limits.MAX_RESAMPLES) == limits.MAX_RESAMPLES
    assert limits.check_threads(limits.max_threads()) == limits.max_threads()
    limits.check_array("n", (limits.memory_budget() // 8,), "a table")
    with pytest.raises(InvalidArgumentError):
        limits.check_array("n", (limits.memory_budget() // 8 + 1,), "a table")
    x = np.random.default_rng(0).normal(size=(12, 2))
    assert stats.permutation_test(x, n_perm=19, n_threads=limits.max_threads()).p_value.shape == (2, 2)


def test_memory_budget_is_half_the_machine_at_most_16_gib() -> None:
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert limits.memory_budget() == min(16 * 2**30, physical // 2)


def test_format_bytes() -> None:
    assert limits.format_bytes(512) == "512 bytes"
    assert limits.format_bytes(8 * 10**12) == "7.3 TiB"
    assert limits.format_bytes(2**62 * 8 * 5) == "160.0 EiB"


def test_few_distinct_permutations_warn() -> None:
    x = np.random.default_rng(3).normal(size=(20, 2))
    # Two blocks of ten: only 2 orders, so p can never fall below 1/2.
    with pytest.warns(RuntimeWarning, match="only 2 distinct permutations"):
        stats.permutation_test(x, n_perm=99, scheme="block", block_length=10)
    # A circular shift of 6 checkpoints has 6 orders.
    with pytest.warns(RuntimeWarning, match="only 6 distinct permutations"):
        stats.permutation_test(x[:6], n_perm=99, scheme="circular")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats.permutation_test(x, n_perm=99, scheme="block", block_length=3)  # 7! orders: no warning


def test_single_block_error_names_the_default() -> None:
    x = np.random.default_rng(4).normal(size=(27, 2))
    with pytest.raises(InvalidArgumentError, match=r"one block of all 27 checkpoints.*default 3"):
        stats.permutation_test(x, n_perm=9, scheme="block", block_length=27)


# ------------------------------------------------------------------------------------------ Ctrl-C

LONG_PERMUTATION = """
import sys
import numpy as np
from gengen import stats
scores = np.random.default_rng(0).normal(size=(300, 16))
print("started", flush=True)
stats.permutation_test(scores, np.arange(300.0), n_perm=10_000_000, scheme="block", seed=1)
print("finished", flush=True)
"""


def _interrupt(
    command: list[str], *, after: float, cwd: str | None = None, wait_for_line: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``command``, send SIGINT ``after`` seconds after it prints its first line (or starts), and collect it."""
    import signal
    import time

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        assert process.stdout is not None
        if wait_for_line:
            process.stdout.readline()
        time.sleep(after)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def test_ctrl_c_stops_a_long_permutation_test() -> None:
    # 10^7 permutations of 120 pairs take many minutes; Ctrl-C must end the call within the 60 s allowed.
    done = _interrupt([sys.executable, "-c", LONG_PERMUTATION], after=1.0)
    assert "finished" not in done.stdout
    assert "KeyboardInterrupt" in done.stderr, done.stderr[-2000:]


LONG_SIMULATION = """
from gengen import _core
print("started", flush=True)
_core.calibration_cell(200, "ar1", 0.9, "linear", 0.0, 1_000_000, 0, 0, 199, 199, False, 6, 1.0, 0.1)
print("finished", flush=True)
"""


def test_ctrl_c_stops_a_calibration_cell() -> None:
    # A million replicates with permutation and bootstrap tests run for hours; Ctrl-C ends them between slices.
    done = _interrupt([sys.executable, "-c", LONG_SIMULATION], after=1.0)
    assert "finished" not in done.stdout
    assert "KeyboardInterrupt" in done.stderr, done.stderr[-2000:]


def test_ctrl_c_ends_a_cli_analysis_with_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    # 276 pairs x 600 checkpoints x 10^7 free permutations is ~10^12 multiply-adds: minutes on any machine
    # (CI once finished 66 pairs x 300 under the block scheme, whose kernel works per block, within the 6 s).
    steps, testsets = 600, [f"ood_{i}" for i in range(24)]
    rows = [
        f"m,main,{step},{testset},acc,{0.4 + 0.0005 * step + rng.normal(0, 0.02):.6f}"
        for step in range(steps)
        for testset in ["id", *testsets]
    ]
    (tmp_path / "table.csv").write_text("model,run,step,testset,metric,value\n" + "\n".join(rows) + "\n")
    script = Path(sys.executable).parent / "gengen"
    command = [str(script)] if script.is_file() else [sys.executable, "-c", "from gengen.cli import main; main()"]
    command += ["analyse", "table.csv", "--id", "id", "--inference", "permutation", "--n-perm", "10000000"]
    command += ["--scheme", "free"]
    # Start-up takes a second or two; the permutations take many minutes.
    done = _interrupt(command, after=6.0, cwd=str(tmp_path), wait_for_line=False)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    assert lines[-1] == "error: interrupted", lines
