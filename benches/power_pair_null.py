"""Why the planner's chosen-pair prediction missed design P5 (docs/power.md): the pipeline's test off the null.

For each design (3 seeds, N = 1,000, 8 OOD test sets, one co-moving pair at noise rho 0.5, ``gengen simulate``'s
learning curves with AR(1) phi = 0.9 noise: :func:`gengen.study.power_global.simulate_testsets`) this analyses
``--models`` models with ``gengen.analyse``'s defaults and reports, on the 27 null pairs of each model:

- ``sd_z_over_se``: the spread of :math:`\\operatorname{artanh} r / \\mathrm{se}_z` (1 when the sieve's standard
  error is right), and ``var_z_over_mean_se2``: :math:`\\operatorname{Var}(\\operatorname{artanh} r)` over the mean
  :math:`\\mathrm{se}_z^2`;
- ``run_type1``: the per-run deciding p below 0.05; ``pooled_type1`` and ``pooled_type1_bonferroni``: the
  verdict's per-model estimate (seeds pooled with random effects) below 0.05 and below 0.05/28;
- ``median_information``: the median 1/se_z² of the run-level rows; ``chosen_power``: the co-moving pair's
  Holm-adjusted p below 0.05 among the model's 28 pairs (what the validation table calls simulated power).

    RAYON_NUM_THREADS=1 python benches/power_pair_null.py --out docs --models 60
    RAYON_NUM_THREADS=1 python benches/power_pair_null.py --steps-check 40

``--steps-check R`` tests R single runs of the log n = 40 design with the sieve directly, once with the runs'
steps (as ``gengen.analyse`` passes them: the training-time variance factor of issue 34 item 2) and once without
(the checkpoint index), on the same series, and prints the null pairs' spread of artanh r / se_z, their rate of
p < 0.05 and the quantiles of the sieve's ``time_inflation``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

DESIGNS = (("log", 20), ("log", 40), ("even", 20), ("even", 40))


def steps_check(runs: int, seed: int = 3) -> None:
    """The null pairs of ``runs`` log-spaced n = 40 runs tested with and without their steps (module docstring)."""
    from gengen.stats import sieve_partial_corr_matrix
    from gengen.study.power_global import simulate_testsets

    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(8, 1)
    null = ~((a == 0) & (b == 1))
    kept: dict[str, list[np.ndarray]] = {"with steps": [], "checkpoint index": []}
    inflation = []
    for run in range(runs):
        steps, counts = simulate_testsets(n=40, schedule="log", n_examples=1000, runs=1, testsets=8, cliques=(2,),
                                          rho=0.5, phi=0.9, rng=rng)  # fmt: skip
        x = counts[0] / 1000.0
        for name, options in (("with steps", {"steps": steps}), ("checkpoint index", {})):
            fit = sieve_partial_corr_matrix(x[:, 1:], covar=x[:, 0], fit="linear", n_boot=199, seed=run, **options)
            z, se = np.arctanh(np.asarray(fit.r)[a, b]), np.asarray(fit.se_z)[a, b]
            kept[name].append(np.c_[z[null], se[null], np.asarray(fit.p_value)[a, b][null]])
            if options:
                inflation.append(np.asarray(fit.time_inflation, dtype=float).ravel())
    for name, values in kept.items():
        table = np.concatenate(values)
        print(f"{name}: sd of artanh r / se_z {np.std(table[:, 0] / table[:, 1]):.3f}, "
              f"p < 0.05 in {np.mean(table[:, 2] < 0.05):.3f} of {len(table)} null pairs")  # fmt: skip
    quantiles = np.nanquantile(np.concatenate(inflation), [0.1, 0.5, 0.9])
    print("time_inflation 10/50/90%:", np.round(quantiles, 3))


def main() -> None:
    import gengen
    from gengen.across.global_share import _p_values
    from gengen.study.power_global import _chosen_pair_found, _verdict_global, scores_table, simulate_testsets

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--steps-check", type=int, default=0, help="runs of the with/without-steps check only")
    options = parser.parse_args()
    if options.steps_check:
        steps_check(options.steps_check)
        return
    warnings.simplefilter("ignore")
    rows = []
    for schedule, n in DESIGNS:
        start = time.perf_counter()
        rng = np.random.default_rng([options.seed, n, len(schedule)])
        group = [
            simulate_testsets(n=n, schedule=schedule, n_examples=1000, runs=3, testsets=8, cliques=(2,), rho=0.5,
                              phi=0.9, rng=rng)
            for _ in range(options.models)
        ]  # fmt: skip
        analysis = gengen.analyse(scores_table(group, 1000), id_testset="id", n_boot=299, seed=options.seed)
        runs = analysis.pairs[analysis.pairs["level"] == "run"]
        chosen = ((runs["testset_a"] == "ood00") & (runs["testset_b"] == "ood01")).to_numpy()
        null = runs[~chosen]
        z = np.arctanh(null["r_partial"].to_numpy(float))
        se = null["se_z"].to_numpy(float)
        _, estimates = _verdict_global(analysis.pairs, 0.05)
        p = _p_values(estimates)
        pooled_chosen = ((estimates["testset_a"] == "ood00") & (estimates["testset_b"] == "ood01")).to_numpy()
        rows.append(
            {
                "schedule": schedule,
                "n": n,
                "models": options.models,
                "null_rows": len(null),
                "sd_z_over_se": float(np.std(z / se)),
                "var_z_over_mean_se2": float(np.var(z) / np.mean(se**2)),
                "run_type1": float(np.mean(null["p_deciding"].to_numpy(float) < 0.05)),
                "pooled_type1": float(np.mean(p[~pooled_chosen] < 0.05)),
                "pooled_type1_bonferroni": float(np.mean(p[~pooled_chosen] < 0.05 / 28)),
                "median_information": float(np.median(1 / runs["se_z"].to_numpy(float) ** 2)),
                "chosen_power": float(np.mean(_chosen_pair_found(estimates, "ood00", "ood01", 0.05))),
                "seconds": round(time.perf_counter() - start),
            }
        )
        print(pd.DataFrame(rows).round(4).to_string(), flush=True)
    options.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).round(4).to_csv(options.out / "power_pair_null.csv", index=False)


if __name__ == "__main__":
    main()
