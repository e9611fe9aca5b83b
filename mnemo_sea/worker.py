"""The outbox worker for server mode: drains the outbox until told to stop.

Several workers (in several processes) may share one PostgreSQL database: each claims rows
with `FOR UPDATE SKIP LOCKED`, so a row is applied by one worker at a time, and applying a
row twice (after a crash) is harmless. Failed rows stay pending with their error and are
retried on the next pass.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from mnemo_sea.archive import StoreUnavailable
from mnemo_sea.mnemo import Mnemo
from mnemo_sea.retrieval import IndexUnavailable


@dataclass
class WorkerStats:
    passes: int = 0
    applied: int = 0
    failed: int = 0
    store_errors: int = 0


def run_worker(
    mnemo: Mnemo,
    stop: threading.Event,
    *,
    poll_seconds: float = 0.5,
    batch: int = 200,
    heartbeat: Path | None = None,
) -> WorkerStats:
    """Drain until `stop` is set; sleeps `poll_seconds` whenever there is nothing to do.

    An unavailable store (database, index or cache down) is waited out, not fatal: the rows stay
    pending and are applied once it is back. With `heartbeat`, the file is touched after each
    pass that reached the database, so a health check can tell a live worker from a stuck one.
    """
    stats = WorkerStats()
    while not stop.is_set():
        try:
            report = mnemo.indexer.drain(batch)
        except (StoreUnavailable, IndexUnavailable):
            stats.store_errors += 1
            stop.wait(poll_seconds)
            continue
        stats.passes += 1
        if heartbeat is not None:
            heartbeat.touch()
        stats.applied += report.applied
        stats.failed += report.failed
        if report.applied == 0:
            stop.wait(poll_seconds)
    return stats
