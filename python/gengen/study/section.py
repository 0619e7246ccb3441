"""Reading one TOML table of a study file: typed getters that name the key on error, and a check for unknown keys.

Every problem is a :class:`gengen.errors.ConfigError` of one line, ``<file>: <table>.<key>: <problem>``; a
choice refused is always ``expected one of 'a', 'b', got 'x'`` (with a close match when there is one), and a
count or size above gengen's limit says the limit.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gengen.errors import ConfigError

__all__ = ["Section", "choice_problem", "number_text", "show"]


def show(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (an error line never echoes a huge value whole)."""
    text = repr(value) if not isinstance(value, (str, bytes)) or len(value) <= 200 else repr(value[:200])
    return text if len(text) <= 60 else text[:57] + "..."


def number_text(value: float) -> str:
    """``value`` as an error line writes it: whole numbers with thousands separators, others by ``:g``."""
    if isinstance(value, bool) or not math.isfinite(value):
        return repr(value)
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e18 else f"{value:g}"


def choice_problem(value: Any, choices: Sequence[str]) -> str:
    """The one wording of a refused choice: ``expected one of 'a', 'b', got 'x'`` (and a close match)."""
    problem = f"expected one of {', '.join(map(repr, choices))}, got {show(value)}"
    close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
    return f"{problem} (did you mean {close[0]!r}?)" if close else problem


_MISSING = object()


class Section:
    """A TOML table being read: typed getters that name the key on error, and a check for unknown keys."""

    def __init__(self, data: Any, where: str, origin: str):
        self.where = where
        self.origin = origin
        if not isinstance(data, Mapping):
            raise self.error(None, f"expected a table, got {show(data)}")
        self.data = dict(data)
        self.seen: set[str] = set()

    def key(self, name: str | None) -> str:
        """The dotted key of ``name`` in this table (the table itself for None)."""
        if name is None:
            return self.where or "(top level)"
        return f"{self.where}.{name}" if self.where else name

    def error(self, name: str | None, problem: str) -> ConfigError:
        """The one-line error ``<file>: <key>: <problem>``."""
        return ConfigError(f"{self.origin}: {self.key(name)}: {problem}")

    def has(self, name: str) -> bool:
        """Whether the table sets ``name``."""
        return name in self.data

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        """The value of ``name`` as written (``default`` when absent; required without one), marked as read."""
        self.seen.add(name)
        if name not in self.data:
            if default is _MISSING:
                raise self.error(name, "missing (required)")
            return default
        return self.data[name]

    def string(self, name: str, default: Any = _MISSING, *, choices: Sequence[str] | None = None) -> Any:
        """A non-empty string, one of ``choices`` when given (:func:`choice_problem` words a refusal)."""
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        if not isinstance(value, str) or not value:
            raise self.error(name, f"expected a non-empty string, got {show(value)}")
        if choices is not None and value not in choices:
            raise self.error(name, choice_problem(value, choices))
        return value

    def number(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        integer: bool = False,
        minimum: float | None = None,
        positive: bool = False,
        maximum: float | None = None,
    ) -> Any:
        """A number (an integer with ``integer``), at least ``minimum``, above 0 with ``positive``, at most
        ``maximum`` (gengen's limit, said in the refusal)."""
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        kind = "an integer" if integer else "a number"
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or (isinstance(value, float) and not math.isfinite(value)):
            raise self.error(name, f"expected {kind}, got {show(value)}")
        if positive and value <= 0:
            raise self.error(name, f"expected a positive {'integer' if integer else 'number'}, got {value}")
        if minimum is not None and value < minimum:
            raise self.error(name, f"expected {kind} >= {minimum:g}, got {value}")
        if maximum is not None and value > maximum:
            limit = number_text(maximum)
            raise self.error(name, f"{number_text(value)} is above gengen's limit of {limit}; give at most {limit}")
        return int(value) if integer else float(value)

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        """``true`` or ``false``."""
        value = self.raw(name, default)
        if name in self.data and not isinstance(value, bool):
            raise self.error(name, f"expected true or false, got {show(value)}")
        return value

    def list_of(
        self, name: str, check: Callable[[str, Any], Any], default: Any = _MISSING, *, max_items: int | None = None
    ) -> Any:
        """A list, each entry checked by ``check(label, value)``; more than ``max_items`` entries are refused
        before any is checked."""
        if name not in self.data:
            return self.raw(name, default)
        value = self.raw(name)
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {show(value)}")
        if max_items is not None and len(value) > max_items:
            raise self.error(
                name, f"{len(value):,} entries, above gengen's limit of {max_items:,}; give at most {max_items:,}"
            )
        return tuple(check(f"{name}[{i}]", item) for i, item in enumerate(value))

    def int_item(self, label: str, value: Any, *, minimum: int = 0, maximum: int | None = None) -> int:
        """One entry of a list of integers, from ``minimum`` to ``maximum`` (gengen's limit)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(label, f"expected an integer >= {minimum}, got {show(value)}")
        if maximum is not None and value > maximum:
            raise self.error(label, f"{value:,} is above gengen's limit of {maximum:,}; give at most {maximum:,}")
        return value

    def str_item(self, label: str, value: Any) -> str:
        """One entry of a list of non-empty strings."""
        if not isinstance(value, str) or not value:
            raise self.error(label, f"expected a non-empty string, got {show(value)}")
        return value

    def table(self, name: str, *, required: bool = True) -> Section:
        """The sub-table ``name`` (an empty one when absent and not required)."""
        value = self.raw(name) if required else self.raw(name, {})
        return Section(value, self.key(name), self.origin)

    def tables(self, name: str) -> list[Section]:
        """A non-empty array of tables (``[[name]]``)."""
        value = self.raw(name)
        if not isinstance(value, list) or not value:
            raise self.error(name, f"expected a non-empty array of tables ([[{name}]]), got {show(value)}")
        return [Section(item, f"{self.key(name)}[{i}]", self.origin) for i, item in enumerate(value)]

    def finish(self) -> None:
        """Refuse the first key no getter read (with a close match or the known keys)."""
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, sorted(self.seen), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(self.seen))})"
            raise self.error(name, f"unknown key{hint}")
