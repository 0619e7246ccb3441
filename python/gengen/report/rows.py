"""What the report reads from the pairs table: the deciding p-value of each row, settings as the rows used them,
and tables encoded compactly for the page's script.

The pairs table names, per row, the unadjusted p-value that decides ``significant`` (``p_deciding``, with
``p_deciding_method``) and the interval's method (``ci_method``). Tables written before those columns existed
are read through ``p_adjusted_from`` (the column whose p-values were adjusted) and that column's ``_method``
column, so old analysis folders still render.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd

#: Columns of the report's pairs tables, with how each is shown (``text``, ``int``, ``num``, ``p``, ``bool``).
PAIR_VIEW: tuple[tuple[str, str], ...] = (
    ("group", "text"),
    ("testset_a", "text"),
    ("testset_b", "text"),
    ("n", "int"),
    ("r_raw", "num"),
    ("r_partial", "num"),
    ("ci_low", "num"),
    ("ci_high", "num"),
    ("ci_method", "text"),
    ("p_deciding", "p"),
    ("p_deciding_method", "text"),
    ("p_adjusted", "p"),
    ("significant", "bool"),
    ("diagnostics", "text"),
)

#: Explanations shown when hovering a column header.
COLUMN_HELP = {
    "group": "model / run (or the cell of an across-run analysis)",
    "r_raw": "correlation of the two OOD scores without controlling for ID",
    "r_partial": "partial correlation of the two OOD scores given the ID score",
    "ci_low": "lower end of the interval (its method: ci_method)",
    "ci_high": "upper end of the interval (its method: ci_method)",
    "p_deciding": "the unadjusted p-value whose adjusted value decides 'significant'",
    "p_deciding_method": "how p_deciding was computed",
    "p_adjusted": "p_deciding adjusted for the pairs of the group",
    "significant": "p_adjusted below alpha",
    "diagnostics": "why the row's assumptions look doubtful (empty when they look fine)",
}

#: A resampling scheme named in a method text: "permutation (free, …)", "bootstrap (block, L=3, …)".
SCHEME_IN_METHOD = re.compile(r"\((free|iid|block|circular)\b")
#: Pooled-table columns that belong in the section's settings rather than in every row.
POOLED_SETTING_COLUMNS = ("metric", "adjust", "fit", "method")


def source_column(p_adjusted_from: Any) -> str:
    """The pairs-table column named by ``p_adjusted_from`` (``"p_perm (max-|r| …)"`` → ``"p_perm"``)."""
    text = (
        ""
        if p_adjusted_from is None or (isinstance(p_adjusted_from, float) and math.isnan(p_adjusted_from))
        else str(p_adjusted_from)
    )
    return text.split(" ", 1)[0].strip()


def _text(series: pd.Series) -> pd.Series:
    return series.astype(object).where(series.notna(), "").astype(str)


def deciding_p(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per row, the unadjusted p-value that decides ``significant`` and the method that computed it.

    Parameters
    ----------
    rows : DataFrame
        Rows of a pairs table.

    Returns
    -------
    p, method : Series
        ``p_deciding`` and ``p_deciding_method`` when the table has them; otherwise the value of the column
        named in ``p_adjusted_from`` and that column's ``<column>_method`` (NaN and "" where neither exists).
    """
    index = rows.index
    sources = rows["p_adjusted_from"].map(source_column) if "p_adjusted_from" in rows else pd.Series("", index=index)
    if "p_deciding" in rows:
        p = pd.to_numeric(rows["p_deciding"], errors="coerce")
    else:
        p = pd.Series(np.nan, index=index, dtype=float)
        for column in sources.unique():
            if column in rows:
                chosen = sources == column
                p[chosen] = pd.to_numeric(rows.loc[chosen, column], errors="coerce")
    if "p_deciding_method" in rows:
        method = _text(rows["p_deciding_method"])
    else:
        method = pd.Series("", index=index, dtype=object)
        for column in sources.unique():
            if f"{column}_method" in rows:
                chosen = sources == column
                method[chosen] = _text(rows.loc[chosen, f"{column}_method"])
        # maxT: the permutation p is adjusted family-wise; say so, as p_adjusted_from does.
        family_wise = rows["p_adjusted_from"].astype(str).str.contains("maxT") if "p_adjusted_from" in rows else None
        if family_wise is not None and family_wise.any():
            method[family_wise] = method[family_wise] + " (adjusted family-wise, maxT)"
    return p, method.astype(str)


