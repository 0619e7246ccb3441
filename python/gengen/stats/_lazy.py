"""Public names of a package imported on first use (PEP 562), written once for the packages that do it.

``gengen.stats`` and ``gengen.analyse`` map each public name to the module defining it, so that importing the
package loads nothing heavy (the command line reads option vocabularies without numpy, pandas or the
statistics); this module builds their ``__getattr__`` and ``__dir__`` from that map. It imports nothing itself,
and sits in the bottom layer (:mod:`gengen.stats`) so that every package above can use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_names"]


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
