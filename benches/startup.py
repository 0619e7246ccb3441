"""Start-up time of the ``gengen`` command line, beside the floors it cannot go below and the eager registration.

Usage (from the repository root)::

    .venv/bin/python benches/startup.py            # 15 rounds
    .venv/bin/python benches/startup.py --rounds 5

Every command is run as a fresh process, round-robin (one of each per round) so that the load of other users
of the machine falls on all of them alike; the table gives the best and the median wall time and the ratio of
the medians to ``gengen --help``. The baselines:

- ``python -c pass``: the interpreter alone (the floor);
- ``import typer``: the interpreter and the CLI framework (the floor of any typer CLI);
- ``eager registration``: ``gengen --help`` after importing every command module and the package's public
  names first, which is what the CLI did before its commands were loaded lazily (issue 18).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GENGEN = str(Path(PYTHON).with_name("gengen"))

EAGER = (
    "import sys, importlib\n"
    "import gengen.analyse, gengen.compare, gengen.store, gengen.stats, gengen._core\n"
    "import gengen.cli\n"
    "for name in gengen.cli.COMMAND_MODULES:\n"
    "    importlib.import_module('gengen.cli.' + name)\n"
    "sys.argv = ['gengen', '--help']\n"
    "gengen.cli.main()\n"
)

COMMANDS: dict[str, list[str]] = {
    "python -c pass (interpreter floor)": [PYTHON, "-c", "pass"],
    "python -c 'import typer' (CLI framework floor)": [PYTHON, "-c", "import typer"],
    "gengen --help": [GENGEN, "--help"],
    "gengen analyse --help": [GENGEN, "analyse", "--help"],
    "gengen status --help": [GENGEN, "status", "--help"],
    "gengen partial-corr --help (its module imports pandas)": [GENGEN, "partial-corr", "--help"],
    "eager registration, --help (before issue 18)": [PYTHON, "-c", EAGER],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    env = {**os.environ, "COLUMNS": "100"}
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, env=env, cwd=ROOT, check=False)
            times[name].append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# gengen start-up, {when}; {args.rounds} rounds; load average {load:.1f} at the end\n")
    reference = statistics.median(times["gengen --help"])
    print("| command | best | median | median / `gengen --help` |\n| --- | --- | --- | --- |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {min(values):.3f} s | {median:.3f} s | {median / reference:.2f} |")


if __name__ == "__main__":
    main()
