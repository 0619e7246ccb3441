"""Importing lm-evaluation-harness results, trainer_state.json and score tables.

Expected values are read straight from the input text (``json`` or a regular expression on the file), never
from gengen's own output.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gengen.cli import app
from gengen.errors import InputError, StoreConflictError, UnknownFormatError
from gengen.ingest import detect_format, ingest, read_file
from gengen.store.database import Store, load

PYTHIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pythia-lm-eval-v0.3"
PYTHIA_STEPS = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, *range(3000, 143001, 10000)}

pytestmark = pytest.mark.skipif(not PYTHIA.is_dir(), reason="../shared/data/pythia-lm-eval-v0.3 is not there")


@pytest.fixture(scope="module")
def pythia_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with every shared Pythia file ingested (done once for the module)."""
    folder = tmp_path_factory.mktemp("pythia") / "study"
    ingest(PYTHIA, folder)
    return folder


def test_steps_listed_in_the_readme() -> None:
    assert len(PYTHIA_STEPS) == 27


def test_every_pythia_checkpoint_is_ingested_with_its_step(pythia_store: Path) -> None:
    frame = load(pythia_store)
    for size in ("160m", "410m"):
        files = sorted((PYTHIA / f"pythia-{size}").glob("*.json"))
        steps_from_names = {int(re.search(r"_step(\d+)\.json$", f.name).group(1)) for f in files}  # type: ignore[union-attr]
        assert steps_from_names == PYTHIA_STEPS
        rows = frame[frame["model"] == f"pythia-v1.1-{size}"]
        assert set(rows["step"]) == PYTHIA_STEPS
        assert rows["step"].nunique() == 27
        assert set(rows["family"]) == {"pythia-v1.1"} and set(rows["size"]) == {size}
        assert set(rows["run"]) == {"main"} and set(rows["study"]) == {"study"}
        for path in files:
            results = json.loads(path.read_text())["results"]
            expected = sum(1 for metrics in results.values() for key in metrics if not key.endswith("_stderr"))
            step = int(re.search(r"_step(\d+)", path.name).group(1))  # type: ignore[union-attr]
            assert (rows["step"] == step).sum() == expected, path.name


@pytest.mark.parametrize(
    ("relative", "task", "metric"),
    [
        ("pythia-160m/160m_step0.json", "lambada_openai", "acc"),
        ("pythia-160m/160m_step143000.json", "lambada_openai", "ppl"),
        ("pythia-410m/410m_step1000.json", "piqa", "acc_norm"),
        ("pythia-410m/410m_step93000.json", "hendrycksTest-marketing", "acc"),
        ("pythia-160m/160m_step512.json", "winogrande", "acc"),
        ("pythia-410m/410m_step64.json", "crows_pairs_french_physical_appearance", "pct_stereotype"),
    ],
)
def test_spot_values_match_the_json_text(pythia_store: Path, relative: str, task: str, metric: str) -> None:
    text = (PYTHIA / relative).read_text()
    block = re.search(r'"' + re.escape(task) + r'": \{(.*?)\}', text, re.DOTALL)
    assert block is not None
    value = float(re.search(r'"' + metric + r'": ([-0-9.eE+]+)', block.group(1)).group(1))  # type: ignore[union-attr]
    stderr = float(re.search(r'"' + metric + r'_stderr": ([-0-9.eE+]+)', block.group(1)).group(1))  # type: ignore[union-attr]
    step = int(re.search(r"revision=step(\d+)", text).group(1))  # type: ignore[union-attr]
    model = "pythia-v1.1-" + relative.split("/")[0].split("-")[1]
    rows = load(pythia_store, model=model, testset=task, metric=metric)
    row = rows[rows["step"] == step]
    assert len(row) == 1
    assert row["value"].iloc[0] == value
    assert row["stderr"].iloc[0] == stderr
    assert row["num_fewshot"].iloc[0] == 0


def test_stderr_is_never_a_metric(pythia_store: Path) -> None:
    metrics = set(load(pythia_store)["metric"])
    assert not any(m.endswith("_stderr") for m in metrics)
    assert {"acc", "acc_norm", "ppl"} <= metrics


