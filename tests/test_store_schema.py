"""Issue 27: run keys stored as columns, the schema 1 -> 2 migration, and older stores read as they are.

The schema 1 store is built here with the old DDL through ``sqlite3`` directly (not through gengen), so the
test does not depend on gengen still knowing how to write it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gengen.store.database as store_module
from gengen.errors import StoreError
from gengen.store.database import Store, load, parse_run_label, run_label, split_model_name

SCHEMA_1 = """
CREATE TABLE scores (
    study TEXT NOT NULL, model TEXT NOT NULL, family TEXT NOT NULL, size TEXT NOT NULL, run TEXT NOT NULL,
    seed INTEGER, shots INTEGER, step INTEGER NOT NULL, tokens INTEGER, epoch REAL, testset TEXT NOT NULL,
    metric TEXT NOT NULL, value REAL, n_examples INTEGER, stderr REAL, extra TEXT,
    PRIMARY KEY (study, model, run, step, testset, metric)
) WITHOUT ROWID;
CREATE TABLE manifests (
    model TEXT NOT NULL, run TEXT NOT NULL, manifest TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, PRIMARY KEY (model, run)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""

# (run label, seed column, shots column) as a schema 1 gengen wrote them: seed/shots parsed, data_seed lost.
OLD_ROWS = [
    ("seed=1,shots=64,data_seed=0", 1, 64, 0, "mnli", 0.61),
    ("seed=1,shots=64,data_seed=0", 1, 64, 100, "mnli", 0.66),
    ("seed=2,shots=64,data_seed=3", 2, 64, 0, "mnli", 0.58),
    ("seed=7", None, None, 0, "hans", 0.52),  # keys not filled by the writer: the migration fills them
    ("main", None, None, 0, "hans", 0.5),
]


def _old_store(path: Path) -> Path:
    """A schema 1 store holding OLD_ROWS, written with sqlite3 only."""
    path.mkdir(parents=True, exist_ok=True)
    database = path / "gengen.sqlite"
    with sqlite3.connect(database) as conn:
        conn.executescript(SCHEMA_1)
        conn.executemany(
            "INSERT INTO scores (study, model, family, size, run, seed, shots, step, testset, metric, value) "
            "VALUES ('old', 'pythia-160m', 'pythia', '160m', ?, ?, ?, ?, ?, 'acc', ?)",
            OLD_ROWS,
        )
        conn.execute(
            "INSERT INTO manifests VALUES ('pythia-160m', 'main', '{\"format\": \"long\"}', '2025-01-01', '2025-01-01')"
        )
    return database


def _expected() -> pd.DataFrame:
    """The scores of OLD_ROWS with the keys a reader should see, sorted as load() sorts them."""
    rows = [
        {"run": "main", "seed": None, "shots": None, "data_seed": None, "step": 0, "testset": "hans", "value": 0.5},
        {"run": "seed=1,shots=64,data_seed=0", "seed": 1, "shots": 64, "data_seed": 0, "step": 0, "testset": "mnli",
         "value": 0.61},
        {"run": "seed=1,shots=64,data_seed=0", "seed": 1, "shots": 64, "data_seed": 0, "step": 100,
         "testset": "mnli", "value": 0.66},
        {"run": "seed=2,shots=64,data_seed=3", "seed": 2, "shots": 64, "data_seed": 3, "step": 0, "testset": "mnli",
         "value": 0.58},
        {"run": "seed=7", "seed": 7, "shots": None, "data_seed": None, "step": 0, "testset": "hans", "value": 0.52},
    ]  # fmt: skip
    frame = pd.DataFrame(rows)
    for name in ("seed", "shots", "data_seed"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _check(frame: pd.DataFrame) -> None:
    columns = ["run", "seed", "shots", "data_seed", "step", "testset", "value"]
    got = frame[columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, _expected()[columns], check_dtype=False)
    for name in ("seed", "shots", "data_seed"):
        assert str(frame[name].dtype) == "Int64"


def test_an_old_store_migrates_in_place_and_reads_back_the_same_scores(tmp_path: Path) -> None:
    database = _old_store(tmp_path / "study")
    store = Store(tmp_path / "study", study="old")  # writable, but upgraded only by its first write (issue 36)
    before = database.read_bytes()
    _check(store.load())
    assert store.schema_version == 1 and database.read_bytes() == before
    assert store.write_scores([{"model": "pythia-160m", "run": "seed=7", "step": 0, "testset": "hans",
                                "metric": "acc", "value": 0.52}]) == 0  # fmt: skip
    assert store.schema_version == store_module.SCHEMA_VERSION == 2
    with sqlite3.connect(database) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(scores)")]
        stored = conn.execute("SELECT run, seed, shots, data_seed FROM scores ORDER BY run, step").fetchall()
    assert "data_seed" in columns
    # The new columns hold the parsed keys (the label users see is unchanged).
    assert stored == [
        ("main", None, None, None),
        ("seed=1,shots=64,data_seed=0", 1, 64, 0),
        ("seed=1,shots=64,data_seed=0", 1, 64, 0),
        ("seed=2,shots=64,data_seed=3", 2, 64, 3),
        ("seed=7", 7, None, None),
    ]
    _check(store.load())
    assert store.manifest("pythia-160m", "main") == {"format": "long"}
    # New scores go in next to the old ones.
    assert store.write_scores([{"model": "pythia-160m", "run": "seed=3,shots=8,data_seed=1", "step": 0,
                                "testset": "mnli", "metric": "acc", "value": 0.4}]) == 1  # fmt: skip
    new = store.load(run="seed=3,shots=8,data_seed=1")
    assert new[["seed", "shots", "data_seed"]].iloc[0].tolist() == [3, 8, 1]


def test_an_old_store_is_read_as_it_is_without_writing(tmp_path: Path) -> None:
    """load() and read-only stores do not migrate: the file is untouched, the keys are filled on reading."""
    database = _old_store(tmp_path / "study")
    before = database.read_bytes()
    _check(load(tmp_path / "study"))
    _check(Store(database, read_only=True).load())
    assert database.read_bytes() == before
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)


def test_an_old_store_on_read_only_media_loads(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    database = _old_store(folder)
    database.chmod(stat.S_IRUSR)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(database, os.W_OK):
            pytest.skip("running as a user who can write read-only files")
        _check(load(folder))
    finally:
        folder.chmod(stat.S_IRWXU)
        database.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_failed_migration_leaves_the_old_store_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = _old_store(tmp_path / "study")

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE scores ADD COLUMN data_seed INTEGER")
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(store_module.MIGRATIONS, 1, broken)
    store = Store(tmp_path / "study")
    before = database.read_bytes()
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.write_scores([{"model": "m", "step": 0, "testset": "t", "metric": "acc", "value": 0.5}])
    assert database.read_bytes() == before
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
        assert "data_seed" not in [row[1] for row in conn.execute("PRAGMA table_info(scores)")]
    monkeypatch.undo()
    _check(Store(tmp_path / "study").load())  # and migrates cleanly afterwards


def test_a_store_of_a_newer_gengen_is_still_refused(tmp_path: Path) -> None:
    database = _old_store(tmp_path / "study")
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA user_version = 3")
    for opening in (lambda: Store(tmp_path / "study"), lambda: load(tmp_path / "study")):
        with pytest.raises(StoreError, match="version 3 is newer than this gengen's \\(2\\)"):
            opening()


def test_written_run_keys_are_columns(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    rows = [
        {"model": "m", "run": run_label(1, 64, 0), "step": 0, "testset": "t", "metric": "acc", "value": 0.5},
        {"model": "m", "run": "seed=2", "seed": 9, "step": 0, "testset": "t", "metric": "acc", "value": 0.5},
        {"model": "m", "run": "main", "step": 0, "testset": "t", "metric": "acc", "value": 0.5},
    ]
    store.write_scores(rows)
    with sqlite3.connect(store.path) as conn:
        found = conn.execute("SELECT run, seed, shots, data_seed FROM scores ORDER BY run").fetchall()
    # A given seed column wins over the label; a label's keys fill the columns otherwise.
    assert found == [("main", None, None, None), ("seed=1,shots=64,data_seed=0", 1, 64, 0), ("seed=2", 9, None, None)]


def test_run_labels_round_trip() -> None:
    for seed, shots, data_seed in [(0, None, None), (3, 64, 2), (-1, 8, 0)]:
        label = run_label(seed, shots, data_seed)
        keys = {"seed": seed, "shots": shots, "data_seed": data_seed}
        assert parse_run_label(label) == {k: v for k, v in keys.items() if v is not None}
    assert parse_run_label("seed=1; shots=8 data_seed=2") == {"seed": 1, "shots": 8, "data_seed": 2}
    assert parse_run_label("myseed=1,shots=x") == {}


def test_load_filters_by_study(tmp_path: Path) -> None:
    """The library filter the CLI's --study options use: one study of a store holding several."""
    store = Store(tmp_path / "s")
    for study, value in (("a", 0.1), ("b", 0.2)):
        store.write_scores([{"study": study, "model": "m", "step": 0, "testset": "t", "metric": "acc", "value": value}])
    assert store.studies() == ["a", "b"]
    assert load(tmp_path / "s", study="b")["value"].tolist() == [0.2]
    assert sorted(store.load(study=["a", "b"])["value"]) == [0.1, 0.2]


@pytest.mark.parametrize(
    ("model", "family", "size"),
    [
        ("1B-1xC", "1xC", "1B"),
        ("allenai/OLMo-ladder-190M-5xC", "OLMo-ladder", "190M"),
        ("peteish7", "peteish", "7B"),
        ("peteish13", "peteish", "13B"),
        ("EleutherAI/pythia-160m", "pythia", "160m"),
        ("allenai/OLMo-2-1124-7B", "OLMo-2-1124", "7B"),
        ("HuggingFaceTB/SmolLM2-360M", "SmolLM2", "360M"),
        ("1B", "1B", "1B"),
        ("gpt2", "gpt2", ""),
        ("bert7", "bert7", ""),  # a number after a name is a size only for the known code names
    ],
)
def test_sizes_from_common_naming_schemes(model: str, family: str, size: str) -> None:
    assert split_model_name(model) == (family, size)


def test_many_rows_round_trip_exactly(tmp_path: Path) -> None:
    """The vectorised row conversions keep every value: big integers, NaN, missing keys, text."""
    n = 5000
    rng = np.random.default_rng(1)
    values = rng.uniform(size=n)
    values[::7] = np.nan
    frame = pd.DataFrame(
        {
            "model": [f"m{i % 3}" for i in range(n)],
            "run": ["main"] * n,
            "seed": pd.array([None if i % 5 == 0 else 2**62 + i for i in range(n)], dtype="Int64"),
            "step": np.arange(n),
            "testset": "t",
            "metric": "acc",
            "value": values,
        }
    )
    store = Store(tmp_path / "s")
    assert store.write_scores(frame) == n
    back = store.load().sort_values(["model", "step"]).reset_index(drop=True)
    expected = frame.sort_values(["model", "step"]).reset_index(drop=True)
    np.testing.assert_array_equal(back["value"].to_numpy(), expected["value"].to_numpy())
    assert back["seed"].tolist() == expected["seed"].tolist()
    assert back["model"].tolist() == expected["model"].tolist()


def test_run_level_columns_that_vary_within_a_run_are_read_row_by_row(tmp_path: Path) -> None:
    """load() reads a run's family, size and keys once per run when they are constant; when they are not
    (a hand-written table may say so), every row keeps its own."""
    store = Store(tmp_path / "s")
    base = {"model": "m-1m", "run": "main", "testset": "t", "metric": "acc", "value": 0.5}
    store.write_scores(
        [
            {**base, "step": 0, "family": "a", "seed": 1},
            {**base, "step": 1, "family": "b"},
            {**base, "step": 2, "family": "b", "seed": 1},
            {**base, "model": "other-2m", "step": 0},
        ]
    )
    frame = store.load()
    assert frame[["model", "step", "family", "size"]].values.tolist() == [
        ["m-1m", 0, "a", "1m"],
        ["m-1m", 1, "b", "1m"],
        ["m-1m", 2, "b", "1m"],
        ["other-2m", 0, "other", "2m"],
    ]
    assert frame["seed"].tolist() == [1, pd.NA, 1, pd.NA]
    constant = Store(tmp_path / "c")
    constant.write_scores([{**base, "step": s, "seed": 4, "shots": 8} for s in range(3)])
    loaded = constant.load()
    assert loaded["seed"].tolist() == [4, 4, 4] and loaded["shots"].tolist() == [8, 8, 8]
    assert loaded["data_seed"].isna().all() and loaded["step"].tolist() == [0, 1, 2]


def test_the_cli_exports_an_old_store_without_upgrading_it_and_ingest_upgrades_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    database = _old_store(tmp_path / "study")
    before = database.read_bytes()
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(tmp_path / "study"), str(tmp_path / "out.csv")])
    assert result.exit_code == 0, result.output
    assert database.read_bytes() == before
    exported = pd.read_csv(tmp_path / "out.csv").sort_values(["run", "step"])
    assert exported["data_seed"].tolist()[1:4] == [0, 0, 3]
    table = tmp_path / "more.csv"
    table.write_text("model,run,step,testset,metric,value\npythia-160m,seed=9,0,mnli,acc,0.7\n")
    result = runner.invoke(app, ["ingest", str(table), "--store", str(tmp_path / "study"), "--study", "old", "-q"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    assert len(load(tmp_path / "study")) == len(OLD_ROWS) + 1


# ----------------------------------------------------------------------------- issue 36: read before you write


def _bytes_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_failed_write_leaves_an_old_store_byte_identical(tmp_path: Path) -> None:
    """A conflict (the write fails after reading its input) rolls back the upgrade with the write."""
    from gengen.errors import StoreConflictError

    _old_store(tmp_path / "study")
    before = _bytes_of(tmp_path / "study")
    store = Store(tmp_path / "study", study="old")
    with pytest.raises(StoreConflictError):
        store.write_scores([{"model": "pythia-160m", "run": "main", "step": 0, "testset": "hans", "metric": "acc",
                             "value": 0.9}])  # fmt: skip
    assert _bytes_of(tmp_path / "study") == before


def test_the_cli_leaves_an_old_store_byte_identical_when_ingest_fails(tmp_path: Path) -> None:
    """The issue's case: `gengen ingest bad.json --store OLD` exited 2 but had already upgraded the store."""
    from gengen.cli import main

    _old_store(tmp_path / "study")
    before = _bytes_of(tmp_path / "study")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit) as exited:
        main(["ingest", str(tmp_path / "bad.json"), "--store", str(tmp_path / "study"), "-q"])
    assert exited.value.code == 2
    assert _bytes_of(tmp_path / "study") == before


def _edited(tmp_path: Path, *statements: str) -> Path:
    database = _old_store(tmp_path / "study")
    with sqlite3.connect(database) as conn:
        for statement in statements:
            conn.execute(statement)
    return database


@pytest.mark.parametrize(
    ("statements", "problem"),
    [
        (["PRAGMA user_version = -1"], "store schema version -1 is not one gengen writes (0 to 2)"),
        (["PRAGMA user_version = 3"], "store schema version 3 is newer than this gengen's (2)"),
        (["DROP TABLE manifests"], "no manifests table (a gengen store of schema version 1 has scores and manifests)"),
        (["DROP TABLE scores"], "no scores table"),
    ],
    ids=["negative-version", "future-version", "no-manifests", "no-scores"],
)
def test_a_store_gengen_did_not_write_is_refused_naming_it(tmp_path: Path, statements: list[str], problem: str) -> None:
    database = _edited(tmp_path, *statements)
    before = database.read_bytes()
    for opening in (lambda: Store(tmp_path / "study"), lambda: load(tmp_path / "study")):
        with pytest.raises(StoreError) as error:
            opening()
        assert str(error.value).startswith(f"{database}: {problem}"), str(error.value)
    assert database.read_bytes() == before


@pytest.mark.parametrize(
    ("label", "problem"),
    [
        ("seed=99999999999999999999999", "seed=99999999999999999999999 is out of range"),
        ("seed=1,shots=-5", "shots=-5 is out of range (shots is an integer from 0 to 2**63 - 1)"),
        ("seed=9223372036854775808", "seed=9223372036854775808 is out of range"),
    ],
    ids=["seed-overflow", "negative-shots", "seed-2-to-the-63"],
)
def test_the_upgrade_refuses_a_label_out_of_range_and_changes_nothing(tmp_path: Path, label: str, problem: str) -> None:
    database = _edited(tmp_path, f"UPDATE scores SET run = '{label}' WHERE run = 'seed=7'")
    before = database.read_bytes()
    store = Store(tmp_path / "study")
    with pytest.raises(StoreError) as error:
        store.write_scores([{"model": "m", "step": 0, "testset": "t", "metric": "acc", "value": 0.5}])
    assert str(error.value).startswith(f"{database}: cannot upgrade from schema version 1 (nothing was changed)")
    assert problem in str(error.value)
    assert database.read_bytes() == before


@pytest.mark.parametrize(
    ("label", "stored", "expected"),
    [
        ("seed=7", (None, 5), (7, 5)),  # the case: stored shots 5, a label without shots
        ("seed=7,shots=3,data_seed=1", (None, 5), (7, 5)),
        ("seed=7,shots=3,data_seed=1", (8, None), (8, 3)),
    ],
    ids=["label-without-shots", "label-with-other-shots", "label-with-other-seed"],
)
def test_the_upgrade_keeps_stored_keys_and_fills_only_empty_ones(
    tmp_path: Path, label: str, stored: tuple[int | None, int | None], expected: tuple[int, int]
) -> None:
    """Planted bug (issue 36, item 8): filling seed/shots from the label over the stored values loses them."""
    database = _edited(
        tmp_path,
        f"UPDATE scores SET run = '{label}', seed = {stored[0] or 'NULL'}, shots = {stored[1] or 'NULL'} "
        "WHERE run = 'seed=7'",
    )
    Store(tmp_path / "study").write_scores([{"model": "m", "step": 0, "testset": "t", "metric": "acc", "value": 0.5}])
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT seed, shots FROM scores WHERE run = ?", (label,)).fetchone() == expected
