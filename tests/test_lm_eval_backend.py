"""``gengen score --backend lm-eval``: a tiny-model checkpoint series scored by lm-evaluation-harness, offline.

The tasks are lm-eval YAML files on local JSON files (``dataset_path: json``); the models are tiny OLMo2 models
built from configs. The references are lm-eval's own command line (its output files, read by gengen's lm-eval
reader) and gengen's own scorer (for the reference NLI protocol's tasks).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval")

from gengen.store.database import KEY, Store  # noqa: E402

pytestmark = [pytest.mark.train, pytest.mark.lm_eval]

PROMPT = "{premise} Question: {hypothesis} Yes or No?"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
STEPS = (0, 10, 20, 30)
LIMIT = 12


@pytest.fixture(scope="module", autouse=True)
def offline() -> Any:
    """No hub: every data set and model is local (set before lm-eval or datasets load anything)."""
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    torch.set_num_threads(1)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _tiny_model(tokenizer: Any, seed: int) -> Any:
    """A tiny OLMo2 whose Yes/No answer varies from prompt to prompt.

    A randomly initialised model gives every prompt nearly the same last hidden state, so it would answer
    alike everywhere, and two scorers would agree trivially. The Yes row of the (untied) output layer is set
    to the No row plus a random direction orthogonal to the mean last hidden state of the demo's prompts:
    the answer then follows each prompt's deviation from that mean, about half Yes and half No.
    """
    from gengen.demo.tasks import generate_id, generate_ood
    from gengen.demo.tiny import build_tiny_model
    from gengen.scoring.models import encode_prompts, pad_batch

    model = build_tiny_model(
        "olmo2",
        vocab_size=len(tokenizer),
        hidden=16,
        layers=1,
        heads=2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        seed=seed,
    )
    frame = pd.concat([generate_id(40, 0), generate_ood("negation", 40, 0), generate_ood("length", 40, 0)])
    ids, mask, lengths = pad_batch(encode_prompts(tokenizer, frame, PROMPT, 256), tokenizer.pad_token_id, "cpu")
    yes, no = (tokenizer(a, add_special_tokens=False)["input_ids"][0] for a in (" Yes", " No"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        last = hidden[torch.arange(len(ids)), lengths - 1]
        mean = last.mean(dim=0)
        direction = torch.randn(mean.shape, generator=generator)
        direction -= (direction @ mean) / (mean @ mean) * mean
        weight = model.lm_head.weight
        weight[yes] = weight[no] + direction * (10 / float((last @ direction).std()))
    return model


def _task_yaml(name: str, data: Path, metrics: tuple[str, ...], version: float) -> str:
    metric_list = "\n".join(f"  - metric: {m}" for m in metrics)
    return f"""task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{premise}}}} Question: {{{{hypothesis}}}} Yes or No?"
doc_to_choice: [" Yes", " No"]
doc_to_target: "{{{{1 - label}}}}"
target_delimiter: ""
metric_list:
{metric_list}
metadata:
  version: {version}
"""


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tokenizer, a series of four tiny checkpoints, and two lm-eval tasks on local JSON files."""
    from gengen.demo.tasks import generate_id, generate_ood, tokenizer_corpus
    from gengen.demo.tiny import train_tokenizer

    root = tmp_path_factory.mktemp("lm_eval")
    tokenizer = train_tokenizer(tokenizer_corpus(PROMPT, (" Yes", " No")), root / "tokenizer")
    series = root / "series"
    for index, step in enumerate(STEPS):
        folder = series / f"checkpoint-{step}"
        _tiny_model(tokenizer, seed=index).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    tasks = root / "tasks"
    tasks.mkdir()
    for name, frame, metrics, version in (
        ("tiny_id", generate_id(30, 1), ("acc", "acc_norm"), 2.0),
        ("tiny_negation", generate_ood("negation", 30, 2), ("acc",), 1.5),
    ):
        data = root / f"{name}.jsonl"
        frame.to_json(data, orient="records", lines=True)
        (tasks / f"{name}.yaml").write_text(_task_yaml(name, data, metrics, version))
    return {"root": root, "tokenizer": tokenizer, "series": series, "tasks": tasks}


