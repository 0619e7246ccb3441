"""The page's records, built from the analysis for the template: per-level sections (heatmap and pairs-table
payloads), the verdict block, the comparison's text and figures, static tables; figure names unique per name.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.report import figures as fig
from gengen.report.cache import FigureCache, digest
from gengen.report.order import cluster_order, group_key, pooled_correlation, short_labels
from gengen.report.rows import PAIR_VIEW, encode_table, pairs_view, round_significant

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gengen.analyse.result import Analysis
    from gengen.compare import Comparison
    from gengen.verdict import Verdict


def _slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def figure_stem(*names: str) -> str:
    """A figure-name stem unique per tuple of names (a group's model and run, a forest plot's pair): the slug
    (at most 60 characters, so that a 300-character name stays a valid file name) and a digest of the exact
    names, so that ``a b``, ``a_b`` and ``a/b`` (one slug) get three figures."""
    exact = hashlib.sha256("\x00".join(names).encode()).hexdigest()[:10]
    return f"{_slug('_'.join(names))[:60]}-{exact}"


def _cell(value: Any) -> tuple[str, bool]:
    """Text of a table cell and whether it is numeric."""
    if isinstance(value, (bool,)):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, float):
        if math.isnan(value):
            return "", True
        if value.is_integer() and abs(value) >= 2:
            return str(int(value)), True
        return (f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}"), True
    if value is None or value is pd.NA:
        return "", False
    return str(value), False


def static_table(frame: pd.DataFrame, columns: list[str], empty: str) -> dict[str, Any]:
    """A DataFrame as the template's static table record (cells escaped by the template, not here)."""
    present = [column for column in columns if column in frame.columns]
    rows = [
        [_cell(item.item() if hasattr(item, "item") else item) for item in record]
        for record in frame[present].itertuples(index=False, name=None)
    ]
    return {"columns": present, "rows": rows, "empty": empty}


def figure_record(cache: FigureCache, name: str, key: str, draw: Callable[[], Figure], caption: str) -> dict[str, Any]:
    """Draw (or reuse) figure ``name`` as PNG and SVG; the record embeds the same PNG bytes."""
    data, width = cache.figure(name, key, draw)
    return {"data": data, "alt": caption, "caption": caption, "width": width}


def level_rows(analysis: Analysis, level: str) -> pd.DataFrame:
    table = analysis.pooled_residuals if level == "pooled_residuals" else analysis.pairs
    if table.empty or "level" not in table:
        return table.iloc[0:0]
    return table[table["level"] == level]


def _group_labels(rows: pd.DataFrame) -> pd.Series:
    """``model`` where each model has one group, else ``model / run``."""
    keys = rows[["model", "run"]].drop_duplicates()
    if keys["model"].is_unique:
        return rows["model"].astype(str)
    return rows["model"].astype(str) + " / " + rows["run"].astype(str)


