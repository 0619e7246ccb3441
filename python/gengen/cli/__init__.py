"""The ``gengen`` command line: a thin layer over the library functions.

Each command lives in its own module exposing ``register(app)``; :mod:`gengen.cli.group` assembles them into the
lazy command group (``gengen --help`` lists every command from a static table; a command's module is imported only
when that command runs or shows its own help). This face hands the group's names on: the console script runs
``gengen.cli:main``.
"""

from __future__ import annotations

from gengen.cli.group import COMMAND_MODULES, COMMANDS, CommandEntry, LazyCommandGroup, app, load_commands, main

__all__ = ["COMMANDS", "COMMAND_MODULES", "CommandEntry", "LazyCommandGroup", "app", "load_commands", "main"]