def test_reingest_is_a_no_op_and_records_a_manifest(pythia_store: Path) -> None:
    report = ingest(PYTHIA / "pythia-160m", pythia_store)
    assert report.written == 0 and report.rows > 0 and len(report.files) == 27
    manifest = Store(pythia_store).manifest("pythia-v1.1-160m", "main")
    assert manifest is not None
    assert manifest["format"] == "lm-eval-v0.3" and manifest["config"]["num_fewshot"] == 0
    assert len(manifest["files"]) == 27 and "packages" in manifest and "created_at" in manifest


def test_model_run_and_step_overrides(tmp_path: Path) -> None:
    source = PYTHIA / "pythia-160m" / "160m_step1000.json"
    report = ingest(source, tmp_path / "s", model="mine-70m", run="seed=1", step=5, study="x")
    assert report.models == ["mine-70m"]
    frame = load(tmp_path / "s")
    assert set(frame["step"]) == {5} and set(frame["run"]) == {"seed=1"} and set(frame["seed"]) == {1}
    assert set(frame["study"]) == {"x"} and set(frame["size"]) == {"70m"}
    copy = tmp_path / "evals" / "ckpt-0777" / "anything.json"
    copy.parent.mkdir(parents=True)
    data = json.loads(source.read_text())
    data["config"]["model_args"] = "pretrained=EleutherAI/pythia-v1.1-160m"
    copy.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"step \(or a step pattern\) is needed for .*: no revision=stepN"):
        ingest(copy, tmp_path / "t")
    ingest(copy, tmp_path / "t", step_pattern=r"ckpt-(\d+)")
    assert set(load(tmp_path / "t")["step"]) == {777}


def test_revision_and_file_name_must_agree(tmp_path: Path) -> None:
    wrong = tmp_path / "160m_step7.json"
    shutil.copy(PYTHIA / "pythia-160m" / "160m_step0.json", wrong)
    with pytest.raises(InputError, match=r"160m_step7\.json: config.model_args revision='step0' disagrees with step 7"):
        ingest(wrong, tmp_path / "s")


# ------------------------------------------------------------------------------------------ lm-eval v0.4

V04_RESULTS = {
    "results": {
        "arc_easy": {
            "alias": "arc_easy",
            "acc,none": 0.4377104377104377,
            "acc_stderr,none": 0.010179856486006902,
            "acc_norm,none": 0.3930976430976431,
            "acc_norm_stderr,none": 0.010022540618945312,
        },
        "gsm8k": {
            "alias": "gsm8k",
            "exact_match,strict-match": 0.015163002274450341,
            "exact_match_stderr,strict-match": 0.0033660229497263225,
            "exact_match,flexible-extract": 0.02047005307050796,
            "exact_match_stderr,flexible-extract": 0.0039004133859157153,
        },
        "mmlu": {"acc,none": 0.2299, "acc_stderr,none": 0.0035, "alias": "mmlu"},
        "mmlu_anatomy": {"alias": "  - anatomy", "acc,none": 0.2, "acc_stderr,none": "N/A"},
        "lambada_openai": {
            "alias": "lambada_openai",
            "perplexity,none": 38.0,
            "perplexity_stderr,none": 1.4,
            "acc,none": 0.3281,
            "acc_stderr,none": 0.0065,
        },
    },
    "groups": {"mmlu": {"acc,none": 0.2299, "acc_stderr,none": 0.0035, "alias": "mmlu"}},
    "group_subtasks": {"mmlu": ["mmlu_anatomy"], "arc_easy": [], "gsm8k": [], "lambada_openai": []},
    "configs": {"arc_easy": {"task": "arc_easy", "dataset_path": "allenai/ai2_arc", "num_fewshot": 0}},
    "versions": {"arc_easy": 1.0, "gsm8k": 3.0, "mmlu": 2, "mmlu_anatomy": 1.0, "lambada_openai": 1.0},
    "n-shot": {"arc_easy": 0, "gsm8k": 5, "mmlu_anatomy": 0, "lambada_openai": 0},
    "higher_is_better": {"arc_easy": {"acc": True, "acc_norm": True}, "gsm8k": {"exact_match": True}},
    "n-samples": {
        "arc_easy": {"original": 2376, "effective": 2376},
        "gsm8k": {"original": 1319, "effective": 1319},
        "mmlu_anatomy": {"original": 135, "effective": 135},
        "lambada_openai": {"original": 5153, "effective": 5153},
    },
    "config": {
        "model": "hf",
        "model_args": "pretrained=EleutherAI/pythia-160m,revision=step3000,dtype=float",
        "model_num_parameters": 162322944,
        "model_dtype": "torch.float32",
        "model_revision": "step3000",
        "batch_size": "16",
        "device": "cuda:0",
        "use_cache": None,
        "limit": None,
        "bootstrap_iters": 100000,
        "gen_kwargs": None,
        "random_seed": 0,
        "numpy_seed": 1234,
        "torch_seed": 1234,
        "fewshot_seed": 1234,
    },
    "git_hash": "4cc4f6b",
    "date": 1717430000.0,
    "transformers_version": "4.41.2",
    "model_source": "hf",
    "model_name": "EleutherAI/pythia-160m",
    "model_name_sanitized": "EleutherAI__pythia-160m",
    "start_time": 2154.5,
    "end_time": 2398.1,
    "total_evaluation_time_seconds": "243.6",
}


