"""Issue 36: nothing a user owns is deleted, escaped from or silently changed.

``gengen demo --fresh`` on folders it did not write (the demo template beside the user's files, a symbolic link
to the template, the working folder, a symbolic link to a folder); ``gengen report`` through a ``figures/`` link
out of the analysis folder; stores a failed command must leave byte-identical (schema versions gengen does not
know, missing tables, run labels out of range); values that passed one check and tripped a later step.
``after`` checks that the user's files are still there, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .case import Case
from .cases_cli import _analysis, _store


def _template(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        from gengen.demo import study_template

        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(study_template(), encoding="utf-8")

    return setup


def _linked_template(folder: Path) -> None:
    _template("template.toml")(folder)
    (folder / "p").mkdir()
    (folder / "p" / "study.toml").symlink_to(folder / "template.toml")
    (folder / "p" / "zz-notes.txt").write_text("keep me\n")


def _kept(*names: str) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        for name in names:
            assert (folder / name).exists() or (folder / name).is_symlink(), f"{name} was deleted"

    return check


def _linked_folder(folder: Path) -> None:
    _template("real/study.toml")(folder)
    (folder / "link").symlink_to(folder / "real")


def _demo_cases() -> list[Case]:
    return [
        Case(
            "safety-demo-fresh-template-beside-user-files",
            ["demo", "--out", "{tmp}/p", "--fresh"],
            "{tmp}/p/a-thesis.tex: no list of the files the demo wrote",
            files={"p/a-thesis.tex": "years of work\n"},
            setup=_template("p/study.toml"),
            after=_kept("p/a-thesis.tex", "p/study.toml"),
        ),
        Case(
            "safety-demo-fresh-symlinked-template",
            ["demo", "--out", "{tmp}/p", "--fresh"],
            "{tmp}/p/study.toml: no list of the files the demo wrote",
            setup=_linked_template,
            after=_kept("p/study.toml", "p/zz-notes.txt", "template.toml"),
        ),
        Case(
            "safety-demo-fresh-symlinked-folder",
            ["demo", "--out", "{tmp}/link", "--fresh"],
            "{tmp}/link: a symbolic link",
            setup=_linked_folder,
            after=_kept("real/study.toml", "link"),
        ),
        Case(
            "safety-demo-fresh-the-working-folder",
            ["demo", "--out", ".", "--fresh"],
            ".: is the working folder",
            files={"notes.txt": "keep me\n"},
            setup=_template("study.toml"),
            after=_kept("notes.txt", "study.toml"),
        ),
        Case(
            "safety-demo-fresh-a-file",
            ["demo", "--out", "{tmp}/notes.txt", "--fresh"],
            "{tmp}/notes.txt: not a folder",
            files={"notes.txt": "keep me\n"},
            after=_kept("notes.txt"),
        ),
    ]


def _relative_figures_link(folder: Path) -> None:
    _analysis(folder)
    (folder / "elsewhere").mkdir()
    (folder / "analysis" / "figures").symlink_to("../elsewhere")


def _figure_file_link(folder: Path) -> None:
    _analysis(folder)
    (folder / "elsewhere").mkdir()
    (folder / "elsewhere" / "mine.png").write_text("keep me\n")
    (folder / "analysis" / "figures").mkdir()
    (folder / "analysis" / "figures" / "agreement.png").symlink_to(folder / "elsewhere" / "mine.png")


def _relative_store_link(folder: Path) -> None:
    (folder / "elsewhere").mkdir()
    (folder / "study").mkdir()
    (folder / "study" / "gengen.sqlite").symlink_to("../elsewhere/new.sqlite")


def _file_link(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        _analysis(folder)
        (folder / "elsewhere").mkdir(exist_ok=True)
        (folder / "elsewhere" / "mine.txt").write_text("keep me\n")
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(folder / "elsewhere" / "mine.txt")

    return setup


def _simulate_link(folder: Path) -> None:
    (folder / "elsewhere").mkdir()
    (folder / "elsewhere" / "mine.txt").write_text("keep me\n")
    (folder / "sim").mkdir()
    (folder / "sim" / "calibration.csv").symlink_to(folder / "elsewhere" / "mine.txt")


def _demo_folder_link(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / "elsewhere").mkdir()
        (folder / "demo").mkdir()
        (folder / "demo" / name).symlink_to("../elsewhere")

    return setup


def _elsewhere_unchanged(folder: Path) -> None:
    found = {
        str(path.relative_to(folder / "elsewhere")): path.read_bytes()
        for path in (folder / "elsewhere").rglob("*")
        if path.is_file()
    }
    assert set(found) <= {"mine.png", "mine.txt"}, f"written outside the folder: {sorted(found)}"
    assert all(content == b"keep me\n" for content in found.values()), "a file outside the folder was changed"


def _path_cases() -> list[Case]:
    """A symbolic link planted at every folder (and a file in each) a command writes into, named relatively:
    the check joined a relative path to its folder twice and let ``figures -> ../victim`` through."""
    out = [
        Case(
            "safety-report-relative-figures-link",
            ["report", "analysis", "-q"],
            "analysis/figures: leads outside analysis",
            setup=_relative_figures_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-report-figure-file-link",
            ["report", "analysis", "-q"],
            "analysis/figures/agreement.png: leads outside analysis/figures",
            setup=_figure_file_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-ingest-relative-store-link",
            ["ingest", "in.csv", "--store", "study", "-q"],
            "study/gengen.sqlite: leads outside study",
            files={"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"},
            setup=_relative_store_link,
            after=_elsewhere_unchanged,
        ),
        Case(
            "safety-compare-file-link",
            ["compare", "analysis", "--out", "analysis"],
            "analysis/compare_pairs.csv: leads outside analysis",
            setup=_file_link("analysis/compare_pairs.csv"),
            after=_elsewhere_unchanged,
        ),
    ]
    out.append(
        Case(
            "safety-simulate-out-file-link",
            ["simulate", "--quick", "--out", "sim"],
            "sim/calibration.csv: leads outside sim",
            setup=_simulate_link,
            after=_elsewhere_unchanged,
        )
    )
    for name in ("data", "models", "report"):
        out.append(
            Case(
                f"safety-demo-{name}-link",
                ["demo", "--out", "demo"],
                f"demo/{name}: leads outside demo",
                setup=_demo_folder_link(name),
                after=_elsewhere_unchanged,
            )
        )
    return out


_SCHEMA_1 = """
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
PRAGMA journal_mode = WAL;
PRAGMA user_version = 1;
"""


def _old_store(*statements: str, label: str = "seed=1") -> Callable[[Path], None]:
    """A schema-1 store (as gengen 0.1 before schema 2 wrote it), then ``statements`` run on it."""

    def setup(folder: Path) -> None:
        import sqlite3

        (folder / "old").mkdir()
        with sqlite3.connect(folder / "old" / "gengen.sqlite") as conn:
            conn.executescript(_SCHEMA_1)
            conn.execute(
                "INSERT INTO scores (study, model, family, size, run, step, testset, metric, value) "
                "VALUES ('old', 'm', 'm', '', ?, 0, 't', 'acc', 0.5)",
                (label,),
            )
            for statement in statements:
                conn.execute(statement)
        conn.close()

    return setup


IN_CSV = {"in.csv": "model,step,testset,metric,value\nm,1,t,acc,0.5\n"}
INGEST_OLD = ["ingest", "{tmp}/in.csv", "--store", "{tmp}/old", "--study", "old", "-q"]


def _store_cases() -> list[Case]:
    """Read before you write: each leaves the store as it was (the corpus compares dumps and versions)."""
    return [
        Case(
            "safety-ingest-bad-json-into-an-old-store",
            ["ingest", "{tmp}/bad.json", "--store", "{tmp}/old", "-q"],
            "{tmp}/bad.json",
            files={"bad.json": "{not json"},
            setup=_old_store(),
        ),
        Case(
            "safety-old-store-without-manifests",
            INGEST_OLD,
            "{tmp}/old/gengen.sqlite: no manifests table",
            files=IN_CSV,
            setup=_old_store("DROP TABLE manifests"),
        ),
        Case(
            "safety-store-negative-version-export",
            ["export", "{tmp}/old", "{tmp}/out.csv"],
            "{tmp}/old/gengen.sqlite: store schema version -1 is not one gengen writes",
            setup=_old_store("PRAGMA user_version = -1"),
        ),
        Case(
            "safety-store-negative-version-ingest",
            INGEST_OLD,
            "{tmp}/old/gengen.sqlite: store schema version -1 is not one gengen writes",
            files=IN_CSV,
            setup=_old_store("PRAGMA user_version = -1"),
        ),
        Case(
            "safety-old-store-label-seed-overflow",
            INGEST_OLD,
            "{tmp}/old/gengen.sqlite: cannot upgrade from schema version 1",
            files=IN_CSV,
            setup=_old_store(label="seed=99999999999999999999999"),
        ),
        Case(
            "safety-old-store-label-negative-shots",
            INGEST_OLD,
            "shots=-5 is out of range",
            files=IN_CSV,
            setup=_old_store(label="seed=1,shots=-5"),
        ),
        Case(
            "safety-ingest-label-negative-shots",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/new", "-q"],
            "shots=-5 is out of range",
            files={"in.csv": 'model,run,step,testset,metric,value\nm,"seed=1,shots=-5",1,t,acc,0.5\n'},
        ),
    ]


_DRY_STUDY = """
[study]
name = "s"
id_testset = "t"
[[models]]
name = "m"
path = "facebook/opt-125m"
family = "opt"
size = "125m"
[task]
train = { source = "mnli" }
[[testsets]]
name = "t"
source = "mnli"
"""


def _analysis_table(testsets: int, missing: str = "") -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        lines = ["model,step,testset,metric,value"]
        names = ["id", *(f"t{i}" for i in range(testsets))]
        for step in range(0, 300, 10):
            level = 0.3 + step / 1000
            lines += [f"m,{step},{name},acc,{'' if name == missing else f'{level + (i % 7) / 200:.4f}'}"
                      for i, name in enumerate(names)]  # fmt: skip
        (folder / "scores.csv").write_text("\n".join(lines) + "\n")

    return setup


def _value_cases() -> list[Case]:
    """Values the checks let through and a later step tripped on; garbage that gave exit 0."""
    return [
        Case(
            "safety-train-dry-run-seed-2-to-the-63",
            ["train", "{tmp}/study.toml", "--dry-run"],
            "training.seeds[0]: 9,223,372,036,854,775,808 is above gengen's limit",
            files={"study.toml": _DRY_STUDY + "[training]\nseeds = [9223372036854775808]\n"},
        ),
        Case(
            "safety-train-dry-run-a-billion-evaluations",
            ["train", "{tmp}/study.toml", "--dry-run"],
            "evaluation.every: every 1 steps of 1,000,000,000 is 1,000,000,000 evaluations per run",
            files={"study.toml": _DRY_STUDY + "[training]\nmax_steps = 1000000000\n[evaluation]\nevery = 1\n"},
        ),
        Case(
            "safety-analyse-a-test-set-all-missing",
            ["analyse", "{tmp}/scores.csv", "--id", "id", "--out", "{tmp}/out"],
            "column 'value' is missing in every score of test set 't1'",
            setup=_analysis_table(3, missing="t1"),
        ),
        Case(
            "safety-analyse-every-score-missing",
            ["analyse", "{tmp}/scores.csv", "--id", "id", "--out", "{tmp}/out"],
            "column 'value' is missing in every score of test set 'id'",
            setup=_analysis_table(3, missing="id"),
        ),
        Case(
            "safety-analyse-min-step-leaves-one-checkpoint",
            ["analyse", "{tmp}/study", "--id", "id", "--out", "{tmp}/out", "--min-step", "2850"],
            "--min-step 2850 leaves each run one checkpoint",
            setup=_store,
        ),
        Case(
            "safety-wandb-empty-leaf",
            ["ingest", "{tmp}/history.csv", "--store", "{tmp}/new", "--model", "m", "-q"],
            "{tmp}/history.csv: column 'eval/downstream_bpb/': an empty part in its name",
            files={"history.csv": "_step,eval/downstream/arc_easy_acc,eval/downstream_bpb/\n100,0.5,0.6\n"},
        ),
        Case(
            "safety-lighteval-task-key-without-shots",
            ["ingest", "{tmp}/results.json", "--store", "{tmp}/new", "--step", "1", "-q"],
            "{tmp}/results.json: key results.'leaderboard|arc': not a lighteval task key",
            files={
                "results.json": '{"config_general": {"model_name": "o/m"}, "results": '
                '{"leaderboard|arc": {"acc": 0.4}}}'
            },
        ),
    ]


def cases() -> list[Case]:
    """Every issue-36 case."""
    return [*_demo_cases(), *_path_cases(), *_store_cases(), *_value_cases()]
