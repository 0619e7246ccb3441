r"""The answer at a glance: which pairs' partial correlations hold across models, which depend on the model.

Every pair of OOD test sets gets one of four classes, from one estimate per model and condition (its replicates
pooled, :func:`gengen.across.heterogeneity.group_estimates`: each in the quantity its rows were tested on, with the
variance of the same dependence model as their intervals — never ppcor's independence variance) and the
across-model tests of :mod:`gengen.across.heterogeneity`; pairs of related test sets (``related`` in the pairs table)
are
left out unless ``keep_related``:

* first, the joint test that every model's partial correlation is 0 (:math:`\sum_g w_g \hat z_g^2` against
  :math:`M F_{M,\nu}`, adjusted across pairs) must reject, else the pair is **undetermined**: it is the
  intersection of the two questions below, so testing it first (closed testing) keeps the chance that a null
  pair gets any class but undetermined at :math:`\alpha` rather than the two tests' :math:`2\alpha` (issue 34:
  0.107 at 4 models before, on realistic null curves);
* **model-dependent**: the partial correlation differs between models — Cochran's Q, adjusted across pairs
  with the analysis' method (Holm when it used maxT), below :math:`\alpha`;
* **consistent positive** / **consistent negative**: not model-dependent, the common (inverse-variance
  weighted) estimate :math:`\bar z = \sum w_g \hat z_g / \sum w_g` is significant
  (:math:`|\bar z| \sqrt{\sum w_g}` against Student's t on the Satterthwaite df of the weights, adjusted
  across pairs the same way) and every model's estimate has its sign;
* **undetermined**: everything else — too little information (fewer than two models could test the pair) or
  too little power (no common effect detected, or models pointing different ways without a significant Q).
  ``reason`` says which.

With a single model the classes come from that model's own estimate (nothing is compared). The block also
reports how often two models agree on the sign of a pair and how alike their matrices are (Mantel r), against
what permuting test-set labels gives by chance (:func:`gengen.across.compare.compare` with ``source_level="models"``),
and one paragraph a reader can quote (:attr:`Verdict.text`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.analyse.result import _json_safe
from gengen.stats.pfloor import floor_p_columns, p_text

if TYPE_CHECKING:
    from gengen.across.compare import Comparison
    from gengen.across.heterogeneity import PairMatrices
    from gengen.analyse.result import Analysis

__all__ = ["CLASSES", "Verdict", "build_verdict"]

#: The classes of a pair, in the order they are reported.
CLASSES = ("consistent positive", "consistent negative", "model-dependent", "undetermined")
VERDICT_COLUMNS = (
    "cell",
    "testset_a",
    "testset_b",
    "verdict",
    "reason",
    "n_groups",
    "groups",
    "r_by_group",
    "n_positive",
    "n_negative",
    "r_min",
    "r_max",
    "r_common",
    "p_common",
    "p_common_adjusted",
    "p_joint",
    "p_joint_adjusted",
    "p_common_fdr",
    "r_detectable",
    "q_heterogeneity",
    "p_heterogeneity",
    "p_heterogeneity_adjusted",
)


def _percent(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{100 * value:.0f}%"


def _number(value: float, digits: int = 2) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.{digits}f}"


@dataclass
class Verdict:
    """Result of :func:`build_verdict`.

    Attributes
    ----------
    pairs : DataFrame
        One row per cell × pair: the columns of ``VERDICT_COLUMNS`` (``verdict`` one of :data:`CLASSES`).
    counts : dict
        Pairs per class.
    examples : dict
        Per class, the strongest pairs (largest common \\|r\\|; largest Q for model-dependent ones).
    agreement : dict
        Sign agreement and Mantel r of every two models, summarised (median, range) with their chance levels.
    groups : list of str
        The models compared.
    settings : dict
        ``alpha``, ``adjust``, ``n_perm``, ``seed``, ``keep_related`` and ``pooled_over`` (per model, or model and
        condition, estimated from several runs: the runs pooled as its replicates).
    text : str
        One paragraph stating the answer.
    answer : str
        The global answer in one or two sentences a researcher can quote: the share of OOD pairs that co-move
        beyond ID per model (:attr:`global_share`), whether the pattern replicates across models, and how many
        pairs could have been resolved one by one (:mod:`gengen.across.global_share`).
    global_share : DataFrame
        Per model, the estimated share of pairs with a non-zero partial correlation, its interval and test
        (:func:`gengen.across.global_share.global_share_table`; related pairs left out).
    r_distribution : DataFrame
        Per model, a histogram of the pairs' r beside the null's expected counts
        (:func:`gengen.across.global_share.r_distribution_table`).
    resolvable : dict
        ``threshold`` (0.3), ``n_resolvable`` (pairs whose ``r_detectable`` is at most the threshold),
        ``n_pairs``, and ``resolved_sign_agreement`` (per two models, the pairs both resolve at unadjusted p <
        alpha and how many agree in sign).
    """

    pairs: pd.DataFrame
    counts: dict[str, int]
    examples: dict[str, list[dict[str, Any]]]
    agreement: dict[str, Any]
    groups: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    answer: str = ""
    global_share: pd.DataFrame = field(default_factory=pd.DataFrame)
    r_distribution: pd.DataFrame = field(default_factory=pd.DataFrame)
    resolvable: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON-ready data (what ``summary.json`` carries under ``"verdict"``)."""
        return _json_safe(
            {
                "answer": self.answer,
                "groups": self.groups,
                "n_pairs": len(self.pairs),
                "counts": self.counts,
                "examples": self.examples,
                "agreement": self.agreement,
                "settings": self.settings,
                "text": self.text,
                "global_share": self.global_share.to_dict("records"),
                "r_distribution": self.r_distribution.to_dict("records"),
                "resolvable": self.resolvable,
            }
        )

    def lines(self) -> list[str]:
        """The verdict as terminal lines: one per class with its count and strongest example, agreement, text."""
        n = len(self.pairs)
        out = [f"answer: {self.answer}"] if self.answer else []
        out += [f"verdict over {n} pairs and {len(self.groups)} model(s) ({', '.join(self.groups)}):"]
        for name in CLASSES:
            example = self.examples.get(name, [])
            hint = f"  e.g. {example[0]['label']}" if example else ""
            out.append(f"  {name:<20} {self.counts.get(name, 0):>6}{hint}")
        if "p_common_fdr" in self.pairs.columns and n:
            alpha = float(self.settings.get("alpha", 0.05))
            screened = int((self.pairs["p_common_fdr"].to_numpy(dtype=float) < alpha).sum())
            out.append(
                f"  screening: {screened} pair(s) with Benjamini-Hochberg p_common_fdr < {alpha:g} (candidates to "
                "follow up, not verdicts)"
            )
        sign = self.agreement.get("sign_agreement", {})
        if sign:
            out.append(
                f"  sign agreement {_percent(sign['median'])} (range {_percent(sign['min'])}-"
                f"{_percent(sign['max'])}) vs chance {_percent(sign['chance'])} (95% "
                f"{_percent(sign['chance_low'])}-{_percent(sign['chance_high'])}); Mantel r "
                f"{_number(self.agreement['mantel_r']['median'])} (range {_number(self.agreement['mantel_r']['min'])}"
                f" to {_number(self.agreement['mantel_r']['max'])}) vs chance 0 (95% "
                f"{_number(self.agreement['mantel_r']['chance_low'])} to "
                f"{_number(self.agreement['mantel_r']['chance_high'])})"
            )
        out.append(self.text)
        return out

    def to_dir(self, out: str | Path) -> dict[str, Path]:
        """Write ``verdict_pairs.csv`` and ``verdict.json``, and add ``"verdict"`` to ``summary.json`` if there.

        Parameters
        ----------
        out : str or Path
            The analysis folder (created if needed).

        Returns
        -------
        dict
            The name of each file written (``summary.json`` when it was there) → its path.
        """
        from gengen._files import inside, read_json, write_text_atomic

        Path(out).mkdir(parents=True, exist_ok=True)
        names = ("verdict_pairs.csv", "verdict.json", "verdict_global_share.csv", "verdict_r_distribution.csv")
        written = {name: inside(out, name) for name in names}
        self.pairs.to_csv(written["verdict_pairs.csv"], index=False)
        self.global_share.to_csv(written["verdict_global_share.csv"], index=False)
        self.r_distribution.to_csv(written["verdict_r_distribution.csv"], index=False)
        data = self.as_dict()
        write_text_atomic(written["verdict.json"], _json_text(data))
        summary_path = inside(out, "summary.json")
        if summary_path.is_file():
            summary = read_json(summary_path)
            if isinstance(summary, dict):
                summary["verdict"] = data
                files = set(summary.get("files", [])) | set(names)
                summary["files"] = sorted(files)
                write_text_atomic(summary_path, _json_text(summary))
                written["summary.json"] = summary_path
        return written


