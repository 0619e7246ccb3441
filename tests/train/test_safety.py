"""Files in a study folder are data, never code; names never lead outside it; bad models fail in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from gengen.errors import ConfigError, GengenError
from gengen.executors import study_status
from gengen.executors.direct import train_study
from gengen.store.database import Store
from gengen.study.config import load_config, safe_folder_name
from gengen.training.train import STATE_FILE

pytestmark = pytest.mark.train


class _Planted:
    """Unpickling this runs a shell command: what an attacker would put in a trainer state."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def write_study(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


def plant_checkpoint(run_dir: Path, model_folder: Path, marker: Path) -> None:
    checkpoint = run_dir / "checkpoint-6"
    shutil.copytree(model_folder, checkpoint)
    state = {"step": 6, "tokens": 10, "optimizer": {}, "scheduler": {}, "scaler": {}, "rng": _Planted(marker)}
    torch.save(state, checkpoint / STATE_FILE)


def test_planted_trainer_state_is_refused_without_running(
    assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    config = load_config(write_study(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",))))
    plant_checkpoint(config.run_dir(config.runs()[0]), assets["models"]["opt"], marker)
    with pytest.raises(GengenError, match=r"trainer_state.pt: refused as resume state") as caught:
        train_study(config, log=lambda _: None, progress=False)
    assert "\n" not in str(caught.value)
    assert not marker.exists(), "unpickling the resume state ran code"
    # The run's state says why it stopped (`gengen status`).
    (status,) = study_status(config)
    assert status.status == "failed" and "refused as resume state" in (status.error or "")


def test_planted_trainer_state_through_the_cli(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    marker = tmp_path / "pwned"
    path = write_study(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",)))
    config = load_config(path)
    plant_checkpoint(config.run_dir(config.runs()[0]), assets["models"]["opt"], marker)
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and "refused as resume state" in errors[0]
    assert "Traceback" not in result.output
    assert not marker.exists()


def test_a_genuine_trainer_state_still_resumes(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    """The safe loader reads what training writes (optimizer, scheduler, scaler and RNG states)."""
    from gengen.training.train import load_trainer_state

    config = load_config(
        write_study(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",), max_steps=4, every=2))
    )
    train_study(config, log=lambda _: None, progress=False)
    state = load_trainer_state(config.run_dir(config.runs()[0]) / "checkpoint-4" / STATE_FILE)
    assert state["step"] == 4 and state["tokens"] > 0
    assert state["optimizer"]["state"] and state["scheduler"]["last_epoch"] == 4
    assert isinstance(state["rng"]["torch"], torch.Tensor)


@pytest.mark.parametrize("name", ["../../../escaped", "/tmp/absolute-escape", "a/b", "..", ".hidden"])
def test_model_names_never_lead_outside_the_output(
    name: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    text = study_toml(assets, tmp_path / "study" / "out", families=("opt",), max_steps=2, every=2)
    text = text.replace('name = "opt-tiny"', f'name = "{name}"')
    config = load_config(write_study(tmp_path / "study", text))
    run = config.runs()[0]
    runs = (tmp_path / "study" / "out" / "runs").resolve()
    assert config.run_dir(run).resolve().parent.parent == runs
    train_study(config, log=lambda _: None, progress=False)
    created = {p.resolve() for p in tmp_path.rglob("*")}
    outside = [p for p in created if not p.is_relative_to(tmp_path / "study")]
    assert outside == []
    assert not Path("/tmp/absolute-escape").exists()
    assert set(Store(tmp_path / "study" / "out").load()["model"]) == {name}  # the real name is kept


def test_safe_folder_names() -> None:
    assert safe_folder_name("opt-1.3b") == "opt-1.3b"  # ordinary names are unchanged
    for name in ("../x", "/abs", "a/b", "a\\b", "..", ".", "a\x00b", "név"):
        folder = safe_folder_name(name)
        assert "/" not in folder and "\\" not in folder and not folder.startswith(".") and folder.isascii()
    assert safe_folder_name("a/b") != safe_folder_name("a_b")  # distinct names, distinct folders


def test_control_characters_in_names_are_refused(tmp_path: Path) -> None:
    from gengen.study.config import parse_config

    data = {
        "study": {"name": "s", "id_testset": "mnli"},
        "models": [{"name": "m\x00x", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
        "task": {"train": {"source": "mnli"}},
        "testsets": [{"name": "mnli", "source": "mnli"}],
    }
    with pytest.raises(ConfigError, match=r"models\[0\]\.name: 'm\\x00x' holds the control character"):
        parse_config(data, origin="study.toml", base=tmp_path)


def cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from gengen.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_train_model_filter_matching_nothing(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    path = write_study(tmp_path, study_toml(assets, tmp_path / "out"))
    for extra in ([], ["--dry-run"]):
        code, _, stderr = cli("train", str(path), "--model", "gpt-9", *extra)
        assert code == 2
        assert stderr.strip() == "error: --model 'gpt-9': not a model of the study (models: opt-tiny, olmo2-tiny)"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("./no-such-model", "no such folder"),
        ("/definitely/not/here", "no such folder"),
        ("not a hub id!", "neither an existing local folder nor a hub id"),
    ],
)
def test_train_dry_run_checks_model_paths(
    path: str, problem: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    text = study_toml(assets, tmp_path / "out", families=("opt",)).replace(str(assets["models"]["opt"]), path)
    study = write_study(tmp_path, text)
    for extra in (["--dry-run"], []):
        code, _, stderr = cli("train", str(study), *extra)
        assert code == 2
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: model 'opt-tiny': path ") and problem in lines[0]


def test_a_folder_without_a_model_is_refused(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    (tmp_path / "empty-model").mkdir()
    text = study_toml(assets, tmp_path / "out", families=("opt",)).replace(
        str(assets["models"]["opt"]), str(tmp_path / "empty-model")
    )
    code, _, stderr = cli("train", str(write_study(tmp_path, text)), "--dry-run")
    assert code == 2 and "has no config.json" in stderr and len(stderr.strip().splitlines()) == 1


def test_unknown_hub_model_fails_in_one_line(assets: dict[str, Any], study_toml: Any, tmp_path: Path) -> None:
    """A hub id that cannot be fetched (offline here) ends in one error line, not chained OSError tracebacks."""
    text = study_toml(assets, tmp_path / "out", families=("opt",)).replace(
        str(assets["models"]["opt"]), "nobody-gengen/no-such-model"
    )
    study = write_study(tmp_path, text)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    result = subprocess.run(
        [sys.executable, "-c", "from gengen.cli import main; main()", "train", str(study)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: model 'opt-tiny': tokenizer 'nobody-gengen/no-such-model': cannot load it")


@pytest.mark.parametrize("kind", ["model", "adapter"])
def test_planted_weights_in_a_checkpoint_are_refused_without_running(
    kind: str, assets: dict[str, Any], study_toml: Any, tmp_path: Path
) -> None:
    """``gengen score`` on a checkpoint whose weights are a code-running pickle: one error line, nothing run."""
    marker = tmp_path / "pwned"
    study = write_study(tmp_path, study_toml(assets, tmp_path / "out", families=("opt",)))
    checkpoint = tmp_path / "series" / "checkpoint-5"
    if kind == "model":
        shutil.copytree(assets["models"]["opt"], checkpoint)
        (checkpoint / "model.safetensors").unlink()
        torch.save({"weight": _Planted(marker)}, checkpoint / "pytorch_model.bin")
    else:
        checkpoint.mkdir(parents=True)
        adapter = {"peft_type": "LORA", "base_model_name_or_path": str(assets["models"]["opt"]), "r": 4}
        adapter |= {"lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}
        (checkpoint / "adapter_config.json").write_text(json.dumps(adapter))
        torch.save({"weight": _Planted(marker)}, checkpoint / "adapter_model.bin")
        shutil.copy(assets["models"]["opt"] / "tokenizer.json", checkpoint)
        shutil.copy(assets["models"]["opt"] / "tokenizer_config.json", checkpoint)
    code, _, stderr = cli("score", str(study), "--name", "planted", "--checkpoints", str(checkpoint))
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "refused its weights" in lines[0], stderr
    assert not marker.exists()
