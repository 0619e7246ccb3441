r"""Does the pattern hold across models? Sign agreement, matrix correlation and conflicting pairs.

For two groups (models, sizes, or any runs) with partial-correlation matrices :math:`A` and :math:`B` over
the same :math:`p` OOD test sets:

* **sign agreement**: the fraction of the :math:`p(p-1)/2` pairs whose partial correlations have the same
  sign, :math:`r_A r_B > 0` (a zero agrees with nothing), with its chance level: the mean and the 2.5–97.5%
  range of the agreement when :math:`B`'s test-set labels are permuted (``sign_agreement_chance``,
  ``…_chance_low``, ``…_chance_high``; ``p_sign_agreement`` the share of permutations that agree at least as
  often);
* **matrix correlation** (Mantel): the Pearson correlation :math:`r_M` of the upper triangles of :math:`A` and
  :math:`B` (from :func:`gengen.stats.partial_corr`), with a permutation p-value that permutes the test-set
  labels of :math:`B` jointly (rows and columns) — the pairs of one matrix are not independent, so the usual
  t-test does not apply (:func:`gengen.stats.mantel`). The permutations come from
  :func:`gengen.stats.permutation_indices` (seeded);
  :math:`p = (1 + \#\{r_M^{(b)} \ge r_M\}) / (1 + n_\text{perm})` for ``alternative="greater"`` (does the
  pattern carry over?), with :math:`|r|` for ``"two-sided"``; the smallest p the permutations can give is
  :math:`1/(1 + n_\text{perm})` (``mantel_p_at_floor``); ``mantel_r_chance_low``/``_high`` bracket 95% of the
  permuted :math:`r_M`;
* **conflicts**: pairs significant and positive for one group and significant and negative for another;
* **heterogeneity** (:mod:`gengen.across.heterogeneity`): per pair, Cochran's Q that the partial correlation is the
  same in every model (each model's estimate pooled over its seeds), across the sizes of a family and across
  shot regimes, and every two models' difference (``heterogeneity``, ``differences``; the across-model test's
  columns also in ``wide``).

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
from gengen.stats.correlation import partial_corr
from gengen.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, DEFAULT_N_PERM_MANTEL
from gengen.stats.pfloor import floor_p_columns

if TYPE_CHECKING:
    from gengen.analyse.result import Analysis

SOURCES = ("runs", "pooled", "models")
#: Columns of the agreement table.
AGREEMENT_COLUMNS = (
    "group_a",
    "group_b",
    "n_testsets",
    "n_pairs",
    "n_sign_agree",
    "sign_agreement",
    "sign_agreement_chance",
    "sign_agreement_chance_low",
    "sign_agreement_chance_high",
    "p_sign_agreement",
    "mantel_r",
    "mantel_r_chance_low",
    "mantel_r_chance_high",
    "mantel_p",
    "mantel_p_at_floor",
    "n_perm",
    "alternative",
)
#: The across-model heterogeneity columns copied into the wide table (one row per pair).
WIDE_HETEROGENEITY = (
    "n_groups_heterogeneity",
    "q_heterogeneity",
    "df_heterogeneity",
    "p_heterogeneity",
    "p_heterogeneity_adjusted",
    "i2_heterogeneity",
    "significant_heterogeneity",
)


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
        One row per pair of groups: the columns of :data:`AGREEMENT_COLUMNS`.
    conflicts : DataFrame
        ``testset_a, testset_b, group_positive, r_positive, p_positive, group_negative, r_negative,
        p_negative``.
    settings : dict
        The options used.
    heterogeneity : DataFrame
        Cochran's Q per comparison (``across``: model, size, shots) × cell × pair
        (:func:`gengen.across.heterogeneity.heterogeneity_table`); empty when the source has no variances.
    differences : DataFrame
        Every two groups' difference per pair (:func:`gengen.across.heterogeneity.pairwise_differences`).
    """

    per_pair: pd.DataFrame
    wide: pd.DataFrame
    agreement: pd.DataFrame
    conflicts: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    heterogeneity: pd.DataFrame = field(default_factory=pd.DataFrame)
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def groups(self) -> list[str]:
        """Group labels in order."""
        return list(dict.fromkeys(self.per_pair["group"]))

    def matrix(self, group: str) -> pd.DataFrame:
        """The (test set × test set) matrix of ``r`` for ``group`` (diagonal 1)."""
        rows = self.per_pair[self.per_pair["group"] == group]
        return _square(rows)

    def to_dir(self, out: str | Path) -> dict[str, Path]:
        """Write ``compare_pairs.csv``, ``compare_agreement.csv``, ``compare_conflicts.csv``,
        ``compare_long.csv``, ``compare_heterogeneity.csv``, ``compare_differences.csv`` and ``comparison.json``
        (settings) to ``out``."""
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        written = {}
        from gengen._files import inside

        for name, table in (
            ("compare_pairs", self.wide),
            ("compare_agreement", self.agreement),
            ("compare_conflicts", self.conflicts),
            ("compare_long", self.per_pair),
            ("compare_heterogeneity", self.heterogeneity),
            ("compare_differences", self.differences),
        ):
            written[f"{name}.csv"] = inside(folder, f"{name}.csv")
            table.to_csv(written[f"{name}.csv"], index=False)
        written["comparison.json"] = inside(folder, "comparison.json")
        written["comparison.json"].write_text(json.dumps(self.settings, indent=2) + "\n", encoding="utf-8")
        return written

    @classmethod
    def from_dir(cls, folder: str | Path) -> Comparison:
        """Read a comparison written by :meth:`to_dir`.

        Each file is checked as it is read (:data:`COMPARISON_FILES`): a directory in its place, a CSV cut off
        in its last line, a column missing or holding text where a number belongs, ``comparison.json`` not an
        object are each one :class:`InputError` naming the file.
        """
        from gengen._files import read_csv, read_json
        from gengen.analyse import stored

        path = Path(folder)
        hint = "run gengen compare first"
        stored.check_file(path / "compare_long.csv", hint)
        stored.check_file(path / "comparison.json", hint)
        settings = read_json(path / "comparison.json")
        if not isinstance(settings, dict):
            raise InputError(f"{path / 'comparison.json'}: not an object of settings; not as gengen compare writes it")

        def table(name: str, optional: bool = False) -> pd.DataFrame:
            file = path / f"{name}.csv"
            if optional and (not file.exists() or (file.is_file() and file.stat().st_size <= 1)):
                return pd.DataFrame()
            stored.check_file(file, hint)
            frame = read_csv(file)
            stored.check_whole_csv(file, len(frame.columns))
            required, numeric = COMPARISON_FILES[name]
            stored.check_columns(
                frame, str(file), f"{name} table of gengen compare", required=required, numeric=numeric
            )
            return frame

        return cls(
            per_pair=table("compare_long"),
            wide=table("compare_pairs"),
            agreement=table("compare_agreement"),
            conflicts=table("compare_conflicts"),
            settings=settings,
            heterogeneity=table("compare_heterogeneity", optional=True),
            differences=table("compare_differences", optional=True),
        )


