"""gengen.integrations: the callback inside the real transformers Trainer (and TRL's SFTTrainer), full and LoRA,
with gradient accumulation, two processes on gloo, a hard kill and resume; and evaluate() in a plain loop.

The reference of every score is ``gengen score`` (:func:`gengen.scoring.score.score_checkpoints`) on the checkpoint the
Trainer saved at the same step (the model before training for step 0): the callback scores the live model, so
the two must agree to 1e-6 (same weights, same prompts, fp32 on the CPU; sums over shards in another order).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gengen.errors import ConfigError
from gengen.scoring.score import Checkpoint, find_checkpoints, score_checkpoints
from gengen.store.database import Store
from gengen.study.config import load_config

pytestmark = pytest.mark.train

KEY = ["model", "run", "step", "testset", "metric"]
SCRIPT = Path(__file__).with_name("integration_run.py")
ATOL = 1e-6  # the callback's scores against gengen score of the saved checkpoint


def _study(assets: dict[str, Any], study_toml: Any, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(study_toml(assets, folder / "out", families=("opt",)))
    return path


def _loaded(store: Path) -> pd.DataFrame:
    return Store(store).load().sort_values(KEY).reset_index(drop=True)


def _reference(study: Path, model: Path, checkpoints: Path, store: Path) -> pd.DataFrame:
    """``gengen score`` of step 0 (the model before training) and every checkpoint the Trainer saved."""
    config = load_config(study)
    series = [Checkpoint(str(model), 0), *find_checkpoints([checkpoints])]
    score_checkpoints(config, series, model_name="tiny", run="seed=1", store=Store(store), log=lambda _: None)
    return _loaded(store)


def _assert_same_scores(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert len(got) == len(want) and not got.duplicated(KEY).any()
    assert got[KEY].equals(want[KEY])
    np.testing.assert_allclose(got["value"], want["value"], rtol=0, atol=ATOL)
    assert got["n_examples"].tolist() == want["n_examples"].tolist()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "CUDA_VISIBLE_DEVICES": ""}


def _script(*args: str, launcher: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *launcher, str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=600)


@pytest.fixture(scope="module")
def uninterrupted(assets: dict[str, Any], study_toml: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One full fine-tuning through transformers.Trainer with the callback (6 updates of 2 micro-batches)."""
    from tests.train.integration_run import train

    folder = tmp_path_factory.mktemp("uninterrupted")
    study = _study(assets, study_toml, folder)
    callback = train(str(study), str(assets["models"]["opt"]), folder / "trainer")
    return {"folder": folder, "study": study, "callback": callback, "scores": _loaded(folder / "out")}


def test_trainer_callback_scores_equal_gengen_score(uninterrupted: dict[str, Any], assets: dict[str, Any]) -> None:
    folder = uninterrupted["folder"]
    got = uninterrupted["scores"]
    assert sorted(set(got["step"])) == [0, 3, 6]  # step 0 before the first update, then every 3
    assert set(got["testset"]) == {"id", "negation", "unseen_vocab"}
    want = _reference(uninterrupted["study"], assets["models"]["opt"], folder / "trainer", folder / "reference")
    _assert_same_scores(got, want)
    manifest = Store(folder / "out").manifest("tiny", "seed=1")
    assert manifest is not None and manifest["status"] == "complete"
    assert manifest["training"]["gradient_accumulation_steps"] == 2 and manifest["seed"] == 1
    assert manifest["data_seed"] == 1 and manifest["method"] == "full" and manifest["evaluation_steps"] == [0, 3, 6]
    hook = uninterrupted["callback"].evaluator.hook
    assert [step for step, _ in hook.evaluations] == [0, 3, 6]
    # The overhead of an evaluation on this machine (3 test sets x 40 examples, tiny OPT), for the record.
    print(f"callback overhead: {hook.overhead()}; training took {uninterrupted['callback'].seconds:.2f} s in all")


