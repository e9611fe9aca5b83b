"""The one interface both index backends implement (Qdrant Edge embedded, Qdrant server).

Data model shared by both: named vectors `dense` (cosine) and `bm25` (sparse, IDF modifier);
payload = PointPayload; a tenant index on `tenant_id`; keyword, integer and float indexes on
every filter field.

Contract:
- writes (`upsert`, `delete_*`, `set_payload*`) are idempotent and
  visible to the next query of the same backend object;
- `query` runs every leg with its filter applied inside the engine and returns, per leg, the
  best `limit` point ids with their scores (best first); `payloads` reads pointers for hits;
  `vectors` reads the stored vectors of a few points (a relevance floor judges hits by them);
- any engine failure raises IndexUnavailable naming the backend; a closed backend raises it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

import numpy as np

from .bm25 import SparseVector
from .filters import FilterSpec
from .points import BM25, DENSE, IndexPoint, PointPayload

# Payload keys the backends index, with their index type. tenant_id is the tenant index.
KEYWORD_FIELDS = ("evidence_id", "kind", "scope", "source", "owner", "status")
INTEGER_FIELDS = ("sensitivity", "version")
FLOAT_FIELDS = ("valid_from", "valid_until")


class Leg(StrEnum):
    BM25 = "bm25"
    DENSE = "dense"


@dataclass(frozen=True, eq=False)
class LegQuery:
    """One leg of a search. `vector` is a float32 array for DENSE, a SparseVector for BM25.

    `idf_corpus` (BM25 only) restricts the IDF statistics to the points it matches; searches use
    the caller's tenant, so one tenant's documents never shift another tenant's scores.
    """

    leg: Leg
    vector: np.ndarray[Any, np.dtype[np.float32]] | SparseVector
    filter: FilterSpec
    limit: int
    idf_corpus: FilterSpec | None = None


class ScoredPoint(NamedTuple):
    """A leg's result: the point and its raw score. Payloads are fetched for final hits only:
    reading a payload costs several microseconds a point, most candidates never become hits.
    A NamedTuple: a search builds one per candidate of each leg (200 by default), and a frozen
    dataclass costs four times as much to build."""

    id: uuid.UUID
    score: float


class StoredVectors(NamedTuple):
    """A point's vectors as stored: its dense vector (as the engine keeps it for cosine, which
    may be normalised) and its BM25 sparse vector (the chunk's terms, as dimensions)."""

    dense: np.ndarray[Any, np.dtype[np.float32]]
    sparse: SparseVector

    @classmethod
    def from_named(cls, named: object) -> StoredVectors:
        """From a point's vectors as either engine returns them: a dict of name to vector, the
        sparse one with `indices` and `values` (qdrant-client's and Qdrant Edge's types alike)."""
        vectors = named if isinstance(named, dict) else {}
        sparse = vectors.get(BM25)
        indices, values = getattr(sparse, "indices", None), getattr(sparse, "values", None)
        return cls(
            np.asarray(vectors.get(DENSE, ()), dtype=np.float32),
            # A chunk with no terms (only symbols) has no sparse vector stored.
            SparseVector((), ())
            if indices is None or values is None
            else SparseVector(tuple(indices), tuple(values)),
        )


class VectorIndex(Protocol):
    @property
    def description(self) -> str:
        """Which engine and where, for error messages and reports."""
        ...

    @property
    def dense_dimension(self) -> int: ...

    @property
    def owned_by_this_process(self) -> bool:
        """Whether no other process can write this index (the embedded engine locks its
        directory), so this process is the only one that applies the outbox to it."""
        ...

    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    def delete_ids(self, ids: Sequence[uuid.UUID]) -> None: ...

    def delete_matching(self, spec: FilterSpec) -> None: ...

    def set_payload_matching(self, spec: FilterSpec, values: dict[str, Any]) -> None:
        """Set these payload keys on every point matching `spec` (status flips, validity ends)."""
        ...

    def set_payloads(self, payloads: Mapping[uuid.UUID, PointPayload]) -> None:
        """Replace the whole payload of each of these existing points."""
        ...

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]: ...

    def payloads(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PointPayload]:
        """Stored payloads of those ids that exist."""
        ...

    def vectors(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, StoredVectors]:
        """Stored vectors of those ids that exist."""
        ...

    def matching(self, spec: FilterSpec, limit: int = 10_000) -> list[tuple[uuid.UUID, PointPayload]]:
        """Points matching `spec` (at most `limit`), in no particular order."""
        ...

    def count(self, spec: FilterSpec | None = None) -> int: ...

    def flush(self) -> None:
        """Make every write so far durable (a commit point)."""
        ...

    def optimize(self) -> None:
        """Merge segments and build indexes after a bulk load."""
        ...

    def compact(self) -> int:
        """Rewrite the index so no byte of a deleted point stays in its files; returns the
        points kept (0 where the engine reclaims by itself)."""
        ...

    def close(self) -> None: ...