#: The tables of a comparison folder: the columns each must have, and those that hold numbers.
COMPARISON_FILES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "compare_long": (("group", "testset_a", "testset_b", "r", "p", "sign", "significant"), ("r", "p", "sign")),
    "compare_pairs": (("testset_a", "testset_b"), ()),
    "compare_agreement": (
        ("group_a", "group_b", "n_pairs", "sign_agreement", "sign_agreement_chance", "mantel_r", "mantel_p"),
        (
            "n_testsets",
            "n_pairs",
            "n_sign_agree",
            "sign_agreement",
            "sign_agreement_chance",
            "p_sign_agreement",
            "mantel_r",
            "mantel_p",
            "n_perm",
        ),
    ),
    "compare_conflicts": (("testset_a", "testset_b"), ("r_positive", "p_positive", "r_negative", "p_negative")),
    "compare_heterogeneity": (
        ("across", "cell", "testset_a", "testset_b", "groups_heterogeneity", "significant_heterogeneity"),
        (
            "n_groups_heterogeneity",
            "r_common_heterogeneity",
            "q_heterogeneity",
            "df_heterogeneity",
            "p_heterogeneity",
            "p_heterogeneity_adjusted",
            "i2_heterogeneity",
        ),
    ),
    "compare_differences": (
        ("across", "cell", "testset_a", "testset_b", "group_a", "group_b"),
        ("r_a", "r_b", "z_difference", "se_difference", "statistic", "p_difference", "p_difference_adjusted"),
    ),
}


