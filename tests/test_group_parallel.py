"""The group loop in worker processes (issue 27): the same tables for any number of workers, in group order,
errors and warnings as in one process, Ctrl-C stopping the workers."""

from __future__ import annotations

import dataclasses
import multiprocessing
import signal
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import gengen
from gengen.analyse.data import Group
from gengen.analyse.group_pool import MIN_GROUPS, MIN_WORK, available_cpus, group_work, map_groups, worker_count
from gengen.analyse.options import Settings, make_settings
from gengen.errors import GengenError


def scores(runs: int = 5, n: int = 30, testsets: int = 5) -> pd.DataFrame:
    """Runs of a saturating ID curve with OOD test sets that follow it, one sharing a factor with another."""
    rng = np.random.default_rng(7)
    steps = np.arange(n) * 100
    rows = []
    for run in range(runs):
        id_score = 0.4 + 0.4 * (1 - np.exp(-steps / 900)) + rng.normal(0, 0.01, n)
        shared = rng.normal(0, 0.02, n)
        rows += [("m", f"seed={run}", int(s), "id", "acc", float(v)) for s, v in zip(steps, id_score, strict=True)]
        for j in range(testsets):
            ood = (0.3 + 0.1 * j) * id_score + (j < 2) * shared + rng.normal(0, 0.02, n)
            rows += [("m", f"seed={run}", int(s), f"t{j}", "acc", float(v)) for s, v in zip(steps, ood, strict=True)]
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


def test_the_tables_are_the_same_for_one_and_two_workers() -> None:
    table = scores()
    one = gengen.analyse(table, id_testset="id", n_boot=99, jobs=1)
    two = gengen.analyse(table, id_testset="id", n_boot=99, jobs=2)
    assert len(one.pairs) == 5 * 10
    assert_frame_equal(one.pairs, two.pairs)
    assert_frame_equal(one.pooled, two.pooled)
    assert one.warnings == two.warnings
    assert dataclasses.replace(one.settings, jobs=2) == two.settings
    assert list(two.pairs["run"].unique()) == [f"seed={run}" for run in range(5)]  # in group order


def test_workers_are_used_only_where_they_pay() -> None:
    settings = make_settings(id_testset="id")
    small = gengen.analyse(scores(runs=4), id_testset="id", n_boot=19)
    assert small.settings.jobs is None
    groups = [_group(n=250, m=64)] * 8
    assert sum(group_work(group) for group in groups) >= MIN_WORK
    assert worker_count(None, groups) == min(8, available_cpus())
    assert worker_count(None, groups[:1]) == 1  # one group
    assert worker_count(None, groups[: MIN_GROUPS - 1]) == 1
    assert worker_count(None, [_group(n=30, m=5)] * 50) == 1  # many groups, little work
    assert worker_count(3, groups[:2]) == 2 and worker_count(1, groups) == 1  # as asked, at most one per group
    assert settings.jobs is None


def _group(n: int, m: int) -> Group:
    return Group("run", {"model": "m", "run": "r"}, np.arange(n), np.zeros(n), pd.DataFrame(np.zeros((n, m))))


def _label_or_fail(group: Group, settings: Settings) -> str:
    """A task for the workers (module-level, so that they can import it)."""
    if group.meta["run"] == "fails":
        raise GengenError(option="gam_k", problem="is wrong for this group")
    warnings.warn(f"looked at {group.meta['run']}", UserWarning, stacklevel=2)
    return str(group.meta["run"])


def _slow_after_first(group: Group, settings: Settings) -> str:
    if group.meta["run"] != "0":
        time.sleep(60)
    return str(group.meta["run"])


def _groups(*runs: str) -> list[Group]:
    return [Group("run", {"model": "m", "run": run}, np.arange(3), np.zeros(3), pd.DataFrame()) for run in runs]


def test_results_come_in_group_order_with_their_warnings() -> None:
    settings = make_settings(id_testset="id")
    with pytest.warns(UserWarning) as caught:
        labels = list(map_groups(_label_or_fail, _groups("a", "b", "c", "d"), settings, workers=2))
    assert labels == ["a", "b", "c", "d"]
    assert [str(warning.message) for warning in caught] == [f"looked at {run}" for run in "abcd"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_groups_error_is_raised_as_in_one_process(workers: int) -> None:
    settings = make_settings(id_testset="id")
    seen = []
    with pytest.raises(GengenError) as error, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label in map_groups(_label_or_fail, _groups("a", "fails", "c", "d"), settings, workers=workers):
            seen.append(label)
    assert seen == ["a"]
    assert error.value.option == "gam_k" and str(error.value) == "gam_k is wrong for this group"


def test_an_interrupt_stops_the_workers() -> None:
    settings = make_settings(id_testset="id")
    results = map_groups(_slow_after_first, _groups("0", "1", "2", "3"), settings, workers=2)
    assert next(results) == "0"
    workers = multiprocessing.active_children()
    assert workers
    with pytest.raises(KeyboardInterrupt):
        results.throw(KeyboardInterrupt)
    for process in workers:
        process.join(timeout=30)
        assert process.exitcode == -signal.SIGTERM
