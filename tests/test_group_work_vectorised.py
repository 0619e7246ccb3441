"""A group's work outside the sieve, vectorised (issue 27): each equals the loop it replaced, written out here.

The plateaus of every test set at once (the monotone-queue sliding window per column before), the curvature
test of every test set at once (a dense Prais–Winsten transform, ``lstsq`` and a scalar bisection per column
before), the runs' wide tables from one factorisation of the long table (a ``groupby``, a pivot and two
per-test-set aggregations per run before), and the score table's sort on factorised strings.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from pandas.testing import assert_frame_equal

from gengen import _core
from gengen.analyse import data
from gengen.analyse.data import Group, explained_by_id, prepare, run_groups, run_meta, sorted_scores, wide
from gengen.analyse.information import (
    collapse_repeats,
    column_information,
    longest_plateau,
    longest_plateaus,
    measurement_noise,
)
from gengen.analyse.options import make_settings
from gengen.stats.control_choice import MAX_PHI, _residual_lag_sums, curvature_test


# ------------------------------------------------------------------------------------------- plateaus
def queue_plateau(values: np.ndarray, tolerance: float) -> tuple[int, int]:
    """The sliding window with monotone queues of its maxima and minima that ``longest_plateau`` was."""
    best = (0, 1 if values.size else 0)
    highs: deque[int] = deque()
    lows: deque[int] = deque()
    start = 0
    for stop, value in enumerate(values):
        while highs and values[highs[-1]] <= value:
            highs.pop()
        highs.append(stop)
        while lows and values[lows[-1]] >= value:
            lows.pop()
        lows.append(stop)
        while values[highs[0]] - values[lows[0]] > tolerance:
            start += 1
            if highs[0] < start:
                highs.popleft()
            if lows[0] < start:
                lows.popleft()
        if stop + 1 - start > best[1] - best[0]:
            best = (start, stop + 1)
    return best


def test_plateaus_of_all_columns_are_the_sliding_windows_earliest_longest() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        n, m = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        values = np.round(rng.normal(0, 1, (n, m)), int(rng.integers(0, 2)))
        values[: int(rng.integers(0, n + 1)), 0] = 0.5  # a stretch stuck on one value
        tolerances = rng.choice([0.0, 0.1, 0.5, 3.0], m)
        starts, stops = longest_plateaus(values, tolerances)
        for j in range(m):
            assert (starts[j], stops[j]) == queue_plateau(values[:, j], float(tolerances[j]))
            assert longest_plateau(values[:, j], float(tolerances[j])) == queue_plateau(values[:, j], tolerances[j])
    assert longest_plateau(np.array([]), 0.1) == (0, 0)


def old_column_information(
    scores: pd.DataFrame, id_values: np.ndarray, steps: np.ndarray, minimum: int
) -> dict[str, tuple[int, bool, int, int]]:
    """``column_information`` before: per column, the queue plateau and ``np.unique`` counts."""
    n = len(scores)

    def tolerance_of(values: np.ndarray) -> float:
        return 1e-12 * max(1.0, float(np.nanmax(np.abs(values))) if values.size else 0.0)

    out = {}
    for name in scores.columns:
        values = scores[name].to_numpy(dtype=float)
        tolerance = max(measurement_noise(values, None), tolerance_of(values))
        start, stop = queue_plateau(values, tolerance)
        informative = n - (stop - start) + 1
        distinct = np.unique(np.round(values / tolerance_of(values))).size
        if informative >= minimum and distinct < 3:
            informative = min(informative, distinct)
        out[name] = (informative, informative < minimum or distinct < 3, start, stop)
    return out


def test_column_information_counts_as_the_per_column_loop() -> None:
    rng = np.random.default_rng(1)
    n = 40
    steps = np.arange(n) * 10
    id_values = np.linspace(0.4, 0.8, n) + rng.normal(0, 0.01, n)
    columns = {
        "noisy": id_values + rng.normal(0, 0.02, n),
        "stuck": np.r_[0.3, np.full(n - 1, 0.5)],
        "two": np.where(np.arange(n) % 2 == 0, 0.4, 0.6),
        "late": np.r_[np.linspace(0.3, 0.5, 4), np.full(n - 4, 0.5)],
        "negative": -(id_values + rng.normal(0, 0.05, n)),
    }
    scores = pd.DataFrame(columns)
    new = column_information(scores, id_values, steps, minimum=5)
    old = old_column_information(scores, id_values, steps, minimum=5)
    for name in scores.columns:
        assert new[name].informative == old[name][0], name
        assert bool(new[name].reason) == old[name][1], name
    assert new["late"].reason == "late: 0.500 on checkpoints 4–40 (steps 30–390), 37 of 40; nothing left to correlate"


# ------------------------------------------------------------------------------------------- curvature test
def old_phi(raw: float, numerator: np.ndarray, denominator: np.ndarray) -> float:
    lags = np.arange(numerator.size)

    def g(phi: float) -> float:
        weights = phi**lags
        return float(weights @ numerator / (weights @ denominator))

    low, high = 0.0, MAX_PHI
    if raw <= g(low):
        return 0.0
    if raw >= g(high):
        return MAX_PHI
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if g(middle) < raw else (low, middle)
    return 0.5 * (low + high)


def old_curvature(data: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, ...]:
    """``curvature_test`` before: dense operators, then per column a scalar bisection, the n × n Prais–Winsten
    transform and ``lstsq`` with the inverse's corner for the variance."""
    n, m = data.shape
    c = z - z.mean()
    c = c / np.abs(c).max()
    design = np.column_stack([np.ones(n), c, c**2])
    q, _ = np.linalg.qr(design)
    maker = np.eye(n) - q @ q.T
    lag = 0.5 * (np.eye(n, k=1) + np.eye(n, k=-1))

    def lag_sums(matrix: np.ndarray) -> np.ndarray:
        sums = np.array([np.trace(matrix, offset=d) for d in range(n)])
        sums[1:] *= 2.0
        return sums

    numerator, denominator = lag_sums(maker @ lag @ maker), lag_sums(maker)
    out = [np.full(m, np.nan) for _ in range(4)]  # statistic, p, phi, phi_raw
    residuals = maker @ data
    for j in range(m):
        e = residuals[:, j]
        total = float(e @ e)
        if total <= 1e-24 * max(float(data[:, j] @ data[:, j]), 1e-300):
            continue
        out[3][j] = float(e[1:] @ e[:-1]) / total
        phi = out[2][j] = old_phi(out[3][j], numerator, denominator)
        transform = np.eye(n) - phi * np.eye(n, k=-1)
        transform[0, 0] = math.sqrt(1.0 - phi * phi)
        x_star, y_star = transform @ design, transform @ data[:, j]
        coef, *_ = np.linalg.lstsq(x_star, y_star, rcond=None)
        rest = y_star - x_star @ coef
        variance = float(rest @ rest) / (n - 3) * np.linalg.inv(x_star.T @ x_star)[2, 2]
        if variance > 0:
            out[0][j] = coef[2] / math.sqrt(variance)
            out[1][j] = _core.t_two_sided(float(out[0][j]), float(n - 3))
    return tuple(out)