def _square(rows: pd.DataFrame) -> pd.DataFrame:
    """Symmetric matrix of ``r`` from long rows (testset_a, testset_b, r), diagonal 1."""
    # object arrays: iterating (or mapping) an Arrow-backed string column element by element is slow
    first, second = rows["testset_a"].to_numpy(dtype=object), rows["testset_b"].to_numpy(dtype=object)
    names = sorted({*first, *second})
    position = pd.Index(names)
    values = np.full((len(names), len(names)), np.nan)
    i = position.get_indexer(first)
    j = position.get_indexer(second)
    values[i, j] = rows["r"].to_numpy(dtype=float)
    values[j, i] = values[i, j]
    np.fill_diagonal(values, 1.0)
    return pd.DataFrame(values, index=names, columns=names)


def _testable(pairs: pd.DataFrame) -> pd.DataFrame:
    """The rows whose data can support a test (all rows when the table has no ``testable`` column)."""
    if "testable" not in pairs.columns:
        return pairs
    return pairs[pairs["testable"].fillna(True).astype(bool)]


def _model_rows(estimates: pd.DataFrame, adjust: str) -> pd.DataFrame:
    """One row per model (its seeds pooled, :func:`gengen.across.heterogeneity.group_estimates`) and pair, with a
    normal p-value of z/se adjusted across the model's pairs."""
    from gengen.across.per_pair import two_sided_p_array
    from gengen.stats import p_adjust

    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = (estimates["z"] / np.sqrt(estimates["variance"])).to_numpy(dtype=float)
    p = two_sided_p_array(statistic, np.inf)
    adjusted = np.full(len(p), np.nan)
    for _, index in estimates.groupby("unit", sort=False).indices.items():
        adjusted[index] = p_adjust(p[index], adjust)  # type: ignore[arg-type]
    return pd.DataFrame(
        {
            "unit": estimates["unit"],
            "testset_a": estimates["testset_a"],
            "testset_b": estimates["testset_b"],
            "r": estimates["r"],
            "p": adjusted,
        }
    )


def _long_table(
    source: Analysis | pd.DataFrame, which: str, alpha: float, adjust: str, estimates: pd.DataFrame | None
) -> pd.DataFrame:
    """Normalise the input to long rows: group, testset_a, testset_b, r, p, significant (``estimates``: the
    group estimates of the source's pairs, used by ``which="models"``)."""
    from gengen.across.heterogeneity import group_estimates

    if isinstance(source, pd.DataFrame):
        pairs, pooled = source, pd.DataFrame()
    else:
        pairs, pooled = source.pairs, source.pooled
    pairs = _testable(pairs)
    if which == "models":
        estimates = group_estimates(pairs) if estimates is None else estimates
        # a model of several runs needs the runs' variances to pool them (sign and Mantel r need only r)
        usable = np.isfinite(estimates["r"].to_numpy(dtype=float))
        if len(estimates) and not usable.any():
            # issue 34: rows decided by the t-test or a permutation get no variance, not 1/(n - 3 - k)
            raise GengenError(
                "option source: the models' runs cannot be pooled without a variance that allows for "
                "autocorrelated checkpoints (the analysis' deciding test assumes independent ones); use source "
                "'runs', or analyse with inference 'sieve' or 'lagged'"
            )
        table = _model_rows(estimates, adjust)
        label_columns = ["unit"]
    elif which == "pooled":
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
    labels = [table[column].astype(str) for column in label_columns]
    group = labels[0]
    for more in labels[1:]:
        group = group + "/" + more
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


