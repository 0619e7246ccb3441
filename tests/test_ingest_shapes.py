"""Score files as people publish them (issue 15): Weights & Biases exports, per-run tables, BOMs, long headers.

Expected values are read from the text written here with the ``csv`` module or ``json``, never from gengen's
own output; correlations are checked against numpy least squares.
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gengen.analyse import analyse, load_scores
from gengen.cli import app
from gengen.errors import InputError, UnknownFormatError
from gengen.ingest import ingest
from gengen.ingest.tables import split_name
from gengen.store.database import load

# The W&B columns written below and the (test set, metric) each must become (the documented rule).
WANDB_SCORES = {
    "train/CrossEntropyLoss": ("train", "CrossEntropyLoss"),
    "eval/c4_en-validation/CrossEntropyLoss": ("c4_en-validation", "CrossEntropyLoss"),
    "eval/downstream/arc_easy_val_rc_5shot_len_norm": ("arc_easy_val_rc_5shot", "len_norm"),
    "eval/downstream/piqa_val_rc_5shot_len_norm": ("piqa_val_rc_5shot", "len_norm"),
    "eval/downstream/hellaswag_rc_5shot_acc": ("hellaswag_rc_5shot", "acc"),
    "eval/downstream/mmlu_stem_var_bpb": ("mmlu_stem_var", "bpb"),
}
WANDB_OTHER = ("_runtime", "_timestamp", "optim/LR (group 0)", "throughput/total_tokens", "System/GPU Memory")


def write_wandb(path: Path, seed: int, n_rows: int = 12) -> Path:
    """A W&B history export: ``_step``, telemetry, train loss every row, evaluations every other row."""
    rng = np.random.default_rng(seed)
    header = ["_step", *WANDB_OTHER[:2], "train/CrossEntropyLoss", *WANDB_OTHER[2:], *list(WANDB_SCORES)[1:]]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in range(n_rows):
            cells = {"_step": str(1000 * row), "_runtime": f"{12.5 * row:.1f}", "_timestamp": str(1.7e9 + row)}
            cells.update({name: f"{rng.uniform(0, 1):.4f}" for name in WANDB_OTHER[2:]})
            cells["train/CrossEntropyLoss"] = f"{3.5 - 0.1 * row + rng.normal(0, 0.01):.5f}"
            for name in list(WANDB_SCORES)[1:]:
                cells[name] = f"{rng.uniform(0.2, 0.9):.5f}" if row % 2 == 0 else ""
            writer.writerow([cells[name] for name in header])
    return path


def expected_from_csv(path: Path, model: str) -> dict[tuple[str, int, str, str], float]:
    """Every non-empty score cell of a W&B export, keyed as the store keys it, read with the csv module."""
    expected = {}
    with path.open(newline="") as handle:
        for record in csv.DictReader(handle):
            for column, (testset, metric) in WANDB_SCORES.items():
                if record[column]:
                    expected[(model, int(record["_step"]), testset, metric)] = float(record[column])
    return expected


def test_four_wandb_exports_become_four_models_in_one_command(tmp_path: Path) -> None:
    names = ["OLMo-2-1B-stage1", "OLMo-2-7B-stage1", "OLMo-2-13B-stage1", "OLMo-2-32B-stage1"]
    paths = [write_wandb(tmp_path / f"{name}.csv", seed) for seed, name in enumerate(names)]
    result = CliRunner().invoke(app, ["ingest", *map(str, paths), "--store", str(tmp_path / "s"), "-q"])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output.lower()
    frame = load(tmp_path / "s")
    assert sorted(frame["model"].unique()) == sorted(names)
    got = {(r.model, r.step, r.testset, r.metric): r.value for r in frame.itertuples()}
    expected: dict[tuple[str, int, str, str], float] = {}
    for name, path in zip(names, paths, strict=True):
        expected.update(expected_from_csv(path, name))
    assert got == expected
    assert set(frame.loc[frame["model"] == "OLMo-2-7B-stage1", "size"]) == {"7B"}
    # one note per file: the step column, the model from the file name, the telemetry left out
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert len(notes) == 4
    assert all("step from column '_step'" in note and "'optim/LR (group 0)'" in note for note in notes)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("eval/downstream/arc_easy_val_rc_5shot_len_norm", ("arc_easy_val_rc_5shot", "len_norm")),
        ("eval/downstream/piqa_acc_norm", ("piqa", "acc_norm")),
        ("eval/downstream/hellaswag_rc_5shot_ce_loss", ("hellaswag_rc_5shot", "ce_loss")),
        ("eval/c4_en-validation/CrossEntropyLoss", ("c4_en-validation", "CrossEntropyLoss")),
        ("eval/lm/wikitext_103-validation/Perplexity", ("wikitext_103-validation", "Perplexity")),
        ("eval/downstream/arc_easy (length-normalized accuracy)", ("arc_easy", "length-normalized accuracy")),
        ("train/CrossEntropyLoss", ("train", "CrossEntropyLoss")),
        ("eval/loss", ("eval", "loss")),
        ("eval/accuracy", ("eval", "accuracy")),
        ("val_bpb", ("val", "bpb")),
        ("eval_arc_easy_acc", ("arc_easy", "acc")),
        ("arc_easy/acc", ("arc_easy", "acc")),  # what gengen export --wide writes
        ("mmlu/stem/acc", ("mmlu/stem", "acc")),
        ("wikitext/word_perplexity", ("wikitext", "word_perplexity")),
        ("piqa_acc", ("piqa", "acc")),
        ("_runtime", None),
        ("optim/LR (group 0)", None),
        ("throughput/device/tokens_per_second", None),
        ("System/GPU Memory", None),
        ("eval/runtime", None),
        ("train/grad_norm", None),
        ("train/epoch", None),
        ("eval/loss__MIN", None),
        ("learning_rate", None),
    ],
)  # fmt: skip
def test_split_name_rule(name: str, expected: tuple[str, str] | None) -> None:
    assert split_name(name) == expected


def test_the_trainer_step_wins_over_the_wandb_step(tmp_path: Path) -> None:
    path = tmp_path / "hf.csv"
    path.write_text("_step,trainer/global_step,eval/loss,eval/accuracy\n0,500,0.7,0.61\n1,1000,0.6,0.65\n")
    report = ingest(path, tmp_path / "s")
    assert set(load(tmp_path / "s")["step"]) == {500, 1000}
    assert any("step from column 'trainer/global_step' (_step left out)" in note for note in report.notes)
    hf = tmp_path / "hf-trainer.csv"  # what transformers' WandbCallback logs
    hf.write_text(
        "_step,train/global_step,train/epoch,train/loss,train/learning_rate,eval/loss,eval/accuracy,eval/runtime\n"
        "0,50,0.5,0.69,4e-05,,,\n1,100,1.0,0.60,3e-05,0.52,0.75,3.2\n"
    )
    ingest(hf, tmp_path / "t")
    got = {(r.step, r.testset, r.metric): r.value for r in load(tmp_path / "t").itertuples()}
    assert got == {(50, "train", "loss"): 0.69, (100, "train", "loss"): 0.60, (100, "eval", "loss"): 0.52,
                   (100, "eval", "accuracy"): 0.75}  # fmt: skip


def test_a_column_mapping_one_file_lacks_is_noted(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("iteration,eval/loss\n10,0.5\n20,0.4\n")
    b = tmp_path / "b.csv"
    b.write_text("_step,eval/loss\n10,0.7\n")
    report = ingest([a, b], tmp_path / "s", columns={"step": "iteration"})
    frame = load(tmp_path / "s")
    assert {(r.model, r.step, r.value) for r in frame.itertuples()} == {("a", 10, 0.5), ("a", 20, 0.4), ("b", 10, 0.7)}
    assert any(note.startswith(f"{b}: no column 'iteration'") for note in report.notes)
    with pytest.raises(InputError, match=r"columns tokens=tokns: none of the 2 tables has that column"):
        ingest([a, b], tmp_path / "t", columns={"step": "iteration", "tokens": "tokns"})


def write_per_run_table(path: Path, n_runs: int = 100) -> dict[str, list[float]]:
    """A McCoy et al. (2020)-shaped table: one row per run, a blank row, then summary rows."""
    rng = np.random.default_rng(2020)
    columns = ["MNLI", "HANS lexical overlap", "HANS subsequence", "HANS constituent"]
    base = rng.normal(size=n_runs)
    values = {name: list(np.clip(0.5 + 0.1 * (base + rng.normal(size=n_runs)), 0, 1).round(4)) for name in columns}
    lines = ["Run," + ",".join(columns)]
    lines += [f"{run + 1}," + ",".join(str(values[c][run]) for c in columns) for run in range(n_runs)]
    lines += [",,,,", "Minimum,0.1,0.1,0.1,0.1", "Maximum,0.9,0.9,0.9,0.9", "Mean,0.5,0.5,0.5,0.5"]
    lines += ["Standard deviation,0.01,0.02,0.03,0.04", "Median,0.5,0.5,0.5,0.5"]
    path.write_text("\n".join(lines) + "\n")
    return values


def numpy_partial_corr(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """corr of the residuals of a and b after least squares on [1, c]."""
    design = np.column_stack([np.ones_like(c), c])
    ra = a - design @ np.linalg.lstsq(design, a, rcond=None)[0]
    rb = b - design @ np.linalg.lstsq(design, b, rcond=None)[0]
    return float(np.corrcoef(ra, rb)[0, 1])


def test_per_run_table_with_summary_rows_is_exactly_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "bert-base-mnli.csv"
    values = write_per_run_table(path)
    result = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "s"), "--metric", "acc", "-q"])
    assert result.exit_code == 0, result.output
    frame = load(tmp_path / "s")
    assert frame["run"].nunique() == 100 and set(frame["run"]) == {str(i) for i in range(1, 101)}
    assert set(frame["step"]) == {0} and set(frame["model"]) == {"bert-base-mnli"} and len(frame) == 400
    for name, column in values.items():
        stored = frame[frame["testset"] == name].set_index("run")["value"]
        assert [stored[str(run + 1)] for run in range(100)] == column
    note = next(line for line in result.output.splitlines() if "summary rows" in line)
    for label in ("Minimum", "Maximum", "Mean", "Standard deviation", "Median"):
        assert repr(label) in note
    assert "1 blank row (line 102)" in note
    # across runs: the observations are the 100 runs
    analysis = analyse(load_scores(tmp_path / "s"), id_testset="MNLI", inference="t-test")
    assert analysis.settings["mode_resolved"] == "across_runs"
    row = analysis.pairs[(analysis.pairs["testset_a"] == "HANS constituent")].iloc[0]
    other = np.array(values[row["testset_b"]])
    expected = numpy_partial_corr(np.array(values["HANS constituent"]), other, np.array(values["MNLI"]))
    assert row["n"] == 100
    np.testing.assert_allclose(row["r_partial"], expected, rtol=1e-10)


def test_seed_column_and_run_column(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.csv"
    seeds.write_text("seed,mnli/acc,hans/acc\n1,0.84,0.51\n2,0.83,0.55\nMean,0.835,0.53\n")
    ingest(seeds, tmp_path / "s")
    frame = load(tmp_path / "s")
    assert set(frame["run"]) == {"seed=1", "seed=2"} and set(frame["seed"]) == {1, 2}
    trials = tmp_path / "trials.tsv"
    trials.write_text("Trial\tMNLI\tHANS\nt1\t0.84\t0.51\nt2\t0.83\t0.55\n")
    ingest(trials, tmp_path / "t", run_column="Trial", metric="acc", step=7, model="roberta")
    frame = load(tmp_path / "t")
    got = {(r.run, r.step, r.testset, r.metric): r.value for r in frame.itertuples()}
    assert got == {("t1", 7, "MNLI", "acc"): 0.84, ("t1", 7, "HANS", "acc"): 0.51,
                   ("t2", 7, "MNLI", "acc"): 0.83, ("t2", 7, "HANS", "acc"): 0.55}  # fmt: skip


def test_byte_order_marks_are_accepted(tmp_path: Path) -> None:
    table = tmp_path / "long.csv"
    table.write_bytes("\ufeffmodel,step,testset,metric,value\nm-1m,5,piqa,acc,0.61\n".encode())
    data = {
        "results": {"piqa": {"acc": 0.62, "acc_stderr": 0.01}},
        "config": {"model_args": "pretrained=EleutherAI/pythia-160m,revision=step9"},
    }
    results = tmp_path / "160m_step9.json"
    results.write_bytes("\ufeff".encode() + json.dumps(data).encode())
    ingest([table, results], tmp_path / "s")
    got = {(r.model, r.step, r.value) for r in load(tmp_path / "s").itertuples()}
    assert got == {("m-1m", 5, 0.61), ("pythia-160m", 9, 0.62)}


def test_column_lists_in_errors_are_short(tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    names = [f"metric number {i}" for i in range(113)]
    path.write_text(",".join(names) + "\n" + ",".join(["0.5"] * 113) + "\n")
    with pytest.raises(UnknownFormatError) as info:
        ingest(path, tmp_path / "s")
    message = str(info.value)
    assert "(113 in all)" in message and "metric number 0" in message and "metric number 112" not in message
    assert len(message) < 600


def test_no_library_warnings_from_a_wide_export(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    columns = [f"eval/downstream/task{i}_acc" for i in range(400)]
    rows = [",".join(["_step", *columns])]
    rows += [",".join([str(step), *(["0.5"] * 400)]) for step in range(20)]
    path.write_text("\n".join(rows) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ingest(path, tmp_path / "s")
    assert report.rows == 400 * 20
    assert [str(w.message) for w in caught] == []


def test_cross_entropy_loss_is_negated_with_sign_minus_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    sets = ["c4_en-validation", "wikitext-validation", "pile-validation", "dolma-validation"]
    steps = np.arange(30) * 1000
    trend = 4.0 - np.linspace(0, 1.5, 30)
    raw = {name: trend + rng.normal(0, 0.05, 30) for name in sets}
    lines = ["_step," + ",".join(f"eval/{name}/CrossEntropyLoss" for name in sets)]
    lines += [f"{step}," + ",".join(f"{raw[name][i]:.6f}" for name in sets) for i, step in enumerate(steps)]
    (tmp_path / "olmo.csv").write_text("\n".join(lines) + "\n")
    ingest(tmp_path / "olmo.csv", tmp_path / "s")
    analysis = analyse(
        load_scores(tmp_path / "s"), id_testset="c4_en-validation", metric="CrossEntropyLoss", inference="t-test"
    )
    assert (analysis.pairs["sign"] == -1).all() and len(analysis.pairs) == 3
    scores = analysis.scores.set_index(["testset", "step"])["value"]
    for name in sets:
        written = np.array([float(f"{v:.6f}") for v in raw[name]])
        np.testing.assert_array_equal(scores.loc[name].to_numpy(), -written)
    row = analysis.pairs.iloc[0]
    a, b, c = (np.array([float(f"{v:.6f}") for v in raw[n]]) for n in (row["testset_a"], row["testset_b"], sets[0]))
    np.testing.assert_allclose(row["r_partial"], numpy_partial_corr(-a, -b, -c), rtol=1e-10)
    assert analysis.summary()["sign_convention"]["negated_in_this_analysis"] == ["CrossEntropyLoss"]


def test_a_byte_order_mark_in_a_study_toml_is_not_a_toml_error(tmp_path: Path) -> None:
    from gengen.errors import ConfigError
    from gengen.study.config import load_config

    text = (Path(__file__).resolve().parents[1] / "python" / "gengen" / "demo" / "study.toml").read_bytes()
    plain, marked = tmp_path / "plain" / "study.toml", tmp_path / "marked" / "study.toml"
    for path, content in ((plain, text), (marked, b"\xef\xbb\xbf" + text)):
        path.parent.mkdir()
        path.write_bytes(content)
    messages = []
    for path in (plain, marked):
        try:
            load_config(path)
            messages.append("loaded")
        except ConfigError as error:  # the demo's data files are not beside the copy
            messages.append(str(error).replace(str(path.parent), "<folder>"))
    assert messages[0] == messages[1] and "invalid TOML" not in messages[1]
