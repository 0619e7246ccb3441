"""The global share's grid with every replicate's p-values and null draws kept (issue 33, second round).

``benches/calibration_global.py`` summarises each cell as it goes; this script keeps, per replicate, the pairs'
sieve p-values and the p-values of the 20 simulated null data sets (:func:`gengen.stats.share.null_p_values`,
the draws :func:`~gengen.stats.share.null_above_probability` counts), so that the interval and the test of
"share > 0" can be compared on the same draws without refitting (``benches/calibration_global_variants.py``).
The replicates are those of ``calibration_global.py`` at the same seed (same cell keys, same draws).

    RAYON_NUM_THREADS=1 python benches/calibration_global_draws.py --cell 0 --out /tmp/share2
"""

from __future__ import annotations

import argparse
import time
import zlib
from itertools import combinations
from pathlib import Path

import numpy as np

from gengen.calibration.global_share import GLOBAL_GRID, simulate_global
from gengen.stats import sieve_partial_corr_matrix
from gengen.stats.share import null_p_values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--n-boot", type=int, default=999)
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--cell", type=int, required=True)
    options = parser.parse_args()
    start = time.perf_counter()
    cell = GLOBAL_GRID[options.cell]
    rng = np.random.default_rng([options.seed, zlib.crc32(cell.label.encode())])
    a, b = np.array(list(combinations(range(cell.n_testsets), 2))).T
    p, null, r = [], [], []
    for _ in range(options.replicates):
        scores, id_scores = simulate_global(cell, rng)
        fit = sieve_partial_corr_matrix(
            scores, covar=id_scores, fit="linear", n_boot=options.n_boot, seed=int(rng.integers(2**31))
        )
        p.append(np.asarray(fit.p_value)[a, b])
        r.append(np.asarray(fit.r)[a, b])
        null.append(null_p_values(fit, id_scores, fit="linear", seed=int(rng.integers(2**31)))[:, a, b])
    options.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        options.out / f"global_draws_{options.cell}.npz",
        p=np.array(p),
        r=np.array(r),
        null=np.array(null, dtype=np.float32),
        a=a,
        b=b,
        label=cell.label,
        true_share=cell.true_share,
        cliques=np.array(cell.cliques, dtype=int),
    )
    print(f"{cell.label}: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
