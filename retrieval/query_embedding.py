"""The query side of an Embedder: a small LRU of recent query vectors and a micro-batcher.

A search embeds one short query and waits for it. Two things make that cheaper without
changing a single vector:
- QueryEmbeddingCache: the last `max_entries` query vectors, keyed by (model id, sha256 of the
  exact query text). Agents repeat queries (retries, the same lookup across turns); a hit costs
  microseconds instead of a forward pass. Only the digest of the text is kept, never the text,
  and only in this process's memory; `clear()` empties it.
- MicroBatcher: concurrent callers hand their query to one worker thread, which encodes
  everything that is waiting as one batch. A single-row forward pass streams all the weights
  for one row; a batch of 8 streams them once for 8 rows, so under concurrency queries/s rises
  while a lone query waits for nothing (the worker only takes what is already queued, plus an
  optional `max_wait` to gather more).

QueryEmbedder wraps any Embedder with both and keeps the Embedder protocol: documents pass
straight through.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np

from .embedding import Embedder, Vectors
from .embedding_cache import InMemoryEmbeddingCache


def _digest(text: str) -> str:
    # surrogatepass: a query is not validated as storable text, and a lone surrogate must reach
    # the model (or its error) rather than fail here.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class QueryEmbeddingCache(InMemoryEmbeddingCache):
    """The documents' in-memory LRU (embedding_cache), keyed by the digest of a query's text,
    with hit and miss counts. A row it returns is the stored one: QueryEmbedder stacks copies."""

    def __init__(self, max_entries: int = 1024) -> None:
        super().__init__(max_entries)
        self.hits = 0
        self.misses = 0

    def get(self, model_id: str, text: str) -> Vectors | None:
        digest = _digest(text)
        vector = self.get_many(model_id, [digest]).get(digest)
        if vector is None:
            self.misses += 1
        else:
            self.hits += 1
        return vector

    def put(self, model_id: str, text: str, vector: Vectors) -> None:
        self.put_many(model_id, {_digest(text): vector})


class MicroBatcher:
    """One worker thread encodes queued queries in batches of up to `max_batch`.

    The worker starts on first use (and again in a forked child, where threads do not survive);
    `close()` stops it. Errors of a batch reach every caller in it.
    """

    def __init__(self, inner: Embedder, *, max_batch: int = 16, max_wait: float = 0.0) -> None:
        self.inner = inner
        self.max_batch = max_batch
        self.max_wait = max_wait
        self._queue: queue.SimpleQueue[tuple[str, Future[Vectors]] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._pid = 0
        self._start_lock = threading.Lock()
        self.batches = 0
        self.queries = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self._ensure_worker()
        futures: list[Future[Vectors]] = []
        for text in texts:
            future: Future[Vectors] = Future()
            self._queue.put((text, future))
            futures.append(future)
        return np.stack([f.result() for f in futures]).astype(np.float32, copy=False)

    def close(self) -> None:
        with self._start_lock:
            worker, self._worker = self._worker, None
        if worker is not None and self._pid == os.getpid():
            self._queue.put(None)
            worker.join()

    def _ensure_worker(self) -> None:
        if self._worker is not None and self._pid == os.getpid():
            return
        with self._start_lock:
            if self._worker is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._worker = threading.Thread(target=self._run, name="query-embedding-batcher", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            deadline = time.perf_counter() + self.max_wait
            stop = False
            while len(batch) < self.max_batch:
                try:
                    remaining = deadline - time.perf_counter()
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._encode(batch)
            if stop:
                return

    def _encode(self, batch: list[tuple[str, Future[Vectors]]]) -> None:
        self.batches += 1
        self.queries += len(batch)
        try:
            vectors = self.inner.embed_queries([text for text, _ in batch])
        except Exception as exc:  # noqa: BLE001 - each waiting caller gets it; the worker lives on
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), vector in zip(batch, vectors, strict=True):
            future.set_result(vector)


class QueryEmbedder:
    """An Embedder whose queries go through a QueryEmbeddingCache and, optionally, a MicroBatcher."""

    def __init__(
        self,
        inner: Embedder,
        *,
        cache: QueryEmbeddingCache | None = None,
        batching: bool = True,
        max_batch: int = 16,
        max_wait: float = 0.0,
    ) -> None:
        self.inner = inner
        self.cache = cache if cache is not None else QueryEmbeddingCache()
        self.batcher = MicroBatcher(inner, max_batch=max_batch, max_wait=max_wait) if batching else None

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return self.inner.embed_queries(texts)
        model_id = self.inner.model_id
        rows: list[Vectors | None] = [self.cache.get(model_id, t) for t in texts]
        missing = sorted({t for t, row in zip(texts, rows, strict=True) if row is None})
        if missing:
            batcher = self.batcher
            fresh = batcher.embed(missing) if batcher is not None else self.inner.embed_queries(missing)
            computed = dict(zip(missing, fresh, strict=True))
            for text, vector in computed.items():
                self.cache.put(model_id, text, vector)
            rows = [row if row is not None else computed[t] for t, row in zip(texts, rows, strict=True)]
        return np.stack([row for row in rows if row is not None]).astype(np.float32, copy=False)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
