"""The default analysis of a 2-million-row long table, beside ``--inference t-test`` (issues 26 and 27).

The table is synthetic and long (``model,run,step,testset,metric,value``): ``--models`` × ``--runs`` ×
``--steps`` checkpoints × ``--testsets`` test sets of accuracies (default 5 × 25 × 250 × 64 = 2,000,000 rows),
learning curves as in :func:`baselines.trajectories` (a saturating ID curve, OOD scores that follow it with
their own loadings, a factor shared by half the test sets, AR(1) noise), written once as a CSV.

Each analysis is a fresh ``gengen analyse TABLE --id id_task --out DIR`` process, run one after the other
(default first); the table gives wall and CPU seconds (user + system of the child, from ``wait4``) and the
ratio of the default's to the t-test's, which the machine's load distorts less than either time alone.

Run: ``.venv/bin/python benches/large_table.py [--models 5 --runs 25 --steps 250 --testsets 64]``
(``--keep DIR`` keeps the table and the analysis folders; ``--only default`` skips the t-test).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
GENGEN = str(Path(sys.executable).with_name("gengen"))
ID = "id_task"


def long_table(models: int, runs: int, steps: int, testsets: int, seed: int = 0) -> pd.DataFrame:
    """The long score table: one row per model × run × step × test set (the ID task is one of the test sets)."""
    rng = np.random.default_rng(seed)
    # Checkpoints every 10 steps early, then further apart (as in a log-spaced schedule), strictly increasing.
    geometric = np.round(np.geomspace(10, 100_000, steps)).astype(np.int64)
    step_values = np.maximum.accumulate(np.maximum(geometric, 10 * np.arange(1, steps + 1)))
    step_values = step_values + np.cumsum(np.diff(step_values, prepend=0) <= 0)  # strictly increasing
    t = np.log(step_values) / np.log(step_values[-1])
    groups = models * runs
    id_curve = 0.3 + 0.5 * (1 - np.exp(-3 * t))[None, :] + rng.normal(0, 0.01, (groups, steps))
    shared = _ar1(rng, (groups, steps), 0.6, 0.01)
    noise = _ar1(rng, (groups, testsets - 1, steps), 0.5, 0.01)
    loadings = rng.uniform(0.3, 1.0, (groups, testsets - 1, 1))
    share = (np.arange(testsets - 1) < (testsets - 1) // 2)[None, :, None]
    ood = loadings * id_curve[:, None, :] + share * shared[:, None, :] + noise
    values = np.clip(np.concatenate([id_curve[:, None, :], ood], axis=1), 0.0, 1.0)  # (groups, testsets, steps)
    names = np.array([ID] + [f"task_{j:03d}" for j in range(1, testsets)])
    group_index = np.repeat(np.arange(groups), testsets * steps)
    return pd.DataFrame(
        {
            "model": np.array([f"model-{g // runs}" for g in range(groups)])[group_index],
            "run": np.array([f"seed={g % runs}" for g in range(groups)])[group_index],
            "step": np.tile(step_values, groups * testsets),
            "testset": np.tile(np.repeat(names, steps), groups),
            "metric": "acc",
            "value": values.ravel(),
        }
    )


def _ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float, sd: float) -> np.ndarray:
    noise = rng.normal(0, sd, shape)
    out = np.empty(shape)
    level = np.zeros(shape[:-1])
    for i in range(shape[-1]):
        level = phi * level + noise[..., i]
        out[..., i] = level
    return out


def run(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of a child process; exits with its stderr if it fails."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)}: exit {status}\n{err.decode()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--testsets", type=int, default=64)
    parser.add_argument("--keep", type=Path, help="folder to keep the table and the analyses in")
    parser.add_argument("--only", choices=["default", "t-test"], help="run one of the two analyses")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gengen-large-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        table = folder / "scores.csv"
        start = time.perf_counter()
        frame = long_table(args.models, args.runs, args.steps, args.testsets)
        frame.to_csv(table, index=False)
        print(
            f"# {len(frame):,} rows ({args.models} models × {args.runs} runs × {args.steps} steps × "
            f"{args.testsets} test sets), written in {time.perf_counter() - start:.1f} s; "
            f"load average {os.getloadavg()[0]:.1f} before\n"
        )
        results = {}
        for name, extra in (("default", []), ("t-test", ["--inference", "t-test"])):
            if args.only and args.only != name:
                continue
            command = [GENGEN, "analyse", str(table), "--id", ID, "--out", str(folder / f"analysis-{name}"), *extra]
            results[name] = run(command)
        print("| analysis | wall | CPU (user + system) |\n| --- | --- | --- |")
        for name, (wall, cpu) in results.items():
            print(f"| `gengen analyse` {name} | {wall:.1f} s | {cpu:.1f} s |")
        if len(results) == 2:
            print(
                f"\ndefault / t-test: wall {results['default'][0] / results['t-test'][0]:.2f}×, "
                f"CPU {results['default'][1] / results['t-test'][1]:.2f}×"
            )
        print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
