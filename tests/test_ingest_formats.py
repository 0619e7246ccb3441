"""Issue 27: an ingest format is added in one place, an entry of ``gengen.store.formats.INGEST_FORMAT_TABLE``.

The worked example of docs/extending.md ("Adding an ingest format"), run: a Hugging Face lighteval results file
becomes a format by one entry and its two functions, and ``ingest``, ``--format``, content detection and the
error messages follow. Expected scores are written by hand from the file. gengen now reads lighteval itself
(issue 36: ``gengen.ingest.lighteval``, tested in tests/test_ingest_lighteval.py); the example here is the
simpler first version, added under its own name ``example-lighteval`` so that both can be in the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gengen.store.formats as formats
from gengen.errors import UnknownFormatError
from gengen.ingest import detect_format, ingest
from gengen.ingest._common import IngestOptions, Parsed, number
from gengen.store.database import load
from gengen.store.formats import IngestFormatEntry

LIGHTEVAL = {
    "config_general": {"model_name": "HuggingFaceTB/SmolLM2-360M", "model_revision": "step-20000"},
    "results": {
        "leaderboard|arc:challenge|25": {"acc": 0.41, "acc_stderr": 0.014, "acc_norm": 0.44},
        "lighteval|piqa|0": {"acc": 0.71, "acc_stderr": 0.011},
        "all": {"acc": 0.56},
    },
}


def looks_like_lighteval(data: Any) -> bool:
    """A lighteval results file: ``config_general`` and ``results``."""
    return isinstance(data, dict) and isinstance(data.get("config_general"), dict) and "results" in data


def parse_lighteval(path: Path, data: dict[str, Any], options: IngestOptions) -> Parsed:
    """One score per task and metric (``all`` and ``*_stderr`` left out), at the step of ``step-N``."""
    config = data["config_general"]
    model = options.model or str(config["model_name"]).rsplit("/", 1)[-1]
    step = options.step if options.step is not None else int(str(config["model_revision"]).rsplit("-", 1)[-1])
    run = options.run or "main"
    rows, sources = [], []
    for task, metrics in data["results"].items():
        if task == "all":
            continue
        for metric, value in metrics.items():
            if metric.endswith("_stderr"):
                continue
            where = f"{path}: results.{task}.{metric}"
            stderr = metrics.get(f"{metric}_stderr")
            rows.append(
                {"model": model, "run": run, "step": step, "testset": task, "metric": metric,
                 "value": number(value, where), "stderr": number(stderr, where + "_stderr", missing=("N/A",))}
            )  # fmt: skip
            sources.append(where)
    return Parsed(pd.DataFrame(rows), sources, {(model, run): {"format": "example-lighteval", "file": str(path)}})


ENTRY = IngestFormatEntry(
    "example-lighteval",
    "json",
    f"{__name__}:looks_like_lighteval",
    f"{__name__}:parse_lighteval",
    "a lighteval results file",
    "'config_general' object",
)


@pytest.fixture
def lighteval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one place: the entry, first so that it is tried before lm-eval (whose files also have ``results``)."""
    monkeypatch.setattr(formats, "INGEST_FORMAT_TABLE", (ENTRY, *formats.INGEST_FORMAT_TABLE))


def test_a_format_is_one_entry(lighteval: None, tmp_path: Path) -> None:
    path = tmp_path / "results_2024.json"
    path.write_text(json.dumps(LIGHTEVAL))
    assert detect_format(path) == "example-lighteval"
    report = ingest(path, tmp_path / "s")
    assert report.formats == {"example-lighteval": 1}
    frame = load(tmp_path / "s")
    got = {(r.model, r.step, r.testset, r.metric, r.value, None if pd.isna(r.stderr) else r.stderr)
           for r in frame.itertuples()}  # fmt: skip
    assert got == {
        ("SmolLM2-360M", 20000, "leaderboard|arc:challenge|25", "acc", 0.41, 0.014),
        ("SmolLM2-360M", 20000, "leaderboard|arc:challenge|25", "acc_norm", 0.44, None),
        ("SmolLM2-360M", 20000, "lighteval|piqa|0", "acc", 0.71, 0.011),
    }
    assert set(frame["size"]) == {"360M"}
    # Named explicitly, and refused for a file that is not one, in the format's own words.
    assert ingest(path, tmp_path / "t", format="example-lighteval").rows == 3
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"results": {"piqa": {"acc": 0.5}}}))
    with pytest.raises(UnknownFormatError, match=r"other\.json: not a lighteval results file: no 'config_general'"):
        ingest(other, tmp_path / "t", format="example-lighteval")
    with pytest.raises(UnknownFormatError, match="format example-lighteval reads JSON files, not tables"):
        (tmp_path / "x.csv").write_text("a,b\n1,2\n")
        ingest(tmp_path / "x.csv", tmp_path / "t", format="example-lighteval")


def test_without_the_entry_it_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "results_2024.json"
    path.write_text(json.dumps(LIGHTEVAL))
    with pytest.raises(UnknownFormatError, match="format must be one of"):
        ingest(path, tmp_path / "s", format="example-lighteval")


def test_the_cli_lists_the_table() -> None:
    assert formats.INGEST_FORMATS == (
        "lm-eval", "trainer-state", "lighteval", "lm-eval-v0.4", "lm-eval-v0.3", "long", "wide", "runs",
    )  # fmt: skip
    assert formats.ingest_format_names() == formats.INGEST_FORMATS
