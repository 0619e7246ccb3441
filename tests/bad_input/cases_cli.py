"""CLI-wide bad inputs: option values, usage, the file system, damaged stores and analysis folders, tables.

Generated from small tables (commands x options x bad values, files x kinds of damage) rather than written
one by one; ``tests/bad_input/test_corpus.py`` runs them all. The ingestion cases live in ``cases_ingest.py``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from .case import Case

TESTSETS = ("id", "ood_a", "ood_b", "ood_c")
MODELS = ("pythia-160m", "opt-125m")
ANALYSIS_FILES = ("summary.json", "pairs.parquet", "scores.parquet")


# ------------------------------------------------------------------------------------------ building blocks


def _scores() -> list[dict[str, object]]:
    """Two models x 30 checkpoints x four test sets of plausible accuracies."""
    rng = np.random.default_rng(16)
    rows: list[dict[str, object]] = []
    for model in MODELS:
        trend = np.linspace(0.3, 0.8, 30)
        for index, level in enumerate(trend):
            for testset in TESTSETS:
                value = float(np.clip(level + rng.normal(0, 0.03), 0, 1))
                rows.append({"model": model, "step": 100 * index, "testset": testset, "metric": "acc", "value": value})
    return rows


def _store(folder: Path, name: str = "study") -> Path:
    from gengen.store.database import Store

    Store(folder / name).write_scores(_scores())
    return folder / name


@cache
def _built_analysis() -> Path:
    """One analysis and comparison folder, built once per session and copied into each case."""
    from gengen.across.compare import compare
    from gengen.analyse import analyse, load_scores

    root = Path(tempfile.mkdtemp(prefix="gengen-bad-input-"))
    store = _store(root)
    # The lagged test: the calibrated inference with no dependence on the default's extra machinery.
    analysis = analyse(load_scores(store), id_testset="id", inference="lagged", progress=False)
    analysis.to_dir(root / "analysis")
    compare(analysis, n_perm=49).to_dir(root / "analysis")
    return root / "analysis"


def _analysis(folder: Path, name: str = "analysis") -> Path:
    shutil.copytree(_built_analysis(), folder / name)
    return folder / name


def _read_only(path: Path) -> None:
    """Make ``path`` (a file or a folder) unwritable, also for root (chattr +i), or skip the case."""
    import pytest

    path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a path read-only")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"chattr +i failed: {done.stderr.decode(errors='replace').strip()}")


def _both(*steps: Callable[[Path], object]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        for step in steps:
            step(folder)

    return setup


def _damage(relative: str, how: str) -> Callable[[Path], None]:
    """Damage one file of the case folder: truncate it, empty it, fill it with garbage, or make it a folder."""

    def setup(folder: Path) -> None:
        path = folder / relative
        data = path.read_bytes() if path.is_file() else b""
        if how == "truncated":
            path.write_bytes(data[: max(1, len(data) // 3)])
        elif how == "empty":
            path.write_bytes(b"")
        elif how == "garbage":
            path.write_bytes(b"\x00\xffnot what it should be\x13" * 20)
        elif how == "latin1":
            path.write_bytes("r\u00e9sum\u00e9 caf\u00e9".encode("latin-1"))
        elif how == "directory":
            path.unlink()
            path.mkdir()
        else:
            raise ValueError(how)

    return setup


def _write_json(relative: str, text: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / relative).write_text(text, encoding="utf-8")

    return setup


# ------------------------------------------------------------------------------------------ option values

ANALYSE = ["analyse", "{tmp}/study", "--id", "id", "--out", "{tmp}/out"]
COMPARE = ["compare", "{tmp}/analysis", "--out", "{tmp}/out"]
# -q: no progress lines on stderr, so that the error line is the only one.
REPORT = ["report", "{tmp}/analysis", "--out", "{tmp}/out", "-q"]
EXPORT = ["export", "{tmp}/study", "{tmp}/out.csv"]
DEMO = ["demo", "--out", "{tmp}/demo"]
SIMULATE = ["simulate", "--quick", "--out", "{tmp}/sim"]
PARTIAL = ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"]
STUDY_TOML = "{tmp}/study.toml"

NOT_INTEGERS = {"word": "abc", "float": "1.5", "exponent": "1e11", "empty": ""}
NOT_FLOATS = {"word": "abc", "empty": ""}

# (command argv, option, {label: value}) whose values click refuses before the command runs.
PARSE_ERRORS: list[tuple[str, list[str], str, dict[str, str]]] = [
    ("analyse", ANALYSE, "--n-perm", {**NOT_INTEGERS, "above-cap": "100000000000"}),
    ("analyse", ANALYSE, "--n-boot", {**NOT_INTEGERS, "above-cap": "20000000"}),
    ("analyse", ANALYSE, "--block-length", NOT_INTEGERS),
    ("analyse", ANALYSE, "--seed", {**NOT_INTEGERS, "negative": "-1", "above-u64": str(2**64)}),
    ("analyse", ANALYSE, "--alpha", NOT_FLOATS),
    ("compare", COMPARE, "--n-perm", {**NOT_INTEGERS, "above-cap": "100000000000"}),
    ("compare", COMPARE, "--seed", {"word": "abc", "negative": "-5", "above-u64": str(2**64)}),
    ("compare", COMPARE, "--alpha", NOT_FLOATS),
    ("demo", DEMO, "--threads", {"zero": "0", "negative": "-1", "word": "abc"}),
    ("demo", DEMO, "--jobs", {"zero": "0", "negative": "-2", "float": "1.5"}),
    ("simulate", SIMULATE, "--seed", {"negative": "-1", "above-u64": str(2**64), "word": "x"}),
    ("train", ["train", STUDY_TOML], "--threads", {"zero": "0", "negative": "-1"}),
    ("train", ["train", STUDY_TOML], "--jobs", {"zero": "0", "negative": "-1"}),
    ("score", ["score", STUDY_TOML, "--name", "m"], "--threads", {"zero": "0", "negative": "-1"}),
    ("run", ["run", STUDY_TOML], "--threads", {"zero": "0", "negative": "-1"}),
    ("run", ["run", STUDY_TOML], "--jobs", {"zero": "0"}),
    ("run", ["run", STUDY_TOML], "--retries", {"negative": "-1"}),
]

# (command argv, option, {label: value}) refused by gengen's own checks once the command runs.
VALUE_ERRORS: list[tuple[str, list[str], str, dict[str, str], str]] = [
    ("analyse", ANALYSE, "--n-perm", {"zero": "0", "negative": "-3"}, "n_perm"),
    ("analyse", ANALYSE, "--n-boot", {"zero": "0"}, "n_boot"),
    ("analyse", ANALYSE, "--block-length", {"zero": "0", "negative": "-1"}, "block_length"),
    ("analyse", ANALYSE, "--alpha", {"zero": "0", "one": "1", "above-one": "2", "nan": "nan"}, "alpha"),
    ("analyse", ANALYSE, "--fit", {"unknown": "spline"}, "fit"),
    ("analyse", ANALYSE, "--method", {"unknown": "cosine"}, "method"),
    ("analyse", ANALYSE, "--inference", {"unknown": "magic", "empty": ","}, "inference"),
    ("analyse", ANALYSE, "--scheme", {"unknown": "shuffle"}, "scheme"),
    ("analyse", ANALYSE, "--adjust", {"unknown": "sidak"}, "adjust"),
    ("analyse", ANALYSE, "--mode", {"unknown": "sideways"}, "mode"),
    ("analyse", ANALYSE, "--pooling", {"unknown": "median"}, "pooling"),
    ("analyse", ANALYSE, "--id", {"unknown": "nosuch"}, "nosuch"),
    ("analyse", ANALYSE, "--ood", {"unknown": "ood_a,nosuch", "only-one": "ood_a"}, "ood"),
    ("analyse", ANALYSE, "--metric", {"unknown": "bleu"}, "bleu"),
    ("compare", COMPARE, "--n-perm", {"zero": "0"}, "n_perm"),
    ("compare", COMPARE, "--alpha", {"zero": "0", "above-one": "1.5"}, "alpha"),
    ("compare", COMPARE, "--source", {"unknown": "both"}, "source"),
    ("compare", COMPARE, "--alternative", {"unknown": "less"}, "alternative"),
    ("report", REPORT, "--pair", {"one-name": "ood_a", "unknown": "ood_a,nosuch", "empty-half": "ood_a,"}, "--pair"),
    ("export", EXPORT, "--format", {"unknown": "xlsx"}, "--format"),
    ("partial-corr", PARTIAL, "--method", {"unknown": "cosine"}, "method"),
    ("partial-corr", PARTIAL, "--semi", {"unknown": "z"}, "semi"),
    ("partial-corr", PARTIAL, "--covar", {"missing-column": "nosuch"}, "nosuch"),
]

PARTIAL_CSV = "a,b,c\n" + "".join(f"{i},{(i * 7) % 11},{(i * 3) % 5}\n" for i in range(20))


def _setup_for(command: str) -> tuple[dict[str, bytes | str], Callable[[Path], None] | None]:
    if command in ("analyse", "export"):
        return {}, _store
    if command in ("compare", "report"):
        return {}, _analysis
    if command == "partial-corr":
        return {"data.csv": PARTIAL_CSV}, None
    return {}, None


def _option_cases() -> list[Case]:
    out: list[Case] = []
    for command, argv, option, values in PARSE_ERRORS:
        for label, value in values.items():
            # Parsing fails before anything is read, so no files are needed (none is touched either).
            out.append(Case(f"cli-option-{command}-{option.strip('-')}-{label}", [*argv, option, value], option))
    for command, argv, option, values, culprit in VALUE_ERRORS:
        files, setup = _setup_for(command)
        for label, value in values.items():
            out.append(
                Case(
                    f"cli-value-{command}-{option.strip('-')}-{label}",
                    [*argv, option, value],
                    culprit,
                    files=files,
                    setup=setup,
                )
            )
    return out


# ------------------------------------------------------------------------------------------ usage

COMMANDS = {
    "analyse": ANALYSE,
    "compare": COMPARE,
    "report": REPORT,
    "export": EXPORT,
    "demo": DEMO,
    "simulate": SIMULATE,
    "partial-corr": PARTIAL,
    "ingest": ["ingest", "{tmp}/in.csv", "--store", "{tmp}/study"],
    "train": ["train", STUDY_TOML],
    "score": ["score", STUDY_TOML, "--name", "m"],
    "run": ["run", STUDY_TOML],
    "status": ["status", STUDY_TOML],
}

# The first argument or required option of each command, and how click names it when it is missing.
MISSING = {
    "analyse": (["analyse", "{tmp}/study"], "--id"),
    "compare": (["compare"], "analysis_dir"),
    "report": (["report"], "analysis_dir"),
    "export": (["export", "{tmp}/study"], "out"),
    "partial-corr": (["partial-corr", "{tmp}/data.csv", "--x", "a"], "--y"),
    "ingest": (["ingest", "{tmp}/in.csv"], "--store"),
    "train": (["train"], "config"),
    "score": (["score", STUDY_TOML], "--name"),
    "run": (["run"], "config"),
    "status": (["status"], "study"),
}


def _usage_cases() -> list[Case]:
    out = [
        Case("cli-unknown-command", ["analyze-everything"], "analyze-everything"),
        Case("cli-unknown-top-option", ["--verbose", "analyse"], "--verbose"),
    ]
    for command, argv in COMMANDS.items():
        out.append(Case(f"cli-usage-{command}-unknown-option", [*argv, "--no-such-option"], "--no-such-option"))
    for command, (argv, culprit) in MISSING.items():
        files = {"data.csv": PARTIAL_CSV} if command == "partial-corr" else {}
        out.append(Case(f"cli-usage-{command}-missing", argv, culprit, files=files))
    out.append(Case("cli-usage-export-extra-argument", [*EXPORT, "surplus"], "surplus", setup=_store))
    return out


# ------------------------------------------------------------------------------------------ file system


def _file(relative: str, text: str = "in the way\n") -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    return setup


def _folder(relative: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / relative).mkdir(parents=True, exist_ok=True)

    return setup


def _read_only_path(relative: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / relative).mkdir(parents=True, exist_ok=True)
        _read_only(folder / relative)

    return setup


def _file_system_cases() -> list[Case]:
    out: list[Case] = []
    # Outputs: (command, argv with the output at {out}, the setup that builds the inputs).
    outputs: list[tuple[str, list[str], Callable[[Path], object] | None]] = [
        ("analyse", ["analyse", "{tmp}/study", "--id", "id", "--out", "{out}"], _store),
        ("compare", ["compare", "{tmp}/analysis", "--n-perm", "9", "--out", "{out}"], _analysis),
        ("report", ["report", "{tmp}/analysis", "-q", "--out", "{out}"], _analysis),
        ("export", ["export", "{tmp}/study", "{out}/scores.csv"], _store),
        ("simulate", ["simulate", "--quick", "--out", "{out}"], None),
        ("demo", ["demo", "--out", "{out}/demo"], None),
    ]
    for command, argv, build in outputs:
        for label, make, out_path in (
            ("out-is-a-file", _file("blocker"), "{tmp}/blocker"),
            ("out-under-a-file", _file("blocker"), "{tmp}/blocker/sub"),
            ("out-read-only", _read_only_path("locked"), "{tmp}/locked/new"),
        ):
            if command == "demo" and label == "out-is-a-file":
                out_path = "{tmp}"  # demo adds /demo; make that a file instead
                make = _file("demo")
            steps = [step for step in (build, make) if step is not None]
            out.append(
                Case(
                    f"cli-fs-{command}-{label}",
                    [arg.replace("{out}", out_path) for arg in argv],
                    "{tmp}/blocker"
                    if "blocker" in out_path
                    else ("{tmp}/demo" if command == "demo" and label == "out-is-a-file" else "{tmp}/locked"),
                    setup=_both(*steps),
                )
            )
    out += [
        Case(
            "cli-fs-export-out-is-directory",
            ["export", "{tmp}/study", "{tmp}/existing.csv"],
            "{tmp}/existing.csv",
            setup=_both(_store, _folder("existing.csv")),
        ),
        Case(
            "cli-fs-export-out-read-only-file",
            ["export", "{tmp}/study", "{tmp}/locked/scores.csv"],
            "{tmp}/locked",
            setup=_both(_store, _file("locked/scores.csv"), lambda f: _read_only(f / "locked")),
        ),
        Case(
            "cli-fs-analyse-input-is-directory-csv",
            ["analyse", "{tmp}/table.csv", "--id", "id"],
            "{tmp}/table.csv",
            setup=_folder("table.csv"),
        ),
        Case(
            "cli-fs-partial-corr-csv-is-directory",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
            "{tmp}/data.csv",
            setup=_folder("data.csv"),
        ),
        Case(
            "cli-fs-compare-analysis-is-a-file",
            ["compare", "{tmp}/analysis"],
            "{tmp}/analysis",
            setup=_file("analysis"),
        ),
        Case(
            "cli-fs-report-analysis-missing",
            ["report", "{tmp}/nothing"],
            "{tmp}/nothing",
        ),
        Case(
            "cli-fs-ingest-store-under-a-file",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/blocker/study"],
            "{tmp}/blocker",
            files={"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"},
            setup=_file("blocker"),
        ),
        Case(
            "cli-fs-ingest-store-folder-read-only",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/locked/study"],
            "{tmp}/locked",
            files={"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"},
            setup=_read_only_path("locked"),
        ),
    ]
    return out


# ------------------------------------------------------------------------------------------ stores

IN_CSV = {"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"}

# Commands reading a store at {store}, and one writing to it.
STORE_COMMANDS = {
    "analyse": ["analyse", "{store}", "--id", "id", "--out", "{tmp}/out"],
    "export": ["export", "{store}", "{tmp}/out.csv"],
    "ingest": ["ingest", "{tmp}/in.csv", "--store", "{store}", "-q"],
}


def _not_gengen_db(folder: Path) -> None:
    (folder / "study").mkdir()
    conn = sqlite3.connect(folder / "study" / "gengen.sqlite")
    conn.execute("CREATE TABLE other (x INTEGER)")
    conn.execute("INSERT INTO other VALUES (1)")
    conn.commit()
    conn.close()


def _newer_schema(folder: Path) -> None:
    _store(folder)
    conn = sqlite3.connect(folder / "study" / "gengen.sqlite")
    conn.execute("PRAGMA user_version = 99")
    conn.close()


def _store_then(step: Callable[[Path], None]) -> Callable[[Path], None]:
    return _both(_store, step)


def _store_cases() -> list[Case]:
    damages: dict[str, Callable[[Path], None]] = {
        "garbage-bytes": _both(_folder("study"), _file("study/gengen.sqlite", "this is not a database\n" * 50)),
        "truncated": _store_then(_damage("study/gengen.sqlite", "truncated")),
        "not-gengen": _not_gengen_db,
        "newer-schema": _newer_schema,
        "read-only-file": _store_then(lambda f: _read_only(f / "study" / "gengen.sqlite")),
        "read-only-folder": _store_then(lambda f: _read_only(f / "study")),
        "sqlite-path-is-directory": _folder("study/gengen.sqlite"),
    }
    out: list[Case] = []
    for damage, setup in damages.items():
        for command, argv in STORE_COMMANDS.items():
            store = "{tmp}/study"
            if damage == "sqlite-path-is-directory":
                store = "{tmp}/study/gengen.sqlite"
            if damage.startswith("read-only") and command != "ingest":
                continue  # reading a read-only store is allowed
            out.append(
                Case(
                    f"cli-store-{damage}-{command}",
                    [arg.replace("{store}", store) for arg in argv],
                    "{tmp}/study",
                    files=IN_CSV if command == "ingest" else {},
                    setup=setup,
                )
            )
    return out


# ------------------------------------------------------------------------------------------ analysis folders


def _analysis_cases() -> list[Case]:
    damaged = [
        ("summary-truncated", "summary.json", _damage("analysis/summary.json", "truncated")),
        ("summary-empty", "summary.json", _damage("analysis/summary.json", "empty")),
        ("summary-latin1", "summary.json", _damage("analysis/summary.json", "latin1")),
        ("summary-a-list", "summary.json", _write_json("analysis/summary.json", "[1, 2, 3]\n")),
        ("summary-no-settings", "summary.json", _write_json("analysis/summary.json", '{"groups": []}\n')),
        ("summary-is-directory", "summary.json", _damage("analysis/summary.json", "directory")),
        ("pairs-truncated", "pairs.parquet", _damage("analysis/pairs.parquet", "truncated")),
        ("pairs-garbage", "pairs.parquet", _damage("analysis/pairs.parquet", "garbage")),
        ("pairs-empty", "pairs.parquet", _damage("analysis/pairs.parquet", "empty")),
        ("scores-truncated", "scores.parquet", _damage("analysis/scores.parquet", "truncated")),
        ("missing-pairs", "pairs.parquet", lambda f: (f / "analysis" / "pairs.parquet").unlink()),
    ]
    out: list[Case] = []
    for label, culprit, damage in damaged:
        for command, argv in (("compare", COMPARE), ("report", REPORT)):
            out.append(
                Case(
                    f"cli-{command}-{label}",
                    argv,
                    f"{{tmp}}/analysis/{culprit}",
                    setup=_both(_analysis, damage),
                )
            )
    for label, file, how in (
        ("comparison-json-truncated", "comparison.json", "truncated"),
        ("compare-long-empty", "compare_long.csv", "empty"),
        ("compare-pairs-latin1", "compare_pairs.csv", "latin1"),
        ("compare-agreement-garbage", "compare_agreement.csv", "garbage"),
    ):
        out.append(
            Case(
                f"cli-report-{label}",
                REPORT,
                f"{{tmp}}/analysis/{file}",
                setup=_both(_analysis, _damage(f"analysis/{file}", how)),
            )
        )
    return out


# ------------------------------------------------------------------------------------------ tables


def _scores_csv(bad_value: str) -> str:
    """A valid analysable table (:func:`_scores`) whose score on line 10 is ``bad_value``."""
    lines = ["model,step,testset,metric,value"]
    lines += [f"{r['model']},{r['step']},{r['testset']},{r['metric']},{r['value']}" for r in _scores()]
    model, step, testset, metric, _ = lines[8].split(",")
    lines[8] = f"{model},{step},{testset},{metric},{bad_value}"
    return "\n".join(lines) + "\n"


def _bad_score_cases() -> list[Case]:
    """Scores ``gengen ingest`` refuses are refused by ``gengen analyse table.csv`` too, naming file and line
    (line 9: the header is line 1); without the check a percentage or a typo would be analysed."""
    bad = {"percentage": "55.0", "inf": "inf", "typo": "0.6x", "negative-accuracy": "-0.2", "huge": "1e400"}
    return [
        Case(
            f"cli-analyse-csv-score-{label}",
            ["analyse", "{tmp}/table.csv", "--id", "id", "--out", "{tmp}/out"],
            "{tmp}/table.csv: line 9: column 'value'",
            files={"table.csv": _scores_csv(value)},
        )
        for label, value in bad.items()
    ]


def _table_cases() -> list[Case]:
    tables: dict[str, bytes | str] = {
        "empty": "",
        "blank-lines": "\n\n\n",
        "latin1": b"model,step,testset,metric,value\n" + "caf\u00e9,1,t,acc,0.5\n".encode("latin-1"),
        "garbage-binary": b"\x00\x01\x02\xff\xfe" * 40,
    }
    out: list[Case] = []
    for label, content in tables.items():
        out.append(
            Case(
                f"cli-analyse-csv-{label}",
                ["analyse", "{tmp}/table.csv", "--id", "id", "--out", "{tmp}/out"],
                "{tmp}/table.csv",
                files={"table.csv": content},
            )
        )
        out.append(
            Case(
                f"cli-stats-partial-corr-{label}-csv",
                ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
                "{tmp}/data.csv",
                files={"data.csv": content},
            )
        )
    out += [
        Case(
            "cli-analyse-parquet-garbage",
            ["analyse", "{tmp}/table.parquet", "--id", "id"],
            "{tmp}/table.parquet",
            files={"table.parquet": b"PAR1 not really parquet PAR1"},
        ),
        Case(
            "cli-analyse-parquet-truncated",
            ["analyse", "{tmp}/table.parquet", "--id", "id"],
            "{tmp}/table.parquet",
            setup=_both(_analysis, lambda f: _cut(f / "analysis" / "scores.parquet", f / "table.parquet")),
        ),
        Case(
            "cli-analyse-csv-header-only",
            ["analyse", "{tmp}/table.csv", "--id", "id"],
            "{tmp}/table.csv",
            files={"table.csv": "model,run,step,testset,metric,value\n"},
        ),
        *_bad_score_cases(),
        Case(
            "cli-analyse-csv-missing-columns",
            ["analyse", "{tmp}/table.csv", "--id", "id"],
            "value",
            files={"table.csv": "model,step,testset,metric\nm,1,id,acc\n"},
        ),
        Case(
            "cli-stats-partial-corr-missing-x",
            ["partial-corr", "{tmp}/data.csv", "--x", "nosuch", "--y", "b"],
            "nosuch",
            files={"data.csv": PARTIAL_CSV},
        ),
        Case(
            "cli-stats-partial-corr-text-column",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
            "b",
            files={"data.csv": "a,b\n1,x\n2,y\n3,z\n4,w\n5,v\n"},
        ),
        Case(
            "cli-stats-partial-corr-constant-column",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
            "b",
            files={"data.csv": "a,b\n1,2\n2,2\n3,2\n4,2\n5,2\n"},
        ),
        Case(
            "cli-stats-partial-corr-too-few-rows",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b", "--covar", "c"],
            "n",
            files={"data.csv": "a,b,c\n1,2,3\n2,1,4\n3,5,1\n"},
        ),
        Case(
            "cli-stats-partial-corr-missing-values",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
            "x",
            files={"data.csv": "a,b\n1,2\n,1\n3,5\n4,4\n5,6\n"},
        ),
        Case(
            "cli-stats-partial-corr-ragged-row",
            ["partial-corr", "{tmp}/data.csv", "--x", "a", "--y", "b"],
            "{tmp}/data.csv",
            files={"data.csv": "a,b\n1,2\n2,1,9,9\n3,5\n"},
        ),
        Case(
            "cli-stats-partial-corr-missing-file",
            ["partial-corr", "{tmp}/nothing.csv", "--x", "a", "--y", "b"],
            "nothing.csv",
        ),
    ]
    return out


def _cut(source: Path, target: Path) -> None:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])


# ------------------------------------------------------------------------------------------ export


def _export_cases() -> list[Case]:
    out: list[Case] = []
    for option, value in (
        ("--study", "other"),
        ("--model", "nobody"),
        ("--run", "nightly"),
        ("--testset", "mmlu"),
        ("--metric", "bleu"),
    ):
        out.append(
            Case(
                f"cli-export-filter-{option.strip('-')}-matches-nothing", [*EXPORT, option, value], value, setup=_store
            )
        )
    out += [
        Case(
            "cli-export-filter-two-models-one-unknown",
            [*EXPORT, "--model", "opt-125m", "--model", "nobody"],
            "nobody",
            setup=_store,
        ),
        Case("cli-export-unknown-suffix", ["export", "{tmp}/study", "{tmp}/out.xlsx"], "out.xlsx", setup=_store),
        Case("cli-export-no-store", ["export", "{tmp}/nothing", "{tmp}/out.csv"], "{tmp}/nothing"),
        Case(
            "cli-export-store-is-a-text-file",
            ["export", "{tmp}/notes.txt", "{tmp}/out.csv"],
            "{tmp}/notes.txt",
            files={"notes.txt": "hello\n" * 100},
        ),
    ]
    return out


def cases() -> list[Case]:
    """Every CLI-wide case."""
    return [
        *_option_cases(),
        *_usage_cases(),
        *_file_system_cases(),
        *_store_cases(),
        *_analysis_cases(),
        *_table_cases(),
        *_export_cases(),
    ]