def _cli(*args: str) -> tuple[int, str, str]:
    """``gengen ARGS`` in this process: exit code, stdout, stderr."""
    from typer.testing import CliRunner

    from gengen.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _score_args(assets: dict[str, Any], store: Path) -> list[str]:
    return [
        "score",
        "--backend",
        "lm-eval",
        "--tasks",
        "tiny_id,tiny_negation",
        "--checkpoints",
        str(assets["series"]),
        "--include-path",
        str(assets["tasks"]),
        "--store",
        str(store),
        "--name",
        "tiny",
        "--device",
        "cpu",
        "--limit",
        str(LIMIT),
        "--batch-size",
        "4",
    ]


@pytest.fixture(scope="module")
def scored(assets: dict[str, Any]) -> pd.DataFrame:
    """The series scored on both tasks in one command (the reference of the resume test too)."""
    store = assets["root"] / "store"
    code, out, err = _cli(*_score_args(assets, store))
    assert code == 0, out + err
    assert "4 checkpoints scored, 0 already in the store, 12 scores written" in out
    return Store(store).load()


def test_series_on_two_tasks_in_one_command(scored: pd.DataFrame, assets: dict[str, Any]) -> None:
    # Every checkpoint x task x metric, once, under the checkpoint's step, with stderr and n.
    assert sorted(scored["step"].unique()) == list(STEPS)
    expected = {("tiny_id", "acc"), ("tiny_id", "acc_norm"), ("tiny_negation", "acc")}
    for step in STEPS:
        rows = scored[scored["step"] == step]
        assert set(zip(rows["testset"], rows["metric"], strict=True)) == expected
    assert not scored.duplicated(KEY).any()
    assert (scored["n_examples"] == LIMIT).all()
    # acc over LIMIT examples: a multiple of 1/LIMIT, with the standard error of a mean of 0/1 values.
    np.testing.assert_allclose(scored["value"] * LIMIT, np.round(scored["value"] * LIMIT), atol=1e-9)
    p = scored["value"].to_numpy()
    np.testing.assert_allclose(scored["stderr"], np.sqrt(p * (1 - p) / (LIMIT - 1)), rtol=1e-12)
    # The checkpoints differ: not one score series is constant along the steps.
    assert (scored.groupby(["testset", "metric"])["value"].nunique() > 1).any()
    manifest = Store(assets["root"] / "store").manifest("tiny", "main")
    part = manifest["lm_eval"]
    from importlib.metadata import version

    assert part["lm_eval_version"] == version("lm_eval")
    assert part["task_versions"] == {"tiny_id": 2.0, "tiny_negation": 1.5}
    assert part["settings"]["limit"] == LIMIT and part["settings"]["num_fewshot"] is None
    assert part["settings"]["batch_size"] == 4


def test_second_call_scores_nothing(scored: pd.DataFrame, assets: dict[str, Any]) -> None:
    code, out, err = _cli(*_score_args(assets, assets["root"] / "store"))
    assert code == 0, out + err
    assert "all 4 checkpoints already scored" in out
    pd.testing.assert_frame_equal(Store(assets["root"] / "store").load(), scored)


def test_other_settings_are_refused_on_resume(scored: pd.DataFrame, assets: dict[str, Any]) -> None:
    args = _score_args(assets, assets["root"] / "store")
    args[args.index("--limit") + 1] = "5"
    code, _, err = _cli(*args)
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: run tiny/main in {assets['root'] / 'store' / 'gengen.sqlite'} was scored with limit = 12, "
        "not 5; use the same setting to resume, or another --run for new settings"
    ]


def _lm_eval_cli(assets: dict[str, Any], step: int, out: Path) -> Path:
    """lm-eval's own command line on one checkpoint; returns its results file."""
    checkpoint = assets["series"] / f"checkpoint-{step}"
    command = [
        sys.executable,
        "-m",
        "lm_eval",
        "run",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={checkpoint},dtype=float32",
        "--tasks",
        "tiny_id,tiny_negation",
        "--include_path",
        str(assets["tasks"]),
        "--limit",
        str(LIMIT),
        "--batch_size",
        "4",
        "--device",
        "cpu",
        "--output_path",
        str(out),
    ]
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(out.rglob("results_*.json"))
    assert len(files) == 1, files
    return files[0]


