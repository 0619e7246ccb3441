"""The cases of issue 33 (items 1-3) in one study, through the command line: conditions labelled as runs, a task's
test and val splits, a set nested in another, a 104-example set flipping between its class priors and
``_stderr`` columns. The verdict leaves out what it should and says so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from gengen.calibration.simulate import simulate_trajectories
from gengen.cli import app
from gengen.store.database import load

N_WSC = 104


def _study() -> pd.DataFrame:
    frames = []
    for m, model in enumerate(["small", "large"]):
        for r, label in enumerate(["zero-shot seed=1", "zero-shot seed=2", "five-shot seed=1"]):
            scores = simulate_trajectories(n=30, n_testsets=4, shared=0.3, seed=50 * m + r, model=model)
            wide = scores.pivot(index="step", columns="testset", values="value")
            wide = wide.rename(columns={"ood_1": "task_test", "ood_2": "hans"})
            rng = np.random.default_rng(7 * m + r)
            wide["task_val"] = wide["task_test"] + rng.normal(0, 0.004, len(wide))
            wide["hans_lexical_nonent"] = wide["hans"] + rng.normal(0, 0.006, len(wide))
            counts = rng.integers(45, 60, size=len(wide))
            counts[::3] = np.where(np.arange(len(counts[::3])) % 2 == 0, 38, 66)  # on the priors at 10 of 30
            wide["wsc"] = counts / N_WSC
            long = wide.reset_index().melt(id_vars="step", var_name="testset", value_name="value")
            long = long.assign(model=model, run=label, metric="acc")
            p = long["value"].clip(0.01, 0.99)
            stderr = long.assign(metric="acc_stderr", value=np.sqrt(p * (1 - p) / (N_WSC - 1)))
            frames += [long, stderr]
    return pd.concat(frames, ignore_index=True)


def test_the_issue_cases_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    _study().to_csv(path, index=False)
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")])
    assert ingested.exit_code == 0, ingested.output
    stored = load(tmp_path / "store")
    assert set(stored["metric"]) == {"acc"} and stored["stderr"].notna().all()  # _stderr rows became stderr
    assert set(stored.drop_duplicates("run").set_index("run")["shots"]) == {0, 5}  # read from the labels

    out = tmp_path / "analysis"
    result = runner.invoke(app, ["analyse", str(tmp_path / "store"), "--id", "id", "--metric", "acc", "--n-boot",
                                 "99", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    pairs = pd.read_csv(out / "pairs.csv")
    related = pairs.loc[pairs["related"], ["testset_a", "testset_b", "related_reason"]].drop_duplicates()
    assert {(a, b) for a, b, _ in related.itertuples(index=False)} == {
        ("hans", "hans_lexical_nonent"),
        ("task_test", "task_val"),
    }
    # wsc: on its priors at 10 of 30 checkpoints, counted as no information there
    wsc = pairs[(pairs["testset_a"] == "wsc") | (pairs["testset_b"] == "wsc")]
    assert (wsc["n_informative"] <= 20).all()
    assert "wsc: on its class priors (0.365 / 0.635" in result.output
    # conditions: five-shot has one run per model and is never pooled with zero-shot's two seeds
    pooled = pd.read_csv(out / "pooled.csv")
    assert set(pooled["shots"]) == {0} and set(pooled["pooled_over"]) == {"seed: 1, 2"}
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["groups"] == ["large shots=5", "large shots=0", "small shots=5", "small shots=0"]
    assert verdict["settings"]["pooled_over"]["small shots=0"] == (
        "2 runs pooled as replicates: zero-shot seed=1, zero-shot seed=2"
    )
    assert "2 pair(s) of related test sets" in verdict["text"] and "are left out" in verdict["text"]
    verdict_pairs = pd.read_csv(out / "verdict_pairs.csv")
    left = {frozenset(pair) for pair in verdict_pairs[["testset_a", "testset_b"]].itertuples(index=False)}
    assert frozenset(("task_test", "task_val")) not in left and frozenset(("hans", "hans_lexical_nonent")) not in left
    assert len(left) == 21 - 2  # 7 OOD test sets, their 21 pairs less the related two
    for table in (pairs, verdict_pairs, pooled):
        for column in [c for c in table.columns if c.startswith("p_") and table[c].dtype.kind == "f"]:
            assert (table[column].dropna() > 0).all(), column
