"""The CLI and ``import gengen`` start light: heavy modules load only when a command needs them.

These are correctness tests of what gets imported (checked in a fresh interpreter through ``sys.modules``),
not timing tests; the start-up time is measured in benches/ (see benches/README.md).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from gengen.cli import COMMANDS, app, load_commands

HEAVY_MODULES = ("pandas", "matplotlib", "torch")


def fresh_interpreter(code: str) -> Any:
    """Run ``code`` in a new Python process and return the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "COLUMNS": "200"}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(output.stdout.strip().splitlines()[-1])


def first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


@pytest.mark.parametrize("module", ["gengen", "gengen.cli"])
def test_import_does_not_load_pandas_matplotlib_or_torch(module: str) -> None:
    loaded = fresh_interpreter(
        f"import json, sys, {module}; print(json.dumps([m for m in {HEAVY_MODULES!r} if m in sys.modules]))"
    )
    assert loaded == []


def test_help_lists_every_command_without_importing_command_modules() -> None:
    result = fresh_interpreter(
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from gengen.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "shared = {'gengen.cli._common', 'gengen.cli.group'}  # the option table and the command group\n"
        "modules = sorted(m for m in sys.modules if m.startswith('gengen.cli.') and m not in shared)\n"
        f"heavy = [m for m in {HEAVY_MODULES!r} if m in sys.modules]\n"
        "print(json.dumps({'code': result.exit_code, 'output': result.output, 'modules': modules, 'heavy': heavy}))"
    )
    assert result["code"] == 0
    assert result["modules"] == [] and result["heavy"] == []
    words = " ".join(result["output"].split())
    positions = [words.find(f"{name} {entry.help}") for name, entry in COMMANDS.items()]
    assert -1 not in positions, [name for name, at in zip(COMMANDS, positions, strict=True) if at == -1]
    assert positions == sorted(positions)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_help_does_not_import_pandas_matplotlib_or_torch(name: str) -> None:
    """Issue 18: `gengen CMD --help` starts without the heavy libraries, whichever the command."""
    loaded = fresh_interpreter(
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from gengen.cli import app\n"
        f"result = CliRunner().invoke(app, [{name!r}, '--help'])\n"
        f"print(json.dumps([result.exit_code, [m for m in {HEAVY_MODULES!r} if m in sys.modules]]))"
    )
    assert loaded == [0, []]


def test_static_command_table_matches_the_command_modules() -> None:
    """Every module registers exactly the commands the table assigns to it, with the table's help line."""
    modules = {entry.module for entry in COMMANDS.values()}
    for module in modules:
        commands = load_commands(module)
        assert sorted(commands) == sorted(name for name, entry in COMMANDS.items() if entry.module == module)
        for name, command in commands.items():
            assert first_paragraph(command.help or "") == COMMANDS[name].help, name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_help_shows_its_real_options(name: str) -> None:
    command = load_commands(COMMANDS[name].module)[name]
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f" {name} [OPTIONS]" in result.output
    # Options by their flags, arguments by their names.
    shown = [opt for param in command.params for opt in param.opts if opt.startswith("--") or opt == param.name]
    assert shown, f"{name} declares no parameters"
    for label in shown:
        assert label in result.output, f"{label} missing from `gengen {name} --help`"


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["analyze"])
    assert result.exit_code == 2
    assert "No such command 'analyze'" in result.output


def test_public_names_of_the_package() -> None:
    """The lazily imported names are the same objects as before, whichever submodule was imported first."""
    names = fresh_interpreter(
        "import json, sys\n"
        "import gengen.analyse, gengen.across.compare  # the submodules first: they must not shadow the functions\n"
        "from gengen import Analysis, Comparison, GengenError, Store, __version__, analyse, compare, load, stats\n"
        "import gengen\n"
        "print(json.dumps({\n"
        "    'analyse': analyse is sys.modules['gengen.analyse'].analyse and callable(analyse),\n"
        "    'compare': compare is sys.modules['gengen.across.compare'].compare and callable(compare),\n"
        "    'attribute': gengen.analyse is analyse and gengen.compare is compare,\n"
        "    'Analysis': Analysis is sys.modules['gengen.analyse'].Analysis,\n"
        "    'Comparison': Comparison is sys.modules['gengen.across.compare'].Comparison,\n"
        "    'Store': Store is sys.modules['gengen.store.database'].Store,\n"
        "    'load': load is sys.modules['gengen.store.database'].load,\n"
        "    'stats': stats is sys.modules['gengen.stats'],\n"
        "    'GengenError': issubclass(GengenError, ValueError),\n"
        "    'version': __version__,\n"
        "    'all': sorted(name for name in gengen.__all__ if not hasattr(gengen, name)),\n"
        "}))"
    )
    assert names.pop("version") == importlib.metadata.version("gengen")
    assert names.pop("all") == []
    assert all(names.values()), names


def test_unknown_attribute_of_the_package_raises_attribute_error() -> None:
    import gengen

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        gengen.nonexistent  # noqa: B018


def test_gengen_alone_prints_the_overview_once() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", "from gengen.cli import main; main([])"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Usage: gengen") == 1
    assert all(name in done.stdout for name in COMMANDS)
