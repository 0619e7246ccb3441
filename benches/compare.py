"""gengen against pingouin, numpy and R on the standard workloads, with a roofline and scaling figures.

Usage (from the repository root)::

    .venv/bin/python benches/compare.py            # full run (W1, W2, W3, roofline, scaling): ~5 minutes
    .venv/bin/python benches/compare.py --quick    # under 60 s

The last line is ``W1 speedup vs numpy: X; vs pingouin: Y``.

Every implementation runs in its own subprocess (``--worker``) on the same data, so that its peak resident
memory (``ru_maxrss`` from ``wait4``) is its own. gengen and numpy run the whole workload. pingouin and R are
loops of one partial correlation per permutation or resample: they run for a time budget and their wall time
is extrapolated from the seconds per call (and said so in the table). The numbers are checked: numpy uses
gengen's own permutation and resample indices, so its p-values must equal gengen's exactly and its r and
interval bounds agree to 1e-10; pingouin's and R's observed r and r* (permuted) / r_b (resampled) values are
checked against numpy's for the same permutations and resamples.

Standard workloads (see ``benches/README.md``):

- W1: 50 runs × (1 ID + 7 OOD) × 100 checkpoints; 10,000 block permutations and 2,000 moving-block bootstrap
  replicates per pair (1,050 pairs).
- W2: 1 run × (1 ID + 50 OOD) × 1,000 checkpoints (1,225 pairs); 10,000 block permutations.
- W3: GAM residualisation (GCV) of 1,000 columns × 200 checkpoints on one control.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines as bl  # noqa: E402

R_SCRIPT = HERE / "baseline.R"


# ----------------------------------------------------------------------------------------------------------
# Plans
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one invocation runs: workload sizes and the loop baselines' time budgets."""

    quick: bool
    w1: bl.Workload
    w2: bl.Workload
    w3_columns: int
    loop_budget: float  # seconds per loop baseline (pingouin, R) and task
    loop_perms: int  # permutations per pair the loops evaluate
    loop_boots: int  # resamples per pair the loops evaluate
    scaling_perms: int
    roofline_seconds: float
    with_w2_loops: bool


def make_plan(quick: bool) -> Plan:
    if quick:
        return Plan(
            quick=True,
            w1=bl.W1.scaled(n_perm=1_000, n_boot=200),
            w2=bl.W2.scaled(n_perm=500),
            w3_columns=100,
            loop_budget=2.0,
            loop_perms=20,
            loop_boots=10,
            scaling_perms=200,
            roofline_seconds=0.3,
            with_w2_loops=False,
        )
    return Plan(
        quick=False,
        w1=bl.W1,
        w2=bl.W2,
        w3_columns=bl.W3_COLUMNS,
        loop_budget=15.0,
        loop_perms=200,
        loop_boots=100,
        scaling_perms=2_000,
        roofline_seconds=2.0,
        with_w2_loops=True,
    )


# ----------------------------------------------------------------------------------------------------------
# Workers: one implementation × one task, in a subprocess
# ----------------------------------------------------------------------------------------------------------


def rss_kb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(impl: str, task: str, folder: Path) -> None:
    """Runs ``impl`` on ``task`` with the inputs in ``folder``; prints one JSON line, saves arrays."""
    meta = json.loads((folder / "meta.json").read_text())
    data = dict(np.load(folder / "input.npz"))
    if impl in ("gengen", "candidate"):
        from gengen import _core

        report: dict[str, Any] = {"setup_rss_kb": rss_kb(), "module": _core.__file__}
    else:
        report = {"setup_rss_kb": rss_kb()}
    out: dict[str, np.ndarray] = {}
    if task in ("W1", "W2"):
        run_resampling(impl, meta, data, report, out)
    elif task == "W3":
        run_gam(impl, meta, data, report, out)
    np.savez(folder / f"{impl}.npz", **out)
    print(json.dumps(report))


def run_resampling(impl: str, meta: dict, data: dict, report: dict, out: dict) -> None:
    scores, covar = data["scores"], data["covar"]
    n = scores.shape[1]
    n_perm, n_boot = meta["n_perm"], meta["n_boot"]
    # CPU seconds of this worker (all its threads) beside the wall time: on a shared machine other users'
    # work stretches the wall clock, much less the CPU time a workload needs. Imports come first, untimed.
    if impl in ("gengen", "candidate", "numpy"):
        import threadpoolctl  # noqa: F401

        from gengen import stats

        # gengen.stats loads its modules on first use (pandas among them): load them before the clocks start.
        _resolve_before_timing(
            stats, "permutation_test_batch", "bootstrap_ci_batch", "permutation_indices", "bootstrap_indices"
        )
    cpu_start = time.process_time()
    run_resampling_timed(impl, meta, data, report, out, scores, covar, n, n_perm, n_boot)
    report["cpu_seconds"] = time.process_time() - cpu_start


