"""The group loop on several cores: each group's pairs in a worker process, handed back in group order.

Groups are independent, and every random stream of a group's tests (the sieve's replicates, permutations,
bootstrap draws) is seeded from the analysis' ``seed`` alone, never drawn from a stream another group used, so
each group's table is the same whichever worker computes it and whenever: the pairs table is the same for any
number of workers. The workers are spawned, not forked (a fork after the Rust core's thread pool has started
can deadlock the child), so each pays the imports once; they ignore Ctrl-C, which stops the parent's loop, and
the parent then ends them (:class:`multiprocessing.pool.Pool`, whose ``terminate`` also unblocks the queues
it was filling: a ``concurrent.futures`` pool ended with groups in flight left its feeder thread blocked on
a full pipe at exit). A group's error is raised in the parent when its turn comes, as the loop in one process
raises it; the Python warnings a group raises are issued again in the parent, in group order.

Threads were the other way: the Rust kernels release the GIL (and already use every core through rayon), but
40% of a group's CPU time outside them holds it (numpy on small arrays, pandas, the per-pair bookkeeping: 2.2
of 5.6 s for 8 groups of 250 checkpoints × 64 test sets), and that share grows as the kernels get faster;
processes overlap all of it, for about 0.7 s of imports per worker (benches/README.md, "Figures after
issue 27").
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

from gengen.analyse.data import Group
from gengen.analyse.options import Settings

__all__ = ["MIN_GROUPS", "MIN_WORK", "group_work", "map_groups", "worker_count"]

#: Fewest groups that are spread over workers when ``jobs`` is not given.
MIN_GROUPS = 4
#: Least work (Σ over groups of checkpoints × pairs) spread over workers when ``jobs`` is not given: 8 groups of
#: 250 checkpoints × 64 test sets (0.5 million each, 1–2 s of one core in the default analysis), against about
#: 0.7 s of CPU for each worker's imports. The 4 Pythia sizes × 64 tasks (1.2 million) stay in one process.
MIN_WORK = 4_000_000

T = TypeVar("T")


def group_work(group: Group) -> int:
    """A group's share of the work: its checkpoints × its pairs of test sets."""
    m = group.scores.shape[1]
    return len(group.id_values) * m * (m - 1) // 2


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count(jobs: int | None, groups: Sequence[Group]) -> int:
    """How many processes analyse ``groups``: ``jobs`` (at most one per group), or, when it is None, one per
    available CPU where there are at least :data:`MIN_GROUPS` groups holding :data:`MIN_WORK` between them,
    else 1 (this process)."""
    if jobs is not None:
        return max(1, min(jobs, len(groups)))
    if len(groups) < MIN_GROUPS or sum(group_work(group) for group in groups) < MIN_WORK:
        return 1
    return max(1, min(available_cpus(), len(groups)))


def _ignore_interrupts() -> None:
    """A worker's start: Ctrl-C is for the parent, which stops the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call_recording_warnings(
    task: Callable[[Group, Settings], T], group: Group, *, settings: Settings
) -> tuple[T, list[warnings.WarningMessage]]:
    """``task(group, settings)`` in a worker, with every Python warning it raised (to issue in the parent)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = task(group, settings)
    return result, [_picklable(warning) for warning in caught]


def _picklable(warning: warnings.WarningMessage) -> warnings.WarningMessage:
    """The warning without what need not cross processes (the source object, the open file)."""
    return warnings.WarningMessage(warning.message, warning.category, warning.filename, warning.lineno)


def map_groups(
    task: Callable[[Group, Settings], T],
    groups: Sequence[Group],
    settings: Settings,
    workers: int,
    show: Callable[[Iterable[Any], int], Iterable[Any]] | None = None,
) -> Generator[T, None, None]:
    """``task(group, settings)`` for each group, in group order, computed by ``workers`` processes.

    Parameters
    ----------
    task : callable
        A module-level function (the workers import it by name).
    groups : sequence of Group
    settings : Settings
    workers : int
        Processes (1: in this process, one group after another).
    show : callable, optional
        Wraps the iteration over results (``show(results, total)``: a progress bar).

    Yields
    ------
    object
        Each group's result, in the order of ``groups``.
    """
    if workers <= 1:
        results: Iterable[Any] = (task(group, settings) for group in groups)
        yield from show(results, len(groups)) if show else results
        return
    with _main_script_hidden():  # the pool starts its workers here
        pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_ignore_interrupts)
    registry: dict[Any, Any] = {}  # the parent's "once per place" for the warnings issued again
    try:
        calls = pool.imap(partial(_call_recording_warnings, task, settings=settings), groups)
        for result, caught in show(calls, len(groups)) if show else calls:
            for warning in caught:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno, registry=registry
                )
            yield result
    except BaseException:
        pool.terminate()  # the groups not started are dropped, the workers in the middle of one ended
        raise
    finally:
        pool.close()
        pool.join()


@contextmanager
def _main_script_hidden() -> Iterator[None]:
    """Start workers without the parent's main script: a spawned worker runs it again (to find what it defines)
    unless ``__main__`` names no file, and a script that calls :func:`gengen.analyse` without an
    ``if __name__ == "__main__":`` guard would then start the analysis again in every worker. The tasks and
    their data are gengen's own, so the workers need nothing from it."""
    main = sys.modules.get("__main__")
    names = ("__file__", "__spec__")
    saved: dict[str, Any] = {name: vars(main)[name] for name in names if main is not None and name in vars(main)}
    try:
        if main is not None:
            vars(main).pop("__file__", None)
            vars(main)["__spec__"] = None
        yield
    finally:
        if main is not None:
            vars(main).pop("__spec__", None)
            vars(main).update(saved)
