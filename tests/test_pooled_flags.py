"""A pooled row is flagged only when more of its runs are flagged than the runs' null rate explains (issue 34).

Under the null a run's rows carry diagnostics in up to 20% of cases (the contract's bound); "any of 10 runs
flagged" then fired on 38-56% of null pooled rows. The rule's tail is checked against the binomial sum written
out with ``math.comb``, and on a pooled table built from hand-made run rows.
"""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from gengen.analyse.options import make_settings
from gengen.analyse.pooled import RUN_FLAG_RATE, flagged_beyond_chance, meta_table


def binomial_tail(flagged: int, runs: int, rate: float) -> float:
    return sum(comb(runs, k) * rate**k * (1 - rate) ** (runs - k) for k in range(flagged, runs + 1))


@pytest.mark.parametrize("runs", [2, 3, 5, 10, 30])
def test_threshold_is_the_first_count_whose_binomial_tail_is_below_005(runs: int) -> None:
    for flagged in range(runs + 1):
        tail = binomial_tail(flagged, runs, RUN_FLAG_RATE)
        found = flagged_beyond_chance(flagged, runs)
        if flagged > 0 and tail < 0.05:
            assert found == pytest.approx(tail, rel=1e-12)
        else:
            assert found is None


def test_ten_runs_need_five_flagged_and_three_need_all() -> None:
    assert flagged_beyond_chance(4, 10) is None
    assert flagged_beyond_chance(5, 10) == pytest.approx(0.0327934976, rel=1e-9)
    assert flagged_beyond_chance(2, 3) is None
    assert flagged_beyond_chance(3, 3) == pytest.approx(0.008, rel=1e-12)


def _run_rows(flags: list[bool]) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "level": "run",
            "model": "m",
            "run": [f"seed={i}" for i in range(len(flags))],
            "testset_a": "a",
            "testset_b": "b",
            "testable": True,
            "untestable_reason": "",
            "r_partial": rng.uniform(-0.2, 0.2, len(flags)),
            "se_z": 0.2,
            "df_sieve": 30.0,
            "n": 40,
            "k": 1,
            "diagnostics": ["residual autocorrelation left" if flag else "" for flag in flags],
            "fit": "linear",
        }
    )


@pytest.mark.parametrize(("flagged", "noted"), [(0, False), (1, False), (4, False), (5, True), (10, True)])
def test_pooled_row_carries_the_count_and_a_note_only_beyond_chance(flagged: int, noted: bool) -> None:
    rows = _run_rows([True] * flagged + [False] * (10 - flagged))
    pooled = meta_table(rows, make_settings(id_testset="id"))
    row = pooled.iloc[0]
    assert row["runs_flagged"] == flagged and row["n_runs"] == 10
    note = str(row["diagnostics"] if isinstance(row["diagnostics"], str) else "")
    if noted:
        tail = binomial_tail(flagged, 10, RUN_FLAG_RATE)
        assert note.startswith(f"{flagged} of 10 runs flagged, more than their 20% null rate explains")
        assert f"binomial p = {tail:.2g}" in note and "residual autocorrelation left" in note
    else:
        assert note == ""
