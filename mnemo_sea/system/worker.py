"""The outbox worker for server mode: drains the outbox until told to stop.

Several workers (in several processes) may share one PostgreSQL database: each claims rows
with `FOR UPDATE SKIP LOCKED`, so a row is applied by one worker at a time, and applying a
row twice (after a crash) is harmless. Failed rows stay pending with their error and are
retried on the next pass. A pass applies the pending writes, then one page of an archived
original (its trailing lane): a write waits behind one page at most.

The worker also runs the TTL purge (`Mnemo.purge_expired_everywhere`) every `purge_seconds`:
expired memory facts are deleted with their index points, cached searches and an audit event,
so a TTL forgets even when nobody asks. Two workers purging at once take turns on each chain;
the second finds nothing left. A purge that fails for another reason (a tenant's broken audit
chain, a conflict) is logged and tried again at the next interval: the drain goes on meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mnemo_sea.archive import ArchiveError, StoreUnavailable
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.indexer import TRAIL_ROWS

log = logging.getLogger(__name__)


@dataclass
class WorkerStats:
    passes: int = 0
    applied: int = 0
    failed: int = 0
    store_errors: int = 0
    purges: int = 0
    purged_facts: int = 0
    purge_errors: int = 0


def run_worker(
    mnemo: Mnemo,
    stop: threading.Event,
    *,
    poll_seconds: float = 0.5,
    batch: int = 200,
    heartbeat: Path | None = None,
    purge_seconds: float | None = 300.0,
    clock: Callable[[], float] = time.monotonic,
) -> WorkerStats:
    """Drain until `stop` is set; sleeps `poll_seconds` whenever there is nothing to do.

    An unavailable store (database, index or cache down) is waited out, not fatal: the rows stay
    pending and are applied once it is back. With `heartbeat`, the file is touched after each
    pass that reached the database, so a health check can tell a live worker from a stuck one.
    With `purge_seconds` (None or 0: never), expired memory is purged on the first pass and
    then once that many seconds (of `clock`) have passed since the last purge; a purge that
    met an unavailable store is tried again on the next pass, one that failed otherwise (any
    other ArchiveError) is logged, counted in `purge_errors` and tried again `purge_seconds`
    later, while the drain goes on.
    """
    stats = WorkerStats()
    next_purge = clock()
    while not stop.is_set():
        try:
            if purge_seconds and clock() >= next_purge:
                # Before the drain, so the purge's outbox rows are applied in this very pass.
                try:
                    receipts = mnemo.purge_expired_everywhere()
                except StoreUnavailable:
                    raise  # waited out below, and the purge retried on the next pass
                except ArchiveError as e:
                    # Housekeeping must not stop the drain. The purge goes tenant by tenant in
                    # the archive, so those before the failing one were purged and committed.
                    stats.purge_errors += 1
                    log.error(
                        "TTL purge failed (retried in %ss): %s: %s %s",
                        purge_seconds,
                        e.code,
                        e.message,
                        dict(e.detail),
                    )
                else:
                    stats.purges += 1
                    stats.purged_facts += sum(len(r.memory_facts) for r in receipts)
                next_purge = clock() + purge_seconds
            # Writes first, then one page of an archived original: a large original's pages
            # trail the writes, as the embedded default's trail does, instead of holding back
            # every write queued behind them for as long as they take to embed.
            writes = mnemo.indexer.drain(batch, lane="writes")
        except (StoreUnavailable, IndexUnavailable):
            stats.store_errors += 1
            stop.wait(poll_seconds)
            continue
        stats.passes += 1
        if heartbeat is not None:
            heartbeat.touch()  # the writes were applied: a health check sees a live worker
        stats.applied += writes.applied
        stats.failed += writes.failed
        try:
            pages = mnemo.indexer.drain(TRAIL_ROWS, lane="trailing")
        except (StoreUnavailable, IndexUnavailable):
            stats.store_errors += 1  # the page waits for the next pass; the writes counted
            pages = None
        if pages is not None:
            stats.applied += pages.applied
            stats.failed += pages.failed
        if writes.applied + (pages.applied if pages is not None else 0) == 0:
            stop.wait(poll_seconds)
    return stats
