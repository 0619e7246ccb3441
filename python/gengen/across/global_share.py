r"""The global answer of the verdict: per model, the share of OOD pairs that co-move beyond ID.

From one estimate per model and pair (:func:`gengen.across.heterogeneity.group_estimates`: a model's runs pooled,
:math:`\hat z`, its variance and df), three tables that :func:`gengen.across.verdict.build_verdict` carries:

* :func:`global_share_table`: per model, Storey's :math:`\hat\pi_1` of the pairs' p-values, counted against
  each pair's simulated null probability (``p_null_above`` of the analysis, :func:`with_null_above`), with a
  delete-one-test-set jackknife interval and a one-sided test of "share > 0"
  (:func:`gengen.stats.share.global_share`; calibrated in docs/calibration.md);
* :func:`r_distribution_table`: per model, a histogram of the pairs' r beside the counts the null would give
  (each row's own null: :math:`\operatorname{artanh} r / \mathrm{se} \sim t_\nu`);
* :func:`resolved_sign_agreement`: per two models, how many of the pairs each resolves (unadjusted
  :math:`p < \alpha` in both) point the same way.

Pairs flagged ``related`` in the pairs table (splits of one task, nested sets) are left out of all three.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from gengen.stats.share import MIN_TESTSETS_INTERVAL, SHORT_RUN

__all__ = [
    "GLOBAL_SHARE_COLUMNS",
    "R_DISTRIBUTION_COLUMNS",
    "answer_sentence",
    "global_share_table",
    "r_distribution_table",
    "resolved_sign_agreement",
    "unrelated_estimates",
    "with_null_above",
]

#: Columns of :func:`global_share_table`.
GLOBAL_SHARE_COLUMNS = (
    "unit",
    "n_runs",
    "n_testsets",
    "n_pairs",
    "share",
    "ci_low",
    "ci_high",
    "ci_level",
    "se",
    "p_share_positive",
    "share_p_below_alpha",
    "method",
)
#: Columns of :func:`r_distribution_table`.
R_DISTRIBUTION_COLUMNS = ("unit", "bin_low", "bin_high", "n_observed", "n_null_expected")


def unrelated_estimates(estimates: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """``estimates`` without the pairs that ``pairs`` flags ``related`` (all of them when it has no such column)."""
    if "related" not in pairs.columns or estimates.empty:
        return estimates
    flagged = pairs[pairs["related"].fillna(False).astype(bool)]
    if flagged.empty:
        return estimates
    related = {frozenset((a, b)) for a, b in zip(*_columns(flagged, "testset_a", "testset_b"), strict=True)}
    keys = [frozenset((a, b)) for a, b in zip(*_columns(estimates, "testset_a", "testset_b"), strict=True)]
    return estimates[[key not in related for key in keys]].reset_index(drop=True)


def _columns(table: pd.DataFrame, *names: str) -> list[list[str]]:
    """The named columns as lists of str: iterating pandas' Arrow-backed strings goes element by element through
    Python (0.5 us each; about a second over the verdict's zips at 32 groups x 2,016 pairs), a list does not."""
    return [table[name].astype(str).tolist() for name in names]


def with_null_above(estimates: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """``estimates`` with ``p_null_above``: a one-run sieve estimate's null probability that its p-value exceeds
    Storey's lambda, from the analysis' row of that run and pair (NaN for pooled runs, the lagged test, and
    tables without the column: the share then counts against uniform null p-values), and ``n_checkpoints``, that
    row's ``n`` (the share's variance depends on it: :func:`gengen.stats.share.share_variance`)."""
    from gengen.across.heterogeneity import SIEVE, SIEVE_INTERVAL

    out = estimates.assign(p_null_above=np.nan, n_checkpoints=np.nan)
    if "p_null_above" not in pairs.columns or estimates.empty:
        return out
    rows = pairs[pairs["level"] == "run"] if "level" in pairs.columns else pairs
    keys = list(zip(*_columns(rows, "model", "run", "testset_a", "testset_b"), strict=True))
    # A run and pair met twice (shots, conditions) is ambiguous: left uncalibrated. (One hashing pass: a lookup
    # of each key in value_counts' Series cost 0.8 s at 32 groups x 2,016 pairs.)
    repeated = pd.Series(keys, dtype=object).duplicated(keep=False).to_numpy()
    lookup = {key: position for position, (key, twice) in enumerate(zip(keys, repeated, strict=True)) if not twice}
    single = (estimates["n_runs"] == 1) & estimates["variance_method"].isin([SIEVE, SIEVE_INTERVAL])
    found = np.array(
        [
            lookup.get((model, run, a, b), -1) if ok else -1
            for model, run, a, b, ok in zip(
                *_columns(estimates, "model", "runs", "testset_a", "testset_b"), single.to_numpy(), strict=True
            )
        ],
        dtype=np.int64,
    )
    hit = found >= 0
    null = rows["p_null_above"].to_numpy(dtype=float)
    checkpoints = rows["n"].to_numpy(dtype=float) if "n" in rows.columns else np.full(len(rows), np.nan)
    out["p_null_above"] = np.where(hit, null[np.where(hit, found, 0)], np.nan) if len(rows) else np.nan
    out["n_checkpoints"] = np.where(hit, checkpoints[np.where(hit, found, 0)], np.nan) if len(rows) else np.nan
    return out


def _p_values(rows: pd.DataFrame) -> np.ndarray:
    """Each estimate's two-sided p-value of z = 0: :math:`\\hat z/\\sqrt{v}` on its df (normal without)."""
    from gengen.across.per_pair import two_sided_p_array

    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = (rows["z"] / np.sqrt(rows["variance"])).to_numpy(dtype=float)
    df = rows["df"].to_numpy(dtype=float) if "df" in rows.columns else np.full(len(rows), np.inf)
    return two_sided_p_array(statistic, np.where(np.isfinite(df) & (df > 0), df, np.inf))


def global_share_table(estimates: pd.DataFrame, *, alpha: float = 0.05, ci_level: float = 0.95) -> pd.DataFrame:
    """Per model (``unit``), the estimated share of pairs with a non-zero partial correlation.

    Parameters
    ----------
    estimates : DataFrame
        :func:`gengen.across.heterogeneity.group_estimates` rows (``unit, testset_a, testset_b, n_runs, z, variance,
        df``, optionally ``p_null_above`` and ``n_checkpoints``: :func:`with_null_above`), related pairs already
        left out (:func:`unrelated_estimates`). With a simulated null count on runs shorter than
        :data:`gengen.stats.share.SHORT_RUN` checkpoints the interval takes the plain jackknife
        (:func:`gengen.stats.share.share_variance`), else the corrected variance.
    alpha : float
        Level of ``share_p_below_alpha`` (the raw share of pairs with p < alpha, which is alpha under the null).
    ci_level : float
        Level of the interval.

    Returns
    -------
    DataFrame
        The columns of :data:`GLOBAL_SHARE_COLUMNS`, one row per unit.

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> import pandas as pd
    >>> pairs = list(itertools.combinations([f"t{i}" for i in range(12)], 2))
    >>> z = np.random.default_rng(1).normal(0.0, 0.2, len(pairs))
    >>> estimates = pd.DataFrame({"unit": "m", "testset_a": [a for a, _ in pairs],
    ...                           "testset_b": [b for _, b in pairs], "n_runs": 1, "z": z,
    ...                           "variance": 0.04, "df": np.inf})
    >>> global_share_table(estimates)[["unit", "n_pairs", "share", "ci_low", "ci_high"]].round(2)
      unit  n_pairs  share  ci_low  ci_high
    0    m       66    0.0     0.0     0.02
    """
    from gengen.stats.share import global_share, share_variance

    rows: list[dict[str, Any]] = []
    for unit, cell in estimates.groupby("unit", sort=False):
        p = _p_values(cell)
        null = cell["p_null_above"].to_numpy(dtype=float) if "p_null_above" in cell.columns else None
        simulated = null is not None and bool(np.isfinite(null).any())
        checkpoints = cell["n_checkpoints"].to_numpy(dtype=float) if "n_checkpoints" in cell.columns else []
        checkpoints = np.asarray(checkpoints, dtype=float)
        finite_n = checkpoints[np.isfinite(checkpoints)]
        n_checkpoints = float(np.median(finite_n)) if len(finite_n) else float("nan")
        variance = share_variance(n_checkpoints, simulated)
        result = global_share(
            p,
            cell["testset_a"].to_numpy(),
            cell["testset_b"].to_numpy(),
            ci_level=ci_level,
            null_above=null,
            variance=variance,
        )
        finite = p[np.isfinite(p)]
        rows.append(
            {
                "unit": str(unit),
                "n_runs": int(cell["n_runs"].max()) if "n_runs" in cell.columns else 1,
                "n_testsets": result.n_testsets,
                "n_pairs": result.n_pairs,
                "share": result.share,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "ci_level": ci_level,
                "se": result.se,
                "p_share_positive": result.p_positive,
                "share_p_below_alpha": float(np.mean(finite < alpha)) if len(finite) else float("nan"),
                "method": result.method
                + (f"; plain jackknife: runs shorter than {SHORT_RUN} checkpoints" if variance == "jackknife" else "")
                + ("; a model's runs pooled first (random effects)" if int(cell["n_runs"].max()) > 1 else ""),
            }
        )
    return pd.DataFrame(rows, columns=list(GLOBAL_SHARE_COLUMNS))


def r_distribution_table(estimates: pd.DataFrame, *, n_bins: int = 20) -> pd.DataFrame:
    """Per model, a histogram of the pairs' r beside the count each bin would hold if no pair co-moved.

    Parameters
    ----------
    estimates : DataFrame
        :func:`gengen.across.heterogeneity.group_estimates` rows (``unit, z, variance, df``).
    n_bins : int
        Equal bins over [-1, 1].

    Returns
    -------
    DataFrame
        ``unit, bin_low, bin_high, n_observed, n_null_expected``: the pairs whose r falls in the bin, and
        :math:`\\sum_i [F_i(\\operatorname{artanh} h) - F_i(\\operatorname{artanh} l)]` with :math:`F_i` the
        t distribution on the row's df scaled by its standard error (the null of the row's own test).

    Examples
    --------
    >>> import pandas as pd
    >>> estimates = pd.DataFrame({"unit": "m", "z": [0.05, -0.1, 0.9], "variance": 0.04, "df": float("inf")})
    >>> table = r_distribution_table(estimates, n_bins=4)
    >>> table[["bin_low", "bin_high", "n_observed"]].to_numpy().tolist()
    [[-1.0, -0.5, 0.0], [-0.5, 0.0, 1.0], [0.0, 0.5, 1.0], [0.5, 1.0, 1.0]]
    >>> table["n_null_expected"].round(3).tolist()
    [0.009, 1.491, 1.491, 0.009]
    """
    from scipy import stats as scipy_stats

    edges = np.linspace(-1.0, 1.0, n_bins + 1)
    with np.errstate(divide="ignore"):
        edge_z = np.arctanh(edges)
    rows = []
    for unit, cell in estimates.groupby("unit", sort=False):
        z = cell["z"].to_numpy(dtype=float)
        se = np.sqrt(cell["variance"].to_numpy(dtype=float))
        df = cell["df"].to_numpy(dtype=float) if "df" in cell.columns else np.full(len(cell), np.inf)
        keep = np.isfinite(z) & np.isfinite(se) & (se > 0)
        z, se, df = z[keep], se[keep], df[keep]
        observed, _ = np.histogram(np.tanh(z), bins=edges)
        scaled = edge_z[None, :] / se[:, None]
        normal = ~(np.isfinite(df) & (df > 0))
        cdf = np.where(
            normal[:, None],
            scipy_stats.norm.cdf(scaled),
            scipy_stats.t.cdf(scaled, np.where(normal, 1.0, df)[:, None]),
        )
        expected = np.diff(cdf, axis=1).sum(axis=0)
        for index in range(n_bins):
            rows.append(
                {
                    "unit": str(unit),
                    "bin_low": float(edges[index]),
                    "bin_high": float(edges[index + 1]),
                    "n_observed": float(observed[index]),
                    "n_null_expected": float(expected[index]),
                }
            )
    return pd.DataFrame(rows, columns=list(R_DISTRIBUTION_COLUMNS))


def resolved_sign_agreement(estimates: pd.DataFrame, *, alpha: float = 0.05) -> pd.DataFrame:
    """Per two models, the pairs both resolve (unadjusted p < alpha in each) and how many agree in sign.

    Parameters
    ----------
    estimates : DataFrame
        :func:`gengen.across.heterogeneity.group_estimates` rows.
    alpha : float
        The unadjusted level at which a model resolves a pair's sign.

    Returns
    -------
    DataFrame
        ``group_a, group_b, n_resolved_both, n_resolved_agree, resolved_sign_agreement`` (NaN when no pair is
        resolved by both); chance is one half when the models' signs are unrelated.

    Examples
    --------
    >>> import pandas as pd
    >>> estimates = pd.DataFrame({"unit": ["a", "a", "b", "b"], "testset_a": "x", "testset_b": ["y", "w"] * 2,
    ...                           "z": [0.9, 0.8, 0.7, -0.9], "variance": 0.04, "df": float("inf")})
    >>> resolved_sign_agreement(estimates).to_dict("records")
    [{'group_a': 'a', 'group_b': 'b', 'n_resolved_both': 2, 'n_resolved_agree': 1, 'resolved_sign_agreement': 0.5}]
    """
    table = estimates.assign(
        p=_p_values(estimates),
        key=[
            f"{a}\x1f{b}" if a <= b else f"{b}\x1f{a}"
            for a, b in zip(*_columns(estimates, "testset_a", "testset_b"), strict=True)
        ],
    )
    # Every unit's resolved signs as one row of a unit x pair matrix (+1, -1; 0 where unresolved), so that each
    # two units' counts are matrix products instead of one join per two units (496 joins at 32 groups).
    unit_index, unit_names = pd.factorize(table["unit"].astype(str))  # codes in order of first appearance
    units = [str(unit) for unit in unit_names]
    key_codes, _ = pd.factorize(table["key"])
    resolved = (table["p"] < alpha).to_numpy()
    sign = np.zeros((len(units), int(key_codes.max()) + 1 if len(key_codes) else 0))
    sign[unit_index[resolved], key_codes[resolved]] = np.sign(table["z"].to_numpy(dtype=float)[resolved])
    positive, negative = (sign > 0).astype(float), (sign < 0).astype(float)
    n_both = np.rint((positive + negative) @ (positive + negative).T).astype(int)
    n_agree = np.rint(positive @ positive.T + negative @ negative.T).astype(int)
    rows = []
    for i, j in combinations(range(len(units)), 2):
        both, agree = int(n_both[i, j]), int(n_agree[i, j])
        rows.append(
            {
                "group_a": units[i],
                "group_b": units[j],
                "n_resolved_both": both,
                "n_resolved_agree": agree,
                "resolved_sign_agreement": agree / both if both else float("nan"),
            }
        )
    columns = ["group_a", "group_b", "n_resolved_both", "n_resolved_agree", "resolved_sign_agreement"]
    return pd.DataFrame(rows, columns=columns)


def _share_text(row: Any) -> str:
    """``12% (95% CI 5–19%)`` of one model's share row."""
    if not np.isfinite(row.share):
        return "n/a"
    if not np.isfinite(row.ci_low):
        return f"{100 * row.share:.0f}% (no interval: {row.n_testsets} test sets, or no spread between them)"
    level = f"{100 * row.ci_level:.0f}%"
    return f"{_percent(row.share)}% ({level} CI {_percent(row.ci_low)}–{_percent(row.ci_high)}%)"


def _share_only(row: Any) -> str:
    """``12%`` of one model's share row (its interval, when there is none, said once by the caller)."""
    return f"{_percent(row.share)}%"


def _percent(share: float) -> str:
    """A share in percent: whole numbers, one decimal below 1% (so that a bound above 0 never reads 0)."""
    return f"{100 * share:.1f}" if 0 < share < 0.01 else f"{100 * share:.0f}"


def answer_sentence(
    shares: pd.DataFrame,
    agreement: dict[str, Any],
    resolved: pd.DataFrame,
    *,
    n_resolvable: int,
    n_pairs: int,
    r_detectable_median: float,
    threshold: float,
    alpha: float,
    adjust: str,
) -> str:
    """The verdict's answer: the share of co-moving pairs per model, whether the pattern replicates across
    models, and how many pairs the data could resolve one by one (:attr:`gengen.across.verdict.Verdict.answer`).

    A share is "above zero" when its interval's lower end is (the one-sided test at half of one minus the
    interval's level); more than four models are summarised by the smallest and the largest share.
    """
    if shares.empty:
        return "No model has testable pairs of OOD test sets: there is no global answer to give."
    rows = list(shares.itertuples(index=False))
    above = sum(bool(np.isfinite(row.ci_low) and row.ci_low > 0) for row in rows)
    # When no model has an interval, say why once rather than after every share.
    without_interval = all(np.isfinite(row.share) and not np.isfinite(row.ci_low) for row in rows)
    text = _share_only if without_interval else _share_text
    shown = rows if len(rows) <= 4 else [min(rows, key=lambda r: r.share), max(rows, key=lambda r: r.share)]
    first, *others = shown
    head = f"An estimated {text(first)} of OOD pairs co-move beyond ID in {first.unit}"
    if len(rows) > 4:
        head = (
            f"Across {len(rows)} models, the estimated share of OOD pairs that co-move beyond ID ranges from "
            f"{text(first)} in {first.unit} to {text(others[0])} in {others[0].unit}"
        )
    else:
        head += "".join(
            f"{' and' if index == len(others) - 1 else ','} {text(row)} in {row.unit}"
            for index, row in enumerate(others)
        )
    if without_interval:
        counts = sorted({int(row.n_testsets) for row in rows})
        head += (
            f" (no interval: {'/'.join(map(str, counts))} test sets, fewer than the {MIN_TESTSETS_INTERVAL} its "
            "calibration covers, or no spread between them)"
        )
    elif len(rows) == 1:
        head += " (interval above zero)" if above else " (not distinguishable from none)"
    else:
        head += f" (interval above zero in {above} of {len(rows)} models)"
    if agreement:
        mantel = agreement["mantel_r"]
        comparisons = agreement["n_comparisons"]
        significant = mantel["n_significant"]
        if significant == comparisons:
            replicates = "the pattern replicates across models"
        elif significant == 0:
            replicates = "the pattern does not replicate across models"
        else:
            replicates = f"the pattern replicates in {significant} of {comparisons} pairs of models"
        head += (
            f"; {replicates} ({'median ' if comparisons > 1 else ''}Mantel r = {mantel['median']:.2f}, chance 0, "
            f"95% range {mantel['chance_low']:.2f} to {mantel['chance_high']:.2f}"
        )
        if not resolved.empty:
            both = int(resolved["n_resolved_both"].sum())
            agree = int(resolved["n_resolved_agree"].sum())
            head += f"; {agree} of the {both} pairs with p < {alpha:g} in both of two models agree in sign, chance 50%"
        head += ")"
    detectable = (
        f"median detectable |r| {r_detectable_median:.2f}" if np.isfinite(r_detectable_median) else "no detectable |r|"
    )
    tail = (
        f" One by one, {n_resolvable} of {n_pairs} pairs could have been resolved at |r| = {threshold:g} "
        f"({detectable} at 80% power after {adjust} over the pairs)."
    )
    return head + "." + tail
