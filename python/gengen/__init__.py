"""gengen: do your out-of-distribution results generalise?

Fine-tune and score language models across checkpoints, then measure, for every pair of out-of-distribution
test sets, how their scores move together once in-domain performance is regressed out.

``import gengen`` stays light: the public names below are imported on first use (PEP 562), so the CLI and
``import gengen`` do not pay for numpy, pandas or the Rust extension before they need them; training and
scoring modules import torch only when used.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from gengen.errors import GengenError

if TYPE_CHECKING:
    from gengen import stats
    from gengen._core import __version__
    from gengen.across.compare import Comparison, compare
    from gengen.analyse import Analysis, analyse
    from gengen.stats.controls import Gam, Linear
    from gengen.store.database import Store, load

__all__ = [
    "Analysis",
    "Comparison",
    "Gam",
    "GengenError",
    "Linear",
    "Store",
    "__version__",
    "analyse",
    "compare",
    "load",
    "stats",
]

# Public name -> module defining it (None: the name is the submodule itself).
_LAZY_NAMES: dict[str, tuple[str, str | None]] = {
    "stats": ("gengen.stats", None),
    "__version__": ("gengen._core", "__version__"),
    "Analysis": ("gengen.analyse", "Analysis"),
    "analyse": ("gengen.analyse", "analyse"),
    "Comparison": ("gengen.across.compare", "Comparison"),
    "compare": ("gengen.across.compare", "compare"),
    "Store": ("gengen.store.database", "Store"),
    "Gam": ("gengen.stats.controls", "Gam"),
    "Linear": ("gengen.stats.controls", "Linear"),
    "load": ("gengen.store.database", "load"),
}


def __getattr__(name: str) -> Any:
    """Import a public name on first access and cache it in the package namespace."""
    try:
        module_name, attribute = _LAZY_NAMES[name]
    except KeyError:
        raise AttributeError(f"module 'gengen' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """The package's module type: ``gengen.analyse`` and ``gengen.compare`` stay the functions.

    Importing a submodule binds it as an attribute of its package. ``gengen.analyse`` and ``gengen.compare`` are
    both submodules and the public functions of the same names; eagerly imported, the functions were bound last
    and won. Imported lazily, the submodule may be imported first (by the CLI, say), so that binding is dropped
    here and :func:`__getattr__` returns the function.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _FUNCTIONS_NAMED_LIKE_SUBMODULES:
            return
        super().__setattr__(name, value)


_FUNCTIONS_NAMED_LIKE_SUBMODULES = frozenset({"analyse", "compare"})
sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
