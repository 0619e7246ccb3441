"""A worker of the analysis that dies is noticed; a parent that is ended leaves no workers and no tracebacks
(issue 36, item 2).

``multiprocessing.pool.Pool`` replaced a worker killed in the middle of a group and waited for that group for
ever (all processes at 0% CPU). Here each test kills a worker or its parent while a group is in progress (the
task writes its pid, then sleeps) and bounds every wait, so that a regression fails instead of hanging.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gengen.analyse.data import Group
from gengen.analyse.group_pool import WorkerDiedError, map_groups
from gengen.analyse.options import Settings, make_settings

HERE = Path(__file__).parent
#: Longest a test waits for what it expects (a killed worker must end the analysis within 10 s: issue 36).
BOUND_S = 10.0


def _pid_then_sleep(group: Group, settings: Settings) -> str:
    """A task for the workers: record this process' pid in the group's folder, then sleep (group "fast": return)."""
    if group.meta["run"] == "fast":
        return "fast"
    folder = Path(group.meta["folder"])
    (folder / f"{group.meta['run']}.pid.tmp").write_text(str(os.getpid()))
    (folder / f"{group.meta['run']}.pid.tmp").rename(folder / f"{group.meta['run']}.pid")
    time.sleep(120)
    return str(group.meta["run"])


def _groups(folder: Path, *runs: str) -> list[Group]:
    return [
        Group("run", {"model": "m", "run": run, "folder": str(folder)}, np.arange(3), np.zeros(3), pd.DataFrame())
        for run in runs
    ]


def _wait_for_pids(folder: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 120  # spawning workers imports gengen: slow on a loaded machine
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.pid"))
        if len(found) >= count:
            return [int(path.read_text()) for path in found]
        time.sleep(0.05)
    raise AssertionError(f"the workers did not start their groups: {sorted(os.listdir(folder))}")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (our own child not yet reaped) counts as gone.
    status = Path(f"/proc/{pid}/status")
    return status.is_file() and "State:\tZ" in status.read_text()


def _wait_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids), f"workers still running: {[p for p in pids if not _gone(p)]}"


def test_a_worker_killed_mid_group_ends_the_analysis_naming_the_group_and_the_signal(tmp_path: Path) -> None:
    settings = make_settings(id_testset="id")
    groups = _groups(tmp_path, "fast", "slow-a", "slow-b")
    victim: list[int] = []

    def kill_when_started() -> None:
        pids = _wait_for_pids(tmp_path, 2)
        victim.append(int((tmp_path / "slow-a.pid").read_text()))
        victim.extend(pid for pid in pids if pid != victim[0])
        os.kill(victim[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    results = map_groups(_pid_then_sleep, groups, settings, workers=2)
    assert next(results) == "fast"
    killer.start()
    with pytest.raises(WorkerDiedError) as error:
        next(results)
    killed_at = time.monotonic()
    killer.join(timeout=BOUND_S)
    message = str(error.value)
    assert message.startswith("group 2 of 3 (model=m, run=slow-a, folder="), message
    assert "its worker process was killed by SIGKILL (most likely out of memory" in message
    _wait_gone(victim)
    assert time.monotonic() - killed_at < BOUND_S
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


def test_a_killed_worker_is_noticed_within_the_bound(tmp_path: Path) -> None:
    """From the kill to the error: at most BOUND_S (it is immediate: the parent waits on the process too)."""
    settings = make_settings(id_testset="id")
    results = map_groups(_pid_then_sleep, _groups(tmp_path, "slow-a", "slow-b"), settings, workers=2)
    start: list[float] = []

    def kill_first() -> None:
        _wait_for_pids(tmp_path, 2)
        start.append(time.monotonic())
        os.kill(int((tmp_path / "slow-b.pid").read_text()), signal.SIGKILL)

    threading.Thread(target=kill_first, daemon=True).start()
    with pytest.raises(WorkerDiedError, match=r"group 2 of 2 \(model=m, run=slow-b"):
        next(results)
    assert time.monotonic() - start[0] < BOUND_S


SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    sys.path.insert(0, {tests!r})
    import typer

    from gengen.analyse.group_pool import map_groups
    from gengen.analyse.options import make_settings
    from gengen.cli._common import run_app, user_errors_exit
    from test_group_pool_death import _groups, _pid_then_sleep

    app = typer.Typer()


    @app.command()
    @user_errors_exit
    def slow(folder: Path) -> None:
        for result in map_groups(_pid_then_sleep, _groups(folder, "a", "b"), make_settings(id_testset="id"), 2):
            print(result)


    @app.command()
    def other() -> None:
        pass


    raise SystemExit(run_app(app, ["slow", sys.argv[1]]))
    """
)