def diagnostics(rows: pd.DataFrame) -> pd.Series:
    """The ``diagnostics`` column as text ("" where fine or where the table has no such column)."""
    if "diagnostics" not in rows:
        return pd.Series("", index=rows.index, dtype=object)
    return _text(rows["diagnostics"])


def pairs_view(rows: pd.DataFrame, group_labels: pd.Series) -> pd.DataFrame:
    """The report's columns of a pairs table (see :data:`PAIR_VIEW`), with the deciding p filled in."""
    p, method = deciding_p(rows)
    view = pd.DataFrame(
        {
            "group": group_labels.to_numpy(),
            "testset_a": rows["testset_a"].to_numpy(),
            "testset_b": rows["testset_b"].to_numpy(),
        },
        index=rows.index,
    )
    for column in ("n", "r_raw", "r_partial", "ci_low", "ci_high"):
        view[column] = pd.to_numeric(rows[column], errors="coerce") if column in rows else np.nan
    view["ci_method"] = _text(rows["ci_method"]) if "ci_method" in rows else ""
    view["p_deciding"] = p
    view["p_deciding_method"] = method
    view["p_adjusted"] = pd.to_numeric(rows["p_adjusted"], errors="coerce") if "p_adjusted" in rows else np.nan
    view["significant"] = rows["significant"].fillna(False).astype(bool) if "significant" in rows else False
    view["diagnostics"] = diagnostics(rows)
    return view


def _tally(series: pd.Series) -> str:
    """The distinct values of a column; with row counts when there is more than one."""
    values = _text(series)
    values = values[values != ""]
    if values.empty:
        return ""
    counts = values.value_counts(sort=True)
    if len(counts) == 1:
        return str(counts.index[0])
    return "; ".join(f"{value} ({count} rows)" for value, count in counts.items())


def section_settings(rows: pd.DataFrame, alpha: float) -> list[tuple[str, str]]:
    """Settings of one section of the report, read from its rows' own columns (what the rows used).

    Parameters
    ----------
    rows : DataFrame
        Pairs-table rows of the section.
    alpha : float
        Significance level the analysis compared ``p_adjusted`` with.

    Returns
    -------
    list of (str, str)
        Setting → value; values that differ between rows are listed with their row counts.
    """
    out: list[tuple[str, str]] = []
    groups = rows.groupby(["model", "run"], sort=False).ngroups if {"model", "run"} <= set(rows.columns) else 1
    out.append(("rows", f"{len(rows)} pairs in {groups} group{'s' if groups != 1 else ''}"))
    if "n" in rows and len(rows):
        low, high = int(rows["n"].min()), int(rows["n"].max())
        unit = "runs" if (rows.get("level") == "across_runs").all() else "observations"
        out.append((f"n ({unit} per pair)", str(low) if low == high else f"{low}–{high}"))
    for column, label in (
        ("estimand", "estimand"),
        ("fit", "control for ID (fit)"),
        ("method", "correlation"),
        ("k", "covariates (k)"),
    ):
        if column in rows:
            out.append((label, _tally(rows[column])))
    _, method = deciding_p(rows)
    sources = rows["p_adjusted_from"].map(source_column) if "p_adjusted_from" in rows else pd.Series(dtype=str)
    deciding = _tally(sources)
    if deciding:
        out.append(("p-value deciding significance", deciding))
    out.append(("its method", _tally(method) or "not recorded"))
    if "adjust" in rows:
        out.append(
            (
                "adjustment",
                f"{_tally(rows['adjust'])}, over the pairs of each group; significant when p_adjusted < {alpha}",
            )
        )
    if "ci_method" in rows:
        level = _tally(rows["ci_level"].map(lambda v: f"{float(v):.0%}")) if "ci_level" in rows else ""
        out.append(("interval" + (f" ({level})" if level else ""), _tally(rows["ci_method"]) or "none"))
    shown = {"p_deciding_method", "ci_method", f"{deciding}_method"}
    method_columns = [column for column in rows.columns if column.endswith("_method")]
    for column in method_columns:
        if column not in shown:
            text = _tally(rows[column])
            if text:
                out.append((f"also computed: {column.removesuffix('_method')}", text))
    # The scheme a row's resampling used is written in its method text ("permutation (free, …)"); the
    # ``scheme`` column echoes the option even where nothing was resampled with it.
    schemes = sorted(
        {
            match
            for column in method_columns
            for text in _text(rows[column]).unique()
            for match in SCHEME_IN_METHOD.findall(text)
        }
    )
    if schemes:
        out.append(("resampling scheme (from the methods)", ", ".join(schemes)))
    flagged = int((diagnostics(rows) != "").sum())
    if "diagnostics" in rows:
        out.append(("rows with diagnostics", f"{flagged} of {len(rows)}"))
    if "significant" in rows:
        out.append(("significant", f"{int(rows['significant'].fillna(False).astype(bool).sum())} of {len(rows)}"))
    return out


