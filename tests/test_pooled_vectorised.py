"""The pooled table built in one vectorised pass per cell equals the per-pair loop it replaced (issue 27).

The reference below is the loop of ``meta_table`` before issue 27: each pair's rows sliced out of the cell,
:func:`gengen.analyse.pooled.testable_runs`, :func:`gengen.analyse.pooled.run_variances` and
:func:`gengen.stats.meta.fisher_meta` called per pair, one dict per pair.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen import stats
from gengen.analyse import analyse
from gengen.analyse import pooled as pooling
from gengen.analyse.options import Settings, make_settings
from gengen.analyse.pooled import POOLED_COLUMNS, _cells, _flagged_runs, meta_table, run_variances
from gengen.stats.meta import fisher_meta, fisher_meta_rows

PYTHIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pythia-lm-eval-v0.3"


def per_pair_meta_table(pairs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The pooled table computed pair by pair with :func:`fisher_meta` (the code before issue 27)."""
    runs = pairs[pairs["level"] == "run"]
    adjust = settings.p_adjust_method
    cell_tables = []
    for cell, cell_rows in _cells(runs, settings.by):
        if len(set(zip(cell_rows["model"], cell_rows["run"], strict=True))) < 2:
            continue
        rows: list[dict[str, Any]] = []
        for (a, b), all_rows in cell_rows.groupby(["testset_a", "testset_b"], sort=False):
            pair_rows, excluded = pooling.testable_runs(all_rows)
            base = {**cell, "testset_a": a, "testset_b": b, "metric": settings.metric}
            if len(pair_rows) < 2:
                rows.append(
                    {
                        **base,
                        "runs": "",
                        "n_total": 0,
                        "n_runs": len(pair_rows),
                        "runs_excluded": len(excluded),
                        "runs_flagged": _count_flagged(pair_rows),
                        "diagnostics": "; ".join([*excluded, "fewer than two testable runs: not pooled"]),
                        "significant_random": False,
                    }
                )
                continue
            variance, variance_df, variance_method = run_variances(pair_rows)
            result = fisher_meta(
                pair_rows["r_partial"].to_numpy(),
                pair_rows["n"].to_numpy(),
                pair_rows["k"].to_numpy(),
                ci_level=settings.ci_level,
                variance=variance,
                df=variance_df,
            )
            rows.append(
                {
                    **base,
                    "runs": ";".join(f"{m}/{r}" for m, r in zip(pair_rows["model"], pair_rows["run"], strict=True)),
                    "n_total": int(pair_rows["n"].sum()),
                    "mean_r": float(pair_rows["r_partial"].mean()),
                    **result.as_dict(),
                    "runs_excluded": len(excluded),
                    "runs_flagged": _count_flagged(pair_rows),
                    "diagnostics": "; ".join([*excluded, *_flagged_runs(pair_rows)]),
                    "variance_method": variance_method,
                }
            )
        table = pd.DataFrame(rows).reindex(columns=[*cell, *POOLED_COLUMNS])
        table["fit"] = "+".join(sorted(set(cell_rows["fit"].astype(str)))) if "fit" in cell_rows else settings.fit
        table["p_fixed_adjusted"] = stats.p_adjust(table["p_fixed"].to_numpy(dtype=float), method=adjust)
        table["p_random_adjusted"] = stats.p_adjust(table["p_random"].to_numpy(dtype=float), method=adjust)
        table["significant_random"] = table["p_random_adjusted"] < settings.alpha
        cell_tables.append(table)
    pooled = pd.concat(cell_tables, ignore_index=True)
    pooled["adjust"] = adjust
    pooled["method"] = settings.method
    return pooled[[*settings.by, *POOLED_COLUMNS, "adjust", "fit", "method"]]


def _count_flagged(pair_rows: pd.DataFrame) -> int:
    if "diagnostics" not in pair_rows.columns:
        return 0
    return sum(bool(str(text)) for text in pair_rows["diagnostics"].fillna(""))


def _settings(**options: Any) -> Settings:
    return make_settings(**{"id_testset": "lambada_openai", **options})