def write_v04(folder: Path, data: dict[str, object] | None = None) -> Path:
    path = folder / "EleutherAI__pythia-160m" / "results_2024-06-03T16-13-20.123456.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data or V04_RESULTS, indent=2))
    return path


def test_lm_eval_v04(tmp_path: Path) -> None:
    path = write_v04(tmp_path / "out")
    assert detect_format(path) == "lm-eval-v0.4"
    report = ingest(tmp_path / "out", tmp_path / "s")
    assert report.formats == {"lm-eval-v0.4": 1}
    frame = load(tmp_path / "s").set_index(["testset", "metric"])
    results = json.loads(path.read_text())["results"]
    assert set(frame.index) == {
        ("arc_easy", "acc"), ("arc_easy", "acc_norm"), ("gsm8k", "exact_match,strict-match"),
        ("gsm8k", "exact_match,flexible-extract"), ("mmlu", "acc"), ("mmlu_anatomy", "acc"),
        ("lambada_openai", "perplexity"), ("lambada_openai", "acc"),
    }  # fmt: skip
    assert frame.loc[("arc_easy", "acc_norm"), "value"] == results["arc_easy"]["acc_norm,none"]
    assert frame.loc[("arc_easy", "acc_norm"), "stderr"] == results["arc_easy"]["acc_norm_stderr,none"]
    assert (
        frame.loc[("gsm8k", "exact_match,flexible-extract"), "value"]
        == results["gsm8k"]["exact_match,flexible-extract"]
    )
    assert pd.isna(frame.loc[("mmlu_anatomy", "acc"), "stderr"])  # "N/A"
    assert frame.loc[("arc_easy", "acc"), "n_examples"] == 2376
    assert frame.loc[("gsm8k", "exact_match,strict-match"), "num_fewshot"] == 5
    assert set(frame["step"]) == {3000} and set(frame["model"]) == {"pythia-160m"}


def test_lm_eval_v04_with_model_args_as_a_mapping(tmp_path: Path) -> None:
    data = json.loads(json.dumps(V04_RESULTS))
    data["config"]["model_args"] = {"pretrained": "/ckpt/run-a/checkpoint-1500", "dtype": "bfloat16"}
    data["config"]["model_revision"] = "main"
    path = write_v04(tmp_path, data)
    parsed = read_file(path)
    assert parsed is not None
    assert set(parsed.frame["step"]) == {1500} and set(parsed.frame["model"]) == {"run-a"}


def test_lm_eval_v04_step_from_model_revision_or_folder(tmp_path: Path) -> None:
    data = json.loads(json.dumps(V04_RESULTS))
    data["config"]["model_args"] = "pretrained=EleutherAI/pythia-160m"
    path = write_v04(tmp_path / "a", data)
    parsed = read_file(path)
    assert parsed is not None and set(parsed.frame["step"]) == {3000}  # config.model_revision
    del data["config"]["model_revision"]
    folder = tmp_path / "b" / "step64000"
    folder.mkdir(parents=True)
    (folder / "results_2024-06-03T16-13-20.json").write_text(json.dumps(data))
    parsed = read_file(folder / "results_2024-06-03T16-13-20.json")
    assert parsed is not None and set(parsed.frame["step"]) == {64000}


# ------------------------------------------------------------------------------------------ trainer_state