def run_resampling_timed(
    impl: str,
    meta: dict,
    data: dict,
    report: dict,
    out: dict,
    scores: Any,
    covar: Any,
    n: int,
    n_perm: int,
    n_boot: int,
) -> None:
    if impl in ("gengen", "candidate"):
        from gengen import stats

        start = time.perf_counter()
        perm = stats.permutation_test_batch(
            list(scores), list(covar), n_perm=n_perm, scheme="block", family_wise=True, seed=meta["seed"]
        )
        report["perm_seconds"] = time.perf_counter() - start
        out["r"] = np.stack([p.r for p in perm])
        out["p"] = np.stack([p.p_value for p in perm])
        out["p_fwer"] = np.stack([p.p_fwer for p in perm])
        if n_boot:
            start = time.perf_counter()
            boot = stats.bootstrap_ci_batch(list(scores), list(covar), n_boot=n_boot, scheme="block", seed=meta["seed"])
            report["boot_seconds"] = time.perf_counter() - start
            a, b = np.triu_indices(scores.shape[2], 1)
            out["ci_low"] = np.stack([x.ci_low[a, b] for x in boot])
            out["ci_high"] = np.stack([x.ci_high[a, b] for x in boot])
    elif impl == "numpy":
        from threadpoolctl import threadpool_limits

        from gengen import stats

        with threadpool_limits(1, user_api="blas"):
            start = time.perf_counter()
            indices = stats.permutation_indices(n, n_perm, scheme="block", seed=meta["seed"])
            out["r"], out["p"], out["p_fwer"] = bl.numpy_permutation(
                scores, covar, indices, chunk=meta["numpy_chunk"], threads=2
            )
            report["perm_seconds"] = time.perf_counter() - start
            if n_boot:
                start = time.perf_counter()
                indices = stats.bootstrap_indices(n, n_boot, scheme="block", seed=meta["seed"])
                halves = np.array_split(np.arange(scores.shape[0]), 2)
                with ThreadPoolExecutor(2) as pool:
                    parts = list(pool.map(lambda h: bl.numpy_bootstrap(scores[h], covar[h], indices), halves))
                out["ci_low"] = np.concatenate([p[0] for p in parts])
                out["ci_high"] = np.concatenate([p[1] for p in parts])
                report["boot_seconds"] = time.perf_counter() - start
    elif impl == "pingouin":
        run_pingouin(meta, data, report, out)


def _resolve_before_timing(namespace: Any, *names: str) -> None:
    """Touch ``names`` on a lazily loaded namespace so that the imports behind them happen now."""
    for name in names:
        getattr(namespace, name)


def run_pingouin(meta: dict, data: dict, report: dict, out: dict) -> None:
    import pandas as pd
    import pingouin as pg

    scores, covar = data["scores"][: meta["loop_runs"]], data["covar"][: meta["loop_runs"]]
    perm_idx, boot_idx = data["loop_perm_idx"], data["loop_boot_idx"]

    def r_of(frame: pd.DataFrame) -> float:
        return float(pg.partial_corr(frame, x="x", y="y", covar="z")["r"].iloc[0])

    pairs = list(bl.pingouin_pairs(scores.shape[0], scores.shape[2]))
    observed, r_star, r_boot = [], [], []
    seconds = {"perm": 0.0, "boot": 0.0, "obs": 0.0}
    calls = {"perm": 0, "boot": 0, "obs": 0}
    budget = meta["loop_budget"]
    begin = time.perf_counter()
    for run, a, b in pairs:
        x, y, z = scores[run, :, a], scores[run, :, b], covar[run, :, 0]
        frame = pd.DataFrame({"x": x, "y": y, "z": z})
        start = time.perf_counter()
        observed.append(r_of(frame))
        fitted, resid = bl.freedman_lane_parts(y, z)
        seconds["obs"] += time.perf_counter() - start
        calls["obs"] += 1
        start = time.perf_counter()
        row = [r_of(frame.assign(y=fitted + resid[order])) for order in perm_idx]
        seconds["perm"] += time.perf_counter() - start
        calls["perm"] += len(row)
        r_star.append(row)
        if len(boot_idx):
            start = time.perf_counter()
            row = [r_of(frame.iloc[rows]) for rows in boot_idx]
            seconds["boot"] += time.perf_counter() - start
            calls["boot"] += len(row)
            r_boot.append(row)
        if time.perf_counter() - begin > budget:
            break
    report["per_call"] = {k: seconds[k] / max(calls[k], 1) for k in seconds}
    report["calls"] = calls
    out["observed"] = np.array(observed)
    out["r_star"] = np.array(r_star)
    out["r_boot"] = np.array(r_boot) if r_boot else np.zeros((0, 0))


