"""Issue 34 item 5: why the lagged test over-rejects at N = 30,000 on log-spaced item-level curves.

    python benches/lagged_large_n.py [REPLICATES] [N] [SCHEDULE]

Null replicates of the contract's item-level cell (n = 40, the default item effects), the main pair
(ood_a, ood_b) only. Variants, each a two-sided test at 0.05:

- ``lagged linear`` / ``lagged gam``: gengen's lagged test (index lag: y on [1, y(t-1), ID(t), ID(t-1)]);
- ``time linear`` / ``time gam``: the residuals on [1, ID] (linear or GAM) filtered into their standardised
  innovations under an OU-plus-white model in *training time* (gengen.stats.sieve_time.time_innovations, the
  Kalman filter the sieve's training-time correction fits), correlated and t-tested on n - 3 - k - 2 df;
- ``pure OU (index lag)`` / ``pure OU (time)``: the same two filters on the latent OU deviations alone
  (no curve, no measurement noise), the cell's own steps and length scale.

Prints one line per variant: rejections / replicates, rate ± MC s.e.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy import stats as sp_stats

from gengen.calibration.item_level import ItemCell, _ou, simulate_items
from gengen.calibration.learning_curves import TOTAL_STEPS
from gengen.stats import residualise
from gengen.stats.lagged import lagged_partial_corr_matrix
from gengen.stats.sieve_time import time_innovations


def t_reject(a: np.ndarray, b: np.ndarray, df: float) -> bool:
    r = float(np.corrcoef(a, b)[0, 1])
    t = r * np.sqrt(df / max(1.0 - r * r, 1e-300))
    return bool(2.0 * sp_stats.t.sf(abs(t), df) < 0.05)


def index_innovations(e: np.ndarray) -> np.ndarray:
    """Residuals of e_t on [1, e_(t-1)] (the lagged test's whitening without covariates)."""
    x = np.column_stack([np.ones(e.size - 1), e[:-1]])
    beta, *_ = np.linalg.lstsq(x, e[1:], rcond=None)
    return e[1:] - x @ beta


def main(replicates: int, n_examples: int, schedule: str) -> None:
    cell = ItemCell("diag", n=40, n_examples=n_examples, schedule=schedule, rhos=(0.0,))
    rng = np.random.default_rng(np.random.SeedSequence([34, 5, n_examples]))
    counts: dict[str, int] = {}

    def add(name: str, hit: bool) -> None:
        counts[name] = counts.get(name, 0) + int(hit)

    for _ in range(replicates):
        replicate = simulate_items(cell, 0.0, rng)
        scores = replicate.accuracy[0, 0]  # (n, 3): id, ood_a, ood_b
        n = scores.shape[0]
        x, y = scores[:, 0], scores[:, 1:]
        for fit in ("linear", "gam"):
            found = lagged_partial_corr_matrix(y, x, fit=fit)
            add(f"lagged {fit}", float(found.p_value[0, 1]) < 0.05)
            e = residualise(y, x, fit=fit).T
            w = time_innovations(e, replicate.steps.astype(float))
            add(f"time {fit}", t_reject(w[0], w[1], n - 3 - 1 - 2))
        steps = replicate.steps.astype(float)
        ou = _ou(rng, steps, cell.memory * TOTAL_STEPS, 2)
        add("pure OU (index lag)", t_reject(index_innovations(ou[0]), index_innovations(ou[1]), n - 1 - 3))
        w = time_innovations(ou, steps)
        add("pure OU (time)", t_reject(w[0], w[1], n - 3))
    se = np.sqrt(0.05 * 0.95 / replicates)
    print(f"N={n_examples} {schedule} n=40, {replicates} null replicates (MC s.e. at 0.05: {se:.3f})")
    for name, hits in counts.items():
        rate = hits / replicates
        print(f"  {name:22s} {hits:4d}/{replicates}  {rate:.3f} ± {np.sqrt(rate * (1 - rate) / replicates):.3f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 300, int(args[1]) if len(args) > 1 else 30_000, args[2] if len(args) > 2 else "log")
