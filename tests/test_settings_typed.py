"""Settings typed end to end (issue 37, item 3): ``Analysis.settings`` is the checked :class:`Settings` record.

Outside analyse/ every reader takes attributes (no ``settings[...]`` or ``settings.get(...)`` string reads, held
here by reading the source); ``summary.json`` is :meth:`Settings.as_dict` and reads back to an equal record; an
analysis folder written before an option existed still loads, without being given a value it never recorded; a
recorded value the analysis does not take is one line naming the file and the setting.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import gengen
from gengen.analyse.options import RESOLVED_FIELDS, Settings, make_settings, settings_from_record
from gengen.calibration.simulate import simulate_trajectories
from gengen.errors import GengenError, InputError

PACKAGE = Path(gengen.__file__).parent

#: String reads of a ``settings`` object outside analyse/ that are not an analysis' settings: each names the
#: file (by name: the modules move between wings) and the expression, and why it stays.
NOT_ANALYSIS_SETTINGS = {
    ("verdict.py", "self.settings.get('alpha', 0.05)"): "the verdict's own record (verdict.json), a dict",
    ("verdict.py", "comparison.settings.get('source')"): "the comparison's record (comparison.json), a dict",
    ("paper_tables.py", "settings.get('adjust')"): "verdict.json's settings object, read from JSON",
}


def _string_reads(path: Path) -> list[str]:
    """The expressions of ``path`` that read a ``settings`` object by a string key."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        receiver, key = None, None
        if isinstance(node, ast.Subscript):
            receiver, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            receiver, key = node.func.value, node.args[0] if node.args else None
        named = (isinstance(receiver, ast.Name) and receiver.id == "settings") or (
            isinstance(receiver, ast.Attribute) and receiver.attr == "settings"
        )
        if named and isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append(ast.unparse(node))
    return found


def test_no_string_reads_of_an_analysis_settings_outside_analyse() -> None:
    reads = [
        (path.name, expression)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "analyse"
        for expression in _string_reads(path)
    ]
    assert [read for read in reads if read not in NOT_ANALYSIS_SETTINGS] == []
    # the allowance is not stale: each entry still names a read that exists
    assert set(NOT_ANALYSIS_SETTINGS) <= set(reads)


def test_the_source_scan_finds_string_reads() -> None:
    """The scan above can fail: it finds each form of string read (and no attribute read)."""
    source = 'a = analysis.settings["alpha"]\nb = settings.get("fit")\nc = x.settings.alpha\nd = settings[0]\n'
    path = Path(__file__).parent / "_scan_probe.py"
    try:
        path.write_text(source, encoding="utf-8")
        assert _string_reads(path) == ["analysis.settings['alpha']", "settings.get('fit')"]
    finally:
        path.unlink()


@pytest.fixture(scope="module")
def analysis() -> gengen.Analysis:
    scores = simulate_trajectories(n=30, n_testsets=3, seed=4)
    return gengen.analyse(scores, id_testset="id", metric="accuracy", inference=["sieve", "t-test"], n_boot=99)


def test_analysis_settings_are_the_typed_record_with_what_the_data_resolved(analysis: gengen.Analysis) -> None:
    settings = analysis.settings
    assert isinstance(settings, Settings)
    assert settings.inference == ("sieve", "t-test") and settings.n_boot == 99
    assert settings.mode_resolved == "checkpoints"
    assert settings.ood_resolved == ("ood_1", "ood_2", "ood_3")
    assert settings.primary_p == "p_sieve" and settings.unrecorded == ()
    record = settings.as_dict()
    assert [key for key in record if key in RESOLVED_FIELDS] == list(RESOLVED_FIELDS)
    assert record["inference"] == ["sieve", "t-test"] and record["ood_resolved"] == ["ood_1", "ood_2", "ood_3"]
    # a record made by make_settings has resolved nothing, and says nothing about it
    assert not set(RESOLVED_FIELDS) & set(make_settings(id_testset="id").as_dict())


def test_summary_json_reads_back_to_an_equal_record(analysis: gengen.Analysis, tmp_path: Path) -> None:
    analysis.to_dir(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"] == json.loads(json.dumps(analysis.settings.as_dict()))
    assert gengen.Analysis.from_dir(tmp_path).settings == analysis.settings


def test_a_folder_written_before_an_option_existed_loads_without_inventing_it(
    analysis: gengen.Analysis, tmp_path: Path
) -> None:
    analysis.to_dir(tmp_path)
    path = tmp_path / "summary.json"
    summary = json.loads(path.read_text())
    for key in ("jobs", "keep_related", "related_groups", "inference", "primary_p", "mode_resolved", "conditions"):
        del summary["settings"][key]
    path.write_text(json.dumps(summary))
    loaded = gengen.Analysis.from_dir(tmp_path)
    assert set(loaded.settings.unrecorded) == {"jobs", "keep_related", "related_groups", "inference", "mode_resolved",
                                               "conditions"}  # fmt: skip
    assert loaded.settings.keep_related is False and loaded.settings.jobs is None  # the table's defaults
    assert loaded.settings.mode_resolved is None and loaded.settings.conditions == ()
    record = loaded.settings.as_dict()
    assert not {"jobs", "keep_related", "related_groups", "inference", "primary_p"} & set(record)
    assert record["id_testset"] == "id" and record["n_boot"] == 99
    # written again, the folder still lacks what it never recorded
    loaded.to_dir(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "summary.json").read_text())["settings"]
    assert not {"keep_related", "mode_resolved", "conditions"} & set(again)
    assert (
        again["ood_resolved"] == ["ood_1", "ood_2", "ood_3"]
        and again["pooling_cells"] == summary["settings"]["pooling_cells"]
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("fit", "banana", "settings 'fit' must be one of linear, gam, auto, got 'banana'"),
        ("n_boot", -3, "settings 'n_boot' must be an integer from 1 to"),
        ("mode_resolved", "sideways", "settings 'mode_resolved' must be checkpoints or across_runs"),
        ("conditions", [1], "settings 'conditions' must be a list of names"),
    ],
)
def test_a_recorded_value_the_analysis_does_not_take_is_one_line_naming_file_and_setting(
    analysis: gengen.Analysis, tmp_path: Path, key: str, value: object, message: str
) -> None:
    analysis.to_dir(tmp_path)
    path = tmp_path / "summary.json"
    summary = json.loads(path.read_text())
    summary["settings"][key] = value
    path.write_text(json.dumps(summary))
    with pytest.raises(InputError) as caught:
        gengen.Analysis.from_dir(tmp_path)
    text = str(caught.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text


def test_a_record_without_its_id_or_ood_is_refused() -> None:
    with pytest.raises(GengenError, match="ood_resolved"):
        settings_from_record({"id_testset": "id"})
