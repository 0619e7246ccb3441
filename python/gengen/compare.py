r"""Does the pattern hold across models? Sign agreement, matrix correlation and conflicting pairs.

For two groups (models, sizes, or any runs) with partial-correlation matrices :math:`A` and :math:`B` over
the same :math:`p` OOD test sets:

* **sign agreement**: the fraction of the :math:`p(p-1)/2` pairs whose partial correlations have the same
  sign;
* **matrix correlation** (Mantel): the Pearson correlation :math:`r_M` of the upper triangles of :math:`A` and
  :math:`B` (from :func:`gengen.stats.partial_corr`), with a permutation p-value that permutes the test-set
  labels of :math:`B` jointly (rows and columns) — the pairs of one matrix are not independent, so the usual
  t-test does not apply (:func:`gengen.stats.mantel`). The permutations come from
  :func:`gengen.stats.permutation_indices` (seeded);
  :math:`p = (1 + \#\{r_M^{(b)} \ge r_M\}) / (1 + n_\text{perm})` for ``alternative="greater"`` (does the
  pattern carry over?), with :math:`|r|` for ``"two-sided"``;
* **conflicts**: pairs significant and positive for one group and significant and negative for another.

References
----------
Mantel, N. (1967). The detection of disease clustering and a generalized regression approach.
*Cancer Research* 27, 209–220.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.errors import GengenError, InputError
from gengen.stats.matrices import mantel
from gengen.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, DEFAULT_N_PERM_MANTEL

if TYPE_CHECKING:
    from gengen.analyse.result import Analysis

SOURCES = ("runs", "pooled")


@dataclass
class Comparison:
    """Result of :func:`compare`.

    Attributes
    ----------
    per_pair : DataFrame
        One row per group × pair: ``group, testset_a, testset_b, r, sign, p, significant``.
    wide : DataFrame
        One row per pair; per group ``r[<group>]`` and ``sign[<group>]``.
    agreement : DataFrame
        One row per pair of groups: ``group_a, group_b, n_testsets, n_pairs, n_sign_agree, sign_agreement,
        mantel_r, mantel_p, n_perm, alternative``.
    conflicts : DataFrame
        ``testset_a, testset_b, group_positive, r_positive, p_positive, group_negative, r_negative,
        p_negative``.
    settings : dict
        The options used.
    """

    per_pair: pd.DataFrame
    wide: pd.DataFrame
    agreement: pd.DataFrame
    conflicts: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def groups(self) -> list[str]:
        """Group labels in order."""
        return list(dict.fromkeys(self.per_pair["group"]))

    def matrix(self, group: str) -> pd.DataFrame:
        """The (test set × test set) matrix of ``r`` for ``group`` (diagonal 1)."""
        rows = self.per_pair[self.per_pair["group"] == group]
        return _square(rows)

    def to_dir(self, out: str | Path) -> dict[str, Path]:
        """Write ``compare_pairs.csv``, ``compare_agreement.csv``, ``compare_conflicts.csv`` and
        ``comparison.json`` (settings) to ``out``."""
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        written = {}
        for name, table in (
            ("compare_pairs", self.wide),
            ("compare_agreement", self.agreement),
            ("compare_conflicts", self.conflicts),
            ("compare_long", self.per_pair),
        ):
            table.to_csv(folder / f"{name}.csv", index=False)
            written[f"{name}.csv"] = folder / f"{name}.csv"
        (folder / "comparison.json").write_text(json.dumps(self.settings, indent=2) + "\n", encoding="utf-8")
        written["comparison.json"] = folder / "comparison.json"
        return written

    @classmethod
    def from_dir(cls, folder: str | Path) -> Comparison:
        """Read a comparison written by :meth:`to_dir`."""
        path = Path(folder)
        if not (path / "compare_long.csv").is_file():
            raise InputError(f"{path / 'compare_long.csv'}: missing; run gengen compare first")
        from gengen._files import read_csv, read_json

        settings = read_json(path / "comparison.json")
        return cls(
            per_pair=read_csv(path / "compare_long.csv"),
            wide=read_csv(path / "compare_pairs.csv"),
            agreement=read_csv(path / "compare_agreement.csv"),
            conflicts=read_csv(path / "compare_conflicts.csv"),
            settings=settings,
        )


def _square(rows: pd.DataFrame) -> pd.DataFrame:
    """Symmetric matrix of ``r`` from long rows (testset_a, testset_b, r), diagonal 1."""
    names = sorted({*rows["testset_a"], *rows["testset_b"]})
    position = {name: i for i, name in enumerate(names)}
    values = np.full((len(names), len(names)), np.nan)
    i = rows["testset_a"].map(position).to_numpy(dtype=int)
    j = rows["testset_b"].map(position).to_numpy(dtype=int)
    values[i, j] = rows["r"].to_numpy(dtype=float)
    values[j, i] = values[i, j]
    np.fill_diagonal(values, 1.0)
    return pd.DataFrame(values, index=names, columns=names)


def _long_table(source: Analysis | pd.DataFrame, which: str, alpha: float) -> pd.DataFrame:
    """Normalise the input to long rows: group, testset_a, testset_b, r, p, significant."""
    if isinstance(source, pd.DataFrame):
        pairs, pooled = source, pd.DataFrame()
    else:
        pairs, pooled = source.pairs, source.pooled
    if which == "pooled":
        if pooled.empty:
            raise GengenError("option source: the analysis has no pooled (meta-analysis) rows; use source='runs'")
        label_columns = [c for c in ("model", "family", "size", "shots", "study") if c in pooled.columns]
        table = pooled.assign(r=pooled["r_random"], p=pooled["p_random_adjusted"])
    else:
        needed = ("model", "run", "testset_a", "testset_b", "r_partial", "p_adjusted")
        missing = [column for column in needed if column not in pairs.columns]
        if missing:
            raise InputError(f"pairs: missing column(s) {', '.join(missing)}; expected gengen analyse's pairs table")
        table = pairs[pairs["level"] != "pooled_residuals"] if "level" in pairs.columns else pairs
        runs_per_model = table.groupby("model")["run"].nunique()
        label_columns = ["model"] if (runs_per_model == 1).all() else ["model", "run"]
        # Sign and significance of one quantity: the estimand whose p-value was adjusted (r_partial by default;
        # r_innovation when the lagged test decided the rows).
        r = table["r_partial"]
        if "estimand" in table.columns and "r_innovation" in table.columns:
            r = r.where(table["estimand"] != "r_innovation", table["r_innovation"])
        table = table.assign(r=r, p=table["p_adjusted"])
    group = table[label_columns].astype(str).agg("/".join, axis=1)
    out = pd.DataFrame(
        {
            "group": group,
            "testset_a": table["testset_a"],
            "testset_b": table["testset_b"],
            "r": table["r"].astype(float),
            "p": table["p"].astype(float),
        }
    )
    out["sign"] = np.sign(out["r"]).astype(float)
    out["significant"] = out["p"] < alpha
    return out.reset_index(drop=True)


def _orient(table: pd.DataFrame) -> pd.DataFrame:
    """Order each pair's two names alphabetically so pairs match across groups."""
    swap = table["testset_a"] > table["testset_b"]
    a = np.where(swap, table["testset_b"], table["testset_a"])
    b = np.where(swap, table["testset_a"], table["testset_b"])
    return table.assign(testset_a=a, testset_b=b)


