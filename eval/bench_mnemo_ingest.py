"""Benchmark: `Mnemo.ingest` end to end (archive + outbox + index) against the bare engine's ingest.

In one run, on the same synthetic documents cut into the same batches, alternating `rounds` times:
- `engine`: `HybridIndex.upsert` of each batch's documents into a fresh embedded index, then
  `flush` (chunking, BM25, embedding, Qdrant Edge writes: what the engine alone costs);
- `mnemo`: `Mnemo.ingest` of each batch on a fresh embedded Mnemo (SQLite archive + Qdrant Edge):
  validation, the archive transaction with its outbox rows, and the drain that indexes them, so
  every batch is searchable when its call returns.
Both use the hashing embedder, so the model is not the subject. The machine may be shared: each
side is reported as its median over the rounds, and `ratio` = mnemo docs/s / engine docs/s, the
two measured in the same run. `profile=True` adds a cProfile of one extra `mnemo` run: the
functions with the most own time and the archive/indexer steps by cumulative time.
"""

from __future__ import annotations

import cProfile
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .bench_engine_ingest import engine_ingest
from .profiling import profile_report
from .synthetic import build_corpus
from .timing import start_clock

TENANT = "bench"
LOADER = Principal(TENANT, "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
TARGET_DOCS_PER_S = 2_000.0


def inputs(n: int) -> list[EvidenceInput]:
    texts = build_corpus(n, queries=1, dim=8).texts
    return [
        EvidenceInput(body=text, source=f"bench/doc-{i}.txt", evidence_id=f"doc-{i}", scope="bench")
        for i, text in enumerate(texts)
    ]


def documents(items: Sequence[EvidenceInput], tenant: str = TENANT) -> list[EvidenceDocument]:
    """The engine's view of the same records (what the indexer hands `HybridIndex.upsert`)."""
    return [
        EvidenceDocument(
            tenant_id=tenant,
            evidence_id=str(item.evidence_id),
            version=1,
            text=str(item.body),
            source=item.source,
            scope=item.scope,
            sensitivity=int(Sensitivity.INTERNAL),
        )
        for item in items
    ]


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def check_searchable(mnemo: Mnemo, principal: Principal, last: EvidenceInput) -> None:
    """Searchable means found: `last` must come back by its text."""
    found = mnemo.search(principal, str(last.body)[:200], limit=5)
    if last.evidence_id not in {h.evidence_id for h in found.hits}:
        raise RuntimeError(f"{last.evidence_id} is not searchable after ingest")


def _mnemo_run(batches: list[Sequence[EvidenceInput]], profiler: cProfile.Profile | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-mnemo-") as tmp:
        mnemo = Mnemo.open(Path(tmp), embedder=HashingEmbedder())
        try:
            started = start_clock()
            if profiler is not None:
                profiler.enable()
            for batch in batches:
                report = mnemo.ingest(LOADER, batch)
                if report.index is None or report.index.pending or report.index.failed:
                    raise RuntimeError(f"a batch was not indexed: {report.index}")
            if profiler is not None:
                profiler.disable()
            elapsed = time.perf_counter() - started
            check_searchable(mnemo, LOADER, batches[-1][-1])
            return elapsed
        finally:
            mnemo.close()


def _profile(batches: list[Sequence[EvidenceInput]], top: int) -> dict[str, Any]:
    return profile_report(lambda profiler: _mnemo_run(batches, profiler), top=top)


def run(n: int = 2_000, *, batch_size: int = 500, rounds: int = 3, profile: bool = False) -> dict[str, Any]:
    """Time both sides `rounds` times, interleaved (see the module docstring)."""
    items = inputs(n)
    item_batches = batches(items, batch_size)
    doc_batches = batches(documents(items), batch_size)
    engine: list[float] = []
    mnemo: list[float] = []
    for _ in range(rounds):
        engine.append(engine_ingest(HashingEmbedder(), doc_batches).wall)
        mnemo.append(_mnemo_run(item_batches))
    engine_s, mnemo_s = statistics.median(engine), statistics.median(mnemo)
    report: dict[str, Any] = {
        "documents": n,
        "batch_size": batch_size,
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "engine_docs_per_s": round(n / engine_s, 1),
        "mnemo_docs_per_s": round(n / mnemo_s, 1),
        "ratio": round(engine_s / mnemo_s, 3),  # mnemo docs/s over engine docs/s
        "engine_seconds": [round(s, 3) for s in engine],
        "mnemo_seconds": [round(s, 3) for s in mnemo],
        "target_mnemo_docs_per_s": TARGET_DOCS_PER_S,
        "meets_target": n / mnemo_s >= TARGET_DOCS_PER_S,
    }
    if profile:
        report["profile"] = _profile(item_batches, top=25)
    return report
