"""The verdict's vectorised steps against the loops they replaced, written out here (issue 27).

The (pair × group) arrays were built with pandas' ``pivot_table``; the comparison cells by mapping a tuple key per
row; the pairwise differences one block of rows per two groups with a Python loop of Holm adjustments per pair;
the agreement table by merging two groups' rows, squaring them and running :func:`gengen.stats.mantel` and the
chance levels on separate gathers. Each reference below is that older code, so the new code must give the same
tables and numbers (to the last bit where the arithmetic is the same, else to rounding); the statistics
themselves are checked against scipy and statsmodels in ``test_heterogeneity.py`` and ``test_compare.py``.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from gengen.across.compare import compare
from gengen.across.heterogeneity import (
    comparison_cells,
    group_estimates,
    pair_matrices,
    pairwise_differences,
    two_sided_p,
)
from gengen.across.per_pair import holm_by_group, joined_per_row, satterthwaite, two_sided_p_array
from gengen.across.verdict import build_verdict
from gengen.analyse import analyse
from gengen.calibration.simulate import simulate_trajectories
from gengen.stats import mantel, p_adjust, permutation_indices


def _text(value: Any) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else str(value)


def pivot_reference(rows: pd.DataFrame) -> dict[str, Any]:
    """The (pair × group) arrays as ``pivot_table`` built them."""
    units = list(dict.fromkeys(map(str, rows["unit"])))
    frame = rows.assign(unit=rows["unit"].astype(str))

    def wide(column: str) -> pd.DataFrame:
        table = frame.pivot_table(index=["testset_a", "testset_b"], columns="unit", values=column, aggfunc="first")
        return table.reindex(columns=units).sort_index()

    z = wide("z")
    variance = wide("variance").reindex(z.index).to_numpy(dtype=float)
    df = wide("df").reindex(z.index).to_numpy(dtype=float)
    df = np.where(np.isfinite(df) & (df > 0), df, np.inf)
    r = wide("r").reindex(z.index).to_numpy(dtype=float)
    return {
        "index": z.index.to_frame(index=False),
        "units": units,
        "z": z.to_numpy(dtype=float),
        "variance": variance,
        "df": df,
        "r": r,
    }


def cells_reference(estimates: pd.DataFrame, within: tuple[str, ...]) -> dict[str, list[int]]:
    """Cell label -> row positions, from a tuple key per row mapped to its label (the older code)."""
    keys = estimates[list(within)].astype(object).where(estimates[list(within)].notna(), None)
    key_per_row = list(zip(*(keys[c] for c in within), strict=True))
    labels = [", ".join(f"{c}={_text(v)}" for c, v in zip(within, key, strict=True) if _text(v)) for key in key_per_row]
    out: dict[str, list[int]] = {}
    for position, label in enumerate(labels):
        out.setdefault(label or "all", []).append(position)
    return out


def differences_reference(matrices: Any) -> pd.DataFrame:
    """Every two groups compared block by block, Holm per pair in a loop (the older code)."""
    blocks = []
    for g, h in combinations(range(len(matrices.units)), 2):
        keep = matrices.usable[:, g] & matrices.usable[:, h]
        if not keep.any():
            continue
        se = np.sqrt(matrices.variance[keep, g] + matrices.variance[keep, h])
        welch = satterthwaite(matrices.variance[keep][:, [g, h]], matrices.df[keep][:, [g, h]])
        statistic = (matrices.z[keep, g] - matrices.z[keep, h]) / se
        blocks.append(
            matrices.index[keep].assign(
                group_a=matrices.units[g],
                group_b=matrices.units[h],
                statistic=statistic,
                df_difference=welch,
                p_difference=[two_sided_p(x, d) for x, d in zip(statistic, welch, strict=True)],
                _pair=np.flatnonzero(keep),
            )
        )
    table = pd.concat(blocks, ignore_index=True)
    adjusted = np.empty(len(table))
    for index in table.groupby("_pair", sort=False).indices.values():
        adjusted[index] = p_adjust(table["p_difference"].to_numpy()[index], "holm")
    return table.assign(p_difference_adjusted=adjusted).drop(columns="_pair")


def ragged_estimates() -> pd.DataFrame:
    """Group estimates with holes: a group without some pairs, NaN z, a zero variance, a missing shots label."""
    rng = np.random.default_rng(11)
    names = ["arc", "boolq", "copa", "hella", "mmlu"]
    rows = []
    for unit, shots in (("m1", 0), ("m2", 0), ("m3", 5), ("m4", None), ("m5", None)):
        for a, b in combinations(names, 2):
            if unit == "m2" and a == "arc":
                continue  # m2 never estimated arc's pairs
            r = rng.uniform(-0.7, 0.7)
            rows.append(
                {
                    "unit": unit,
                    "family": "f",
                    "model": unit,
                    "size": {"m1": 1, "m2": 2, "m3": 1, "m4": 1, "m5": 3}[unit],
                    "shots": shots,
                    "testset_a": a,
                    "testset_b": b,
                    "r": r,
                    "z": np.arctanh(r),
                    "variance": rng.uniform(0.01, 0.05),
                    "df": rng.choice([np.inf, 12.0, 30.0]),
                }
            )
    table = pd.DataFrame(rows).assign(shots=pd.Series([row["shots"] for row in rows], dtype=object))
    table.loc[(table["unit"] == "m1") & (table["testset_b"] == "copa"), "z"] = np.nan
    table.loc[(table["unit"] == "m5") & (table["testset_a"] == "copa"), "variance"] = 0.0
    # a pair no group has a z for: the pivot of z leaves it out
    table.loc[(table["testset_a"] == "hella") & (table["testset_b"] == "mmlu"), "z"] = np.nan
    return table.sample(frac=1.0, random_state=2).reset_index(drop=True)  # rows in no particular order


@pytest.fixture(scope="module")
def two_model_analysis() -> Any:
    frames = [
        simulate_trajectories(n=40, n_testsets=6, phi=0.3, shared=0.5, n_runs=runs, seed=seed, model=model)
        for seed, model, runs in ((4, "alpha", 2), (5, "beta", 1), (6, "gamma", 1))
    ]
    return analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)


def test_pair_matrices_match_the_pivot_tables() -> None:
    estimates = ragged_estimates()
    for rows in (estimates, estimates[estimates["shots"] == 0]):
        matrices = pair_matrices(rows)
        reference = pivot_reference(rows)
        assert matrices.units == reference["units"]
        pd.testing.assert_frame_equal(matrices.index, reference["index"], check_dtype=False)
        for name in ("z", "variance", "df", "r"):
            assert_array_equal(getattr(matrices, name), reference[name])
        assert ("hella", "mmlu") not in set(zip(matrices.index["testset_a"], matrices.index["testset_b"], strict=True))


def test_comparison_cells_match_the_keyed_rows() -> None:
    estimates = ragged_estimates()
    cells = dict(comparison_cells(estimates, "model"))
    reference = cells_reference(estimates, ("shots",))
    assert sorted(cells) == ["all", "shots=0"]  # shots=5 has one group: no comparison; None is "all"
    for label, rows in cells.items():
        assert_array_equal(estimates.index.get_indexer(rows.index), reference[label])
        pd.testing.assert_frame_equal(rows, estimates.iloc[reference[label]])
    # the same label from 0 and "0" is one cell, as a label per row made it
    mixed = estimates.assign(shots=estimates["shots"].astype(object))
    mixed.loc[mixed["unit"] == "m5", "shots"] = "0"
    assert dict(comparison_cells(mixed, "model"))["shots=0"]["unit"].nunique() == 3


def test_pairwise_differences_match_the_block_loop() -> None:
    estimates = ragged_estimates()
    table = pairwise_differences(estimates.assign(shots=0), across=("model",))
    (_, rows), *_ = comparison_cells(estimates.assign(shots=0), "model")
    reference = differences_reference(pair_matrices(rows))
    columns = ["testset_a", "testset_b", "group_a", "group_b", "statistic", "df_difference", "p_difference"]
    pd.testing.assert_frame_equal(
        table[columns].reset_index(drop=True), reference[columns].reset_index(drop=True), check_dtype=False
    )
    assert_array_equal(table["p_difference_adjusted"], reference["p_difference_adjusted"])
    for _, group in table.groupby(["testset_a", "testset_b"]):  # and Holm itself, by statsmodels
        assert_allclose(group["p_difference_adjusted"], multipletests(group["p_difference"], method="holm")[1])


def test_agreement_matches_mantel_and_the_chance_levels_by_hand(two_model_analysis: Any) -> None:
    """Each row of the agreement table against the older path: the two groups' rows merged, squared, complete
    test sets kept, then :func:`gengen.stats.mantel` and the permuted sign agreement by hand."""
    comparison = compare(two_model_analysis, source_level="models", n_perm=199, seed=4)
    long = comparison.per_pair
    for row in comparison.agreement.itertuples(index=False):
        a, b = comparison.matrix(row.group_a), comparison.matrix(row.group_b)
        common = [name for name in a.index if name in b.index]
        a, b = a.loc[common, common].to_numpy(), b.loc[common, common].to_numpy()
        complete = [i for i in range(len(common)) if np.isfinite(a[i]).all() and np.isfinite(b[i]).all()]
        a, b = a[np.ix_(complete, complete)], b[np.ix_(complete, complete)]
        test = mantel(a, b, n_perm=199, seed=4)
        assert row.n_testsets == len(complete)
        assert_allclose(row.mantel_r, test.r, rtol=1e-12)
        assert row.mantel_p == test.p_value
        rows, cols = np.triu_indices(len(complete), 1)
        x, y = a[rows, cols], b[rows, cols]
        orders = permutation_indices(len(complete), 199, scheme="free", seed=4)
        permuted = np.array([b[np.ix_(order, order)][rows, cols] for order in orders])
        agree = np.mean(permuted * x > 0, axis=1)
        r_perm = np.array([np.corrcoef(x, values)[0, 1] for values in permuted])
        assert_allclose(row.sign_agreement_chance, agree.mean(), rtol=1e-12)
        assert_allclose(row.sign_agreement_chance_low, np.quantile(agree, 0.025), rtol=1e-12)
        assert_allclose(row.p_sign_agreement, (1 + np.sum(agree >= np.mean(x * y > 0) - 1e-12)) / 200)
        assert_allclose(row.mantel_r_chance_high, np.quantile(r_perm, 0.975), rtol=1e-10)
        merged = long[long["group"] == row.group_a].merge(
            long[long["group"] == row.group_b], on=["testset_a", "testset_b"]
        )
        assert row.n_pairs == int(np.sum(np.isfinite(merged["r_x"]) & np.isfinite(merged["r_y"])))
        assert row.n_sign_agree == int(np.sum(merged["r_x"] * merged["r_y"] > 0))


def test_the_verdict_of_an_analysis_and_of_its_pairs_table_agree(two_model_analysis: Any) -> None:
    """Sharing the group estimates between the verdict and its comparison changes nothing: the verdict of the
    analysis equals the one built from its pairs table with the comparison computed apart."""
    verdict = build_verdict(two_model_analysis, n_perm=99)
    comparison = compare(two_model_analysis, source_level="models", n_perm=99, alpha=verdict.settings["alpha"])
    apart = build_verdict(two_model_analysis.pairs, comparison, adjust=verdict.settings["adjust"], n_perm=99)
    pd.testing.assert_frame_equal(verdict.pairs, apart.pairs)
    assert verdict.agreement == apart.agreement and verdict.text == apart.text


def test_per_pair_helpers_against_scipy_statsmodels_and_the_loops() -> None:
    rng = np.random.default_rng(8)
    statistic = np.concatenate([rng.normal(0, 3, 50), [np.nan, np.inf, 0.0]])
    df = np.concatenate([rng.choice([np.inf, 4.0, 30.0, 2.5], 50), [5.0, 5.0, np.inf]])
    p = two_sided_p_array(statistic, df)
    assert_array_equal(p, [two_sided_p(x, d) for x, d in zip(statistic, df, strict=True)])
    finite = np.isfinite(statistic)
    assert_allclose(p[finite], 2 * scipy_stats.t.sf(np.abs(statistic[finite]), df[finite]), rtol=1e-9)
    assert np.isnan(p[~finite]).all()
    # Holm within groups: the Rust p_adjust on each group alone (bit for bit) and statsmodels; NaN not counted
    values = rng.uniform(0, 0.2, 60)
    values[[3, 17, 40]] = np.nan
    values[[5, 6]] = values[4]  # ties
    group = rng.integers(0, 9, 60)
    adjusted = holm_by_group(values, group)
    for label in np.unique(group):
        members = group == label
        assert_array_equal(adjusted[members], p_adjust(values[members], "holm"))
        kept = members & ~np.isnan(values)
        assert_allclose(adjusted[kept], multipletests(values[kept], method="holm")[1], rtol=1e-12)
    assert np.isnan(adjusted[[3, 17, 40]]).all()
    texts = np.array([["a", "bb", "c"]] * 4, dtype=object)
    keep = rng.random((4, 3)) < 0.5
    expected = [";".join(t for t, k in zip(row, mask, strict=True) if k) for row, mask in zip(texts, keep, strict=True)]
    assert joined_per_row(texts, keep) == expected


def classify_reference(row: Any, alpha: float, compared: bool) -> tuple[str, str]:
    """A pair's class and reason, one row at a time (the older code)."""
    if row.n_groups == 0:
        return "undetermined", "no model could test this pair"
    if compared and row.n_groups < 2:
        return "undetermined", "only one model could test this pair"
    if not (np.isfinite(row.p_joint_adjusted) and row.p_joint_adjusted < alpha):
        return "undetermined", "no model's partial correlation differs from zero (joint test of every model's estimate)"
    if np.isfinite(row.p_heterogeneity_adjusted) and row.p_heterogeneity_adjusted < alpha:
        return "model-dependent", "the partial correlation differs between models (Cochran's Q)"
    if not (np.isfinite(row.p_common_adjusted) and row.p_common_adjusted < alpha):
        return "undetermined", "no common effect detected (too little power, or none)"
    if row.r_common > 0 and row.n_negative == 0:
        return "consistent positive", "significant common effect, positive in every model"
    if row.r_common < 0 and row.n_positive == 0:
        return "consistent negative", "significant common effect, negative in every model"
    return "undetermined", "significant common effect, but some model points the other way"


