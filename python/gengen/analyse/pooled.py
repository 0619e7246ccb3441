"""Pooling runs of one cell (e.g. the seeds of a model/size/shots): meta-analysis and pooled residuals.

Which to use
------------
* **Meta-analysis** (``pooling="meta"``, the default): each run keeps its own partial correlation, and the
  runs are combined on Fisher's z scale (fixed and random effects — DerSimonian–Laird τ², widened by the runs'
  spread where it exceeds 1 (Hartung–Knapp, t on R − 1) — with I²; :mod:`gengen.stats.meta`). Right when runs
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

import functools
from collections.abc import Iterator
from dataclasses import dataclass
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
    "df_random",
    "p_random_adjusted",
    "significant_random",
    "tau2",
    "q",
    "q_df",
    "p_q",
    "i2",
    "runs_excluded",
    "runs_flagged",
    "diagnostics",
    "variance_method",
)

#: The share of a run's testable null rows that may carry diagnostics (the contract's bound on flags in
#: well-specified cells, docs/calibration.md). Under the null each run is flagged about this often or less,
#: so one or two flagged runs among ten say nothing about the pooled estimate: at 10 runs flagged at 5-8%,
#: "any run flagged" fired on 38-56% of null pooled rows.
RUN_FLAG_RATE = 0.20
#: A pooled row is flagged when the count of its flagged runs has a binomial tail below this at RUN_FLAG_RATE.
POOLED_FLAG_LEVEL = 0.05

#: How each run's variance of Fisher's z is obtained, as recorded in ``variance_method``.
SIEVE_VARIANCE = (
    "se_z² of each run (AR-sieve bootstrap, autocorrelation-aware); fixed effect on Student's t with "
    "Satterthwaite's df_fixed from the runs' df_sieve; random effect widened by the runs' spread (Hartung–Knapp) "
    "where it exceeds 1, on df_random = R - 1"
)
INDEPENDENT_VARIANCE = "1/(n - 3 - k) (assumes independent checkpoints)"
LAGGED_VARIANCE = (
    "(artanh r_innovation / t)² of each run's lagged test (the innovations' correlation is pooled); fixed "
    "effect on Student's t with Satterthwaite's df_fixed from the runs' df_lagged; random effect widened by the "
    "runs' spread (Hartung–Knapp) where it exceeds 1, on df_random = R - 1"
)


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
    "estimand",
    "r_innovation",
    "df_lagged",
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


def lagged_variance(r: Any, df: Any) -> np.ndarray:
    r"""The variance of artanh(r_innovation) that the lagged test's t statistic implies.

    Parameters
    ----------
    r : array_like
        Correlations of the innovations (``r_innovation``).
    df : array_like
        The lagged test's degrees of freedom (``df_lagged``).

    Returns
    -------
    ndarray
        :math:`(\operatorname{artanh} r / t)^2` with :math:`t = r\sqrt{\mathrm{df}/(1 - r^2)}` (1/df at r = 0):
        the squared standard error of the row's own interval (:func:`gengen.stats.consistent_interval`), so
        that z/se reproduces the lagged t statistic; NaN where r or df is unusable.

    Examples
    --------
    >>> from gengen.analyse.pooled import lagged_variance
    >>> lagged_variance([0.0, 0.5], [16.0, 16.0]).round(4)
    array([0.0625, 0.0566])
    """
    r = np.asarray(r, dtype=float)
    df = np.asarray(df, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        usable = np.isfinite(r) & (np.abs(r) < 1) & np.isfinite(df) & (df > 0)
        rr = np.where(usable, r, 0.0)
        dd = np.where(usable, df, 1.0)
        t = rr * np.sqrt(dd / (1.0 - rr * rr))
        se = np.where(np.abs(rr) > 1e-12, np.arctanh(rr) / np.where(t != 0, t, 1.0), 1.0 / np.sqrt(dd))
    return np.where(usable, se * se, np.nan)


def lagged_estimates(runs: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The per-run rows with those the lagged test decided put in the quantity that test is about.

    Parameters
    ----------
    runs : DataFrame
        Per-run rows of an analysis' pairs table.

    Returns
    -------
    rows : DataFrame
        ``runs`` where each row with ``estimand`` r_innovation carries ``r_innovation`` in ``r_partial``, the
        lagged test's standard error of its Fisher z (:func:`lagged_variance`) in ``se_z`` and ``df_lagged``
        in ``df_sieve``; other rows unchanged.
    lagged : bool
        Whether any row was the lagged test's.

    Notes
    -----
    Before issue 34 the lagged rows, which have no sieve standard error, were pooled on ``r_partial`` with
    ppcor's 1/(n − 3 − k), a variance that assumes independent checkpoints.
    """
    if "estimand" not in runs.columns or "r_innovation" not in runs.columns:
        return runs, False
    lagged = (runs["estimand"].astype(str) == "r_innovation").to_numpy()
    if not lagged.any():
        return runs, False
    r_innovation = runs["r_innovation"].to_numpy(dtype=float)
    df_lagged = runs["df_lagged"].to_numpy(dtype=float)
    se = runs["se_z"].to_numpy(dtype=float) if "se_z" in runs.columns else np.full(len(runs), np.nan)
    df = runs["df_sieve"].to_numpy(dtype=float) if "df_sieve" in runs.columns else np.full(len(runs), np.nan)
    return runs.assign(
        r_partial=np.where(lagged, r_innovation, runs["r_partial"].to_numpy(dtype=float)),
        se_z=np.where(lagged, np.sqrt(lagged_variance(r_innovation, df_lagged)), se),
        df_sieve=np.where(lagged, df_lagged, df),
    ), True


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


