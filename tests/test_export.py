"""Export to CSV/Parquet, long and wide, and the round trip back through ``ingest``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gengen.cli import app
from gengen.errors import GengenError
from gengen.export import export, to_wide
from gengen.ingest import ingest
from gengen.store import Store, load

PYTHIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pythia-lm-eval-v0.3"

pytestmark = pytest.mark.skipif(not PYTHIA.is_dir(), reason="../shared/data/pythia-lm-eval-v0.3 is not there")


@pytest.fixture(scope="module")
def pythia_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with both Pythia models, a few extra-rich rows and a manifest."""
    folder = tmp_path_factory.mktemp("export") / "study"
    ingest(PYTHIA, folder)
    Store(folder).write_scores(
        [{"model": "tiny-1m", "run": "seed=2,shots=16", "step": s, "tokens": s * 2**21, "epoch": s / 10,
          "testset": "sciq", "metric": "acc", "value": 0.25 + s / 100, "n_examples": 1000, "stderr": 0.01}
         for s in (0, 5, 10)]
    )  # fmt: skip
    return folder


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_long_round_trip(pythia_store: Path, tmp_path: Path, suffix: str) -> None:
    original = load(pythia_store)
    out = tmp_path / f"scores{suffix}"
    assert export(pythia_store, out) == len(original)
    ingest(out, tmp_path / "copy")
    copy = load(tmp_path / "copy")
    pd.testing.assert_frame_equal(copy, original)


def test_long_csv_values_are_exact(pythia_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.csv"
    export(pythia_store, out, model="pythia-v1.1-160m", testset="lambada_openai")
    text = (PYTHIA / "pythia-160m" / "160m_step143000.json").read_text()
    expected = json.loads(text)["results"]["lambada_openai"]["ppl"]
    table = pd.read_csv(out)
    row = table[(table["step"] == 143000) & (table["metric"] == "ppl")]
    assert row["value"].tolist() == [expected]
    assert set(table["model"]) == {"pythia-v1.1-160m"}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_wide_export_and_round_trip(pythia_store: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"wide{suffix}"
    rows = export(pythia_store, out, wide=True)
    assert rows == 27 + 27 + 3  # one row per checkpoint
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(table.columns[:10]) == ["study", "model", "family", "size", "run", "seed", "shots", "step",
                                        "tokens", "epoch"]  # fmt: skip
    step = json.loads((PYTHIA / "pythia-410m" / "410m_step13000.json").read_text())
    row = table[(table["model"] == "pythia-v1.1-410m") & (table["step"] == 13000)]
    assert row["arc_easy/acc"].iloc[0] == step["results"]["arc_easy"]["acc"]
    assert row["winogrande/acc"].iloc[0] == step["results"]["winogrande"]["acc"]
    tiny = table[table["model"] == "tiny-1m"].sort_values("step")
    assert tiny["tokens"].tolist() == [0, 5 * 2**21, 10 * 2**21] and tiny["seed"].tolist() == [2] * 3
    assert tiny["sciq/acc"].tolist() == [0.25, 0.30, 0.35]
    ingest(out, tmp_path / "copy")
    key = ["study", "model", "run", "step", "testset", "metric", "value", "seed", "shots", "tokens", "epoch"]
    pd.testing.assert_frame_equal(load(tmp_path / "copy")[key], load(pythia_store)[key])


def test_to_wide_refuses_metrics_with_the_separator() -> None:
    scores = pd.DataFrame(
        {"study": "s", "model": "m", "family": "m", "size": "", "run": "main", "seed": pd.NA, "shots": pd.NA,
         "step": [0], "tokens": pd.NA, "epoch": float("nan"), "testset": ["a"], "metric": ["acc/norm"],
         "value": [0.5]}
    )  # fmt: skip
    with pytest.raises(GengenError, match=r"metric 'acc/norm' contains '/'"):
        to_wide(scores)


def test_unknown_export_format(pythia_store: Path, tmp_path: Path) -> None:
    with pytest.raises(GengenError, match=r"scores\.xlsx: cannot tell the export format"):
        export(pythia_store, tmp_path / "scores.xlsx")
    assert export(pythia_store, tmp_path / "scores.xlsx", format="csv", model="tiny-1m") == 3


def test_cli_export(pythia_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(app, ["export", str(pythia_store), str(out), "--wide", "--model", "tiny-1m"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote 3 rows to {out}"
    assert pd.read_parquet(out)["sciq/acc"].tolist() == [0.25, 0.30, 0.35]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}", "{out}.csv"], r"no gengen store here"),
        (["{store}", "{out}.txt"], r"cannot tell the export format from the suffix '\.txt'"),
        (["{store}", "{out}.csv", "--format", "xml"], r"--format: expected csv or parquet, got 'xml'"),
    ],
)
def test_cli_export_bad_input_exits_2(pythia_store: Path, tmp_path: Path, args: list[str], message: str) -> None:
    values = {"missing": str(tmp_path / "missing"), "out": str(tmp_path / "out"), "store": str(pythia_store)}
    result = CliRunner().invoke(app, ["export", *(a.format(**values) for a in args)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(message, lines[0])
