"""Public names of a package imported on first use (PEP 562), written once for the packages that do it.

``gengen.stats`` and ``gengen.analyse`` map each public name to the module defining it, so that importing the
package loads nothing heavy (the command line reads option vocabularies without numpy, pandas or the
statistics); this module builds their ``__getattr__`` and ``__dir__`` from that map. It imports nothing itself,
and sits in the bottom layer (:mod:`gengen.stats`) so that every package above can use it.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["declared_names", "lazy_names", "public_order"]


def lazy_names(
    package: str, module_of: Mapping[str, str], namespace: dict[str, Any], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names are imported on first access.

    Parameters
    ----------
    package : str
        The package's name, as error messages show it.
    module_of : mapping of str to str
        Public name → the full name of the module defining it.
    namespace : dict
        The package's ``globals()``: a name, once imported, is cached there (later lookups skip
        ``__getattr__``).
    public : sequence of str
        The package's ``__all__``, listed by ``dir()`` before anything is imported.

    Returns
    -------
    tuple of callable
        ``(__getattr__, __dir__)``, to bind at the package's top level.

    Examples
    --------
    >>> namespace = {}
    >>> getattr_, dir_ = lazy_names("pkg", {"sqrt": "math"}, namespace, ["sqrt"])
    >>> getattr_("sqrt")(4.0), "sqrt" in namespace, dir_()
    (2.0, True, ['sqrt'])
    >>> getattr_("cbrt")
    Traceback (most recent call last):
    ...
    AttributeError: module 'pkg' has no attribute 'cbrt'
    """

    def __getattr__(name: str) -> Any:
        """Import the module defining a public name on first access, and cache the name in the package."""
        try:
            module = module_of[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__


def declared_names(init_file: str, package: str) -> dict[str, str]:
    """The public names a package's ``__init__.py`` imports under ``if TYPE_CHECKING:``, each to its module.

    The package writes each public name once, as a type checker reads it (``from .module import name as
    name``); this reads the same lines at run time (the block itself never runs), so the lazy map and
    ``__all__`` cannot drift from what type checkers see.

    Parameters
    ----------
    init_file : str
        The package's ``__init__.py`` (its ``__file__``).
    package : str
        The package's name, for the error of a file that declares nothing.

    Returns
    -------
    dict of str to str
        Public name → the full name of the module defining it, in the file's order.

    Raises
    ------
    ImportError
        The file has no ``if TYPE_CHECKING:`` block of ``from ... import`` lines.
    """
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    found.update({alias.asname or alias.name: statement.module for alias in statement.names})
    if not found:
        raise ImportError(f"{package}: its __init__.py declares no public names under 'if TYPE_CHECKING:'")
    return found


def public_order(names: Iterable[str]) -> list[str]:
    """Names in the order of a sorted ``__all__``: constants, then classes, then functions, each alphabetical.

    Parameters
    ----------
    names : iterable of str
        Public names.

    Returns
    -------
    list of str
        The names, sorted as ruff's RUF022 sorts ``__all__``.

    Examples
    --------
    >>> public_order(["partial_corr", "Gam", "SIEVE_METHOD", "Linear"])
    ['SIEVE_METHOD', 'Gam', 'Linear', 'partial_corr']
    """
    return sorted(names, key=lambda name: (0 if name.isupper() else 1 if name[:1].isupper() else 2, name))