def section(analysis: Analysis, level: str, rows: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The heatmap and pairs-table payloads of one level, and its test-set order."""
    keys = sorted(dict.fromkeys(zip(rows["model"], rows["run"], strict=True)), key=lambda key: group_key(*key))
    present = set(rows["testset_a"]) | set(rows["testset_b"])
    names = [name for name in analysis.settings.get("ood_resolved", []) if name in present] or sorted(present)
    per_group = [rows[(rows["model"] == model) & (rows["run"] == run)] for model, run in keys]
    pooled = pooled_correlation([fig.square(group, names, "r_partial") for group in per_group])
    names = [names[i] for i in cluster_order(pooled)]
    labels, stripped = short_labels(names)
    single = len({model for model, _ in keys}) == len(keys)
    upper = np.triu_indices(len(names), 1)
    panels = []
    for (model, run), group in zip(keys, per_group, strict=True):
        values = {
            column: round_significant(fig.square(group, names, column)[upper], 3)
            for column in ("r_partial", "r_raw")
            if column in group
        }
        significant = fig.square(group, names, "significant")
        panels.append(
            {
                "title": model if single else f"{model} / {run}",
                "values": values,
                "p_adjusted": round_significant(fig.square(group, names, "p_adjusted")[upper], 3),
                "sig": "".join("1" if value == 1 else "0" for value in significant[upper]),
            }
        )
    from matplotlib import colormaps

    palette = [
        "#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in colormaps[fig.CMAP](k / 255)[:3])) for k in range(256)
    ]
    heatmap = {
        "names": names,
        "labels": [labels[name] for name in names],
        "values": [column for column in ("r_partial", "r_raw") if column in rows],
        "panels": panels,
        "palette": palette,
        "stripped": stripped,
    }
    rank = {key: index for index, key in enumerate(keys)}
    ordered = rows.assign(
        _group=[rank[key] for key in zip(rows["model"], rows["run"], strict=True)],
        _strength=-pd.to_numeric(rows["r_partial"], errors="coerce").abs(),
    ).sort_values(["_group", "_strength"], kind="stable")
    view = pairs_view(ordered, _group_labels(ordered))
    table = encode_table(view, dict(PAIR_VIEW))
    table["pageSize"] = 25
    return heatmap, table, names


def comparison_figure_records(
    cache: FigureCache, analysis: Analysis, comparison: Comparison, verdict: Verdict
) -> list[dict[str, Any]]:
    """The model × model agreement matrix and a forest plot of the verdict's strongest pair of each class."""
    from gengen.heterogeneity import group_estimates
    from gengen.report import comparison_figures as cf  # the module, not a function of this one

    records = [
        figure_record(
            cache,
            "agreement_matrix",
            digest(comparison.agreement),
            lambda: cf.agreement_matrix(comparison),
            "Every two groups: Mantel r of their partial-correlation matrices and the share of pairs with the same "
            "sign.",
        )
    ]
    estimates = group_estimates(analysis.pairs)
    for name in ("model-dependent", "consistent positive", "consistent negative"):
        for example in verdict.examples.get(name, [])[:1]:
            a, b = example["testset_a"], example["testset_b"]
            rows = estimates[(estimates["testset_a"] == a) & (estimates["testset_b"] == b)]
            records.append(
                figure_record(
                    cache,
                    f"forest_{figure_stem(a, b)}",
                    digest(rows),
                    partial(cf.forest, estimates, a, b),
                    f"{a} / {b} ({name}): each model's partial correlation with its 95% interval (replicates of "
                    "one condition pooled); dashed: the common estimate.",
                )
            )
    return records


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    """The template's verdict block: the paragraph, one row per class (count, strongest examples), agreement."""
    from gengen.verdict import CLASSES

    rows = [
        {
            "name": name,
            "count": verdict.counts.get(name, 0),
            "examples": [example["label"] for example in verdict.examples.get(name, [])],
        }
        for name in CLASSES
    ]
    agreement = ""
    mantel = verdict.agreement.get("mantel_r", {})
    if mantel and mantel.get("n_at_floor"):
        agreement = (
            f"{mantel['n_at_floor']} of {verdict.agreement['n_comparisons']} Mantel p-values are at the floor of "
            f"the permutations (p ≤ {mantel['p_floor']:.2g}): smaller p-values cannot be resolved."
        )
    return {"text": verdict.text, "rows": rows, "agreement": agreement}


def comparison_text(agreement: pd.DataFrame, n_groups: int, alpha: float) -> str:
    """One paragraph over every comparison of two groups (not just the first)."""
    if agreement.empty:
        return "Only one group: nothing to compare."
    if len(agreement) == 1:
        best = agreement.iloc[0]
        return (
            f"{best['group_a']} vs {best['group_b']}: {best['sign_agreement']:.0%} of "
            f"{int(best['n_pairs'])} pairs have the same sign; the partial-correlation matrices "
            f"correlate at r = {best['mantel_r']:.2f} (Mantel p = {best['mantel_p']:.3g})."
        )
    sign = agreement["sign_agreement"]
    mantel = agreement["mantel_r"]
    below = int((agreement["mantel_p"] < alpha).sum())
    weakest = agreement.loc[mantel.idxmin()]
    return (
        f"{len(agreement)} comparisons of {n_groups} groups. Sign agreement ranges from {sign.min():.0%} to "
        f"{sign.max():.0%} of pairs (median {sign.median():.0%}); the partial-correlation matrices correlate at "
        f"Mantel r = {mantel.min():.2f} to {mantel.max():.2f} (median {mantel.median():.2f}); {below} of "
        f"{len(agreement)} comparisons have Mantel p < {alpha}. Least alike: {weakest['group_a']} vs "
        f"{weakest['group_b']} (r = {weakest['mantel_r']:.2f})."
    )


def _comparison_key(label: str) -> tuple[object, ...]:
    model, _, run = str(label).partition(" / ")
    return group_key(model, run)


def oriented(agreement: pd.DataFrame) -> pd.DataFrame:
    """The agreement table with the smaller model as ``group_a`` of each row, rows in model-size order.

    Sign agreement and the Mantel correlation are symmetric in the two groups, so only the labels swap.
    """
    if agreement.empty:
        return agreement
    table = agreement.copy()
    swap = [_comparison_key(b) < _comparison_key(a) for a, b in zip(table["group_a"], table["group_b"], strict=True)]
    swap_mask = np.asarray(swap, dtype=bool)
    table.loc[swap_mask, ["group_a", "group_b"]] = table.loc[swap_mask, ["group_b", "group_a"]].to_numpy()
    order = sorted(
        range(len(table)),
        key=lambda i: (_comparison_key(table["group_a"].iloc[i]), _comparison_key(table["group_b"].iloc[i])),
    )
    return table.iloc[order].reset_index(drop=True)
