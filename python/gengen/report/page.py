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

    from gengen.across.compare import Comparison
    from gengen.across.verdict import Verdict
    from gengen.analyse.result import Analysis


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
    # .tolist(): iterating Arrow-backed strings goes through Python one element at a time
    row_keys = list(zip(rows["model"].tolist(), rows["run"].tolist(), strict=True))
    keys = sorted(dict.fromkeys(row_keys), key=lambda key: group_key(*key))
    present = set(rows["testset_a"].unique()) | set(rows["testset_b"].unique())
    names = [name for name in analysis.settings.ood_resolved if name in present] or sorted(present)
    parts = dict(iter(rows.groupby(["model", "run"], sort=False)))  # one pass, not a mask per group
    per_group = [parts[key] for key in keys]
    pooled = pooled_correlation([fig.square(group, names, "r_partial") for group in per_group])
    clustered = cluster_order(pooled)
    pooled = pooled[np.ix_(clustered, clustered)]
    names = [names[i] for i in clustered]
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
    heatmap: dict[str, Any] = {
        "names": names,
        "labels": [labels[name] for name in names],
        "values": [column for column in ("r_partial", "r_raw") if column in rows],
        "panels": panels,
        "palette": palette,
        "stripped": stripped,
    }
    if len(panels) > fig.HEATMAPS_FULL_SIZE:
        heatmap["summary"] = summary_panel(pooled, panels, upper)
    rank = {key: index for index, key in enumerate(keys)}
    ordered = rows.assign(
        _group=[rank[key] for key in row_keys],
        _strength=-pd.to_numeric(rows["r_partial"], errors="coerce").abs(),
    ).sort_values(["_group", "_strength"], kind="stable")
    kept = page_rows(ordered)
    view = pairs_view(ordered[kept], _group_labels(ordered)[kept])
    table = encode_table(view, dict(PAIR_VIEW))
    table["pageSize"] = 25
    table["total"] = len(ordered)
    table["kept"] = "every significant row and each group's strongest |r_partial|"
    table["file"] = "pooled_residuals.csv" if level == "pooled_residuals" else "pairs.csv"
    return heatmap, table, names


#: Most rows of a pairs table held on the page (each costs about 75 bytes; 64,512 rows made 4.8 MB); the
#: pooled table, 27 columns wide, holds half as many.
MAX_PAGE_ROWS = 6000


