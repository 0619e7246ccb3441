"""Conditions pooled as replicates against conditions kept apart (issue 33, item 1; docs/analysis.md, "What a run
is").

Each replicate simulates two models with two conditions each, one run per condition
(``gengen.calibration.simulate.simulate_trajectories``: 40 evenly spaced checkpoints, AR(1) φ = 0.9 noise, 3 OOD test
sets).
Case ``one``: the pair ood_1 / ood_2 has partial correlation ≈ 0.5 in condition A (shared noise 0.5) and 0 in B.
Case ``opposite``: ≈ +0.5 in A and −0.5 in B (ood_1 mirrored, 1 − value, in B). Each replicate is analysed twice
with the default analysis (``n_boot=199``): with the conditions hidden behind labels ``r0``/``r1`` declared
replicates (``replicate_key="run,seed"``, what gengen did before it read conditions) and with the labels
``zero-shot``/``five-shot`` read as conditions; the verdict's classes of the pair are counted.

Usage::

    python benches/condition_pooling.py one 40
    python benches/condition_pooling.py opposite 40
"""

from __future__ import annotations

import collections
import sys
import warnings

import numpy as np
import pandas as pd

import gengen
from gengen.across.verdict import build_verdict
from gengen.calibration.simulate import simulate_trajectories


def replicate(case: str, rep: int) -> dict[str, tuple[list[str], list[float]]]:
    """The pair's verdict classes and pooled random-effects p-values, pooled and per condition."""
    frames = []
    for m, model in enumerate(["a", "b"]):
        for c, label in enumerate(["zero-shot", "five-shot"]):
            shared = 0.5 if (c == 0 or case == "opposite") else 0.0
            run = simulate_trajectories(n=40, n_testsets=3, shared=shared, seed=1000 * rep + 10 * m + c, model=model)
            run = run.drop(columns=["seed", "shots"])
            if case == "opposite" and c == 1:
                mirrored = run["testset"] == "ood_1"
                run.loc[mirrored, "value"] = 1 - run.loc[mirrored, "value"]
            frames.append(run.assign(run=label))
    table = pd.concat(frames, ignore_index=True)
    out = {}
    hidden = table.assign(run=table["run"].map({"zero-shot": "r0", "five-shot": "r1"}))
    for how, data, options in (
        ("pooled", hidden, {"replicate_key": "run,seed", "by": "model"}),
        ("per condition", table, {}),
    ):
        result = gengen.analyse(data, id_testset="id", metric="accuracy", fit="linear", n_boot=199, seed=rep, **options)
        verdict = build_verdict(result, n_perm=19).pairs
        pair = verdict[(verdict["testset_a"] == "ood_1") & (verdict["testset_b"] == "ood_2")]
        pooled = result.pooled
        p_random = (
            pooled[(pooled["testset_a"] == "ood_1") & (pooled["testset_b"] == "ood_2")]["p_random"]
            if len(pooled)
            else pd.Series(dtype=float)
        )
        out[how] = (pair["verdict"].tolist(), p_random.tolist())
    return out


def main(case: str, reps: int) -> None:
    warnings.simplefilter("ignore")
    rows = [replicate(case, rep) for rep in range(reps)]
    for how in ("pooled", "per condition"):
        calls = collections.Counter(tuple(row[how][0]) for row in rows)
        significant = np.mean([bool(row[how][1]) and min(row[how][1]) < 0.05 for row in rows])
        print(f"{case} {how}: {dict(calls)}; pooled random-effects p < 0.05 for some model: {significant:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
