"""The group loop on several cores: each group's pairs in a worker process, handed back in group order.

Groups are independent, and every random stream of a group's tests (the sieve's replicates, permutations,
bootstrap draws) is seeded from the analysis' ``seed`` alone, never drawn from a stream another group used, so
each group's table is the same whichever worker computes it and whenever: the pairs table is the same for any
number of workers. The workers are spawned, not forked (a fork after the Rust core's thread pool has started
can deadlock the child), so each pays the imports once; they ignore Ctrl-C, which stops the parent's loop, and
the parent then ends them. Each worker has a pipe of its own and one group at a time; the parent waits on the
pipes and on the processes together, so a worker that dies in the middle of a group (kill -9, the kernel's
out-of-memory killer) ends the analysis at once with one error naming the group and the signal
(:class:`multiprocessing.pool.Pool` started a replacement and waited for the lost group for ever), and a
parent that is killed leaves its workers an end of file, on which they exit without a word. A group's error
is raised in the parent when its turn comes, as the loop in one process raises it; the Python warnings a
group raises are issued again in the parent, in group order.

Threads were the other way: the Rust kernels release the GIL (and already use every core through rayon), but
40% of a group's CPU time outside them holds it (numpy on small arrays, pandas, the per-pair bookkeeping: 2.2
of 5.6 s for 8 groups of 250 checkpoints × 64 test sets), and that share grows as the kernels get faster;
processes overlap all of it, for about 0.7 s of imports per worker (benches/README.md, "Figures after
issue 27").
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing import connection as mp_connection
from typing import Any, TypeVar

from gengen.analyse.data import Group
from gengen.analyse.options import Settings
from gengen.errors import GengenError

__all__ = ["MIN_GROUPS", "MIN_WORK", "WorkerDiedError", "group_work", "map_groups", "worker_count"]

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

    Raises
    ------
    WorkerDiedError
        A worker process died in the middle of a group (killed by a signal: most often the kernel's
        out-of-memory killer); the message names the group and the signal. The other workers are ended.
    """
    if workers <= 1:
        results: Iterable[Any] = (task(group, settings) for group in groups)
        yield from show(results, len(groups)) if show else results
        return
    registry: dict[Any, Any] = {}  # the parent's "once per place" for the warnings issued again
    calls = _in_workers(task, groups, settings, workers)
    try:
        for result, caught in show(calls, len(groups)) if show else calls:
            for warning in caught:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno, registry=registry
                )
            yield result
    finally:
        calls.close()  # ends the workers, also when the caller stops early or an error is raised


class WorkerDiedError(GengenError):
    """A worker process of the analysis died in the middle of a group."""


class _Worker:
    """One worker process, the parent's end of its pipe, and the group it is computing (None: idle)."""

    def __init__(self, context: Any, task: Callable[[Group, Settings], Any], settings: Settings) -> None:
        self.connection, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_worker_loop, args=(child, task, settings), daemon=True)
        self.process.start()
        child.close()
        self.group: int | None = None


def _in_workers(
    task: Callable[[Group, Settings], T], groups: Sequence[Group], settings: Settings, workers: int
) -> Generator[tuple[T, list[warnings.WarningMessage]], None, None]:
    """Each group's ``(result, warnings)`` in group order, computed by ``workers`` spawned processes.

    One group at a time goes to each idle worker; the parent waits on the workers' pipes and on their process
    sentinels together, so a worker that dies (kill -9, the OOM killer) is seen at once rather than waited for
    for ever (:class:`multiprocessing.pool.Pool` replaces a dead worker and never hands its group back).
    """
    context = multiprocessing.get_context("spawn")
    pool: list[_Worker] = []
    try:
        with _interrupts_held(), _main_script_hidden(), _quiet_if_orphaned():  # the workers start here
            pool = [_Worker(context, task, settings) for _ in range(workers)]
        waiting = iter(enumerate(groups))
        done: dict[int, tuple[bool, Any]] = {}
        for worker in pool:
            _hand_next(worker, waiting, groups)
        for turn in range(len(groups)):
            while turn not in done:
                _collect(pool, groups, waiting, done)
            ok, value = done.pop(turn)
            if not ok:
                raise value
            yield value
    finally:
        _end(pool)


def _hand_next(worker: _Worker, waiting: Iterator[tuple[int, Group]], groups: Sequence[Group]) -> None:
    """Send the worker the next group, if any is left."""
    item = next(waiting, None)
    worker.group = None if item is None else item[0]
    if item is not None:
        try:
            worker.connection.send(item)
        except OSError:  # it died while idle
            raise _died(worker, groups) from None


def _collect(
    pool: list[_Worker], groups: Sequence[Group], waiting: Iterator[tuple[int, Group]], done: dict[int, Any]
) -> None:
    """Wait for any busy worker to answer or die; file answers in ``done`` and hand out the next groups."""
    busy = [worker for worker in pool if worker.group is not None]
    ready = set(mp_connection.wait([w.connection for w in busy] + [w.process.sentinel for w in busy]))
    for worker in busy:
        if worker.connection in ready:
            try:
                index, ok, value = worker.connection.recv()
            except (EOFError, OSError):
                raise _died(worker, groups) from None
            done[index] = (ok, value)
            _hand_next(worker, waiting, groups)
        elif worker.process.sentinel in ready:
            raise _died(worker, groups)


