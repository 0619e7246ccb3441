"""Executors: a study of tiny runs through local, Ray and submitit gives one store, whatever ran it.

Also: a failing run is retried and reported while the others complete; a driver killed mid-sweep and
submitted again completes the study without duplicate rows; ``gengen status`` and ``gengen run`` report it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from gengen.errors import ConfigError
from gengen.executors import execute_study, study_status
from gengen.store.database import Store
from gengen.study.config import load_config, parse_config

pytestmark = pytest.mark.train

KEY = ["model", "run", "step", "testset", "metric"]
PROMPT = "{premise} Question: {hypothesis} Yes or No?"
CLI = "import sys; from gengen.cli import main; sys.argv[0] = 'gengen'; main()"


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Small demo data, a tokenizer and one tiny model per family (as in tests/train/conftest.py)."""
    import torch

    from gengen.demo.tasks import tokenizer_corpus, write_demo_data
    from gengen.demo.tiny import build_tiny_model, train_tokenizer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("executor-assets")
    data = write_demo_data(root / "data", n_train=200, n_test=24, seed=5)
    tokenizer = train_tokenizer(tokenizer_corpus(PROMPT, (" Yes", " No")), root / "tokenizer")
    models = {}
    for index, family in enumerate(("opt", "olmo2")):
        model = build_tiny_model(
            family,
            vocab_size=len(tokenizer),
            hidden=16,
            layers=1,
            heads=2,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            seed=index,
        )
        model.save_pretrained(root / "models" / family)
        tokenizer.save_pretrained(root / "models" / family)
        models[family] = root / "models" / family
    broken = root / "models" / "broken"
    broken.mkdir()
    models["broken"] = broken  # a folder without a model: loading it fails
    return {"data": data, "models": models}


def study_text(
    assets: dict[str, Any], output: Path, *, families: tuple[str, ...] = ("opt", "olmo2"), extra: str = ""
) -> str:
    """Two seeds per model, 6 steps scored every 3 (3 evaluations), ID + one OOD test set."""
    models = "\n".join(
        f'[[models]]\nname = "{f}-tiny"\npath = "{assets["models"][f]}"\nfamily = "{f}"\nsize = "tiny"\n'
        for f in families
    )
    data = assets["data"]
    return f"""
[study]
name = "t"
output = "{output}"
id_testset = "id"

{models}
[task]
prompt = "{PROMPT}"
train = {{ path = "{data["train"]}" }}

[[testsets]]
name = "id"
path = "{data["id"]}"

[[testsets]]
name = "negation"
path = "{data["negation"]}"

[training]
learning_rate = 5e-3
max_steps = 6
batch_size = 8
max_length = 48
precision = "fp32"
device = "cpu"
seeds = [1, 2]

[evaluation]
every = 3
batch_size = 24
{extra}
"""


