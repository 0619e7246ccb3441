"""Calibration across models and across pooled seeds on realistic learning curves (issue 34, item 4).

Every replicate draws runs of a ``"curves"`` cell of :mod:`gengen.simulate` (step 0 at chance, log-spaced
checkpoints, accuracies counted on N = 1,000 fixed examples, AR(1) 0.9 noise; ``docs/calibration.md``) and
analyses them with the public ``gengen.analyse`` (every default, ``n_boot`` sieve draws).

Cells (``KIND``):

* ``models``: 4 models, one run each, the same null structure in all four (ρ = 0): one pair, ood_a/ood_b.
  Recorded: Cochran's Q p-value (:func:`gengen.verdict.build_verdict`'s ``p_heterogeneity``) and the verdict's
  class, for ``inference="sieve"`` (the default) and ``inference="lagged"``. Every class but "undetermined" is
  a wrong verdict on a null pair.
* ``pooled``: one model, ``RUNS`` seeds; a third test set ood_c = (ood_a + ood_b)/2 co-moves with both, so the
  pair ood_a/ood_b is null beside two truly correlated pairs. Recorded: the pooled table's ``p_fixed`` and
  ``p_random`` of every pair.

Usage::

    python benches/calibration_inference.py models REPS N_BOOT [N] [SCHEDULE] > out.csv
    python benches/calibration_inference.py pooled REPS N_BOOT RUNS [N] [SCHEDULE] > out.csv
    python benches/calibration_inference.py rates out.csv

Seeds: replicate r draws from ``numpy.random.default_rng([34, r])``; analyse's seed is r.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd


def _models(reps: int, n_boot: int, n: int, schedule: str) -> pd.DataFrame:
    import gengen
    from gengen.learning_curves import curve_table
    from gengen.simulate import Cell, simulate
    from gengen.verdict import build_verdict

    cell = Cell(f"{schedule} n={n}", n=n, process="curves", schedule=schedule)
    rows = []
    for rep in range(reps):
        rng = np.random.default_rng([34, rep])
        table = curve_table(cell, [simulate(cell, 0.0, rng) for _ in range(4)])
        for inference in ("sieve", "lagged"):
            analysis = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=rep, inference=inference)
            verdict = build_verdict(analysis, n_perm=19)
            for row in verdict.pairs.itertuples(index=False):
                rows.append(
                    {
                        "kind": "models",
                        "cell": cell.label,
                        "rep": rep,
                        "inference": inference,
                        "pair": f"{row.testset_a}/{row.testset_b}",
                        "null": True,
                        "n_groups": row.n_groups,
                        "p_heterogeneity": row.p_heterogeneity,
                        "p_common": row.p_common,
                        "p_joint": getattr(row, "p_joint", np.nan),
                        "verdict": row.verdict,
                    }
                )
    return pd.DataFrame(rows)


def _pooled(reps: int, n_boot: int, runs: int, n: int, schedule: str) -> pd.DataFrame:
    import gengen
    from gengen.learning_curves import curve_table
    from gengen.simulate import Cell, simulate

    cell = Cell(f"{schedule} n={n}, {runs} seeds", n=n, process="curves", schedule=schedule, runs=runs)
    rows = []
    for rep in range(reps):
        rng = np.random.default_rng([34, rep])
        table = curve_table(cell, [simulate(cell, 0.0, rng)])
        wide = table.pivot_table(index=["model", "run", "step"], columns="testset", values="value").reset_index()
        wide["ood_c"] = (wide["ood_a"] + wide["ood_b"]) / 2.0
        long = wide.melt(id_vars=["model", "run", "step"], var_name="testset", value_name="value")
        long["metric"] = "acc"
        analysis = gengen.analyse(long, id_testset="id", n_boot=n_boot, seed=rep)
        for row in analysis.pooled.itertuples(index=False):
            pair = f"{row.testset_a}/{row.testset_b}"
            rows.append(
                {
                    "kind": "pooled",
                    "cell": cell.label,
                    "rep": rep,
                    "inference": "sieve",
                    "pair": pair,
                    "null": pair == "ood_a/ood_b",
                    "n_runs": row.n_runs,
                    "p_fixed": row.p_fixed,
                    "p_random": row.p_random,
                    "tau2": row.tau2,
                }
            )
    return pd.DataFrame(rows)


def _rate(p: pd.Series) -> str:
    p = p.dropna()
    if not len(p):
        return "–"
    rate = float((p < 0.05).mean())
    return f"{rate:.3f} ± {np.sqrt(rate * (1 - rate) / len(p)):.3f} (of {len(p)})"


def rates(path: str) -> None:
    """Type-I rates (α = 0.05, unadjusted) with Monte Carlo s.e., and the verdicts' classes on null pairs."""
    table = pd.read_csv(path)
    for (kind, cell, inference), part in table.groupby(["kind", "cell", "inference"]):
        null = part[part["null"]]
        if kind == "models":
            wrong = float((null["verdict"] != "undetermined").mean())
            print(
                f"{cell} | {inference} | Q type-I {_rate(null['p_heterogeneity'])} | wrong verdicts "
                f"{wrong:.3f} ± {np.sqrt(wrong * (1 - wrong) / len(null)):.3f} | "
                f"{null['verdict'].value_counts().to_dict()}"
            )
        else:
            print(f"{cell} | null pair | fixed {_rate(null['p_fixed'])} | random {_rate(null['p_random'])}")
            real = part[~part["null"]]
            print(f"{cell} | real pairs (power) | fixed {_rate(real['p_fixed'])} | random {_rate(real['p_random'])}")


def main(argv: list[str]) -> None:
    kind = argv[0]
    start = time.process_time()
    if kind == "rates":
        rates(argv[1])
        return
    reps, n_boot = int(argv[1]), int(argv[2])
    if kind == "models":
        n = int(argv[3]) if len(argv) > 3 else 20
        out = _models(reps, n_boot, n, argv[4] if len(argv) > 4 else "log")
    else:
        runs = int(argv[3])
        n = int(argv[4]) if len(argv) > 4 else 20
        out = _pooled(reps, n_boot, runs, n, argv[5] if len(argv) > 5 else "log")
    out.to_csv(sys.stdout, index=False)
    print(f"# CPU {time.process_time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