@functools.lru_cache(maxsize=256)  # a few (flagged, runs) counts, asked once per pooled pair
def flagged_beyond_chance(flagged: int, runs: int) -> float | None:
    """The binomial tail P(X >= flagged), X ~ Binomial(runs, RUN_FLAG_RATE), when it is below
    POOLED_FLAG_LEVEL (more runs flagged than the runs' own null rate explains); None otherwise.

    At 2 runs both must be flagged, at 3 all three, at 10 five of them: a diagnostic that holds for the
    condition shows in most of its runs, while a run's null flags (up to 20%) rarely gather that way.
    """
    if flagged <= 0 or runs <= 0:
        return None
    from scipy.stats import binom

    tail = float(binom.sf(flagged - 1, runs, RUN_FLAG_RATE))
    return tail if tail < POOLED_FLAG_LEVEL else None


def _flagged_note(notes: list[str], runs: int) -> list[str]:
    """'6 of 10 runs flagged, more than ... explains (…; first: …)' when the flagged runs are beyond chance."""
    tail = flagged_beyond_chance(len(notes), runs)
    if tail is None:
        return []
    return [
        f"{len(notes)} of {runs} runs flagged, more than their {RUN_FLAG_RATE:.0%} null rate explains "
        f"(binomial p = {tail:.2g}; first: {notes[0]})"
    ]


def _flagged_runs(pair_rows: pd.DataFrame) -> list[str]:
    """The pooled row's note on its runs' diagnostics (:func:`_flagged_note`); [] when there is none."""
    if "diagnostics" not in pair_rows.columns:
        return []
    notes = [str(text) for text in pair_rows["diagnostics"].fillna("") if str(text)]
    return _flagged_note(notes, len(pair_rows))


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


@dataclass(frozen=True)
class _PairLayout:
    """Where the rows of one cell go in a (pairs × runs) array: row ``order[i]`` is run ``slot[i]`` of pair
    ``codes[i]``; each pair's runs stay in table order (``order`` is a stable sort by pair)."""

    order: np.ndarray
    codes: np.ndarray
    slot: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    row_pair: np.ndarray  # the pair of each row of the cell (-1: a row without both test sets)

    @classmethod
    def of(cls, cell_rows: pd.DataFrame) -> _PairLayout:
        """The layout of ``cell_rows``' pairs (``testset_a``, ``testset_b``), in order of first appearance."""
        group_of = cell_rows.groupby(["testset_a", "testset_b"], sort=False).ngroup().to_numpy()
        present = group_of >= 0
        order = np.flatnonzero(present)[np.argsort(group_of[present], kind="stable")]
        codes = group_of[order]
        counts = np.bincount(codes, minlength=int(codes.max()) + 1 if len(codes) else 0)
        starts = np.cumsum(counts) - counts
        return cls(order, codes, np.arange(len(order)) - starts[codes], starts, counts, group_of)

    @property
    def n_pairs(self) -> int:
        return len(self.counts)

    def grid(self, values: np.ndarray, fill: Any) -> np.ndarray:
        """``values`` (one per row of the cell) as a (pairs × runs) array, ``fill`` where a pair has fewer runs."""
        width = int(self.counts.max()) if self.n_pairs else 0
        out = np.full((self.n_pairs, width), fill)
        out[self.codes, self.slot] = values[self.order]
        return out

    def per_pair_sum(self, flags: np.ndarray) -> np.ndarray:
        """How many rows of each pair ``flags`` marks."""
        return np.bincount(self.codes, weights=flags[self.order], minlength=self.n_pairs).astype(int)