def write_study(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(text)
    return path


def scores(output: Path) -> pd.DataFrame:
    return Store(output).load().sort_values(KEY).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(assets: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The 4-run study through the local executor, in this process."""
    folder = tmp_path_factory.mktemp("local")
    config = load_config(write_study(folder, study_text(assets, folder / "out")))
    execution = execute_study(config, executor="local", log=lambda _: None)
    assert execution.ok and len(execution.results) == 4
    return {"config": config, "scores": scores(folder / "out"), "folder": folder}


def test_local_study_is_complete_and_resubmission_skips(reference: dict[str, Any]) -> None:
    frame, config = reference["scores"], reference["config"]
    assert len(frame) == 4 * 3 * 2 * 2 and not frame.duplicated(KEY).any()
    assert sorted(frame["step"].unique()) == [0, 3, 6]
    statuses = study_status(config)
    assert [(s.status, s.progress) for s in statuses] == [("done", "3/3")] * 4
    again = execute_study(config, log=lambda _: None)
    assert len(again.skipped) == 4 and not again.results and again.rows_merged == 0
    pd.testing.assert_frame_equal(scores(config.output), frame)


def test_ray_study_equals_local(assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    config = load_config(write_study(tmp_path, study_text(assets, tmp_path / "out")))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20, log_to_driver=False)
    try:
        execution = execute_study(config, executor="ray", log=lambda _: None)
    finally:
        ray.shutdown()
    assert execution.ok and execution.executor == "ray" and len(execution.results) == 4
    pd.testing.assert_frame_equal(scores(tmp_path / "out"), reference["scores"])
    assert [s.status for s in study_status(config)] == ["done"] * 4
    manifests = Store(tmp_path / "out").manifests()
    assert {m["status"] for m in manifests.values()} == {"complete"} and len(manifests) == 4


def test_failed_run_is_retried_and_reported_while_others_complete(
    assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    text = study_text(assets, tmp_path / "out", families=("opt", "broken"), extra="[executor]\nretries = 1\n")
    path = write_study(tmp_path, text)
    execution = execute_study(load_config(path), jobs=2, log=lambda _: None)  # two worker processes
    assert sorted((r.model, r.run) for r in execution.failed) == [("broken-tiny", "seed=1"), ("broken-tiny", "seed=2")]
    assert all(execution.attempts[("broken-tiny", k)] == 2 for k in ("seed=1", "seed=2"))
    assert all(execution.results[("opt-tiny", k)].ok for k in ("seed=1", "seed=2"))
    expected = reference["scores"][reference["scores"]["model"] == "opt-tiny"].reset_index(drop=True)
    pd.testing.assert_frame_equal(scores(tmp_path / "out"), expected)
    result = CliRunner().invoke(app, ["status", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    broken = [line for line in lines if line.startswith("broken-tiny")]
    assert len(broken) == 2 and all("failed" in line and "attempt 2" in line and "error: " in line for line in broken)
    assert sum("done" in line and "3/3" in line for line in lines if line.startswith("opt-tiny")) == 2
    assert lines[-1] == "t: 4 runs: 2 done, 2 failed"
    # gengen run: the complete runs are skipped, the broken ones fail again; exit status 1, errors listed.
    rerun = CliRunner().invoke(app, ["run", str(path), "--retries", "0", "--no-analysis"])
    assert rerun.exit_code == 1
    assert "2 of 4 runs complete (2 skipped)" in rerun.output
    assert rerun.output.count("failed: broken-tiny") == 2


def test_killed_driver_resubmitted_completes_without_duplicates(
    assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path
) -> None:
    path = write_study(tmp_path, study_text(assets, tmp_path / "out"))
    config = load_config(path)
    second = config.run_dir(config.runs()[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, "run", str(path), "--no-analysis"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not (second / "checkpoint-3").exists():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    states = [s.status for s in study_status(config)]
    assert states[0] == "done" and states[1] == "running" and states[2:] == ["pending", "pending"], states
    assert "process is gone" in (study_status(config)[1].note or "")
    execution = execute_study(config, log=lambda _: None)
    assert execution.ok and len(execution.skipped) == 1 and len(execution.results) == 3
    final = scores(tmp_path / "out")
    assert not final.duplicated(KEY).any()
    pd.testing.assert_frame_equal(final, reference["scores"])
    assert [s.status for s in study_status(config)] == ["done"] * 4


def test_submitit_local_executor(assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    extra = '[executor]\nkind = "slurm"\ncluster = "local"\ntime_minutes = 5\n'
    config = load_config(write_study(tmp_path, study_text(assets, tmp_path / "out", families=("opt",), extra=extra)))
    execution = execute_study(config, log=lambda _: None)
    assert execution.ok and execution.executor == "slurm" and len(execution.results) == 2
    expected = reference["scores"][reference["scores"]["model"] == "opt-tiny"].reset_index(drop=True)
    pd.testing.assert_frame_equal(scores(tmp_path / "out"), expected)
    assert len(list((tmp_path / "out" / "slurm").glob("*/*_result.pkl"))) == 2  # one submitit job per run
    # Each job's result came back as gengen's own JSON file, written by the job itself.
    results = [json.loads((config.run_dir(run) / "result.json").read_text()) for run in config.runs()]
    assert [(r["format"], r["ok"], r["model"]) for r in results] == [("gengen-run-result/1", True, "opt-tiny")] * 2
    assert {r["job_id"] for r in results} == {p.parent.name for p in (tmp_path / "out" / "slurm").glob("*/*.pkl")}
    assert {(s.status, s.progress) for s in study_status(config)} == {("done", "3/3")}


def test_run_command_analyses_a_complete_study(reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    calls = []

    def fake(store: Path, out: Path, id_testset: str, **options: Any) -> Path:
        calls.append((Path(store), Path(out), id_testset))
        return Path(out) / "report.html"

    monkeypatch.setattr(importlib.import_module("gengen.pipeline"), "run_study_analysis", fake)
    config = reference["config"]
    result = CliRunner().invoke(app, ["run", str(config.source), "--executor", "local"])
    assert result.exit_code == 0, result.output
    assert calls == [(config.output, config.output / "analysis", "id")]
    assert "4 of 4 runs complete (4 skipped)" in result.output


def test_executor_settings_are_validated(tmp_path: Path) -> None:
    base = {
        "study": {"name": "s", "id_testset": "mnli"},
        "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
        "task": {"train": {"source": "mnli"}},
        "testsets": [{"name": "mnli", "source": "mnli"}],
    }
    config = parse_config(
        {**base, "executor": {"kind": "ray", "retries": 2, "address": "auto"}, "resources": {"gpus": 0.5}},
        base=tmp_path,
    )
    assert (config.executor.kind, config.executor.retries, config.resources.gpus) == ("ray", 2, 0.5)
    assert parse_config(base, base=tmp_path).executor.kind == "local"
    cases = [
        ({"executor": {"kind": "rey"}}, "executor.kind: unknown executor 'rey' (did you mean 'ray'?)"),
        ({"executor": {"retries": -1}}, "executor.retries: expected an integer >= 0, got -1"),
        ({"executor": {"retry": 1}}, "executor.retry: unknown key (did you mean 'retries'?)"),
        ({"executor": {"cluster": "pbs"}}, "executor.cluster: expected one of 'slurm', 'local', 'debug'"),
        ({"resources": {"gpu": 1}}, "resources.gpu: unknown key (did you mean 'gpus'?)"),
        ({"resources": {"cpus": 0}}, "resources.cpus: expected a positive integer, got 0"),
        ({"executer": {}}, "executer: unknown key (did you mean 'executor'?)"),
    ]
    for change, message in cases:
        with pytest.raises(ConfigError, match="^" + re.escape(f"study.toml: {message}")):
            parse_config({**base, **change}, origin="study.toml", base=tmp_path)


def test_slurm_parameters_and_option_errors(tmp_path: Path) -> None:
    from gengen.executors.driver import resolve_settings
    from gengen.executors.slurm import slurm_parameters
    from gengen.study.tables import ExecutorConfig, ResourcesConfig

    settings = ExecutorConfig(kind="slurm", partition="gpu", time_minutes=90, setup=("module load cuda",))
    parameters = slurm_parameters(settings, ResourcesConfig(cpus=8, gpus=2, memory_gb=30.5))
    assert parameters == {
        "name": "gengen",
        "timeout_min": 90,
        "cpus_per_task": 4,
        "slurm_partition": "gpu",
        "gpus_per_node": 2,
        "tasks_per_node": 2,
        "mem_gb": 31,
        "slurm_setup": ["module load cuda"],
    }
    with pytest.raises(ConfigError, match=r"^resources\.gpus: Slurm needs a whole number of GPUs, got 0\.5$"):
        slurm_parameters(settings, ResourcesConfig(gpus=0.5))
    config = parse_config(
        {
            "study": {"name": "s", "id_testset": "mnli"},
            "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
            "task": {"train": {"source": "mnli"}},
            "testsets": [{"name": "mnli", "source": "mnli"}],
        },
        base=tmp_path,
    )
    with pytest.raises(ConfigError, match=r"^--executor: unknown executor 'slrum' \(did you mean 'slurm'\?\)$"):
        resolve_settings(config, executor="slrum")
    with pytest.raises(ConfigError, match=r"^--jobs: expected an integer >= 1, got 0$"):
        resolve_settings(config, jobs=0)
    assert json.loads(json.dumps(parameters)) == parameters


def test_run_spool_writes_whole_batches_once(tmp_path: Path) -> None:
    from gengen.executors.spool import SPOOL_DIR, RunSpool

    spool = RunSpool(tmp_path / "run", study="t")
    rows = [
        {"model": "m", "run": "seed=1", "step": 0, "testset": "id", "metric": "acc", "value": 0.5, "n_examples": 4},
        {"model": "m", "run": "seed=1", "step": 0, "testset": "id", "metric": "logprob", "value": float("nan")},
    ]
    assert spool.completed("m", "seed=1") == set()
    assert spool.write_scores(pd.DataFrame(rows)) == 2
    assert spool.write_scores(pd.DataFrame(rows)) == 0  # already spooled: nothing written
    later = [{**rows[0], "step": 5, "value": 0.75}]
    assert spool.write_scores(later) == 1
    assert spool.completed("m", "seed=1") == {(0, "id", "acc"), (0, "id", "logprob"), (5, "id", "acc")}
    files = sorted(p.name for p in (tmp_path / "run" / SPOOL_DIR).iterdir())
    assert len(files) == 2 and all(name.startswith("step-") and name.endswith(".json") for name in files)
    store = Store(tmp_path / "store.sqlite", study="t")
    assert store.write_scores(spool.frame()) == 3
    loaded = store.load().sort_values(["step", "metric"]).reset_index(drop=True)
    assert loaded["value"].isna().tolist() == [False, True, False]
    assert loaded["seed"].tolist() == [1, 1, 1] and loaded["n_examples"].isna().tolist() == [False, True, False]
    spool.write_manifest("m", "seed=1", {"status": "complete"})
    assert spool.manifest("m", "seed=1") == {"status": "complete"}


def test_resubmission_waits_for_slurm_jobs_still_alive(
    assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver killed while its Slurm jobs run: submitting again waits for those jobs instead of doubling them."""
    submitit = pytest.importorskip("submitit")
    from gengen.executors import RunTask
    from gengen.executors.slurm import SlurmExecutor, run_job
    from gengen.executors.state import write_state

    extra = '[executor]\nkind = "slurm"\n'
    config = load_config(write_study(tmp_path, study_text(assets, tmp_path / "out", families=("opt",), extra=extra)))
    tasks = {}
    for index, run in enumerate(config.runs()):
        write_state(config, run, "running", attempt=1, executor="slurm", job_id=str(100 + index))
        tasks[str(100 + index)] = RunTask(config, run, 1, 1)

    class AliveJob:  # what submitit.SlurmJob reports for a job that is still running
        def __init__(self, folder: Path, job_id: str):
            self.job_id = job_id
            self.state = "RUNNING"

        def done(self) -> bool:  # the job runs now, as the real one would on its node
            monkeypatch.setenv("SLURM_JOB_ID", self.job_id)
            run_job(tasks[self.job_id])
            return True

    def submit_again(self: Any, task: Any) -> Any:
        raise AssertionError(f"{task.label} submitted again")

    monkeypatch.setattr(submitit, "SlurmJob", AliveJob)
    monkeypatch.setattr(SlurmExecutor, "start", lambda self: None)
    monkeypatch.setattr(SlurmExecutor, "submit", submit_again)
    lines: list[str] = []
    execution = execute_study(config, log=lines.append)
    assert execution.ok and len(execution.results) == 2
    assert sum("job 10" in line and "still alive" in line for line in lines) == 2
    expected = reference["scores"][reference["scores"]["model"] == "opt-tiny"].reset_index(drop=True)
    pd.testing.assert_frame_equal(scores(tmp_path / "out"), expected)


PAYLOAD = "PAYLOAD_RAN"


class _Planted:
    """Unpickling this creates the marker file: what a hostile pickle in the study folder would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.marker, "unpickled"))


def test_a_planted_result_pickle_is_never_unpickled(
    assets: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: a study folder whose state.json names a Slurm job and whose slurm/<job>/<job>_0_result.pkl is
    a planted pickle: reattaching reads gengen's JSON result file only; the pickle's code never runs."""
    import pickle

    submitit = pytest.importorskip("submitit")
    from gengen.executors.slurm import SlurmExecutor
    from gengen.executors.state import write_state

    extra = '[executor]\nkind = "slurm"\nretries = 0\n'
    config = load_config(write_study(tmp_path, study_text(assets, tmp_path / "out", families=("opt",), extra=extra)))
    marker = tmp_path / PAYLOAD
    for index, run in enumerate(config.runs()):
        job_id = str(500 + index)
        write_state(config, run, "running", attempt=1, executor="slurm", job_id=job_id)
        folder = tmp_path / "out" / "slurm" / job_id
        folder.mkdir(parents=True)
        (folder / f"{job_id}_0_result.pkl").write_bytes(pickle.dumps(("success", _Planted(marker))))

    class FinishedJob:  # submitit's view: the job is alive, then done, and its result pickle is there
        def __init__(self, folder: Path, job_id: str):
            self.job_id = job_id
            self.state = "RUNNING"
            self.paths = submitit.core.utils.JobPaths(Path(str(folder).replace("%j", job_id)), job_id)

        def done(self) -> bool:
            return True

        def result(self) -> Any:
            return pickle.loads(self.paths.result_pickle.read_bytes())

    monkeypatch.setattr(submitit, "SlurmJob", FinishedJob)
    monkeypatch.setattr(SlurmExecutor, "start", lambda self: None)
    monkeypatch.setattr("gengen.executors.slurm.RESULT_WAIT_SECONDS", 0.0)
    execution = execute_study(config, log=lambda _: None)
    assert not marker.exists(), "the planted pickle was unpickled"
    assert not execution.ok and len(execution.failed) == 2
    for result in execution.failed:
        assert re.fullmatch(r"job 50[01]: ended without writing .*result\.json \(Slurm state RUNNING\)", result.error)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"status": "running", "job_id": "../../elsewhere"}', "job_id: '../../elsewhere' is not a job id"),
        ('{"status": "running", "job_id": "1; rm -rf ~"}', "job_id: '1; rm -rf ~' is not a job id"),
        ('{"status": "running", "job_id": 7}', "job_id: expected str, got int"),
        ('{"status": "running", "attempt": "x"}', "attempt: expected int, got str"),
        ('{"status": "running", "attempt": true}', "attempt: expected int, got bool"),
        ('{"status": "running", "pid": 100000000000000000000}', "pid: expected a process id"),
        ('{"status": "gone"}', "status: expected one of pending, running, done, failed, got 'gone'"),
        ("[1, 2]", "not a run state (a JSON object expected, got list)"),
        ('{"status": "run', "not valid JSON (line 1 column 12"),
    ],
)
def test_malformed_or_planted_state_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    from gengen.errors import InputError
    from gengen.executors.state import read_state

    config = parse_config(
        {
            "study": {"name": "s", "id_testset": "mnli", "output": str(tmp_path / "out")},
            "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
            "task": {"train": {"source": "mnli"}},
            "testsets": [{"name": "mnli", "source": "mnli"}],
        },
        base=tmp_path,
    )
    run = config.runs()[0]
    path = config.run_dir(run) / "state.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        read_state(config, run)
    assert str(caught.value).startswith(f"{path}: {message}"), str(caught.value)
    with pytest.raises(InputError):  # before anything is written: no store, no other state
        execute_study(config, log=lambda _: None)
    assert not (tmp_path / "out" / "gengen.sqlite").exists()