def sign_agreement(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """(pairs with the same sign, pairs with both values finite): the same sign is :math:`a b > 0`, so a zero
    agrees with nothing (it has no sign)."""
    both = np.isfinite(a) & np.isfinite(b)
    return int(np.sum(a[both] * b[both] > 0)), int(np.sum(both))


def chance_levels(a: np.ndarray, b: np.ndarray, n_perm: int, seed: int) -> dict[str, float]:
    """Sign agreement and Mantel r of two complete symmetric matrices when ``b``'s labels are permuted.

    The permutations are those of :func:`gengen.stats.mantel` (``permutation_indices(p, n_perm, "free",
    seed)``): the chance level of the sign agreement is the permutations' mean, its range their 2.5% and 97.5%
    quantiles, and ``p_sign_agreement`` = (1 + #{permuted ≥ observed}) / (1 + n_perm).
    """
    return _permutation_levels([a], b, _triangle_positions(a.shape[0], n_perm, seed), None)[0]


#: The chance-level columns of the agreement table (:func:`chance_levels`).
CHANCE_COLUMNS = (
    "sign_agreement_chance",
    "sign_agreement_chance_low",
    "sign_agreement_chance_high",
    "p_sign_agreement",
    "mantel_r_chance_low",
    "mantel_r_chance_high",
)


def _triangle_positions(size: int, n_perm: int, seed: int) -> np.ndarray:
    """Per permutation of :func:`gengen.stats.permutation_indices` (free, seeded), the positions in a flattened
    (size × size) matrix ``b`` of its relabelled upper triangle: row o is ``b[np.ix_(order, order)][rows, cols]``
    as indices into ``b.ravel()``, the same for every matrix of that size."""
    from gengen.stats import permutation_indices

    rows, cols = np.triu_indices(size, 1)
    orders = np.asarray(permutation_indices(size, n_perm, scheme="free", seed=seed))
    return orders[:, rows] * size + orders[:, cols]


def _permutation_levels(
    matrices: list[np.ndarray], b: np.ndarray, positions: np.ndarray, alternative: str | None
) -> list[dict[str, float]]:
    """The chance levels of :func:`chance_levels` of each matrix ``a`` against ``b`` and, given an
    ``alternative``, their Mantel tests (``mantel_r``, ``mantel_p``: :func:`gengen.stats.mantel`'s statistic,
    permutations and counting), from one gather of ``b``'s permuted upper triangles, a chunk of permutations at
    a time, for every ``a`` at once: the permuted signs and centred triangles meet all of them in one matrix
    product (a pair agrees when the signs' product is 1, i.e. :math:`a b > 0`)."""
    rows, cols = np.triu_indices(b.shape[0], 1)
    x = np.stack([a[rows, cols] for a in matrices])  # (matrices, pairs)
    y = b[rows, cols]
    signs = np.sign(x).T
    centred_x = (x - x.mean(axis=1, keepdims=True)).T
    scale = np.sqrt((centred_x**2).sum(axis=0))
    scale = np.where(scale > 0, scale, 1.0)  # a constant triangle: r 0 (or NaN), as before
    n_perm, n_pairs = len(positions), len(y)
    agree, permuted_r = np.empty((n_perm, len(matrices))), np.empty((n_perm, len(matrices)))
    flat = np.ascontiguousarray(b, dtype=float).ravel()
    step = max(1, 2_000_000 // max(n_pairs, 1))
    for first in range(0, n_perm, step):
        permuted = flat[positions[first : first + step]]
        permuted_signs = np.sign(permuted)
        agree[first : first + step] = (np.abs(permuted_signs) @ np.abs(signs) + permuted_signs @ signs) / 2 / n_pairs
        permuted = permuted - permuted.mean(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            norms = np.sqrt((permuted**2).sum(axis=1))
            permuted_r[first : first + step] = (permuted @ centred_x) / (norms[:, None] * scale[None, :])
    out = []
    for column, x_one in enumerate(x):
        observed = float(np.mean(x_one * y > 0))
        agree_one, r_one = agree[:, column], permuted_r[:, column]
        levels = {
            "sign_agreement_chance": float(np.mean(agree_one)),
            "sign_agreement_chance_low": float(np.quantile(agree_one, 0.025)),
            "sign_agreement_chance_high": float(np.quantile(agree_one, 0.975)),
            "p_sign_agreement": float((1 + np.sum(agree_one >= observed - 1e-12)) / (1 + n_perm)),
            "mantel_r_chance_low": float(np.nanquantile(r_one, 0.025)),
            "mantel_r_chance_high": float(np.nanquantile(r_one, 0.975)),
        }
        if alternative is not None:
            r = float(partial_corr(x_one, y).r)
            if alternative == "greater":
                exceed = np.sum(r_one >= r - 1e-12)
            else:
                exceed = np.sum(np.abs(r_one) >= abs(r) - 1e-12)
            levels |= {"mantel_r": r, "mantel_p": float((exceed + 1) / (n_perm + 1))}
        out.append(levels)
    return out


def _agreement_table(
    long: pd.DataFrame, groups: list[str], *, n_perm: int, alternative: str, seed: int
) -> pd.DataFrame:
    """One row per two groups: sign agreement on the pairs both have, and the Mantel test and chance levels on
    the test sets whose rows are complete in both. Each group's matrix is squared once; the permutation tests
    of every group against the same matrix (group b, the same test sets) run together
    (:func:`_permutation_levels`), on permutations gathered once per number of test sets."""
    members = long.groupby("group", sort=False).indices
    pair = long.groupby(["testset_a", "testset_b"], sort=False).ngroup().to_numpy()
    r = long["r"].to_numpy(dtype=float)
    # Each group's matrix as (names, values): 496 label lookups of two DataFrames cost seconds at 32 groups, and
    # the groups mostly share one set of names, so the common positions are found once per two name sets.
    squares = {}
    for group, index in members.items():
        square = _square(long.iloc[index])
        squares[group] = (tuple(square.index), square.to_numpy())
    unique_codes = {group: len(np.unique(pair[index])) == len(index) for group, index in members.items()}
    shared: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[str], np.ndarray, np.ndarray]] = {}
    nan = float("nan")
    rows: list[dict[str, Any]] = []
    tests: dict[tuple[str, tuple[str, ...]], list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for a, b in combinations(groups, 2):
        agree, n_pairs = _matched_signs(
            long, pair, r, members[a], members[b], unique=unique_codes[a] and unique_codes[b]
        )
        (names_a, matrix_a), (names_b, matrix_b) = squares[a], squares[b]
        if (names_a, names_b) not in shared:
            in_b = {name: k for k, name in enumerate(names_b)}
            common_names = [name for name in names_a if name in in_b]
            shared[names_a, names_b] = (
                common_names,
                np.array([k for k, name in enumerate(names_a) if name in in_b], dtype=np.intp),
                np.array([in_b[name] for name in common_names], dtype=np.intp),
            )
        common, index_a, index_b = shared[names_a, names_b]
        values_a, values_b = matrix_a[np.ix_(index_a, index_a)], matrix_b[np.ix_(index_b, index_b)]
        complete = np.flatnonzero(np.isfinite(values_a).all(axis=1) & np.isfinite(values_b).all(axis=1))
        if len(complete) >= 3:
            key = (b, tuple(common[k] for k in complete))
            subset = np.ix_(complete, complete)
            tests.setdefault(key, []).append((len(rows), values_a[subset], values_b[subset]))
        rows.append(
            {
                "group_a": a,
                "group_b": b,
                "n_testsets": len(complete),
                "n_pairs": n_pairs,
                "n_sign_agree": agree,
                "sign_agreement": agree / n_pairs if n_pairs else nan,
                **dict.fromkeys((*CHANCE_COLUMNS, "mantel_r", "mantel_p"), nan),
                "n_perm": n_perm,
                "alternative": alternative,
            }
        )
    positions: dict[int, np.ndarray] = {}
    for (_, names), entries in tests.items():
        if len(names) not in positions:
            positions[len(names)] = _triangle_positions(len(names), n_perm, seed)
        levels = _permutation_levels([a for _, a, _ in entries], entries[0][2], positions[len(names)], alternative)
        for (position, _, _), found in zip(entries, levels, strict=True):
            rows[position].update(found)
    for row in rows:
        # the smallest p the permutations can give: "p = 0.001" then means "p ≤ 0.001"
        row["mantel_p_at_floor"] = bool(np.isfinite(row["mantel_p"]) and row["mantel_p"] <= 1.0 / (n_perm + 1) + 1e-12)
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def _matched_signs(
    long: pd.DataFrame, pair: np.ndarray, r: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray, *, unique: bool
) -> tuple[int, int]:
    """:func:`sign_agreement` of two groups' r on the pairs both have (their rows matched by pair code when
    each group has every pair once, ``unique``; merged by name when a group has a pair twice)."""
    code_a, code_b = pair[rows_a], pair[rows_b]
    if unique:
        _, in_a, in_b = np.intersect1d(code_a, code_b, assume_unique=True, return_indices=True)
        return sign_agreement(r[rows_a][in_a], r[rows_b][in_b])
    both = long.iloc[rows_a].merge(long.iloc[rows_b], on=["testset_a", "testset_b"], suffixes=("_a", "_b"))
    return sign_agreement(both["r_a"].to_numpy(dtype=float), both["r_b"].to_numpy(dtype=float))


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
    source_level : {"runs", "pooled", "models"}
        Compare per-run partial correlations (groups are models, or model/run when a model has several runs),
        the pooled random-effects estimates of each ``by`` cell, or one estimate per model with its seeds
        pooled (:func:`gengen.across.heterogeneity.group_estimates`; p from z/se, adjusted across the model's pairs).
    alpha : float
        Level on the adjusted p-values (``p_adjusted``, or ``p_random_adjusted`` when pooled) for
        "significant", and on the adjusted heterogeneity p-values.
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
        of every two groups, the ``heterogeneity`` and ``differences`` tables (from the per-run rows, whatever
        ``source_level``; empty for a pairs table without ``se_z`` or ``n``/``k``) and the ``settings``.

    Examples
    --------
    Two simulated models (:func:`gengen.calibration.simulate.simulate_trajectories`), four OOD test sets each:

    >>> import pandas as pd
    >>> from gengen import analyse, compare
    >>> from gengen.calibration.simulate import simulate_trajectories
    >>> scores = pd.concat(
    ...     simulate_trajectories(n=40, n_testsets=4, shared=0.5, seed=seed, model=model)
    ...     for seed, model in ((0, "opt-125m"), (1, "olmo2-1b"))
    ... )
    >>> comparison = compare(analyse(scores, id_testset="id", metric="accuracy", n_boot=199), n_perm=99)
    >>> comparison.agreement[["group_a", "group_b", "n_pairs", "sign_agreement", "mantel_r"]].round(2)
        group_a   group_b  n_pairs  sign_agreement  mantel_r
    0  olmo2-1b  opt-125m        6            0.83     -0.08
    """
    from gengen.across.heterogeneity import _cell_matrices, _difference_rows, _heterogeneity_rows, group_estimates

    _check_options(source_level, alpha, n_perm, alternative)
    adjust = _adjust_method(source)
    pairs = source if isinstance(source, pd.DataFrame) else source.pairs
    has_variance = _has_variance(pairs)
    # one set of group estimates for the model-level rows and the heterogeneity tables
    estimates = group_estimates(pairs) if source_level == "models" or has_variance else None
    long, groups = _groups_long(source, source_level, alpha, adjust, estimates)
    agreement = _agreement_table(long, groups, n_perm=n_perm, alternative=alternative, seed=seed)
    heterogeneity, differences = pd.DataFrame(), pd.DataFrame()
    if has_variance and estimates is not None:  # the tables need a variance per row
        cells = _cell_matrices(estimates)
        heterogeneity = _heterogeneity_rows(cells, alpha=alpha, adjust=adjust)
        differences = _difference_rows(cells, alpha=alpha)
    settings = {
        "source": source_level,
        "adjust_heterogeneity": adjust,
        "alpha": alpha,
        "n_perm": n_perm,
        "alternative": alternative,
        "seed": seed,
        "groups": groups,
    }
    return Comparison(
        per_pair=floor_p_columns(long),
        wide=floor_p_columns(_with_heterogeneity(_wide_table(long, groups), heterogeneity)),
        agreement=floor_p_columns(agreement),
        conflicts=floor_p_columns(_conflicts(long)),
        settings=settings,
        heterogeneity=floor_p_columns(heterogeneity),
        differences=floor_p_columns(differences),
    )


def _groups_long(
    source: Analysis | pd.DataFrame, source_level: str, alpha: float, adjust: str, estimates: pd.DataFrame | None
) -> tuple[pd.DataFrame, list[str]]:
    """The long rows of :func:`compare` (pair names oriented) and its groups in order."""
    from gengen.across.per_pair import oriented_pairs

    long = oriented_pairs(_long_table(source, source_level, alpha, adjust, estimates))
    return long, list(dict.fromkeys(long["group"]))


def _model_agreement(
    source: Analysis | pd.DataFrame, estimates: pd.DataFrame, *, alpha: float, n_perm: int, seed: int
) -> pd.DataFrame:
    """The agreement table of ``compare(source, source_level="models", ...)`` alone, from the source's group
    estimates: what :func:`gengen.across.verdict.build_verdict` reads of a comparison."""
    _check_options("models", alpha, n_perm, DEFAULT_ALTERNATIVE)
    long, groups = _groups_long(source, "models", alpha, _adjust_method(source), estimates)
    return _agreement_table(long, groups, n_perm=n_perm, alternative=DEFAULT_ALTERNATIVE, seed=seed)


def _check_options(source_level: str, alpha: float, n_perm: int, alternative: str) -> None:
    """One ``option …`` error for the first of compare's options that is out of range."""
    if source_level not in SOURCES:
        raise GengenError(f"option source: {source_level!r} is not one of {', '.join(SOURCES)}")
    if alternative not in ALTERNATIVES:
        raise GengenError(f"option alternative: {alternative!r} is not one of {', '.join(ALTERNATIVES)}")
    if not isinstance(n_perm, int) or n_perm < 1:
        raise GengenError(f"option n_perm: must be a positive integer, got {n_perm!r}")
    if not 0.0 < alpha < 1.0:
        raise GengenError(f"option alpha: must lie strictly between 0 and 1, got {alpha!r}")


def _wide_table(long: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """One row per pair: ``r[group]`` and ``sign[group]`` of every group, groups in their order."""
    wide = long.pivot_table(
        index=["testset_a", "testset_b"], columns="group", values=["r", "sign"], aggfunc="first", sort=True
    )
    wide.columns = [f"{value}[{group}]" for value, group in wide.columns]
    return wide[[f"{value}[{group}]" for group in groups for value in ("r", "sign")]].reset_index()


def _conflicts(long: pd.DataFrame) -> pd.DataFrame:
    """Pairs significantly positive in one group and significantly negative in another."""
    positive = long[long["significant"] & (long["r"] > 0)]
    negative = long[long["significant"] & (long["r"] < 0)]
    conflicts = positive.merge(negative, on=["testset_a", "testset_b"], suffixes=("_positive", "_negative"))
    columns = ["testset_a", "testset_b"]
    columns += [f"{name}_{side}" for side in ("positive", "negative") for name in ("group", "r", "p")]
    return conflicts[columns].reset_index(drop=True)


def _with_heterogeneity(wide: pd.DataFrame, heterogeneity: pd.DataFrame) -> pd.DataFrame:
    """The wide table with the across-model heterogeneity columns (suffixed ``[cell]`` when several cells)."""
    if heterogeneity.empty:
        return wide
    across_models = heterogeneity[heterogeneity["across"] == "model"]
    cells = list(dict.fromkeys(across_models["cell"]))
    for cell in cells:
        columns = {c: c if len(cells) == 1 else f"{c}[{cell}]" for c in WIDE_HETEROGENEITY}
        part = across_models[across_models["cell"] == cell][["testset_a", "testset_b", *WIDE_HETEROGENEITY]]
        wide = wide.merge(part.rename(columns=columns), on=["testset_a", "testset_b"], how="left")
    return wide


def _adjust_method(source: Analysis | pd.DataFrame) -> str:
    """The analysis' p-value adjustment for tables maxT does not cover (Holm for maxT, as the pooled table)."""
    if isinstance(source, pd.DataFrame):
        return "holm"
    return str(source.settings.p_adjust_method)


def _has_variance(pairs: pd.DataFrame) -> bool:
    """Whether the rows carry a variance (``se_z``, or ``n`` and ``k``) for the heterogeneity tables."""
    has_se = "se_z" in pairs.columns and bool(np.isfinite(pairs["se_z"].to_numpy(dtype=float)).any())
    return (has_se or {"n", "k"} <= set(pairs.columns)) and not pairs.empty