def planted_pairs() -> pd.DataFrame:
    """A pairs table of three models: random r and se_z, a model without some pairs, an r of NaN."""
    rng = np.random.default_rng(21)
    rows = [
        {
            "model": model,
            "run": "main",
            "testset_a": a,
            "testset_b": b,
            "r_partial": rng.uniform(-0.7, 0.7),
            "se_z": rng.uniform(0.05, 0.3),
        }
        for model in ("m1", "m2", "m3")
        for a, b in combinations(["t1", "t2", "t3", "t4", "t5", "t6"], 2)
        if not (model == "m3" and a == "t1")
    ]
    table = pd.DataFrame(rows)
    table.loc[(table["model"] == "m2") & (table["testset_b"] == "t6"), "r_partial"] = np.nan
    return table


@pytest.mark.parametrize("alpha", [0.05, 0.5])
def test_verdict_classes_and_labels_match_the_row_loop(two_model_analysis: Any, alpha: float) -> None:
    seen = set()
    for source in (two_model_analysis, planted_pairs()):
        verdict = build_verdict(source, n_perm=19, alpha=alpha)
        table = verdict.pairs
        expected = [classify_reference(row, alpha, True) for row in table.itertuples(index=False)]
        assert list(table["verdict"]) == [name for name, _ in expected]
        assert list(table["reason"]) == [reason for _, reason in expected]
        seen |= set(expected)
        pairs = source if isinstance(source, pd.DataFrame) else source.pairs
        estimates = group_estimates(pairs)
        for row in table.itertuples(index=False):
            rows = estimates[(estimates["testset_a"] == row.testset_a) & (estimates["testset_b"] == row.testset_b)]
            usable = rows[np.isfinite(rows["z"]) & (rows["variance"] > 0)]
            labels = [f"{u}={x:.3f}" for u, x in zip(usable["unit"], usable["r"], strict=True)]
            assert row.r_by_group == ";".join(labels)
            assert row.groups == ";".join(usable["unit"])
            if isinstance(source, pd.DataFrame):  # known variances: the common effect against the normal
                w = 1 / usable["variance"]
                stat = np.sum(w * usable["z"]) / np.sqrt(np.sum(w))
                assert_allclose(row.p_common, 2 * scipy_stats.norm.sf(abs(stat)), rtol=1e-9)
                # the joint test: sum w z^2 against chi-squared on M df (known variances)
                joint = np.sum(w * usable["z"] ** 2)
                assert_allclose(row.p_joint, scipy_stats.chi2.sf(joint, len(usable)), rtol=1e-9)
    assert len(seen) >= 3  # several classes and reasons were exercised