@pytest.mark.slow
def test_store_equals_lm_eval_output_files(scored: pd.DataFrame, assets: dict[str, Any], tmp_path: Path) -> None:
    """lm-eval's own files for the first and last checkpoint, ingested, hold the same rows as the store."""
    from gengen.ingest import ingest

    reference = tmp_path / "ingested"
    for step in (STEPS[0], STEPS[-1]):
        results = _lm_eval_cli(assets, step, tmp_path / f"lm-eval-{step}")
        # The reader finds the step in model_args' pretrained=.../checkpoint-N, the model in the folder above.
        ingest(results, reference)
    theirs = Store(reference).load()
    assert set(theirs["model"]) == {assets["series"].name}
    theirs["model"] = "tiny"
    ours = scored[scored["step"].isin([STEPS[0], STEPS[-1]])]
    columns = ["model", "run", "step", "testset", "metric", "value", "stderr", "n_examples", "num_fewshot"]
    pd.testing.assert_frame_equal(
        ours[columns].reset_index(drop=True), theirs[columns].reset_index(drop=True), check_dtype=False
    )


STUDY = """
[study]
name = "lm"
output = "{output}"
id_testset = "tiny_id"

[[models]]
name = "tiny"
path = "{checkpoint}"
family = "olmo2"
size = "tiny"

[task]
train = {{ path = "{train}" }}

[training]
precision = "fp32"
device = "cpu"
{training}
[evaluation]
backend = "lm-eval"
batch_size = 4
{evaluation}
[evaluation.lm_eval]
tasks = ["tiny_id", "tiny_negation"]
limit = {limit}
include_paths = ["{tasks}"]
"""
"""A study scored by lm-eval on the two local tasks; ``training`` and ``evaluation`` add lines to their tables."""


def _rows(database: Path) -> int:
    if not database.exists():
        return 0
    try:
        with sqlite3.connect(database, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM scores").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_killed_series_resumes_without_loss_or_duplicates(
    scored: pd.DataFrame, assets: dict[str, Any], tmp_path: Path
) -> None:
    """The study-file route, killed with SIGKILL mid-series, then run again to the end."""
    study = tmp_path / "study.toml"
    study.write_text(
        STUDY.format(
            training="",
            evaluation="",
            output=tmp_path / "out",
            checkpoint=assets["series"] / "checkpoint-0",
            train=assets["root"] / "tiny_id.jsonl",
            limit=LIMIT,
            tasks=assets["tasks"],
        )
    )
    command = [
        sys.executable,
        "-c",
        "from gengen.cli import main; main()",
        "score",
        str(study),
        "--name",
        "tiny",
        "--checkpoints",
        str(assets["series"]),
    ]
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1"}
    database = tmp_path / "out" / "gengen.sqlite"
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        # Kill once the first checkpoint's first task is in: mid-checkpoint and mid-series.
        while _rows(database) < 2:
            assert child.poll() is None, child.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the series never started scoring"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.communicate(timeout=60)
    partial = Store(tmp_path / "out").load()
    assert 0 < len(partial) < len(scored), "the process was not killed mid-series"

    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    final = Store(tmp_path / "out").load()
    assert not final.duplicated(KEY).any()
    columns = ["model", "run", "step", "testset", "metric", "value", "stderr", "n_examples"]
    pd.testing.assert_frame_equal(
        final[columns].reset_index(drop=True), scored[columns].reset_index(drop=True), check_dtype=False
    )
    # What the killed call had committed was kept, not scored again.
    merged = partial.merge(final, on=KEY, suffixes=("_partial", "_final"))
    assert len(merged) == len(partial)
    assert (merged["value_partial"] == merged["value_final"]).all()


def test_lora_adapters_on_one_base(assets: dict[str, Any], tmp_path: Path) -> None:
    """A series of LoRA adapters loads its base once; each adapter's scores equal its merged model's."""
    peft = pytest.importorskip("peft")

    from gengen.scoring.lm_eval import LmEvalSettings, score_with_lm_eval
    from gengen.scoring.score import find_checkpoints

    base_folder = assets["series"] / "checkpoint-0"
    series = tmp_path / "adapters"
    merged = tmp_path / "merged"
    for index, step in enumerate((5, 15)):
        torch.manual_seed(100 + index)
        base = _load(base_folder)
        config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = peft.get_peft_model(base, config)
        model.save_pretrained(series / f"checkpoint-{step}")
        assets["tokenizer"].save_pretrained(series / f"checkpoint-{step}")
        model.merge_and_unload().save_pretrained(merged / f"checkpoint-{step}")
        assets["tokenizer"].save_pretrained(merged / f"checkpoint-{step}")
    settings = LmEvalSettings(tasks=("tiny_id",), limit=LIMIT, batch_size=4, include_paths=(str(assets["tasks"]),))
    lines: list[str] = []
    adapters = score_with_lm_eval(
        find_checkpoints([series]),
        settings,
        store=Store(tmp_path / "a"),
        model_name="lora",
        device="cpu",
        precision="fp32",
        log=lines.append,
    )
    whole = score_with_lm_eval(
        find_checkpoints([merged]),
        settings,
        store=Store(tmp_path / "m"),
        model_name="lora",
        device="cpu",
        precision="fp32",
        log=lambda _: None,
    )
    assert "1 model loads" in lines[-1]
    np.testing.assert_allclose(adapters["value"], whole["value"], rtol=0, atol=1e-12)
    assert list(adapters["step"]) == list(whole["step"]) == [5, 5, 15, 15]


