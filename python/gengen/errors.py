"""Exceptions raised by gengen.

Every problem caused by the user's input (a file, a column, an option, an array) is raised as
:class:`GengenError`, a :class:`ValueError` subclass whose message is one line naming the culprit and what is
wrong with it. The CLI prints that line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class GengenError(ValueError):
    """Bad input: the message names the file, column, argument or option and the problem."""


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