def _json_text(data: Any) -> str:
    """JSON as the analysis folder's files are written: indented, UTF-8 as it is, a final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


#: The classes of a pair, each with its reason, in the order they are tried (the first that holds; the last is
#: what is left).
_RULES = (
    ("undetermined", "no model could test this pair"),
    ("undetermined", "only one model could test this pair"),
    ("undetermined", "no model's partial correlation differs from zero (joint test of every model's estimate)"),
    ("model-dependent", "the partial correlation differs between models (Cochran's Q)"),
    ("undetermined", "no common effect detected (too little power, or none)"),
    ("consistent positive", "significant common effect, positive in every model"),
    ("consistent negative", "significant common effect, negative in every model"),
    ("undetermined", "significant common effect, but some model points the other way"),
)


def _classify(table: pd.DataFrame, alpha: float, compared: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's class and reason (:data:`_RULES`), from its counts and adjusted p-values."""
    n_groups = table["n_groups"].to_numpy()
    p_het = table["p_heterogeneity_adjusted"].to_numpy(dtype=float)
    p_joint = table["p_joint_adjusted"].to_numpy(dtype=float)
    p_common = table["p_common_adjusted"].to_numpy(dtype=float)
    z_common = table["r_common"].to_numpy(dtype=float)
    positive, negative = table["n_positive"].to_numpy(), table["n_negative"].to_numpy()
    with np.errstate(invalid="ignore"):
        holds = [
            n_groups == 0,
            (n_groups < 2) & compared,
            ~(np.isfinite(p_joint) & (p_joint < alpha)),
            np.isfinite(p_het) & (p_het < alpha),
            ~(np.isfinite(p_common) & (p_common < alpha)),
            (z_common > 0) & (negative == 0),
            (z_common < 0) & (positive == 0),
        ]
    rule = np.select(holds, np.arange(len(holds)), default=len(holds))
    names = np.array([name for name, _ in _RULES], dtype=object)
    reasons = np.array([reason for _, reason in _RULES], dtype=object)
    return names[rule], reasons[rule]


