"""The mode of a group (its level) decides which tests its rows get, and how they resample.

A run's checkpoints get every test asked for with the chosen scheme; runs in no order get a free permutation and
an iid bootstrap but no test that needs an order; pooled within-run residuals get the t-test only. The numbers
of each test are checked against references in tests/test_analyse.py; here, which columns a mode fills.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.analyse.core import GROUP_MODES, analyse_group, group_mode, plan_group
from gengen.analyse.data import Group
from gengen.analyse.options import make_settings
from gengen.errors import GengenError

EVERY_TEST = "sieve,lagged,t-test,permutation,bootstrap"


def settings(**options: Any) -> Any:
    defaults: dict[str, Any] = {
        "id_testset": "id",
        "ood": None,
        "metric": "acc",
        "id_metric": None,
        "fit": "linear",
        "method": "pearson",
        "inference": EVERY_TEST,
        "scheme": "block",
        "block_length": None,
        "n_perm": 99,
        "n_boot": 99,
        "ci_level": 0.95,
        "boot_ci_method": "percentile",
        "adjust": "holm",
        "alpha": 0.05,
        "by": (),
        "pooling": (),
        "mode": "auto",
        "lower_is_better": None,
        "seed": 0,
    }
    return make_settings(**{**defaults, **options})


def group(level: str, n: int = 27, m: int = 3, seed: int = 0) -> Group:
    rng = np.random.default_rng(seed)
    id_values = np.linspace(0.4, 0.8, n) + rng.normal(0, 0.01, n)
    scores = pd.DataFrame(id_values[:, None] + rng.normal(0, 0.02, (n, m)), columns=[f"ood{j}" for j in range(m)])
    return Group(level, {"model": "m", "run": "r"}, np.arange(n), id_values, scores)


def test_a_run_gets_every_test_with_its_scheme_and_the_cube_root_block_length() -> None:
    plan = plan_group("run", settings(), 27)
    assert (plan.sieve, plan.lagged, plan.permutation, plan.bootstrap, plan.ordered) == (True,) * 5
    assert (plan.permutation_scheme, plan.bootstrap_scheme) == ("block", "block")
    assert plan.block_length == math.ceil(27 ** (1 / 3) - 1e-9) == 3
    assert plan_group("run", settings(block_length=5), 27).block_length == 5
    assert plan_group("run", settings(scheme="iid"), 27).block_length is None


def test_runs_in_no_order_resample_freely_and_get_no_ordered_test() -> None:
    plan = plan_group("across_runs", settings(), 27)
    assert (plan.sieve, plan.lagged, plan.ordered) == (False, False, False)
    assert (plan.permutation, plan.bootstrap) == (True, True)
    assert (plan.permutation_scheme, plan.bootstrap_scheme, plan.block_length) == ("free", "iid", None)


def test_pooled_residuals_get_the_t_test_only() -> None:
    plan = plan_group("pooled_residuals", settings(), 27)
    assert (plan.sieve, plan.lagged, plan.permutation, plan.bootstrap, plan.ordered) == (False,) * 5
    table, _ = analyse_group(group("pooled_residuals"), settings(), p_value_note=" (pooled)")
    assert table["p_value_method"].eq("t-test (pooled)").all()
    assert table["p_deciding_method"].eq("t-test (pooled)").all()
    for column in ("p_sieve", "p_lagged", "p_perm", "boot_ci_low", "acf1_a"):
        assert table[column].isna().all(), column
    assert table["level"].eq("pooled_residuals").all()


def test_a_run_table_fills_every_test_and_is_decided_by_the_sieve() -> None:
    table, _ = analyse_group(group("run"), settings())
    for column in ("p_sieve", "p_lagged", "p_perm", "boot_ci_low", "acf1_a"):
        assert table[column].notna().all(), column
    assert table["p_adjusted_from"].eq("p_loo_max").all() and table["level"].eq("run").all()
    assert table["p_deciding_method"].str.startswith("AR-sieve").all()
    assert (table["p_deciding"] >= table["p_sieve"] * (1 - 1e-12)).all()


def test_an_unknown_level_is_refused_with_the_modes_named() -> None:
    assert set(GROUP_MODES) == {"run", "across_runs", "pooled_residuals"}
    with pytest.raises(GengenError, match="level 'checkpoint' is not one of run, across_runs, pooled_residuals"):
        group_mode(group("checkpoint"))
