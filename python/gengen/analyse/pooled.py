"""Pooling runs of one cell (e.g. the seeds of a model/size/shots): meta-analysis and pooled residuals.

Which to use
------------
* **Meta-analysis** (``pooling="meta"``, the default): each run keeps its own partial correlation, and the
  runs are combined on Fisher's z scale (fixed and DerSimonian–Laird random effects, with I²). Right when runs
  may differ (different seeds reach different regimes): the random-effects estimate is the average relation,
  τ² and I² say how much runs disagree. It needs enough checkpoints per run for each correlation.
* **Pooled residuals** (``pooling="residuals"``): the ID score is regressed out within each run (its own
  intercept and slope), and the residuals of all runs are correlated together. Right when runs are replicates
  of one process and each run is short: it uses every checkpoint in one correlation with
  df = N − 2 − (2R − 1) for R runs and N checkpoints in all (linear Pearson; computed exactly by
  :func:`gengen.stats.partial_corr_matrix` with run dummies and run-specific ID slopes as covariates). With a
  GAM fit or a rank correlation the residuals are computed per run by :func:`gengen.stats.residualise` and
  correlated with run dummies as covariates; the t-test's df then does not count the per-run fits (stated in
  ``p_value_method``). Only the t-test is given in this mode: permuting or resampling pooled checkpoints
  across run boundaries would break the runs' time structure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from gengen import stats
from gengen.analyse.data import Group
from gengen.analyse.options import Settings
from gengen.errors import InvalidArgumentError
from gengen.stats.meta import fisher_meta_rows

POOLED_COLUMNS = (
    "testset_a",
    "testset_b",
    "metric",
    "runs",
    "n_total",
    "mean_r",
    "n_runs",
    "r_fixed",
    "se_fixed",
    "ci_low_fixed",
    "ci_high_fixed",
    "p_fixed",
    "df_fixed",
    "p_fixed_adjusted",
    "r_random",
    "se_random",
    "ci_low_random",
    "ci_high_random",
    "p_random",
    "p_random_adjusted",
    "significant_random",
    "tau2",
    "q",
    "q_df",
    "p_q",
    "i2",
    "runs_excluded",
    "diagnostics",
    "variance_method",
)

#: How each run's variance of Fisher's z is obtained, as recorded in ``variance_method``.
SIEVE_VARIANCE = (
    "se_z² of each run (AR-sieve bootstrap, autocorrelation-aware); fixed effect on Student's t with "
    "Satterthwaite's df_fixed from the runs' df_sieve"
)
INDEPENDENT_VARIANCE = "1/(n - 3 - k) (assumes independent checkpoints)"


#: The columns of the per-run pairs table that :func:`meta_table` reads (besides the ``by`` columns).
POOLING_INPUTS = (
    "model",
    "run",
    "testset_a",
    "testset_b",
    "testable",
    "untestable_reason",
    "r_partial",
    "se_z",
    "df_sieve",
    "n",
    "k",
    "diagnostics",
    "fit",
)


def run_variances(pair_rows: pd.DataFrame) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """Each run's variance of artanh(r_partial) and its degrees of freedom: the sieve's ``se_z²`` on
    ``df_sieve`` when the runs have one (a run whose sieve failed is then left out of the pooling rather than
    given the independence variance), else ppcor's (known, no degrees of freedom)."""
    if "se_z" in pair_rows.columns:
        se = pair_rows["se_z"].to_numpy(dtype=float)
        if np.isfinite(se).any():
            df = pair_rows["df_sieve"].to_numpy(dtype=float) if "df_sieve" in pair_rows.columns else None
            return se**2, df, SIEVE_VARIANCE
    return None, None, INDEPENDENT_VARIANCE


