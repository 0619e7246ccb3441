"""Start-up time of the ``gengen`` command line, beside the floors it cannot go below and the eager registration.

Usage (from the repository root)::

    .venv/bin/python benches/startup.py            # 15 rounds
    .venv/bin/python benches/startup.py --rounds 5
    .venv/bin/python benches/startup.py --baseline-tree ../before   # also a checkout of another commit

``--baseline-tree`` adds ``gengen --help`` and ``gengen analyse --help`` run from another checkout's ``python/``
folder (its ``_core`` extension built or copied there), in the same rounds: a before/after of a change that moves
modules, measured side by side (issue 37).

Every command is run as a fresh process, round-robin (one of each per round) so that the load of other users
of the machine falls on all of them alike; the table gives the best and the median wall time and the ratio of
the medians to ``gengen --help``. The baselines:

- ``python -c pass``: the interpreter alone (the floor);
- ``import typer``: the interpreter and the CLI framework (the floor of any typer CLI);
- ``eager registration``: ``gengen --help`` after importing every command module and the package's public
  names first, which is what the CLI did before its commands were loaded lazily (issue 18);
- ``pydantic imported``: ``gengen analyse --help`` with pydantic (and typer's adapters) imported first, which
  is what it cost before the top-level group's ``--help`` flag stopped building a pydantic adapter (issue 27);
- ``rich.markdown imported``: ``gengen analyse --help`` with rich.markdown and rich.traceback imported first,
  which typer's help renderer imported before gengen loaded it with stand-ins for both (issue 27).

CPU seconds (user + system of each child) are given beside the wall time: on a shared machine they are the
steadier figure.
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
    "import gengen.analyse, gengen.across.compare, gengen.store.database, gengen.stats, gengen._core\n"
    "import gengen.cli\n"
    "for name in gengen.cli.COMMAND_MODULES:\n"
    "    importlib.import_module('gengen.cli.' + name)\n"
    "sys.argv = ['gengen', '--help']\n"
    "gengen.cli.main()\n"
)

# `gengen analyse --help` as it was before the group's --help flag stopped importing pydantic (issue 27).
WITH_PYDANTIC = (
    "import sys, pydantic, typer._adapters\n"
    "import gengen.cli\n"
    "sys.argv = ['gengen', 'analyse', '--help']\n"
    "gengen.cli.main()\n"
)

# `gengen analyse --help` as it was before the help renderer loaded without rich.markdown (issue 27).
WITH_MARKDOWN = (
    "import sys, rich.markdown, rich.traceback\n"
    "import gengen.cli\n"
    "sys.argv = ['gengen', 'analyse', '--help']\n"
    "gengen.cli.main()\n"
)

COMMANDS: dict[str, list[str]] = {
    "python -c pass (interpreter floor)": [PYTHON, "-c", "pass"],
    "python -c 'import typer' (CLI framework floor)": [PYTHON, "-c", "import typer"],
    "gengen --help": [GENGEN, "--help"],
    "gengen analyse --help": [GENGEN, "analyse", "--help"],
    "gengen analyse --help, pydantic imported (before issue 27)": [PYTHON, "-c", WITH_PYDANTIC],
    "gengen analyse --help, rich.markdown imported (before issue 27)": [PYTHON, "-c", WITH_MARKDOWN],
    "gengen status --help": [GENGEN, "status", "--help"],
    "gengen partial-corr --help (its module imports pandas)": [GENGEN, "partial-corr", "--help"],
    "eager registration, --help (before issue 18)": [PYTHON, "-c", EAGER],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout whose gengen runs beside this one")
    args = parser.parse_args()
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(ROOT / "python")}
    commands = {name: (command, env) for name, command in COMMANDS.items()}
    if args.baseline_tree is not None:
        baseline = args.baseline_tree.resolve() / "python"
        if not (baseline / "gengen" / "__init__.py").is_file():
            raise SystemExit(f"--baseline-tree: {baseline} has no gengen package")
        baseline_env = {**env, "PYTHONPATH": str(baseline)}
        main_call = "import sys; from gengen.cli import main; sys.argv[0] = 'gengen'; main()"
        for arguments in (["--help"], ["analyse", "--help"]):
            name = f"gengen {' '.join(arguments)}, baseline tree {args.baseline_tree}"
            commands[name] = ([PYTHON, "-c", main_call, *arguments], baseline_env)
            # The same call from this tree, so that the pair differs in the tree only (not in the entry point).
            commands[f"gengen {' '.join(arguments)}, this tree, same call"] = (
                [PYTHON, "-c", main_call, *arguments],
                env,
            )
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    start_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for _ in range(args.rounds):
        for name, (command, command_env) in commands.items():
            start = time.perf_counter()
            process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=command_env, cwd=ROOT
            )
            assert process.stderr is not None
            err = process.stderr.read()
            _, status, usage = os.wait4(process.pid, 0)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{name}: exit {status}\n{err.decode()[-2000:]}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    bytecode = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "not set"
    print(
        f"# gengen start-up, {when}; {args.rounds} rounds; load average {start_load:.1f} -> {load:.1f}; "
        f"PYTHONDONTWRITEBYTECODE {bytecode} (set: gengen's modules are compiled from source in every process)\n"
    )
    reference = statistics.median(times["gengen --help"])
    print(
        "| command | best | median | median / `gengen --help` | CPU median (user + system) |\n"
        "| --- | --- | --- | --- | --- |"
    )
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"| {name} | {min(values):.3f} s | {median:.3f} s | {median / reference:.2f} | "
            f"{statistics.median(cpu[name]):.3f} s |"
        )


if __name__ == "__main__":
    main()
