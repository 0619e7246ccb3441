"""Calibration across models and across pooled seeds on realistic learning curves (issue 34, item 4).

Every replicate draws runs of a ``"curves"`` cell of :mod:`gengen.calibration.simulate` (step 0 at chance, log-spaced
checkpoints, accuracies counted on N = 1,000 fixed examples, AR(1) 0.9 noise; ``docs/calibration.md``) and
analyses them with the public ``gengen.analyse`` (every default, ``n_boot`` sieve draws).

Cells (``KIND``):

* ``models``: 4 models, one run each, the same null structure in all four (ρ = 0): one pair, ood_a/ood_b.
  Recorded: Cochran's Q p-value (:func:`gengen.across.verdict.build_verdict`'s ``p_heterogeneity``) and the verdict's
  class, for ``inference="sieve"`` (the default) and ``inference="lagged"``. Every class but "undetermined" is
  a wrong verdict on a null pair.
* ``pooled``: one model, ``RUNS`` seeds; a third test set ood_c = (ood_a + ood_b)/2 co-moves with both, so the
  pair ood_a/ood_b is null beside two truly correlated pairs. Recorded: the pooled table's ``p_fixed`` and
  ``p_random`` of every pair.

Usage::

    python benches/calibration_inference.py models REPS N_BOOT [N] [SCHEDULE] > out.csv
    python benches/calibration_inference.py pooled REPS N_BOOT RUNS [N] [SCHEDULE] > out.csv
    python benches/calibration_inference.py control REPS N_BOOT CELL ALT_REPS > out.csv   # CONTROL_CELLS
    python benches/calibration_inference.py rates out.csv

Seeds: replicate r draws from ``numpy.random.default_rng([34, r])``; analyse's seed is r.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
import pandas as pd


def _hull_se(pairs: pd.DataFrame) -> np.ndarray:
    """The standard error of Fisher's z that each row's reported interval implies: its wider half-width on the z
    scale over the t quantile on ``df_sieve`` (the interval is the hull of the leave-one-checkpoint-out ones)."""
    from scipy import stats as scipy_stats

    z = np.arctanh(pairs["r_partial"].to_numpy(dtype=float))
    low = np.arctanh(pairs["ci_low"].to_numpy(dtype=float))
    high = np.arctanh(pairs["ci_high"].to_numpy(dtype=float))
    level = pairs["ci_level"].to_numpy(dtype=float)
    quantile = scipy_stats.t.ppf(0.5 + level / 2, pairs["df_sieve"].to_numpy(dtype=float))
    return np.maximum(high - z, z - low) / quantile


def _models(reps: int, n_boot: int, n: int, schedule: str) -> pd.DataFrame:
    import gengen
    from gengen.across.verdict import build_verdict
    from gengen.calibration.learning_curves import curve_table
    from gengen.calibration.simulate import Cell, simulate

    cell = Cell(f"{schedule} n={n}", n=n, process="curves", schedule=schedule)
    rows = []
    for rep in range(reps):
        rng = np.random.default_rng([34, rep])
        table = curve_table(cell, [simulate(cell, 0.0, rng) for _ in range(4)])
        for inference in ("sieve", "lagged", "sieve, hull variance"):
            if inference != "sieve, hull variance":
                analysis = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=rep, inference=inference)
                verdict = build_verdict(analysis, n_perm=19)
                if inference == "sieve":
                    sieve_pairs = analysis.pairs
            else:  # the same sieve rows, each variance the one its (leave-one-out hull) interval implies
                verdict = build_verdict(sieve_pairs.assign(se_z=_hull_se(sieve_pairs)), n_perm=19)
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
    from gengen.calibration.learning_curves import curve_table
    from gengen.calibration.simulate import Cell, simulate

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


#: The control-choice cells (issue 34, item 3): (label, Cell keyword arguments, alternative ρ).
CONTROL_CELLS: dict[str, tuple[dict[str, Any], float]] = {
    "saturating white n=50": ({"n": 50, "coef_a": (0.0,), "shape": "saturating"}, 0.5),
    "ar1(0.9) n=40": ({"n": 40, "coef_a": (0.9,)}, 0.5),
    "curves log n=20": ({"n": 20, "process": "curves"}, 0.5),
    "curves saturating n=20": ({"n": 20, "process": "curves", "shape": "saturating"}, 0.5),
}


def _control(label: str, reps: int, alt_reps: int, n_boot: int) -> pd.DataFrame:
    """One replicate per row and control: the default (``fit="auto"``) beside the line and the capped GAM
    always, on the same draws; the deciding p, whether the row is flagged, the control auto chose, CPU time."""
    import gengen
    from gengen.calibration.learning_curves import curve_table
    from gengen.calibration.simulate import Cell, simulate

    kwargs, rho_alt = CONTROL_CELLS[label]
    cell = Cell(label, rhos=(0.0, rho_alt), **kwargs)
    rows = []
    for rho, count in ((0.0, reps), (rho_alt, alt_reps)):
        for rep in range(count):
            rng = np.random.default_rng([34, 3, int(rho * 10), rep])
            table = curve_table(cell, [simulate(cell, rho, rng)])
            for fit in ("auto", "linear", "gam"):
                start = time.process_time()
                analysis = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=rep, fit=fit)
                seconds = time.process_time() - start
                for row in analysis.pairs.itertuples(index=False):
                    rows.append(
                        {
                            "kind": "control",
                            "cell": label,
                            "rho": rho,
                            "rep": rep,
                            "fit": fit,
                            "chosen": row.fit,
                            "testable": bool(row.testable),
                            "p_deciding": getattr(row, "p_deciding", np.nan),
                            "flagged": bool(str(row.diagnostics or "")),
                            "seconds": seconds,
                        }
                    )
    return pd.DataFrame(rows)


def control_rates(table: pd.DataFrame) -> pd.DataFrame:
    """Per cell and control: type-I (all testable rows, unflagged rows), power at the alternative, the share
    of runs auto gave the GAM, CPU per analysis."""
    out = []
    for (cell, fit), part in table.groupby(["cell", "fit"], sort=False):
        part = part[part["testable"]]
        null, alt = part[part["rho"] == 0], part[part["rho"] > 0]
        unflagged = null[~null["flagged"]]
        reject = null["p_deciding"] < 0.05
        out.append(
            {
                "cell": cell,
                "control": fit,
                "null runs": len(null),
                "type-I": reject.mean(),
                "mc se": np.sqrt(reject.mean() * (1 - reject.mean()) / max(len(null), 1)),
                "type-I unflagged": (unflagged["p_deciding"] < 0.05).mean(),
                "flagged": null["flagged"].mean(),
                "power": (alt["p_deciding"] < 0.05).mean(),
                "alt runs": len(alt),
                "GAM share": (null["chosen"] == "gam").mean(),
                "type-I on runs left linear": (null.loc[null["chosen"] == "linear", "p_deciding"] < 0.05).mean(),
                "cpu s": part["seconds"].mean(),
            }
        )
    return pd.DataFrame(out)


def _rate(p: pd.Series) -> str:
    p = p.dropna()
    if not len(p):
        return "–"
    rate = float((p < 0.05).mean())
    return f"{rate:.3f} ± {np.sqrt(rate * (1 - rate) / len(p)):.3f} (of {len(p)})"


def rates(path: str) -> None:
    """Type-I rates (α = 0.05, unadjusted) with Monte Carlo s.e., and the verdicts' classes on null pairs."""
    table = pd.read_csv(path)
    if (table["kind"] == "control").all():
        print(control_rates(table).round(3).to_string(index=False))
        return
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
    if kind == "control":
        out = _control(argv[3], reps, int(argv[4]), n_boot)
    elif kind == "models":
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