@pytest.mark.parametrize(
    ("sent", "status", "line"),
    [
        (signal.SIGTERM, 143, "error: terminated (SIGTERM)"),
        (signal.SIGINT, 130, "error: interrupted"),
        (signal.SIGKILL, -signal.SIGKILL, None),
    ],
    ids=["sigterm", "sigint", "sigkill"],
)
def test_ending_the_parent_ends_the_workers_quietly(tmp_path: Path, sent: int, status: int, line: str | None) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SCRIPT.format(tests=str(HERE)))
    folder = tmp_path / "pids"
    folder.mkdir()
    parent = subprocess.Popen(
        [sys.executable, str(script), str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        workers = _wait_for_pids(folder, 2)
        parent.send_signal(sent)
        out, err = parent.communicate(timeout=BOUND_S)
    finally:
        parent.kill()
    _wait_gone(workers)
    assert parent.returncode == status, err
    assert "Traceback" not in out + err and "Error" not in err.replace("error:", ""), err
    assert err.strip().splitlines() == ([line] if line else []), err


# ----------------------------------------------------------------------------- through `gengen analyse`


def _children(pid: int) -> list[int]:
    """The worker processes of ``pid`` (multiprocessing's resource tracker, also a child, is not one)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        children = task / "children"
        if children.is_file():
            found += [int(text) for text in children.read_text().split()]
    workers = []
    for child in found:
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(child)
        except OSError:
            continue
    return workers


def _big_table(path: Path) -> None:
    """4 runs x 300 checkpoints x 64 OOD test sets: about a second of one core per group, far longer than the
    time from a worker's start to its kill below."""
    rng = np.random.default_rng(0)
    n, frames = 300, []
    for run in range(4):
        base = np.cumsum(rng.normal(0.001, 0.01, n)) + 0.3
        for name in ["id", *(f"t{i}" for i in range(64))]:
            values = base if name == "id" else base * rng.uniform(0.5, 1) + np.cumsum(rng.normal(0, 0.01, n))
            frames.append(pd.DataFrame({"model": "m", "run": f"seed={run}", "step": np.arange(n) * 10,
                                        "testset": name, "metric": "acc", "value": np.clip(values, 0, 1)}))  # fmt: skip
    pd.concat(frames).to_csv(path, index=False)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the workers through /proc (Linux)")
@pytest.mark.parametrize(
    ("target", "sent", "status", "line"),
    [
        ("worker", signal.SIGKILL, 2, r"error: group \d of 4 \(model=m, run=seed=\d.*\): its worker process was "
         r"killed by SIGKILL \(most likely out of memory"),
        ("parent", signal.SIGTERM, 143, r"error: terminated \(SIGTERM\)"),
    ],
    ids=["kill-9-a-worker", "sigterm-the-parent"],
)  # fmt: skip
def test_gengen_analyse_ends_in_one_line_when_a_worker_or_it_is_killed(
    tmp_path: Path, target: str, sent: int, status: int, line: str
) -> None:
    import re

    _big_table(tmp_path / "scores.csv")
    script = Path(sys.executable).parent / "gengen"
    command = [str(script)] if script.is_file() else [sys.executable, "-c", "from gengen.cli import main; main()"]
    parent = subprocess.Popen(
        [*command, "analyse", str(tmp_path / "scores.csv"), "--id", "id", "--out", str(tmp_path / "out"), "--jobs",
         "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (workers := _children(parent.pid)) and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.02)
        assert workers, "no worker started"
        os.kill(workers[0] if target == "worker" else parent.pid, sent)
        out, err = parent.communicate(timeout=BOUND_S)
    finally:
        parent.kill()
    _wait_gone(workers)
    assert parent.returncode == status, err
    assert "Traceback" not in out + err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(line + ".*", lines[0]), err


def _start_program(parent: int, write_end_closed: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a worker's start-up program as the workers are started (:func:`quiet_start_command` of
    multiprocessing's own command line) on a start-up pipe whose writer is gone before writing a byte: what a
    worker sees when its parent is killed with -9 between starting it and writing its start-up data."""
    from multiprocessing import spawn

    from gengen.analyse.group_pool import quiet_start_command

    read, write = os.pipe()
    os.close(write)  # the parent "died" before writing
    command = quiet_start_command(list(spawn.get_command_line(tracker_fd=None, pipe_handle=read)), parent)
    try:
        return subprocess.run(command, pass_fds=(read,), capture_output=True, text=True, timeout=BOUND_S, check=False)
    finally:
        os.close(read)


def test_a_worker_whose_parent_died_before_its_start_up_data_ends_without_a_traceback() -> None:
    from multiprocessing import spawn

    from gengen.analyse.group_pool import quiet_start_command

    plain = list(spawn.get_command_line(tracker_fd=3, pipe_handle=7))
    wrapped = quiet_start_command(plain, parent=4242)
    # Only the -c program changes: the same spawn_main call inside a try, the parent's pid to compare with.
    at = plain.index("-c") + 1
    assert wrapped[:at] == plain[:at] and wrapped[at + 1 :] == plain[at + 1 :]
    assert "spawn_main(tracker_fd=3, pipe_handle=7)" in wrapped[at] and "os.getppid() == 4242" in wrapped[at]
    frozen = [sys.executable, "--multiprocessing-fork", "tracker_fd=3", "pipe_handle=7"]
    assert quiet_start_command(frozen, parent=4242) == frozen  # not the program expected: left as it is
    # The parent is gone (this test process is not the pid the program was given): no word, status 0.
    orphan = _start_program(parent=1 if os.getpid() != 1 else 2)
    assert orphan.returncode == 0 and orphan.stderr == "" and orphan.stdout == ""
    # The parent lives (the program was given this test's pid, its real parent): the failure keeps its traceback.
    alive = _start_program(parent=os.getpid())
    assert alive.returncode != 0 and "Traceback" in alive.stderr and "EOFError" in alive.stderr


def test_kill_9_of_the_parent_while_its_workers_start_leaves_no_traceback(tmp_path: Path) -> None:
    """The parent is killed with SIGKILL at the one moment no handler can cover: a worker is started and its
    start-up data not yet written (the parent kills itself where multiprocessing opens the pipe to write it).
    The workers' stderr is the test's pipe, read to its end: it closes when the last of them has exited."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import builtins, os, signal, sys
            sys.path.insert(0, {str(HERE)!r})
            import multiprocessing.popen_spawn_posix as launcher
            from test_group_pool_death import _groups, _pid_then_sleep

            def open_then_die(file, mode="r", *args, **kwargs):
                if "w" in mode:  # the start-up pipe of the first worker, before a byte is written
                    os.kill(os.getpid(), signal.SIGKILL)
                return builtins.open(file, mode, *args, **kwargs)

            launcher.open = open_then_die
            from gengen.analyse.group_pool import map_groups
            from gengen.analyse.options import make_settings
            groups = _groups({str(tmp_path)!r}, "a", "b")
            list(map_groups(_pid_then_sleep, groups, make_settings(id_testset="id"), workers=2))
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=BOUND_S * 3, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert not list(tmp_path.glob("*.pid")), "a worker ran a group for a dead parent"