def test_agreement_with_holes_and_a_repeated_pair_matches_merging_by_name() -> None:
    """Groups whose complete test sets differ (an r of NaN, a test set missing) are tested on their own test
    sets, and a group with a pair twice is matched as a merge by name matches it (each row with each row)."""
    table = planted_pairs().assign(p_adjusted=0.5)
    table["r_partial"] = table["r_partial"].fillna(0.3)
    hole = (table["model"] == "m1") & (table["testset_a"] == "t2") & (table["testset_b"] == "t3")
    table.loc[hole, "r_partial"] = np.nan
    repeated = table[(table["model"] == "m3") & (table["testset_a"] == "t2")].head(1).assign(r_partial=-0.9)
    comparison = compare(pd.concat([table, repeated], ignore_index=True), n_perm=99, seed=2)
    long = comparison.per_pair
    sizes = []
    for row in comparison.agreement.itertuples(index=False):
        merged = long[long["group"] == row.group_a].merge(
            long[long["group"] == row.group_b], on=["testset_a", "testset_b"]
        )
        assert row.n_pairs == int(np.sum(np.isfinite(merged["r_x"]) & np.isfinite(merged["r_y"])))
        assert row.n_sign_agree == int(np.sum(merged["r_x"] * merged["r_y"] > 0))
        a, b = comparison.matrix(row.group_a), comparison.matrix(row.group_b)
        common = [name for name in a.index if name in b.index]
        a, b = a.loc[common, common].to_numpy(), b.loc[common, common].to_numpy()
        complete = [i for i in range(len(common)) if np.isfinite(a[i]).all() and np.isfinite(b[i]).all()]
        test = mantel(a[np.ix_(complete, complete)], b[np.ix_(complete, complete)], n_perm=99, seed=2)
        assert row.n_testsets == len(complete)
        assert_allclose(row.mantel_r, test.r, rtol=1e-12)
        assert row.mantel_p == test.p_value
        sizes.append(len(complete))
    assert sizes == [4, 3, 5]  # m1/m2, m1/m3, m2/m3: three sets of test sets, two of them against m3
