"""Benchmark: chunks of an archived original indexed by the trail, against the engine on the same text.

An agent's `archive_results` indexes the result's note at once and leaves its original's pages
(archive/rules/original_pages.py) to the indexer's trail (mnemo_sea/system/projection/indexer.py).
For each original size, in one run, alternating `rounds` times, with the hashing embedder (the
model is not the subject):
- `engine`: `HybridIndex.upsert` of the original's page documents (exactly what the trail hands
  the index, built by `page_documents` from the archived bytes) into a fresh embedded index, in
  one call, then `flush`: the engine's own chunk rate for this text;
- `trail`: on a fresh embedded Mnemo (a SQLite archive and Qdrant Edge) the result is recorded
  (not timed), then timed: `archive_results`, the trail run to its end on this thread (started
  through `GroupCommit(start_trail=)`, so nothing runs behind the measurement), and `sync()`, so
  every page is indexed and flushed, as the engine's side ends flushed.
Both sides are measured warm, as in a process that has been running: before the clock starts,
the fresh index has had another tenant's small original upserted and flushed (a new shard's first
flush creates its files, ~15 ms), and the fresh Mnemo has archived another tenant's small result
and indexed its pages (a new archive's first statements are compiled, ~5-10 ms). Neither is a cost
of the original being measured.
A size runs at least `rounds` rounds, and more when one is short, until each side's runs add up
to about `min_seconds` (at most MAX_ROUNDS): a 200 KB original's run takes about 50 ms, and its
runs spread by a third (the index's flush writes to disk), so three rounds of it measure the
machine more than the trail. The rounds a size ran are in its report.
Each side is its median over the rounds in chunks/s (the points the original's pages made);
`ratio` = trail / engine, measured in the same run (the issue's target: at least 0.9), and
`ratio_behind_the_call` the same without the archive call's own time (its transaction, the note
indexed): the pages alone.
`profile=True` adds a cProfile of one more trail run of the largest size.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mnemo_sea.archive import ArchiveTarget, Principal, Role, Sensitivity
from mnemo_sea.retrieval import EvidenceDocument, HybridIndex
from mnemo_sea.retrieval.filters import tenant_filter
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.index_documents import page_documents
from mnemo_sea.system.projection.indexer import GroupCommit
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .profiling import profile_report
from .timing import start_clock

TENANT = "bench"
AGENT = Principal(TENANT, "agent", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
WARM_UP = Principal("bench-warm-up", "agent", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
WARM_UP_BYTES = 3_000
SESSION = "bench-session"
PAGE_KIND = "archived_original"  # the kind of a page's points (a note's is "tool_result")
TARGET_RATIO = 0.9
SIZES = (200_000, 2_000_000)
MIN_SECONDS = 1.0  # each side's timed runs of a size add up to about this (see the module docstring)
MAX_ROUNDS = 50
_WORDS = ("gateway", "invoice", "refund", "worker", "queue", "shard", "replica", "timeout", "retry", "ledger")


def log_text(size: int) -> str:
    """A tool's log of about `size` bytes: distinct lines (no two chunks alike, so no cache of
    chunk embeddings does the work twice), words the tokenizer keeps."""
    rows: list[str] = []
    total = 0
    i = 0
    while total < size:
        words = " ".join(_WORDS[(i * k) % len(_WORDS)] for k in (1, 3, 5, 7))
        row = f"2026-12-01 10:{i % 60:02d} INFO worker-{i % 97} {words} id={i * 7919 % 1_000_003}"
        rows.append(row)
        total += len(row) + 1
        i += 1
    return "\n".join(rows) + "\n"


class _Trails:
    """The trail starter the benchmark holds: the trail runs when `run` is called, on this thread."""

    def __init__(self) -> None:
        self.started: list[Callable[[], None]] = []

    def run(self) -> None:
        while self.started:
            self.started.pop(0)()


def _recorded(folder: Path, text: str) -> tuple[Mnemo, _Trails, str]:
    """A fresh embedded Mnemo, warmed up (see the module docstring), holding `text` as a live
    tool result (its id returned)."""
    trails = _Trails()
    mnemo = Mnemo.open(
        folder, embedder=HashingEmbedder(), group_commit=GroupCommit(start_trail=trails.started.append)
    )
    warm_up = log_text(WARM_UP_BYTES)
    warm_rid = mnemo.record(WARM_UP, SESSION, "bash", warm_up, arguments={"command": "cat x.log"}).result_id
    mnemo.archive_results(WARM_UP, SESSION, [ArchiveTarget(warm_rid, "a short log")])
    trails.run()
    mnemo.sync()
    rid = mnemo.record(AGENT, SESSION, "bash", text, arguments={"command": "cat /var/log/app.log"}).result_id
    return mnemo, trails, rid


def _page_chunks(index: HybridIndex) -> int:
    """Points of pages of originals in the benchmark's tenant (the note's are not counted)."""
    return sum(1 for p in index.points_matching(tenant_filter(TENANT)) if p.kind == PAGE_KIND)


def page_docs(text: str) -> list[EvidenceDocument]:
    """The documents the trail indexes for `text` archived (read back from a throwaway archive)."""
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        mnemo, _, rid = _recorded(Path(tmp), text)
        try:
            mnemo.archive_results(AGENT, SESSION, [ArchiveTarget(rid, "an application log")])
            with mnemo.archive.internal_reads() as reads:
                found = reads.archived_original(TENANT, SESSION, rid)
            if found is None:
                raise RuntimeError("the archived original cannot be read back")
            return page_documents(TENANT, *found)
        finally:
            mnemo.close()


@functools.cache
def _warm_up_docs() -> tuple[EvidenceDocument, ...]:
    """The engine's warm-up: the warm-up tenant's small original's pages (built once a process)."""
    return tuple(replace(d, tenant_id=WARM_UP.tenant_id) for d in page_docs(log_text(WARM_UP_BYTES)))


