"""Scale benchmark of ``gengen report``: Pythia, 4 model sizes × 64 OOD tasks (issue 15).

The two real Pythia models in ``../shared/data/pythia-lm-eval-v0.3`` are ingested (read in place) into a
temporary store; two more sizes (1.4b and 12b) are made up by perturbing the 410m scores, for this benchmark
only. The analysis (defaults, ID = lambada_openai acc, every other task's acc as OOD) and the comparison are
written once; then ``gengen report`` is timed as a user runs it (a fresh process, ``--out x.html``) and the
size of the HTML file and of its figures folder is measured.

Run: ``.venv/bin/python benches/report.py [--repeat 3] [--keep DIR]``. Prints one line per measurement; the
CPU time (user + system of the report process) is the figure to compare on a shared machine, where the wall
time also counts other processes' turns.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "pythia-lm-eval-v0.3"
GENGEN = [str(Path(sys.executable).with_name("gengen"))]

#: Synthetic sizes made from the 410m model: (name, seed, noise sd, shift of the score per doubling of size).
SYNTHETIC = (("pythia-v1.1-1.4b", 1, 0.01, 0.02), ("pythia-v1.1-12b", 2, 0.015, 0.05))


def build_store(folder: Path) -> Path:
    """Ingest the real Pythia files and add the two synthetic sizes; return the store folder."""
    from gengen.store.database import Store

    store = folder / "store"
    subprocess.run([*GENGEN, "ingest", str(DATA), "--store", str(store), "-q"], check=True, cwd=ROOT)
    scores = Store(store).load()
    base = scores[scores["model"].str.endswith("410m")]
    extra = []
    for name, seed, noise, shift in SYNTHETIC:
        rng = np.random.default_rng(seed)
        fake = base[["run", "step", "testset", "metric", "value"]].copy()
        # A per-task offset keeps the tasks apart; noise per score makes the trajectories differ from 410m's.
        offset = {task: rng.normal(0, noise) for task in fake["testset"].unique()}
        bounded = fake["metric"].isin(["acc", "acc_norm", "pct_stereotype"])
        moved = fake["value"] + fake["testset"].map(offset) + rng.normal(0, noise, len(fake))
        moved = moved + np.where(bounded, shift * np.log1p(fake["step"]) / np.log1p(143000), 0.0)
        fake["value"] = np.where(bounded, moved.clip(0.0, 1.0), fake["value"] * (1 + rng.normal(0, noise, len(fake))))
        fake["model"] = name
        extra.append(fake)
    Store(store).write_scores(pd.concat(extra, ignore_index=True))
    return store


def analyse_once(store: Path, folder: Path) -> Path:
    """Run ``gengen analyse`` and ``gengen compare`` into ``folder/analysis``; return it."""
    out = folder / "analysis"
    start = time.perf_counter()
    subprocess.run(
        [*GENGEN, "analyse", str(store), "--id", "lambada_openai", "--out", str(out)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run([*GENGEN, "compare", str(out)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(f"analyse + compare (setup, not the target): {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out


def folder_size(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed report runs (the median is printed)")
    parser.add_argument("--keep", type=Path, help="write everything here instead of a temporary folder")
    options = parser.parse_args()
    folder = options.keep or Path(tempfile.mkdtemp(prefix="gengen-report-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        analysis = analyse_once(build_store(folder), folder)
        times, cpu = [], []
        html = folder / "report" / "pythia.html"
        for _ in range(options.repeat):
            shutil.rmtree(html.parent, ignore_errors=True)
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(
                [*GENGEN, "report", str(analysis), "--out", str(html)],
                check=True,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            times.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
        # Once more into the same folder: unchanged figures are reused, not drawn.
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [*GENGEN, "report", str(analysis), "--out", str(html), "-q"],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        warm = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        warm_cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
        figures = html.parent / f"{html.stem}_figures"
        print(f"report wall time (fresh process, median of {len(times)}): {statistics.median(times):.2f} s")
        print(f"report times: {', '.join(f'{t:.2f}' for t in times)} s")
        print(f"report CPU time (user + system, median): {statistics.median(cpu):.2f} s")
        print(f"report again into the same folder (figures reused): {warm:.2f} s wall, {warm_cpu:.2f} s CPU")
        print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(f"report.html size: {html.stat().st_size / 1e6:.2f} MB")
        if figures.is_dir():
            print(f"figures folder: {folder_size(figures) / 1e6:.2f} MB in {sum(1 for _ in figures.iterdir())} files")
    finally:
        if options.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
