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
from gengen.ingest import ingest
from gengen.store.database import Store, load
from gengen.store.export import export, to_wide

PYTHIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pythia-lm-eval-v0.3"


@pytest.fixture(scope="module")
def pythia_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with both Pythia models, a few extra-rich rows and a manifest."""
    if not PYTHIA.is_dir():
        pytest.skip("../shared/data/pythia-lm-eval-v0.3 is not there")
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
    assert list(table.columns[:11]) == ["study", "model", "family", "size", "run", "seed", "shots", "data_seed", "step",
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


# ------------------------------------------------------------------ issue 26: export never destroys anything

ROWS = [{"model": "m", "step": s, "testset": t, "metric": "acc", "value": 0.5 + s / 100} for s in (0, 1) for t in "ab"]


def _small_store(folder: Path) -> Path:
    Store(folder).write_scores(ROWS)
    return folder


def _dump(database: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["direct", "relative", "dot-dot", "folder-link", "file-link"])
def test_export_never_writes_over_its_own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    store = _small_store(tmp_path / "study")
    database = store / "gengen.sqlite"
    before = _dump(database)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alias").symlink_to("study")
    (tmp_path / "link.csv").symlink_to("study/gengen.sqlite")
    out = {
        "direct": database,
        "relative": Path("study/gengen.sqlite"),
        "dot-dot": Path("alias/../study/gengen.sqlite"),
        "folder-link": Path("alias/gengen.sqlite"),
        "file-link": Path("link.csv"),
    }[how]
    expected = "a symbolic link" if how == "file-link" else "is the store being exported"
    with pytest.raises(GengenError, match=re.escape(f"{out}: {expected}")):
        export(store, out, format="csv")
    assert _dump(database) == before
    assert load(store).equals(load(store)) and len(load(store)) == 4


def test_export_refuses_other_stores_read_only_and_special_files(tmp_path: Path) -> None:
    store = _small_store(tmp_path / "study")
    other = _small_store(tmp_path / "other") / "gengen.sqlite"
    with pytest.raises(GengenError, match=r"other/gengen\.sqlite: an SQLite database \(a gengen store\?\)"):
        export(store, other, format="parquet")
    locked = tmp_path / "locked.csv"
    locked.write_text("keep me\n")
    locked.chmod(0o444)
    with pytest.raises(GengenError, match=r"locked\.csv: a read-only file; export does not replace it"):
        export(store, locked)
    assert locked.read_text() == "keep me\n"
    with pytest.raises(GengenError, match=r"^/dev/null: not a regular file"):
        export(store, Path("/dev/null"), format="csv")


@pytest.mark.parametrize(("name", "format"), [("out.csv", "parquet"), ("out.parquet", "csv"), ("out.pq", "csv")])
def test_export_format_must_agree_with_the_suffix(tmp_path: Path, name: str, format: str) -> None:
    store = _small_store(tmp_path / "study")
    with pytest.raises(GengenError, match=rf"^format {format} into .*{re.escape(name)}, whose suffix"):
        export(store, tmp_path / name, format=format)  # type: ignore[arg-type]
    assert not (tmp_path / name).exists()
    assert export(store, tmp_path / "out.txt", format="csv") == 4  # an unknown suffix takes the format given
    assert pd.read_csv(tmp_path / "out.txt")["value"].tolist() == [r["value"] for r in ROWS]


def test_export_replaces_an_ordinary_file_with_an_ordinary_file(tmp_path: Path) -> None:
    import os
    import stat

    store = _small_store(tmp_path / "study")
    out = tmp_path / "scores.csv"
    out.write_text("old\n")
    assert export(store, out) == 4
    assert pd.read_csv(out)["value"].tolist() == [r["value"] for r in ROWS]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # not mkstemp's private 0600


def _immutable(path: Path) -> None:
    """Read-only for root too (chattr +i), or skip."""
    import os
    import shutil
    import subprocess

    for item in [path, *path.iterdir()]:
        item.chmod(0o555 if item.is_dir() else 0o444)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("root without chattr")
        for item in [*path.iterdir(), path]:
            done = subprocess.run(["chattr", "+i", str(item)], capture_output=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"chattr +i: {done.stderr.decode(errors='replace').strip()}")


def _mutable(path: Path) -> None:
    import subprocess

    subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True, check=False)
    for item in [path, *path.iterdir()]:
        item.chmod(0o755 if item.is_dir() else 0o644)


@pytest.mark.parametrize("side_files", [True, False])
def test_export_from_a_read_only_store(tmp_path: Path, side_files: bool) -> None:
    """A store on read-only media, or shared read-only: export (and load) read it without writing."""
    import sqlite3

    store = _small_store(tmp_path / "study")
    if not side_files:  # checkpointed and closed: no -wal/-shm beside it, and none can be made in the folder
        conn = sqlite3.connect(store / "gengen.sqlite")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.close()
    before = sorted(p.name for p in store.iterdir())
    _immutable(store)
    try:
        out = tmp_path / "scores.csv"
        result = CliRunner().invoke(app, ["export", str(store), str(out)])
        assert result.exit_code == 0, result.output
        assert pd.read_csv(out)["value"].tolist() == [r["value"] for r in ROWS]
        assert sorted(p.name for p in store.iterdir()) == before
    finally:
        _mutable(store)


def test_cli_export_one_study_of_several(tmp_path: Path) -> None:
    store = _small_store(tmp_path / "study")
    Store(store, study="copy").write_scores(ROWS)  # the same files ingested again under another study name
    out = tmp_path / "one.csv"
    result = CliRunner().invoke(app, ["export", str(store), str(out), "--study", "copy"])
    assert result.exit_code == 0, result.output
    exported = pd.read_csv(out)
    assert set(exported["study"]) == {"copy"} and len(exported) == len(ROWS)
    result = CliRunner().invoke(app, ["export", str(store), str(out), "--study", "nope"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --study 'nope' is not in the store; studies: copy, study"
