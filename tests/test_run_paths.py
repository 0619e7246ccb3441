"""A run's paths are made once, when the run is planned (:class:`gengen.study.paths.RunPaths`), and passed on.

The expected paths are written out by hand from the documented layout (docs/executors.md, docs/protocol.md:
``<output>/runs/<model folder>/<run>/`` with ``scores/``, ``manifest.json``, ``state.json``, ``result.json``,
``run.json`` and the ``checkpoint-<step>`` folders in it; a model name other than letters, digits, ``.``, ``_``,
``-`` and ``+`` becomes that name with the rest replaced by ``_`` plus the first 8 hex digits of its SHA-256; the
run key's ``,`` and ``=`` become ``_`` and ``-``), never from the code under test.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gengen.errors import InputError
from gengen.executors.base import Executor, RunResult, RunTask
from gengen.executors.driver import execute_study
from gengen.executors.spool import RunSpool
from gengen.executors.state import read_state, write_state
from gengen.study.config import RunSpec, StudyConfig, load_config, with_output
from gengen.study.paths import RunPaths, RunPlan

PACKAGE = Path(__file__).resolve().parents[1] / "python"
#: The module that defines RunPaths: the one place a run folder is computed from the study.
PATHS_MODULE = "gengen/study/paths.py"

FILES = {"spool": "scores", "manifest": "manifest.json", "state": "state.json", "result": "result.json"}


def write_study(folder: Path, models: Sequence[str], *, seeds: str = "[1, 2]", data: str = "") -> StudyConfig:
    """A study of ``models`` (one opt family entry each) read from its file; nothing is loaded or trained."""
    tables = "\n".join(
        f'[[models]]\nname = "{name}"\npath = "facebook/opt-125m"\nfamily = "opt"\nsize = "125m"\n' for name in models
    )
    text = f"""
[study]
name = "paths"
output = "out"
id_testset = "mnli"

{tables}
[task]
train = {{ source = "mnli", split = "train" }}

[[testsets]]
name = "mnli"
source = "mnli"

[training]
seeds = {seeds}
{data}
"""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(text)
    return load_config(folder / "study.toml")


def expected(folder: Path) -> dict[str, Path]:
    """Every path of a run whose folder is ``folder``, by the documented layout."""
    return {
        "folder": folder,
        "spool": folder / "scores",
        "manifest": folder / "manifest.json",
        "state": folder / "state.json",
        "result": folder / "result.json",
        "record": folder / "run.json",
        "checkpoints": folder,
    }


def as_dict(paths: RunPaths) -> dict[str, Path]:
    return {name: getattr(paths, name) for name in expected(Path("x"))}


def hashed(name: str, safe: str) -> str:
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


# ---------------------------------------------------------------------------------------------- the layout


def test_full_data_runs_lie_under_runs_model_seed(tmp_path: Path) -> None:
    config = write_study(tmp_path, ["opt-125m", "pythia_70m+v1.0"])
    out = tmp_path / "out"
    got = {(run.model.name, run.key): as_dict(RunPaths.for_run(config, run)) for run in config.runs()}
    assert got == {
        ("opt-125m", "seed=1"): expected(out / "runs" / "opt-125m" / "seed-1"),
        ("opt-125m", "seed=2"): expected(out / "runs" / "opt-125m" / "seed-2"),
        ("pythia_70m+v1.0", "seed=1"): expected(out / "runs" / "pythia_70m+v1.0" / "seed-1"),
        ("pythia_70m+v1.0", "seed=2"): expected(out / "runs" / "pythia_70m+v1.0" / "seed-2"),
    }


def test_few_shot_run_keys_become_folder_names(tmp_path: Path) -> None:
    config = write_study(tmp_path, ["m"], seeds="[7]", data="[data]\nshots = [4, 16]\ndata_seeds = [0, 3]\n")
    runs = tmp_path / "out" / "runs" / "m"
    got = [RunPaths.for_run(config, run).folder for run in config.runs()]
    assert got == [
        runs / "seed-7_shots-4_data_seed-0",
        runs / "seed-7_shots-4_data_seed-3",
        runs / "seed-7_shots-16_data_seed-0",
        runs / "seed-7_shots-16_data_seed-3",
    ]


def test_model_names_that_are_not_folder_names_get_a_hash(tmp_path: Path) -> None:
    names = ["org/My Model", ".hidden", "a@b"]
    config = write_study(tmp_path, names, seeds="[1]")
    runs = tmp_path / "out" / "runs"
    got = [RunPaths.for_run(config, run).folder for run in config.runs()]
    assert got == [
        runs / hashed("org/My Model", "org_My_Model") / "seed-1",
        runs / hashed(".hidden", "_hidden") / "seed-1",
        runs / hashed("a@b", "a_b") / "seed-1",
    ]


def test_another_output_moves_every_path(tmp_path: Path) -> None:
    """``gengen run --out`` (:func:`with_output`): the runs' paths follow the new output."""
    config = with_output(write_study(tmp_path / "study", ["m"], seeds="[3]"), tmp_path / "elsewhere")
    (run,) = config.runs()
    assert as_dict(RunPaths.for_run(config, run)) == expected(tmp_path / "elsewhere" / "runs" / "m" / "seed-3")


