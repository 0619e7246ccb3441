"""Which scores ``analyse`` uses (issue 15): the sign rule by name parts, and --model/--run/--size/--shots.

Expected correlations come from numpy least squares on the table written here, never from gengen's output.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from gengen.analyse import analyse
from gengen.analyse.options import LOWER_IS_BETTER, is_lower_better, name_parts
from gengen.cli import app
from gengen.errors import GengenError, InputError

TESTSETS = ("id", "ood_a", "ood_b", "ood_c")


@pytest.mark.parametrize(
    ("metric", "lower"),
    [
        ("CrossEntropyLoss", True), ("val_bpb", True), ("eval/loss", True), ("eval_loss", True), ("loss", True),
        ("perplexity", True), ("word_perplexity", True), ("PPL", True), ("bits_per_byte", True), ("WER", True),
        ("cer", True), ("nll", True), ("brier_score", True), ("error_rate", True), ("ZLoss", True),
        ("acc", False), ("acc_norm", False), ("len_norm", False), ("exact_match,strict-match", False),
        ("f1", False), ("accuracy", False), ("lossless_acc", False), ("bits", False), ("pct_stereotype", False),
    ],
)  # fmt: skip
def test_lower_is_better_by_name_parts(metric: str, lower: bool) -> None:
    assert is_lower_better(metric) is lower


def test_user_names_override_the_rule() -> None:
    assert name_parts("CrossEntropyLoss") == ("cross", "entropy", "loss")
    assert "bpb" in LOWER_IS_BETTER
    assert is_lower_better("wrongness", {*LOWER_IS_BETTER, "wrongness"})
    assert not is_lower_better("loss_reduction", LOWER_IS_BETTER, ["loss_reduction"])
    assert not is_lower_better("CrossEntropyLoss", LOWER_IS_BETTER, ["crossentropyloss"])


def table(seed: int = 3, n_steps: int = 25) -> pd.DataFrame:
    """Three models (two sizes, with shots) x two runs x checkpoints x four test sets."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, size, shots in (("pythia-160m", "160m", 0), ("pythia-410m", "410m", 0), ("opt-125m", "125m", 64)):
        for run in ("seed=1", "seed=2"):
            base = np.linspace(0.3, 0.8, n_steps)
            for testset in TESTSETS:
                values = np.clip(base + rng.normal(0, 0.04, n_steps), 0, 1)
                for step, value in enumerate(values):
                    rows.append(
                        {"model": model, "size": size, "shots": shots, "run": run, "step": 100 * step,
                         "testset": testset, "metric": "acc", "value": float(value)}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def numpy_partial_corr(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    design = np.column_stack([np.ones_like(c), c])
    ra = a - design @ np.linalg.lstsq(design, a, rcond=None)[0]
    rb = b - design @ np.linalg.lstsq(design, b, rcond=None)[0]
    return float(np.corrcoef(ra, rb)[0, 1])


def test_selection_keeps_only_the_matching_runs() -> None:
    df = table()
    # The reference below is the linear control's partial correlation: named (fit="auto" may pick the GAM).
    result = analyse(df, id_testset="id", inference="t-test", fit="linear", models="pythia-*", runs=["seed=2"])
    assert set(result.pairs["model"]) == {"pythia-160m", "pythia-410m"} and set(result.pairs["run"]) == {"seed=2"}
    for model in ("pythia-160m", "pythia-410m"):
        rows = df[(df["model"] == model) & (df["run"] == "seed=2")]
        wide = rows.pivot(index="step", columns="testset", values="value")
        pair = result.pairs[(result.pairs["model"] == model) & (result.pairs["testset_a"] == "ood_a")]
        pair = pair[pair["testset_b"] == "ood_b"].iloc[0]
        expected = numpy_partial_corr(wide["ood_a"].to_numpy(), wide["ood_b"].to_numpy(), wide["id"].to_numpy())
        np.testing.assert_allclose(pair["r_partial"], expected, rtol=1e-10)
    assert set(analyse(df, id_testset="id", inference="t-test", sizes="1?5m").pairs["model"]) == {"opt-125m"}
    assert set(analyse(df, id_testset="id", inference="t-test", shots=64).pairs["model"]) == {"opt-125m"}
    assert set(analyse(df, id_testset="id", inference="t-test", shots=["0"]).pairs["model"]) == {
        "pythia-160m",
        "pythia-410m",
    }
    settings = analyse(df, id_testset="id", inference="t-test", models=["opt-*"]).settings
    assert settings.models == ("opt-*",)


def test_a_pattern_matching_nothing_lists_what_exists() -> None:
    with pytest.raises(GengenError, match=r"^models 'gpt-9' matches no model .*opt-125m, pythia-160m"):
        analyse(table(), id_testset="id", models=["pythia-*", "gpt-9"])
    with pytest.raises(GengenError, match=r"^shots '5' matches no shots \(shots values: 0, 64\)"):
        analyse(table(), id_testset="id", shots=5)
    with pytest.raises(GengenError, match=r"^sizes cannot select: the score table has no 'size' values"):
        analyse(table().drop(columns=["size"]), id_testset="id", sizes="1b")


def test_cli_filters_signs_and_errors_in_cli_terms(tmp_path: Path) -> None:
    source = tmp_path / "scores.csv"
    df = table()
    df.to_csv(source, index=False)
    out = tmp_path / "out"
    common = ["analyse", str(source), "--id", "id", "--inference", "t-test", "--out", str(out)]
    result = CliRunner().invoke(app, [*common, "--model", "opt-*", "--run", "seed=1"])
    assert result.exit_code == 0, result.output
    pairs = pd.read_csv(out / "pairs.csv")
    assert set(pairs["model"]) == {"opt-125m"} and set(pairs["run"]) == {"seed=1"} and (pairs["sign"] == 1).all()
    for arguments, line in (
        (["--model", "nope"], "error: --model 'nope' matches no model"),
        (["--shots", "3"], "error: --shots '3' matches no shots"),
        (["--id", "idd"], "error: --id 'idd' is not a test set of the score table; did you mean 'id'?"),
        (["--metric", "accuracy"], "error: --metric 'accuracy' is not a metric of the score table"),
        (
            ["--lower-is-better", "acc", "--higher-is-better", "acc"],
            "error: --higher-is-better 'acc' is also listed as lower-is-better",
        ),
    ):
        result = CliRunner().invoke(app, [*common, *arguments])
        lines = [text for text in result.output.splitlines() if text.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(line), result.output
    assert "(metrics: acc)" in CliRunner().invoke(app, [*common, "--metric", "accuracy"]).output
    loss = df.assign(metric="wrongness")
    loss.to_csv(source, index=False)
    result = CliRunner().invoke(app, [*common, "--metric", "wrongness", "--lower-is-better", "wrongness"])
    assert result.exit_code == 0, result.output
    assert (pd.read_csv(out / "pairs.csv")["sign"] == -1).all()
    df.assign(metric="loss_reduction").to_csv(source, index=False)
    result = CliRunner().invoke(app, [*common, "--metric", "loss_reduction", "--higher-is-better", "loss_reduction"])
    assert result.exit_code == 0, result.output
    assert (pd.read_csv(out / "pairs.csv")["sign"] == 1).all()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (55.0, r"acc 55\.0 is outside \[0, 1\]; it looks like a percentage"),
        (float("inf"), r"inf is not a finite number"),
        ("0.6x", r"'0\.6x' is not a number"),
        (True, r"True is not a number"),
        (-0.1, r"acc -0\.1 is outside \[0, 1\]"),
    ],
)
def test_a_score_that_cannot_be_right_is_refused_with_its_key(bad: object, message: str) -> None:
    # A table built in Python never went through `gengen ingest`: before, '0.6x' was dropped as missing and 55
    # analysed as an accuracy.
    df = table()
    df["value"] = df["value"].astype(object)
    position = df.index[(df["model"] == "opt-125m") & (df["run"] == "seed=2") & (df["step"] == 300)][1]
    df.loc[position, "value"] = bad
    where = rf"scores: model 'opt-125m', run 'seed=2', step 300, test set '{df.loc[position, 'testset']}'"
    with pytest.raises(InputError, match=rf"^{where}: column 'value': {message}"):
        analyse(df, id_testset="id", inference="t-test", progress=False)


def test_missing_scores_and_numeric_text_are_still_analysed() -> None:
    df = table()
    as_text = df.assign(value=df["value"].map(repr))
    expected = analyse(df, id_testset="id", inference="t-test", progress=False).pairs
    pd.testing.assert_frame_equal(analyse(as_text, id_testset="id", inference="t-test", progress=False).pairs, expected)
    missing = df.copy()
    missing.loc[7, "value"] = np.nan  # a missing score is left out, as when its row is absent
    pd.testing.assert_frame_equal(
        analyse(missing, id_testset="id", inference="t-test", progress=False).pairs,
        analyse(df.drop(index=7), id_testset="id", inference="t-test", progress=False).pairs,
    )


def test_a_score_just_above_one_is_not_called_a_percentage() -> None:
    df = table()
    df.loc[5, "value"] = 1.02
    with pytest.raises(InputError, match=r"acc 1\.02 is outside \[0, 1\]$"):
        analyse(df, id_testset="id", inference="t-test", progress=False)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (1.5, r"column 'step': 1\.5 is not an integer"),  # was truncated to 1, then 'duplicate entries'
        ("abc", r"column 'step': 'abc' is not an integer"),
        (-3, r"column 'step': -3 is negative"),  # was analysed
        (float("nan"), r"column 'step' is empty"),
        (2**64, r"column 'step': 18446744073709551616 is outside the 64-bit integer range"),
    ],
)
def test_a_step_that_cannot_be_right_is_refused_with_its_key(bad: object, message: str) -> None:
    df = table()
    df["step"] = df["step"].astype(object)
    position = df.index[(df["model"] == "pythia-160m") & (df["run"] == "seed=1") & (df["step"] == 700)][0]
    df.loc[position, "step"] = bad
    where = rf"scores: model 'pythia-160m', run 'seed=1', step {re.escape(str(bad))}, test set 'id'"
    with pytest.raises(InputError, match=rf"^{where}: {message}$"):
        analyse(df, id_testset="id", inference="t-test", progress=False)


def test_whole_steps_as_floats_or_text_are_analysed_as_integers() -> None:
    df = table()
    expected = analyse(df, id_testset="id", inference="t-test", progress=False).pairs
    for steps in (df["step"].astype(float), df["step"].map(str)):
        got = analyse(df.assign(step=steps), id_testset="id", inference="t-test", progress=False).pairs
        pd.testing.assert_frame_equal(got, expected)