def _load(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder)


# ---------------------------------------------------------------------------------- the NLI protocol tasks

# Each registered test set in its hub schema: (premise column, hypothesis column, label column,
# {gengen label (1 = Yes, 0 = No): hub label}, hub labels the registry drops).
HUB_SCHEMAS: dict[str, tuple[str, str, dict[int, Any], tuple[Any, ...]]] = {
    "mnli": ("premise", "hypothesis", {1: 0, 0: 2}, (1,)),
    "snli": ("premise", "hypothesis", {1: 0, 0: 2}, (1, -1)),
    "hans": ("premise", "hypothesis", {1: 0, 0: 1}, ()),
    "rte": ("sentence1", "sentence2", {1: 0, 0: 1}, ()),
    "scitail": ("premise", "hypothesis", {1: "entails", 0: "neutral"}, ()),
    "anli_r1": ("premise", "hypothesis", {1: 0, 0: 2}, (1,)),
    "wnli": ("sentence1", "sentence2", {1: 1, 0: 0}, ()),
    "paws": ("sentence1", "sentence2", {1: 1, 0: 0}, ()),
}


def _hub_file(key: str, frame: pd.DataFrame, folder: Path) -> Path:
    premise, hypothesis, labels, dropped = HUB_SCHEMAS[key]
    rows = [
        {premise: p, hypothesis: h, "label": labels[int(label)]}
        for p, h, label in zip(frame["premise"], frame["hypothesis"], frame["label"], strict=True)
    ]
    rows += [{premise: "the cat saw the dog", hypothesis: "someone saw the dog", "label": d} for d in dropped]
    path = folder / f"{key}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_nli_tasks_agree_with_gengens_scorer(assets: dict[str, Any], tmp_path: Path) -> None:
    """The eight shipped ``gengen_*`` tasks (read from local files in each hub schema) give the accuracy of
    gengen's own scorer on the same examples."""
    from gengen.data import load_examples
    from gengen.demo.tasks import generate_ood
    from gengen.scoring.lm_eval import TASKS_DIR, LmEvalSettings, score_with_lm_eval
    from gengen.scoring.lm_eval.nli import NLI_TASKS
    from gengen.scoring.models import answer_token_ids, encode_prompts, load_model, load_tokenizer
    from gengen.scoring.score import find_checkpoints, score_encoded
    from gengen.study.tables import DataSpec

    checkpoint = assets["series"] / "checkpoint-10"
    tokenizer = load_tokenizer(str(checkpoint))
    model = load_model(str(checkpoint))
    answers = answer_token_ids(tokenizer, (" Yes", " No"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    ours: dict[str, tuple[float, int]] = {}
    shifts = ("negation", "hans_overlap", "length", "spelling_noise")
    for index, (task, key) in enumerate(NLI_TASKS.items()):
        frame = generate_ood(shifts[index % len(shifts)], 24, seed=10 + index)
        data = _hub_file(key, frame, tmp_path)
        examples = load_examples(DataSpec(name=key, source=key, path=str(data)))
        assert len(examples) == len(frame)  # the dropped labels were dropped, nothing else
        result = score_encoded(
            model, encode_prompts(tokenizer, examples, PROMPT, 256), examples["label"].to_numpy(), answers,
            pad_id=tokenizer.pad_token_id,
        )  # fmt: skip
        ours[f"local_{key}"] = (result.acc, result.n_examples)
        (tasks / f"local_{key}.yaml").write_text(
            f"include: {TASKS_DIR / 'gengen_nli' / f'{task}.yaml'}\ntask: local_{key}\ndataset_path: json\n"
            f"dataset_name: null\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
            "fewshot_split: test\n"
        )
    settings = LmEvalSettings(tasks=tuple(ours), batch_size=8, include_paths=(str(tasks),))
    theirs = score_with_lm_eval(
        find_checkpoints([checkpoint]), settings, store=Store(tmp_path / "s"), model_name="m", device="cpu",
        precision="fp32", log=lambda _: None,
    )  # fmt: skip
    got = {row.testset: (row.value, row.n_examples) for row in theirs.itertuples()}
    assert got == ours
    # The model's answers vary with the prompt: not every accuracy is that of a constant answer.
    assert len({acc for acc, _ in ours.values()}) > 2


TRAINED_TRAINING = """max_steps = 4
batch_size = 4
learning_rate = 0.01
keep_checkpoints = "{keep}"
"""


def _trained_study(assets: dict[str, Any], folder: Path, keep: str = "all") -> Path:
    study = folder / "study.toml"
    study.write_text(
        STUDY.format(
            training=TRAINED_TRAINING.format(keep=keep),
            evaluation="every = 2\n",
            output=folder / "out",
            checkpoint=assets["series"] / "checkpoint-0",
            train=assets["root"] / "tiny_id.jsonl",
            limit=LIMIT,
            tasks=assets["tasks"],
        )
    )
    return study


@pytest.mark.slow
def test_train_scores_the_trained_series_with_lm_eval(assets: dict[str, Any], tmp_path: Path) -> None:
    """``gengen train`` on a study scored by lm-eval: the model before training and every kept checkpoint go
    through lm-eval into the store, as ``gengen score --backend lm-eval`` scores the same folders."""
    study = _trained_study(assets, tmp_path)
    code, out, err = _cli("train", str(study))
    assert code == 0, out + err
    stored = Store(tmp_path / "out").load()
    assert sorted(stored["step"].unique()) == [0, 2, 4]
    expected = {("tiny_id", "acc"), ("tiny_id", "acc_norm"), ("tiny_negation", "acc")}
    for step in (0, 2, 4):
        rows = stored[stored["step"] == step]
        assert set(zip(rows["testset"], rows["metric"], strict=True)) == expected
    assert set(stored["run"]) == {"seed=0"} and set(stored["model"]) == {"tiny"}
    # Training moved the weights: the trained checkpoints do not all score as the model before training.
    assert (stored.groupby(["testset", "metric"])["value"].nunique() > 1).any()

    # The reference: the same folders scored by `gengen score --backend lm-eval` (itself checked against
    # lm-eval's own command line above).
    run_dir = tmp_path / "out" / "runs" / "tiny" / "seed-0"
    folders = [assets["series"] / "checkpoint-0", run_dir / "checkpoint-2", run_dir / "checkpoint-4"]
    args = _score_args(assets, tmp_path / "reference")
    at = args.index("--checkpoints")
    args[at : at + 2] = [item for folder in folders for item in ("--checkpoints", str(folder))]
    code, out, err = _cli(*args)
    assert code == 0, out + err
    reference = Store(tmp_path / "reference").load()
    columns = ["step", "testset", "metric", "value", "stderr", "n_examples"]
    pd.testing.assert_frame_equal(
        stored[columns].sort_values(columns[:3], ignore_index=True),
        reference[columns].sort_values(columns[:3], ignore_index=True),
        check_dtype=False,
    )

    # Again: nothing to train, nothing to score, the store unchanged.
    code, out, err = _cli("train", str(study))
    assert code == 0, out + err
    assert "all 3 checkpoints already scored" in out
    pd.testing.assert_frame_equal(Store(tmp_path / "out").load(), stored)


def test_train_refuses_an_lm_eval_study_that_keeps_only_the_last_checkpoint(
    assets: dict[str, Any], tmp_path: Path
) -> None:
    study = _trained_study(assets, tmp_path, keep="last")
    code, _, err = _cli("train", str(study))
    assert code == 2
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("error: training.keep_checkpoints: evaluation.backend 'lm-eval' scores every checkpoint of a run")
    )
    assert not (tmp_path / "out" / "runs").exists()  # refused before any training


@pytest.mark.slow
def test_run_scores_the_trained_series_with_lm_eval_before_the_analysis(assets: dict[str, Any], tmp_path: Path) -> None:
    study = _trained_study(assets, tmp_path)
    code, out, err = _cli("run", str(study), "--no-analysis")
    assert code == 0, out + err
    assert "lm-eval: 9 scores written" in out
    stored = Store(tmp_path / "out").load()
    assert sorted(stored["step"].unique()) == [0, 2, 4]
    assert len(stored) == 9 and not stored.duplicated(KEY).any()
