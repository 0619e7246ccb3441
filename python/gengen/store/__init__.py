"""The results store: one SQLite database per study folder, its rows and schema, checks, export and formats.

``gengen.store`` hands on the public names of :mod:`gengen.store.database` (``Store``, ``load``, ...) on first
use (PEP 562), so that importing a sibling such as :mod:`gengen.store.formats` does not open the database layer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gengen.store.database import (
        CODENAME_UNITS,
        COLUMNS,
        DB_NAME,
        DEFAULT_RUN,
        DTYPES,
        FILTERS,
        KEY,
        MIGRATIONS,
        REQUIRED_COLUMNS,
        RUN_KEYS,
        SCHEMA_VERSION,
        STORED_COLUMNS,
        OnConflict,
        Store,
        empty_scores,
        load,
        normalise_scores,
        parse_run_label,
        run_attributes,
        run_label,
        shown,
        split_model_name,
    )

__all__ = [
    "CODENAME_UNITS",
    "COLUMNS",
    "DB_NAME",
    "DEFAULT_RUN",
    "DTYPES",
    "FILTERS",
    "KEY",
    "MIGRATIONS",
    "REQUIRED_COLUMNS",
    "RUN_KEYS",
    "SCHEMA_VERSION",
    "STORED_COLUMNS",
    "OnConflict",
    "Store",
    "empty_scores",
    "load",
    "normalise_scores",
    "parse_run_label",
    "run_attributes",
    "run_label",
    "shown",
    "split_model_name",
]


def __getattr__(name: str) -> Any:
    """Hand on a public name of :mod:`gengen.store.database`, imported on first access."""
    if name not in __all__:
        raise AttributeError(f"module 'gengen.store' has no attribute {name!r}")
    value = getattr(importlib.import_module("gengen.store.database"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
