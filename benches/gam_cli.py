"""The GAM analysis of a Pythia-scale study through the library and through ``gengen analyse`` (issue 18).

The store is the one of ``benches/report.py`` (4 Pythia sizes × 64 tasks: two real, two made up from 410m).
Three fresh processes per round, round-robin:

- ``library call``: ``gengen.analyse(load_scores(store), fit="gam")`` in Python; the call itself is timed
  inside the process (``library call alone``) and the whole process from outside (start-up and imports too);
- ``gengen analyse --fit gam``: the command line, which also writes the tables to ``--out``.

Run: ``.venv/bin/python benches/gam_cli.py [--rounds 3]``. Wall and CPU seconds (user + system of the child,
from ``wait4``) are printed; on a shared machine compare the CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402

ID = "lambada_openai"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gengen-gam-cli-") as tmp:
        folder = Path(tmp)
        store = report.build_store(folder)
        library = (
            "import sys, time\n"
            "from gengen.analyse import analyse, load_scores\n"
            "start = time.perf_counter(); cpu = time.process_time()\n"
            f"analyse(load_scores({str(store)!r}), id_testset={ID!r}, fit='gam')\n"
            "print(time.perf_counter() - start, time.process_time() - cpu)\n"
        )
        results: dict[str, list[tuple[float, float]]] = {
            "library call alone (inside the process)": [],
            "library call, whole process": [],
            "gengen analyse --fit gam": [],
        }
        for round_ in range(args.rounds):
            wall, cpu, out = run_library(library)
            inside = tuple(float(v) for v in out.split()[-2:])
            results["library call alone (inside the process)"].append(inside)  # type: ignore[arg-type]
            results["library call, whole process"].append((wall, cpu))
            command = [report.GENGEN[0], "analyse", str(store), "--id", ID, "--fit", "gam"]
            results["gengen analyse --fit gam"].append(run_cli([*command, "--out", str(folder / f"out{round_}")]))
        print(f"# GAM analysis, 4 Pythia sizes × 64 tasks; {args.rounds} rounds; load {os.getloadavg()[0]:.1f}\n")
        print("| path | wall (median) | CPU s (median) |\n| --- | --- | --- |")
        for name, values in results.items():
            walls, cpus = zip(*values, strict=True)
            print(f"| {name} | {statistics.median(walls):.2f} s | {statistics.median(cpus):.2f} s |")


def run_library(code: str) -> tuple[float, float, str]:
    return child([sys.executable, "-c", code])


def run_cli(command: list[str]) -> tuple[float, float]:
    wall, cpu, _ = child(command)
    return wall, cpu


def child(command: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system, from wait4) of a child process, and its stdout."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=HERE.parent)
    assert process.stdout is not None
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command[:3])}: exit {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, stdout


if __name__ == "__main__":
    main()
