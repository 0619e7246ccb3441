"""``group_estimates`` built column-wise (several runs pooled in one pass) equals the per-pair loop it replaced
(issue 27): each pair's runs through :func:`gengen.analyse.pooled.run_variances` and
:func:`gengen.stats.meta.fisher_meta`, one dict per row."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.across.heterogeneity import (
    INDEPENDENT,
    POOLED,
    SIEVE,
    _run_rows,
    _text,
    group_estimates,
    heterogeneity_table,
    pairwise_differences,
)
from gengen.analyse.pooled import run_variances
from gengen.stats.meta import fisher_meta


def per_pair_group_estimates(pairs: pd.DataFrame) -> pd.DataFrame:
    """The code of ``group_estimates`` before issue 27."""
    rows = _run_rows(pairs)
    keys = ["family", "model", "size", "shots"]
    shots_per_model = rows.groupby("model", dropna=False)["shots"].nunique(dropna=False)
    several_shots = set(shots_per_model.index[shots_per_model > 1])
    has_se = "se_z" in rows.columns and np.isfinite(rows["se_z"].to_numpy(dtype=float)).any()
    out: list[dict[str, Any]] = []
    for key, cell in rows.groupby(keys, sort=False, dropna=False):
        family, model, size, shots = key
        unit = str(model) if model not in several_shots else f"{model} shots={_text(shots)}"
        identity = {"unit": unit, "family": family, "model": model, "size": size, "shots": shots}
        if cell["run"].nunique() == 1:
            r = cell["r_partial"].to_numpy(dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                if has_se:
                    variance = cell["se_z"].to_numpy(dtype=float) ** 2
                    method = SIEVE
                    df = cell["df_sieve"].to_numpy(dtype=float)
                else:
                    dof = cell["n"].to_numpy(dtype=float) - 3.0 - cell["k"].to_numpy(dtype=float)
                    variance = np.where(dof > 0, 1.0 / dof, np.nan)
                    method, df = INDEPENDENT, np.full(len(cell), np.inf)
                z = np.arctanh(np.where(np.abs(r) < 1, r, np.nan))
            for a, b, r_i, z_i, v_i, df_i in zip(cell["testset_a"], cell["testset_b"], r, z, variance, df, strict=True):
                out.append(
                    {**identity, "testset_a": a, "testset_b": b, "n_runs": 1, "r": r_i, "z": z_i, "variance": v_i}
                    | {"df": df_i, "variance_method": method}
                )
            continue
        for (a, b), pair_rows in cell.groupby(["testset_a", "testset_b"], sort=False):
            variance_runs, variance_df, _ = run_variances(pair_rows)
            meta = fisher_meta(
                pair_rows["r_partial"].to_numpy(),
                pair_rows["n"].to_numpy(),
                pair_rows["k"].to_numpy(),
                variance=variance_runs,
                df=variance_df,
            )
            r_random = meta.r_random
            out.append(
                {
                    **identity,
                    "testset_a": a,
                    "testset_b": b,
                    "n_runs": meta.n_runs,
                    "r": r_random,
                    "z": float(np.arctanh(r_random)) if np.isfinite(r_random) and abs(r_random) < 1 else np.nan,
                    "variance": meta.se_random**2,
                    "df": meta.df_fixed if np.isfinite(meta.df_fixed) else np.inf,
                    "variance_method": POOLED if variance_runs is not None else INDEPENDENT,
                }
            )
    columns = ["unit", *keys, "testset_a", "testset_b", "n_runs", "r", "z", "variance", "df", "variance_method"]
    return pd.DataFrame(out, columns=columns)


def simulated(seed: int, sieve: bool) -> pd.DataFrame:
    """Three models (one with one run, two with several; one model under two shot regimes), failed sieves,
    |r| = 1 and NaN estimates, untestable rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, runs, shots in (("solo", 1, (0,)), ("multi", 4, (0, 5)), ("pair", 2, (0,))):
        for shot in shots:
            for run in range(runs):
                for a in range(7):
                    for b in range(a + 1, 7):
                        r = float(np.tanh(rng.normal(0.2, 0.4)))
                        rows.append(
                            {
                                "level": "run",
                                "model": model,
                                "shots": shot,
                                "run": f"seed={run}",
                                "testset_a": f"t{b}" if rng.random() < 0.3 else f"t{a}",
                                "testset_b": f"t{a}" if rng.random() < 0.3 else f"t{b}",
                                "testable": bool(rng.random() > 0.05),
                                "r_partial": 1.0 if rng.random() < 0.03 else (np.nan if rng.random() < 0.03 else r),
                                "se_z": float(rng.uniform(0.05, 0.4)) if sieve and rng.random() > 0.1 else np.nan,
                                "df_sieve": float(rng.uniform(3, 40)),
                                "n": int(rng.integers(6, 60)),
                                "k": 1,
                            }
                        )
    table = pd.DataFrame(rows)
    return table[table["testset_a"] != table["testset_b"]].reset_index(drop=True)


@pytest.mark.parametrize("sieve", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_estimates_equal_the_per_pair_loop(seed: int, sieve: bool) -> None:
    pairs = simulated(seed, sieve)
    estimates = group_estimates(pairs)
    # the columns added since the loop (issue 33): each estimate's condition and the runs pooled into it
    added = ["condition", "runs"]
    reference = per_pair_group_estimates(pairs)
    pd.testing.assert_frame_equal(estimates.drop(columns=added), reference, rtol=1e-12)
    assert set(estimates["n_runs"]) > {1}
    assert (estimates["runs"].str.count(";") + 1 >= estimates["n_runs"]).all()  # a pair may lose a run
    # the tables built on them are unchanged too
    reference = reference.join(estimates[added])
    pd.testing.assert_frame_equal(heterogeneity_table(estimates), heterogeneity_table(reference), rtol=1e-12)
    pd.testing.assert_frame_equal(pairwise_differences(estimates), pairwise_differences(reference), rtol=1e-12)
