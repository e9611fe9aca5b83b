"""Benchmark: the bare engine's ingest (`HybridIndex.upsert` + `flush`) against Qdrant Edge alone.

In one run, on `n` synthetic documents (eval.synthetic: ~40 Zipf words each, spread over
`tenants` tenants), for each embedder and two workloads, alternating `rounds` times:
- workloads: `one_call`, every document in one `HybridIndex.upsert` call and then one `flush`
  (loading a corpus as a new user does, and as issue 31 measured the in-memory frameworks it
  compares with: the target is judged on it); and `batches`, `batch_size` documents per call,
  each followed by a flush (durable after every batch: stricter, reported beside it);
- `engine`: a fresh embedded index (`HybridIndex.open` on a temporary directory) doing the
  workload: validation, chunking, the lookup of what is stored, tokenizing, BM25, embedding, the
  conversion to Edge points and Edge's writes;
- `edge`: a fresh bare `EdgeIndex` doing the same writes and flushes with the same points, built
  beforehand in Edge's own form: what Qdrant Edge itself costs for them.
Embedders: `precomputed` (the corpus's 384-d vectors looked up by text: the model is not the
subject) and `hashing` (the 64-d hashing test embedder). Each side is reported as the median
over the rounds, with `edge_share` = engine docs/s / Edge points/s (a document is one point
here), and the process's CPU time a document or point: on a busy machine the wall clock
stretches with other processes' load and the disk's queue, the CPU time much less.
`profile=True` adds a cProfile of one more precomputed engine run of the one-call workload:
the functions with the most own time.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import qdrant_edge as qe

from mnemo_sea.retrieval import Embedder, EvidenceDocument, HybridIndex
from mnemo_sea.retrieval.edge_backend import EdgeIndex, edge_points
from mnemo_sea.retrieval.ingest import PointEncoder
from mnemo_sea.retrieval.settings import EncodingSettings
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .precomputed_embedder import PrecomputedEmbedder
from .profiling import profile_report
from .synthetic import SyntheticCorpus, build_corpus
from .timing import Collections, start_clock

TARGET_DOCS_PER_S = 5_000.0
ONE_CALL = "one_call"  # every document in one upsert, one flush: the workload the target is judged on
BATCHES = "batches"  # `batch_size` documents an upsert, a flush after each
T = TypeVar("T")


def _documents(corpus: SyntheticCorpus) -> list[EvidenceDocument]:
    return [
        EvidenceDocument(
            tenant_id=tenant, evidence_id=f"doc-{i}", version=1, text=text, source="bench", scope="bench"
        )
        for i, (text, tenant) in enumerate(zip(corpus.texts, corpus.tenants, strict=True))
    ]


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class Timing(NamedTuple):
    wall: float  # seconds
    # CPU seconds of the whole process (every thread): what the machine's other load cannot
    # stretch, unlike the wall clock; waits for the disk are not in it.
    cpu: float


def engine_ingest(
    embedder: Embedder,
    batches: Sequence[Sequence[EvidenceDocument]],
    profiler: cProfile.Profile | None = None,
    *,
    flush_each: bool = True,
    collections: Collections | None = None,
) -> Timing:
    """The time to upsert every batch into a fresh embedded index, flushing after each (the
    engine path of issue 31) or once at the end (profiled by `profiler` if given, its garbage
    collections counted by `collections`); raises RuntimeError unless every document is then
    indexed."""
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        index = HybridIndex.open(Path(tmp) / "index", embedder=embedder)
        try:
            timing = _timed(
                batches, index.upsert, index.flush, profiler, flush_each=flush_each, collections=collections
            )
            expected = sum(len(batch) for batch in batches)
            if index.count() != expected:
                raise RuntimeError(f"{index.count()} points indexed of {expected} documents")
            return timing
        finally:
            index.close()


def _edge_points(embedder: Embedder, documents: Sequence[EvidenceDocument]) -> list[qe.Point]:
    """The points the engine writes for `documents`, in Edge's form (built once, outside the clock)."""
    encoder = PointEncoder(EncodingSettings(), embedder)
    return edge_points(encoder.encode([c for doc in documents for c in encoder.prepare(doc)]))


