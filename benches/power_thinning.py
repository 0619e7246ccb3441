"""Can a pilot measure the planner's evaluation exponent on itself? (docs/power.md, "Why P5 misses")

The pilot of ``benches/power_pipeline.py`` (``--models`` models of 3 seeds, n = 20, N = 1,000, 12 OOD test sets,
noise rho 0.5, 30% of pairs co-moving, ``gengen.analyse``'s defaults) is analysed again with its own recorded
settings on every other checkpoint of each run (:func:`thin_scores`, n = 10). The exponent
``log(I_full / I_thin) / log(n_full / n_thin)`` from the medians of 1/se_z² over the testable run-level rows (the rows
:func:`gengen.study.power.pilot_inputs` reads) is then compared with the real growth from n = 20 to 40 measured on
the same generator (docs/power.md). Also printed: the medians of the rows' ``df`` - 1 (Fisher's n - 3 - k, less
what a GAM control costs) and the share of rows whose control is the GAM, in both analyses. ``--fit linear``
analyses the pilot and its thinning with the linear control (the exponent without the GAM's cap moving with n).
Rows are appended to ``--csv``.

    RAYON_NUM_THREADS=1 python benches/power_thinning.py --seeds 7 8 --csv docs/power_thinning.csv
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

#: Median information per run of the same generator at n = 40 (pilot seed 7; docs/power.md's table).
REAL_AT_40 = {"log": 14.9, "even": 7.13, "dense-early": 10.0}


def thin_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Every other checkpoint of each run: its steps in order, the first, third, fifth... (step 0 kept).

    >>> table = pd.DataFrame({"model": "m", "run": "1", "step": [0, 10, 20, 30, 40], "value": 0.5})
    >>> thin_scores(table)["step"].tolist()
    [0, 20, 40]
    """
    keys = ["model", "run"]
    steps = scores[[*keys, "step"]].drop_duplicates().sort_values([*keys, "step"])
    dropped = steps[steps.groupby(keys, sort=False).cumcount().to_numpy() % 2 == 1]
    marked = scores.merge(dropped.assign(_dropped=True), on=[*keys, "step"], how="left")
    return scores[~marked["_dropped"].fillna(False).to_numpy(bool)]


def run_rows(analysis: object) -> pd.DataFrame:
    """The testable run-level rows (those :func:`gengen.study.power.pilot_inputs` reads)."""
    pairs = analysis.pairs  # type: ignore[attr-defined]
    return pairs[(pairs["level"] == "run") & pairs["testable"].astype(bool)]


def summary(rows: pd.DataFrame) -> dict[str, float]:
    information = 1.0 / rows["se_z"].to_numpy(float) ** 2
    return {
        "n": float(rows["n"].median()),
        "information": float(np.nanmedian(information)),
        "df_minus_1": float(np.nanmedian(rows["df"].to_numpy(float) - 1.0)),
        "gam_share": float((rows["fit"].astype(str) == "gam").mean()) if "fit" in rows.columns else float("nan"),
    }


def main() -> None:
    import gengen
    from gengen.analyse.options import ANALYSIS_OPTIONS
    from gengen.study.power_global import clique_sizes, scores_table, simulate_testsets

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", nargs="+", default=["log", "even", "dense-early"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[7])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--fit", default="auto", choices=["auto", "linear"], help="the pilot's control")
    parser.add_argument("--csv", type=Path, default=None)
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    for seed in options.seeds:
        for schedule in options.schedules:
            start = time.process_time()
            rng = np.random.default_rng(np.random.SeedSequence([seed, 20]))  # the pilot of power_pipeline.py
            group = [
                simulate_testsets(
                    n=20, schedule=schedule, n_examples=1000, runs=3, testsets=12, cliques=clique_sizes(12, 0.3),
                    rho=0.5, phi=0.9, rng=rng,
                )
                for _ in range(options.models)
            ]  # fmt: skip
            pilot = gengen.analyse(scores_table(group, 1000), id_testset="id", n_boot=299, seed=seed, fit=options.fit)
            settings = pilot.settings
            again = {option.name: getattr(settings, option.name) for option in ANALYSIS_OPTIONS}
            again |= {"ood": settings.ood_resolved, "jobs": 1}
            thinned = gengen.analyse(thin_scores(pilot.scores), **again)
            full, thin = summary(run_rows(pilot)), summary(run_rows(thinned))
            exponent = math.log(full["information"] / thin["information"]) / math.log(full["n"] / thin["n"])
            clipped = min(max(exponent, 0.0), 1.0)
            row = {
                "schedule": schedule,
                "pilot_seed": seed,
                "models": options.models,
                "fit": options.fit,
                **{f"{key}_full": value for key, value in full.items()},
                **{f"{key}_thin": value for key, value in thin.items()},
                "exponent_thin": exponent,
                "at_40_thin": full["information"] * 2**clipped,
                "at_40_sqrt": full["information"] * 2**0.5,
                "at_40_real": REAL_AT_40[schedule] if seed == 7 and options.fit == "auto" else float("nan"),
                "cpu_s": time.process_time() - start,
            }
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
            if options.csv is not None:
                frame = pd.DataFrame([row]).round(4)
                frame.to_csv(options.csv, mode="a", header=not options.csv.exists(), index=False)


if __name__ == "__main__":
    main()