def test_curvature_test_of_all_columns_equals_the_per_column_loop() -> None:
    rng = np.random.default_rng(2)
    for trial in range(12):
        n, m = int(rng.integers(6, 120)), int(rng.integers(1, 12))
        z = np.sort(rng.uniform(0, 1, n))
        phi = rng.uniform(0, 0.99)
        noise = np.zeros((n, m))
        for t in range(1, n):
            noise[t] = phi * noise[t - 1] + rng.normal(size=m)
        scores = np.sqrt(z)[:, None] ** rng.uniform(0.5, 2, m) + 0.01 * noise
        if trial % 3 == 0:
            scores[:, 0] = 1 + z + z**2  # fitted exactly by the quadratic: untested
        test = curvature_test(scores, z)
        fields = (test.statistic, test.p_value, test.phi, test.phi_raw)
        for new, old in zip(fields, old_curvature(scores, z), strict=True):
            assert_array_equal(np.isnan(new), np.isnan(old))
            assert_allclose(new, old, rtol=1e-10, atol=1e-12)


def test_the_residual_makers_lag_sums_are_the_dense_matrices() -> None:
    rng = np.random.default_rng(3)
    for n in (6, 9, 40):
        q, _ = np.linalg.qr(rng.normal(size=(n, 3)))
        maker = np.eye(n) - q @ q.T
        lag = 0.5 * (np.eye(n, k=1) + np.eye(n, k=-1))

        def dense(matrix: np.ndarray) -> np.ndarray:
            size = matrix.shape[0]
            return np.array([np.trace(matrix, offset=d) for d in range(size)]) * np.r_[1.0, np.full(size - 1, 2.0)]

        numerator, denominator = _residual_lag_sums(q)
        assert_allclose(numerator, dense(maker @ lag @ maker), rtol=1e-12, atol=1e-13)
        assert_allclose(denominator, dense(maker), rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------------------------------------- a run's groups
def old_run_groups(scores: pd.DataFrame, id_testset: str, ood: tuple[str, ...]) -> tuple[list[Group], list[str]]:
    """``run_groups`` and ``make_group`` before (groupby, pivot, per-test-set aggregations, nunique)."""
    groups, notes = [], []
    for _, rows in scores.groupby(["model", "run"], sort=True):
        ood_rows = rows[rows["role"] == "ood"]
        counts = pd.to_numeric(ood_rows["n_examples"], errors="coerce").groupby(ood_rows["testset"]).median()
        n_examples = {name: float(value) for name, value in counts.items() if pd.notna(value)}
        signs = {name: float(value) for name, value in ood_rows.groupby("testset")["sign"].first().items()}
        table, meta = wide(rows, "step"), run_meta(rows)
        label = f"model {meta['model']!r} run {meta['run']!r}"
        present = [name for name in ood if name in table.columns]
        complete = table[[id_testset, *present]].dropna()
        if len(complete) < len(table):
            notes.append(f"{label}: {len(table) - len(complete)} of {len(table)} rows lack the ID or an OOD score")
        n_steps = len(complete)
        complete, repeated = collapse_repeats(complete)
        notes.extend(f"{label}: repeats {step}" for step in repeated)
        kept = complete[present]
        constant = [name for name in present if kept[name].nunique() <= 1]
        kept = kept.drop(columns=constant)
        id_values = complete[id_testset].to_numpy(dtype=float)
        linear = explained_by_id(kept, id_values)
        kept = kept.drop(columns=linear)
        information = column_information(
            kept, id_values, complete.index.to_numpy(), minimum=5, n_examples=n_examples, signs=signs
        )
        absent = [name for name in ood if name not in table.columns]
        dropped = absent + constant + linear
        groups.append(Group("run", meta, complete.index.to_numpy(), id_values, kept, dropped, n_steps, information))
    return groups, notes


def awkward_scores() -> pd.DataFrame:
    """Two models × two runs with a missing score, repeated checkpoints, a constant, a linear and a stuck test
    set, counts that vary within a test set and counts that are missing, rows in no particular order."""
    rng = np.random.default_rng(4)
    rows = []
    for model in ("m-b", "m-a"):
        for run in ("seed=10", "seed=2"):
            steps = np.arange(0, 300, 10)
            id_score = 0.4 + 0.4 * (1 - np.exp(-steps / 100)) + rng.normal(0, 0.005, steps.size)
            columns = {
                "id": id_score,
                "t1": id_score + rng.normal(0, 0.02, steps.size),
                "t2": 0.5 * id_score + rng.normal(0, 0.02, steps.size),
                "flat": np.full(steps.size, 0.25),
                "line": 0.1 + 0.5 * id_score,
                "stuck": np.r_[0.3, np.full(steps.size - 1, 0.5)],
            }
            for name, values in columns.items():
                for i, step in enumerate(steps):
                    count = {"t1": 1000, "t2": 500 + i, "stuck": 30_000}.get(name, np.nan)
                    rows.append((model, run, int(step), name, "acc", float(values[i]), count))
    table = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value", "n_examples"])
    table.loc[(table["step"] == 50) & (table["testset"] == "t2"), "value"] = np.nan
    repeat = table["step"] == 30
    table.loc[repeat, "value"] = table.loc[table["step"] == 20, "value"].to_numpy()  # step 30 repeats step 20
    for column in ("model", "run", "testset", "metric"):
        table[column] = table[column].astype("string[pyarrow]")
    return table.sample(frac=1.0, random_state=0).reset_index(drop=True)


def test_run_groups_from_one_factorisation_equal_the_groupby_and_pivot() -> None:
    settings = make_settings(id_testset="id")
    scores, ood = prepare(awkward_scores(), settings)
    groups, notes = run_groups(scores, settings, ood)
    expected, _ = old_run_groups(scores, "id", ood)
    assert [group.meta for group in groups] == [group.meta for group in expected]
    assert [group.meta["model"] for group in groups] == ["m-a", "m-a", "m-b", "m-b"]
    assert [group.meta["run"] for group in groups] == ["seed=10", "seed=2"] * 2  # groupby's string order
    for group, old in zip(groups, expected, strict=True):
        assert_frame_equal(group.scores, old.scores)
        assert_array_equal(group.index, old.index)
        assert_array_equal(group.id_values, old.id_values)
        assert group.information == old.information
        assert group.dropped == old.dropped and group.n_steps == old.n_steps
    assert any("repeat the scores of the checkpoint before" in note for note in notes)


def test_medians_of_counts_are_groupbys() -> None:
    values = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, np.nan, 3.0, 5.0], [9.0, np.nan, 3.0, np.nan]])
    expected = pd.DataFrame(values).median().to_numpy()
    assert_array_equal(data._column_medians(values), expected)


def test_the_score_table_is_sorted_as_sort_values_sorts_it() -> None:
    table = awkward_scores().assign(sign=1)
    expected = table.sort_values(["model", "run", "step", "testset"], ignore_index=True)
    assert_frame_equal(sorted_scores(table), expected)
    assert_frame_equal(sorted_scores(expected), expected)


@pytest.mark.parametrize("metric", ["acc", "loss"])
def test_prepare_signs_every_row_by_its_metric(metric: str) -> None:
    table = awkward_scores()
    table["metric"] = metric
    scores, _ = prepare(table, make_settings(id_testset="id", metric=metric))
    assert scores["sign"].dtype == np.int64 and set(scores["sign"]) == {-1 if metric == "loss" else 1}
