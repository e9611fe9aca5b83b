"""Test doubles shared by the suites (importable because tests/conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.projection.indexer import GroupCommit
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder as _Hashing


class HashingEmbedder(_Hashing):
    """The package's deterministic embedder, counting what it embeds and able to fail on demand."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self.documents_embedded = 0
        self.fail = False

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.fail:
            raise IndexUnavailable("embedder", "test model switched off")
        self.documents_embedded += len(texts)
        return super().embed_documents(texts)


@dataclass(eq=False)  # timers compare by identity
class _ManualTimer:
    due: float
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A monotonic clock whose time, and whose timers, move only when the test says so.

    `now` may be set directly (the clock moved, no timer has run yet: a busy process);
    `advance` moves it and runs every timer then due, in the calling thread, in order.
    """

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self._timers: list[_ManualTimer] = []
        self.trails: list[Callable[[], None]] = []

    def __call__(self) -> float:
        return self.now

    def start_timer(self, seconds: float, action: Callable[[], None]) -> _ManualTimer:
        timer = _ManualTimer(self.now + seconds, action)
        self._timers.append(timer)
        return timer

    @property
    def armed(self) -> int:
        """Timers started, not cancelled, not run yet."""
        return sum(1 for t in self._timers if not t.cancelled)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = sorted((t for t in self._timers if not t.cancelled and t.due <= self.now), key=lambda t: t.due)
        self._timers = [t for t in self._timers if t not in due]
        for timer in due:
            timer.action()

    def group_commit(self, **policy: Any) -> GroupCommit:
        """The group commit timed by this clock (`rows=`, `seconds=` as GroupCommit takes them),
        its trail held until `run_trails`."""
        return GroupCommit(clock=self, start_timer=self.start_timer, start_trail=self.trails.append, **policy)

    def run_trails(self) -> None:
        """Run the trails started so far (archived originals indexed behind the writes), in the
        calling thread, as their threads would have."""
        while self.trails:
            self.trails.pop(0)()


class ManualWallClock:
    """The system's wall clock (mnemo_sea.archive.rules.clock) as a test drives it: it starts at the
    real time, moves 1 µs at each reading (so successive writes stay distinct and ordered, as on
    any machine) and jumps only by `advance`; how fast the machine runs never moves it."""

    TICK = timedelta(microseconds=1)

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC)
        # The system reads its clock from many threads (REST's pool, the indexer): each reading
        # must move it, so no two threads are ever handed the same moment.
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += self.TICK
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += timedelta(seconds=seconds)

    def past(self, moment: datetime | None) -> None:
        """Move just past `moment` (an expiry), as a wait until then would."""
        assert moment is not None
        with self._lock:
            self.now = max(self.now, moment) + timedelta(milliseconds=1)