def engine_run(docs: Sequence[EvidenceDocument]) -> tuple[float, int]:
    """Seconds to upsert and flush `docs` into a fresh index, warmed up (see the module
    docstring), and the chunks they made."""
    warm_up = _warm_up_docs()
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        index = HybridIndex.open(Path(tmp) / "index", embedder=HashingEmbedder())
        try:
            index.upsert(warm_up)
            index.flush()
            started = start_clock()
            index.upsert(docs)
            index.flush()
            elapsed = time.perf_counter() - started
            return elapsed, _page_chunks(index)
        finally:
            index.close()


def trail_run(text: str, profiler: Any = None) -> tuple[float, float, int]:
    """Seconds from `archive_results` until every page is indexed and flushed, of them those
    after the archive call returned, and the chunks the pages made; RuntimeError if a page is
    left pending."""
    with tempfile.TemporaryDirectory(prefix="bench-trail-") as tmp:
        mnemo, trails, rid = _recorded(Path(tmp), text)
        try:
            started = start_clock()
            if profiler is not None:
                profiler.enable()
            mnemo.archive_results(AGENT, SESSION, [ArchiveTarget(rid, "an application log")])
            archived = time.perf_counter()
            trails.run()
            report = mnemo.sync()
            if profiler is not None:
                profiler.disable()
            ended = time.perf_counter()
            if report.pending or report.failed:
                raise RuntimeError(f"pages of the original were left unindexed: {report}")
            if mnemo.search(AGENT, "gateway invoice").pending_originals:
                raise RuntimeError("search still says the original is not searchable")
            return ended - started, ended - archived, _page_chunks(mnemo.index)
        finally:
            mnemo.close()


def _rate(chunks: int, seconds: list[float]) -> float:
    return chunks / max(statistics.median(seconds), 1e-9)


def rounds_for(rounds: int, first_seconds: float, min_seconds: float) -> int:
    """The rounds a size runs: at least `rounds`, and enough runs as long as the first
    (`first_seconds`) to add up to `min_seconds`, at most MAX_ROUNDS (see the module docstring)."""
    wanted = math.ceil(min_seconds / first_seconds) if first_seconds > 0 else MAX_ROUNDS
    return max(rounds, min(MAX_ROUNDS, wanted))


def run(
    sizes: Sequence[int] = SIZES, *, rounds: int = 3, min_seconds: float = MIN_SECONDS, profile: bool = False
) -> dict[str, Any]:
    """Time both sides for each size, alternating, `rounds` times or more (see the module docstring)."""
    results: list[dict[str, Any]] = []
    for size in sizes:
        text = log_text(size)
        docs = page_docs(text)
        engine: list[float] = []
        trail: list[float] = []
        behind: list[float] = []  # the trail's part: after the archive call returned
        chunks: dict[str, set[int]] = {"engine": set(), "trail": set()}
        planned = rounds
        while len(engine) < planned:
            seconds, made = engine_run(docs)
            engine.append(seconds)
            chunks["engine"].add(made)
            seconds, after, made = trail_run(text)
            trail.append(seconds)
            behind.append(after)
            chunks["trail"].add(made)
            if len(engine) == 1:
                planned = rounds_for(rounds, min(engine[0], trail[0]), min_seconds)
        if len(chunks["engine"] | chunks["trail"]) != 1:
            raise RuntimeError(f"the two sides indexed different chunks: {chunks}")
        n_chunks = chunks["engine"].pop()
        engine_rate, trail_rate = _rate(n_chunks, engine), _rate(n_chunks, trail)
        results.append(
            {
                "bytes": len(text.encode()),
                "rounds": len(engine),
                "pages": len(docs),
                "chunks": n_chunks,
                "engine_chunks_per_s": round(engine_rate, 1),
                "trail_chunks_per_s": round(trail_rate, 1),
                "ratio": round(trail_rate / engine_rate, 3),
                # Without the archive call itself (its transaction, the note indexed and flushed).
                "ratio_behind_the_call": round(_rate(n_chunks, behind) / engine_rate, 3),
                "engine_seconds": [round(s, 3) for s in engine],
                "trail_seconds": [round(s, 3) for s in trail],
                "behind_the_call_seconds": [round(s, 3) for s in behind],
            }
        )
    report: dict[str, Any] = {
        "benchmark": "original-chunks",
        "embedder": "hashing",
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "target_ratio": TARGET_RATIO,
        "sizes": results,
        "meets_target": all(r["ratio"] >= TARGET_RATIO for r in results),
    }
    if profile:
        report["profile"] = profile_report(lambda profiler: trail_run(log_text(max(sizes)), profiler))
    return report