def pooled_settings(pooled: pd.DataFrame) -> list[tuple[str, str]]:
    """Settings of the pooled (meta-analysis) section, read from the pooled table's own columns."""
    out = [("rows", f"{len(pooled)} pooled pairs")]
    if "n_runs" in pooled and len(pooled):
        low, high = int(pooled["n_runs"].min()), int(pooled["n_runs"].max())
        out.append(("runs pooled per pair", str(low) if low == high else f"{low}–{high}"))
    for column in POOLED_SETTING_COLUMNS:
        if column in pooled:
            out.append((column, _tally(pooled[column])))
    for column in pooled.columns:
        if column.endswith("method") and column not in POOLED_SETTING_COLUMNS:
            out.append((column, _tally(pooled[column])))
    return out


def pooled_view(pooled: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The pooled table as it is, minus the long list of runs and the columns constant in every row."""
    hidden = {"runs", *POOLED_SETTING_COLUMNS, *(c for c in pooled.columns if c.endswith("method"))}
    first = [c for c in [*by, "testset_a", "testset_b"] if c in pooled.columns]
    rest = [c for c in pooled.columns if c not in hidden and c not in first]
    return pooled[first + rest]


# ------------------------------------------------------------------ encoding for the page's script
def _kind(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_integer_dtype(series):
        return "int"
    if pd.api.types.is_numeric_dtype(series):
        name = str(series.name)
        return "p" if name.startswith("p_") or name == "p" or name.endswith("_p") else "num"
    return "text"


def round_significant(values: np.ndarray, digits: int) -> list[float | None]:
    """``values`` rounded to ``digits`` significant digits, NaN/inf as None (for compact JSON)."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.where(finite & (values != 0), np.floor(np.log10(np.abs(values))), 0)
    scale = 10.0 ** (digits - 1 - magnitude)
    rounded = np.where(finite, np.round(values * scale) / scale, np.nan)
    return [float(v) if math.isfinite(v) else None for v in rounded.tolist()]


def encode_table(frame: pd.DataFrame, kinds: dict[str, str] | None = None) -> dict[str, Any]:
    """A table as compact JSON for the page's sortable, searchable table widget.

    Text columns are stored as codes into a list of levels; numbers rounded to 4 significant digits
    (p-values to 3); booleans as 0/1.
    """
    kinds = kinds or {}
    columns = []
    for name in frame.columns:
        series = frame[name]
        kind = kinds.get(name) or _kind(series)
        record: dict[str, Any] = {"name": str(name), "kind": kind, "help": COLUMN_HELP.get(str(name), "")}
        if kind == "text":
            codes, levels = pd.factorize(_text(series), sort=False)
            record["levels"] = [str(level) for level in levels]
            record["values"] = codes.tolist()
        elif kind == "bool":
            record["values"] = series.fillna(False).astype(bool).astype(int).tolist()
        elif kind == "int":
            numbers = pd.to_numeric(series, errors="coerce")
            record["values"] = [None if pd.isna(v) else int(v) for v in numbers]
        else:
            record["values"] = round_significant(pd.to_numeric(series, errors="coerce"), 3 if kind == "p" else 4)
        columns.append(record)
    return {"n": len(frame), "columns": columns}


def script_json(payload: Any) -> str:
    """``payload`` as JSON safe inside ``<script type="application/json">`` (no ``</script>`` can end it)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
