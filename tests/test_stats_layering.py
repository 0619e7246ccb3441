"""gengen.stats is the bottom layer: it imports only itself, the Rust core, the errors and the size limits.

Checked twice: statically, from every ``import`` in the package's source (function-local and ``TYPE_CHECKING``
ones included, relative ones resolved), and at run time, from ``sys.modules`` after importing every module of
the package in a fresh interpreter. The option vocabulary (:mod:`gengen.stats.options`) is also checked to load
without numpy, since the command line builds its options from it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

STATS = Path(__file__).resolve().parents[1] / "python" / "gengen" / "stats"
#: What the statistics may import from gengen: themselves and what sits below them.
ALLOWED = ("gengen.stats", "gengen._core", "gengen.errors", "gengen.stats.limits")
#: Modules of the gengen package that are not layers (the package itself, whose ``__init__`` is lazy).
NEUTRAL = ("gengen",)


def allowed(module: str) -> bool:
    return module in NEUTRAL or any(module == prefix or module.startswith(prefix + ".") for prefix in ALLOWED)


def imported_modules(path: Path) -> set[str]:
    """Every gengen module (or ``module.name``) that ``path`` imports anywhere in its source."""
    package = "gengen.stats"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            # `from gengen import _core` and `from . import options` import submodules: count each name as one.
            submodules = stem == "gengen" or node.module is None
            found.update(f"{stem}.{alias.name}" if submodules else stem for alias in node.names)
    return {name for name in found if name == "gengen" or name.startswith("gengen.")}


def test_the_source_of_gengen_stats_imports_nothing_above_it() -> None:
    files = sorted(STATS.rglob("*.py"))
    assert len(files) >= 10, files  # the package, not an empty folder
    seen = {}
    for path in files:
        for module in imported_modules(path):
            seen.setdefault(module, []).append(path.name)
    assert "gengen._core" in seen and "gengen.stats.validation" in seen  # the parser reads both import forms
    outside = {module: paths for module, paths in seen.items() if not allowed(module)}
    assert not outside, f"gengen.stats imports modules above it: {outside}"


def test_the_check_sees_function_local_and_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "from gengen import _core, errors\n"
        "from . import options\n"
        "def late():\n"
        "    from gengen.analyse.core import analyse\n"
        "    import gengen.report\n",
        encoding="utf-8",
    )
    found = imported_modules(source)
    assert {
        "gengen._core",
        "gengen.errors",
        "gengen.stats.options",
        "gengen.analyse.core",
        "gengen.report",
    } == found
    assert [module for module in sorted(found) if not allowed(module)] == ["gengen.analyse.core", "gengen.report"]


def test_importing_every_stats_module_loads_nothing_above_it() -> None:
    modules = sorted(f"gengen.stats.{path.stem}" for path in STATS.glob("*.py") if path.stem != "__init__")
    code = (
        "import importlib, json, sys\n"
        "import gengen.stats.options\n"
        "light = [m for m in ('numpy', 'pandas', 'gengen._core') if m in sys.modules]\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "import gengen.stats\n"
        "names = [getattr(gengen.stats, n) for n in gengen.stats.__all__]\n"
        "print(json.dumps({'light': light, 'loaded': sorted(m for m in sys.modules if m.startswith('gengen'))}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    result = json.loads(output.stdout.strip().splitlines()[-1])
    assert result["light"] == [], "gengen.stats.options must not load numpy, pandas or the Rust core"
    assert "gengen.stats.sieve" in result["loaded"]
    assert [module for module in result["loaded"] if not allowed(module)] == []
