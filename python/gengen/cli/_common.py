"""Shared plumbing for the CLI commands: user errors become one line on stderr and exit status 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from gengen.errors import GengenError

P = ParamSpec("P")
R = TypeVar("R")

USER_ERROR_EXIT_CODE = 2


def fail(message: str) -> typer.Exit:
    """Print ``message`` as one ``error:`` line on stderr and return the Exit to raise."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code=USER_ERROR_EXIT_CODE)


def user_errors_exit(command: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so that a :class:`GengenError` (or a missing file) ends it cleanly.

    The error is printed as one line on stderr and the process exits with status 2, without a traceback;
    any other exception is a bug and propagates with its traceback.
    """

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except GengenError as error:
            raise fail(str(error)) from None
        except FileNotFoundError as error:
            raise fail(f"{error.filename}: no such file or directory") from None

    return wrapper