def _edge_run(dimension: int, batches: Sequence[Sequence[qe.Point]]) -> Timing:
    """The time for Edge alone to upsert and flush every batch into a fresh shard."""
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as tmp:
        index = EdgeIndex.open(Path(tmp) / "index", dimension)
        try:
            return _timed(batches, index.upsert_edge_points, index.flush)
        finally:
            index.close()


def _timed(
    batches: Sequence[T],
    write: Callable[[T], object],
    flush: Callable[[], None],
    profiler: cProfile.Profile | None = None,
    *,
    flush_each: bool = True,
    collections: Collections | None = None,
) -> Timing:
    """The time to write each batch in turn, flushing after each or once at the end."""
    started = start_clock()
    cpu = time.process_time()
    with collections or contextlib.nullcontext():
        if profiler is not None:
            profiler.enable()
        for batch in batches:
            write(batch)
            if flush_each:
                flush()
        if not flush_each:
            flush()
        if profiler is not None:
            profiler.disable()
    return Timing(time.perf_counter() - started, time.process_time() - cpu)


def run(
    n: int = 10_000,
    *,
    batch_size: int = 500,
    rounds: int = 3,
    tenants: int = 100,
    profile: bool = False,
) -> dict[str, Any]:
    """Time both sides of both workloads for both embedders `rounds` times, alternating (see the
    module docstring)."""
    corpus = build_corpus(n, tenants=tenants, queries=1, dim=384)
    documents = _documents(corpus)
    workloads = {ONE_CALL: len(documents), BATCHES: batch_size}
    embedders: dict[str, Embedder] = {
        "precomputed": PrecomputedEmbedder(corpus.texts, corpus.vectors),
        "hashing": HashingEmbedder(),
    }
    points = {name: _edge_points(e, documents) for name, e in embedders.items()}
    engine: dict[tuple[str, str], list[Timing]] = {(e, w): [] for e in embedders for w in workloads}
    edge: dict[tuple[str, str], list[Timing]] = {(e, w): [] for e in embedders for w in workloads}
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    for _ in range(rounds):
        for name, embedder in embedders.items():
            for workload, size in workloads.items():
                engine[name, workload].append(engine_ingest(embedder, _batches(documents, size)))
                edge[name, workload].append(_edge_run(embedder.dimension, _batches(points[name], size)))
    sides: dict[str, Any] = {}
    for name, embedder in embedders.items():
        measured = {
            workload: _side(n, len(points[name]), engine[name, workload], edge[name, workload])
            for workload in workloads
        }
        rate = measured[ONE_CALL]["engine_docs_per_s"]
        sides[name] = {
            "dimension": embedder.dimension,
            "points": len(points[name]),
            **measured,
            "target_engine_docs_per_s": TARGET_DOCS_PER_S,
            "meets_target": rate >= TARGET_DOCS_PER_S,  # on the one-call workload
        }
    report: dict[str, Any] = {
        "documents": n,
        "tenants": tenants,
        "batch_size": batch_size,
        "rounds": rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "embedders": sides,
        "meets_targets": all(side["meets_target"] for side in sides.values()),
    }
    if profile:
        precomputed = embedders["precomputed"]
        report["profile"] = profile_report(
            lambda p: engine_ingest(precomputed, [documents], p), top=25, ours=("retrieval/",)
        )
    return report


def _side(n: int, n_points: int, engine: Sequence[Timing], edge: Sequence[Timing]) -> dict[str, Any]:
    """One workload's medians for one embedder: the engine's docs/s and Edge's points/s."""
    engine_s = statistics.median(t.wall for t in engine)
    edge_s = statistics.median(t.wall for t in edge)
    docs_per_s, points_per_s = n / engine_s, n_points / edge_s
    return {
        "engine_docs_per_s": round(docs_per_s, 1),
        "edge_points_per_s": round(points_per_s, 1),
        "edge_share": round(docs_per_s / points_per_s, 3),
        "engine_cpu_us_per_doc": round(statistics.median(t.cpu for t in engine) / n * 1e6, 1),
        "edge_cpu_us_per_point": round(statistics.median(t.cpu for t in edge) / n_points * 1e6, 1),
        "engine_seconds": [round(t.wall, 3) for t in engine],
        "edge_seconds": [round(t.wall, 3) for t in edge],
        "engine_cpu_seconds": [round(t.cpu, 3) for t in engine],
        "edge_cpu_seconds": [round(t.cpu, 3) for t in edge],
    }
