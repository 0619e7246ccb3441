"""Progress lines on a non-terminal while one long step runs (gengen compare, gengen report)."""

from __future__ import annotations

import io
import re
import time

from gengen.executors.heartbeat import heartbeat


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_step_prints_a_line_every_interval_and_a_short_one_nothing() -> None:
    log = io.StringIO()
    with heartbeat("compare", "comparing 32 groups", stream=log, every=0.05):
        time.sleep(0.32)
    lines = log.getvalue().splitlines()
    assert 4 <= len(lines) <= 7, lines  # one per 0.05 s of 0.32 s, give or take a scheduler's delay
    assert all(re.fullmatch(r"compare: comparing 32 groups \(\d+ s\)", line) for line in lines), lines
    quick = io.StringIO()
    with heartbeat("compare", "x", stream=quick, every=0.2):
        pass
    assert quick.getvalue() == ""


def test_no_lines_on_a_terminal_or_when_quiet() -> None:
    for stream, enabled in ((Terminal(), True), (io.StringIO(), False)):
        with heartbeat("report", "x", stream=stream, every=0.02, enabled=enabled):
            time.sleep(0.1)
        assert stream.getvalue() == ""


def test_the_block_s_error_passes_through_and_the_lines_stop() -> None:
    log = io.StringIO()
    try:
        with heartbeat("compare", "x", stream=log, every=0.02):
            time.sleep(0.05)
            raise ValueError("boom")
    except ValueError as error:
        assert str(error) == "boom"
    printed = log.getvalue()
    time.sleep(0.1)
    assert log.getvalue() == printed and printed  # the thread ended with the block
