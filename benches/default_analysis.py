"""The default analysis of 4 Pythia sizes × 64 tasks, beside the t-test analysis of the same store (issue 27).

The store is the one of ``benches/report.py`` (two real Pythia sizes, two made up from 410m; 4 groups × 2,016
pairs × 26–27 checkpoints). Per round, fresh processes, round-robin:

- ``library``: ``gengen.analyse(load_scores(store), id_testset=...)`` with every default (``fit="auto"``, the
  sieve, leave-one-out), the call alone timed inside the process (wall and ``process_time``, which counts the
  Rust threads too);
- ``library, --inference t-test``: the same with ``inference="t-test"``, the cheapest inference (the baseline);
- ``build_verdict of the default analysis``: in the first child, after the analysis, the verdict the command
  line adds (``compare`` across the four models: Cochran's Q, pairwise differences, Mantel tests with their
  chance levels), timed alone;
- ``gengen analyse``: the command line with every default, which also writes the tables and builds the verdict
  (``compare`` across the four models), timed from outside (wall, and user + system CPU from ``wait4``);
- ``gengen analyse --inference t-test``.

Run: ``.venv/bin/python benches/default_analysis.py [--rounds 3]``. On a shared machine compare the CPU seconds
and the default / t-test ratios of each round. The header says whether ``PYTHONDONTWRITEBYTECODE`` is set: then
every process compiles gengen's modules from source (~0.1 s CPU of each command line run, which an installed
package does not pay).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
from gam_cli import child  # noqa: E402

ID = "lambada_openai"


def library_code(store: Path, inference: str | None) -> str:
    """A child's code: the analysis timed alone, then (defaults only) the verdict of it timed alone."""
    extra = "" if inference is None else f", inference={inference!r}"
    verdict = (
        "from gengen.across.verdict import build_verdict\n"
        "import gengen.across.compare, gengen.across.heterogeneity\n"
        "start = time.perf_counter(); cpu = time.process_time()\n"
        "build_verdict(analysis)\n"
        "print(time.perf_counter() - start, time.process_time() - cpu)\n"
    )
    return (
        "import time\n"
        "from gengen.analyse import analyse, load_scores\n"
        f"scores = load_scores({str(store)!r})\n"
        "start = time.perf_counter(); cpu = time.process_time()\n"
        f"analysis = analyse(scores, id_testset={ID!r}{extra})\n"
        "print(time.perf_counter() - start, time.process_time() - cpu)\n" + (verdict if inference is None else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gengen-default-analysis-") as tmp:
        folder = Path(tmp)
        store = report.build_store(folder)
        results: dict[str, list[tuple[float, float]]] = {
            "library, defaults": [],
            "library, --inference t-test (baseline)": [],
            "build_verdict of the default analysis": [],
            "gengen analyse, defaults": [],
            "gengen analyse --inference t-test (baseline)": [],
        }
        load_before = os.getloadavg()[0]
        for round_ in range(args.rounds):
            for name, inference in (("library, defaults", None), ("library, --inference t-test (baseline)", "t-test")):
                _, _, out = child([sys.executable, "-c", library_code(store, inference)])
                lines = out.split("\n")
                timed = [line.split() for line in lines if len(line.split()) == 2]
                results[name].append((float(timed[0][0]), float(timed[0][1])))
                if inference is None:
                    results["build_verdict of the default analysis"].append((float(timed[1][0]), float(timed[1][1])))
            command = [report.GENGEN[0], "analyse", str(store), "--id", ID]
            target = folder / f"out{round_}"
            results["gengen analyse, defaults"].append(child([*command, "--out", str(target)])[:2])
            results["gengen analyse --inference t-test (baseline)"].append(
                child([*command, "--inference", "t-test", "--out", str(target) + "t"])[:2]
            )
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(
            f"# default analysis, 4 Pythia sizes × 64 tasks, {when}; {args.rounds} rounds; "
            f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}; "
            f"PYTHONDONTWRITEBYTECODE {'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'not set'}\n"
        )
        print(
            "| path | wall (median) | CPU s (median) | wall, each round | CPU, each round |\n"
            "| --- | --- | --- | --- | --- |"
        )
        for name, values in results.items():
            walls, cpus = zip(*values, strict=True)
            print(
                f"| {name} | {statistics.median(walls):.2f} s | {statistics.median(cpus):.2f} s | "
                f"{' / '.join(f'{v:.2f}' for v in walls)} | {' / '.join(f'{v:.2f}' for v in cpus)} |"
            )
        for path in ("library", "gengen analyse"):
            default = [cpu for _, cpu in results[next(k for k in results if k.startswith(path) and "default" in k)]]
            base = [cpu for _, cpu in results[next(k for k in results if k.startswith(path) and "baseline" in k)]]
            ratios = [d / b for d, b in zip(default, base, strict=True)]
            print(f"\n{path}: CPU default / t-test per round: {' / '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
