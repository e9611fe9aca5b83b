"""A benchmark side's clock starts after a full collection (eval/timing.py)."""

from __future__ import annotations

import gc
import weakref

from mnemo_sea.eval.timing import start_clock


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_garbage_made_before_the_clock_is_collected_before_it_starts() -> None:
    was_enabled = gc.isenabled()
    gc.disable()  # so that nothing but start_clock collects in between
    try:
        node = _Node()
        alive = weakref.ref(node)
        del node
        assert alive() is not None  # a cycle is not freed by reference counting
        start_clock()
        assert alive() is None
    finally:
        if was_enabled:
            gc.enable()
