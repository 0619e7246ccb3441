"""No p-value is ever written as 0 (issue 33, item 3): analytic tails that underflow are written as 1e-300 and
read "< 1e-300"; every other p is kept as computed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

import gengen
from gengen.across.verdict import build_verdict
from gengen.stats.pfloor import P_FLOOR, floor_p_columns, is_p_column, p_text


def test_floor_only_touches_p_columns_below_it() -> None:
    table = pd.DataFrame(
        {
            "p_value": [0.0, 1e-250, 0.5, np.nan],
            "mantel_p": [0.0, 0.1, 0.2, 0.3],
            "p_value_method": ["t", "t", "t", "t"],
            "r_partial": [0.0, 0.0, 0.0, 0.0],
            "p_adjusted_from": ["p_sieve"] * 4,
        }
    )
    out = floor_p_columns(table)
    assert out["p_value"].tolist()[:3] == [P_FLOOR, 1e-250, 0.5] and np.isnan(out["p_value"].iloc[3])
    assert out["mantel_p"].iloc[0] == P_FLOOR
    assert out["r_partial"].tolist() == [0.0] * 4
    assert not is_p_column("p_value_method") and not is_p_column("p_adjusted_from") and is_p_column("p")
    assert p_text(0.0) == p_text(P_FLOOR) == "< 1e-300" and p_text(0.0123) == "0.012"


def _near_identical(model: str, seed: int, n: int = 300) -> pd.DataFrame:
    """Two OOD sets sharing a noise 1e4 times their own: their partial correlation is 1 − 1e-8, whose t tail
    underflows (scipy's t.sf on the same statistic is 0.0)."""
    rng = np.random.default_rng(seed)
    id_score = np.linspace(0.2, 0.9, n) + rng.normal(0, 0.01, n)
    shared = rng.normal(0, 1e-2, n)
    wide = pd.DataFrame(
        {
            "id": id_score,
            "a": 0.5 * id_score + shared + rng.normal(0, 1e-6, n),
            "b": 0.3 * id_score + shared + rng.normal(0, 1e-6, n),
            "c": 0.4 * id_score + rng.normal(0, 1e-2, n),
        },
        index=pd.Index(np.arange(n) * 10, name="step"),
    )
    long = wide.reset_index().melt(id_vars="step", var_name="testset", value_name="value")
    return long.assign(model=model, run="main", metric="accuracy")


def test_underflowing_tails_are_written_at_the_floor(tmp_path: Path) -> None:
    table = pd.concat([_near_identical("m1", 1), _near_identical("m2", 2)], ignore_index=True)
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", inference="t-test",
                              leave_one_out=False)  # fmt: skip
    row = analysis.pairs[(analysis.pairs["testset_a"] == "a") & (analysis.pairs["testset_b"] == "b")].iloc[0]
    statistic, df = float(row["statistic"]), float(row["df"])
    assert scipy_stats.t.sf(abs(statistic), df) == 0.0  # the exact tail underflows in double precision
    assert row["p_value"] == P_FLOOR and row["p_adjusted"] == P_FLOOR
    analysis.to_dir(tmp_path / "analysis")
    # t-test rows carry no variance for the verdict (issue 34); a bare table of r, n and k does (1/(n - 3 - k)),
    # and there the common p underflows too
    bare = analysis.pairs.drop(columns=["estimand", "se_z"], errors="ignore")
    verdict = build_verdict(bare, n_perm=19)
    verdict.to_dir(tmp_path / "analysis")
    for name in ("pairs.csv", "verdict_pairs.csv"):
        written = pd.read_csv(tmp_path / "analysis" / name)
        for column in [c for c in written.columns if is_p_column(c)]:
            values = pd.to_numeric(written[column], errors="coerce").dropna()
            assert (values > 0).all(), (name, column)
    common = verdict.pairs.set_index(["testset_a", "testset_b"]).loc[("a", "b")]
    assert common["p_common"] == P_FLOOR and common["verdict"] == "consistent positive"
    record = json.loads((tmp_path / "analysis" / "verdict.json").read_text())
    assert all(example.get("p_common", 1) > 0 for examples in record["examples"].values() for example in examples)
