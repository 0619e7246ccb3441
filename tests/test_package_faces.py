"""A package's ``__init__.py`` is a face: its docstring and the public names it hands on, not an implementation.

Lines of code are counted without blank lines, comments and docstrings (issue 37: at most 120 per face).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "gengen"
MAX_FACE_LINES = 120
#: Faces still over the bound, each with what takes it under; strict, so one that gets there fails until removed.
STILL_HEAVY: dict[str, str] = {}


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a module, class or function docstring."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped:
            lines.update(line for line in range(token.start[0], token.end[0] + 1) if line not in docstrings)
    return len(lines)


def test_code_lines_leave_out_docstrings_comments_and_blank_lines() -> None:
    source = (
        '"""Doc.\n\nMore."""\n\n# comment\nimport os  # why\n\n\n'
        'def f() -> None:\n    """Doc."""\n    x = (\n        1,\n    )\n'
    )
    assert code_lines(source) == 5  # import, def, and the three lines of the assignment


FACES = sorted(path.parent.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize(
    "face",
    [
        pytest.param(face, marks=pytest.mark.xfail(strict=True, reason=STILL_HEAVY[face]))
        if face in STILL_HEAVY
        else face
        for face in FACES
    ],
)
def test_a_package_face_holds_at_most_120_lines_of_code(face: str) -> None:
    lines = code_lines((PACKAGE / face / "__init__.py").read_text(encoding="utf-8"))
    assert lines <= MAX_FACE_LINES, f"python/gengen/{face}/__init__.py holds {lines} lines of code"