def test_result_files_are_checked(tmp_path: Path) -> None:
    from gengen.errors import InputError
    from gengen.executors.base import RunResult
    from gengen.executors.results import read_result, write_result

    path = tmp_path / "result.json"
    rows = ({"model": "m", "run": "r", "step": 1, "testset": "t", "metric": "acc", "value": float("nan")},)
    result = RunResult("m", "r", ok=True, rows_written=1, seconds=1.5, host="h", scores=rows, manifest={"a": [1]})
    write_result(path, result, job_id="12", attempt=2)
    back = read_result(path, job_id="12", model="m", run="r")
    assert back is not None and back.scores is not None
    assert (back.ok, back.rows_written, back.manifest, back.scores[0]["step"]) == (True, 1, {"a": [1]}, 1)
    assert read_result(path, job_id="13", model="m", run="r") is None  # another job's: none for this one
    assert read_result(tmp_path / "absent.json", job_id="12", model="m", run="r") is None
    with pytest.raises(InputError, match="the result of run m r, not of m other"):
        read_result(path, job_id="12", model="m", run="other")
    record = json.loads(path.read_text().replace("NaN", "null"))
    for change, message in (
        ({"ok": "yes"}, "ok: expected bool"),
        ({"rows_written": True}, "rows_written: expected int"),
        ({"scores": [["not", "a", "record"]]}, "scores: row 1 is not a record"),
        ({"scores": [{"value": {"nested": 1}}]}, "scores: row 1 is not a record"),
        ({"format": "pickle"}, "not a gengen result file"),
    ):
        path.write_text(json.dumps({**record, **change}))
        with pytest.raises(InputError, match=re.escape(message)):
            read_result(path, job_id="12", model="m", run="r")


