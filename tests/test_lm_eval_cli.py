"""The lm-eval backend's edges: study-file section, one-line errors (unknown task, data offline, lm-eval
missing, options of the other backend), and lm-eval imported only when used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gengen.errors import ConfigError
from gengen.study.config import parse_config
from gengen.study.tables import LmEvalConfig

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def study(evaluation: str = "", testsets: bool = True, id_testset: str = "a") -> dict[str, Any]:
    import tomllib

    text = f"""
[study]
name = "s"
id_testset = "{id_testset}"
[[models]]
name = "m"
path = "org/m"
family = "f"
size = "1"
[task]
train = {{ source = "mnli" }}
{"[[testsets]]" + chr(10) + 'name = "a"' + chr(10) + 'source = "rte"' if testsets else ""}
{evaluation}
"""
    return tomllib.loads(text)


def test_study_file_lm_eval_section(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    config = parse_config(
        study(
            '[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["hellaswag", "arc_easy"]\n'
            'num_fewshot = 5\nlimit = 100\ninclude_paths = ["mine"]\n',
            testsets=False,
            id_testset="hellaswag",
        ),
        base=tmp_path,
    )
    assert config.evaluation.backend == "lm-eval"
    assert config.evaluation.lm_eval == LmEvalConfig(
        tasks=("hellaswag", "arc_easy"), num_fewshot=5, limit=100, include_paths=(str(tmp_path / "mine"),)
    )
    assert config.testsets == ()
    fraction = parse_config(
        study('[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["x"]\nlimit = 0.25\n'), base=tmp_path
    )
    assert fraction.evaluation.lm_eval is not None and fraction.evaluation.lm_eval.limit == 0.25
    assert parse_config(study(), base=tmp_path).evaluation.backend == "gengen"


@pytest.mark.parametrize(
    ("evaluation", "testsets", "id_testset", "message"),
    [
        ('[evaluation]\nbackend = "lm-eval"\n', True, "a", "evaluation.lm_eval: missing: backend 'lm-eval' needs"),
        ('[evaluation]\nbackend = "lm_eval"\n', True, "a", "evaluation.backend: expected one of 'gengen', 'lm-eval'"),
        ('[evaluation.lm_eval]\ntasks = ["x"]\n', True, "a", "evaluation.backend: set it to 'lm-eval'"),
        ('[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = []\n', True, "a", "lm_eval.tasks"),
        ('[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["x"]\nlimit = 2.5\n', True, "a", "limit"),
        ('[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["x"]\ntask = 1\n', True, "a", "'tasks'"),
        (
            '[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["x"]\ninclude_paths = ["nowhere"]\n',
            True,
            "a",
            "include_paths[0]: no such folder",
        ),
        ('[evaluation]\nbackend = "lm-eval"\n[evaluation.lm_eval]\ntasks = ["x"]\n', False, "y", "'y' is not one"),
        ("", False, "a", "testsets: missing (required)"),
    ],
)
def test_study_file_errors(tmp_path: Path, evaluation: str, testsets: bool, id_testset: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(study(evaluation, testsets, id_testset), origin="study.toml", base=tmp_path)
    assert message in str(caught.value)
    assert str(caught.value).startswith("study.toml: ") and "\n" not in str(caught.value)


def _run(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_lm_eval_is_imported_only_when_used() -> None:
    code = """
import sys
import gengen
from gengen.cli import main
for argv in (["--help"], ["score", "--help"]):
    try:
        main(argv)
    except SystemExit:
        pass
