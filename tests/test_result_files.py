"""The analysis folder after issue 27: its CSV tables are the bytes pandas writes, and ``summary.json``'s groups,
now counted for all groups at once, equal the per-group loop they replaced.

The reference loop below is ``Analysis.summary`` before issue 27: one pandas ``groupby`` slice per
(model, run), Python sets of the test-set names, ``idxmax`` of |r_partial|.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.analyse import analyse
from gengen.analyse.result import Analysis, group_summaries


def per_group_loop(table: pd.DataFrame, level: str) -> list[dict[str, Any]]:
    """The ``groups`` entries of one level, computed group by group (the code before issue 27)."""
    groups = []
    for (model, run), rows in table[table["level"] == level].groupby(["model", "run"], sort=False):
        strength = rows["r_partial"].abs()
        top = rows.loc[strength.idxmax()] if strength.notna().any() else None
        effect = rows["r_partial"]
        if "estimand" in rows.columns and "r_innovation" in rows.columns:
            effect = effect.where(rows["estimand"] != "r_innovation", rows["r_innovation"])
        decision: dict[str, Any] = {
            column: sorted(str(value) for value in rows[column].dropna().unique())
            for column in ("estimand", "p_adjusted_from", "p_deciding_method", "ci_method")
            if column in rows.columns
        }
        if "diagnostics" in rows.columns:
            decision["n_flagged"] = int((rows["diagnostics"].fillna("") != "").sum())
        if "testable" in rows.columns:
            decision["n_untestable"] = int((~rows["testable"].fillna(False).astype(bool)).sum())
        if "n_steps" in rows.columns:
            decision["n_steps"] = int(rows["n_steps"].iloc[0])
        groups.append(
            {
                "level": level,
                "model": model,
                "run": run,
                "n": int(rows["n"].iloc[0]),
                "k": int(rows["k"].iloc[0]),
                "n_testsets": len(set(rows["testset_a"]) | set(rows["testset_b"])),
                "n_pairs": len(rows),
                "n_significant": int(rows["significant"].sum()),
                "n_significant_positive": int((rows["significant"] & (effect > 0)).sum()),
                "n_significant_negative": int((rows["significant"] & (effect < 0)).sum()),
                "strongest_pair": (
                    None if top is None else [top["testset_a"], top["testset_b"], float(top["r_partial"])]
                ),
                **decision,
            }
        )
    return groups


def scores(seed: int, models: int = 2, runs: int = 3, steps: int = 24, ood: int = 5) -> pd.DataFrame:
    """A long table of learning curves: OOD scores follow the ID score with their own loadings and noise; one
    run has a test set on a plateau (its pairs are untestable) and one a spike at its last step."""
    rng = np.random.default_rng(seed)
    frames = []
    for model in range(models):
        for run in range(runs):
            id_score = 0.3 + 0.5 * (1 - np.exp(-np.arange(steps) / 6)) + rng.normal(0, 0.01, steps)
            values = {"id": id_score}
            for j in range(ood):
                values[f"t{j}"] = rng.uniform(0.3, 0.9) * id_score + rng.normal(0, 0.02, steps)
            if model == 0 and run == 0:
                values["t1"] = np.where(np.arange(steps) < steps - 3, 0.4, 0.6)
            if model == 1 and run == 1:
                values["t2"][-1] = 1.0
            for name, series in values.items():
                frames.append(
                    pd.DataFrame(
                        {
                            "model": f"m{model}",
                            "run": f"seed={run}",
                            "step": (np.arange(steps) + 1) * 10,
                            "testset": name,
                            "metric": "acc",
                            "value": np.clip(series, 0.0, 1.0),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


ANALYSES: dict[str, dict[str, Any]] = {
    "t-test": {"inference": ["t-test"]},
    "lagged": {"inference": ["lagged", "t-test"], "method": "spearman"},
    "pooled residuals": {"inference": ["t-test"], "pooling": ["meta", "residuals"], "fit": "linear"},
    "by model": {"inference": ["t-test"], "by": ["model"], "adjust": "BH"},
}


@pytest.fixture(scope="module", params=list(ANALYSES))
def analysis(request: pytest.FixtureRequest) -> Analysis:
    return analyse(scores(seed=len(request.param)), id_testset="id", **ANALYSES[request.param])


def test_summary_groups_equal_the_per_group_loop(analysis: Analysis) -> None:
    expected = [
        group
        for level, table in (
            ("run", analysis.pairs),
            ("across_runs", analysis.pairs),
            ("pooled_residuals", analysis.pooled_residuals),
        )
        if not table.empty
        for group in per_group_loop(table, level)
    ]
    assert analysis.summary()["groups"] == expected
    assert any(group.get("n_untestable") for group in expected)  # the constant test set's pairs


def test_group_summaries_of_awkward_rows_equal_the_loop() -> None:
    rng = np.random.default_rng(3)
    size = 400
    rows = pd.DataFrame(
        {
            "level": "run",
            "model": rng.choice(["a", "b", "c"], size),
            "run": rng.choice(["r1", "r2"], size),
            "testset_a": rng.choice([f"t{i}" for i in range(6)], size),
            "testset_b": rng.choice([f"t{i}" for i in range(6, 12)], size),
            "n": 30,
            "k": 1,
            "r_partial": np.where(rng.random(size) < 0.2, np.nan, rng.choice([-0.5, 0.5, 0.1, 0.0, -0.0], size)),
            "r_innovation": rng.normal(0, 0.3, size),
            "estimand": rng.choice(np.array(["r_partial", "r_innovation", None], dtype=object), size),
            "significant": rng.random(size) < 0.4,
            "testable": pd.array(rng.choice(np.array([True, False, None], dtype=object), size), dtype="boolean"),
            "diagnostics": rng.choice(np.array(["", "spike", None], dtype=object), size),
            "ci_method": rng.choice(np.array(["Fisher z", "bootstrap", None], dtype=object), size),
        }
    )
    rows.loc[(rows["model"] == "c") & (rows["run"] == "r2"), "r_partial"] = np.nan  # no strongest pair
    assert group_summaries(rows, "run") == per_group_loop(rows, "run")
    assert group_summaries(rows.iloc[:0], "run") == []


def test_the_tables_written_are_the_bytes_pandas_writes(analysis: Analysis, tmp_path: Path) -> None:
    written = analysis.to_dir(tmp_path)
    for name, table in (
        ("pairs", analysis.pairs),
        ("pooled", analysis.pooled),
        ("pooled_residuals", analysis.pooled_residuals),
    ):
        if table.empty:
            assert f"{name}.csv" not in written
            continue
        assert written[f"{name}.csv"].read_bytes() == table.to_csv(index=False).encode("utf-8"), name