def trainer_state(history: Sequence[Mapping[str, object]]) -> dict[str, object]:
    return {
        "best_metric": 0.81, "best_model_checkpoint": "out/checkpoint-200", "epoch": 2.0, "eval_steps": 100,
        "global_step": 200, "is_world_process_zero": True, "log_history": history, "max_steps": 200,
        "num_train_epochs": 2, "total_flos": 1.2e15, "train_batch_size": 16,
    }  # fmt: skip


def test_trainer_state_one_eval_set(tmp_path: Path) -> None:
    history = [
        {"epoch": 0.5, "grad_norm": 3.1, "learning_rate": 4e-05, "loss": 0.69, "step": 50},
        {"epoch": 1.0, "eval_accuracy": 0.75, "eval_loss": 0.52, "eval_runtime": 3.2,
         "eval_samples_per_second": 300.1, "eval_steps_per_second": 9.4, "step": 100},
        {"epoch": 2.0, "eval_accuracy": 0.81, "eval_loss": 0.44, "eval_runtime": 3.1,
         "eval_samples_per_second": 301.0, "eval_steps_per_second": 9.5, "step": 200},
    ]  # fmt: skip
    path = tmp_path / "bert-base-sst2" / "checkpoint-200" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(trainer_state(history)))
    assert detect_format(path) == "trainer-state"
    ingest(tmp_path / "bert-base-sst2", tmp_path / "s")
    frame = load(tmp_path / "s")
    assert set(frame["model"]) == {"bert-base-sst2"} and set(frame["testset"]) == {"eval"}
    got = {(r.step, r.metric): (r.value, r.epoch) for r in frame.itertuples()}
    assert got == {
        (100, "accuracy"): (0.75, 1.0), (100, "loss"): (0.52, 1.0),
        (200, "accuracy"): (0.81, 2.0), (200, "loss"): (0.44, 2.0),
    }  # fmt: skip


def test_trainer_state_several_eval_sets(tmp_path: Path) -> None:
    history = [
        {"epoch": 1.0, "eval_mnli_matched_loss": 0.6, "eval_mnli_matched_accuracy": 0.7,
         "eval_hans_loss": 1.1, "eval_hans_accuracy": 0.52, "eval_hans_runtime": 9.0, "step": 1000},
    ]  # fmt: skip
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(trainer_state(history)))
    parsed = read_file(path, options=None)
    assert parsed is not None
    got = {(r.testset, r.metric): r.value for r in parsed.frame.itertuples()}
    assert got == {("mnli_matched", "loss"): 0.6, ("mnli_matched", "accuracy"): 0.7, ("hans", "loss"): 1.1,
                   ("hans", "accuracy"): 0.52}  # fmt: skip
    report = ingest(path, tmp_path / "s", pattern=r"eval_(?P<testset>hans)_(?P<metric>accuracy)", model="m")
    assert report.rows == 1


# ------------------------------------------------------------------------------------------ tables


