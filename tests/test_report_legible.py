"""The report's figures at scale: faded non-significant cells, Mantel p at the permutation floor said so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gengen.across.compare import compare
from gengen.analyse import Analysis, analyse
from gengen.calibration.simulate import simulate_trajectories
from gengen.report import plot_agreement, plot_heatmaps
from gengen.report.figures import FADED_ALPHA, square


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    frames = [
        simulate_trajectories(n=40, n_testsets=6, phi=0.3, shared=0.3, seed=seed, model=model)
        for seed, model in ((1, "m-160m"), (2, "m-410m"))
    ]
    return analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)


def test_heatmap_cells_of_non_significant_pairs_are_faded(analysis: Analysis) -> None:
    figure = plot_heatmaps(analysis)
    order = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    names = [name for name in analysis.settings["ood_resolved"] if name.endswith(tuple(order))]
    assert len(names) == len(order) == 6
    names = [next(name for name in names if name.endswith(label)) for label in order]
    kinds = set()
    for ax, model in zip(figure.axes[:2], ("m-160m", "m-410m"), strict=True):
        rows = analysis.pairs[(analysis.pairs["model"] == model) & (analysis.pairs["level"] == "run")]
        significant = np.nan_to_num(square(rows, names, "significant")) > 0
        expected = np.where(significant | np.eye(len(names), dtype=bool), 1.0, FADED_ALPHA)
        alpha = np.asarray(ax.images[0].get_alpha())
        np.testing.assert_array_equal(alpha, expected)
        kinds |= set(expected[~np.eye(len(names), dtype=bool)].tolist())
    assert kinds == {1.0, FADED_ALPHA}  # both kinds of cell are drawn


def test_mantel_p_at_the_permutation_floor_is_said_so(analysis: Analysis) -> None:
    comparison = compare(analysis, n_perm=9)
    row = comparison.agreement.iloc[0]
    assert row["mantel_p_at_floor"] == (row["mantel_p"] <= 0.1 + 1e-12)
    twin = analysis.pairs.copy()
    other = twin[twin["model"] == "m-160m"].assign(model="copy")
    same = compare(pd.concat([twin[twin["model"] == "m-160m"], other], ignore_index=True), n_perm=9)
    assert same.agreement["mantel_p"].iloc[0] == pytest.approx(0.1)
    assert bool(same.agreement["mantel_p_at_floor"].iloc[0])
    titles = [ax.get_title() for ax in plot_agreement(same).axes]
    assert any("p ≤ 0.1 (permutation floor)" in title for title in titles)


def test_agreement_matrix_and_forest_plot(analysis: Analysis) -> None:
    from scipy import stats as scipy_stats

    from gengen.report import plot_agreement_matrix, plot_forest

    comparison = compare(analysis, n_perm=9)
    figure = plot_agreement_matrix(comparison)
    mantel = figure.axes[0].images[0].get_array()
    row = comparison.agreement.iloc[0]
    assert mantel[0, 1] == pytest.approx(row["mantel_r"]) and mantel[1, 0] == pytest.approx(row["mantel_r"])
    sign = figure.axes[2].images[0].get_array()  # axes: Mantel panel, its colour bar, sign panel, its colour bar
    assert sign[0, 1] == pytest.approx(row["sign_agreement"])

    forest = plot_forest(analysis, "ood_2", "ood_1")
    rows = analysis.pairs[(analysis.pairs["testset_a"] == "ood_1") & (analysis.pairs["testset_b"] == "ood_2")]
    z, v = np.arctanh(rows["r_partial"].to_numpy()), rows["se_z"].to_numpy() ** 2
    w = 1 / v
    q = float(np.sum(w * (z - np.sum(w * z) / np.sum(w)) ** 2))
    title = forest.axes[0].get_title()
    assert title == f"ood_1 / ood_2\nCochran's Q = {q:.2f} on 1 df, p = {scipy_stats.chi2.sf(q, 1):.2g}"
    points = forest.axes[0].lines[0].get_xdata()
    np.testing.assert_allclose(sorted(points), sorted(rows["r_partial"]), rtol=1e-10)