def _pair_table(
    estimates: pd.DataFrame, cells: list[tuple[str, str, PairMatrices]], alpha: float, adjust: str
) -> pd.DataFrame:
    """One row per across-model cell × pair with the common estimate, Q and the class."""
    from gengen.across.heterogeneity import pair_matrices, q_arrays
    from gengen.across.per_pair import joined_per_row, two_sided_p_array
    from gengen.stats import p_adjust
    from gengen.stats.tails import f_sf_array

    model_cells = [(label, matrices) for across, label, matrices in cells if across == "model"]
    compared = bool(model_cells)
    if not model_cells and not estimates.empty:  # a single model: its own estimates, nothing compared
        model_cells = [("all", pair_matrices(estimates))]
    tables = []
    for label, matrices in model_cells:
        q = q_arrays(matrices.z, matrices.variance, matrices.df)
        r = np.where(matrices.usable, matrices.r, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            statistic = q["z_common"] * np.sqrt(q["sum_w"])
            # The joint test of "every model's partial correlation is 0", the intersection of "no difference
            # between models" and "no common effect": sum_g w_g z_g^2 = Q + (sum_g w_g) z_common^2 against
            # M F(M, nu). Each class needs it to reject first (closed testing), so that a null pair is called
            # something other than undetermined at most alpha of the time, not the two tests' 2 alpha.
            joint = np.sum(np.where(matrices.usable, matrices.z**2 / matrices.variance, 0.0), axis=1)
            n_used = q["n_groups"]
            p_joint = np.where(
                n_used > 0,
                f_sf_array(joint / np.maximum(n_used, 1), np.maximum(n_used, 1), q["df_denominator"]),
                np.nan,
            )
        # "unit=r" per cell, formatted by one str.format mapped over the array (no Python loop over pairs)
        formatted = np.array(list(map("{:.3f}".format, r.ravel().tolist())), dtype=object).reshape(r.shape)
        labelled = np.array([f"{unit}=" for unit in matrices.units], dtype=object) + formatted
        table = matrices.index.assign(
            cell=label,
            n_groups=q["n_groups"],
            groups=matrices.groups_per_pair(),
            r_by_group=joined_per_row(labelled, matrices.usable),
            n_positive=np.sum(r > 0, axis=1),
            n_negative=np.sum(r < 0, axis=1),
            r_min=np.nanmin(np.where(matrices.usable, r, np.inf), axis=1),
            r_max=np.nanmax(np.where(matrices.usable, r, -np.inf), axis=1),
            r_common=np.tanh(q["z_common"]),
            p_common=two_sided_p_array(statistic, q["df_denominator"]),
            p_joint=p_joint,
            q_heterogeneity=q["q"],
            p_heterogeneity=q["p"],
        )
        table.loc[table["n_groups"] == 0, ["r_min", "r_max"]] = np.nan
        table["p_common_adjusted"] = p_adjust(table["p_common"].to_numpy(dtype=float), adjust)  # type: ignore[arg-type]
        table["p_heterogeneity_adjusted"] = p_adjust(table["p_heterogeneity"].to_numpy(dtype=float), adjust)  # type: ignore[arg-type]
        table["p_joint_adjusted"] = p_adjust(table["p_joint"].to_numpy(dtype=float), adjust)  # type: ignore[arg-type]
        _screening_columns(table, q, alpha, adjust)
        table["verdict"], table["reason"] = _classify(table, alpha, compared)
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=list(VERDICT_COLUMNS))
    return pd.concat(tables, ignore_index=True)[list(VERDICT_COLUMNS)]


