"""The test doubles themselves hold what the tests rely on."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import ManualWallClock


@pytest.fixture
def eager_switching() -> Iterator[None]:
    # Threads switch every microsecond rather than every 5 ms, so an unlocked read-modify-write
    # is interrupted in its middle within a few thousand readings (a race made likely, not slow).
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class _PythonLevelDatetime(datetime):
    """A datetime whose `+` runs Python code, where the interpreter may switch threads: as every
    step is on a free-threaded build. (C's datetime addition holds the GIL from the read of
    `now` to its write, which would hide a missing lock on this build.)"""

    def __add__(self, other: Any) -> Any:
        return super().__add__(other)


def test_the_manual_wall_clock_hands_each_thread_a_moment_of_its_own(eager_switching: None) -> None:
    start = _PythonLevelDatetime(2030, 1, 1, tzinfo=UTC)
    clock, threads, readings = ManualWallClock(start), 8, 20_000
    seen: list[list[datetime]] = [[] for _ in range(threads)]
    go = threading.Barrier(threads)

    def read(mine: list[datetime]) -> None:
        go.wait(timeout=120)
        mine.extend(clock() for _ in range(readings))

    workers = [threading.Thread(target=read, args=(mine,)) for mine in seen]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)  # a hang guard, not a speed check
    every = [moment for mine in seen for moment in mine]
    assert len(set(every)) == threads * readings  # no moment handed out twice
    assert clock.now == start + threads * readings * ManualWallClock.TICK  # no reading lost
