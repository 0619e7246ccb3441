"""Progress lines on a non-terminal for a step that runs long in one call (a comparison, a verdict).

:func:`heartbeat` wraps a block: while it runs, and only when the stream is not a terminal (a log file, a pipe,
a batch job), a daemon thread prints ``<command>: <step> (<s> s)`` every :data:`EVERY` seconds. A block that ends
sooner prints nothing, so short commands stay as they were; a long one is never silent for more than about
:data:`EVERY` seconds (``gengen compare`` of 32 groups × 64 test sets printed nothing for 17 s).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["EVERY", "heartbeat"]

#: Seconds between two lines (the analysis' own progress lines use the same interval).
EVERY = 5.0


@contextmanager
def heartbeat(
    command: str, step: str, *, stream: TextIO | None = None, every: float = EVERY, enabled: bool = True
) -> Iterator[None]:
    """Print ``command: step (N s)`` on ``stream`` (default stderr) every ``every`` seconds while the block runs.

    Nothing is printed when not ``enabled`` (``--quiet``), on a terminal (the commands draw their own bars
    there) or for a block shorter than ``every``.
    """
    out = stream if stream is not None else sys.stderr
    if not enabled or out.isatty():
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            print(f"{command}: {step} ({time.monotonic() - start:.0f} s)", file=out, flush=True)

    thread = threading.Thread(target=beat, name=f"{command} progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
