"""``fit="auto"`` chooses one control per condition from all its seeds' curvature evidence (issue 34, item 3).

- ``stouffer_curvature`` against scipy: each run's curvature t on n − 3 df turned into its one-sided p-value
  (``scipy.stats.t.sf``) and combined by ``scipy.stats.combine_pvalues(method="stouffer")``, two-sided.
- ``choose_pooled_control`` against an independent computation of the rule (the pooled p-values above; the GAM
  when at least max(min(2, m'), ⌈m'/2⌉) sets have p ≤ 0.20, or, with ``adjust=True`` and ``level=0.05``, BH-adjusted
  p ≤ 0.05 by ``statsmodels.stats.multitest.multipletests`` — with one run, then, ``choose_control``).
- In ``gengen.analyse``, every seed of a condition gets the same control, and a seed's control does not follow
  its own values: a seed whose two test sets are made straight in ID and strongly correlated (its own choice
  would be the line) keeps its condition's GAM; changing its OOD values in a way that leaves every run's
  curvature test unchanged (adding a + b·ID) changes no group's control.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import gengen
from gengen.stats.control_choice import (
    choose_control,
    choose_pooled_control,
    curvature_test,
    stouffer_curvature,
)

scipy_stats = pytest.importorskip("scipy.stats")
multitest = pytest.importorskip("statsmodels.stats.multitest")


def _runs(seed: int, count: int, n: int = 30, m: int = 4, bend: float = 0.02) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` runs: ID a saturating curve, m test sets each a weakly curved function of it plus white noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        z = 0.5 + 0.3 * (1 - np.exp(-np.linspace(0, 4, n))) + 0.005 * rng.normal(size=n)
        scores = 0.4 + 0.5 * z[:, None] + bend * (z[:, None] - 0.65) ** 2 / 0.02 + 0.01 * rng.normal(size=(n, m))
        out.append((scores, z))
    return out


def _scipy_pooled(runs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    tests = [curvature_test(scores, z) for scores, z in runs]
    m = tests[0].statistic.size
    out = np.empty(m)
    for j in range(m):
        one_sided = [scipy_stats.t.sf(test.statistic[j], test.df) for test in tests]
        p = scipy_stats.combine_pvalues(one_sided, method="stouffer").pvalue
        out[j] = 2 * min(p, 1 - p)
    return out


@pytest.mark.parametrize(("seed", "count", "bend"), [(1, 1, 0.02), (2, 3, 0.01), (3, 10, 0.004), (4, 5, 0.0)])
def test_stouffer_pooling_is_scipys(seed: int, count: int, bend: float) -> None:
    runs = _runs(seed, count, bend=bend)
    pooled = stouffer_curvature([curvature_test(scores, z) for scores, z in runs])
    assert_allclose(pooled, _scipy_pooled(runs), rtol=1e-6, atol=1e-12)


CASES = [(5, 1, 0.01), (6, 3, 0.006), (7, 10, 0.003), (8, 10, 0.0), (9, 2, 0.004), (10, 1, 0.006)]


@pytest.mark.parametrize(("seed", "count", "bend"), CASES)
@pytest.mark.parametrize("m", [2, 4, 7])
def test_pooled_choice_is_the_rule_on_scipys_pooled_p_values(seed: int, count: int, bend: float, m: int) -> None:
    runs = _runs(seed, count, m=m, bend=bend)
    tests = [curvature_test(scores, z) for scores, z in runs]
    reference = _scipy_pooled(runs)
    needed = max(min(2, m), math.ceil(m / 2))
    choice = choose_pooled_control(tests, unit="seed")
    curved = int((reference <= 0.20).sum())
    assert choice.n_curved == curved
    assert choice.fit == ("gam" if curved >= needed else "linear")
    strict = choose_pooled_control(tests, level=0.05, adjust=True)
    curved = int(multitest.multipletests(reference, alpha=0.05, method="fdr_bh")[0].sum())
    assert strict.n_curved == curved
    assert strict.fit == ("gam" if curved >= needed else "linear")
    if count == 1:
        single = choose_control(*runs[0])
        assert (strict.fit, strict.n_curved) == (single.fit, single.n_curved)


def test_the_rules_disagree_somewhere() -> None:
    """The lenient level matters: among these draws some runs are curved at 0.20 and not at BH 0.05."""
    fits = set()
    for seed in range(40):
        tests = [curvature_test(*run) for run in _runs(100 + seed, 1, m=2, bend=0.006)]
        fits.add((choose_pooled_control(tests).fit, choose_pooled_control(tests, level=0.05, adjust=True).fit))
    assert ("gam", "linear") in fits


def test_pooling_sees_a_curve_no_single_seed_shows() -> None:
    """A curvature all ten seeds share, too weak for most seeds alone, is seen in their sum."""
    runs = _runs(11, 10, bend=0.005)
    alone = [choose_pooled_control([curvature_test(scores, z)]).fit for scores, z in runs]
    pooled = choose_pooled_control([curvature_test(scores, z) for scores, z in runs], unit="seed")
    assert alone.count("gam") <= 2, alone
    assert pooled.fit == "gam", pooled.reason


def test_bad_input_refused() -> None:
    with pytest.raises(gengen.errors.InvalidArgumentError, match=r"^tests: "):
        stouffer_curvature([])
    z = np.linspace(0, 1, 12)
    with pytest.raises(gengen.errors.InvalidArgumentError, match=r"^level: "):
        choose_pooled_control([curvature_test(np.column_stack([z, z**2]), z)], level=0.0)


def _table(runs: list[tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    rows = []
    for seed, (scores, z) in enumerate(runs):
        for step in range(len(z)):
            rows.append(("m", f"seed={seed}", step * 10, "id", "acc", z[step]))
            for j in range(scores.shape[1]):
                rows.append(("m", f"seed={seed}", step * 10, f"ood_{j}", "acc", scores[step, j]))
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


def _controls(table: pd.DataFrame) -> dict[str, str]:
    pairs = gengen.analyse(table, id_testset="id", n_boot=49, leave_one_out=False).pairs
    return pairs.groupby("run")["fit"].agg(lambda fits: "+".join(sorted(set(fits)))).to_dict()


def test_a_seed_keeps_its_conditions_control_whatever_its_own_values() -> None:
    runs = _runs(21, 4, m=3, bend=0.03)
    rng = np.random.default_rng(22)
    scores, z = runs[0]
    common = 0.01 * rng.normal(size=z.size)
    # seed 0: every set straight in ID, the first two sharing their noise: curvature gone, the pair strong
    straight = 0.4 + 0.5 * z[:, None] + 0.01 * rng.normal(size=scores.shape)
    straight[:, :2] += common[:, None]
    assert choose_pooled_control([curvature_test(straight, z)]).fit == "linear"  # the seed alone: the line
    changed = [(straight, z), *runs[1:]]
    controls = _controls(_table(changed))
    assert controls == dict.fromkeys(controls, "gam"), controls
    assert len(controls) == 4


def test_a_change_that_leaves_the_curvature_evidence_keeps_every_control() -> None:
    """Adding a + b·ID to one seed's test set leaves its curvature t (and so every choice) unchanged while it
    moves that seed's raw correlations."""
    runs = _runs(31, 3, m=3, bend=0.004)
    scores, z = runs[1]
    shifted = scores.copy()
    shifted[:, 0] += 0.3 - 2.0 * z
    assert_allclose(curvature_test(shifted, z).statistic, curvature_test(scores, z).statistic, rtol=1e-8)
    before = _controls(_table(runs))
    after = _controls(_table([runs[0], (shifted, z), runs[2]]))
    assert before == after
    assert len(set(before.values())) == 1
