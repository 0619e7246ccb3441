"""Study configs: a valid file parses; each invalid one fails before any work, naming the key and the problem."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gengen.errors import ConfigError
from gengen.study.config import load_config, parse_config

pytestmark = pytest.mark.train

MINIMAL = {
    "study": {"name": "s", "id_testset": "mnli"},
    "models": [{"name": "m", "path": "facebook/opt-125m", "family": "opt", "size": "125m"}],
    "task": {"train": {"source": "mnli"}},
    "testsets": [{"name": "mnli", "source": "mnli"}, {"name": "hans", "source": "hans"}],
}


def with_change(path: str, value: object) -> dict:
    """MINIMAL with ``path`` (dotted; ``models.0.size``) set to ``value`` (``...`` deletes it)."""
    import copy

    data = copy.deepcopy(MINIMAL)
    *parents, last = path.split(".")
    node: object = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})  # type: ignore[index]
    if value is ...:
        del node[last]  # type: ignore[index]
    else:
        node[last] = value  # type: ignore[index]
    return data


def test_minimal_config_defaults(tmp_path: Path) -> None:
    config = parse_config(MINIMAL, origin="study.toml", base=tmp_path)
    assert config.models[0].path == "facebook/opt-125m"  # a hub id stays as written
    assert config.task.answers == (" Yes", " No")
    assert config.task.train.split == "train"
    assert config.testsets[1].split is None  # the registry's test split applies
    assert config.output == (tmp_path / "gengen-s").resolve()
    assert [r.key for r in config.runs()] == ["seed=0"]


def test_runs_cover_seeds_shots_and_data_seeds(tmp_path: Path) -> None:
    data = with_change("training.seeds", [1, 2])
    data["data"] = {"shots": [16, 64], "data_seeds": [0, 1]}
    keys = [r.key for r in parse_config(data, base=tmp_path).runs()]
    assert len(keys) == 8 and len(set(keys)) == 8
    assert "seed=2,shots=64,data_seed=1" in keys


def test_load_config_resolves_paths_against_its_folder(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "d.jsonl").write_text('{"premise": "a", "hypothesis": "b", "label": 1}\n')
    text = """
[study]
name = "s"
output = "out"
id_testset = "mine"
[[models]]
name = "m"
path = "m"
family = "opt"
size = "1"
[task]
train = { path = "d.jsonl" }
[[testsets]]
name = "mine"
path = "d.jsonl"
"""
    (tmp_path / "study.toml").write_text(text)
    config = load_config(tmp_path / "study.toml")
    assert config.models[0].path == str(tmp_path / "m")
    assert config.testsets[0].path == str(tmp_path / "d.jsonl")
    assert config.output == tmp_path / "out"
    assert config.source == tmp_path / "study.toml"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("study.name", ..., "study.name: missing (required)"),
        ("study.nmae", "x", "study.nmae: unknown key (did you mean 'name'?)"),
        ("study.id_testset", "nope", "study.id_testset: 'nope' is not one of the test sets"),
        ("models.0.size", 125, "models[0].size: expected a non-empty string, got 125"),
        ("task.train.source", "mlni", "task.train.source: unknown data set 'mlni' (did you mean 'mnli'?)"),
        ("task.prompt", "{premise} ?", "task.prompt: must contain {hypothesis}"),
        ("task.prompt", "{premise} {hypothesis} {x}", "task.prompt: invalid template"),
        ("task.answers", [" Yes"], "task.answers: expected two different strings"),
        ("task.loss", "mse", "task.loss: expected one of 'full_vocab', 'answers', got 'mse'"),
        ("training.learning_rate", -1, "training.learning_rate: expected a positive number, got -1"),
        ("training.batch_size", 2.5, "training.batch_size: expected an integer, got 2.5"),
        ("training.max_steps", 10, "training.max_steps: give either 'epochs' or 'max_steps', not both"),
        ("training.precision", "fp8", "training.precision: expected one of"),
        ("training.lora", {"r": 0}, "training.lora.r: expected a positive integer, got 0"),
        ("training.seeds", [1, 1], "training.seeds: expected a non-empty list of distinct integers"),
        ("evaluation.metrics", ["f1"], "evaluation.metrics[0]: expected one of 'acc', 'logprob', got 'f1'"),
        ("evaluation.every", 0, "evaluation.every: expected a positive integer, got 0"),
        ("data.shots", [1], "data.shots[0]: expected an integer >= 2, got 1"),
        ("data.shots", [4, 16, 4], "data.shots: 4 appears more than once; each names one run folder"),
        ("data.data_seeds", [0, 3, 3], "data.data_seeds: 3 appears more than once; each names one run folder"),
        ("testsets.1.split", "dev", "testsets[1].split: hans has no split 'dev'"),
        ("testsets.1.name", "mnli", "testsets: test set name 'mnli' appears more than once"),
        ("testsets.1.path", "absent.jsonl", "testsets[1].path: no such file or folder: "),
        ("testsets.1.labels", {"a": "Yes"}, "testsets[1].labels: must map at least one label to 'Yes' and one"),
    ],
)
def test_invalid_configs_name_the_key(path: str, value: object, expected: str) -> None:
    data = with_change(path, value)
    if path == "training.max_steps":
        data["training"]["epochs"] = 1
    with pytest.raises(ConfigError, match=re.escape(f"study.toml: {expected}")):
        parse_config(data, origin="study.toml")


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\nname = 1")
    with pytest.raises(ConfigError, match=r"bad\.toml: invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_cli_reports_config_error_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    bad = tmp_path / "study.toml"
    bad.write_text('[study]\nname = "s"\n')
    result = CliRunner().invoke(app, ["train", str(bad), "--dry-run"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: study.toml: study.id_testset: missing (required)"