import gengen.scoring.lm_eval
print(sorted(m for m in ("lm_eval", "torch") if m in sys.modules))
"""
    assert _run(code).splitlines()[-1] == "[]"


def _cli(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from gengen.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


def _checkpoint(tmp_path: Path) -> Path:
    """A folder that passes for a checkpoint (never loaded: every error below comes first)."""
    folder = tmp_path / "series" / "checkpoint-5"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_missing_lm_eval_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # import lm_eval raises ImportError
    args = ["score", "--backend", "lm-eval", "--tasks", "piqa", "--checkpoints", str(_checkpoint(tmp_path))]
    code, err = _cli(*args, "--store", str(tmp_path / "s"), "--name", "m")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the lm-eval backend needs lm-evaluation-harness")
    assert lines[0].endswith("install it with pip install 'gengen[lm-eval]'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "piqa"], "error: give a study file (gengen's scorer scores its test sets) or --backend lm-eval"),
        (["--backend", "gengen"], "error: the gengen backend scores a study's test sets: give the study file"),
        (["--backend", "lm-eval", "--tasks", "piqa"], "error: --store: give the store to write to"),
        (["--backend", "lm-eval"], "error: --tasks: give the lm-eval tasks to score"),
        (["--backend", "helm", "--tasks", "piqa"], "error: --backend: expected 'gengen' or 'lm-eval', got 'helm'"),
        (["--backend", "lm-eval", "--tasks", "p", "--limit", "0"], "error: --limit: expected a count >= 1"),
        (["--backend", "lm-eval", "--tasks", "p", "--limit", "x"], "error: --limit: expected a count or a fraction"),
        (["--backend", "lm-eval", "--tasks", "p", "--batch-size", "big"], "error: --batch-size: expected a positive"),
    ],
)
def test_option_errors(tmp_path: Path, args: list[str], message: str) -> None:
    pytest.importorskip("torch")
    store = ["--store", str(tmp_path / "s")] if "--store" not in message and "gengen" not in message else []
    code, err = _cli("score", "--name", "m", "--checkpoints", str(_checkpoint(tmp_path)), *args, *store)
    assert code == 2, err
    assert err.strip().splitlines()[0].startswith(message) and len(err.strip().splitlines()) == 1


def test_bad_checkpoint_spec(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    common = ["score", "--backend", "lm-eval", "--tasks", "p", "--store", str(tmp_path / "s"), "--name", "m"]
    code, err = _cli(*common, "--checkpoints", str(tmp_path / "nowhere"))
    assert code == 2
    wanted = f"error: --checkpoints: {tmp_path / 'nowhere'}: no such checkpoint folder"
    assert err.strip() == f"{wanted} (hub revisions are written ID@rev1,rev2)"
    code, err = _cli(*common, "--checkpoints", "org/model@main")
    assert code == 2
    assert "no step number in its name" in err


def test_unknown_task_lists_close_matches(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("lm_eval")
    args = ["score", "--backend", "lm-eval", "--tasks", "hellaswg", "--checkpoints", str(_checkpoint(tmp_path))]
    code, err = _cli(*args, "--store", str(tmp_path / "s"), "--name", "m")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: --tasks: unknown lm-eval task 'hellaswg' (did you mean 'hellaswag'")


def test_data_that_cannot_be_loaded_offline(tmp_path: Path) -> None:
    """A hub data set that is not in the cache, and a local file that is not there: one line each, exit 2."""
    pytest.importorskip("torch")
    pytest.importorskip("lm_eval")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "gone.yaml").write_text(
        f"task: gone\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tmp_path / 'gone.jsonl'}\n"
        'test_split: test\noutput_type: multiple_choice\ndoc_to_text: "{{q}}"\ndoc_to_choice: ["a", "b"]\n'
        "doc_to_target: 0\n"
    )
    checkpoint = _checkpoint(tmp_path)
    code = f"""
from gengen.cli import main
main(["score", "--backend", "lm-eval", "--tasks", "{{task}}", "--checkpoints", "{checkpoint}",
      "--store", "{tmp_path / "s"}", "--name", "m", "--include-path", "{tasks}"])
"""
    hub_cache = {"HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets")}
    for task in ("gengen_rte", "gone"):
        done = subprocess.run(
            [sys.executable, "-c", code.replace("{task}", task)],
            capture_output=True,
            text=True,
            env={**os.environ, **OFFLINE, **hub_cache},
            check=False,
            timeout=300,
        )
        assert done.returncode == 2, done.stderr[-2000:]
        lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(lines) == 1, done.stderr[-2000:]
        assert lines[0].startswith(f"error: lm-eval task '{task}': cannot load its data (")
        assert "Traceback" not in done.stderr
