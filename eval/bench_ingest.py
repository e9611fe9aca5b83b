"""Benchmark: end-to-end ingestion throughput against the model's own, and re-ingestion.

In one run, on the same chunk texts and the same loaded model, alternating `rounds` times:
- `raw`: SentenceTransformer.encode over every chunk text (what the model alone costs);
- `ours`: HybridIndex.upsert of the documents into a fresh embedded index with an empty cache
  (chunking, hashing, tokenizing, BM25, embedding, cache writes, Qdrant Edge writes) + flush.
On a shared machine other processes slow some runs down; like `timeit`, each side is judged by
its fastest run (noise only ever adds time). overhead = best(ours) / best(raw) - 1 (target <= 10%).
Each of our runs is also split into the time spent inside the model and the rest (`pipeline`:
chunking, hashing, BM25, cache and engine writes), which noise in the model's time cannot blur:
`pipeline_share` = best pipeline seconds / best raw seconds.
Then, on the last index:
- `reingest_same_index`: upsert of the same documents again (every chunk already stored: skipped);
- `reingest_fresh_index_warm_cache`: the same documents into a new index sharing the embedding
  cache (vectors from the cache, everything else redone): the cache's effect alone.
Speed-ups are best(ours) / re-ingest time (target >= 50x).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mnemo_sea.retrieval import (
    CachingEmbedder,
    EncodingSettings,
    EvidenceDocument,
    HybridIndex,
    SentenceTransformerEmbedder,
    SqliteEmbeddingCache,
    split_into_chunks,
)

from .beir import load_beir
from .synthetic import build_corpus

TARGETS = {"overhead_max": 0.10, "reingest_speedup_min": 50.0}


def _documents(n: int, dataset: Path | None) -> list[EvidenceDocument]:
    if dataset is not None:
        data = load_beir(dataset, split=_any_split(dataset))
        texts = [t for t in data.doc_texts if t.strip()][:n]
    else:
        texts = build_corpus(n, queries=1, dim=8).texts
    return [
        EvidenceDocument(tenant_id=f"tenant-{i % 10}", evidence_id=f"doc-{i}", version=1, text=text)
        for i, text in enumerate(texts)
    ]


def _any_split(dataset: Path) -> str:
    splits = sorted(p.stem for p in (dataset / "qrels").glob("*.tsv"))
    return "test" if "test" in splits else splits[0]


def run(
    n: int = 1_000, *, dataset: Path | None = None, rounds: int = 2, batch_size: int = 64
) -> dict[str, Any]:
    """Time raw encoding, our ingestion and both re-ingestions (see the module docstring)."""
    started = time.perf_counter()
    documents = _documents(n, dataset)
    encoding = EncodingSettings()
    chunk_texts = [c.text for d in documents for c in split_into_chunks(d.text, encoding.chunking)]
    embedder = SentenceTransformerEmbedder(batch_size=batch_size)
    model = embedder.model
    model.encode(chunk_texts[:batch_size], batch_size=batch_size)  # warm up threads and allocator
    report: dict[str, Any] = {
        "documents": len(documents),
        "chunks": len(chunk_texts),
        "source": str(dataset) if dataset else "synthetic",
        "model": embedder.model_id,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
    }
    raw_runs: list[float] = []
    our_runs: list[float] = []
    pipeline_runs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-ingest-") as tmp:
        for r in range(rounds):
            t = time.perf_counter()
            model.encode(chunk_texts, batch_size=batch_size, normalize_embeddings=True)
            raw_runs.append(time.perf_counter() - t)
            cache_path = Path(tmp) / f"cache-{r}.sqlite"
            index = HybridIndex.open(
                Path(tmp) / f"index-{r}",
                embedder=embedder,
                encoding=encoding,
                cache=SqliteEmbeddingCache(cache_path),
            )
            assert isinstance(index.embedder, CachingEmbedder)
            t = time.perf_counter()
            first = index.upsert(documents)
            index.flush()
            our_runs.append(time.perf_counter() - t)
            pipeline_runs.append(our_runs[-1] - index.embedder.stats.embed_seconds)
            if r < rounds - 1:
                index.close()
        with index:
            t = time.perf_counter()
            again = index.upsert(documents)
            index.flush()
            same_index = time.perf_counter() - t
        with HybridIndex.open(
            Path(tmp) / "warm", embedder=embedder, encoding=encoding, cache=SqliteEmbeddingCache(cache_path)
        ) as warm:
            t = time.perf_counter()
            warm.upsert(documents)
            warm.flush()
            warm_cache = time.perf_counter() - t
    raw_s, ours = min(raw_runs), min(our_runs)
    report.update(
        {
            "raw_encode": {
                "best_seconds": round(raw_s, 2),
                "runs_seconds": [round(x, 2) for x in raw_runs],
                "chunks_per_s": round(len(chunk_texts) / raw_s, 1),
            },
            "ours": {
                "best_seconds": round(ours, 2),
                "runs_seconds": [round(x, 2) for x in our_runs],
                "chunks_per_s": round(first.chunks / ours, 1),
                "written": first.written,
                "pipeline_seconds_excluding_model": [round(x, 3) for x in pipeline_runs],
            },
            "overhead": round(ours / raw_s - 1, 3),
            "pipeline_share": round(min(pipeline_runs) / raw_s, 3),
            "reingest_same_index": {
                "seconds": round(same_index, 3),
                "unchanged": again.unchanged,
                "speedup": round(ours / same_index, 1),
            },
            "reingest_fresh_index_warm_cache": {
                "seconds": round(warm_cache, 3),
                "speedup": round(ours / warm_cache, 1),
            },
            "targets": TARGETS,
        }
    )
    report["meets"] = {
        "overhead_max": report["overhead"] <= TARGETS["overhead_max"],
        "reingest_speedup_min": report["reingest_same_index"]["speedup"] >= TARGETS["reingest_speedup_min"],
    }
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