def test_a_runs_folder_linked_outside_the_output_is_refused_when_planned(tmp_path: Path) -> None:
    config = write_study(tmp_path, ["m"], seeds="[1]")
    (tmp_path / "out").mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "out" / "runs")
    with pytest.raises(InputError, match="runs"):
        RunPlan.for_runs(config, config.runs())


def test_the_files_gengen_writes_land_where_the_layout_says(tmp_path: Path) -> None:
    """State, spool batches and manifest written through a run's paths are the documented files."""
    config = write_study(tmp_path, ["m"], seeds="[5]")
    (run,) = config.runs()
    paths = RunPaths.for_run(config, run)
    write_state(paths, run, "pending", attempt=0)
    spool = RunSpool(paths.folder, study=config.name)
    row = {"model": "m", "run": "seed=5", "step": 0, "testset": "mnli", "metric": "acc", "value": 0.5}
    spool.write_scores([{**row, "family": "opt", "size": "125m", "n_examples": 2}])
    spool.write_manifest("m", "seed=5", {"status": "running"})
    folder = tmp_path / "out" / "runs" / "m" / "seed-5"
    assert sorted(p.relative_to(folder).as_posix().split("/")[0] for p in folder.rglob("*") if p.is_file()) == [
        "manifest.json",
        "scores",
        "state.json",
    ]
    assert json.loads((folder / "state.json").read_text())["status"] == "pending"
    assert read_state(config, run) == read_state(paths, run)  # the study, as before: the same file


# ---------------------------------------------------------------------------------------------- the value


