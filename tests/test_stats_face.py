"""gengen.stats lists each public name once (issue 37, item 3): its ``if TYPE_CHECKING:`` imports, which type
checkers read as explicit re-exports and :func:`gengen.stats._lazy.declared_names` reads at run time for the
lazy map and ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from gengen import stats
from gengen.stats._lazy import declared_names, public_order

INIT = Path(stats.__file__)


def test_each_public_name_is_written_once_and_resolves_to_its_module() -> None:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names]
    assert stats.__all__ == public_order(stats.__all__) and len(stats.__all__) == len(set(stats.__all__)) > 60
    for name in stats.__all__:
        assert imported.count(name) == 1, name  # one import line, no second list
        assert name not in strings, name
        module = importlib.import_module(stats._MODULE_OF[name])
        assert getattr(stats, name) is getattr(module, name), name
    # No public name is also a submodule's: importing the submodule would rebind the name to the module.
    submodules = {path.stem for path in INIT.parent.glob("*.py")}
    assert not submodules & set(stats.__all__)
    assert {"partial_corr", "Gam", "Linear", "p_adjust", "SIEVE_METHOD"} <= set(stats.__all__)


def test_a_face_that_declares_nothing_is_refused(tmp_path: Path) -> None:
    face = tmp_path / "__init__.py"
    face.write_text("from typing import TYPE_CHECKING\n\nimport os\n", encoding="utf-8")
    with pytest.raises(ImportError, match=r"pkg: its __init__\.py declares no public names"):
        declared_names(str(face), "pkg")
    face.write_text("if TYPE_CHECKING:\n    from m import a as a, b\n    from n import C\n", encoding="utf-8")
    assert declared_names(str(face), "pkg") == {"a": "m", "b": "m", "C": "n"}
