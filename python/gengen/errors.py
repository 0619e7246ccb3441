"""Exceptions raised by gengen.

Every problem caused by the user's input (a file, a column, an option, an array) is raised as
:class:`GengenError`, a :class:`ValueError` subclass whose message is one line naming the culprit and what is
wrong with it. The CLI prints that line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: An option named in a hint: ``{name}``, a library keyword in braces.
_HINT_OPTION = re.compile(r"\{([a-z][a-z0-9_]*)\}")


class GengenError(ValueError):
    """Bad input: the message names the file, column, argument or option and the problem.

    Raised with a plain message, or with structured fields that each front end renders in its own terms: the
    library's ``str()`` names the Python keyword (``gam_k``), the CLI names its flag (``--gam-k``) and a study
    file names its key, from the same error, so no front end parses another's message back.

    Parameters
    ----------
    message : str, optional
        The whole line, for errors that name a file or column rather than an option.
    option : str, optional
        The option's library name (a keyword of the function called), e.g. ``"gam_k"``.
    problem : str, optional
        What is wrong, without the option's name, e.g. ``"must be an integer >= 3, got 2"``.
    hint : str, optional
        What to do instead; an option it names is written ``{name}`` and rendered like ``option``, e.g.
        ``"use {fit} linear for fewer than 8 checkpoints"`` (``--fit linear`` in the CLI, ``fit linear`` here).
    run : int, optional
        The run of a batch call (one matrix per run) that ``option`` belongs to; the line starts ``run 2: ``.
    separator : str, optional
        What stands between the option and the problem: a space (the default) for a problem that reads on from
        the name (``gam_k must be …``), ``": "`` for one that does not (``covar: column 2 is constant``, the
        form of every error raised by the Rust core, which crosses with its fields).

    Examples
    --------
    >>> error = GengenError(option="gam_k", problem="must be an integer >= 3, got 2")
    >>> str(error)
    'gam_k must be an integer >= 3, got 2'
    >>> error.render(lambda name: "--" + name.replace("_", "-"))
    '--gam-k must be an integer >= 3, got 2'
    >>> str(GengenError(option="covar", problem="column 1 is constant", run=2, separator=": "))
    'run 2: covar: column 1 is constant'
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        option: str | None = None,
        problem: str | None = None,
        hint: str | None = None,
        run: int | None = None,
        separator: str = " ",
    ) -> None:
        self.option = option
        self.problem = problem
        self.hint = hint
        self.run = run
        self.separator = separator
        self._message = message
        super().__init__(self.render())

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the fields across processes (executors pickle errors back from workers).
        fields = (self._message, self.option, self.problem, self.hint, self.run, self.separator)
        return (_rebuild, (type(self), *fields))

    def render(self, name: Callable[[str], str] | None = None) -> str:
        """The error's line, with its option written by ``name`` (default: the library's keyword).

        Parameters
        ----------
        name : callable, optional
            Maps the option's library name to the front end's (a CLI flag, a study-file key).

        Returns
        -------
        str
            One line: the message, or ``"<option> <problem>"`` (``"<option>: <problem>"`` with the separator
            ``": "``, after ``"run <run>: "`` when there is a run) plus ``"; <hint>"`` (its ``{name}`` options
            written by ``name`` too).
        """
        if self._message is not None and self.option is None:
            text = self._message
        else:
            shown = self.option if self.option is None or name is None else name(self.option)
            text = self.separator.join(part for part in (shown, self.problem or self._message) if part)
        if self.run is not None:
            text = f"run {self.run}: {text}"
        if not self.hint:
            return text
        return f"{text}; {_HINT_OPTION.sub(lambda found: (name or str)(found[1]), self.hint)}"


class InputError(GengenError):
    """An input file or table cannot be read as asked."""


class ConfigError(GengenError):
    """A study configuration is invalid."""


class StoreConflictError(GengenError):
    """A score would overwrite a different value already in the store."""


class UnknownFormatError(InputError):
    """A file's format is not one gengen can ingest, or is not the format asked for."""


class StoreError(GengenError):
    """A path is not a gengen store, or the store was written by a newer gengen."""


class InvalidArgumentError(GengenError):
    """An argument of a statistics function is malformed (shape, non-finite values, unknown option…)."""


class DegenerateDataError(GengenError):
    """The data do not support the statistic: a constant column, collinear covariates…"""


def _rebuild(
    cls: type[GengenError],
    message: str | None,
    option: str | None,
    problem: str | None,
    hint: str | None,
    run: int | None = None,
    separator: str = " ",
) -> GengenError:
    error = cls.__new__(cls)
    GengenError.__init__(error, message, option=option, problem=problem, hint=hint, run=run, separator=separator)
    return error