def test_long_csv_with_a_column_mapping(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(
        "checkpoint,task,measure,score,model,seed\n"
        "100,piqa,acc,0.61,opt-125m,1\n"
        "100,sciq,acc,0.70,opt-125m,1\n"
        "200,piqa,acc,0.625,opt-125m,1\n"
    )
    columns = {"step": "checkpoint", "testset": "task", "metric": "measure", "value": "score"}
    report = ingest(path, tmp_path / "s", format="long", columns=columns)
    assert report.rows == 3
    frame = load(tmp_path / "s")
    assert frame[["step", "testset", "value"]].values.tolist() == [[100, "piqa", 0.61], [100, "sciq", 0.70],
                                                                   [200, "piqa", 0.625]]  # fmt: skip
    assert set(frame["seed"]) == {1} and set(frame["size"]) == {"125m"}


def test_long_parquet(tmp_path: Path) -> None:
    path = tmp_path / "scores.parquet"
    pd.DataFrame(
        {"model": ["m"] * 2, "step": [1, 2], "testset": ["a", "a"], "metric": ["f1"] * 2, "value": [0.1, 0.2]}
    ).to_parquet(path)
    assert detect_format(path) == "long"
    ingest(path, tmp_path / "s")
    assert load(tmp_path / "s")["value"].tolist() == [0.1, 0.2]


def test_wide_csv_with_a_pattern(tmp_path: Path) -> None:
    path = tmp_path / "wandb_export.csv"
    path.write_text(
        "Step,_runtime,eval_arc_easy_acc,eval_piqa_acc,eval_piqa_f1\n100,12.5,0.40,0.55,0.50\n200,25.1,0.45,,0.52\n"
    )
    report = ingest(
        path, tmp_path / "s", format="wide", columns={"step": "Step"}, model="opt-350m",
        pattern=r"eval_(?P<testset>.+)_(?P<metric>acc|f1)",
    )  # fmt: skip
    assert report.rows == 5  # the empty cell is a missing score
    assert any("_runtime" in note for note in report.notes)
    frame = load(tmp_path / "s")
    got = {(r.step, r.testset, r.metric): r.value for r in frame.itertuples()}
    assert got == {(100, "arc_easy", "acc"): 0.40, (100, "piqa", "acc"): 0.55, (100, "piqa", "f1"): 0.50,
                   (200, "arc_easy", "acc"): 0.45, (200, "piqa", "f1"): 0.52}  # fmt: skip


def test_wide_csv_default_pattern_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("model,step,arc_easy/acc,sciq/acc\nm,0,0.3,0.4\nm,10,0.35,0.5\n")
    assert detect_format(path) == "wide"
    assert ingest(path, tmp_path / "s").rows == 4


# ------------------------------------------------------------------------------------------ bad input


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "160m_step0.json"
    path.write_text('{\n  "results": {\n    "piqa": {"acc": 0.6,}\n  }\n}\n')
    with pytest.raises(InputError, match=r"160m_step0\.json: line 3, column 25: malformed JSON"):
        ingest(path, tmp_path / "s")


def test_non_numeric_json_value_names_the_key(tmp_path: Path) -> None:
    data = json.loads((PYTHIA / "pythia-160m" / "160m_step0.json").read_text())
    data["results"]["piqa"]["acc"] = "0.6x"
    path = tmp_path / "160m_step0.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"160m_step0\.json: key results\.piqa\.acc: '0\.6x' is not a number"):
        ingest(path, tmp_path / "s")


def test_missing_or_misnamed_column(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("model,step,testset,metric,valeu\nm,0,a,acc,0.5\n")
    with pytest.raises(InputError, match=r"scores\.csv: long table has no column 'value'; did you mean 'valeu'\?"):
        ingest(path, tmp_path / "s", format="long")
    with pytest.raises(InputError, match=r"columns value=score: .*scores\.csv has no column 'score'"):
        ingest(path, tmp_path / "s", columns={"value": "score"})
    with pytest.raises(InputError, match=r"scores\.csv: long table has no column 'value'; did you mean 'valeu'\?"):
        ingest(path, tmp_path / "s")  # detected as long from its other columns
    odd = tmp_path / "odd.csv"
    odd.write_text("name,score\nm,0.5\n")
    with pytest.raises(UnknownFormatError, match=r"odd\.csv: neither a long table"):
        ingest(odd, tmp_path / "s")


def test_non_numeric_csv_value_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("model,step,testset,metric,value\nm,0,a,acc,0.5\nm,1,a,acc,0.6\nm,2,a,acc,n/a!\n")
    with pytest.raises(InputError, match=r"scores\.csv: line 4: column 'value': 'n/a!' is not a number"):
        ingest(path, tmp_path / "s")
    wide = tmp_path / "wide.csv"
    wide.write_text("model,step,a/acc\nm,0,0.5\nm,1,high\n")
    with pytest.raises(InputError, match=r"wide\.csv: line 3: column 'a/acc': 'high' is not a number"):
        ingest(wide, tmp_path / "s")


def test_unreadable_tables(tmp_path: Path) -> None:
    broken = tmp_path / "scores.parquet"
    broken.write_bytes(b"PAR1 this is not really parquet")
    with pytest.raises(InputError, match=r"scores\.parquet: not a readable Parquet file"):
        ingest(broken, tmp_path / "s")
    ragged = tmp_path / "scores.csv"
    ragged.write_text("model,step,testset,metric,value\nm,0,a,acc,0.5\nm,1,a,acc,0.6,7,8\n")
    with pytest.raises(InputError, match=r"scores\.csv: malformed CSV: .*line 3"):
        ingest(ragged, tmp_path / "s")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match=r"empty\.csv: empty file"):
        ingest(empty, tmp_path / "s")


def test_duplicate_checkpoints_with_conflicting_values_name_both_files(tmp_path: Path) -> None:
    folder = tmp_path / "evals"
    folder.mkdir()
    shutil.copy(PYTHIA / "pythia-160m" / "160m_step1000.json", folder / "a_step1000.json")
    data = json.loads((PYTHIA / "pythia-160m" / "160m_step1000.json").read_text())
    shutil.copy(PYTHIA / "pythia-160m" / "160m_step0.json", folder / "b_step0.json")
    data["results"]["sciq"]["acc"] = 0.123
    (folder / "c_step1000.json").write_text(json.dumps(data))
    with pytest.raises(StoreConflictError, match=r"c_step1000\.json: key results\.sciq\.acc.*a_step1000\.json"):
        ingest(folder, tmp_path / "s")
    assert Store(tmp_path / "s").count() == 0  # all or nothing: the good files were not written either


def test_conflict_with_the_store_leaves_it_unchanged(tmp_path: Path) -> None:
    ingest(PYTHIA / "pythia-160m" / "160m_step2.json", tmp_path / "s")
    before = load(tmp_path / "s")
    data = json.loads((PYTHIA / "pythia-160m" / "160m_step2.json").read_text())
    data["results"]["winogrande"]["acc"] = 0.99
    changed = tmp_path / "160m_step2.json"
    changed.write_text(json.dumps(data))
    with pytest.raises(StoreConflictError, match=r"step 2 testset 'winogrande' metric 'acc': new value 0\.99"):
        ingest([PYTHIA / "pythia-160m" / "160m_step4.json", changed], tmp_path / "s")
    pd.testing.assert_frame_equal(load(tmp_path / "s"), before)
    assert ingest(changed, tmp_path / "s", on_conflict="replace").written == 1


def test_unknown_formats(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 768}))
    with pytest.raises(
        UnknownFormatError,
        match=r"config\.json: JSON with neither a 'log_history' list \(a trainer_state\.json\) nor a 'config_general' "
        r"object \(a lighteval results file\) nor a 'results' object",
    ):
        ingest(tmp_path / "config.json", tmp_path / "s")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UnknownFormatError, match=r"notes\.txt: unknown file type '\.txt'"):
        ingest(tmp_path / "notes.txt", tmp_path / "s")
    with pytest.raises(UnknownFormatError, match=r"format must be one of lm-eval, .*, got 'lm-eval-v9'"):
        ingest(tmp_path / "config.json", tmp_path / "s", format="lm-eval-v9")
    with pytest.raises(UnknownFormatError, match=r"not a trainer_state\.json"):
        ingest(PYTHIA / "pythia-160m" / "160m_step0.json", tmp_path / "s", format="trainer-state")
    with pytest.raises(InputError, match="no ingestible files"):
        ingest(tmp_path, tmp_path / "s")


