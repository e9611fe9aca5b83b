"""What the facade's own operations answer (search, ingest, deletion checks), apart from `Mnemo`.

Plain values over the archive's records and the retrieval layer's errors, importing neither the
index engine nor the model: the REST client (mnemo_sea.client) rebuilds these from JSON so that
code works the same on a `Mnemo` in process and on a server, and must stay light to import.
`mnemo_sea.system.mnemo` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from mnemo_sea.archive import DeletionReceipt, ErasureState, EvidenceRecord, Forbidden, InvalidInput
from mnemo_sea.retrieval.errors import IndexUnavailable

if TYPE_CHECKING:
    from mnemo_sea.system.projection.indexer import DrainReport


_new_object = object.__new__


@dataclass(frozen=True)
class SearchHit:
    """A hit hydrated from the archive: what it points to and the exact text of its span.

    `score` orders one search's hits: in hybrid mode the weighted RRF score, the sum over legs
    of weight / (60 + rank), rank based and so no measure of relevance (at most 2/61 ≈ 0.033,
    first in both legs); in a single-leg mode that leg's score. Each leg's own figures:
    `bm25_rank`/`bm25_score` (the Okapi BM25 score, unbounded, comparable only within one
    query; None when the BM25 leg did not return the hit), `dense_rank`/`dense_score` (the
    cosine of query and chunk embeddings in [-1, 1], comparable across queries; a hybrid hit
    the dense leg did not return has its cosine computed from its stored vector and no rank).
    `relevance` is what `min_score` applies to: max(dense_score, (dense_score + lexical) / 2),
    lexical being bm25_score over the query's best BM25 score (retrieval/floor.py). The dense
    figures and relevance are None only when the query was not embedded (bm25 mode).
    """

    evidence_id: str
    version: int
    kind: str
    source: str
    scope: str
    locator: str
    snippet: str
    score: float
    bm25_rank: int | None
    dense_rank: int | None
    span: tuple[int, int]
    label: str = "evidence"
    # A hit in an archived original: the original's lines (from 1, both included) and bytes
    # ([start, end)) that the snippet is, which `recover(..., lines=...)` takes as they are.
    lines: tuple[int, int] | None = None
    byte_range: tuple[int, int] | None = None
    bm25_score: float | None = None
    dense_score: float | None = None
    relevance: float | None = None
    # The JSON object the caller kept with the evidence version hit (EvidenceRecord.metadata);
    # None for other kinds and versions kept without. Left out of the hash (a dict has none).
    metadata: dict[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def built(
        cls,
        evidence_id: str,
        version: int,
        kind: str,
        source: str,
        scope: str,
        locator: str,
        snippet: str,
        score: float,
        bm25_rank: int | None,
        dense_rank: int | None,
        span: tuple[int, int],
        label: str,
        lines: tuple[int, int] | None = None,
        byte_range: tuple[int, int] | None = None,
        bm25_score: float | None = None,
        dense_score: float | None = None,
        relevance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SearchHit:
        """The SearchHit the constructor makes of these values, made without calling it: a
        frozen dataclass's __init__ sets each field through object.__setattr__, 1.4 us a hit
        against 0.2, and every search builds ten. There is nothing the constructor would
        check (no __post_init__); a test holds both ways equal, field for field."""
        hit = _new_object(cls)
        vars(hit).update(
            evidence_id=evidence_id,
            version=version,
            kind=kind,
            source=source,
            scope=scope,
            locator=locator,
            snippet=snippet,
            score=score,
            bm25_rank=bm25_rank,
            dense_rank=dense_rank,
            span=span,
            label=label,
            lines=lines,
            byte_range=byte_range,
            bm25_score=bm25_score,
            dense_score=dense_score,
            relevance=relevance,
            metadata=metadata,
        )
        return hit

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence_id": self.evidence_id,
            "version": self.version,
            "kind": self.kind,
            "source": self.source,
            "scope": self.scope,
            "locator": self.locator,
            "snippet": self.snippet,
            "score": self.score,
            "bm25_rank": self.bm25_rank,
            "bm25_score": self.bm25_score,
            "dense_rank": self.dense_rank,
            "dense_score": self.dense_score,
            "relevance": self.relevance,
            "span": list(self.span),
            "label": self.label,
            "lines": None if self.lines is None else list(self.lines),
            "byte_range": None if self.byte_range is None else list(self.byte_range),
            "metadata": self.metadata,
        }


class SearchResultStatus(StrEnum):
    """What a search answered: the index's outcomes (`retrieval.SearchStatus`, the same values)
    and `invalid`, a query refused before the index was asked. A StrEnum, so JSON shows the
    plain strings."""

    RESULTS = "results"
    NO_MATCH = "no_match"
    INVALID = "invalid"
    FORBIDDEN = "forbidden"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class SearchResult:
    status: SearchResultStatus
    hits: tuple[SearchHit, ...] = ()
    reason: str = ""
    # Index hits the caller may not read or whose record is no longer current (the index is
    # catching up, or its payload was stale): read back through the archive and left out.
    dropped: int = 0
    cached: bool = False
    # Archived originals the caller may read whose text is not yet searchable: their pages are
    # still being indexed behind the writes (their notes are searchable already).
    pending_originals: int = 0

    def __post_init__(self) -> None:
        # The same value as a plain string is accepted (a result rebuilt from JSON).
        object.__setattr__(self, "status", SearchResultStatus(self.status))

    def raise_for_status(self) -> SearchResult:
        """This result, or the typed error of a search that could not run, so that no surface
        ever shows a dead leg as an empty list: InvalidInput, Forbidden or IndexUnavailable."""
        if self.status is SearchResultStatus.INVALID:
            raise InvalidInput("query", self.reason)
        if self.status is SearchResultStatus.FORBIDDEN:
            raise Forbidden(self.reason or "this search is not allowed")
        if self.status is SearchResultStatus.UNAVAILABLE:
            raise IndexUnavailable("index", self.reason or "the search index did not answer")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "reason": self.reason,
            "dropped": self.dropped,
            "cached": self.cached,
            "pending_originals": self.pending_originals,
            "hits": [h.to_dict() for h in self.hits],
        }


@dataclass(frozen=True)
class IngestReport:
    stored: tuple[EvidenceRecord, ...]
    new_versions: int
    unchanged: int
    index: DrainReport | None = None


DeletionStatus = Literal["ok", "pending_reader", "incomplete"]


@dataclass(frozen=True)
class DeletionCheck:
    """Whether anything of a deletion can still be reached, store by store."""

    receipt: DeletionReceipt
    archive_leftovers: tuple[str, ...]
    index_leftovers: tuple[str, ...]
    pending_outbox: int
    # Whether the archive's files may still hold the deleted bytes: "pending_reader" while
    # another connection holds SQLite's write-ahead log (erasure_detail says what it holds),
    # "pending" when the step that empties them failed (the store unreachable).
    erasure: ErasureState = "done"
    erasure_detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def status(self) -> DeletionStatus:
        """ "ok": nothing is left anywhere; "pending_reader": nothing is left but the bytes in the
        archive's write-ahead log, which a reader holds (they go once it lets go: check again);
        "incomplete": something else is left (the leftovers say what), or the files may still
        hold the bytes because emptying them failed (`erasure` "pending": no reader to wait
        for, the store itself failed; the next deletion retries it)."""
        if self.archive_leftovers or self.index_leftovers or self.pending_outbox:
            return "incomplete"
        if self.erasure == "done":
            return "ok"
        return "pending_reader" if self.erasure == "pending_reader" else "incomplete"


__all__ = [
    "DeletionCheck",
    "DeletionStatus",
    "IngestReport",
    "SearchHit",
    "SearchResult",
    "SearchResultStatus",
]
