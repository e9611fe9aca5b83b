"""The clock a benchmark side starts: after a full collection.

A full collection of this process's heap (~110,000 traced objects once the facade is imported
and open) takes ~90-110 ms here, as long as a 200 KB original's whole trail. Whether one lands
in a side's time depended on garbage made before its clock started (the other side's, a
warm-up's), which made a 200 KB original's ratio swing from 0.6 to 1.0 between runs of the same
code. Each side now starts from a collected heap: the collections its own allocations cause are
still timed, those owed to earlier garbage are not.
"""

from __future__ import annotations

import gc
import time


def start_clock() -> float:
    """`time.perf_counter()` right after a full collection."""
    gc.collect()
    return time.perf_counter()


class Collections:
    """The garbage collections made while it is entered: how many were full (generation 2, a
    walk of the whole heap) and the time of all of them. A benchmark side that allocates more
    live objects than the other meets more full collections, tens of milliseconds each: the
    count says how much of a gap between sides they make, rather than leaving it to inference."""

    def __init__(self) -> None:
        self.full = 0
        self.seconds = 0.0
        self._started: float | None = None

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None
            if info["generation"] == 2:
                self.full += 1

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._observe)
