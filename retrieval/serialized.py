"""A VectorIndex that lets one thread in at a time.

The in-process engines (Qdrant Edge, qdrant-client's `:memory:` mode) are not documented as
safe for concurrent use from several threads, and a web server calls the index from a thread
pool. Their calls take microseconds to a few milliseconds, so serialising them costs little;
a Qdrant server is reached over HTTP and is not wrapped.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .backend import LegQuery, ScoredPoint, StoredVectors, VectorIndex
from .filters import FilterSpec
from .points import IndexPoint, PointPayload


class SerializedIndex:
    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner
        self._lock = threading.RLock()

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def dense_dimension(self) -> int:
        return self.inner.dense_dimension

    @property
    def owned_by_this_process(self) -> bool:
        return self.inner.owned_by_this_process

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        with self._lock:
            self.inner.upsert(points)

    def delete_ids(self, ids: Sequence[uuid.UUID]) -> None:
        with self._lock:
            self.inner.delete_ids(ids)

    def delete_matching(self, spec: FilterSpec) -> None:
        with self._lock:
            self.inner.delete_matching(spec)

    def set_payload_matching(self, spec: FilterSpec, values: dict[str, Any]) -> None:
        with self._lock:
            self.inner.set_payload_matching(spec, values)

    def set_payloads(self, payloads: Mapping[uuid.UUID, PointPayload]) -> None:
        with self._lock:
            self.inner.set_payloads(payloads)

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]:
        with self._lock:
            return self.inner.query(legs)

    def payloads(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PointPayload]:
        with self._lock:
            return self.inner.payloads(ids)

    def vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, StoredVectors]:
        with self._lock:
            return self.inner.vectors(ids)

    def matching(self, spec: FilterSpec, limit: int = 10_000) -> list[tuple[uuid.UUID, PointPayload]]:
        with self._lock:
            return self.inner.matching(spec, limit)

    def count(self, spec: FilterSpec | None = None) -> int:
        with self._lock:
            return self.inner.count(spec)

    def flush(self) -> None:
        with self._lock:
            self.inner.flush()

    def optimize(self) -> None:
        with self._lock:
            self.inner.optimize()

    def compact(self) -> int:
        with self._lock:
            return self.inner.compact()

    def close(self) -> None:
        with self._lock:
            self.inner.close()