def test_paths_cross_a_process_boundary_as_json(tmp_path: Path) -> None:
    paths = RunPaths.in_folder(tmp_path / "runs" / "m" / "seed-1")
    text = json.dumps(paths.to_json())
    assert RunPaths.from_json(json.loads(text)) == paths
    assert json.loads(text)["state"] == str(tmp_path / "runs" / "m" / "seed-1" / "state.json")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"folder": "/r"}, "expected the fields folder, spool"),
        ([], "got list"),
        ({**RunPaths.in_folder(Path("/r")).to_json(), "state": 3}, "state: expected a path"),
        ({**RunPaths.in_folder(Path("/r")).to_json(), "record": ""}, "record: expected a path"),
        ({**RunPaths.in_folder(Path("/r")).to_json(), "logs": "/r/logs"}, "got \\['checkpoints'"),
    ],
)
def test_paths_read_back_from_json_are_checked(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunPaths.from_json(data)


def test_a_plan_is_the_runs_in_order_with_their_paths(tmp_path: Path) -> None:
    config = write_study(tmp_path, ["a", "b"])
    runs = config.runs()
    plan = RunPlan.for_runs(config, runs)
    assert list(plan) == runs and len(plan) == 4 and plan[1] == runs[1] and plan[1:3] == tuple(runs[1:3])
    assert plan.paths[runs[2]].folder == tmp_path / "out" / "runs" / "b" / "seed-1"
    with pytest.raises(TypeError):
        plan.paths[runs[0]] = RunPaths.in_folder(tmp_path)  # type: ignore[index]
    with pytest.raises(ValueError, match="run b seed=2: no paths planned"):
        RunPlan(runs, {run: plan.paths[run] for run in runs[:3]})


def test_a_task_carries_its_paths_and_one_made_by_hand_gets_its_runs(tmp_path: Path) -> None:
    config = write_study(tmp_path, ["m"], seeds="[1]")
    (run,) = config.runs()
    planned = RunPaths.in_folder(tmp_path / "planned")
    assert RunTask(config, run, 1, 1, planned).paths is planned
    assert pickle.loads(pickle.dumps(RunTask(config, run, 1, 1, planned))).paths == planned
    assert RunTask(config, run, 1, 1).paths.folder == tmp_path / "out" / "runs" / "m" / "seed-1"


# ---------------------------------------------------------------------------------------------- made once


class _Recording(Executor):
    """Finishes every task at once (no scores) and keeps the tasks it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.tasks: list[RunTask] = []

    def submit(self, task: RunTask) -> RunTask:
        self.tasks.append(task)
        return task

    def wait(self, handles: Sequence[Any]) -> list[int]:
        return list(range(len(handles)))

    def result(self, handle: Any, task: RunTask) -> RunResult:
        return RunResult(task.run.model.name, task.run.key, ok=True, scores=())


def test_the_driver_computes_each_run_folder_once_and_hands_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_study(tmp_path, ["a", "b"], seeds="[1, 2]")
    calls: list[tuple[str, str]] = []
    original = StudyConfig.run_dir

    def counted(self: StudyConfig, run: RunSpec) -> Path:
        calls.append((run.model.name, run.key))
        return original(self, run)

    monkeypatch.setattr(StudyConfig, "run_dir", counted)
    executor = _Recording()
    execution = execute_study(config, executor=executor, log=lambda _: None)
    assert execution.ok and len(executor.tasks) == 4
    assert sorted(calls) == sorted((run.model.name, run.key) for run in config.runs())  # once per run
    out = tmp_path / "out" / "runs"
    for task in executor.tasks:
        folder = out / task.run.model.name / f"seed-{task.run.seed}"
        assert as_dict(task.paths) == expected(folder)
        assert json.loads((folder / "state.json").read_text())["status"] == "done"
    assert list(execution.plan) == config.runs()
    assert {run: paths.folder for run, paths in execution.plan.paths.items()} == {
        run: out / run.model.name / f"seed-{run.seed}" for run in config.runs()
    }


def test_a_plan_made_by_the_caller_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gengen train`` plans the runs (to check their folders) and hands the plan to the driver."""
    config = write_study(tmp_path, ["a", "b"], seeds="[1]")
    elsewhere = {run: RunPaths.in_folder(tmp_path / "planned" / run.model.name) for run in config.runs()}
    plan = RunPlan(config.runs()[1:], elsewhere)

    def refused(self: StudyConfig, run: RunSpec) -> Path:
        raise AssertionError("run_dir called after the runs were planned")

    monkeypatch.setattr(StudyConfig, "run_dir", refused)
    executor = _Recording()
    execution = execute_study(config, executor=executor, plan=plan, log=lambda _: None)
    assert [(task.run.model.name, task.paths.folder) for task in executor.tasks] == [("b", tmp_path / "planned" / "b")]
    assert json.loads((tmp_path / "planned" / "b" / "state.json").read_text())["status"] == "done"
    assert execution.plan is plan
    with pytest.raises(ValueError, match="not both"):
        execute_study(config, executor=_Recording(), plan=plan, models=["a"], log=lambda _: None)


# ---------------------------------------------------------------------------------------------- one caller


def run_dir_calls(root: Path) -> dict[str, int]:
    """``{module file: calls of run_dir}`` under ``root``/gengen: ``x.run_dir(...)`` or ``run_dir(...)``."""
    found: dict[str, int] = {}
    for path in sorted((root / "gengen").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        count = sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "run_dir")
                or (isinstance(node.func, ast.Name) and node.func.id == "run_dir")
            )
        )
        if count:
            found[path.relative_to(root).as_posix()] = count
    return found


def test_run_dir_is_called_only_where_run_paths_are_made() -> None:
    assert run_dir_calls(PACKAGE) == {PATHS_MODULE: 1}


def test_the_scan_finds_a_run_dir_call_anywhere(tmp_path: Path) -> None:
    sources = {
        "gengen/study/paths.py": "def f(config, run):\n    return config.run_dir(run)\n",
        "gengen/executors/late.py": "def g(config, run):\n    def h():\n        return config.run_dir(run) / 'x'\n",
        "gengen/training/bare.py": "from x import run_dir\nrun_dir(1)\n",
        "gengen/study/config.py": "class C:\n    def run_dir(self, run):\n        return run\n",  # defined, not called
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert run_dir_calls(tmp_path) == {
        "gengen/executors/late.py": 1,
        "gengen/study/paths.py": 1,
        "gengen/training/bare.py": 1,
    }