def testable_runs(pair_rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs of one pair that can be pooled, and a note for each one left out.

    A run is left out when its row is untestable (``testable`` False: too little information, with its
    ``untestable_reason``) or has no estimate or variance (its sieve failed): pooling it would let a degenerate
    run (a spike at one checkpoint, r = ±1) weigh in as if it were informative.
    """
    testable = pair_rows["testable"].fillna(False).astype(bool) if "testable" in pair_rows else True
    r = pair_rows["r_partial"].to_numpy(dtype=float)
    keep = np.asarray(testable) & np.isfinite(r)
    if "se_z" in pair_rows.columns and np.isfinite(pair_rows["se_z"].to_numpy(dtype=float)).any():
        keep &= np.isfinite(pair_rows["se_z"].to_numpy(dtype=float))
    notes = []
    for _, row in pair_rows[~keep].iterrows() if not keep.all() else ():
        reason = str(row.get("untestable_reason", "") or "no estimate or standard error")
        notes.append(f"{row['model']}/{row['run']} left out: {reason}")
    return (pair_rows if keep.all() else pair_rows[keep]), notes


def _flagged_runs(pair_rows: pd.DataFrame) -> list[str]:
    """'2 of 3 runs flagged: …' when pooled runs carry diagnostics (their first note named)."""
    if "diagnostics" not in pair_rows.columns:
        return []
    notes = [str(text) for text in pair_rows["diagnostics"].fillna("") if str(text)]
    if not notes:
        return []
    return [f"{len(notes)} of {len(pair_rows)} runs flagged (first: {notes[0]})"]


def _cells(table: pd.DataFrame, by: tuple[str, ...]) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """(cell identity, rows) for each ``by`` cell (one cell of everything when ``by`` is empty)."""
    if not by:
        yield {}, table
        return
    for key, rows in table.groupby(list(by), sort=True, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        yield (
            {column: (None if pd.isna(value) else value) for column, value in zip(by, values, strict=True)},
            rows,
        )


def _column(rows: pd.DataFrame, name: str, fill: Any) -> np.ndarray:
    """Column ``name`` of ``rows`` as an array (``fill`` where the table has no such column)."""
    if name in rows.columns:
        return rows[name].to_numpy()
    return np.full(len(rows), fill, dtype=object)


def _cell_table(cell: dict[str, Any], cell_rows: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The pooled rows of one cell: every pair's testable runs in one (pairs, runs) array, one meta-analysis
    pass over it (:func:`gengen.stats.meta.fisher_meta_rows`), the table built column-wise.

    Equal to :func:`testable_runs`, :func:`run_variances` and :func:`gengen.stats.meta.fisher_meta` pair by
    pair (``tests/test_pooled_vectorised.py`` checks it against that loop).
    """
    group_of = cell_rows.groupby(["testset_a", "testset_b"], sort=False).ngroup().to_numpy()
    present = group_of >= 0
    order = np.flatnonzero(present)[np.argsort(group_of[present], kind="stable")]
    codes = group_of[order]
    n_pairs = int(codes.max()) + 1 if len(codes) else 0
    counts = np.bincount(codes, minlength=n_pairs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    slot = np.arange(len(order)) - starts[codes]
    width = int(counts.max()) if n_pairs else 0

    def grid(values: np.ndarray, fill: float) -> np.ndarray:
        out = np.full((n_pairs, width), fill)
        out[codes, slot] = values[order]
        return out

    r = cell_rows["r_partial"].to_numpy(dtype=float)
    n = cell_rows["n"].to_numpy(dtype=float)
    k = cell_rows["k"].to_numpy(dtype=float)
    se = cell_rows["se_z"].to_numpy(dtype=float) if "se_z" in cell_rows.columns else np.full(len(r), np.nan)
    testable = (
        cell_rows["testable"].fillna(False).astype(bool).to_numpy()
        if "testable" in cell_rows.columns
        else np.ones(len(r), dtype=bool)
    )
    has_se = np.zeros(n_pairs, dtype=bool)
    np.logical_or.at(has_se, codes, np.isfinite(se[order]))
    row_pair = np.full(len(r), -1)
    row_pair[order] = codes
    keep = testable & np.isfinite(r) & present
    keep &= ~has_se[np.maximum(row_pair, 0)] | np.isfinite(se)
    # The checks fisher_meta makes on the runs it is given (the kept ones), in pair order
    kept_grid = grid(keep.astype(float), 0.0) > 0
    for name, values in (("r", grid(r, np.nan)), ("n", grid(n, np.nan)), ("k", grid(k, np.nan))):
        with np.errstate(invalid="ignore"):
            wrong = kept_grid & ((np.abs(values) > 1 + 1e-9) if name == "r" else (values < 0))
        if wrong.any():
            value = float(values[wrong][0])
            message = "correlations must lie in [-1, 1]" if name == "r" else "counts must be >= 0"
            raise InvalidArgumentError(f"{name}: {message}, got {value:g}")
    with np.errstate(divide="ignore", invalid="ignore"):
        independent = np.where(n - 3 - k > 0, 1.0 / (n - 3.0 - k), np.nan)
    pair_has_se = has_se[np.maximum(row_pair, 0)]
    variance = np.where(pair_has_se, se**2, independent)
    has_df_column = "df_sieve" in cell_rows.columns
    dof = cell_rows["df_sieve"].to_numpy(dtype=float) if has_df_column else np.full(len(r), np.inf)
    dof = np.where(pair_has_se, dof, np.inf)
    masked = np.where(keep, r, np.nan)
    result = fisher_meta_rows(
        grid(masked, np.nan),
        grid(variance, np.nan),
        grid(dof, np.inf),
        has_se & has_df_column,
        ci_level=settings.ci_level,
    )
    models, run_names = cell_rows["model"].to_numpy(), cell_rows["run"].to_numpy()
    reasons = _column(cell_rows, "untestable_reason", "")
    notes = _column(cell_rows, "diagnostics", "")
    columns: dict[str, list[Any]] = {name: [] for name in ("testset_a", "testset_b", "runs", "n_total", "mean_r")}
    columns.update({name: [] for name in ("runs_excluded", "diagnostics", "variance_method", "pooled")})
    first = order[starts] if n_pairs else np.array([], dtype=int)
    a_values, b_values = cell_rows["testset_a"].to_numpy(), cell_rows["testset_b"].to_numpy()
    for pair in range(n_pairs):
        members = order[starts[pair] : starts[pair] + counts[pair]]
        kept = members[keep[members]]
        excluded = [
            f"{models[i]}/{run_names[i]} left out: {reasons[i] or 'no estimate or standard error'!s}"
            for i in members[~keep[members]]
        ]
        columns["testset_a"].append(a_values[first[pair]])
        columns["testset_b"].append(b_values[first[pair]])
        columns["runs_excluded"].append(len(excluded))
        pooled = len(kept) >= 2
        columns["pooled"].append(pooled)
        if not pooled:
            columns["runs"].append("")
            columns["n_total"].append(0)
            columns["mean_r"].append(np.nan)
            columns["variance_method"].append(np.nan)
            columns["diagnostics"].append("; ".join([*excluded, "fewer than two testable runs: not pooled"]))
            continue
        columns["runs"].append(";".join(f"{models[i]}/{run_names[i]}" for i in kept))
        columns["n_total"].append(int(n[kept].sum()))
        columns["mean_r"].append(float(np.mean(r[kept])))
        columns["variance_method"].append(SIEVE_VARIANCE if has_se[pair] else INDEPENDENT_VARIANCE)
        flagged = [str(text) for text in notes[kept] if not pd.isna(text) and str(text)]
        if flagged:
            excluded.append(f"{len(flagged)} of {len(kept)} runs flagged (first: {flagged[0]})")
        columns["diagnostics"].append("; ".join(excluded))
    pooled_mask = np.asarray(columns.pop("pooled"), dtype=bool)
    data: dict[str, Any] = {name: [value] * n_pairs for name, value in cell.items()}
    data.update(columns)
    data["metric"] = [settings.metric] * n_pairs
    pooled_count = np.asarray([int(np.sum(keep[order[starts[p] : starts[p] + counts[p]]])) for p in range(n_pairs)])
    for name, values in result.items():
        if name == "n_runs":
            data[name] = pooled_count if pooled_mask.all() else np.where(pooled_mask, values, pooled_count)
        elif pooled_mask.all():
            data[name] = values
        else:
            data[name] = np.where(pooled_mask, values.astype(float), np.nan)
    data["significant_random"] = [False] * n_pairs
    return pd.DataFrame(data).reindex(columns=[*cell, *POOLED_COLUMNS])


def meta_table(pairs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Fisher-z meta-analysis of the per-run partial correlations, per ``by`` cell with at least two runs.

    Returns one row per cell × pair with the fields of :class:`gengen.stats.meta.MetaResult`, the adjusted
    fixed- and random-effects p-values (``settings.adjust`` across the pairs of the cell) and
    ``significant_random`` (adjusted random-effects p below ``settings.alpha``).
    """
    runs = pairs[pairs["level"] == "run"]
    # Only the columns pooling reads: selecting each pair's rows of the whole pairs table (dozens of columns,
    # strings among them) was most of the pooling's time on large tables.
    runs = runs[[column for column in dict.fromkeys([*settings.by, *POOLING_INPUTS]) if column in runs.columns]]
    # maxT is a per-run permutation adjustment; pooled p-values fall back to Holm
    adjust = settings.p_adjust_method
    cell_tables = []
    for cell, cell_rows in _cells(runs, settings.by):
        run_keys = sorted(set(zip(cell_rows["model"], cell_rows["run"], strict=True)))
        if len(run_keys) < 2:
            continue
        table = _cell_table(cell, cell_rows, settings)
        # Under fit="auto" each run got its own control: the cell's, or all of them when its runs differ.
        table["fit"] = "+".join(sorted(set(cell_rows["fit"].astype(str)))) if "fit" in cell_rows else settings.fit
        table["p_fixed_adjusted"] = stats.p_adjust(table["p_fixed"].to_numpy(dtype=float), method=adjust)
        table["p_random_adjusted"] = stats.p_adjust(table["p_random"].to_numpy(dtype=float), method=adjust)
        table["significant_random"] = table["p_random_adjusted"] < settings.alpha
        cell_tables.append(table)
    if not cell_tables:
        return pd.DataFrame(columns=[*settings.by, *POOLED_COLUMNS])
    pooled = pd.concat(cell_tables, ignore_index=True)
    pooled["adjust"] = adjust
    pooled["method"] = settings.method
    return pooled[[*settings.by, *POOLED_COLUMNS, "adjust", "fit", "method"]]


def pooled_residual_groups(
    groups: list[Group], settings: Settings
) -> Iterator[tuple[Group, np.ndarray, str, np.ndarray | None]]:
    """For each ``by`` cell with at least two runs: the stacked group, its covariates, a note and residuals.

    Linear Pearson: the covariates are run dummies (R − 1 columns) and the ID score times each run's
    indicator (R columns), so the partial correlation equals the correlation of within-run residuals and the
    t-test has the right df. Otherwise the residuals come from :func:`gengen.stats.residualise` per run and
    the
    covariates are the run dummies; the fourth element then holds those residuals.
    """
    run_groups = [group for group in groups if group.level == "run"]
    meta = pd.DataFrame([group.meta for group in run_groups])
    for column in settings.by:
        if column not in meta.columns:
            meta[column] = None
    meta["position"] = range(len(run_groups))
    for cell, rows in _cells(meta, settings.by):
        members = [run_groups[i] for i in rows["position"]]
        if len(members) < 2:
            continue
        common = [
            name for name in members[0].scores.columns if all(name in member.scores.columns for member in members)
        ]
        stacked = pd.concat([member.scores[common] for member in members], ignore_index=True)
        id_values = np.concatenate([member.id_values for member in members])
        sizes = [len(member.id_values) for member in members]
        indicator = np.zeros((len(id_values), len(members)))
        start = 0
        for r, size in enumerate(sizes):
            indicator[start : start + size, r] = 1.0
            start += size
        dummies = indicator[:, 1:]
        group_meta = {**cell, "run": "pooled"}
        group_meta.setdefault("model", "*" if len({m.meta["model"] for m in members}) > 1 else members[0].meta["model"])
        group_meta["runs"] = ";".join(f"{m.meta['model']}/{m.meta['run']}" for m in members)
        group = Group("pooled_residuals", group_meta, np.arange(len(id_values)), id_values, stacked)
        if settings.method == "pearson" and settings.fit == "linear":
            covar = np.column_stack([dummies, indicator * id_values[:, None]])
            yield group, covar, " (pooled within-run residuals, df = N - 2R - 1)", None
        else:
            fit: dict[str, Any] = {"fit": settings.control}
            blocks = []
            for member in members:
                covariate = member.id_values[:, None]
                columns = [member.scores[name].to_numpy(dtype=float) for name in common]
                blocks.append(np.column_stack([np.asarray(stats.residualise(y, covariate, **fit)) for y in columns]))
            residuals = np.vstack(blocks)
            yield (
                group,
                dummies,
                " (pooled within-run residuals; df does not count the per-run fits)",
                residuals,
            )
