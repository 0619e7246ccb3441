"""Calibration of the global share of co-moving pairs: writes docs/calibration_global.csv (docs/calibration.md).

Run from the repository root (about 3 minutes of one core per cell: 999 sieve draws per replicate, and 20 null
data sets of 199 draws for the simulated null count; ``--cell i`` runs one cell, so that cells can run side by
side)::

    RAYON_NUM_THREADS=1 python benches/calibration_global.py --out docs
    RAYON_NUM_THREADS=1 python benches/calibration_global.py --out docs --runs
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gengen.calibration.global_share import GLOBAL_GRID, GLOBAL_GRID_RUNS, global_share_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--mixture-replicates", type=int, default=0)
    parser.add_argument("--run-draws", type=int, default=200, help="resamples of the bootstrap over runs")
    parser.add_argument("--n-boot", type=int, default=999)
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--cell", type=int, help="one cell of the grid (its position), to run cells in parallel")
    parser.add_argument(
        "--runs", action="store_true", help="the cells with three runs pooled (calibration_global_runs.csv)"
    )
    options = parser.parse_args()
    start = time.perf_counter()
    grid = GLOBAL_GRID_RUNS if options.runs else GLOBAL_GRID
    table = global_share_study(
        grid if options.cell is None else grid[options.cell : options.cell + 1],
        replicates=options.replicates,
        mixture_replicates=options.mixture_replicates,
        n_boot=options.n_boot,
        seed=options.seed,
        run_draws=options.run_draws,
    )
    options.out.mkdir(parents=True, exist_ok=True)
    name = "calibration_global_runs.csv" if options.runs else "calibration_global.csv"
    if options.cell is not None:  # cells run in parallel: concatenate their files in grid order
        name = name.replace(".csv", f"_{options.cell}.csv")
    table.round(4).to_csv(options.out / name, index=False)
    print(table.round(3).to_string())
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