def _died(worker: _Worker, groups: Sequence[Group]) -> WorkerDiedError:
    worker.process.join(timeout=5)
    code = worker.process.exitcode
    index = worker.group if worker.group is not None else -1
    label = ", ".join(f"{key}={value}" for key, value in groups[index].meta.items()) if index >= 0 else "?"
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
        if -code == signal.SIGKILL:
            how += " (most likely out of memory: the kernel's OOM killer sends it; try fewer --jobs)"
    else:
        how = f"exited with status {code}"
    return WorkerDiedError(f"group {index + 1} of {len(groups)} ({label}): its worker process {how}")


def _end(pool: list[_Worker]) -> None:
    """Idle workers are told to stop; busy ones (an error or an interrupt in the parent) are ended."""
    for worker in pool:
        if worker.group is None and worker.process.is_alive():
            with contextlib.suppress(OSError):
                worker.connection.send(None)
        else:
            worker.process.terminate()
    for worker in pool:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.connection.close()


def _worker_loop(connection: Any, task: Callable[[Group, Settings], Any], settings: Settings) -> None:
    """A worker: groups in, ``(index, ok, result or error)`` out, until told to stop or the parent is gone.

    Ctrl-C is for the parent, which ends the workers; a parent that is gone (killed, terminated) ends the
    worker quietly (SIGTERM from the kernel on Linux, else the end of the pipe): there is nobody to report to.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent()
    try:
        while (message := connection.recv()) is not None:
            index, group = message
            try:
                reply: tuple[int, bool, Any] = (index, True, _call_recording_warnings(task, group, settings=settings))
            except Exception as error:  # raised in the parent when the group's turn comes
                reply = (index, False, error)
            try:
                connection.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                connection.send((index, False, RuntimeError(f"a worker's result could not be sent back: {error}")))
    except (EOFError, OSError):
        return


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while the workers start: a parent interrupted between starting a worker and
    writing its start-up data left it no data, and a traceback from multiprocessing on stderr. A signal that
    comes meanwhile is recorded and handed to the handler it was meant for when the block ends (the workers,
    started whole, are then ended quietly). Blocking the signal would not do: the kernel hands a process'
    signal to any of its threads (BLAS, rayon) that does not block it, and Python then runs the handler in the
    main thread all the same."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and only it receives Python's)
        return
    pending: list[signal.Signals] = []
    previous = {
        sig: signal.signal(sig, lambda number, frame: pending.append(signal.Signals(number))) for sig in _INTERRUPTS
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in pending[:1]:
            handler = previous[sig]
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(sig)


def _end_with_parent() -> None:
    """On Linux, have the kernel send this worker SIGTERM when its parent dies (kill -9 included), so that a
    worker in the middle of a long group does not run on for nobody; elsewhere the worker ends at its next
    read or write of the pipe."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # the parent died before the request was made
        os._exit(0)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


#: What a spawned worker runs first, instead of multiprocessing's one-line ``spawn_main(...)``: the same call,
#: but a start-up that fails after the parent has died (killed with -9 before it had written the worker's
#: start-up data, so the worker reads an end of file or half a pickle) ends the worker without a traceback; one
#: that fails while the parent lives is a bug and keeps its traceback. Ctrl-C at the terminal reaches starting
#: workers too (they ignore it only once started): the parent reports it, so they end without a word. Plain
#: Python, no gengen import: the worker's ``sys.path`` is the parent's only once the start-up data is read.
_QUIET_START = """import os
from multiprocessing.spawn import spawn_main
try:
    spawn_main({arguments})
except KeyboardInterrupt:
    os._exit(130)
except BaseException as error:
    if isinstance(error, SystemExit) or os.getppid() == {parent}:
        raise
    os._exit(0)
"""
_SPAWN_PREFIX = "from multiprocessing.spawn import spawn_main; spawn_main("


def quiet_start_command(command: list[str], parent: int) -> list[str]:
    """``command`` (multiprocessing's command line of a spawned worker) with its ``-c`` program wrapped in
    :data:`_QUIET_START` for the parent ``parent``; unchanged when it is not the program expected (a frozen
    executable, another Python's multiprocessing)."""
    if "-c" not in command[:-1]:
        return command
    at = command.index("-c") + 1
    program = command[at]
    if not (program.startswith(_SPAWN_PREFIX) and program.endswith(")")):
        return command
    arguments = program[len(_SPAWN_PREFIX) : -1]
    return [*command[:at], _QUIET_START.format(arguments=arguments, parent=parent), *command[at + 1 :]]


@contextmanager
def _quiet_if_orphaned() -> Iterator[None]:
    """Workers started in this block start with :data:`_QUIET_START`: a parent killed with -9 while they start
    (no handler can hold that signal, as :func:`_interrupts_held` holds SIGTERM) leaves no traceback from them."""
    from multiprocessing import spawn

    original = spawn.get_command_line
    parent = os.getpid()

    def command_line(**arguments: Any) -> list[str]:
        return quiet_start_command(list(original(**arguments)), parent)

    spawn.get_command_line = command_line
    try:
        yield
    finally:
        spawn.get_command_line = original


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
