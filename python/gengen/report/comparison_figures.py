"""Figures of the across-model comparison: the model × model agreement matrix and a per-pair forest plot.

Drawn with matplotlib's object API like :mod:`gengen.report.figures`; groups in model-size order.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from gengen.report.figures import _label_inches, literal
from gengen.report.order import group_key

if TYPE_CHECKING:
    from gengen.across.compare import Comparison

#: Most groups whose cells get their value written in the agreement matrix.
ANNOTATE_UP_TO = 12


def _key(label: str) -> tuple[object, ...]:
    model, _, run = str(label).partition(" / ")
    return group_key(model, run)


@literal
def agreement_matrix(comparison: Comparison) -> Figure:
    """Model × model matrices of Mantel r (left) and sign agreement (right) from a comparison's agreement table.

    Cells whose Mantel p is at the permutation floor are marked "≤" (the p-value cannot be resolved further);
    the sign-agreement panel's title gives the median chance level.
    """
    groups = sorted(comparison.groups, key=_key)
    m = len(groups)
    position = {group: i for i, group in enumerate(groups)}
    mantel = np.full((m, m), np.nan)
    sign = np.full((m, m), np.nan)
    floor = np.zeros((m, m), dtype=bool)
    for row in comparison.agreement.itertuples(index=False):
        i, j = position[row.group_a], position[row.group_b]
        mantel[i, j] = mantel[j, i] = row.mantel_r
        sign[i, j] = sign[j, i] = row.sign_agreement
        floor[i, j] = floor[j, i] = bool(getattr(row, "mantel_p_at_floor", False))
    np.fill_diagonal(mantel, 1.0)
    np.fill_diagonal(sign, 1.0)
    panel = float(np.clip(0.45 * m + 1.5, 3.0, 9.0))
    # Margins from the longest label (rotated below, upright at the left): fixed margins cut
    # "pythia-70m-deduped/five-shot" at 32 groups; the footnote goes below the x labels, clear of them.
    labels = _label_inches(groups, 8.0)
    footnote = 0.35 if floor.any() else 0.0
    bottom = labels + 0.15 + footnote
    left_margin = labels + 0.15
    width, height = left_margin + 2 * panel + 2.2, bottom + panel + 0.5
    figure = Figure(figsize=(width, height))
    chance = comparison.agreement.get("sign_agreement_chance", pd.Series(dtype=float)).astype(float).median()
    specs = (
        (mantel, "RdBu_r", -1.0, 1.0, "Mantel r", "{:.2f}"),
        (sign, "viridis", 0.0, 1.0, f"sign agreement (chance ≈ {chance:.0%})", "{:.0%}"),
    )
    for index, (values, cmap, low, high, title, text) in enumerate(specs):
        left = left_margin + index * (panel + 1.0)
        ax = figure.add_axes((left / width, bottom / height, panel / width, panel / height))
        image = ax.imshow(values, cmap=cmap, vmin=low, vmax=high, interpolation="nearest")
        ax.set_xticks(range(m), labels=groups, rotation=90, fontsize=8)
        ax.set_yticks(range(m), labels=groups if index == 0 else [""] * m, fontsize=8)
        ax.set_title(title, fontsize=10)
        if m <= ANNOTATE_UP_TO:
            for i in range(m):
                for j in range(m):
                    if i != j and np.isfinite(values[i, j]):
                        label = text.format(values[i, j]) + (" ≤" if index == 0 and floor[i, j] else "")
                        ax.text(j, i, label, ha="center", va="center", fontsize=7, color="black")
        cax = figure.add_axes(((left + panel + 0.12) / width, bottom / height, 0.15 / width, panel / height))
        figure.colorbar(image, cax=cax)
    if floor.any():
        figure.text(
            0.1 / width, 0.1 / height, "≤: Mantel p at the permutation floor (cannot be resolved further)", fontsize=8
        )
    return figure


@literal
def forest(estimates: pd.DataFrame, testset_a: str, testset_b: str, level: float = 0.95) -> Figure:
    """Forest plot of one pair: each model's partial correlation and interval, and the common estimate.

    Parameters
    ----------
    estimates : DataFrame
        From :func:`gengen.across.heterogeneity.group_estimates`.
    testset_a, testset_b : str
        The pair (either order).
    level : float
        Level of the intervals (normal on Fisher's z: :math:`\\tanh(z \\pm q \\sqrt{v})`).

    Returns
    -------
    matplotlib.figure.Figure
        One row per model; the dashed line and grey band are the inverse-variance common estimate and its
        interval; the title gives Cochran's Q, its df and p.
    """
    from gengen import _core
    from gengen.across.heterogeneity import heterogeneity_test

    a, b = sorted((testset_a, testset_b))
    rows = estimates[(estimates["testset_a"] == a) & (estimates["testset_b"] == b)]
    rows = rows[np.isfinite(rows["z"]) & (rows["variance"] > 0)]
    rows = rows.iloc[sorted(range(len(rows)), key=lambda i: _key(str(rows["unit"].iloc[i])))]
    q = float(_core.normal_quantile(0.5 + level / 2))
    units = [str(unit) for unit in rows["unit"]]
    margin = _label_inches(units, 8.0) + 0.1  # the longest model label, measured, never cut
    title = textwrap.wrap(f"{a} / {b}", 70) or [""]
    height = 0.35 * max(len(rows), 1) + 1.2 + 0.2 * (len(title) + 1)
    width = margin + 4.4
    figure = Figure(figsize=(width, height))
    ax = figure.add_axes((margin / width, 0.9 / height, 4.1 / width, 1 - (1.1 + 0.2 * (len(title) + 1)) / height))
    se = np.sqrt(rows["variance"].to_numpy(dtype=float))
    z = rows["z"].to_numpy(dtype=float)
    y = np.arange(len(rows))[::-1]
    ax.errorbar(
        np.tanh(z),
        y,
        xerr=[np.tanh(z) - np.tanh(z - q * se), np.tanh(z + q * se) - np.tanh(z)],
        fmt="o",
        color="black",
        markersize=4,
        capsize=2,
    )
    result = heterogeneity_test(z, se**2)
    if result.n_groups:
        common_se = float(1 / np.sqrt(np.sum(1 / se**2)))
        ax.axvspan(np.tanh(result.z_common - q * common_se), np.tanh(result.z_common + q * common_se), color="0.85")
        ax.axvline(np.tanh(result.z_common), color="0.3", linestyle="--", linewidth=1)
    ax.axvline(0, color="grey", linewidth=0.6)
    ax.set_yticks(y, labels=units, fontsize=8)
    ax.set_xlim(-1, 1)
    ax.set_xlabel(f"partial r ({level:.0%} interval)", fontsize=8)
    ax.tick_params(labelsize=8)
    heterogeneity = (
        f"Cochran's Q = {result.q:.2f} on {result.df} df, p = {result.p_value:.2g}"
        if result.n_groups > 1
        else "one model"
    )
    # Names wrapped on their own lines and Q, df and p on the last, so a long name cannot push them off.
    ax.set_title("\n".join([*title, heterogeneity]), fontsize=9)
    return figure
