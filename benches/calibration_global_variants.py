"""The global share's interval and "share > 0" test compared on the kept draws of each cell (issue 33, round 2).

Reads ``global_draws_{cell}.npz`` of ``benches/calibration_global_draws.py`` and writes
``docs/calibration_global_variants.csv``: per cell and variant, the mean share, coverage of the planted share and of
the *visible* share (below), the mean width and "share > 0" (the interval's lower end above 0).

The visible share. Storey's count estimates :math:`E\\hat\\pi_1 \\approx \\frac1m \\sum_{i\\,\\text{non-null}}
(1 - P_i(p > \\lambda)/q_i)`: a non-null pair counts by how much less often than a null one its p-value exceeds
:math:`\\lambda` — fully when its test always finds it, not at all when the test cannot tell it from 0. That
is the share the data can show; with strong effects it equals the planted share, with weak ones it is smaller.
It is computed here from first principles: :math:`P_i(p > \\lambda)` is the non-null pairs' rate of
:math:`p > \\lambda` over all replicates of the cell, :math:`q_i` their mean simulated null probability.

    python benches/calibration_global_variants.py --draws /tmp/share2 --out docs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from gengen.stats.share import global_share

LAMBDA = 0.5


def _null_spread(null: np.ndarray, q: np.ndarray) -> float:
    """Standard deviation over the null draws of each draw's share against the other draws' null count."""
    above = null > LAMBDA  # (draws, m)
    draws = len(above)
    total = above.sum(axis=1)
    q_sum = q.sum()
    q_others = (q_sum * draws - total) / (draws - 1)  # each draw against the count of the other draws
    shares = 1.0 - total / q_others
    return float(np.std(shares, ddof=1))


def variants(path: Path) -> list[dict[str, object]]:
    data = np.load(path)
    p, null, a, b = data["p"], data["null"].astype(float), data["a"], data["b"]
    label, truth = str(data["label"]), float(data["true_share"])
    cliques = tuple(int(c) for c in data["cliques"])
    replicates, draws, m = null.shape
    member = np.full(int(max(a.max(), b.max())) + 1, -1)
    start = 0
    for index, size in enumerate(cliques):
        member[start : start + size] = index
        start += size
    nonnull = (member[a] >= 0) & (member[a] == member[b])
    q = np.mean(null > LAMBDA, axis=1)  # (replicates, m)
    visible = truth
    if nonnull.any():
        rate = np.mean(p[:, nonnull] > LAMBDA)
        visible = float(nonnull.sum() / m * (1 - rate / np.mean(q[:, nonnull])))
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for rep in range(replicates):
        spread = _null_spread(null[rep], q[rep])
        for name, variance in (
            ("corrected (default at 40+ checkpoints)", "corrected"),
            ("plain jackknife (default below 40)", "jackknife"),
        ):
            result = global_share(p[rep], a, b, null_above=q[rep], variance=variance)
            quantile = float(stats.t.ppf(0.975, result.n_testsets - 1))
            raw_low = result.share_unclipped - quantile * result.se
            rows.setdefault(name, []).append((result.share, result.ci_low, result.ci_high, raw_low))
            if variance == "corrected":
                se = max(result.se, spread)
                low = result.share_unclipped - quantile * se
                high = result.share_unclipped + quantile * se
                rows.setdefault("corrected, se at least the null draws' spread", []).append(
                    (result.share, float(np.clip(low, 0, 1)), float(np.clip(high, 0, 1)), low)
                )
    out = []
    for name, values in rows.items():
        share, low, high, raw_low = np.array(values).T
        out.append(
            {
                "cell": label,
                "variant": name,
                "replicates": replicates,
                "null_draws": draws,
                "true_share": round(truth, 4),
                "visible_share": round(visible, 4),
                "mean_share": float(share.mean()),
                "coverage": float(np.mean((low <= truth + 1e-12) & (truth - 1e-12 <= high))),
                "coverage_visible": float(np.mean((low <= visible + 1e-12) & (visible - 1e-12 <= high))),
                "lower_end_below_truth": float(np.mean(low <= truth + 1e-12)),
                "mean_width": float(np.mean(high - low)),
                "share_above_zero": float(np.mean(raw_low > 0)),
                "mc_se_share_above_zero": float(np.sqrt(max(np.mean(raw_low > 0), 0.05) * 0.95 / replicates)),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--draws", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    options = parser.parse_args()
    rows = [row for path in sorted(options.draws.glob("global_draws_*.npz")) for row in variants(path)]
    table = pd.DataFrame(rows)
    table.round(4).to_csv(options.out / "calibration_global_variants.csv", index=False)
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
