"""Docstring fragments that several stats functions share, written once.

A line of a docstring that holds only ``%(name)s`` is replaced by the fragment ``name`` of :data:`FRAGMENTS`,
indented as that line is; :func:`shared_doc` does it when the function is defined, so ``help()``, numpydoc
and the doctests all see the whole text. An unknown name fails at import.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

__all__ = ["FRAGMENTS", "shared_doc"]

F = TypeVar("F", bound=Callable[..., object])

FRAGMENTS = {
    "covar": """\
covar : array_like of shape (n,) or (n, k), optional
    The control (e.g. the in-domain score), in the same order.""",
    "scores_covar": """\
scores : array_like of shape (n, m)
    One column per test set, one row per checkpoint, in training order.
covar : array_like of shape (n,) or (n, k), optional
    The control (e.g. the in-domain score), in the same order.""",
    "one_control": """\
scores : array_like of shape (n, m)
    One column per test set, one row per checkpoint.
covar : array_like of shape (n,) or (n, q)
    The control.""",
    "ppcor_references": """\
References
----------
Kim, S. (2015). ppcor: An R package for a fast calculation to semi-partial correlation coefficients.
*Communications for Statistical Applications and Methods*, 22(6), 665–674.""",
    "runs": """\
scores : sequence of array_like (n_i, m_i), or an array of shape (runs, n, m)
    One score matrix per run, checkpoints in training order; runs may differ in length.
covar : sequence of array_like (n_i, k_i) or None, or an array of shape (runs, n, k), optional
    One control per run, in the same order (None: no control).""",
    "n_checkpoints": """\
n : int
    Number of checkpoints.""",
    "threads": """\
n_threads : int, optional
    Threads to use (default: all cores); the result does not depend on it.""",
    "gam_options": """\
**gam_options
    Deprecated: ``k``, ``gam_method``, ``gam_basis``, ``max_edf`` with ``fit="gam"``; pass the control
    ``fit=Gam(k=..., method=..., basis=..., max_edf=...)`` instead (a ``FutureWarning`` names it).""",
}

_MARKER = re.compile(r"^( *)%\((\w+)\)s$", re.MULTILINE)


def shared_doc(func: F) -> F:
    """Fill the ``%(name)s`` lines of ``func``'s docstring from :data:`FRAGMENTS`.

    Parameters
    ----------
    func : callable
        A function whose docstring names fragments.

    Returns
    -------
    callable
        ``func`` itself, its docstring filled in (left alone when docstrings are stripped, ``python -OO``).

    Examples
    --------
    >>> @shared_doc
    ... def f(covar=None):
    ...     '''Nothing.
    ...
    ...     Parameters
    ...     ----------
    ...     %(covar)s
    ...     '''
    >>> print(f.__doc__.splitlines()[4])
        covar : array_like of shape (n,) or (n, k), optional
    """
    if func.__doc__ is not None:

        def fill(match: re.Match[str]) -> str:
            indent, name = match.groups()
            return "\n".join(indent + line for line in FRAGMENTS[name].splitlines())

        func.__doc__ = _MARKER.sub(fill, func.__doc__)
    return func
