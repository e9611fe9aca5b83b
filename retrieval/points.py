"""What one chunk of one evidence version looks like in the index.

A point is (id, dense vector, BM25 sparse vector, payload). The payload holds pointers and
filter fields only, never text: the archive stays the one place that holds originals.

Point ids are uuid5 of (tenant, evidence id, version, chunk), so re-applying an upsert or a
delete hits the same points (idempotent), and every process derives the same id without a
lookup. The tenant is part of the name because evidence ids are caller-given and two tenants
may well both have `policy:delivery:2026-10`: without it one tenant's write would overwrite
the other's point.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .bm25 import SparseVector

POINT_NAMESPACE = uuid.UUID("6c1f2a4e-9b1d-5e0f-8a43-2f7c0d9e5b61")

DENSE = "dense"
BM25 = "bm25"


def point_id(tenant_id: str, evidence_id: str, version: int, chunk: int) -> uuid.UUID:
    # \x1f (unit separator) cannot occur in any of the parts, so distinct tuples never collide.
    return uuid.uuid5(POINT_NAMESPACE, f"{tenant_id}\x1f{evidence_id}\x1f{version}\x1f{chunk}")


@dataclass(frozen=True)
class PointPayload:
    """The stored payload of a point. Field names are the payload keys."""

    tenant_id: str
    evidence_id: str
    version: int
    chunk: int
    chunk_start: int
    chunk_end: int
    chunk_sha256: str
    content_sha256: str
    kind: str
    scope: str
    source: str
    owner: str | None
    sensitivity: int
    status: str
    valid_from: float
    valid_until: float

    def to_dict(self) -> dict[str, Any]:
        # The fields are flat scalars: read them straight off (dataclasses.asdict deep-copies
        # each one, a measurable share of an ingest).
        data = {name: getattr(self, name) for name in _PAYLOAD_KEYS}
        if self.owner is None:
            del data["owner"]  # absent, not null: the "unowned" filter is is_empty on this key
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointPayload:
        return cls(
            tenant_id=str(data["tenant_id"]),
            evidence_id=str(data["evidence_id"]),
            version=int(data["version"]),
            chunk=int(data["chunk"]),
            chunk_start=int(data["chunk_start"]),
            chunk_end=int(data["chunk_end"]),
            chunk_sha256=str(data["chunk_sha256"]),
            content_sha256=str(data["content_sha256"]),
            kind=str(data["kind"]),
            scope=str(data["scope"]),
            source=str(data["source"]),
            owner=None if data.get("owner") is None else str(data["owner"]),
            sensitivity=int(data["sensitivity"]),
            status=str(data["status"]),
            valid_from=float(data["valid_from"]),
            valid_until=float(data["valid_until"]),
        )


_PAYLOAD_KEYS = tuple(f.name for f in fields(PointPayload))


@dataclass(frozen=True, eq=False)
class IndexPoint:
    """A point ready to write. `dense` is a 1-d float32 array of the index's dimension."""

    id: uuid.UUID
    payload: PointPayload
    dense: np.ndarray[Any, np.dtype[np.float32]]
    sparse: SparseVector
