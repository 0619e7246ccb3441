"""Installed versions of Python and of named distributions, as gengen records them in its outputs.

One helper for the three records that name versions: an analysis' ``summary.json``, a store's manifest and a
training run's manifest. Each keeps its own list of distributions; this module only reads them.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib import metadata

__all__ = ["installed_versions"]


def installed_versions(names: Iterable[str], *, python: bool = False, missing: str | None = None) -> dict[str, str]:
    """The installed version of each distribution in ``names``.

    Parameters
    ----------
    names : iterable of str
        Distribution names, as ``pip`` knows them.
    python : bool
        Also record the interpreter's version first, under ``"python"``.
    missing : str, optional
        Recorded for a distribution that is not installed; None leaves it out.

    Returns
    -------
    dict of str to str
        In the order of ``names`` (``"python"`` first).

    Examples
    --------
    >>> installed_versions(["no-such-distribution"], missing="not installed")
    {'no-such-distribution': 'not installed'}
    >>> installed_versions(["no-such-distribution"])
    {}
    """
    versions = {"python": platform.python_version()} if python else {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if missing is not None:
                versions[name] = missing
    return versions
