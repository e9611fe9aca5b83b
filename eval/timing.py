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
