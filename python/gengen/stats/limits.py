"""Size limits of gengen's statistics, checked before anything is allocated or looped over.

A request beyond them is refused with :class:`gengen.errors.InvalidArgumentError` saying how much it would
take, instead of exhausting the machine's memory (an abort), overflowing an allocation (a panic) or running
for days. The Rust binding (``rust/src/bounds.rs``) enforces the same limits on direct calls to
``gengen._core``.

* :data:`MAX_RESAMPLES` permutations, bootstrap replicates or simulation replicates per call;
* :func:`max_threads` threads (256 or the number of CPUs, whichever is larger);
* :func:`memory_budget` bytes for one array the call builds (index tables, kept bootstrap replicates):
  half the machine's memory, and never more than :data:`MAX_ARRAY_BYTES`.

This module imports nothing heavy, so the CLI can use the limits for its option ranges.
"""

from __future__ import annotations

import os

from gengen.errors import InvalidArgumentError

__all__ = [
    "MAX_ARRAY_BYTES",
    "MAX_RESAMPLES",
    "MAX_SEED",
    "check_array",
    "check_resamples",
    "check_threads",
    "format_bytes",
    "max_threads",
    "memory_budget",
]

MAX_RESAMPLES = 10_000_000
"""Most permutations or bootstrap replicates per call: a p-value resolution of 1e-7."""

MAX_ARRAY_BYTES = 16 * 2**30
"""Most bytes one array built by a statistics call may take (16 GiB), whatever the machine."""

MAX_SEED = 2**63 - 1
"""The largest training seed: seeds run from 0 to 2**63 - 1, the store's signed 64-bit integers (torch would take
up to 2**64 - 1, but such a run could not store its scores)."""

_MIN_THREAD_CAP = 256


def max_threads() -> int:
    """The most threads a statistics call accepts: 256 or the number of CPUs, whichever is larger."""
    return max(_MIN_THREAD_CAP, os.cpu_count() or 1)


def memory_budget() -> int:
    """Bytes one array may take: half the physical memory, at most :data:`MAX_ARRAY_BYTES`."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return MAX_ARRAY_BYTES
    return min(MAX_ARRAY_BYTES, physical // 2) if physical > 0 else MAX_ARRAY_BYTES


def format_bytes(count: int | float) -> str:
    """Bytes in binary units: ``format_bytes(8 * 10**12)`` is ``'7.3 TiB'``."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def check_resamples(name: str, value: int) -> int:
    """``value`` if it is at most :data:`MAX_RESAMPLES`, else InvalidArgumentError naming ``name``."""
    if value > MAX_RESAMPLES:
        raise InvalidArgumentError(
            f"{name}: {value} is above the limit of {MAX_RESAMPLES} resamples per call (a p-value resolution "
            f"of 1e-7 is finer than any correction needs)"
        )
    return value


def check_threads(value: int) -> int:
    """``value`` if it is at most :func:`max_threads`, else InvalidArgumentError."""
    cap = max_threads()
    if value > cap:
        raise InvalidArgumentError(
            f"n_threads: {value} is above the limit of {cap} threads (256 or the number of CPUs, whichever is larger)"
        )
    return value


def check_array(name: str, shape: tuple[int, ...], what: str, *, itemsize: int = 8) -> None:
    """Refuse an array of ``shape`` whose size is above :func:`memory_budget`, saying how much it would take.

    Parameters
    ----------
    name : str
        The argument to blame in the message.
    shape : tuple of int
        The array's dimensions.
    what : str
        What the array is, for the message (``"a table of 4 x 10 indices"``).
    itemsize : int
        Bytes per element.
    """
    size = itemsize
    for extent in shape:
        size *= int(extent)
    budget = memory_budget()
    if size > budget:
        raise InvalidArgumentError(
            f"{name}: {what} would take {format_bytes(size)} of memory, above the limit of {format_bytes(budget)} "
            "(half this machine's memory, at most 16 GiB)"
        )
