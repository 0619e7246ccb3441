"""Bounds declared once and checked where the value enters (issue 36, item 5 of "What to build").

Each case failed late before (a traceback in torch or SQLite, an ``OverflowError``, numpy's ``MemoryError``
after 20 s) or not at all (an ``inf`` stored, an empty frame for a study that does not exist).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gengen
from gengen.errors import ConfigError, GengenError, InputError, InvalidArgumentError
from gengen.stats import Gam, Linear
from gengen.store.database import Store
from gengen.study.config import parse_config

BASE: dict[str, Any] = {
    "study": {"name": "s", "id_testset": "t"},
    "models": [{"name": "m", "path": "org/m", "family": "opt", "size": "1"}],
    "task": {"train": {"source": "mnli"}},
    "testsets": [{"name": "t", "source": "mnli"}],
}


def _scores(n: int = 30, testsets: tuple[str, ...] = ("id", "a", "b", "c")) -> pd.DataFrame:
    rng = np.random.default_rng(36)
    trend = np.linspace(0.3, 0.8, n)
    rows = [
        {"model": "m", "run": "r", "step": 10 * i, "testset": t, "metric": "acc",
         "value": float(np.clip(level + rng.normal(0, 0.03), 0, 1))}
        for i, level in enumerate(trend) for t in testsets
    ]  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seeds", [[2**63], [2**64], [0, 2**63 + 5]])
def test_a_seed_beyond_2_to_the_63_is_refused_by_the_study_check(seeds: list[int]) -> None:
    with pytest.raises(
        ConfigError, match=r"training\.seeds\[\d\]: .* is above gengen's limit of 9,223,372,036,854,775,807"
    ):
        parse_config({**BASE, "training": {"seeds": seeds}}, base=Path.cwd())
    assert parse_config({**BASE, "training": {"seeds": [2**63 - 1]}}, base=Path.cwd()).training.seeds == (2**63 - 1,)


def test_a_data_seed_beyond_2_to_the_63_is_refused() -> None:
    data = {"shots": [8], "data_seeds": [2**63]}
    with pytest.raises(ConfigError, match=r"data_seeds\[0\]: .* is above gengen's limit"):
        parse_config({**BASE, "data": data}, base=Path.cwd())


@pytest.mark.parametrize("k", [201, 10**9, 2**64])
def test_a_gam_is_checked_when_made(k: int) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"k must be at most 200, got {k}") as error:
        Gam(k=k)
    assert error.value.option == "k"
    assert Gam(k=200).k == 200


def test_analyse_takes_the_typed_controls_as_the_statistics_do() -> None:
    df = _scores()
    typed = gengen.analyse(df, id_testset="id", inference="lagged", fit=Gam(k=5, method="reml"), progress=False)
    named = gengen.analyse(df, id_testset="id", inference="lagged", fit="gam", gam_k=5, gam_method="reml",
                           progress=False)  # fmt: skip
    pd.testing.assert_frame_equal(typed.pairs, named.pairs)
    assert typed.settings["fit"] == "gam" and typed.settings["gam_k"] == 5
    linear = gengen.analyse(df, id_testset="id", inference="lagged", fit=Linear(), progress=False)
    by_name = gengen.analyse(df, id_testset="id", inference="lagged", fit="linear", progress=False)
    pd.testing.assert_frame_equal(linear.pairs, by_name.pairs)
    with pytest.raises(GengenError, match=r"gam_k is given beside fit=Gam\(k=5"):
        gengen.analyse(df, id_testset="id", fit=Gam(k=5), gam_k=7, progress=False)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), 1e400, "inf"])
def test_write_scores_refuses_a_value_that_is_not_finite(tmp_path: Path, value: Any) -> None:
    store = Store(tmp_path / "s")
    row = {"model": "m", "step": 0, "testset": "t", "metric": "logprob", "value": -1.0}
    store.write_scores([row])
    before = store.path.read_bytes()
    with pytest.raises(InputError, match=r"row 1: column 'value': .* is not a finite number"):
        store.write_scores([{**row, "step": 1, "value": -1.0}, {**row, "step": 2, "value": value}])
    assert store.count() == 1 and store.path.read_bytes() == before


def test_load_with_a_study_behaves_as_the_clis_study(tmp_path: Path) -> None:
    Store(tmp_path / "st", study="pythia").write_scores(_scores(3))
    assert len(gengen.load(tmp_path / "st", study="pythia")) == 12
    with pytest.raises(GengenError, match=r"^study 'nosuch' is not in the store; studies: pythia$") as error:
        gengen.load(tmp_path / "st", study="nosuch")
    assert error.value.option == "study"
    with pytest.raises(GengenError, match=r"study must be a name or a list of names, got 5"):
        gengen.load(tmp_path / "st", study=5)  # type: ignore[arg-type]


def test_a_hundred_thousand_test_sets_are_refused_at_once_naming_the_size() -> None:
    n = 100_001
    df = pd.DataFrame({
        "model": "m", "run": "r", "step": np.repeat(np.arange(3), n + 1),
        "testset": np.tile(["id", *(f"t{i}" for i in range(n))], 3), "metric": "acc", "value": 0.5,
    })  # fmt: skip
    start = time.perf_counter()
    with pytest.raises(InvalidArgumentError, match=r"ood: 100,001 OOD test sets are 5,000,050,000 pairs per group"):
        gengen.analyse(df, id_testset="id", progress=False)
    # Measured 0.5 s on a shared 2-core machine (numpy's MemoryError came after 20 s); 3 s leaves room for CI.
    assert time.perf_counter() - start < 3.0


def test_a_test_set_whose_every_score_is_missing_is_an_error_naming_it() -> None:
    df = _scores()
    df.loc[df["testset"] == "b", "value"] = np.nan
    with pytest.raises(InputError, match=r"column 'value' is missing in every score of test set 'b' \(metric 'acc'\)"):
        gengen.analyse(df, id_testset="id", progress=False)
    df["value"] = np.nan
    with pytest.raises(InputError, match=r"every score of test set 'id' \(metric 'acc'; 4 test sets so\)"):
        gengen.analyse(df, id_testset="id", progress=False)


def test_the_size_check_counts_no_more_than_a_pair_row_holds() -> None:
    """The refusal must never turn away a table that fits: it counts fewer values per pair than the table has."""
    from gengen.analyse.data import PAIR_ROW_VALUES
    from gengen.analyse.group_plan import PAIR_COLUMNS

    assert PAIR_ROW_VALUES <= len(PAIR_COLUMNS)


def test_a_min_step_that_leaves_one_checkpoint_per_run_is_named() -> None:
    """It blamed --id ("constant across runs"): the analysis had silently become one across runs."""
    df = _scores()
    with pytest.raises(GengenError, match=r"min_step 285 leaves each run one checkpoint \(steps 285 to 290\)"):
        gengen.analyse(df, id_testset="id", min_step=285, progress=False)
    assert len(gengen.analyse(df, id_testset="id", min_step=100, inference="lagged", progress=False).pairs) == 3