def _kept_runs(cell_rows: pd.DataFrame, layout: _PairLayout) -> tuple[np.ndarray, np.ndarray]:
    """Which rows are pooled (:func:`testable_runs`: testable, an estimate, and a standard error where the pair's
    runs have one), and whether each pair's runs have a sieve standard error (:func:`run_variances`)."""
    r = cell_rows["r_partial"].to_numpy(dtype=float)
    se = cell_rows["se_z"].to_numpy(dtype=float) if "se_z" in cell_rows.columns else np.full(len(r), np.nan)
    testable = (
        cell_rows["testable"].fillna(False).astype(bool).to_numpy()
        if "testable" in cell_rows.columns
        else np.ones(len(r), dtype=bool)
    )
    has_se = np.zeros(layout.n_pairs, dtype=bool)
    np.logical_or.at(has_se, layout.codes, np.isfinite(se[layout.order]))
    keep = testable & np.isfinite(r) & (layout.row_pair >= 0)
    keep &= ~has_se[np.maximum(layout.row_pair, 0)] | np.isfinite(se)
    return keep, has_se


def _check_kept(layout: _PairLayout, kept_grid: np.ndarray, cell_rows: pd.DataFrame) -> None:
    """The checks :func:`gengen.stats.meta.fisher_meta` makes on the runs it is given (the kept ones), in pair
    order: correlations in [-1, 1], counts >= 0."""
    for name, column in (("r", "r_partial"), ("n", "n"), ("k", "k")):
        values = layout.grid(cell_rows[column].to_numpy(dtype=float), np.nan)
        with np.errstate(invalid="ignore"):
            wrong = kept_grid & ((np.abs(values) > 1 + 1e-9) if name == "r" else (values < 0))
        if wrong.any():
            message = "correlations must lie in [-1, 1]" if name == "r" else "counts must be >= 0"
            raise InvalidArgumentError(f"{name}: {message}, got {float(values[wrong][0]):g}")


