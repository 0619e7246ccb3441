"""Cases of issue 26 the other corpus modules left out (an audit of its "each case named above has a test").

* paths and names that are not valid UTF-8 (the OS hands such bytes to Python as surrogates): ingest and
  export failed with a traceback inside pandas or pyarrow, report called a sound analysis folder damaged; now
  every command refuses such an argument in one line, its bytes escaped, before any file is read or written
  (stores, tables and reports keep paths and names as UTF-8 text);
* ``gengen demo --fresh`` pointed at a folder the demo did not write (a store, say) deleted it whole: no
  command may destroy a store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .case import Case
from .cases_cli import IN_CSV, _analysis, _store
from .cases_untrusted import EXECUTOR_STUDY

# "\udcff" is how Python spells the byte 0xff of a file name that is not UTF-8; the error line shows "\xff".
BAD = "\udcff"
NOT_UTF8 = "not valid UTF-8"


def _absent(name: str) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        assert not (folder / name).exists(), f"{name!r} was created"

    return check


def _a_store(folder: Path) -> None:
    _store(folder)


def _a_store_named_not_utf8(folder: Path) -> None:
    _store(folder).rename(folder / f"st{BAD}")


def _an_analysis_named_not_utf8(folder: Path) -> None:
    _analysis(folder, f"a{BAD}")


def _not_utf8_cases() -> list[Case]:
    table = IN_CSV["in.csv"]
    in_csv: dict[str, bytes | str] = dict(IN_CSV)
    return [
        Case(
            "audit-not-utf8-ingest-file",
            ["ingest", f"{{tmp}}/in{BAD}.csv", "--store", "{tmp}/study", "-q"],
            f"{{tmp}}/in\\xff.csv: {NOT_UTF8}",
            files={f"in{BAD}.csv": table},
            after=_absent("study"),
        ),
        Case(  # found by walking a folder, so the command line itself is UTF-8
            "audit-not-utf8-ingest-file-in-a-folder",
            ["ingest", "{tmp}/scores", "--store", "{tmp}/study", "-q"],
            "{tmp}/scores/in\\xff.csv: the file name is not valid UTF-8",
            files={f"scores/in{BAD}.csv": table},
            after=_absent("study"),
        ),
        Case(
            "audit-not-utf8-ingest-store",
            ["ingest", "{tmp}/in.csv", "--store", f"{{tmp}}/st{BAD}", "-q"],
            f"{{tmp}}/st\\xff: {NOT_UTF8}",
            files=in_csv,
            after=_absent(f"st{BAD}"),
        ),
        Case(
            "audit-not-utf8-ingest-model-name",
            ["ingest", "{tmp}/in.csv", "--store", "{tmp}/study", "--model", f"m{BAD}", "-q"],
            f"m\\xff: {NOT_UTF8}",
            files={"in.csv": "step,testset,metric,value\n1,t,acc,0.5\n"},
            after=_absent("study"),
        ),
        Case(
            "audit-not-utf8-export-out",
            ["export", "{tmp}/study", f"{{tmp}}/out{BAD}.parquet"],
            f"{{tmp}}/out\\xff.parquet: {NOT_UTF8}",
            setup=_a_store,
            after=_absent(f"out{BAD}.parquet"),
        ),
        Case(
            "audit-not-utf8-analyse-store",
            ["analyse", f"{{tmp}}/st{BAD}", "--id", "id", "--inference", "t-test", "--out", "{tmp}/out"],
            f"{{tmp}}/st\\xff: {NOT_UTF8}",
            setup=_a_store_named_not_utf8,
            after=_absent("out"),
        ),
        Case(
            "audit-not-utf8-analyse-out",
            ["analyse", "{tmp}/study", "--id", "id", "--inference", "t-test", "--out", f"{{tmp}}/out{BAD}"],
            f"{{tmp}}/out\\xff: {NOT_UTF8}",
            setup=_a_store,
            after=_absent(f"out{BAD}"),
        ),
        Case(
            "audit-not-utf8-report-analysis",
            ["report", f"{{tmp}}/a{BAD}", "-q"],
            f"{{tmp}}/a\\xff: {NOT_UTF8}",
            setup=_an_analysis_named_not_utf8,
            after=_absent(f"a{BAD}/report.html"),
        ),
        Case(
            "audit-not-utf8-plan-study",
            ["plan", f"{{tmp}}/s{BAD}.toml"],
            f"{{tmp}}/s\\xff.toml: {NOT_UTF8}",
            files={f"s{BAD}.toml": EXECUTOR_STUDY},
        ),
    ]


def _kept(relative: str) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        assert (folder / relative).exists(), f"{relative} was deleted"

    return check


def _edited_demo(folder: Path) -> None:
    from gengen.demo import study_template

    (folder / "demo").mkdir()
    (folder / "demo" / "study.toml").write_text(study_template() + "\n# my notes\n")


def _demo_cases() -> list[Case]:
    refused = "no list of the files the demo wrote"
    return [
        Case(
            "audit-demo-fresh-on-a-store-folder",
            ["demo", "--out", "{tmp}/study", "--fresh"],
            f"{{tmp}}/study/gengen.sqlite: {refused}",
            setup=_a_store,
            after=_kept("study/gengen.sqlite"),
        ),
        Case(
            "audit-demo-fresh-on-a-folder-of-files",
            ["demo", "--out", "{tmp}/home", "--fresh"],
            f"{{tmp}}/home/notes.txt: {refused}",
            files={"home/notes.txt": "keep me\n"},
            after=_kept("home/notes.txt"),
        ),
        Case(
            "audit-demo-fresh-on-an-edited-study",
            ["demo", "--out", "{tmp}/demo", "--fresh"],
            f"{{tmp}}/demo/study.toml: {refused}",
            setup=_edited_demo,
            after=_kept("demo/study.toml"),
        ),
    ]


def cases() -> list[Case]:
    """Every audit case."""
    return [*_not_utf8_cases(), *_demo_cases()]
