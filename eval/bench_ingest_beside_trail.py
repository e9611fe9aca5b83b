"""Benchmark: evidence writes while the indexer's trail indexes a large original, against alone.

An agent's `archive_results` leaves its original's pages to the indexer's trail, a thread of the
process (mnemo_sea/system/projection/indexer.py). While it embeds a page it runs Python, and a
write on another thread then shares the interpreter's lock with it: a driver that lets the lock
go for every row it steps waits out the trail's switch interval (5 ms) for each, to take it back
(archive/storage/statements.py). In one run, alternating `rounds` times, on a fresh embedded
Mnemo each (SQLite archive, Qdrant Edge, hashing embedder):
- `alone`: `batches` evidence writes of `batch_size` records, nothing else running;
- `beside_trail`: the same writes, started just after `archive_results` of an original of
  `original_bytes` (its trail running on its own thread, as in an agent's process).
Three phases, each on a Mnemo and a trail of its own: `Mnemo.ingest` of each batch (the call an
application makes: its drain also waits for the trail's page under way, by design), the
archive's write alone of the same batches (`Archive.write_evidence_batch`, what the driver's
steps decide; their rows are indexed by the `sync()` after the clock), and that write of
revised batches that supersede records stored before the clock (and before the trail started):
the write reads the stored versions and marks them superseded. Each is the median over
the rounds of the sum over the batches; `slowdown` = beside / alone. `trail_pending_at_end`
says, per round, whether the trail still had pages to index when the phase's last write
returned: every write then ran beside it.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mnemo_sea.archive import ArchiveTarget, EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .bench_mnemo_ingest import batches, inputs
from .bench_original_chunks import log_text
from .timing import start_clock

AGENT = Principal("bench", "agent", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def _side(phase: str, calls: Sequence[Sequence[EvidenceInput]], original: str | None) -> dict[str, Any]:
    """One phase (`ingest`, `archive_write` or `archive_write_superseding`) on a fresh Mnemo,
    beside a fresh trail when `original` is given: each phase starts as the trail does."""
    with tempfile.TemporaryDirectory(prefix="bench-beside-trail-") as tmp:
        mnemo = Mnemo.open(Path(tmp), embedder=HashingEmbedder())
        try:
            if phase == "archive_write_superseding":
                for batch in calls:  # the versions the timed writes supersede
                    mnemo.archive.write_evidence_batch(AGENT, list(batch))
                mnemo.sync()  # indexed and flushed on both sides before the trail and the clock start
                calls = [_revised(batch) for batch in calls]
            if original is not None:
                result = mnemo.record(AGENT, "bench-session", "logs.read", original)
                mnemo.archive_results(
                    AGENT, "bench-session", [ArchiveTarget(result.result_id, "a large log")]
                )
            started = start_clock()
            for batch in calls:
                if phase == "ingest":
                    mnemo.ingest(AGENT, batch)
                else:
                    mnemo.archive.write_evidence_batch(AGENT, list(batch))
            seconds = time.perf_counter() - started
            # Asked once the clock stopped: originals the trail had not finished (a search says).
            trailing = mnemo.search(AGENT, "gateway invoice", limit=1).pending_originals
            done = mnemo.sync()
            return {
                "seconds": seconds,
                "trail_pending_at_end": trailing > 0,
                # The work was done: every record stored, every outbox row applied by the end.
                "stored": _stored(mnemo),
                # Versions of the first record: 2 where the timed writes superseded, else 1.
                "versions_of_first": len(mnemo.evidence_history(AGENT, str(calls[0][0].evidence_id))),
                "pending_after_sync": done.pending,
            }
        finally:
            mnemo.close()


def _revised(batch: Sequence[EvidenceInput]) -> list[EvidenceInput]:
    """`batch` with every body changed: a new version of each record."""
    return [replace(item, body=f"{item.body!s} (revised)") for item in batch]


def _stored(mnemo: Mnemo) -> int:
    """The records the tenant holds, counted page by page through the archive's listing."""
    total, offset = 0, 0
    while page := mnemo.archive.list_evidence(AGENT, limit=1_000, offset=offset):
        total += len(page)
        offset += len(page)
    return total


def run(
    *, batches_per_side: int = 3, batch_size: int = 1_000, original_bytes: int = 2_000_000, rounds: int = 3
) -> dict[str, Any]:
    """Both sides of both phases, alternating `rounds` times (see the module docstring)."""
    calls = batches(inputs(batches_per_side * batch_size), batch_size)
    original = log_text(original_bytes)
    report: dict[str, Any] = {
        "benchmark": "ingest-beside-trail",
        "batches": batches_per_side,
        "batch_size": batch_size,
        "original_bytes": original_bytes,
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
    }
    for phase in ("ingest", "archive_write", "archive_write_superseding"):
        alone: list[dict[str, Any]] = []
        beside: list[dict[str, Any]] = []
        for _ in range(rounds):
            alone.append(_side(phase, calls, None))
            beside.append(_side(phase, calls, original))
        a = statistics.median(r["seconds"] for r in alone)
        b = statistics.median(r["seconds"] for r in beside)
        report[f"{phase}_s"] = {
            "alone": round(a, 3),
            "beside_trail": round(b, 3),
            "slowdown": round(b / a, 2),
            "alone_runs": [round(r["seconds"], 3) for r in alone],
            "beside_trail_runs": [round(r["seconds"], 3) for r in beside],
            "trail_pending_at_end": [r["trail_pending_at_end"] for r in beside],
            "stored": [r["stored"] for r in alone + beside],
            "versions_of_first": [r["versions_of_first"] for r in alone + beside],
            "pending_after_sync": [r["pending_after_sync"] for r in alone + beside],
        }
    return report