def test_directory_skips_unrelated_json(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 768}))
    shutil.copy(PYTHIA / "pythia-410m" / "410m_step8.json", folder)
    report = ingest(folder, tmp_path / "s")
    assert report.skipped == [folder / "config.json"] and len(report.files) == 1


# ------------------------------------------------------------------------------------------ CLI


def test_cli_ingest(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ingest", str(PYTHIA / "pythia-410m"), "--store", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    assert "27 files" in result.stdout and "pythia-v1.1-410m" in result.stdout
    assert load(tmp_path / "s")["step"].nunique() == 27


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("{oops", [], r"bad_step0\.json: line 1, column 2: malformed JSON"),
        ('{"a": 1}', [], r"bad_step0\.json: JSON with neither"),
        ('{"a": 1}', ["--format", "xml"], "--format must be one of .*, got 'xml'"),
        ('{"a": 1}', ["--column", "testset"], "--column: expected NAME=COLUMN"),
        ('{"a": 1}', ["--on-conflict", "maybe"], "--on-conflict: expected error, replace or keep"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, content: str, extra: list[str], message: str) -> None:
    path = tmp_path / "bad_step0.json"
    path.write_text(content)
    result = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "s"), "-q", *extra])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert re.search(message, lines[0])
    assert "Traceback" not in result.output


def test_cli_missing_path_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "nope"), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope'}: no such file or directory"