def test_a_slurm_folder_linking_out_of_the_study_is_refused(tmp_path: Path) -> None:
    """Issue 26: submitit's job files go to <output>/slurm; a slurm/ that links elsewhere is not written through."""
    pytest.importorskip("submitit")
    from gengen.errors import InputError

    config = parse_config(
        {
            "study": {"name": "s", "id_testset": "mnli", "output": str(tmp_path / "out")},
            "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
            "task": {"train": {"source": "mnli"}},
            "testsets": [{"name": "mnli", "source": "mnli"}],
            "executor": {"kind": "slurm"},
        },
        base=tmp_path,
    )
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "slurm").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'out' / 'slurm'}: leads outside")):
        execute_study(config, log=lambda _: None)
    assert list((tmp_path / "elsewhere").iterdir()) == []


#: Two more OOD test sets, so the study has pairs to analyse.
MORE_TESTSETS = "".join(
    f'\n[[testsets]]\nname = "{name}"\npath = "{{{name}}}"\n' for name in ("unseen_vocab", "length")
)


@pytest.mark.parametrize("kind", ["local", "slurm"])
def test_run_out_puts_the_whole_study_there(
    kind: str, assets: dict[str, Any], reference: dict[str, Any], tmp_path: Path
) -> None:
    """``gengen run --out DIR``: runs, store, analysis and report in DIR, whatever ``[study] output`` says, through
    the local executor's worker processes and submitit's jobs; nothing lands beside the study file."""
    from typer.testing import CliRunner

    from gengen.cli import app

    if kind == "slurm":
        pytest.importorskip("submitit")
    executor = '[executor]\nkind = "slurm"\ncluster = "local"\ntime_minutes = 5\n' if kind == "slurm" else ""
    data = {name: str(path) for name, path in assets["data"].items()}
    # Log-probabilities: the tiny model's accuracies sit at 0.5 after a few steps, too flat to analyse.
    extra = executor + MORE_TESTSETS.format(**data) + '\n[analysis]\nmetric = "logprob"\n'
    text = study_text(assets, Path("beside"), families=("opt",), extra=extra)
    path = write_study(tmp_path / "study", text.replace("every = 3", "every = 1"))
    out = tmp_path / "elsewhere"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(path), "--out", str(out), "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == ["study.toml"]  # not even [study] output
    assert (
        f"scores merged into {out} " in result.output and f"report: {out / 'analysis' / 'report.html'}" in result.output
    )
    assert (out / "analysis" / "report.html").is_file() and (out / "analysis" / "verdict.json").is_file()
    # The scores the workers wrote are those of the same runs with the study's own output folder.
    got = scores(out)
    assert sorted(got["step"].unique()) == list(range(7)) and set(got["model"]) == {"opt-tiny"}
    assert len(got) == 2 * 7 * 4 * 2  # runs x evaluations x test sets x metrics
    same = got[got["step"].isin([0, 3, 6]) & got["testset"].isin(["id", "negation"])].reset_index(drop=True)
    expected = reference["scores"][reference["scores"]["model"] == "opt-tiny"].reset_index(drop=True)
    pd.testing.assert_frame_equal(same[KEY], expected[KEY])
    assert (same["value"] - expected["value"]).abs().max() < 1e-6
    config = load_config(path, output=out)
    assert all(config.run_dir(run).is_relative_to(out) and config.run_dir(run).is_dir() for run in config.runs())
    if kind == "slurm":
        assert len(list((out / "slurm").glob("*/*_result.pkl"))) == 2  # submitit's folder moved with the output
    # gengen status and a second gengen run find the study there, given the same --out.
    status = runner.invoke(app, ["status", str(path), "--out", str(out)])
    assert status.exit_code == 0 and status.output.splitlines()[-1] == "t: 2 runs: 2 done", status.output
    assert runner.invoke(app, ["status", str(path)]).output.splitlines()[-1] == "t: 2 runs: 2 pending"
    again = runner.invoke(app, ["run", str(path), "--out", str(out), "--no-analysis"])
    assert again.exit_code == 0 and "2 of 2 runs complete (2 skipped)" in again.output, again.output
    dry = runner.invoke(app, ["run", str(path), "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0 and f"; output {out}" in dry.output.splitlines()[0], dry.output
    assert dry.output.splitlines()[-1] == f"next: gengen run {path} --out {out}"
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == ["study.toml"]
