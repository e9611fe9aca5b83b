"""Embeddings cached by (model id, sha256 of the text), so unchanged text is never re-embedded.

An EmbeddingCache maps (model_id, content_sha256) to one float32 vector. Two implementations:
- InMemoryEmbeddingCache: an LRU bounded by entry count, for one process;
- SqliteEmbeddingCache: a file (by default beside an embedded index), shared by every process
  that opens it in turn and surviving restarts.

`discard(hashes)` drops the entries of those contents under every model: deleting evidence
must also delete what was derived from its text (the SQLite file zeroes them, `secure_delete`,
and its log is checkpointed away).

CachingEmbedder wraps any Embedder: it looks every document text up, embeds only the misses
(deduplicated, in one batched call) and stores them. An embedder that declares itself cheaper
than the cache (`embedding.embeds_cheaply`: the hashing test embedder, a benchmark's
precomputed vectors) is passed straight through, nothing stored: the SQLite cache costs about
66 us a text to look up and store a 384-d row (14 us a 64-d one) and 16 us to hit (3 us), where
such an embedder costs 1-15 us and a model milliseconds a chunk (bench engine-ingest,
docs/figures.md). Query embeddings are not stored here (nor on disk, nor in Redis):
query_embedding.QueryEmbeddingCache keeps the last few in process memory only, keyed by a
digest of the text, never the text.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .embedding import Embedder, Vectors, embeds_cheaply
from .errors import IndexUnavailable
from .evidence import sha256_hex


class EmbeddingCache(Protocol):
    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `hashes` (1-d float32 arrays); misses are absent."""
        ...

    def put_many(self, model_id: str, vectors: Mapping[str, Vectors]) -> None: ...

    def discard(self, hashes: Iterable[str]) -> int:
        """Drop these contents under every model; returns how many entries went."""
        ...

    def close(self) -> None: ...


class InMemoryEmbeddingCache:
    """Least-recently-used eviction past `max_entries` (384 floats is 1.5 KiB an entry)."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        with self._lock:
            for h in hashes:
                vector = self._entries.get((model_id, h))
                if vector is not None:
                    self._entries.move_to_end((model_id, h))
                    found[h] = vector
        return found

    def put_many(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        with self._lock:
            for h, vector in vectors.items():
                self._entries[(model_id, h)] = np.array(vector, dtype=np.float32)
                self._entries.move_to_end((model_id, h))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def discard(self, hashes: Iterable[str]) -> int:
        gone = set(hashes)
        with self._lock:
            keys = [k for k in self._entries if k[1] in gone]
            for k in keys:
                del self._entries[k]
        return len(keys)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class SqliteEmbeddingCache:
    """Vectors as float32 blobs in one table; safe to share between threads of one process."""

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS embeddings ("
        " model_id TEXT NOT NULL, content_sha256 TEXT NOT NULL, vector BLOB NOT NULL,"
        " PRIMARY KEY (content_sha256, model_id)) WITHOUT ROWID"
    )
    _BATCH = 500  # below SQLite's default limit of bound parameters

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A discarded vector is derived from deleted text: zero it in the file, not only unlink it.
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.execute(self._SCHEMA)
        except sqlite3.Error as exc:
            raise IndexUnavailable("embedding cache", f"cannot open {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for i in range(0, len(unique), self._BATCH):
                part = unique[i : i + self._BATCH]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    "SELECT content_sha256, vector FROM embeddings"  # noqa: S608 - only '?' marks are formatted in
                    f" WHERE model_id = ? AND content_sha256 IN ({marks})",
                    [model_id, *part],
                ).fetchall()
                for h, blob in rows:
                    found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        rows = [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def discard(self, hashes: Iterable[str]) -> int:
        unique = list(dict.fromkeys(hashes))
        removed = 0
        with self._lock:
            self._db.execute("BEGIN")
            for i in range(0, len(unique), self._BATCH):
                part = unique[i : i + self._BATCH]
                marks = ",".join("?" * len(part))
                cursor = self._db.execute(
                    f"DELETE FROM embeddings WHERE content_sha256 IN ({marks})",  # noqa: S608 - '?' marks only
                    part,
                )
                removed += cursor.rowcount
            self._db.execute("COMMIT")
            if removed:
                # The log still holds the page images that carried them; copy it back and empty it.
                # Best effort: a reader in another process may hold the log, then the next discard does.
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class CacheStats:
    """hits: texts served from the cache; misses: distinct texts the model had to embed (every
    text, when the embedder is passed through);
    embed_seconds: wall time spent inside the model for those misses."""

    hits: int = 0
    misses: int = 0
    embed_seconds: float = 0.0


class CachingEmbedder:
    """An Embedder that consults `cache` before `inner` for documents (see module docstring)."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.stats = CacheStats()
        self.passes_through = embeds_cheaply(inner)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_queries(texts)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.embed_documents_hashed(texts, [sha256_hex(t) for t in texts])

    def embed_documents_hashed(self, texts: Sequence[str], hashes: Sequence[str]) -> Vectors:
        """Like embed_documents when the caller already holds each text's sha256."""
        if not texts:
            return self.inner.embed_documents(texts)
        if self.passes_through:
            self.stats.misses += len(texts)
            return self.inner.embed_documents(texts)
        model_id = self.inner.model_id
        found = self.cache.get_many(model_id, hashes)
        missing: dict[str, str] = {}
        for text, h in zip(texts, hashes, strict=True):
            if h not in found:
                missing.setdefault(h, text)
        self.stats.hits += len(texts) - sum(1 for h in hashes if h not in found)
        self.stats.misses += len(missing)
        if missing:
            started = time.perf_counter()
            fresh = self.inner.embed_documents(list(missing.values()))
            self.stats.embed_seconds += time.perf_counter() - started
            computed = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(model_id, computed)
            found.update(computed)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
