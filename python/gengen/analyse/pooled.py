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
from gengen.stats.meta import fisher_meta

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
    rows: list[dict[str, Any]] = []
    cell_tables = []
    for cell, cell_rows in _cells(runs, settings.by):
        run_keys = sorted(set(zip(cell_rows["model"], cell_rows["run"], strict=True)))
        if len(run_keys) < 2:
            continue
        rows = []
        for (a, b), all_rows in cell_rows.groupby(["testset_a", "testset_b"], sort=False):
            pair_rows, excluded = testable_runs(all_rows)
            if len(pair_rows) < 2:
                rows.append(
                    {
                        **cell,
                        "testset_a": a,
                        "testset_b": b,
                        "metric": settings.metric,
                        "runs": "",
                        "n_total": 0,
                        "n_runs": len(pair_rows),
                        "runs_excluded": len(excluded),
                        "diagnostics": "; ".join([*excluded, "fewer than two testable runs: not pooled"]),
                        "significant_random": False,
                    }
                )
                continue
            variance, variance_df, variance_method = run_variances(pair_rows)
            result = fisher_meta(
                pair_rows["r_partial"].to_numpy(),
                pair_rows["n"].to_numpy(),
                pair_rows["k"].to_numpy(),
                ci_level=settings.ci_level,
                variance=variance,
                df=variance_df,
            )
            rows.append(
                {
                    **cell,
                    "testset_a": a,
                    "testset_b": b,
                    "metric": settings.metric,
                    "runs": ";".join(
                        f"{model}/{run}" for model, run in zip(pair_rows["model"], pair_rows["run"], strict=True)
                    ),
                    "n_total": int(pair_rows["n"].sum()),
                    "mean_r": float(pair_rows["r_partial"].mean()),
                    **result.as_dict(),
                    "runs_excluded": len(excluded),
                    "diagnostics": "; ".join([*excluded, *_flagged_runs(pair_rows)]),
                    "variance_method": variance_method,
                }
            )
        table = pd.DataFrame(rows).reindex(columns=[*cell, *POOLED_COLUMNS])
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
