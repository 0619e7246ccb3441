"""The CLI's light paths: plain values coerced without pydantic as typer's own (pydantic) coercion does, and the
help rendered without rich.markdown as with it.

``gengen.cli`` lets a parameter take a ``str`` for a ``str``, an in-range number of its own type and a path for
a ``Path`` as they are, and hands every other value to typer's adapter (issue 27: the default ``gengen
analyse`` run no longer imports pydantic). The reference is typer's coercion of the same parameter, built here
with ``build_runtime_param`` as typer builds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from gengen.cli import load_commands

VALUES: tuple[Any, ...] = ("abc", "", "12", "1e3", 0, 1, 7, 999, 10**12, -3, 0.5, 2.0, 1.5, float("nan"), True)


def _outcome(function: Any, value: Any) -> tuple[str, Any]:
    try:
        result = function(value)
    except BadParameter as error:
        return "error", error.format_message()
    return type(result).__name__, result if result == result else "nan"


@pytest.mark.parametrize("module", ["analyse", "compare", "export"])
def test_every_parameter_coerces_as_typers_adapter(module: str, tmp_path: Path) -> None:
    commands = load_commands(module)
    nowhere: Any = None  # typer's coercion takes the click context only for its error messages
    checked = 0
    for command in commands.values():
        params: list[Any] = list(command.params)
        for param in params:
            if param.multiple or param.nargs != 1:
                continue
            ours = param._runtime_param
            assert type(ours).__name__ == "PlainValues"
            reference = build_runtime_param(param.type_descriptor)
            for value in (*VALUES, str(tmp_path), tmp_path, str(tmp_path / "new")):
                got = _outcome(lambda v: ours.coerce(v, param=param, ctx=nowhere), value)  # noqa: B023
                expected = _outcome(lambda v: reference.coerce(v, param=param, ctx=nowhere), value)  # noqa: B023
                assert got == expected, (command.name, param.name, value)
                checked += 1
    assert checked > 50


def test_the_default_analyse_run_does_not_import_pydantic(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import pandas as pd\n"
        "from gengen.calibration.simulate import simulate_trajectories\n"
        f"table = {str(tmp_path / 'scores.csv')!r}\n"
        "pd.concat([simulate_trajectories(n=30, n_testsets=3, seed=s, model=m) for s, m in ((1, 'a'), (2, 'b'))])"
        ".to_csv(table, index=False)\n"
        "from gengen.cli import main\n"
        f"out = {str(tmp_path / 'out')!r}\n"
        "sys.argv = ['gengen', 'analyse', table, '--id', 'id', '--metric', 'accuracy', '--out', out]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as end:\n"
        "    assert end.code == 0, end.code\n"
        "print('pydantic' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr[-2000:]
    assert (tmp_path / "out" / "verdict.json").is_file()


HELP = (
    "import contextlib, io, json, sys\n"
    "{first}"
    "from gengen.cli import main\n"
    "out = io.StringIO()\n"
    "with contextlib.redirect_stdout(out):\n"
    "    try:\n"
    "        main({argv!r})\n"
    "    except SystemExit:\n"
    "        pass\n"
    "print(json.dumps([out.getvalue(), 'rich.markdown' in sys.modules, 'rich.traceback' in sys.modules]))\n"
)


@pytest.mark.parametrize("argv", [["analyse", "--help"], ["--help"], ["score", "--help"]])
def test_help_is_the_same_without_rich_markdown(argv: list[str]) -> None:
    """The help renderer loads with stand-ins for rich.markdown and rich.traceback: the text equals the one
    rendered with both imported for real first."""
    env = {**os.environ, "COLUMNS": "120"}

    def run(first: str) -> list[Any]:
        code = HELP.format(first=first, argv=argv)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        return list(json.loads(result.stdout.strip().splitlines()[-1]))

    light, markdown_light, traceback_light = run("")
    full, markdown_full, _ = run("import rich.markdown, rich.traceback\n")
    assert light == full and "Usage" in light
    assert not markdown_light and not traceback_light and markdown_full
