"""Benchmark: `Mnemo.ingest` against the bare engine over batch size x tenants (issue 31).

Each cell is one batch size and one number of tenants; its documents are cut into batches, and
call k goes to tenant k mod tenants, as an application serving many tenants calls. In one run,
per cell, alternating `rounds` times:
- `engine`: `HybridIndex.upsert` + `flush` per batch (the issue's engine path);
- `engine_flush_once`: `HybridIndex.upsert` per batch, one `flush` at the end (a stricter
  reference: what the engine costs when nothing needs to be durable per call);
- `mnemo`: `Mnemo.ingest` per batch (searchable when each call returns), then `sync()`, so
  everything is flushed and done at the end, counted in its time.
Both use the hashing embedder, so the model is not the subject. Each side is its median over the
rounds; `ratio` = mnemo docs/s / engine docs/s and `ratio_vs_flush_once` the same against the
stricter reference, both measured in the same run. `targets` says, per cell, whether `ratio`
reaches TARGET_RATIO (issue 31). Each cell also counts the flushes: the engine's, one per call,
and the facade's in each round (`mnemo_flushes`, with their time), as its group commit decides,
and each side's garbage collections in each round (`*_full_collections`, `*_collection_seconds`):
the facade keeps more objects alive while a batch is indexed, and meets more full collections.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .bench_engine_ingest import engine_ingest
from .bench_mnemo_ingest import batches, check_searchable, documents, inputs
from .timing import Collections, start_clock

BATCH_SIZES = (1, 10, 100, 1_000)
TENANT_COUNTS = (1, 100)
TARGET_RATIO = 0.8
# Documents per cell: enough calls for a few seconds per side at batch size 1 (about 50 calls
# a second, each flushing), more as batches grow, capped where the largest cell stays short.
MIN_DOCS, MAX_DOCS = 200, 6_000


def cell_documents(batch_size: int, scale: float = 1.0) -> int:
    """Documents of a cell of this batch size: about 200 * batch_size ** 0.6, a whole number of
    batches, times `scale` (a quick run passes less than 1)."""
    wanted: float = scale * min(MAX_DOCS, max(MIN_DOCS, 200 * math.pow(batch_size, 0.6)))
    return batch_size * max(1, round(wanted / batch_size))


def _principal(tenant: int) -> Principal:
    return Principal(f"t{tenant}", "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


class _Flushes:
    """Counts the index flushes of one run and their time: what the group commit saves against
    the engine's flush per call is read off the report, not inferred from the totals."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self.count = 0
        self.seconds = 0.0

    def __call__(self) -> None:
        started = time.perf_counter()
        try:
            self._flush()
        finally:
            self.count += 1
            self.seconds += time.perf_counter() - started


def _mnemo_run(
    calls: Sequence[tuple[Principal, Sequence[EvidenceInput]]], collections: Collections
) -> tuple[float, _Flushes]:
    with tempfile.TemporaryDirectory(prefix="bench-mnemo-") as tmp:
        mnemo = Mnemo.open(Path(tmp), embedder=HashingEmbedder())
        try:
            flushes = _Flushes(mnemo.index.flush)
            setattr(mnemo.index, "flush", flushes)  # noqa: B010 (this instance only, after the open)
            started = start_clock()
            with collections:
                for principal, batch in calls:
                    report = mnemo.ingest(principal, batch)
                    if report.index is None or report.index.pending or report.index.failed:
                        raise RuntimeError(f"a batch was not indexed: {report.index}")
                done = mnemo.sync()
            elapsed = time.perf_counter() - started
            if done.pending or done.failed or done.awaiting_flush:
                raise RuntimeError(f"sync left rows: {done}")
            principal, batch = calls[-1]
            check_searchable(mnemo, principal, batch[-1])
            return elapsed, flushes
        finally:
            mnemo.close()


def _cell(batch_size: int, tenants: int, n: int, rounds: int) -> dict[str, Any]:
    items = inputs(n)
    item_calls = batches(items, batch_size)
    principals = [_principal(k % tenants) for k in range(len(item_calls))]
    mnemo_calls = list(zip(principals, item_calls, strict=True))
    doc_calls = [documents(batch, p.tenant_id) for p, batch in mnemo_calls]
    engine: list[float] = []
    engine_once: list[float] = []
    mnemo: list[float] = []
    flushes: list[_Flushes] = []
    engine_gc: list[Collections] = []
    mnemo_gc: list[Collections] = []
    for _ in range(rounds):
        engine_gc.append(Collections())
        engine.append(engine_ingest(HashingEmbedder(), doc_calls, collections=engine_gc[-1]).wall)
        engine_once.append(engine_ingest(HashingEmbedder(), doc_calls, flush_each=False).wall)
        mnemo_gc.append(Collections())
        elapsed, flushed = _mnemo_run(mnemo_calls, mnemo_gc[-1])
        mnemo.append(elapsed)
        flushes.append(flushed)
    engine_s, once_s, mnemo_s = (statistics.median(xs) for xs in (engine, engine_once, mnemo))
    return {
        "batch_size": batch_size,
        "tenants": tenants,
        "documents": n,
        "calls": len(item_calls),
        "engine_docs_per_s": round(n / engine_s, 1),
        "engine_flush_once_docs_per_s": round(n / once_s, 1),
        "mnemo_docs_per_s": round(n / mnemo_s, 1),
        "ratio": round(engine_s / mnemo_s, 3),
        "ratio_vs_flush_once": round(once_s / mnemo_s, 3),
        "engine_seconds": [round(s, 3) for s in engine],
        "engine_flush_once_seconds": [round(s, 3) for s in engine_once],
        "mnemo_seconds": [round(s, 3) for s in mnemo],
        # The engine flushes once per call (by construction, `engine_ingest`); the facade as its
        # group commit decides (counted).
        "engine_flushes": len(item_calls),
        "mnemo_flushes": [f.count for f in flushes],
        "mnemo_flush_seconds": [round(f.seconds, 3) for f in flushes],
        # Full garbage collections (each a walk of the heap) inside each side's timed run, and
        # the time of every collection there.
        "engine_full_collections": [c.full for c in engine_gc],
        "mnemo_full_collections": [c.full for c in mnemo_gc],
        "engine_collection_seconds": [round(c.seconds, 3) for c in engine_gc],
        "mnemo_collection_seconds": [round(c.seconds, 3) for c in mnemo_gc],
    }


def run_sweep(
    batch_sizes: Sequence[int] = BATCH_SIZES,
    tenant_counts: Sequence[int] = TENANT_COUNTS,
    *,
    rounds: int = 3,
    scale: float = 1.0,
) -> dict[str, Any]:
    """Every cell of batch_sizes x tenant_counts (see the module docstring)."""
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    cells = [
        _cell(size, tenants, cell_documents(size, scale), rounds)
        for size in batch_sizes
        for tenants in tenant_counts
    ]
    targets = [
        {
            "batch_size": c["batch_size"],
            "tenants": c["tenants"],
            "ratio": c["ratio"],
            "target": TARGET_RATIO,
            "pass": c["ratio"] >= TARGET_RATIO,
        }
        for c in cells
    ]
    return {
        "rounds": rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "cells": cells,
        "targets": {"cells": targets, "all_pass": all(t["pass"] for t in targets)},
    }
