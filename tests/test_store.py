"""The results store: schema, conflict semantics, manifests, concurrent writers and crash safety.

Expectations are written down here (column dtypes, values, messages) or read back with plain ``sqlite3``,
never taken from the store's own earlier output.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gengen.store.database as store_module
from gengen.errors import GengenError, InputError, StoreConflictError, StoreError
from gengen.store.database import Store, load

PYTHON_ROOT = Path(store_module.__file__).resolve().parents[1]

EXPECTED_COLUMNS = [
    "study", "model", "family", "size", "run", "seed", "shots", "data_seed", "step", "tokens", "epoch",
    "testset", "metric", "value", "n_examples",
]  # fmt: skip


def score(**fields: object) -> dict[str, object]:
    """One score record with defaults for the required fields."""
    record: dict[str, object] = {
        "model": "EleutherAI/pythia-160m", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5,
    }  # fmt: skip
    record.update(fields)
    return record


def sql(path: Path, query: str) -> list[tuple[object, ...]]:
    """Run a query with plain sqlite3 (an independent look at the file)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_new_store_is_wal_sqlite_with_versioned_schema(tmp_path: Path) -> None:
    store = Store(tmp_path / "study")
    database = tmp_path / "study" / "gengen.sqlite"
    assert store.path == database
    assert database.is_file()
    assert sql(database, "PRAGMA journal_mode") == [("wal",)]
    assert sql(database, "PRAGMA user_version") == [(store_module.SCHEMA_VERSION,)] == [(2,)]
    assert store.schema_version == 2
    assert store.study == "study"
    tables = {name for (name,) in sql(database, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"scores", "manifests"} <= tables


def test_store_from_a_database_file_path(tmp_path: Path) -> None:
    store = Store(tmp_path / "results.sqlite")
    assert store.path == tmp_path / "results.sqlite"
    assert store.study == "results"
    store.write_scores([score()])
    assert len(load(tmp_path / "results.sqlite")) == 1


def test_load_returns_contract_columns_and_dtypes(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores(
        [
            score(run="seed=1,shots=64", step=10, tokens=2**40, epoch=0.5, n_examples=1838, stderr=0.01),
            score(step=0, value=0.25),
        ]
    )
    frame = load(tmp_path / "s")
    assert list(frame.columns[: len(EXPECTED_COLUMNS)]) == EXPECTED_COLUMNS
    assert list(frame.columns[len(EXPECTED_COLUMNS) :]) == ["stderr"]
    for name in ("study", "model", "family", "size", "run", "testset", "metric"):
        assert pd.api.types.is_string_dtype(frame[name]), name
    for name in ("seed", "shots", "tokens", "n_examples"):
        assert frame[name].dtype == pd.Int64Dtype(), name
    assert frame["step"].dtype == np.dtype("int64")
    assert frame["epoch"].dtype == np.dtype("float64")
    assert frame["value"].dtype == np.dtype("float64")
    # Sorted by run then step: "main" < "seed=1,shots=64".
    first, second = frame.iloc[0], frame.iloc[1]
    assert (first["run"], first["step"], first["value"]) == ("main", 0, 0.25)
    assert first["seed"] is pd.NA and first["shots"] is pd.NA and first["tokens"] is pd.NA
    assert (second["seed"], second["shots"], second["tokens"]) == (1, 64, 2**40)
    assert (second["epoch"], second["n_examples"], second["stderr"]) == (0.5, 1838, 0.01)
    assert (first["family"], first["size"], first["study"]) == ("pythia", "160m", "s")


def test_empty_store_loads_an_empty_table_with_the_columns(tmp_path: Path) -> None:
    frame = Store(tmp_path / "s").load()
    assert frame.empty
    assert list(frame.columns) == [*EXPECTED_COLUMNS, "stderr"]
    assert frame["step"].dtype == np.dtype("int64")


@pytest.mark.parametrize(
    ("model", "family", "size"),
    [
        ("EleutherAI/pythia-v1.1-160m", "pythia-v1.1", "160m"),
        ("pythia-1.4b-deduped", "pythia", "1.4b"),
        ("meta-llama/Llama-2-7b-hf", "Llama-2", "7b"),
        ("gpt2", "gpt2", ""),
    ],
)
def test_family_and_size_from_the_model_name(model: str, family: str, size: str) -> None:
    assert store_module.split_model_name(model) == (family, size)


def test_equal_rewrite_is_a_no_op(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    rows = [score(step=s, value=s / 10) for s in range(5)]
    assert store.write_scores(rows) == 5
    assert store.write_scores(rows) == 0
    assert store.write_scores([*rows, score(step=9, value=0.9)]) == 1
    assert sql(store.path, "SELECT count(*) FROM scores") == [(6,)]


def test_nan_is_a_value_and_an_equal_rewrite(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    assert store.write_scores([score(value=math.nan)]) == 1
    assert store.write_scores([score(value=math.nan)]) == 0
    assert math.isnan(store.load()["value"].iloc[0])
    with pytest.raises(StoreConflictError, match="nan"):
        store.write_scores([score(value=0.1)])


def test_conflict_names_run_step_testset_metric_and_both_values(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([score(run="seed=3", step=1000, testset="arc_easy", metric="acc_norm", value=0.375)])
    before = sql(store.path, "SELECT * FROM scores")
    with pytest.raises(StoreConflictError) as raised:
        store.write_scores(
            [
                score(run="seed=3", step=2000, testset="arc_easy", metric="acc_norm", value=0.5),
                score(run="seed=3", step=1000, testset="arc_easy", metric="acc_norm", value=0.625),
            ]
        )
    message = str(raised.value)
    for part in ("seed=3", "1000", "arc_easy", "acc_norm", "0.375", "0.625", "nothing was written"):
        assert part in message
    assert "\n" not in message
    assert sql(store.path, "SELECT * FROM scores") == before  # the non-conflicting row was not written either


def test_on_conflict_replace_and_keep(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([score(value=0.1), score(step=1, value=0.2)])
    assert store.write_scores([score(value=0.3), score(step=1, value=0.2)], on_conflict="replace") == 1
    assert sql(store.path, "SELECT step, value FROM scores ORDER BY step") == [(0, 0.3), (1, 0.2)]
    assert store.write_scores([score(value=0.7), score(step=2, value=0.4)], on_conflict="keep") == 1
    assert sql(store.path, "SELECT step, value FROM scores ORDER BY step") == [(0, 0.3), (1, 0.2), (2, 0.4)]
    with pytest.raises(GengenError, match="on_conflict"):
        store.write_scores([score()], on_conflict="overwrite")  # type: ignore[arg-type]


def test_conflict_inside_one_batch(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    with pytest.raises(StoreConflictError, match=r"row 1: .* value 0\.6 conflicts with 0\.5 from row 0"):
        store.write_scores([score(value=0.5), score(value=0.6)])
    assert store.write_scores([score(value=0.5), score(value=0.5)]) == 1


def test_defaults_for_study_run_seed_and_shots(tmp_path: Path) -> None:
    store = Store(tmp_path / "mystudy")
    store.write_scores([score(run="seed=7,shots=128"), score(study="other", run="lr=1e-4")])
    frame = store.load()
    assert frame[["study", "run"]].values.tolist() == [["mystudy", "seed=7,shots=128"], ["other", "lr=1e-4"]]
    assert frame["seed"].tolist()[0] == 7 and frame["shots"].tolist()[0] == 128
    assert frame["seed"].isna().tolist() == [False, True]
    assert Store(tmp_path / "mystudy", study="named").study == "named"


def test_extra_columns_are_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores(pd.DataFrame([score(lr=1e-4, note="a"), score(step=1, lr=2e-4)]))
    frame = store.load()
    assert list(frame.columns[-2:]) == ["lr", "note"]
    assert frame["lr"].tolist() == [1e-4, 2e-4]
    assert frame["note"].iloc[0] == "a" and pd.isna(frame["note"].iloc[1])


def test_filters(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores(
        [score(model=m, testset=t, metric=k) for m in ("a", "b", "c") for t in ("x", "y") for k in ("acc", "f1")]
    )
    assert len(store.load()) == 12
    assert set(store.load(model="a")["model"]) == {"a"}
    assert len(store.load(model=["a", "b"], metric="f1")) == 4
    assert len(load(tmp_path / "s", testset=["y"], model="c")) == 2
    with pytest.raises(GengenError, match="split is not a filter of load"):
        store.load(split="x")


def test_completed(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([score(model="m", run="r", step=s, testset=t) for s in (0, 10) for t in ("a", "b")])
    store.write_scores([score(model="m", run="other", step=5)])
    assert store.completed("m", "r") == {(0, "a", "acc"), (0, "b", "acc"), (10, "a", "acc"), (10, "b", "acc")}
    assert store.completed("m", "missing") == set()


def test_manifest(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    assert store.manifest("m", "r") is None
    store.write_manifest("m", "r", {"config": {"lr": 1e-4, "path": Path("/x")}})
    first = store.manifest("m", "r")
    assert first is not None
    assert first["config"] == {"lr": 1e-4, "path": "/x"}
    assert first["packages"]["python"] == sys.version.split()[0]
    assert first["packages"]["pandas"] == pd.__version__
    created = first["created_at"]
    assert time.strptime(created[:19], "%Y-%m-%dT%H:%M:%S")
    time.sleep(1.1)
    store.write_manifest("m", "r", {"config": {"lr": 2e-4}})
    second = store.manifest("m", "r")
    assert second is not None
    assert second["config"] == {"lr": 2e-4} and second["created_at"] == created
    assert set(store.manifests()) == {("m", "r")}


def test_bad_scores_are_input_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    with pytest.raises(InputError, match=r"missing column.*'value'"):
        store.write_scores([{"model": "m", "step": 0, "testset": "a", "metric": "acc"}])
    with pytest.raises(InputError, match=r"row 1: column 'value': 'high' is not a number"):
        store.write_scores([score(), score(step=1, value="high")])
    with pytest.raises(InputError, match=r"row 0: column 'step': 1\.5 is not an integer"):
        store.write_scores([score(step=1.5)])
    with pytest.raises(InputError, match="column 'testset' is empty"):
        store.write_scores([score(testset="")])
    assert store.count() == 0


def test_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "notes.sqlite").write_text("hello, this is not a database\n" * 100)
    with pytest.raises(StoreError, match=r"notes\.sqlite"):
        Store(tmp_path / "notes.sqlite")
    other = tmp_path / "other.sqlite"
    sql(other, "CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not a gengen store"):
        Store(other)
    with pytest.raises(StoreError, match="no gengen store"):
        load(tmp_path / "nowhere")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    sql(store.path, "PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="version 99 is newer"):
        Store(tmp_path / "s")


def test_migration_hook_upgrades_an_old_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([score()])

    def add_column(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE scores ADD COLUMN judge TEXT")

    current = store_module.SCHEMA_VERSION
    monkeypatch.setitem(store_module.MIGRATIONS, current, add_column)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", current + 1)
    upgraded = Store(tmp_path / "s")
    assert sql(upgraded.path, "PRAGMA user_version") == [(current,)]  # opening upgrades nothing (issue 36)
    upgraded.write_scores([score()])  # the first write does, in its transaction
    assert sql(upgraded.path, "PRAGMA user_version") == [(current + 1,)]
    assert "judge" in [row[1] for row in sql(upgraded.path, "PRAGMA table_info(scores)")]
    assert upgraded.load()["value"].tolist() == [0.5]


# ------------------------------------------------------------------------------------------ concurrency


def _writer(path: str, worker: int, barrier: object, results: object) -> None:
    """Write disjoint rows (own model), overlapping equal rows and one conflicting row, in several batches."""
    barrier.wait()  # type: ignore[attr-defined]
    store = Store(path)
    for batch in range(5):
        own = [score(model=f"m{worker}", step=batch * 10 + i, value=worker + i / 100) for i in range(10)]
        shared = [score(model="shared", step=batch * 10 + i, value=i / 100) for i in range(10)]
        store.write_scores(own + shared)
    try:
        store.write_scores([score(model="contested", value=float(worker))])
        results.put((worker, "written"))  # type: ignore[attr-defined]
    except StoreConflictError:
        results.put((worker, "conflict"))  # type: ignore[attr-defined]


def test_concurrent_writers(tmp_path: Path) -> None:
    path = str(tmp_path / "shared-study")  # not created yet: the workers race to create it
    context = mp.get_context("fork")
    workers = 4
    barrier = context.Barrier(workers)
    results = context.Queue()
    processes = [context.Process(target=_writer, args=(path, w, barrier, results)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * workers
    outcomes = sorted(results.get(timeout=5)[1] for _ in range(workers))
    assert outcomes == ["conflict"] * (workers - 1) + ["written"]
    database = Path(path) / "gengen.sqlite"
    grouped = sql(database, "SELECT model, count(*) FROM scores GROUP BY model")
    counts = {row[0]: row[1] for row in grouped}
    assert counts == {**{f"m{w}": 50 for w in range(workers)}, "shared": 50, "contested": 1}
    for worker in range(workers):
        values = [v for (v,) in sql(database, f"SELECT value FROM scores WHERE model = 'm{worker}' ORDER BY step")]
        assert values == [worker + i / 100 for _ in range(5) for i in range(10)]
    assert sql(database, "PRAGMA integrity_check") == [("ok",)]


# ------------------------------------------------------------------------------------------ crash safety

_KILLED_WRITER = """
import sys, time
from pathlib import Path
import gengen.store.database as store_module
from gengen.ingest import ingest

marker, path, table, wait_in_commit = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1"
if wait_in_commit:
    def stalled_commit(conn):
        rows = conn.execute("SELECT count(*) FROM scores").fetchone()[0]
        marker.write_text(f"in transaction: {rows} rows")
        time.sleep(120)
    store_module._commit = stalled_commit
else:
    marker.write_text("importing")
ingest(table, path)
marker.write_text("committed")
"""


def _run_and_kill(tmp_path: Path, store_path: Path, rows: int, wait_in_commit: bool, delay: float) -> str:
    """Import a long CSV of ``rows`` scores in a child process and SIGKILL it ``delay`` s after it reports
    progress; return its last word."""
    table = tmp_path / "big.csv"
    pd.DataFrame(
        {"model": "big", "step": np.arange(rows) // 50, "testset": [f"t{i % 50}" for i in range(rows)],
         "metric": "acc", "value": np.linspace(0, 1, rows)}
    ).to_csv(table, index=False)  # fmt: skip
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(_KILLED_WRITER))
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_ROOT), os.environ.get("PYTHONPATH", "")])}
    arguments = [str(marker), str(store_path), str(table), "1" if wait_in_commit else "0"]
    child = subprocess.Popen([sys.executable, str(script), *arguments], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the writer never started"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    return marker.read_text()


def test_killed_import_leaves_the_store_unchanged(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write_scores([score(step=s, value=s / 7) for s in range(3)])
    before = store.load()
    word = _run_and_kill(tmp_path, tmp_path / "s", rows=60_000, wait_in_commit=True, delay=0.2)
    assert word == "in transaction: 60003 rows"  # killed with every row inserted, before COMMIT
    after = Store(tmp_path / "s").load()
    pd.testing.assert_frame_equal(after, before)
    assert sql(store.path, "PRAGMA integrity_check") == [("ok",)]
    assert store.write_scores([score(step=99)]) == 1  # no lock left behind


@pytest.mark.parametrize("delay", [0.2, 1.2])
def test_import_killed_at_any_moment_is_all_or_nothing(tmp_path: Path, delay: float) -> None:
    store = Store(tmp_path / "s")
    _run_and_kill(tmp_path, tmp_path / "s", rows=40_000, wait_in_commit=False, delay=delay)
    assert Store(tmp_path / "s").count() in (0, 40_000)
    assert sql(store.path, "PRAGMA integrity_check") == [("ok",)]
