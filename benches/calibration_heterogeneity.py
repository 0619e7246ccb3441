"""Calibration of the between-model heterogeneity test and of the phase-difference test (issue 24).

Each replicate simulates M models (``gengen.calibration.simulate.simulate_trajectories``: ID learning curve, 3 OOD test
sets, AR(1) noise), runs the default analysis (AR-sieve, ``n_boot`` draws) and keeps each model's estimate of every
pair (``gengen.across.heterogeneity.group_estimates``); the rates are then computed from those estimates, so the
chi-squared and F references are compared on the same draws.

Cells (``KIND``): ``null`` (no shared noise in any model), ``same`` (the same shared noise ρ = 0.5 in every
model: equal non-zero partial correlations), ``size`` (ρ = 0 in half the models, 0.6 in the others), ``sign``
(ρ = 0.5 everywhere, ood_2 mirrored in half the models, so the pairs with ood_2 change sign).

Usage::

    python benches/calibration_heterogeneity.py models NAME M RUNS N PHI REPS N_BOOT KIND   # one cell
    python benches/calibration_heterogeneity.py phases NAME KIND REPS N PHI                 # null0 | power
    python benches/calibration_heterogeneity.py rates NAME...                                # from saved estimates
    python benches/calibration_heterogeneity.py figure OUT.png NAME...                       # p-value QQ plots

Estimates and p-values go to ``$GENGEN_CALIBRATION_DIR`` (default ``calibration-heterogeneity/``).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

FOLDER = Path(os.environ.get("GENGEN_CALIBRATION_DIR", "calibration-heterogeneity"))


def models_cell(name: str, m: int, runs: int, n: int, phi: float, reps: int, n_boot: int, kind: str) -> None:
    import gengen
    from gengen.across.heterogeneity import group_estimates
    from gengen.calibration.simulate import simulate_trajectories

    shared = {
        "null": [0.0] * m,
        "same": [0.5] * m,
        "size": [0.0 if g < m // 2 else 0.6 for g in range(m)],
        "sign": [0.5] * m,
    }[kind]
    FOLDER.mkdir(parents=True, exist_ok=True)
    start = time.time()
    for rep in range(reps):
        frames = []
        for g in range(m):
            scores = simulate_trajectories(
                n=n, n_testsets=3, phi=phi, shared=shared[g], n_runs=runs, seed=100000 * rep + g + 1, model=f"m{g}"
            )
            if kind == "sign" and g >= m // 2:
                flip = scores["testset"] == "ood_2"
                scores.loc[flip, "value"] = 1.0 - scores.loc[flip, "value"]
            frames.append(scores)
        analysis = gengen.analyse(
            pd.concat(frames, ignore_index=True),
            id_testset="id",
            metric="accuracy",
            n_boot=n_boot,
            seed=rep,
            pooling="meta" if runs > 1 else None,
        )
        group_estimates(analysis.pairs).assign(rep=rep).to_parquet(FOLDER / f"est_{name}_{rep}.parquet")
    print(json.dumps({"cell": name, "reps": reps, "seconds": round(time.time() - start, 1)}), flush=True)


def rates(name: str) -> dict[str, object]:
    from gengen.across.heterogeneity import heterogeneity_table, pairwise_differences

    files = sorted(glob.glob(str(FOLDER / f"est_{name}_*.parquet")))
    estimates = pd.concat([pd.read_parquet(file) for file in files], ignore_index=True)
    p_f, p_chi2, p_pairwise = [], [], []
    for _, rows in estimates.groupby("rep"):
        p_f.extend(heterogeneity_table(rows, adjust="none", across=("model",))["p_heterogeneity"])
        known = rows.assign(df=np.inf)
        p_chi2.extend(heterogeneity_table(known, adjust="none", across=("model",))["p_heterogeneity"])
        differences = pairwise_differences(rows, across=("model",))
        p_pairwise.extend(differences.groupby(["testset_a", "testset_b"])["p_difference_adjusted"].min())
    np.save(FOLDER / f"p_{name}.npy", np.asarray(p_f))

    def rate(p: list[float], alpha: float = 0.05) -> list[float]:
        value = float(np.mean(np.asarray(p) < alpha))
        return [round(value, 4), round(float(np.sqrt(value * (1 - value) / len(p))), 4)]

    return {
        "cell": name,
        "reps": int(estimates["rep"].nunique()),
        "tests": len(p_f),
        "median_df_sieve": round(float(estimates["df"].replace(np.inf, np.nan).median()), 1),
        "rate_F": rate(p_f),
        "rate_F_at_0.01": rate(p_f, 0.01),
        "rate_chi2": rate(p_chi2),
        "rate_any_pairwise_difference": rate(p_pairwise),
    }


def phases_cell(name: str, kind: str, reps: int, n: int, phi: float) -> None:
    """One run, 3 OOD test sets; ``power``: ood_1 and ood_2 share their shocks (ρ = 0.6) in the early half only."""
    from gengen.across.phases import compare_phases

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_phases import planted

    FOLDER.mkdir(parents=True, exist_ok=True)
    p = []
    for rep in range(reps):
        scores = planted(n=n, n_runs=1, rho=0.6 if kind == "power" else 0.0, phi=phi, seed=1000 + rep)
        table = compare_phases(scores, id_testset="id", seed=rep).table
        rows = table[table["level"] == "run"]
        if kind == "power":
            rows = rows[(rows["testset_a"] == "ood_1") & (rows["testset_b"] == "ood_2")]
        p.extend(rows["p_phase"])
    np.save(FOLDER / f"p_{name}.npy", np.asarray(p))
    value = float(np.mean(np.asarray(p) < 0.05))
    print(json.dumps({"cell": name, "kind": kind, "tests": len(p), "rate": value}), flush=True)


def figure(out: str, names: list[str]) -> None:
    """Uniform QQ plots of the null p-values of each cell (log scale: the tail that decides a test)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.4 * len(names), 3.4))
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        p = np.sort(np.load(FOLDER / f"p_{name}.npy"))
        p = p[np.isfinite(p)]
        expected = (np.arange(1, len(p) + 1) - 0.5) / len(p)
        ax.loglog(expected, np.maximum(p, 1e-4), ".", markersize=3)
        ax.plot([1e-4, 1], [1e-4, 1], color="grey", linewidth=0.8)
        ax.axvline(0.05, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(f"{name}: {np.mean(p < 0.05):.3f} below 0.05 (n = {len(p)})", fontsize=9)
        ax.set_xlabel("uniform quantile", fontsize=8)
        ax.set_ylabel("p-value", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "models":
        name, m, runs, n, phi, reps, n_boot, kind = args
        models_cell(name, int(m), int(runs), int(n), float(phi), int(reps), int(n_boot), kind)
    elif command == "phases":
        name, kind, reps, n, phi = args
        phases_cell(name, kind, int(reps), int(n), float(phi))
    elif command == "rates":
        for name in args:
            print(json.dumps(rates(name)), flush=True)
    elif command == "figure":
        figure(args[0], args[1:])
    else:
        raise SystemExit(f"unknown command {command!r}; expected models, phases, rates or figure")
