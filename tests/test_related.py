"""Related OOD test sets (issue 33, item 2): found from names and series, kept in the pairs table, left out of
the verdict unless ``keep_related``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gengen
from gengen.across.verdict import build_verdict
from gengen.analyse.related import related_pairs
from gengen.calibration.simulate import simulate_trajectories
from gengen.cli import app


def _reasons(names: list[str], **kwargs: object) -> dict[frozenset[str], str]:
    table = related_pairs(names, **kwargs)  # type: ignore[arg-type]
    return {frozenset((a, b)): reason for a, b, reason in table.itertuples(index=False)}


def test_splits_of_one_task_by_name() -> None:
    names = [
        "arc_easy_test", "arc_easy_val", "mmlu_humanities_test", "mmlu_humanities_val", "c4_en-validation", "c4_en",
        "arc_easy_val_rc_5shot", "arc_easy_test_rc_5shot", "boolq_dev", "boolq", "arc_challenge_test",
    ]  # fmt: skip
    found = _reasons(names)
    for a, b in [
        ("arc_easy_test", "arc_easy_val"),
        ("mmlu_humanities_test", "mmlu_humanities_val"),
        ("c4_en-validation", "c4_en"),
        ("arc_easy_val_rc_5shot", "arc_easy_test_rc_5shot"),
        ("boolq_dev", "boolq"),
    ]:
        assert found[frozenset((a, b))].startswith("splits of one task"), (a, b)
    assert frozenset(("arc_easy_test", "arc_challenge_test")) not in found
    # arc_easy is a prefix of arc_easy_rc_5shot: the 5-shot variant is nested in it, not a split
    assert found[frozenset(("arc_easy_test", "arc_easy_val_rc_5shot"))].startswith("nested")


def test_nested_sets_and_groups() -> None:
    names = [
        "hans", "hans_lexical_nonent", "hans_ln_subsequence", "hans_ln_preposition", "mmlu",
        "hendrycksTest-anatomy", "hendrycksTest-astronomy", "hendrycksTest-high_school_physics",
        "hendrycksTest-high_school_psychology", "piqa", "crows_pairs_english", "crows_pairs_english_age",
    ]  # fmt: skip
    found = _reasons(names)
    assert found[frozenset(("hans", "hans_lexical_nonent"))] == "nested: hans_lexical_nonent within hans"
    assert "within hans_lexical_nonent" in found[frozenset(("hans_lexical_nonent", "hans_ln_subsequence"))]
    assert "lm-eval group mmlu" in found[frozenset(("mmlu", "hendrycksTest-anatomy"))]
    assert found[frozenset(("crows_pairs_english", "crows_pairs_english_age"))].startswith("nested")
    # sibling subtasks are different examples; two subtasks whose initials collide are not related either
    assert frozenset(("hendrycksTest-anatomy", "hendrycksTest-astronomy")) not in found
    assert frozenset(("hendrycksTest-high_school_physics", "hendrycksTest-high_school_psychology")) not in found
    assert frozenset(("hans_ln_subsequence", "hans_ln_preposition")) not in found
    assert not any("piqa" in pair for pair in found)
    declared = _reasons(["a", "b", "c"], groups={"abc": ["a", "b"]})
    assert declared == {frozenset(("a", "b")): "declared group 'abc'"}


def test_near_duplicates_need_both_correlation_and_equal_values() -> None:
    rng = np.random.default_rng(3)
    trend = np.linspace(0.3, 0.7, 30)
    copy_noise = rng.normal(0, 0.002, 30)
    scores = pd.DataFrame(
        {
            "x": trend + rng.normal(0, 0.003, 30),
            "renamed_x": trend + rng.normal(0, 0.003, 30) + copy_noise,
            "shifted": trend + 0.2 + rng.normal(0, 0.002, 30),  # r ≈ 1 but 0.2 apart: another task that tracks x
        }
    )
    noise = {"x": 0.003, "renamed_x": 0.0036, "shifted": 0.002}  # each series' measurement sd
    found = _reasons(list(scores.columns), scores=scores, noise=noise)
    r = np.corrcoef(scores["x"], scores["renamed_x"])[0, 1]
    assert r >= 0.995
    assert found[frozenset(("x", "renamed_x"))].startswith("near-duplicate series")
    assert np.corrcoef(scores["x"], scores["shifted"])[0, 1] >= 0.995
    assert frozenset(("x", "shifted")) not in found
    # without noise information only equal values are duplicates (as the information counts compare scores)
    assert _reasons(list(scores.columns), scores=scores) == {}
    same = scores.assign(copy=scores["x"])
    assert _reasons(list(same.columns), scores=same) == {
        frozenset(("x", "copy")): "near-duplicate series (raw r = 1.000, mean |difference| 0: equal values)"
    }


def _two_models_with_related_sets() -> pd.DataFrame:
    """Two models; ``task_test``/``task_val`` are two samples of one task and ``hans_lexical_nonent`` a subset of
    ``hans`` (their residuals share most of their noise); ``ood_3``, ``ood_4`` independent."""
    frames = []
    for index, model in enumerate(["m1", "m2"]):
        scores = simulate_trajectories(n=40, n_testsets=4, shared=0.0, seed=11 + index, model=model)
        wide = scores.pivot(index="step", columns="testset", values="value")
        rng = np.random.default_rng(100 + index)
        renamed = {"ood_1": "task_test", "ood_2": "hans"}
        wide = wide.rename(columns=renamed)
        wide["task_val"] = wide["task_test"] + rng.normal(0, 0.004, len(wide))
        wide["hans_lexical_nonent"] = wide["hans"] + rng.normal(0, 0.006, len(wide))
        long = wide.reset_index().melt(id_vars="step", var_name="testset", value_name="value")
        frames.append(long.assign(model=model, run="main", metric="accuracy"))
    return pd.concat(frames, ignore_index=True)


def test_verdict_leaves_related_pairs_out_and_says_so() -> None:
    table = _two_models_with_related_sets()
    analysis = gengen.analyse(table, id_testset="id", metric="accuracy", fit="linear", n_boot=199)
    related = analysis.pairs.loc[analysis.pairs["related"], ["testset_a", "testset_b"]].drop_duplicates()
    assert {frozenset(row) for row in related.itertuples(index=False)} == {
        frozenset(("task_test", "task_val")),
        frozenset(("hans", "hans_lexical_nonent")),
    }
    assert analysis.settings["ood_resolved"] == sorted(["task_test", "task_val", "hans", "hans_lexical_nonent",
                                                        "ood_3", "ood_4"])  # fmt: skip
    assert len(analysis.settings["related_pairs"]) == 2
    assert any("2 pair(s) of related OOD test sets" in warning for warning in analysis.warnings)

    verdict = build_verdict(analysis, n_perm=99)
    kept = {frozenset(pair) for pair in verdict.pairs[["testset_a", "testset_b"]].itertuples(index=False)}
    assert len(kept) == 15 - 2
    assert frozenset(("task_test", "task_val")) not in kept
    assert "2 pair(s) of related test sets" in verdict.text and "left out" in verdict.text

    # kept on request, the split pair is the "consistent positive" it trivially is
    with_related = build_verdict(analysis, n_perm=99, keep_related=True)
    assert len(with_related.pairs) == 15
    row = with_related.pairs.set_index(["testset_a", "testset_b"]).loc[("task_test", "task_val")]
    assert row["verdict"] == "consistent positive"
    assert with_related.settings["keep_related"] is True


@pytest.mark.parametrize("keep", [False, True])
def test_keep_related_option_is_recorded(keep: bool) -> None:
    table = _two_models_with_related_sets()
    analysis = gengen.analyse(
        table, id_testset="id", metric="accuracy", fit="linear", n_boot=99, keep_related=keep, pooling="none"
    )
    assert analysis.settings["keep_related"] is keep
    assert len(build_verdict(analysis, n_perm=19).pairs) == (15 if keep else 13)


def test_declared_groups_from_python_cli_and_study_option() -> None:
    from gengen.analyse.options import make_settings

    table = _two_models_with_related_sets()
    analysis = gengen.analyse(
        table, id_testset="id", metric="accuracy", fit="linear", n_boot=99, pooling="none",
        related_groups={"mine": ["ood_3", "ood_4"]},
    )  # fmt: skip
    row = analysis.pairs[(analysis.pairs["testset_a"] == "ood_3") & (analysis.pairs["testset_b"] == "ood_4")]
    assert row["related"].all() and set(row["related_reason"]) == {"declared group 'mine'"}
    assert analysis.settings["related_groups"] == {"mine": ["ood_3", "ood_4"]}
    assert make_settings(id_testset="id", related_groups=["g=a,b"]).related_groups == (("g", ("a", "b")),)
    with pytest.raises(gengen.GengenError, match="related_groups group 'g' needs at least 2 test sets"):
        make_settings(id_testset="id", related_groups=["g=a"])


def test_a_study_file_and_the_cli_declare_task_groups(tmp_path: Path) -> None:
    from gengen.study.config import load_config

    text = (Path(gengen.__file__).parent / "demo" / "study.toml").read_text()
    for path in re.findall(r'path = "([^"]+)"', text):  # the demo's data files and model folders, empty
        target = tmp_path / path
        if target.suffix:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
        else:
            target.mkdir(parents=True, exist_ok=True)
    study = tmp_path / "study.toml"
    study.write_text(text + '\n[analysis]\nrelated_groups = { hans = ["hans", "hans_x"] }\nkeep_related = true\n')
    options = load_config(study).analysis.options()
    assert options["related_groups"] == (("hans", ("hans", "hans_x")),) and options["keep_related"] is True

    path = tmp_path / "scores.csv"
    _two_models_with_related_sets().to_csv(path, index=False)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")]).exit_code == 0
    result = runner.invoke(app, ["analyse", str(tmp_path / "store"), "--id", "id", "--metric", "accuracy",
                                 "--related-group", "mine=ood_3,ood_4", "--n-boot", "99", "--out",
                                 str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "OOD test sets (6, metric accuracy): hans, hans_lexical_nonent, ood_3, ood_4, task_test, task_val" in (
        result.output
    )
    assert "3 pair(s) of related test sets" in result.output
    bad = runner.invoke(app, ["analyse", str(tmp_path / "store"), "--id", "id", "--metric", "accuracy",
                              "--related-group", "mine", "--out", str(tmp_path / "bad")])  # fmt: skip
    assert bad.exit_code == 2 and "--related-group must be NAME=TESTSET" in bad.output and "Traceback" not in bad.output