def simulated_pairs(seed: int, sieve: bool) -> pd.DataFrame:
    """A per-run pairs table with the awkward cases: untestable runs, failed sieves, |r| = 1, flagged runs,
    pairs with one run, NaN reasons, runs of several lengths."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("m1", "m2"):
        for run in range(rng.integers(2, 6) if model == "m1" else 3):
            for a in range(6):
                for b in range(a + 1, 6):
                    r = float(np.tanh(rng.normal(0.3, 0.4)))
                    if rng.random() < 0.05:
                        r = 1.0
                    n = int(rng.integers(8, 60))
                    se = float(rng.uniform(0.05, 0.4)) if sieve and rng.random() > 0.1 else float("nan")
                    testable = bool(rng.random() > 0.1)
                    reason = ["too little information", "", None, float("nan")][int(rng.integers(4))]
                    rows.append(
                        {
                            "level": "run",
                            "model": model,
                            "run": f"seed={run}",
                            "testset_a": f"t{a}",
                            "testset_b": f"t{b}",
                            "testable": testable,
                            "untestable_reason": "" if testable else reason,
                            "r_partial": float("nan") if rng.random() < 0.05 else r,
                            "se_z": se,
                            "df_sieve": float(rng.uniform(3, 40)) if rng.random() > 0.1 else float("inf"),
                            "n": n,
                            "k": 1,
                            "diagnostics": "spike at step 3" if rng.random() < 0.2 else "",
                            "fit": "linear",
                        }
                    )
    table = pd.DataFrame(rows)
    # one pair with a single run in m2, one where every run is untestable
    table = table[~((table["model"] == "m2") & (table["testset_a"] == "t0") & (table["run"] != "seed=0"))]
    table.loc[(table["testset_a"] == "t4") & (table["testset_b"] == "t5"), "testable"] = False
    return table.reset_index(drop=True)


@pytest.mark.parametrize("sieve", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pooled_table_equals_per_pair_loop_on_simulated_runs(seed: int, sieve: bool) -> None:
    pairs = simulated_pairs(seed, sieve)
    if not sieve:
        pairs = pairs.drop(columns=["se_z", "df_sieve"])
    settings = _settings(by=("model",))
    pd.testing.assert_frame_equal(meta_table(pairs, settings), per_pair_meta_table(pairs, settings), rtol=1e-12)


def test_pooled_table_equals_per_pair_loop_on_pythia(tmp_path: Path) -> None:
    if not PYTHIA.is_dir():
        pytest.skip("../shared/data/pythia-lm-eval-v0.3 is not there")
    from gengen.ingest import ingest
    from gengen.store.database import load

    ingest(PYTHIA, tmp_path / "study")
    scores = load(tmp_path / "study")
    rng = np.random.default_rng(0)
    second = scores.copy()
    second["run"] = second["run"].astype(str) + "-copy"
    second["value"] = second["value"] * (1 + rng.normal(0, 0.02, len(second)))
    # "main" and "main-copy" carry no seed: declared replicates, as the analysis refuses to guess
    table = pd.concat([scores, second], ignore_index=True)
    result = analyse(table, id_testset="lambada_openai", replicate_key="run")
    settings = _settings(by=tuple(result.settings.by))
    assert len(result.pooled) > 0
    assert set(result.pooled["pooled_over"]) == {"run labels: main, main-copy"}
    pooled = result.pooled.drop(columns="pooled_over")
    pd.testing.assert_frame_equal(pooled, per_pair_meta_table(result.pairs, settings), rtol=1e-12)


def test_fisher_meta_rows_equals_fisher_meta_row_by_row() -> None:
    rng = np.random.default_rng(5)
    r = np.tanh(rng.normal(0.2, 0.5, (40, 7)))
    r[rng.random(r.shape) < 0.2] = np.nan
    r[3] = np.nan
    r[4, 1:] = np.nan
    variance = rng.uniform(0.01, 0.3, r.shape)
    df = np.where(rng.random(r.shape) < 0.2, np.inf, rng.uniform(2, 30, r.shape))
    has_df = rng.random(40) < 0.7
    rows = fisher_meta_rows(r, variance, df, has_df, ci_level=0.9)
    for i in range(len(r)):
        one = fisher_meta(
            r[i], np.zeros(7), np.zeros(7), ci_level=0.9, variance=variance[i], df=df[i] if has_df[i] else None
        )
        for name, value in one.as_dict().items():
            np.testing.assert_allclose(rows[name][i], value, rtol=1e-13, atol=0, equal_nan=True, err_msg=f"{i} {name}")