def test_lora_adapter_scores_equal_gengen_score(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from tests.train.integration_run import train

    study = _study(assets, study_toml, tmp_path)
    train(str(study), str(assets["models"]["opt"]), tmp_path / "trainer", lora=True)
    assert (tmp_path / "trainer" / "checkpoint-3" / "adapter_config.json").is_file()  # adapters, not full weights
    got = _loaded(tmp_path / "out")
    _assert_same_scores(got, _reference(study, assets["models"]["opt"], tmp_path / "trainer", tmp_path / "ref"))
    manifest = Store(tmp_path / "out").manifest("tiny", "seed=1")
    assert manifest is not None and manifest["method"] == "lora" and manifest["adapter"]["default"]["r"] == 4


def test_sft_trainer(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from tests.train.integration_run import train

    study = _study(assets, study_toml, tmp_path)
    train(str(study), str(assets["models"]["opt"]), tmp_path / "trainer", sft=True)
    got = _loaded(tmp_path / "out")
    assert sorted(set(got["step"])) == [0, 3, 6]
    _assert_same_scores(got, _reference(study, assets["models"]["opt"], tmp_path / "trainer", tmp_path / "ref"))


def test_killed_and_resumed_run_gives_the_uninterrupted_store(
    uninterrupted: dict[str, Any], assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    study = _study(assets, study_toml, tmp_path)
    common = ("--study", str(study), "--model", str(assets["models"]["opt"]), "--out", str(tmp_path / "trainer"))
    killed = _script(*common, "--kill-at", "5")
    assert killed.returncode == 9, killed.stdout + killed.stderr
    before = _loaded(tmp_path / "out")
    assert sorted(set(before["step"])) == [0, 3]  # step 5 was not due; checkpoint-3 is the last saved
    assert [c.step for c in find_checkpoints([tmp_path / "trainer"])] == [3]
    resumed = _script(*common, "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _loaded(tmp_path / "out")
    _assert_same_scores(after, uninterrupted["scores"])
    # Resuming again from the last checkpoint scores nothing twice (step 6 is stored).
    again = _script(*common, "--resume")
    assert again.returncode == 0 and _loaded(tmp_path / "out").equals(after)


@pytest.mark.distributed
def test_two_processes_on_gloo_score_shards_and_one_writes(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    study = _study(assets, study_toml, tmp_path)
    launcher = ("-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29631")
    args = ("--study", str(study), "--model", str(assets["models"]["opt"]), "--out", str(tmp_path / "trainer"))
    result = _script(*args, "--batch", "2", launcher=launcher)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("gengen: 3 evaluations") == 1  # one process reports
    got = _loaded(tmp_path / "out")
    assert sorted(set(got["step"])) == [0, 3, 6]
    # Each process scored every other example; the summed shards are the whole test sets' scores.
    _assert_same_scores(got, _reference(study, assets["models"]["opt"], tmp_path / "trainer", tmp_path / "ref"))
    manifest = Store(tmp_path / "out").manifest("tiny", "seed=1")
    assert manifest is not None and manifest["training"]["world_size"] == 2


@pytest.mark.distributed
def test_evaluate_in_a_plain_ddp_loop_on_two_processes(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    study = _study(assets, study_toml, tmp_path)
    launcher = ("-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29632")
    args = ("--study", str(study), "--model", str(assets["models"]["opt"]), "--out", str(tmp_path / "loop"), "--loop")
    result = _script(*args, launcher=launcher)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Process 0 wrote 3 evaluations x 3 test sets x 2 metrics; the other wrote nothing.
    # torchrun merges the processes' output, so one line may hold both reports: find them, not lines
    assert sorted(re.findall(r"done \d+ rows written", result.stdout)) == [
        "done 0 rows written",
        "done 18 rows written",
    ]
    got = _loaded(tmp_path / "out")
    config = load_config(study)
    reference = Store(tmp_path / "ref")
    series = [Checkpoint(str(assets["models"]["opt"]), 0), *find_checkpoints([tmp_path / "loop"])]
    score_checkpoints(config, series, model_name="loop", run="seed=1", store=reference, log=lambda _: None)
    _assert_same_scores(got, _loaded(tmp_path / "ref"))


def test_evaluate_in_a_plain_loop(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gengen.integrations import Schedule, evaluate

    study = _study(assets, study_toml, tmp_path)
    model = AutoModelForCausalLM.from_pretrained(assets["models"]["opt"])
    tokenizer = AutoTokenizer.from_pretrained(assets["models"]["opt"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    batch = tokenizer(["a b c Question: d Yes or No? Yes"] * 4, return_tensors="pt")
    options = {"study": str(study), "schedule": Schedule(every=2), "seed": 7, "model_name": "loop"}
    written = []
    for step in range(5):
        written.append(evaluate(model, tokenizer, step, total_steps=4, **options))
        if step == 4:
            break
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step + 1 == 4:
            model.save_pretrained(tmp_path / "loop" / "checkpoint-4")
            tokenizer.save_pretrained(tmp_path / "loop" / "checkpoint-4")
    assert written == [6, 0, 6, 0, 6]  # steps 0, 2, 4: 3 test sets x 2 metrics each
    scores = _loaded(tmp_path / "out")
    assert sorted(set(scores["step"])) == [0, 2, 4]
    got = scores[scores["step"] == 4].reset_index(drop=True)
    config = load_config(study)
    ref = Store(tmp_path / "ref")
    score_checkpoints(
        config, find_checkpoints([tmp_path / "loop"]), model_name="loop", run="seed=7", store=ref, log=lambda _: None
    )
    _assert_same_scores(got, ref.load().sort_values(KEY).reset_index(drop=True))
    assert evaluate(model, tokenizer, 4, total_steps=4, **options) == 0  # stored already: nothing written twice


def test_bad_options_are_refused_in_one_line(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    from gengen.integrations import Evaluator

    study = _study(assets, study_toml, tmp_path)
    with pytest.raises(ConfigError, match="store: give the store"):
        Evaluator(testsets=["hans"])
    with pytest.raises(ConfigError, match="'nope' is neither a test set of study 't' nor registered"):
        Evaluator(study=study, testsets=["id", "nope"])
    with pytest.raises(ConfigError, match="nothing to score"):
        Evaluator(store=tmp_path / "s")
    with pytest.raises(ConfigError, match="a list of names"):
        Evaluator(study=study, testsets="id")
    chosen = Evaluator(study=study, testsets=["negation", "hans"])  # a study test set and a registered one
    assert chosen.config is not None and [(s.name, s.source) for s in chosen.config.testsets] == [
        ("negation", None),
        ("hans", "hans"),
    ]


def test_lm_eval_task_on_the_live_model(
    assets: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An lm-eval task scored by evaluate() equals lm-eval through gengen score on the saved model (1e-6)."""
    pytest.importorskip("lm_eval")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gengen.integrations import evaluate
    from gengen.scoring.lm_eval import LmEvalSettings, score_with_lm_eval

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "tiny_id.yaml").write_text(
        f"task: tiny_id\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {assets['data']['id']}\n"
        'test_split: test\noutput_type: multiple_choice\ndoc_to_text: "{{premise}} Question: {{hypothesis}} Yes or '
        'No?"\ndoc_to_choice: [" Yes", " No"]\ndoc_to_target: "{{1 - label}}"\ntarget_delimiter: ""\n'
        "metric_list:\n  - metric: acc\nmetadata:\n  version: 1.0\n"
    )
    model = AutoModelForCausalLM.from_pretrained(assets["models"]["opt"])
    tokenizer = AutoTokenizer.from_pretrained(assets["models"]["opt"])
    options = {"store": tmp_path / "live", "tasks": ["tiny_id"], "include_paths": [str(tasks)], "seed": 1}
    assert evaluate(model, tokenizer, 0, model_name="m", **options) == 1  # acc, with its standard error
    settings = LmEvalSettings(tasks=("tiny_id",), batch_size=8, include_paths=(str(tasks),))
    reference = Store(tmp_path / "ref")
    score_with_lm_eval(
        [Checkpoint(str(assets["models"]["opt"]), 0)], settings, store=reference, model_name="m", run="seed=1",
        log=lambda _: None,
    )  # fmt: skip
    got, want = _loaded(tmp_path / "live"), reference.load().sort_values(KEY).reset_index(drop=True)
    assert got[KEY].equals(want[KEY]) and len(got) == 1
    np.testing.assert_allclose(got[["value", "stderr"]], want[["value", "stderr"]], rtol=0, atol=ATOL)
    manifest = Store(tmp_path / "live").manifest("m", "seed=1")
    assert manifest is not None and manifest["lm_eval"]["tasks"] == ["tiny_id"]
