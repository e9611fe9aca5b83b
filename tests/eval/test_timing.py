"""A benchmark side's clock starts after a full collection, and the collections inside a side
are counted (eval/timing.py)."""

from __future__ import annotations

import gc
import weakref

from mnemo_sea.eval.timing import Collections, start_clock


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


def test_collections_count_the_full_ones_made_while_entered_and_no_other() -> None:
    gc.collect()  # before: not counted
    with Collections() as counted:
        gc.collect(0)
        gc.collect(1)
        gc.collect()
        gc.collect()
    gc.collect()  # after: not counted
    assert counted.full == 2
    assert counted.seconds > 0
    assert counted._observe not in gc.callbacks  # nothing left behind