def compare(
    source: Analysis | pd.DataFrame,
    *,
    source_level: str = "runs",
    alpha: float = 0.05,
    n_perm: int = DEFAULT_N_PERM_MANTEL,
    alternative: str = DEFAULT_ALTERNATIVE,
    seed: int = 0,
) -> Comparison:
    """Compare the partial-correlation patterns of every two groups of an analysis.

    Parameters
    ----------
    source : Analysis or DataFrame
        An analysis, or its pairs table (``pairs.csv``).
    source_level : {"runs", "pooled"}
        Compare per-run partial correlations (groups are models, or model/run when a model has several runs)
        or the pooled random-effects estimates of each ``by`` cell.
    alpha : float
        Level on the adjusted p-values (``p_adjusted``, or ``p_random_adjusted`` when pooled) for
        "significant".
    n_perm : int
        Permutations of the Mantel test.
    alternative : {"greater", "two-sided"}
        Mantel alternative.
    seed : int
        Seed of the Mantel permutations.

    Returns
    -------
    Comparison
        The ``per_pair`` and ``wide`` tables, the ``conflicts`` between groups, the ``agreement`` (Mantel test)
        of every two groups, and the ``settings``.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> steps = np.arange(0, 4000, 100)
    >>> id_acc = 0.5 + 0.4 * (1 - np.exp(-steps / 1500))  # the in-domain (ID) learning curve
    >>> rows = [
    ...     (model, "main", step, testset, "acc", acc + (testset != "mnli") * rng.normal(0, 0.02))
    ...     for model in ("opt-125m", "olmo2-1b")
    ...     for step, acc in zip(steps, id_acc)
    ...     for testset in ("mnli", "hans", "rte", "anli")
    ... ]
    >>> scores = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])
    >>> from gengen import analyse, compare
    >>> comparison = compare(analyse(scores, id_testset="mnli", n_boot=199), n_perm=99)
    >>> comparison.agreement[["group_a", "group_b", "mantel_r"]].round(2)
        group_a   group_b  mantel_r
    0  olmo2-1b  opt-125m      0.28
    """
    if source_level not in SOURCES:
        raise GengenError(f"option source: {source_level!r} is not one of {', '.join(SOURCES)}")
    if alternative not in ALTERNATIVES:
        raise GengenError(f"option alternative: {alternative!r} is not one of {', '.join(ALTERNATIVES)}")
    if not isinstance(n_perm, int) or n_perm < 1:
        raise GengenError(f"option n_perm: must be a positive integer, got {n_perm!r}")
    if not 0.0 < alpha < 1.0:
        raise GengenError(f"option alpha: must lie strictly between 0 and 1, got {alpha!r}")
    long = _orient(_long_table(source, source_level, alpha))
    groups = list(dict.fromkeys(long["group"]))
    wide = long.pivot_table(
        index=["testset_a", "testset_b"], columns="group", values=["r", "sign"], aggfunc="first", sort=True
    )
    wide.columns = [f"{value}[{group}]" for value, group in wide.columns]
    wide = wide[[f"{value}[{group}]" for group in groups for value in ("r", "sign")]].reset_index()

    agreement_rows = []
    for group_a, group_b in combinations(groups, 2):
        rows_a = long[long["group"] == group_a]
        rows_b = long[long["group"] == group_b]
        both = rows_a.merge(rows_b, on=["testset_a", "testset_b"], suffixes=("_a", "_b")).dropna(subset=["r_a", "r_b"])
        agree = int((both["sign_a"] == both["sign_b"]).sum())
        matrix_a, matrix_b = _square(rows_a), _square(rows_b)
        common = [name for name in matrix_a.index if name in matrix_b.index]
        a = matrix_a.loc[common, common].to_numpy()
        b = matrix_b.loc[common, common].to_numpy()
        complete = [i for i in range(len(common)) if np.isfinite(a[i]).all() and np.isfinite(b[i]).all()]
        if len(complete) >= 3:
            test = mantel(
                a[np.ix_(complete, complete)],
                b[np.ix_(complete, complete)],
                n_perm=n_perm,
                alternative=alternative,  # checked against ALTERNATIVES above
                seed=seed,
            )
            mantel_r, mantel_p = test.r, test.p_value
        else:
            mantel_r, mantel_p = float("nan"), float("nan")
        agreement_rows.append(
            {
                "group_a": group_a,
                "group_b": group_b,
                "n_testsets": len(complete),
                "n_pairs": len(both),
                "n_sign_agree": agree,
                "sign_agreement": agree / len(both) if len(both) else float("nan"),
                "mantel_r": mantel_r,
                "mantel_p": mantel_p,
                "n_perm": n_perm,
                "alternative": alternative,
            }
        )
    agreement = pd.DataFrame(
        agreement_rows,
        columns=[
            "group_a",
            "group_b",
            "n_testsets",
            "n_pairs",
            "n_sign_agree",
            "sign_agreement",
            "mantel_r",
            "mantel_p",
            "n_perm",
            "alternative",
        ],
    )

    positive = long[long["significant"] & (long["r"] > 0)]
    negative = long[long["significant"] & (long["r"] < 0)]
    conflicts = positive.merge(negative, on=["testset_a", "testset_b"], suffixes=("_positive", "_negative"))
    conflicts = conflicts[
        [
            "testset_a",
            "testset_b",
            "group_positive",
            "r_positive",
            "p_positive",
            "group_negative",
            "r_negative",
            "p_negative",
        ]
    ].reset_index(drop=True)
    settings = {
        "source": source_level,
        "alpha": alpha,
        "n_perm": n_perm,
        "alternative": alternative,
        "seed": seed,
        "groups": groups,
    }
    return Comparison(per_pair=long, wide=wide, agreement=agreement, conflicts=conflicts, settings=settings)