def _pooled_estimates(
    cell_rows: pd.DataFrame, layout: _PairLayout, keep: np.ndarray, has_se: np.ndarray, settings: Settings
) -> dict[str, np.ndarray]:
    """Every pair's meta-analysis in one pass: each run's variance of Fisher's z (``se_z²`` on ``df_sieve`` for
    a pair whose runs have a sieve standard error, else ``1/(n - 3 - k)`` on infinite df)."""
    r = cell_rows["r_partial"].to_numpy(dtype=float)
    n = cell_rows["n"].to_numpy(dtype=float)
    k = cell_rows["k"].to_numpy(dtype=float)
    se = cell_rows["se_z"].to_numpy(dtype=float) if "se_z" in cell_rows.columns else np.full(len(r), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        independent = np.where(n - 3 - k > 0, 1.0 / (n - 3.0 - k), np.nan)
    pair_has_se = has_se[np.maximum(layout.row_pair, 0)]
    has_df_column = "df_sieve" in cell_rows.columns
    dof = cell_rows["df_sieve"].to_numpy(dtype=float) if has_df_column else np.full(len(r), np.inf)
    return fisher_meta_rows(
        layout.grid(np.where(keep, r, np.nan), np.nan),
        layout.grid(np.where(pair_has_se, se**2, independent), np.nan),
        layout.grid(np.where(pair_has_se, dof, np.inf), np.inf),
        has_se & has_df_column,
        ci_level=settings.ci_level,
    )


def _kept_means(layout: _PairLayout, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each pair's mean of ``values`` over its kept runs, summed in run order as ``numpy.mean`` sums them (the
    kept values moved to the front of each row; one reduction per count of kept runs)."""
    kept_grid = layout.grid(keep, False)
    grid = layout.grid(values, np.nan)
    front = np.argsort(~kept_grid, axis=1, kind="stable")
    packed = np.take_along_axis(grid, front, axis=1)
    count = kept_grid.sum(axis=1)
    means = np.full(layout.n_pairs, np.nan)
    for size in np.unique(count[count > 0]).tolist():
        rows = np.flatnonzero(count == size)
        means[rows] = np.add.reduce(np.ascontiguousarray(packed[rows, :size]), axis=1) / size
    return means


def _run_labels(cell_rows: pd.DataFrame, layout: _PairLayout, keep: np.ndarray) -> list[str]:
    """Each pair's kept runs as ``model/run;model/run…`` (one join per distinct set of kept runs)."""
    runs, names = pd.factorize(pd.MultiIndex.from_arrays([cell_rows["model"], cell_rows["run"]]))
    labels = [f"{model}/{run}" for model, run in names]
    pattern = np.ascontiguousarray(layout.grid(np.where(keep, runs, -1), -1))
    rows = pattern.view(np.dtype((np.void, pattern.dtype.itemsize * pattern.shape[1]))).ravel()
    _, first, which = np.unique(rows, return_index=True, return_inverse=True)
    joined = [";".join(labels[i] for i in pattern[row] if i >= 0) for row in first.tolist()]
    return [joined[i] for i in which.ravel().tolist()]


def _diagnostics(cell_rows: pd.DataFrame, layout: _PairLayout, keep: np.ndarray, pooled: np.ndarray) -> list[str]:
    """Each pair's notes: its runs left out (with their reasons), then how many pooled runs are flagged when
    that is beyond chance (:func:`flagged_beyond_chance`), or that it was not pooled; empty for the (usual)
    pair with none of these."""
    models, run_names = cell_rows["model"].to_numpy(), cell_rows["run"].to_numpy()
    reasons = _column(cell_rows, "untestable_reason", "")
    notes = _column(cell_rows, "diagnostics", "")
    noted = _has_text(cell_rows, "diagnostics")
    irregular = ~pooled | (layout.per_pair_sum(~keep) > 0) | (layout.per_pair_sum(keep & noted) > 0)
    out = [""] * layout.n_pairs
    for pair in np.flatnonzero(irregular).tolist():
        members = layout.order[layout.starts[pair] : layout.starts[pair] + layout.counts[pair]]
        kept = members[keep[members]]
        lines = [
            f"{models[i]}/{run_names[i]} left out: {reasons[i] or 'no estimate or standard error'!s}"
            for i in members[~keep[members]]
        ]
        if not pooled[pair]:
            lines.append("fewer than two testable runs: not pooled")
        else:
            lines.extend(_flagged_note([str(notes[i]) for i in kept if noted[i]], len(kept)))
        out[pair] = "; ".join(lines)
    return out


def _has_text(rows: pd.DataFrame, name: str) -> np.ndarray:
    """Whether each row's ``name`` is present and not empty (False everywhere when there is no such column)."""
    if name not in rows.columns:
        return np.zeros(len(rows), dtype=bool)
    column = rows[name]
    present = column.notna().to_numpy(dtype=bool)
    return present & (column.astype(str).to_numpy(dtype=object) != "")


def _cell_table(cell: dict[str, Any], cell_rows: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The pooled rows of one cell: every pair's testable runs in one (pairs, runs) array, one meta-analysis
    pass over it (:func:`gengen.stats.meta.fisher_meta_rows`), the table built column-wise.

    Equal to :func:`testable_runs`, :func:`run_variances` and :func:`gengen.stats.meta.fisher_meta` pair by
    pair (``tests/test_pooled_vectorised.py`` checks it against that loop).
    """
    layout = _PairLayout.of(cell_rows)
    keep, has_se = _kept_runs(cell_rows, layout)
    _check_kept(layout, layout.grid(keep, False), cell_rows)
    result = _pooled_estimates(cell_rows, layout, keep, has_se, settings)
    kept_count = layout.per_pair_sum(keep)
    pooled = kept_count >= 2
    first = layout.order[layout.starts]
    n_pairs = layout.n_pairs
    data: dict[str, Any] = {name: [value] * n_pairs for name, value in cell.items()}
    data["testset_a"] = cell_rows["testset_a"].to_numpy()[first].tolist()
    data["testset_b"] = cell_rows["testset_b"].to_numpy()[first].tolist()
    data["runs"] = np.where(pooled, np.array(_run_labels(cell_rows, layout, keep), dtype=object), "").tolist()
    n_kept = layout.grid(np.where(keep, cell_rows["n"].to_numpy(dtype=float), 0.0), 0.0).sum(axis=1)
    data["n_total"] = np.where(pooled, n_kept, 0).astype(int)
    data["mean_r"] = np.where(pooled, _kept_means(layout, keep, cell_rows["r_partial"].to_numpy(dtype=float)), np.nan)
    data["runs_excluded"] = layout.per_pair_sum(~keep)
    data["runs_flagged"] = layout.per_pair_sum(keep & _has_text(cell_rows, "diagnostics"))
    data["diagnostics"] = _diagnostics(cell_rows, layout, keep, pooled)
    method = np.where(has_se, SIEVE_VARIANCE, INDEPENDENT_VARIANCE).astype(object)
    data["variance_method"] = np.where(pooled, method, np.nan).tolist()
    data["metric"] = [settings.metric] * n_pairs
    for name, values in result.items():
        if name == "n_runs":
            data[name] = kept_count if pooled.all() else np.where(pooled, values, kept_count)
        elif pooled.all():
            data[name] = values
        else:
            data[name] = np.where(pooled, values.astype(float), np.nan)
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
    runs, lagged = lagged_estimates(runs)
    cell_tables = []
    for cell, cell_rows in _cells(runs, settings.by):
        if len(cell_rows[["model", "run"]].drop_duplicates()) < 2:
            continue
        table = _cell_table(cell, cell_rows, settings)
        if lagged:
            table["variance_method"] = table["variance_method"].replace(SIEVE_VARIANCE, LAGGED_VARIANCE)
        # Under fit="auto" the runs of a cell share the control chosen for the cell from all their curvature tests.
        fits = sorted(set(cell_rows["fit"].astype(str).unique())) if "fit" in cell_rows else [settings.fit]
        table["fit"] = "+".join(fits)
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
