"""`mnemo-sea bench query-embedding`: one query's embedding with the real model, before and after.

The baseline is what SentenceTransformerEmbedder did first: `SentenceTransformer.encode_query`
on a one-element list (torch). The candidates, timed in the same run in alternating blocks (each
candidate's queries in a row, as a process that embeds with one runtime sees it; the machine is
shared and noisy, so only same-run ratios mean something):
- `torch_forward`: SentenceTransformerEmbedder.embed_queries, the model's modules called
  directly under inference_mode, no padding for a single query (the path before ONNX);
- `torch_forward_1_thread`: the same with torch.set_num_threads(1) (restored after each call);
- `onnx`: OnnxEmbedder, the default embedder (ONNX Runtime, two intra-op threads);
- `onnx_1_thread`: the same export in a session with one intra-op thread;
- `cache_hit`: a QueryEmbedder over `onnx` serving a repeated query from its LRU.
Every candidate's vectors are compared with the baseline's (cosine over all queries; the
micro-batched rows too). Then queries/s at each concurrency: threads each embedding distinct
queries for `seconds`, for the baseline, `torch_forward` and `onnx` called from every thread,
and `onnx_batched` (a QueryEmbedder over `onnx` with its cache off, so the micro-batcher is
what is measured). HybridIndex uses no micro-batcher over ONNX Runtime (it runs concurrent
calls in parallel, so `onnx` is what its searches get), and one over torch.
Last, documents/s for `documents` SciFact chunks (batches of 64, longest first), torch's
encode_document against `onnx`, with the cosine of their rows: documents and queries go
through the same runtime, so stored vectors must match too.

Queries: half SciFact (English), half KUAKE-QTR (Chinese) from `data_dir` (read in place),
synthetic sentences in both languages when the files are absent.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mnemo_sea.retrieval.chunking import split_into_chunks
from mnemo_sea.retrieval.embedding import SentenceTransformerEmbedder, Vectors
from mnemo_sea.retrieval.onnx_embedder import OnnxEmbedder
from mnemo_sea.retrieval.query_embedding import QueryEmbedder, QueryEmbeddingCache
from mnemo_sea.retrieval.settings import EncodingSettings

SOURCES = (("scifact", "en"), ("kuake_qtr", "zh"))


def load_queries(data_dir: Path | None, n: int, seed: int = 13) -> tuple[list[str], str]:
    """`n` queries spread over each file (every k-th line), and where they came from."""
    per_source = max(1, n // len(SOURCES))
    picked: list[str] = []
    if data_dir is not None and all((data_dir / name / "queries.jsonl").is_file() for name, _ in SOURCES):
        for name, _ in SOURCES:
            lines = (data_dir / name / "queries.jsonl").read_text(encoding="utf-8").splitlines()
            step = max(1, len(lines) // per_source)
            picked += [json.loads(line)["text"] for line in lines[::step][:per_source]]
        return picked, str(data_dir)
    rng = random.Random(seed)
    en = [
        "refund",
        "policy",
        "for",
        "annual",
        "plans",
        "after",
        "cancellation",
        "deadline",
        "migration",
        "database",
        "error",
    ]
    zh = list("儿童远视眼怎么恢复视力产前最后一次检查什么时候做受精七天后怀孕征兆")
    for _ in range(per_source):
        picked.append(" ".join(rng.choices(en, k=rng.randint(3, 14))))
        picked.append("".join(rng.choices(zh, k=rng.randint(4, 20))))
    return picked, "synthetic"


def _latency(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
    }


def _with_threads(n: int, fn: Callable[[list[str]], Vectors]) -> Callable[[list[str]], Vectors]:
    import torch

    def call(texts: list[str]) -> Vectors:
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return fn(texts)
        finally:
            torch.set_num_threads(before)

    return call


def _throughput(
    fn: Callable[[list[str]], Vectors], queries: Sequence[str], threads: int, seconds: float
) -> float:
    done = [0] * threads
    stop_at = time.perf_counter() + seconds
    start = threading.Barrier(threads + 1)

    def worker(i: int) -> None:
        start.wait()
        k = i
        while time.perf_counter() < stop_at:
            fn([queries[k % len(queries)]])
            done[i] += 1
            k += threads

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    began = time.perf_counter()
    start.wait()
    for t in pool:
        t.join()
    return sum(done) / (time.perf_counter() - began)


def load_documents(data_dir: Path | None, n: int) -> list[str]:
    """The first chunks of SciFact's corpus (as the index would store them), or synthetic text."""
    corpus = data_dir / "scifact" / "corpus.jsonl" if data_dir is not None else None
    chunks: list[str] = []
    policy = EncodingSettings().chunking
    if corpus is not None and corpus.is_file():
        with corpus.open(encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                text = f"{doc.get('title', '')}\n{doc['text']}"
                chunks += [c.text for c in split_into_chunks(text, policy)]
                if len(chunks) >= n:
                    return chunks[:n]
    while len(chunks) < n:  # synthetic: the queries' words, repeated to document lengths
        chunks += [" ".join(q for q in load_queries(None, 40, seed=len(chunks))[0])[:600]]
    return chunks[:n]


def run(
    *,
    queries: int = 100,
    rounds: int = 2,
    concurrency: Sequence[int] = (1, 8),
    seconds: float = 1.0,
    documents: int = 256,
    data_dir: Path | None = None,
) -> dict[str, Any]:
    import torch

    load_average_at_start = [round(x, 2) for x in os.getloadavg()]
    texts, source = load_queries(data_dir, queries)
    torch_embedder = SentenceTransformerEmbedder()
    model = torch_embedder.model
    onnx = OnnxEmbedder(threads=2)
    onnx_1 = OnnxEmbedder(threads=1)

    def baseline(batch: list[str]) -> Vectors:
        vectors = model.encode_query(
            batch,
            batch_size=torch_embedder.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    cached = QueryEmbedder(onnx, batching=False)
    candidates: dict[str, Callable[[list[str]], Vectors]] = {
        "baseline": baseline,
        "torch_forward": torch_embedder.embed_queries,
        "torch_forward_1_thread": _with_threads(1, torch_embedder.embed_queries),
        "onnx": onnx.embed_queries,
        "onnx_1_thread": onnx_1.embed_queries,
        "cache_hit": cached.embed_queries,
    }
    for text in texts[:5]:  # warm-up: first calls allocate
        for fn in candidates.values():
            fn([text])
    for text in texts:
        cached.embed_queries([text])  # so every timed cache_hit call is a hit

    samples: dict[str, list[float]] = {name: [] for name in candidates}
    rows: dict[str, dict[str, Vectors]] = {name: {} for name in candidates}
    # Each candidate runs its queries as a block, blocks alternating round by round: a process
    # embeds queries with one runtime, whose weights stay in the CPU's caches between queries.
    # Interleaving runtimes query by query would time each one with the other's weights in
    # cache (a cold start per query that no deployment sees).
    for r in range(rounds):
        order = list(candidates.items())
        for name, fn in order if r % 2 == 0 else reversed(order):
            for text in texts:
                started = time.perf_counter()
                vector = fn([text])[0]
                samples[name].append((time.perf_counter() - started) * 1e3)
                rows[name][text] = vector
    reference = rows["baseline"]

    def cosines(vectors: dict[str, Vectors]) -> dict[str, float]:
        values = [float(np.dot(vectors[t], reference[t])) for t in texts]
        return {"min": round(min(values), 7), "mean": round(statistics.fmean(values), 7)}

    batcher_check = QueryEmbedder(onnx, cache=QueryEmbeddingCache(0), max_batch=8)
    batched_rows: dict[str, Vectors] = {}
    for start in range(0, len(texts), 8):
        chunk = texts[start : start + 8]
        batched_rows.update(zip(chunk, batcher_check.embed_queries(chunk), strict=True))

    base_p50 = statistics.median(samples["baseline"])
    forward_p50 = statistics.median(samples["torch_forward"])
    latency = {
        name: {
            **_latency(values),
            "ratio_to_baseline_p50": round(statistics.median(values) / base_p50, 3),
            "ratio_to_torch_forward_p50": round(statistics.median(values) / forward_p50, 3),
            **({} if name == "baseline" else {"cosine_to_baseline": cosines(rows[name])}),
        }
        for name, values in samples.items()
    }
    latency["onnx_batched_rows_of_8"] = {"cosine_to_baseline": cosines(batched_rows)}

    batched = QueryEmbedder(onnx, cache=QueryEmbeddingCache(0), max_batch=16)
    modes: dict[str, Callable[[list[str]], Vectors]] = {
        "baseline": baseline,
        "torch_forward": torch_embedder.embed_queries,
        "onnx": onnx.embed_queries,
        "onnx_batched": batched.embed_queries,
    }
    throughput: dict[str, dict[str, Any]] = {}
    for threads in concurrency:
        measured: dict[str, list[float]] = {name: [] for name in modes}
        for _ in range(rounds):
            for name, fn in modes.items():
                measured[name].append(_throughput(fn, texts, threads, seconds))
        base_qps = statistics.median(measured["baseline"])
        throughput[str(threads)] = {
            name: {
                "queries_per_s": round(statistics.median(v), 1),
                "ratio_to_baseline": round(statistics.median(v) / base_qps, 3),
            }
            for name, v in measured.items()
        }
    batched.close()
    batcher_check.close()
    return {
        "model": onnx.model_id,
        "runtime": onnx.runtime_report(),
        "queries": len(texts),
        "query_source": source,
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_at_start": load_average_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "latency": latency,
        "throughput_by_threads": throughput,
        "throughput_seconds_per_run": seconds,
        "batcher": {"batches": batched.batcher.batches if batched.batcher else 0},
        "documents": _documents(model, onnx, load_documents(data_dir, documents), rounds)
        if documents
        else None,
    }


def _documents(model: Any, onnx: OnnxEmbedder, chunks: list[str], rounds: int) -> dict[str, Any]:
    """Documents/s of torch's encode_document and of OnnxEmbedder on the same chunks, interleaved;
    like `bench ingest`, each side is judged by its fastest run (noise only ever adds time)."""

    def torch_rows(texts: list[str]) -> Vectors:
        vectors = model.encode_document(
            texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    sides: dict[str, Callable[[list[str]], Vectors]] = {"torch": torch_rows, "onnx": onnx.embed_documents}
    for fn in sides.values():
        fn(chunks[:8])  # warm-up
    best: dict[str, float] = {}
    rows: dict[str, Vectors] = {}
    for _ in range(rounds):
        for name, fn in sides.items():
            started = time.perf_counter()
            rows[name] = fn(chunks)
            elapsed = time.perf_counter() - started
            best[name] = min(best.get(name, elapsed), elapsed)
    cos = np.sum(rows["onnx"].astype(np.float64) * rows["torch"], axis=1)
    return {
        "chunks": len(chunks),
        "batch_size": 64,
        "torch_docs_per_s": round(len(chunks) / best["torch"], 1),
        "onnx_docs_per_s": round(len(chunks) / best["onnx"], 1),
        "onnx_ratio_to_torch": round(best["torch"] / best["onnx"], 3),
        "cosine_onnx_to_torch": {"min": round(float(cos.min()), 7), "mean": round(float(cos.mean()), 7)},
    }
