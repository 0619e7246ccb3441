"""The bad-input corpus: every case of every ``tests/bad_input/cases_*.py`` module through the ``gengen`` CLI.

For each case (see :mod:`tests.bad_input.case`): exit status 2, exactly one non-empty line on stderr, starting
with ``error:`` and naming the culprit; no traceback in stdout or stderr; every store in the case folder has
the same SQL dump (schema version included) before and after. Cases run in-process through
``gengen.cli.main`` (the console script's function) for speed; a few run through the installed ``gengen``
script in a subprocess, to prove the real entry point behaves the same.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from .case import Case

HERE = Path(__file__).parent
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def _collect() -> list[Case]:
    found: list[Case] = []
    for module_path in sorted(HERE.glob("cases_*.py")):
        module = importlib.import_module(f"{__package__}.{module_path.stem}")
        found.extend(module.cases())
    names = [case.name for case in found]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    assert not duplicated, f"case names must be unique: {duplicated}"
    return found


CASES = _collect()

# Cases also run through the installed console script: one per kind of failure path.
SUBPROCESS_CASES = (
    "cli-option-analyse-n-perm-float",
    "cli-unknown-command",
    "cli-fs-export-out-is-directory",
    "cli-store-garbage-bytes-export",
    "cli-compare-summary-truncated",
    "cli-stats-partial-corr-empty-csv",
)


def _expand(text: str, folder: Path) -> str:
    return text.replace("{tmp}", str(folder))


def _prepare(case: Case, folder: Path) -> None:
    for relative, content in case.files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.setup is not None:
        case.setup(folder)


def _dump(path: Path) -> tuple[str, ...]:
    """The SQL dump and schema version of a store, or its bytes' hash when it is not a readable database."""
    for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):
        try:
            conn = sqlite3.connect(uri, uri=True)
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                return (f"user_version={version}", *conn.iterdump())
            finally:
                conn.close()
        except sqlite3.Error:
            continue
    return ("bytes", hashlib.sha256(path.read_bytes()).hexdigest())


def _stores(folder: Path) -> dict[str, tuple[str, ...]]:
    dumps = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix.lower() in STORE_SUFFIXES:
            dumps[str(path.relative_to(folder))] = _dump(path)
    return dumps


def _make_removable(folder: Path) -> None:
    """Undo what read-only setups did, so that pytest can delete the folder."""
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-R", "-i", str(folder)], capture_output=True, check=False)
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def _run_in_process(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int | None, str, str]:
    from gengen.cli import main

    monkeypatch.setattr(sys, "argv", ["gengen", *argv])
    out, err = io.StringIO(), io.StringIO()
    code: int | None
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # a bug: show it as the real script would
            import traceback

            traceback.print_exc(file=err)
            code = None
    return code, out.getvalue(), err.getvalue()


def _script() -> list[str]:
    script = Path(sys.executable).parent / "gengen"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from gengen.cli import main; main()"]


def _run_subprocess(argv: list[str], folder: Path) -> tuple[int | None, str, str]:
    done = subprocess.run([*_script(), *argv], cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


def _normal(text: str) -> str:
    return text.lower().replace("_", "-")


def _check(case: Case, folder: Path, code: int | None, out: str, err: str) -> None:
    shown = f"argv: {case.argv}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert "Traceback" not in out + err, shown
    assert code == 2, f"exit status {code}, expected 2\n{shown}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one line on stderr, got {len(lines)}\n{shown}"
    assert lines[0].startswith("error: "), shown
    culprit = _expand(case.culprit, folder)
    # An argument is named n_perm in the library and --n-perm on the command line: either names it.
    assert _normal(culprit) in _normal(lines[0]), f"the error line does not name {culprit!r}\n{shown}"


def _run_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, subprocess_run: bool) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    try:
        _prepare(case, folder)
        before = _stores(folder)
        argv = [_expand(argument, folder) for argument in case.argv]
        monkeypatch.chdir(folder)
        if subprocess_run:
            code, out, err = _run_subprocess(argv, folder)
        else:
            code, out, err = _run_in_process(argv, monkeypatch)
        if case.after is not None:  # first: a payload that ran is the worse failure
            case.after(folder)
        _check(case, folder, code, out, err)
        assert _stores(folder) == before, f"a store changed\nargv: {argv}\n{err}"
    finally:
        _make_removable(folder)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_one_error_line(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_case(case, tmp_path, monkeypatch, subprocess_run=False)


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_input_through_the_console_script(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = next((c for c in CASES if c.name == name), None)
    assert case is not None, f"no case named {name!r}"
    _run_case(case, tmp_path, monkeypatch, subprocess_run=True)


def test_the_corpus_is_large_enough() -> None:
    # Issue 16 asks for at least 200 cases across commands and the stats API (tests/bad_input/*).
    from .test_stats_bounds import STATS_CASES

    assert len(CASES) + len(STATS_CASES) >= 200, (len(CASES), len(STATS_CASES))


def test_warnings_and_errors_are_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    import typer

    from gengen.cli._common import user_errors_exit
    from gengen.errors import GengenError

    @user_errors_exit
    def command() -> None:
        warnings.warn("k: lowered from 10 to 4\nfor the control", RuntimeWarning, stacklevel=1)
        warnings.warn("an internal deprecation", DeprecationWarning, stacklevel=1)
        raise GengenError("--x 'a': is constant\nsecond line")

    with pytest.raises(typer.Exit) as stop:
        command()
    assert stop.value.exit_code == 2
    assert capsys.readouterr().err.splitlines() == [
        "warning: k: lowered from 10 to 4; for the control",
        "error: --x 'a': is constant; second line",
    ]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (PermissionError(13, "Permission denied", "/data/out"), "/data/out: permission denied"),
        (FileExistsError(17, "File exists", "/data/out"), "/data/out: already exists"),
        (NotADirectoryError(20, "Not a directory", "/data/f/x"), "/data/f/x: not a directory (a file is in the way)"),
        (IsADirectoryError(21, "Is a directory", "/data/x.csv"), "/data/x.csv: is a directory, expected a file"),
        (OSError(28, "No space left on device", "/data/x"), "/data/x: no space left on the device"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "store: attempt to write a readonly"),
        (MemoryError(), "out of memory"),
    ],
)
def test_user_error_messages(error: BaseException, expected: str) -> None:
    from gengen.cli._common import user_error_message

    message = user_error_message(error)
    assert message is not None and message.startswith(expected), message


def test_a_bug_keeps_its_traceback() -> None:
    from gengen.cli._common import user_error_message, user_errors_exit

    assert user_error_message(KeyError("x")) is None

    @user_errors_exit
    def command() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        command()
