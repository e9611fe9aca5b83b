"""The query-embedding fast path keeps the vectors; the query cache and the micro-batcher change none."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from mnemo_sea.retrieval import HybridIndex, IndexUnavailable, SentenceTransformerEmbedder
from mnemo_sea.retrieval.query_embedding import MicroBatcher, QueryEmbedder, QueryEmbeddingCache

QUERIES = [
    "refund policy for annual plans",
    "0-dimensional biomaterials lack inductive properties.",
    "a kitten resting on a rug",
    "What is the deadline for the database migration, and who signed off on it?",
    "儿童远视眼怎么恢复视力",
    "产前最后一次检查什么时候做",
    "订单延迟 refund 退款",
]


class CountingEmbedder:
    """Wraps the hashing embedder and records every embed_queries call's texts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.calls: list[list[str]] = []
        self.gate: threading.Event | None = None

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        result: NDArray[np.float32] = self.inner.embed_documents(texts)
        return result

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.gate is not None:
            self.gate.wait(120)  # opened by the test once every caller queued; bounds a hang
        self.calls.append(list(texts))
        result: NDArray[np.float32] = self.inner.embed_queries(texts)
        return result


@pytest.mark.slow
def test_direct_forward_matches_sentence_transformers_encode() -> None:
    embedder = SentenceTransformerEmbedder()
    model = embedder.model
    expected = model.encode_query(
        QUERIES, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )
    one_by_one = np.stack([embedder.embed_queries([q])[0] for q in QUERIES])
    together = embedder.embed_queries(QUERIES)  # padded to the longest: the mask must hide the padding
    for got in (one_by_one, together):
        assert got.dtype == np.float32 and got.shape == (len(QUERIES), 384)
        cosines = np.sum(got * expected, axis=1)
        assert cosines.min() >= 0.9999, cosines


def test_cache_returns_identical_vectors_and_skips_the_model(embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    queries = QueryEmbedder(counting, batching=False)
    first = queries.embed_queries(["refund policy"])
    second = queries.embed_queries(["refund policy"])
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, embedder.embed_queries(["refund policy"]))
    assert counting.calls == [["refund policy"]]
    assert queries.cache.hits == 1
    second[0, 0] = 42.0  # a caller writing into its result must not reach the cached row
    np.testing.assert_array_equal(queries.embed_queries(["refund policy"]), first)


def test_cache_keys_on_the_exact_text_and_the_model(embedder: Any, embedder_factory: Any) -> None:
    cache = QueryEmbeddingCache(max_entries=2)
    a = QueryEmbedder(CountingEmbedder(embedder), cache=cache, batching=False)
    other_model = CountingEmbedder(embedder_factory(model_id="another-model"))
    b = QueryEmbedder(other_model, cache=cache, batching=False)
    a.embed_queries(["refund policy"])
    b.embed_queries(["refund policy"])  # same text, other model: a miss
    assert other_model.calls == [["refund policy"]]
    a.embed_queries(["Refund policy"])  # another text: a miss, and the oldest entry goes
    assert len(cache) == 2
    a.embed_queries(["refund policy"])
    assert cache.misses == 4 and cache.hits == 0


def test_micro_batched_rows_equal_single_rows(embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    counting.gate = threading.Event()
    queries = QueryEmbedder(counting, cache=QueryEmbeddingCache(0), max_batch=16)
    results: dict[str, NDArray[np.float32]] = {}

    def ask(text: str) -> None:
        results[text] = queries.embed_queries([text])[0]

    threads = [threading.Thread(target=ask, args=(q,)) for q in QUERIES]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while queries.batcher is not None and queries.batcher.queries + _queued(queries.batcher) < len(QUERIES):
        assert time.monotonic() < deadline, "the callers never queued"
        time.sleep(0.001)  # until every caller has queued (the gate holds the worker)
    counting.gate.set()
    for t in threads:
        t.join()
    queries.close()
    for q in QUERIES:
        np.testing.assert_array_equal(results[q], embedder.embed_queries([q])[0])
    assert max(len(c) for c in counting.calls) > 1, "the waiting queries were encoded together"
    assert sorted(t for c in counting.calls for t in c) == sorted(QUERIES)


def _queued(batcher: MicroBatcher) -> int:
    return batcher._queue.qsize()


def test_a_batch_failure_reaches_every_caller_and_the_worker_survives(embedder: Any) -> None:
    queries = QueryEmbedder(embedder, cache=QueryEmbeddingCache(0))
    embedder.fail = True
    with pytest.raises(IndexUnavailable):
        queries.embed_queries(["refund"])
    embedder.fail = False
    assert queries.embed_queries(["refund"]).shape == (1, embedder.dimension)
    queries.close()


def test_the_index_searches_through_the_query_embedder(index: HybridIndex) -> None:
    assert isinstance(index.searcher.embedder, QueryEmbedder)
    assert index.searcher.embedder.inner is index.embedder
