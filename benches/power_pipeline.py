"""The planner's predictions against the full pipeline (docs/power.md, "Validation of the global answer").

A pilot as a user would have one: ``--pilot-models`` models of 3 seeds, n = 20, N = 1,000, 12 OOD test sets
(:func:`gengen.study.power_global.simulate_testsets`, noise rho 0.5, 30% of pairs co-moving), analysed by
``gengen.analyse``'s defaults and read by :func:`gengen.study.power.pilot_inputs` (one pilot per schedule). For each
design named on the command line the script prints

- ``pair_closed``: the planner's closed form for the chosen pair (alpha/m, fixed effect, Student's t);
- ``global_pred`` and ``pair_sim``: :func:`gengen.study.power_global.predicted_global_power` at ``--predict-models``
  (the design's statistics through the verdict's steps: random effects, Holm for the pair);
- with ``--models`` > 0, ``global_pipe`` and ``pair_pipe``: :func:`gengen.study.power_global.pipeline_power`
  (``gengen.analyse`` on simulated learning curves, the verdict's steps, ``seed``), with Monte Carlo s.e.

ρ is what the pilot's design measures (:func:`gengen.calibration.learning_curves.design_partial_corr` of an n = 20
pilot cell of the same schedule at N = 1,000), as in docs/power.md. Rows are appended to ``--csv``.

    RAYON_NUM_THREADS=1 python benches/power_pipeline.py G1 P5 --models 200
    RAYON_NUM_THREADS=1 python benches/power_pipeline.py --predict-only Q1 Q2 Q3
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import pandas as pd

#: name: seeds, evaluations, schedule, examples, test sets, noise rho, share planted.
DESIGNS: dict[str, tuple[int, int, str, int, int, float, float]] = {
    "G1": (3, 40, "log", 1000, 12, 0.5, 0.55),
    "G2": (1, 40, "even", 1000, 12, 0.5, 0.3),
    "P5": (3, 40, "log", 1000, 8, 0.5, 0.05),
    "G5": (3, 20, "even", 1000, 12, 0.7, 0.7),
    "P6": (5, 20, "log", 1000, 12, 0.8, 0.015),
    "P7": (3, 20, "log", 5000, 12, 0.8, 0.55),
    "G6": (3, 20, "log", 1000, 12, 0.5, 0.83),
}


def parse(name: str) -> tuple[int, int, str, int, int, float, float]:
    """A named design, or ``seeds:n:schedule:N:K:rho:share``."""
    if name in DESIGNS:
        return DESIGNS[name]
    s, n, schedule, big_n, k, rho, share = name.split(":")
    return int(s), int(n), schedule, int(big_n), int(k), float(rho), float(share)


def pilot(schedule: str, models: int, seed: int, rho: float = 0.5, share: float = 0.3) -> object:
    """The pilot's inputs of one schedule (module docstring; ``--pilot-like-design``: the design's rho and share)."""
    import numpy as np

    import gengen
    from gengen.study.power import pilot_inputs
    from gengen.study.power_global import clique_sizes, scores_table, simulate_testsets

    rng = np.random.default_rng(np.random.SeedSequence([seed, 20]))
    cliques = clique_sizes(12, share)
    group = [
        simulate_testsets(
            n=20, schedule=schedule, n_examples=1000, runs=3, testsets=12, cliques=cliques, rho=rho, phi=0.9, rng=rng
        )
        for _ in range(models)
    ]
    analysis = gengen.analyse(scores_table(group, 1000), id_testset="id", n_boot=299, seed=seed)
    return pilot_inputs(analysis)


def main() -> None:
    from gengen.calibration.learning_curves import CurveCell, design_partial_corr
    from gengen.study.power import Design, _pair_prediction
    from gengen.study.power_global import clique_sizes, pipeline_power, predicted_global_power

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("designs", nargs="+")
    parser.add_argument("--models", type=int, default=0, help="pipeline models per design (0: predictions only)")
    parser.add_argument("--predict-models", type=int, default=400)
    parser.add_argument("--pilot-models", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7, help="seed of pipeline_power")
    parser.add_argument("--pilot-seed", type=int, default=7)
    parser.add_argument("--pilot-like-design", action="store_true", help="pilot at the design's noise rho and share")
    parser.add_argument("--csv", type=Path, default=None)
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    pilots: dict[tuple[str, float, float], object] = {}
    for name in options.designs:
        seeds, n, schedule, big_n, k, noise_rho, share = parse(name)
        key = (schedule, noise_rho, share) if options.pilot_like_design else (schedule, 0.5, 0.3)
        if key not in pilots:
            start = time.process_time()
            pilots[key] = pilot(schedule, options.pilot_models, options.pilot_seed, *key[1:])
            print(f"pilot {key}: {pilots[key]} ({time.process_time() - start:.0f} CPU s)", flush=True)
        inputs = pilots[key]
        rho = design_partial_corr(CurveCell("pilot", n=20, phi=0.9, schedule=schedule, n_examples=1000), noise_rho)
        closed, observed, information = _pair_prediction(inputs, Design(seeds, n, big_n, k), rho, 0.05)  # type: ignore[arg-type]
        predicted = predicted_global_power(
            observed, information, seeds=seeds, testsets=k, share=share, replicates=options.predict_models, seed=1
        )
        row = {
            "design": name,
            "pilot": "like design" if options.pilot_like_design else "rho 0.5, share 0.3",
            "seeds": seeds,
            "n": n,
            "schedule": schedule,
            "N": big_n,
            "testsets": k,
            "noise_rho": noise_rho,
            "share": share,
            "cliques": "+".join(map(str, clique_sizes(k, share))),
            "pilot_information": inputs.information,  # type: ignore[attr-defined]
            "rho_pilot": rho,
            "rho_observed": observed,
            "information": information,
            "pair_closed": closed,
            "global_pred": predicted.power,
            "global_pred_se": predicted.mc_se,
            "pair_sim": predicted.pair_power,
            "pair_sim_se": math.sqrt(predicted.pair_power * (1 - predicted.pair_power) / options.predict_models)
            if math.isfinite(predicted.pair_power)
            else float("nan"),
            "predict_models": options.predict_models,
        }
        if options.models:
            start = time.process_time()
            sim = pipeline_power(
                seeds=seeds,
                evaluations=n,
                n_examples=big_n,
                testsets=k,
                rho=noise_rho,
                share=share,
                replicates=options.models,
                schedule=schedule,
                seed=options.seed,
            )
            row |= {
                "global_pipe": sim.power,
                "global_pipe_se": sim.mc_se,
                "pair_pipe": sim.pair_power,
                "pair_pipe_se": math.sqrt(sim.pair_power * (1 - sim.pair_power) / options.models),
                "models": options.models,
                "seed": options.seed,
                "cpu_s": time.process_time() - start,
            }
        print(
            " ".join(
                f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}" for key, value in row.items()
            ),
            flush=True,
        )
        if options.csv is not None:
            frame = pd.DataFrame([row])
            frame.to_csv(options.csv, mode="a", header=not options.csv.exists(), index=False)


if __name__ == "__main__":
    main()