def page_rows(ordered: pd.DataFrame, limit: int = MAX_PAGE_ROWS) -> np.ndarray:
    """Which rows of a pairs table (sorted by group, strongest |r_partial| first) the page holds: all of them
    up to ``limit``; above it every significant row and each group's strongest rows, as many per group as fit;
    where the significant rows alone exceed ``limit``, each group's strongest significant rows, as many per
    group as fit (the page's size stays bounded whatever the data's power). The heatmaps' tooltips still show
    every pair, and pairs.csv holds every row."""
    keep = np.ones(len(ordered), dtype=bool)
    if len(ordered) <= limit:
        return keep
    significant = ordered["significant"].fillna(False).astype(bool).to_numpy() if "significant" in ordered else ~keep
    groups = ordered.groupby(["model", "run"], sort=False)
    rank = groups.cumcount().to_numpy()
    n_groups = max(int(groups.ngroups), 1)
    if int(significant.sum()) > limit:
        rank_among_significant = (
            pd.Series(significant, index=ordered.index).groupby([ordered["model"], ordered["run"]], sort=False).cumsum()
        ).to_numpy()
        return significant & (rank_among_significant <= max(limit // n_groups, 1))
    per_group = max((limit - int(significant.sum())) // n_groups, 1)
    return significant | (rank < per_group)


def summary_panel(
    pooled: np.ndarray, panels: list[dict[str, Any]], upper: tuple[np.ndarray, np.ndarray]
) -> dict[str, Any]:
    """The summary heatmap shown above many groups' small multiples: each pair's common partial correlation
    (the groups' mean on Fisher's z scale) and in how many groups the pair is significant."""
    significant = np.zeros(len(upper[0]), dtype=int)
    for panel in panels:
        significant += np.frombuffer(panel["sig"].encode("ascii"), dtype=np.uint8) == ord("1")
    return {
        "title": f"common partial correlation (mean over {len(panels)} groups, Fisher z)",
        "values": {"r_partial": round_significant(pooled[upper], 3)},
        "n_significant": significant.tolist(),
        "n_groups": len(panels),
    }


def comparison_figure_records(
    cache: FigureCache, analysis: Analysis, comparison: Comparison, verdict: Verdict
) -> list[dict[str, Any]]:
    """The model × model agreement matrix and a forest plot of the verdict's strongest pair of each class."""
    from gengen.across.heterogeneity import group_estimates
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


def answer_of(verdict: Verdict, whole: bool = False) -> str:
    """The verdict's answer: ``Verdict.answer`` where this version has it, else ``Verdict.text`` (``whole``) or
    its first sentence."""
    answer = getattr(verdict, "answer", None)
    if answer:
        return str(answer)
    return verdict.text if whole else verdict.text.split(". ")[0].rstrip(".") + "."


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    """The template's verdict block: the paragraph, one row per class (count, strongest examples), agreement."""
    from gengen.across.verdict import CLASSES

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
    # The one- or two-sentence answer (Verdict.answer, where this version has it, else the paragraph's first
    # sentence) opens the box; the paragraph's figures follow it.
    answer = answer_of(verdict)
    text = verdict.text if getattr(verdict, "answer", None) else verdict.text[len(answer) :].strip()
    return {"answer": answer, "text": text, "rows": rows, "agreement": agreement}


def across_run_answer(analysis: Analysis, alpha: float, shown: int = 5) -> dict[str, Any] | None:
    """The first screen of an analysis with only across-run rows (one score per run): which pairs co-vary
    across runs, in a sentence, and the significant pairs first (the strongest when none is). None when the
    analysis has per-run rows (the verdict across models answers then)."""
    pairs = analysis.pairs
    if pairs.empty or "level" not in pairs or (pairs["level"] == "run").any():
        return None
    rows = pairs[pairs["level"] == "across_runs"]
    if rows.empty:
        return None
    significant = rows["significant"].fillna(False).astype(bool)
    strength = pd.to_numeric(rows["r_partial"], errors="coerce").abs()
    order = sorted(range(len(rows)), key=lambda i: (not significant.iloc[i], -strength.iloc[i]))
    cells = rows[["model", "run"]].drop_duplicates()
    n_runs = pd.to_numeric(rows["n"], errors="coerce")
    runs = f"{int(n_runs.min())}" if n_runs.min() == n_runs.max() else f"{int(n_runs.min())}–{int(n_runs.max())}"
    deciding = sorted({value.split(" ")[0] for value in rows.get("p_adjusted_from", pd.Series(dtype=str)).dropna()})
    adjust = ", ".join(sorted(rows["adjust"].dropna().astype(str).unique())) if "adjust" in rows else "adjusted"
    answer = (
        f"Across runs ({runs} runs in each of {len(cells)} cell{'s' if len(cells) != 1 else ''}, one score per run), "
        f"{int(significant.sum())} of {len(rows)} pairs of OOD test sets co-vary after regressing out ID "
        f"({', '.join(deciding) or 'p'}, {adjust}-adjusted p < {alpha})."
    )
    examples = []
    for i in order[:shown]:
        row = rows.iloc[i]
        low, high = (float(row.get(column, np.nan)) for column in ("ci_low", "ci_high"))
        interval = f" [{low:.2f}, {high:.2f}]" if np.isfinite(low) and np.isfinite(high) else ""  # none: not shown
        examples.append(
            f"{row['testset_a']} / {row['testset_b']} ({row['model']}): r = {float(row['r_partial']):.2f}{interval}, "
            f"adjusted p = {float(row['p_adjusted']):.2g}" + ("" if significant.iloc[i] else " (not significant)")
        )
    heading = "significant pairs, strongest first" if significant.any() else "no pair is significant; the strongest"
    return {"answer": answer, "heading": heading, "examples": examples}


def levels_text(comparison_groups: int, verdict: Verdict) -> str:
    """Why the verdict's agreement and the across-groups agreement differ, when they compare different units."""
    if comparison_groups == len(verdict.groups) or not verdict.agreement.get("n_comparisons"):
        return ""
    sign, mantel = verdict.agreement.get("sign_agreement", {}), verdict.agreement.get("mantel_r", {})
    return (
        f"These figures compare the {comparison_groups} groups, each run on its own; the verdict compares the "
        f"{len(verdict.groups)} models with their runs pooled ({verdict.agreement['n_comparisons']} comparisons: "
        f"median sign agreement {sign.get('median', float('nan')):.0%}, Mantel r "
        f"{mantel.get('median', float('nan')):.2f}). Runs of one model share more than two models do, so the two "
        "levels give different figures; the verdict's are the ones that answer whether results transfer across "
        "models."
    )


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