def run_gam(impl: str, meta: dict, data: dict, report: dict, out: dict) -> None:
    y, control = data["y"], data["control"]
    if impl == "gengen":
        from gengen import stats

        try:
            start = time.perf_counter()
            out["residuals"] = stats.residualise(y, control, fit="gam")
            report["seconds"] = time.perf_counter() - start
            out["score"] = np.asarray(stats.gam_fit(y, control).score)  # GCV at the chosen λ (not timed)
        except ValueError as error:
            report["pending"] = str(error)
    elif impl == "pygam":
        from pygam import LinearGAM, s

        residuals = []
        begin = time.perf_counter()
        for j in range(y.shape[1]):
            model = LinearGAM(s(0, n_splines=10)).gridsearch(control[:, None], y[:, j], progress=False)
            residuals.append(y[:, j] - model.predict(control[:, None]))
            if time.perf_counter() - begin > meta["loop_budget"]:
                break
        per_column = (time.perf_counter() - begin) / len(residuals)
        report["per_call"] = {"column": per_column}
        report["calls"] = {"column": len(residuals)}
        out["residuals"] = np.array(residuals).T


# ----------------------------------------------------------------------------------------------------------
# Orchestration
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One implementation's result on one workload."""

    impl: str
    seconds: float | None  # wall time of the whole workload (measured or extrapolated)
    extrapolated: bool
    peak_rss_mb: float
    setup_rss_mb: float
    report: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    note: str = ""


