"""What a search answers: a status, and pointers (never text) with per-leg ranks and scores.

Status is explicit so a caller can never mistake a dead leg for "nothing found":
- RESULTS: at least one hit;
- NO_MATCH: every leg ran and nothing in the caller's scope matched (`reason` says why);
- FORBIDDEN: the request asked for data the scope may not read (e.g. another owner's memory);
- UNAVAILABLE: a leg could not run (engine down, model failed); `reason` names it. Never
  reported as an empty success, and a hybrid search never silently degrades to one leg.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .points import PointPayload
from .query import SearchMode


class SearchStatus(StrEnum):
    RESULTS = "results"
    NO_MATCH = "no_match"
    FORBIDDEN = "forbidden"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class LegScore:
    """A hit's place in one leg: rank from 1, and the engine's raw score (BM25, or cosine).

    `rank` is None for a dense score the leg did not return: a hybrid hit found by BM25 alone
    gets its cosine computed from the chunk's stored vector, the same number the dense leg
    would have given it (BM25 has no such score to compute: its IDF lives in the engine)."""

    rank: int | None
    score: float


@dataclass(frozen=True)
class Hit:
    """A pointer to a chunk of one evidence version: hydrate `text[start:end]` from the archive.

    `score` is the fused RRF score in hybrid mode and the leg's raw score in single-leg modes;
    `bm25` is None when that leg did not return this chunk (or did not run); `dense` is None
    when the query was not embedded (bm25 mode, or a dense weight of 0 without a floor), or for
    a hit only BM25 found whose point was deleted before its vector was read (a floor then
    leaves it out, unless it is an exact lexical match).
    """

    point_id: uuid.UUID
    tenant_id: str
    evidence_id: str
    version: int
    chunk: int
    start: int
    end: int
    content_sha256: str
    kind: str
    scope: str
    source: str
    owner: str | None
    sensitivity: int
    status: str
    score: float
    bm25: LegScore | None = None
    dense: LegScore | None = None
    # What `min_score` applies to (floor.py): the dense cosine, raised by a strong BM25 match;
    # None when `dense` is.
    relevance: float | None = None

    @classmethod
    def from_payload(
        cls,
        point_id: uuid.UUID,
        payload: PointPayload,
        score: float,
        bm25: LegScore | None,
        dense: LegScore | None,
        relevance: float | None = None,
    ) -> Hit:
        return cls(
            point_id=point_id,
            tenant_id=payload.tenant_id,
            evidence_id=payload.evidence_id,
            version=payload.version,
            chunk=payload.chunk,
            start=payload.chunk_start,
            end=payload.chunk_end,
            content_sha256=payload.content_sha256,
            kind=payload.kind,
            scope=payload.scope,
            source=payload.source,
            owner=payload.owner,
            sensitivity=payload.sensitivity,
            status=payload.status,
            score=score,
            bm25=bm25,
            dense=dense,
            relevance=relevance,
        )


@dataclass(frozen=True)
class SearchOutcome:
    """`timings_ms`: `encode_bm25`, `embed_query`, `index`, `payloads` and `total`, for what ran."""

    status: SearchStatus
    mode: SearchMode
    hits: tuple[Hit, ...] = ()
    reason: str = ""
    timings_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True for RESULTS and NO_MATCH: the search ran completely."""
        return self.status in (SearchStatus.RESULTS, SearchStatus.NO_MATCH)
