"""The ``gengen`` command line: a thin layer over the library functions.

Each command lives in its own module exposing ``register(app)``; this file only assembles them.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="gengen",
    help="Do your out-of-distribution results generalise? Fine-tune, score, analyse and report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules, in the order their commands appear in `gengen --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "stats",
    "ingest",
    "export",
    "analyse",
    "compare",
    "report",
    "demo",
    "train",
    "score",
    "run",
    "simulate",
)

for _module_name in COMMAND_MODULES:
    importlib.import_module(f"gengen.cli.{_module_name}").register(app)


def main() -> None:
    """Entry point of the ``gengen`` console script."""
    app()