def launch(
    command: list[str], folder: Path, impl: str, pythonpath: Path | None = None
) -> tuple[dict[str, Any], float, dict[str, np.ndarray]]:
    """Runs a worker (``pythonpath`` first on its path); returns its JSON report, peak RSS (MB), arrays."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    with open(folder / f"{impl}.stderr", "w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        assert process.stdout is not None
        stdout = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        message = (folder / f"{impl}.stderr").read_text().strip().splitlines()
        raise RuntimeError(f"{impl} worker failed ({process.returncode}): {message[-1] if message else ''}")
    report = json.loads(stdout.strip().splitlines()[-1])
    path = folder / f"{impl}.npz"
    arrays = dict(np.load(path)) if path.exists() else {}
    if "shape" in report:  # the R script's raw outputs
        arrays = r_outputs(folder, report["shape"])
        for name in ("observed", "r_star", "r_boot", "residuals", "score"):
            (folder / f"{name}.out").unlink(missing_ok=True)
    return report, usage.ru_maxrss / 1024, arrays


def r_outputs(folder: Path, shape: list[int]) -> dict[str, np.ndarray]:
    def read(name: str) -> np.ndarray:
        path = folder / f"{name}.out"
        return np.fromfile(path, dtype="<f8") if path.exists() else np.zeros(0)

    if len(shape) == 3:  # resampling: pairs done, permutations and resamples per pair
        pairs, n_perm, n_boot = shape
        return {
            "observed": read("observed"),
            "r_star": read("r_star").reshape(pairs, n_perm),
            "r_boot": read("r_boot").reshape(pairs, n_boot) if n_boot else np.zeros((0, 0)),
        }
    columns, n = shape
    return {"residuals": read("residuals").reshape(columns, n).T, "score": read("score")}


def python_worker(impl: str, task: str, folder: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        impl,
        "--task",
        task,
        "--data",
        str(folder),
    ]


def write_inputs(folder: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps(meta))
    np.savez(folder / "input.npz", **arrays)
    for name, array in arrays.items():  # raw little-endian copies for R
        dtype = "<i4" if np.issubdtype(array.dtype, np.integer) else "<f8"
        np.ascontiguousarray(array, dtype=dtype).tofile(folder / f"{name}.bin")
        (folder / f"{name}.shape").write_text(" ".join(map(str, array.shape)))


def resampling_workload(
    plan: Plan, w: bl.Workload, folder: Path, chunk: int, loops: bool, candidate: Path | None
) -> list[Outcome]:
    from gengen import stats

    scores, covar = bl.trajectories(w.runs, w.n, w.m)
    loop_runs = min(w.runs, 3)
    meta = {
        "n_perm": w.n_perm,
        "n_boot": w.n_boot,
        "seed": bl.SEED,
        "numpy_chunk": chunk,
        "loop_budget": plan.loop_budget,
        "loop_runs": loop_runs,
    }
    perm_idx = stats.permutation_indices(w.n, plan.loop_perms, scheme="block", seed=bl.SEED)
    boot_idx = (
        stats.bootstrap_indices(w.n, plan.loop_boots, scheme="block", seed=bl.SEED) if w.n_boot else np.zeros((0, w.n))
    )
    write_inputs(
        folder,
        meta,
        {
            "scores": scores,
            "covar": covar,
            "loop_perm_idx": perm_idx.astype(np.int64),
            "loop_boot_idx": boot_idx.astype(np.int64),
        },
    )
    outcomes = []
    impls = ["gengen"] + (["candidate"] if candidate else []) + ["numpy"] + (["pingouin", "R"] if loops else [])
    for impl in impls:
        command = (
            ["Rscript", str(R_SCRIPT), str(folder), "resampling"]
            if impl == "R"
            else python_worker(impl, "W1" if w.n_boot else "W2", folder)
        )
        try:
            report, peak, arrays = launch(command, folder, impl, candidate if impl == "candidate" else None)
        except (RuntimeError, FileNotFoundError) as error:
            outcomes.append(Outcome(impl, None, False, math.nan, math.nan, {}, note=f"failed: {error}"))
            continue
        if impl in ("gengen", "candidate", "numpy"):
            seconds = report["perm_seconds"] + report.get("boot_seconds", 0.0)
            outcomes.append(Outcome(impl, seconds, False, peak, report["setup_rss_kb"] / 1024, report, arrays))
        else:
            per = report["per_call"]
            total = w.pairs * (per["obs"] + w.n_perm * per["perm"] + w.n_boot * per["boot"])
            calls = report["calls"]
            note = (
                f"extrapolated from {calls['perm']} permutation and {calls['boot']} resample calls "
                f"({per['perm'] * 1e3:.2f} / {per['boot'] * 1e3:.2f} ms per call)"
            )
            report["perm_seconds"] = w.pairs * (per["obs"] + w.n_perm * per["perm"])
            report["boot_seconds"] = w.pairs * w.n_boot * per["boot"]
            outcomes.append(Outcome(impl, total, True, peak, report["setup_rss_kb"] / 1024, report, arrays, note))
    check_resampling(outcomes, scores, covar, perm_idx, boot_idx, loop_runs)
    return outcomes


def compare_to_numpy(g: dict[str, np.ndarray], n: dict[str, np.ndarray]) -> tuple[bool, dict[str, Any]]:
    """gengen's arrays against numpy's: r and interval bounds to 1e-10, p-values exactly equal."""
    checks: dict[str, Any] = {
        "r max|diff|": float(np.abs(g["r"] - n["r"]).max()),
        "p unequal": int((g["p"] != n["p"]).sum()),
        "p_fwer unequal": int((g["p_fwer"] != n["p_fwer"]).sum()),
    }
    ok = checks["r max|diff|"] <= 1e-10 and checks["p unequal"] == 0 and checks["p_fwer unequal"] == 0
    if "ci_low" in g:
        checks["ci max|diff|"] = float(
            max(np.abs(g["ci_low"] - n["ci_low"]).max(), np.abs(g["ci_high"] - n["ci_high"]).max())
        )
        ok = ok and checks["ci max|diff|"] <= 1e-10
    return ok, checks


def check_resampling(
    outcomes: list[Outcome],
    scores: np.ndarray,
    covar: np.ndarray,
    perm_idx: np.ndarray,
    boot_idx: np.ndarray,
    loop_runs: int,
) -> None:
    """Fills each outcome's ``report["check"]``: agreement with gengen (numpy) or with numpy's r* (loops)."""
    by = {o.impl: o for o in outcomes if o.seconds is not None}
    if "gengen" not in by:
        return
    g = by["gengen"].arrays
    if "numpy" in by:
        n = by["numpy"].arrays
        ok, checks = compare_to_numpy(g, n)
        by["numpy"].report["check"] = (ok, checks)
        by["gengen"].report["check"] = (ok, {"reference": "numpy (same permutation and resample indices)"})
        if "candidate" in by:
            by["candidate"].report["check"] = compare_to_numpy(by["candidate"].arrays, n)
    a, b = np.triu_indices(scores.shape[2], 1)
    observed_all = g["r"][:loop_runs, a, b].ravel()
    r_star_all = bl.numpy_permutation_r_star(scores[:loop_runs], covar[:loop_runs], perm_idx)  # (runs, P, pairs)
    r_star_all = r_star_all.transpose(0, 2, 1).reshape(-1, perm_idx.shape[0])
    r_boot_all = (
        bl.numpy_bootstrap_replicates(scores[:loop_runs], covar[:loop_runs], boot_idx).transpose(0, 2, 1)
        if len(boot_idx)
        else None
    )
    if r_boot_all is not None:
        r_boot_all = r_boot_all.reshape(-1, boot_idx.shape[0])
    for impl in ("pingouin", "R"):
        if impl not in by:
            continue
        arrays = by[impl].arrays
        done = len(arrays["observed"])
        checks = {
            "pairs checked": done,
            "r max|diff|": float(np.abs(arrays["observed"] - observed_all[:done]).max()),
            "r* max|diff|": float(np.abs(arrays["r_star"] - r_star_all[:done]).max()),
        }
        if r_boot_all is not None and arrays["r_boot"].size:
            checks["r_boot max|diff|"] = float(np.abs(arrays["r_boot"] - r_boot_all[:done]).max())
        ok = all(v <= 1e-10 for k, v in checks.items() if k != "pairs checked")
        by[impl].report["check"] = (ok, checks)


def gam_workload(plan: Plan, folder: Path) -> list[Outcome]:
    y, control = bl.gam_columns(plan.w3_columns, bl.W3_N)
    write_inputs(folder, {"loop_budget": plan.loop_budget, "k": 10}, {"y": y, "control": control})
    outcomes = []
    for impl in ("gengen", "pygam", "mgcv"):
        command = (
            ["Rscript", str(R_SCRIPT), str(folder), "gam"] if impl == "mgcv" else python_worker(impl, "W3", folder)
        )
        try:
            report, peak, arrays = launch(command, folder, impl)
        except (RuntimeError, FileNotFoundError) as error:
            outcomes.append(Outcome(impl, None, False, math.nan, math.nan, {}, note=f"failed: {error}"))
            continue
        setup = report["setup_rss_kb"] / 1024
        if "pending" in report:
            note = f"pending: stats.residualise(fit='gam') not available yet ({report['pending'][:80]})"
            outcomes.append(Outcome(impl, None, False, peak, setup, report, note=note))
        elif "per_call" in report:
            per = report["per_call"]["column"]
            note = f"extrapolated from {report['calls']['column']} columns ({per * 1e3:.1f} ms per column)"
            outcomes.append(Outcome(impl, per * plan.w3_columns, True, peak, setup, report, arrays, note))
        else:
            outcomes.append(Outcome(impl, report["seconds"], False, peak, setup, report, arrays))
    by = {o.impl: o for o in outcomes if o.seconds is not None}
    if "gengen" in by and "mgcv" in by:
        check_gam(by["gengen"], by["mgcv"])
    return outcomes


def check_gam(gengen: Outcome, mgcv: Outcome) -> None:
    """Residuals against mgcv's, column by column.

    Both choose λ by minimising the same GCV score numerically; where the residuals differ by more than 1e-3
    of their scale, the fit with the lower GCV score is the better one, and gengen's must not be worse.
    """
    theirs = mgcv.arrays["residuals"]
    done = theirs.shape[1]
    ours = gengen.arrays["residuals"][:, :done]
    scale = np.abs(theirs).max(axis=0)
    diff = np.abs(ours - theirs).max(axis=0)
    apart = diff > 1e-3 * scale
    score_ours, score_theirs = gengen.arrays["score"][:done], mgcv.arrays["score"]
    worse = apart & (score_ours > score_theirs * (1 + 1e-9))
    checks = {
        "columns": int(done),
        "median max|diff|": float(np.median(diff)),
        "columns apart (>1e-3 rel.)": int(apart.sum()),
        "of which gengen's GCV is lower": int((apart & ~worse).sum()),
    }
    mgcv.report["check"] = (not worse.any(), checks)


# ----------------------------------------------------------------------------------------------------------
# Roofline and scaling (measured in this process, gengen in-process)
# ----------------------------------------------------------------------------------------------------------


def throughput(work: Callable[[int], float], seconds: float, threads: int) -> float:
    """Units of work per second when ``work(thread)`` (returning the units done) runs on ``threads`` threads.

    numpy's generators, BLAS and gengen release the GIL, so the threads run on separate cores.
    """

    def loop(thread: int) -> tuple[float, float]:
        done, start = 0.0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            done += work(thread)
        return done, time.perf_counter() - start

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(loop, range(threads)))
    return sum(done for done, _ in results) / max(elapsed for _, elapsed in results)


def roofline(plan: Plan) -> dict[str, float]:
    """Random-draw and floating-point throughput of this machine, 1 and 2 threads (numpy, BLAS, gengen)."""
    from threadpoolctl import threadpool_limits

    from gengen import stats

    seconds = plan.roofline_seconds
    figures: dict[str, float] = {}
    size = 1 << 20
    generators = [np.random.Generator(np.random.SFC64(i)) for i in range(2)]
    # gengen's own generator (xoshiro256++ with Lemire's bounded draws): block permutations of W1's shape,
    # ⌈n/L⌉ − 1 bounded draws each.
    n, length = bl.W1.n, stats.default_block_length(bl.W1.n)
    per_perm = math.ceil(n / length) - 1
    seeds = itertools.count()

    def numpy_draws(thread: int) -> float:
        generators[thread].integers(0, 1 << 62, size)
        return float(size)

    def gengen_draws(thread: int) -> float:
        stats.permutation_indices(n, 20_000, scheme="block", seed=next(seeds))
        return 20_000.0 * per_perm

    a = np.random.default_rng(1).normal(size=(512, 512))
    left = np.random.default_rng(2).normal(size=(8, 100))  # [E Q]ᵀ of one W1 run
    right = np.random.default_rng(3).normal(size=(100, 1024))  # P E for 146 permutations
    x = np.random.default_rng(4).normal(size=20_000)

    def ddots(thread: int) -> float:
        for _ in range(64):
            x @ x
        return 2.0 * x.size * 64

    with threadpool_limits(1, user_api="blas"):
        for threads in (1, 2):
            figures[f"numpy SFC64 integer draws/s ({threads} thr)"] = throughput(numpy_draws, seconds, threads)
            figures[f"gengen xoshiro draws/s in block permutations ({threads} thr)"] = throughput(
                gengen_draws, seconds, threads
            )
            figures[f"dgemm GFLOP/s 512^3 ({threads} thr)"] = (
                throughput(lambda _: (a @ a, 2.0 * 512**3)[1], seconds, threads) / 1e9
            )
            figures[f"small GEMM (8x100x1024, W1 shape) GFLOP/s ({threads} thr)"] = (
                throughput(lambda _: (left @ right, 2.0 * 8 * 100 * 1024)[1], seconds, threads) / 1e9
            )
            figures[f"ddot GFLOP/s L2-resident 20k ({threads} thr)"] = throughput(ddots, seconds, threads) / 1e9
    return figures


def w1_permutation_work(w: bl.Workload) -> tuple[float, float]:
    """Flops and random draws the W1 permutation part needs at minimum.

    Per permutation and run: one dot product of length n per pair (the numerator) and k = 1 per permuted
    column (‖Qᵀ P e_b‖): 2n (pairs + m − 1) flops. Draws: the permutations are shared by all runs, ⌈n/L⌉ − 1
    bounded draws each.
    """
    pairs = w.m * (w.m - 1) // 2
    flops = w.runs * w.n_perm * 2.0 * w.n * (pairs + w.m - 1)
    length = math.ceil(w.n ** (1 / 3))
    draws = w.n_perm * (math.ceil(w.n / length) - 1.0)
    return flops, draws


@dataclass(frozen=True)
class ScalingRow:
    """One line of the scaling table: a change of one size, its cost before and after, per doubling."""

    what: str
    before: float
    after: float
    factor: float  # by how much the size grew (threads: 2)

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def per_doubling(self) -> float:
        """The cost ratio for a doubling of the size: ratio ** (1 / log2(factor))."""
        return self.ratio ** (1 / math.log2(self.factor))


def cpu_seconds(call: Callable[[], object], repeats: int = 3) -> float:
    """Best of ``repeats`` CPU seconds of this process for ``call()`` (run single-threaded by the callers).

    CPU time rather than wall time: other users of the machine slow the wall clock of a shared machine far
    more than this process's own CPU time.
    """
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def scaling(plan: Plan) -> list[ScalingRow]:
    """gengen's cost as threads, checkpoints, permutations, test sets and runs change.

    The size changes are timed on one thread, in CPU seconds (best of three); checkpoints use the default
    block length ⌈n^⅓⌉ and W1's numbers of permutations and replicates, and the free scheme (the tiled
    kernel, no block tables) is timed beside the block scheme as the linear baseline. The thread rows are
    wall-clock speed-ups.
    """
    from gengen import stats

    perms = plan.scaling_perms
    base_runs, base_n, base_m = (10 if plan.quick else 50), 100, 7

    def permutations(runs: int, n: int, m: int, n_perm: int, scheme: str = "block", threads: int = 1) -> Callable:
        scores, covar = bl.trajectories(runs, n, m, seed=7)
        return lambda: stats.permutation_test_batch(
            list(scores), list(covar), n_perm=n_perm, scheme=scheme, seed=1, family_wise=True, n_threads=threads
        )

    def bootstrap(runs: int, n: int, m: int, n_boot: int, threads: int = 1) -> Callable:
        scores, covar = bl.trajectories(runs, n, m, seed=7)
        return lambda: stats.bootstrap_ci_batch(
            list(scores), list(covar), n_boot=n_boot, scheme="block", seed=1, n_threads=threads
        )

    def wall(call: Callable) -> float:
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - start)
        return best

    rows = []
    for what, make in (
        (
            "permutation: 1 -> 2 threads (speed-up, wall)",
            lambda t: permutations(base_runs, base_n, base_m, perms, threads=t),
        ),
        ("bootstrap: 1 -> 2 threads (speed-up, wall)", lambda t: bootstrap(base_runs, base_n, base_m, perms // 5, t)),
    ):
        one, two = wall(make(1)), wall(make(2))
        rows.append(ScalingRow(what, two, one, 2.0))
    # Checkpoints at W1's numbers of permutations and replicates: the block tables' O(n²/L) build is paid
    # once per run, so how much it weighs depends on how many permutations share it.
    sizes = (100, 200, 400, 1000)
    for label, make in (
        ("block permutations", lambda n: permutations(base_runs, n, base_m, plan.w1.n_perm)),
        (
            "free permutations (tiled kernel, linear baseline)",
            lambda n: permutations(base_runs, n, base_m, plan.w1.n_perm, "free"),
        ),
        ("block bootstrap", lambda n: bootstrap(base_runs, n, base_m, plan.w1.n_boot)),
    ):
        times = [cpu_seconds(make(n)) for n in sizes]
        for (n0, t0), (n1, t1) in itertools.pairwise(zip(sizes, times, strict=True)):
            length0, length1 = stats.default_block_length(n0), stats.default_block_length(n1)
            rows.append(ScalingRow(f"{label}: n {n0} -> {n1} (L {length0} -> {length1})", t0, t1, n1 / n0))
    base = cpu_seconds(permutations(base_runs, base_n, base_m, perms))
    pairs = lambda m: m * (m - 1) // 2  # noqa: E731
    for what, call, factor in (
        ("permutations 1x -> 2x", permutations(base_runs, base_n, base_m, 2 * perms), 2.0),
        (
            f"test sets 7 -> 10, pairs {pairs(7)} -> {pairs(10)}",
            permutations(base_runs, base_n, 10, perms),
            pairs(10) / pairs(7),
        ),
        (f"runs {base_runs} -> {2 * base_runs}", permutations(2 * base_runs, base_n, base_m, perms), 2.0),
    ):
        rows.append(ScalingRow(what, base, cpu_seconds(call), factor))
    return rows


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} d"
    if seconds >= 3_600:
        return f"{seconds / 3_600:.1f} h"
    return f"{seconds:.3g} s"


def print_table(title: str, outcomes: list[Outcome]) -> None:
    print(f"\n## {title}\n")
    print(
        "| implementation | wall time | gengen/other (time) | speed-up of gengen | perm / boot | CPU time (speed-up) "
        "| peak RSS MB (after import) | numbers | note |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    gengen = next((o for o in outcomes if o.impl == "gengen" and o.seconds is not None), None)
    for o in outcomes:
        ratio = speed = "—"
        if gengen is not None and o.seconds is not None:
            ratio = f"{gengen.seconds / o.seconds:.3g}"
            speed = f"{o.seconds / gengen.seconds:,.3g}×"
        parts = "—"
        if "perm_seconds" in o.report:
            parts = f"{fmt_seconds(o.report['perm_seconds'])} / {fmt_seconds(o.report.get('boot_seconds'))}"
        check = o.report.get("check")
        numbers = "—" if check is None else ("agree" if check[0] else "DIFFER") + " " + json.dumps(check[1])
        rss = f"{o.peak_rss_mb:.0f} ({o.setup_rss_mb:.0f})" if not math.isnan(o.peak_rss_mb) else "—"
        wall = fmt_seconds(o.seconds) + (" (extrap.)" if o.extrapolated else "")
        cpu = "—"
        if "cpu_seconds" in o.report:
            cpu = fmt_seconds(o.report["cpu_seconds"])
            if gengen is not None and "cpu_seconds" in gengen.report:
                cpu += f" ({o.report['cpu_seconds'] / gengen.report['cpu_seconds']:.3g}×)"
        print(f"| {o.impl} | {wall} | {ratio} | {speed} | {parts} | {cpu} | {rss} | {numbers} | {o.note} |")


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        memory = next(
            line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
        ).split()[1]
        memory_gb = int(memory) / 1024**2
    except (OSError, StopIteration):
        memory_gb = math.nan
    load = os.getloadavg()[0]
    idle = ", ".join(f"{100 * share:.0f}%" for share in idle_shares())
    return (
        f"{os.cpu_count()} CPUs ({model}), {memory_gb:.0f} GiB RAM; at start: load average {load:.1f}, "
        f"idle per CPU over 1 s {idle} (work of other users on a CPU slows the 2-thread figures)"
    )


def idle_shares(seconds: float = 1.0) -> list[float]:
    """Fraction of ``seconds`` each CPU spent idle (from /proc/stat); empty where unavailable."""

    def sample() -> list[tuple[int, int]]:
        rows = [line.split() for line in Path("/proc/stat").read_text().splitlines() if line.startswith("cpu")]
        return [(int(r[4]) + int(r[5]), sum(int(v) for v in r[1:8])) for r in rows if r[0] != "cpu"]

    try:
        before = sample()
        time.sleep(seconds)
        after = sample()
    except OSError:
        return []
    return [(i1 - i0) / max(t1 - t0, 1) for (i0, t0), (i1, t1) in zip(before, after, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes; finishes in under a minute")
    parser.add_argument("--skip", nargs="*", default=[], help="parts to skip: W1 W2 W3 roofline scaling pingouin R")
    parser.add_argument(
        "--candidate",
        type=Path,
        help="a folder holding another build of the gengen package (e.g. an unpacked wheel), timed on W1 and "
        "W2 as 'candidate' beside the installed one and checked the same way",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.task, Path(args.data))
        return

    plan = make_plan(args.quick)
    began = time.perf_counter()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# gengen comparison ({'quick' if plan.quick else 'full'}), {when}")
    print(f"machine: {machine()}")
    loops = "pingouin" not in args.skip and "R" not in args.skip
    results: dict[str, list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="gengen-bench-") as tmp:
        folder = Path(tmp)
        if "W1" not in args.skip:
            w = plan.w1
            results["W1"] = resampling_workload(plan, w, folder / "W1", 128, loops, args.candidate)
            print_table(
                f"W1: {w.runs} runs × (1 ID + {w.m} OOD) × {w.n} checkpoints, {w.pairs} pairs, "
                f"{w.n_perm:,} block permutations + {w.n_boot:,} moving-block bootstrap replicates per pair",
                results["W1"],
            )
        if "W2" not in args.skip:
            w = plan.w2
            results["W2"] = resampling_workload(
                plan, w, folder / "W2", 16, loops and plan.with_w2_loops, args.candidate
            )
            print_table(
                f"W2: {w.runs} run × (1 ID + {w.m} OOD) × {w.n:,} checkpoints, {w.pairs:,} pairs, "
                f"{w.n_perm:,} block permutations",
                results["W2"],
            )
        if "W3" not in args.skip:
            results["W3"] = gam_workload(plan, folder / "W3")
            print_table(
                f"W3: GAM residualisation (GCV, k = 10), {plan.w3_columns:,} columns × {bl.W3_N} checkpoints",
                results["W3"],
            )
    if "roofline" not in args.skip and "W1" in results:
        figures = roofline(plan)
        print("\n## Roofline (this machine, measured now)\n")
        for name, value in figures.items():
            print(f"- {name}: {value:,.3g}")
        w = plan.w1
        flops, draws = w1_permutation_work(w)
        print(f"\nW1 permutation part: {flops:.3g} flops, {draws:.3g} random draws (see w1_permutation_work).\n")
        print("| implementation | W1 permutation time | GFLOP/s | % of roofline: dgemm | small GEMM | ddot |")
        print("| --- | --- | --- | --- | --- | --- |")
        draw_floor = draws / figures["gengen xoshiro draws/s in block permutations (2 thr)"]
        for o in results["W1"]:
            seconds = o.report.get("perm_seconds") if o.seconds is not None else None
            if not seconds or o.extrapolated:
                continue
            shares = [
                100 * max(flops / (figures[name] * 1e9), draw_floor) / seconds
                for name in (
                    "dgemm GFLOP/s 512^3 (2 thr)",
                    "small GEMM (8x100x1024, W1 shape) GFLOP/s (2 thr)",
                    "ddot GFLOP/s L2-resident 20k (2 thr)",
                )
            ]
            print(
                f"| {o.impl} | {fmt_seconds(seconds)} | {flops / seconds / 1e9:.2f} | "
                + " | ".join(f"{share:.1f}%" for share in shares)
                + " |"
            )
    if "scaling" not in args.skip:
        runs = 10 if plan.quick else 50
        print(
            f"\n## Scaling (gengen, {runs} runs × 7 OOD × 100 checkpoints unless changed, default block length "
            f"⌈n^⅓⌉, {plan.scaling_perms:,} permutations / {plan.scaling_perms // 5:,} replicates, checkpoints at "
            f"W1's {plan.w1.n_perm:,} / {plan.w1.n_boot:,}; size changes in CPU seconds on 1 thread, best of 3)\n"
        )
        print("| change | before | after | ratio | per doubling |\n| --- | --- | --- | --- | --- |")
        for row in scaling(plan):
            print(
                f"| {row.what} | {fmt_seconds(row.before)} | {fmt_seconds(row.after)} | {row.ratio:.2f} | "
                f"{row.per_doubling:.2f} |"
            )
    print(f"\ntotal {time.perf_counter() - began:.0f} s")
    if "W1" in results:
        by = {o.impl: o for o in results["W1"]}
        g = by.get("gengen")

        def speed(impl: str) -> str:
            o = by.get(impl)
            if g is None or g.seconds is None or o is None or o.seconds is None:
                return "n/a"
            ratio = o.seconds / g.seconds
            return f"{ratio:.3g}" if ratio < 1000 else f"{ratio:.0f}"

        if by.get("pingouin") is not None and by["pingouin"].extrapolated:
            print("(the pingouin time is extrapolated from a timed subsample of its calls; see the W1 table)")
        numpy = by.get("numpy")
        if g is not None and numpy is not None and "cpu_seconds" in g.report and "cpu_seconds" in numpy.report:
            print(f"W1 CPU time, numpy / gengen: {numpy.report['cpu_seconds'] / g.report['cpu_seconds']:.3g}")
        print(f"W1 speedup vs numpy: {speed('numpy')}; vs pingouin: {speed('pingouin')}")


if __name__ == "__main__":
    main()
