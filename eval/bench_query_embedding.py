"""`mnemo-sea bench query-embedding`: one query's embedding with the real model, before and after.

The baseline is what SentenceTransformerEmbedder did before: `SentenceTransformer.encode_query`
on a one-element list. The candidates, timed interleaved with it query by query (the machine is
shared and noisy, so only same-run ratios mean something):
- `forward`: SentenceTransformerEmbedder.embed_queries, the model's modules called directly
  under inference_mode, no padding for a single query;
- `forward_1_thread`: the same with torch.set_num_threads(1) (restored after each call);
- `cache_hit`: a QueryEmbedder serving a repeated query from its LRU.
Every candidate's vectors are compared with the baseline's (cosine over all queries; the
micro-batched rows too). Then queries/s at each concurrency: threads each embedding distinct
queries for `seconds`, for the baseline, `forward` called from every thread, and `batched`
(a QueryEmbedder with its cache off, so the micro-batcher is what is measured).

Queries: half SciFact (English), half KUAKE-QTR (Chinese) from `data_dir` (read in place),
synthetic sentences in both languages when the files are absent.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mnemo_sea.retrieval.embedding import SentenceTransformerEmbedder, Vectors
from mnemo_sea.retrieval.query_embedding import QueryEmbedder, QueryEmbeddingCache

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


def run(
    *,
    queries: int = 100,
    rounds: int = 2,
    concurrency: Sequence[int] = (1, 4, 8),
    seconds: float = 1.0,
    data_dir: Path | None = None,
) -> dict[str, Any]:
    import torch

    texts, source = load_queries(data_dir, queries)
    embedder = SentenceTransformerEmbedder()
    model = embedder.model

    def baseline(batch: list[str]) -> Vectors:
        vectors = model.encode_query(
            batch,
            batch_size=embedder.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    cached = QueryEmbedder(embedder, batching=False)
    candidates: dict[str, Callable[[list[str]], Vectors]] = {
        "baseline": baseline,
        "forward": embedder.embed_queries,
        "forward_1_thread": _with_threads(1, embedder.embed_queries),
        "cache_hit": cached.embed_queries,
    }
    for text in texts[:5]:  # warm-up: first calls allocate
        for fn in candidates.values():
            fn([text])
    for text in texts:
        cached.embed_queries([text])  # so every timed cache_hit call is a hit

    samples: dict[str, list[float]] = {name: [] for name in candidates}
    reference: dict[str, Vectors] = {}
    rows: dict[str, dict[str, Vectors]] = {name: {} for name in candidates}
    for _ in range(rounds):
        for text in texts:
            for name, fn in candidates.items():
                started = time.perf_counter()
                vector = fn([text])[0]
                samples[name].append((time.perf_counter() - started) * 1e3)
                rows[name][text] = vector
    reference = rows["baseline"]

    def cosines(vectors: dict[str, Vectors]) -> dict[str, float]:
        values = [float(np.dot(vectors[t], reference[t])) for t in texts]
        return {"min": round(min(values), 7), "mean": round(statistics.fmean(values), 7)}

    batcher_check = QueryEmbedder(embedder, cache=QueryEmbeddingCache(0), max_batch=8)
    batched_rows: dict[str, Vectors] = {}
    for start in range(0, len(texts), 8):
        chunk = texts[start : start + 8]
        batched_rows.update(zip(chunk, batcher_check.embed_queries(chunk), strict=True))

    base_p50 = statistics.median(samples["baseline"])
    latency = {
        name: {
            **_latency(values),
            "ratio_to_baseline_p50": round(statistics.median(values) / base_p50, 3),
            **({} if name == "baseline" else {"cosine_to_baseline": cosines(rows[name])}),
        }
        for name, values in samples.items()
    }
    latency["batched_rows_of_8"] = {"cosine_to_baseline": cosines(batched_rows)}

    batched = QueryEmbedder(embedder, cache=QueryEmbeddingCache(0), max_batch=16)
    modes: dict[str, Callable[[list[str]], Vectors]] = {
        "baseline": baseline,
        "forward": embedder.embed_queries,
        "batched": batched.embed_queries,
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
        "model": embedder.model_id,
        "queries": len(texts),
        "query_source": source,
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
        "latency": latency,
        "throughput_by_threads": throughput,
        "throughput_seconds_per_run": seconds,
        "batcher": {"batches": batched.batcher.batches if batched.batcher else 0},
    }