def _screening_columns(table: pd.DataFrame, q: dict[str, np.ndarray], alpha: float, adjust: str) -> None:
    """``p_common_fdr`` (Benjamini–Hochberg of ``p_common`` across the cell's pairs: a screening list, not the
    verdict) and ``r_detectable`` (the smallest common \\|r\\| the cell's test detects with 80% power after
    ``adjust`` over its pairs, from the common estimate's standard error :math:`1/\\sqrt{\\sum w_g}`)."""
    from gengen.stats import p_adjust
    from gengen.stats.share import detectable_r

    p_common = table["p_common"].to_numpy(dtype=float)
    table["p_common_fdr"] = p_adjust(p_common, "BH")
    n_tests = max(int(np.isfinite(p_common).sum()), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = 1.0 / np.sqrt(q["sum_w"])
    table["r_detectable"] = detectable_r(se, q["df_denominator"], n_tests, alpha=alpha, adjust=adjust)


def _examples(pairs: pd.DataFrame, n_examples: int) -> dict[str, list[dict[str, Any]]]:
    """The strongest pairs of each class, with a label for the terminal and the page."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in CLASSES:
        rows = pairs[pairs["verdict"] == name]
        if rows.empty:
            out[name] = []
            continue
        if name == "model-dependent":
            rows = rows.sort_values("q_heterogeneity", ascending=False, kind="stable")
        else:
            rows = rows.reindex(rows["r_common"].abs().sort_values(ascending=False, kind="stable").index)
        chosen = []
        for row in rows.head(n_examples).itertuples(index=False):
            if name == "model-dependent":
                label = (
                    f"{row.testset_a} / {row.testset_b}: r from {row.r_min:.2f} to {row.r_max:.2f} across models "
                    f"(Q = {row.q_heterogeneity:.1f}, adjusted p = {p_text(row.p_heterogeneity_adjusted)})"
                )
            else:
                label = (
                    f"{row.testset_a} / {row.testset_b}: common r = {row.r_common:.2f} "
                    f"(models {row.r_min:.2f} to {row.r_max:.2f})"
                )
            chosen.append(
                {
                    "testset_a": row.testset_a,
                    "testset_b": row.testset_b,
                    "r_common": row.r_common,
                    "r_min": row.r_min,
                    "r_max": row.r_max,
                    "r_by_group": row.r_by_group,
                    "q_heterogeneity": row.q_heterogeneity,
                    "p_heterogeneity_adjusted": row.p_heterogeneity_adjusted,
                    "p_common_adjusted": row.p_common_adjusted,
                    "label": label,
                }
            )
        out[name] = chosen
    return out


def _agreement_summary(agreement: pd.DataFrame, alpha: float) -> dict[str, Any]:
    """Median and range of the two-model sign agreements and Mantel r, with their chance levels."""
    if agreement.empty:
        return {}
    sign = agreement["sign_agreement"].astype(float)
    mantel = agreement["mantel_r"].astype(float)
    return {
        "n_comparisons": len(agreement),
        "sign_agreement": {
            "median": float(sign.median()),
            "min": float(sign.min()),
            "max": float(sign.max()),
            "chance": float(agreement["sign_agreement_chance"].astype(float).median()),
            "chance_low": float(agreement["sign_agreement_chance_low"].astype(float).min()),
            "chance_high": float(agreement["sign_agreement_chance_high"].astype(float).max()),
            "n_above_chance": int((agreement["p_sign_agreement"].astype(float) < alpha).sum()),
        },
        "mantel_r": {
            "median": float(mantel.median()),
            "min": float(mantel.min()),
            "max": float(mantel.max()),
            "chance": 0.0,
            "chance_low": float(agreement["mantel_r_chance_low"].astype(float).min()),
            "chance_high": float(agreement["mantel_r_chance_high"].astype(float).max()),
            "n_significant": int((agreement["mantel_p"].astype(float) < alpha).sum()),
            "n_at_floor": int(agreement["mantel_p_at_floor"].astype(bool).sum()),
            "p_floor": float(1.0 / (1 + int(agreement["n_perm"].iloc[0]))),
        },
    }


def _paragraph(
    counts: dict[str, int], groups: list[str], n_pairs: int, agreement: dict[str, Any], alpha: float, adjust: str
) -> str:
    """The one paragraph of the verdict."""
    if len(groups) < 2:
        head = (
            f"One model ({groups[0] if groups else 'none'}): nothing is compared across models. Of its {n_pairs} "
            f"pairs of OOD test sets, {counts['consistent positive']} have a significant positive partial "
            f"correlation, {counts['consistent negative']} a significant negative one ({adjust}-adjusted p < "
            f"{alpha}), and {counts['undetermined']} are undetermined."
        )
        return head
    text = (
        f"Across {len(groups)} models, of {n_pairs} pairs of OOD test sets {counts['consistent positive']} have a "
        f"partial correlation that is positive in every model and {counts['consistent negative']} one that is "
        f"negative in every model (common effect significant, no significant difference between models); "
        f"{counts['model-dependent']} depend on the model (Cochran's Q of Fisher z, {adjust}-adjusted p < {alpha}); "
        f"{counts['undetermined']} are undetermined (too little information or power to tell)."
    )
    if agreement:
        sign, mantel = agreement["sign_agreement"], agreement["mantel_r"]
        several = agreement["n_comparisons"] > 1
        spread = (
            f" (median of {agreement['n_comparisons']} comparisons, range {_percent(sign['min'])}-"
            f"{_percent(sign['max'])})"
            if several
            else ""
        )
        mantel_spread = f"range {_number(mantel['min'])} to {_number(mantel['max'])}; " if several else ""
        text += (
            f" Two models agree on the sign of {_percent(sign['median'])} of pairs{spread}, where permuting "
            f"test-set labels gives {_percent(sign['chance'])} (95% range {_percent(sign['chance_low'])}-"
            f"{_percent(sign['chance_high'])}); their partial-correlation matrices correlate at Mantel r = "
            f"{_number(mantel['median'])} ({mantel_spread}chance 0, 95% range {_number(mantel['chance_low'])} to "
            f"{_number(mantel['chance_high'])})."
        )
    return text


def _pooled_over(estimates: pd.DataFrame) -> dict[str, str]:
    """Per model (and condition) estimated from several runs: the runs pooled as its replicates."""
    units = estimates.drop_duplicates("unit")
    return {
        str(unit): f"{len(runs.split(';'))} runs pooled as replicates: {runs.replace(';', ', ')}"
        for unit, runs in zip(units["unit"], units["runs"], strict=True)
        if ";" in str(runs)
    }


def _pooled_note(pooled_over: dict[str, str]) -> str:
    """One sentence naming what was pooled as replicates of which model (and condition), or ``""``."""
    if not pooled_over:
        return ""
    shown = [f"{unit}: {text.split(': ', 1)[-1]}" for unit, text in list(pooled_over.items())[:3]]
    more = f"; and {len(pooled_over) - 3} more" if len(pooled_over) > 3 else ""
    return f"Runs pooled as replicates of one model and condition ({'; '.join(shown)}{more})."


def _without_related(pairs: pd.DataFrame, keep: bool) -> tuple[pd.DataFrame, str]:
    """The pairs table less its related pairs (unless ``keep``), and the sentence that says what was left out."""
    if "related" not in pairs.columns:
        return pairs, ""
    related = pairs["related"].fillna(False).astype(bool).to_numpy()
    names = pairs.loc[related, ["testset_a", "testset_b"]].drop_duplicates()
    if not len(names):
        return pairs, ""
    if keep:
        return pairs, f"{len(names)} pair(s) of related test sets are included (keep_related)."
    first = pairs.loc[related].iloc[0]
    note = (
        f"{len(names)} pair(s) of related test sets (splits of one task, nested sets, near-duplicates; e.g. "
        f"{first['testset_a']} / {first['testset_b']}: {first['related_reason']}) are left out (keep_related "
        "keeps them)."
    )
    return pairs.loc[~related], note


def build_verdict(
    source: Analysis | pd.DataFrame,
    comparison: Comparison | None = None,
    *,
    alpha: float | None = None,
    adjust: str | None = None,
    n_perm: int = 999,
    seed: int = 0,
    n_examples: int = 3,
    keep_related: bool | None = None,
) -> Verdict:
    """Classify every pair as consistent positive, consistent negative, model-dependent or undetermined.

    Parameters
    ----------
    source : Analysis or DataFrame
        An analysis, or its pairs table.
    comparison : Comparison, optional
        A :func:`gengen.across.compare.compare` result with ``source_level="models"`` whose agreement table is used;
        computed (with ``n_perm`` and ``seed``) when omitted or at another level.
    alpha : float, optional
        Level of every adjusted p-value (default the analysis' ``alpha``, else 0.05).
    adjust : str, optional
        :func:`gengen.stats.p_adjust` method across pairs (default the analysis' method, Holm for maxT).
    n_perm : int
        Label permutations of the chance levels and Mantel tests.
    seed : int
        Their seed.
    n_examples : int
        Strongest pairs kept per class.
    keep_related : bool, optional
        Classify the pairs whose ``related`` column is true (splits of one task, nested sets, near-duplicates:
        :mod:`gengen.analyse.related`) too; default the analysis' ``keep_related``, else False (they are left out
        and the paragraph says how many).

    Returns
    -------
    Verdict
        Per-pair classes, counts, examples, agreement with chance levels, and the paragraph.

    Notes
    -----
    Per pair, with the models' :math:`\\hat z_g`, :math:`v_g` and the df :math:`\\nu_g` of each variance:
    :math:`Q = \\sum w_g (\\hat z_g - \\bar z)^2` against :math:`(M-1) F_{M-1,\\nu}`, and the common effect
    :math:`\\bar z \\sqrt{\\sum w_g}` against Student's t on :math:`\\nu` (normal without df),
    :math:`w_g = 1 / v_g`, :math:`\\nu = (\\sum w_g)^2 / \\sum (w_g^2/\\nu_g)`; both adjusted across the pairs of a
    cell.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"model": ["a", "b", "a", "b"], "run": "main",
    ...                       "testset_a": ["x", "x", "x", "x"], "testset_b": ["y", "y", "w", "w"],
    ...                       "r_partial": [0.6, 0.5, 0.6, -0.6], "se_z": [0.1, 0.1, 0.1, 0.1]})
    >>> verdict = build_verdict(pairs)
    >>> verdict.counts
    {'consistent positive': 1, 'consistent negative': 0, 'model-dependent': 1, 'undetermined': 0}
    """
    from gengen.across.compare import _model_agreement
    from gengen.across.heterogeneity import NO_VARIANCE, _cell_matrices, group_estimates

    settings = None if isinstance(source, pd.DataFrame) else source.settings  # a bare pairs table: the defaults
    alpha = (settings.alpha if settings else 0.05) if alpha is None else float(alpha)
    if adjust is None:
        adjust = str(settings.p_adjust_method) if settings else "holm"
    pairs_table = source if isinstance(source, pd.DataFrame) else source.pairs
    keep_related = (settings.keep_related if settings else False) if keep_related is None else keep_related
    pairs_table, related_note = _without_related(pairs_table, keep_related)
    estimates = group_estimates(pairs_table)
    groups = list(dict.fromkeys(map(str, estimates["unit"])))
    pooled_over = _pooled_over(estimates)
    pairs = floor_p_columns(_pair_table(estimates, _cell_matrices(estimates, ("model",)), alpha, adjust))
    counts = {name: int((pairs["verdict"] == name).sum()) for name in CLASSES}
    agreement: dict[str, Any] = {}
    # Sign agreement and Mantel r need every model's estimate; runs decided by a test that assumes independent
    # checkpoints cannot be pooled into one (no variance), and the text below says so instead.
    comparable = len(estimates) > 0 and bool(np.isfinite(estimates["r"].to_numpy(dtype=float)).any())
    if len(groups) > 1 and comparable:
        if comparison is not None and comparison.settings.get("source") == "models":
            table = comparison.agreement
        else:  # the agreement table alone: the comparison's other tables are not the verdict's
            table = _model_agreement(source, estimates, alpha=alpha, n_perm=n_perm, seed=seed)
        agreement = _agreement_summary(table, alpha)
    # The global share's p-values on each row's own sieve variance, as they were calibrated (docs/calibration.md);
    # the across-model tests above take the wider variance each row's interval implies.
    share_estimates = group_estimates(pairs_table, interval_variance=False)
    answer, shares, distribution, resolvable = _global_answer(
        pairs_table, share_estimates, pairs, agreement, alpha=alpha, adjust=adjust
    )
    if pairs.empty and len(estimates) and (estimates["variance_method"] == NO_VARIANCE).all():
        text = (
            "No model estimate has a variance that allows for autocorrelated checkpoints (the deciding test, "
            "t-test or permutation, assumes independent ones), so nothing is compared or stated; ask for "
            "inference 'sieve' (the default) or 'lagged'."
        )
    elif pairs.empty:
        text = (
            "No per-run partial correlations that could be tested (an across-run analysis, or no testable rows): "
            "the verdict compares models' per-run estimates, so there is nothing to state."
        )
    else:
        text = _paragraph(counts, groups, len(pairs), agreement, alpha, adjust)
    text = f"{text} {related_note} {_pooled_note(pooled_over)}".strip()
    return Verdict(
        pairs=pairs,
        counts=counts,
        examples=_examples(pairs, n_examples),
        agreement=agreement,
        groups=groups,
        settings={
            "alpha": alpha,
            "adjust": adjust,
            "n_perm": n_perm,
            "seed": seed,
            "keep_related": keep_related,
            "pooled_over": pooled_over,
        },
        text=text,
        answer=answer,
        global_share=shares,
        r_distribution=distribution,
        resolvable=resolvable,
    )


#: The \|r\| at which the verdict counts the pairs its data could have resolved one by one.
RESOLVABLE_AT = 0.3


def _global_answer(
    pairs_table: pd.DataFrame,
    estimates: pd.DataFrame,
    pairs: pd.DataFrame,
    agreement: dict[str, Any],
    *,
    alpha: float,
    adjust: str,
) -> tuple[str, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The answer sentence, the global-share and r-distribution tables and the resolvable counts
    (:mod:`gengen.across.global_share`), related pairs left out."""
    from gengen.across.global_share import (
        answer_sentence,
        global_share_table,
        r_distribution_table,
        resolved_sign_agreement,
        unrelated_estimates,
        with_null_above,
    )

    unrelated = unrelated_estimates(with_null_above(estimates, pairs_table), pairs_table)
    shares = global_share_table(unrelated, alpha=alpha)
    distribution = r_distribution_table(unrelated)
    resolved = resolved_sign_agreement(unrelated, alpha=alpha)
    detectable = pairs["r_detectable"].to_numpy(dtype=float) if not pairs.empty else np.array([])
    resolvable = {
        "threshold": RESOLVABLE_AT,
        "n_resolvable": int(np.sum(detectable <= RESOLVABLE_AT)),
        "n_pairs": len(pairs),
        "r_detectable_min": float(np.nanmin(detectable)) if np.isfinite(detectable).any() else float("nan"),
        "r_detectable_median": float(np.nanmedian(detectable)) if np.isfinite(detectable).any() else float("nan"),
        "resolved_sign_agreement": resolved.to_dict("records"),
    }
    answer = answer_sentence(
        shares,
        agreement,
        resolved,
        n_resolvable=resolvable["n_resolvable"],
        n_pairs=len(pairs),
        r_detectable_median=resolvable["r_detectable_median"],
        threshold=RESOLVABLE_AT,
        alpha=alpha,
        adjust=adjust,
    )
    return answer, shares, distribution, resolvable
