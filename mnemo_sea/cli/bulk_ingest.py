"""Storing a load of any size: consecutive batches through `Mnemo.ingest`, each one atomic.

The archive takes at most `ArchivePolicy.max_batch_size` records per transaction (1,000 by
default), so `ingest_in_batches` cuts a load into batches of that size, in load order, and
stores them one after the other; each batch is stored all or nothing and indexed before the
next one starts.

The caller validates the whole load first (`mnemo_sea.system.documents.load_documents` names every
bad file and line at once; the CLI also checks the principal's clearance for every record), so
a batch fails only when the store does: the archive went away, the disk is full, a concurrent
writer holds the database. Then loading stops there: the batches before it stay stored and
indexed (they were committed; undoing them would be a second, unrequested write), the failed
batch and every batch after it are not stored, and the report says exactly which is which.
Loading the same files again is safe: a document already stored comes back unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mnemo_sea.archive import EvidenceInput, InvalidInput, Principal

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import IngestProgress, Mnemo, ProgressCallback


@dataclass(frozen=True)
class StoredBatch:
    """One committed batch: documents `first`..`first + count - 1` of the load (0-based)."""

    number: int  # 1-based
    first: int
    count: int
    new_versions: int
    unchanged: int
    indexed: int  # documents whose index entry is up to date after the batch
    index_pending: int  # outbox rows still pending after the batch (the index caught up if 0)
    records: tuple[tuple[str, int], ...]  # (evidence_id, version) of each document, in order

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.number,
            "documents": [self.first + 1, self.first + self.count],  # 1-based, inclusive
            "stored": self.count,
            "new_versions": self.new_versions,
            "unchanged": self.unchanged,
            "indexed": self.indexed,
            "index_pending": self.index_pending,
        }


@dataclass(frozen=True)
class BatchFailure:
    """The batch that could not be stored; it and every later batch stored nothing."""

    number: int
    first: int
    count: int
    error: Exception


@dataclass(frozen=True)
class BatchedIngest:
    """What a batched load stored: every committed batch, and the failure that stopped it."""

    documents: int
    batch_size: int
    batches: tuple[StoredBatch, ...]
    failure: BatchFailure | None = None

    @property
    def stored(self) -> int:
        return sum(b.count for b in self.batches)

    @property
    def new_versions(self) -> int:
        return sum(b.new_versions for b in self.batches)

    @property
    def unchanged(self) -> int:
        return sum(b.unchanged for b in self.batches)

    @property
    def indexed(self) -> int:
        return sum(b.indexed for b in self.batches)

    @property
    def index_pending(self) -> int:
        return self.batches[-1].index_pending if self.batches else 0

    @property
    def records(self) -> list[tuple[str, int]]:
        return [r for b in self.batches for r in b.records]

    @property
    def total_batches(self) -> int:
        return -(-self.documents // self.batch_size) if self.documents else 0

    def describe_failure(self) -> str:
        """One sentence naming the failed batch and what stayed stored (empty if none failed)."""
        f = self.failure
        if f is None:
            return ""
        kept = (
            f"batches 1-{f.number - 1} (documents 1-{f.first}) stay stored and indexed"
            if f.number > 1
            else "nothing was stored"
        )
        return (
            f"batch {f.number} of {self.total_batches} (documents {f.first + 1}-{f.first + f.count}) "
            f"was not stored: {getattr(f.error, 'message', None) or f.error}; {kept}; documents "
            f"{f.first + 1}-{self.documents} were not stored (loading the same files again "
            "stores only what is missing)"
        )


def ingest_in_batches(
    mnemo: Mnemo,
    principal: Principal,
    items: Sequence[EvidenceInput],
    *,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
    reactivate: bool = False,
) -> BatchedIngest:
    """Store `items` in order, in batches of `batch_size` (default: the archive's maximum).
    `reactivate`: as for `Mnemo.ingest` (retracted content stored again as current).

    Never raises for a failed batch: loading stops there and `BatchedIngest.failure` holds the
    error (see the module docstring). `progress` sees counts over the whole load.
    """
    limit = mnemo.archive.policy.max_batch_size
    size = limit if batch_size is None else batch_size
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= limit:
        raise InvalidInput("batch_size", f"must be an integer from 1 to {limit}, got {batch_size!r}")
    tracker = _Tracker(len(items), progress)
    done: list[StoredBatch] = []
    for number, first in enumerate(range(0, len(items), size), start=1):
        batch = list(items[first : first + size])
        try:
            report = mnemo.ingest(principal, batch, progress=tracker.batch_progress, reactivate=reactivate)
        except Exception as e:  # noqa: BLE001 - reported with what was stored; the caller raises it
            return BatchedIngest(len(items), size, tuple(done), BatchFailure(number, first, len(batch), e))
        done.append(
            StoredBatch(
                number=number,
                first=first,
                count=len(batch),
                new_versions=report.new_versions,
                unchanged=report.unchanged,
                indexed=tracker.end_batch(),
                index_pending=report.index.pending if report.index is not None else 0,
                records=tuple((r.evidence_id, r.version) for r in report.stored),
            )
        )
    return BatchedIngest(len(items), size, tuple(done))


class _Tracker:
    """Turns each batch's progress into progress over the whole load: counts of the batches
    before this one plus this one's. `chunks` is the chunks to embed of the batches chunked so
    far (the later batches' are not known yet), None until the first batch's are."""

    def __init__(self, total: int, progress: ProgressCallback | None) -> None:
        self.total = total
        self.progress = progress
        self.stored = self.indexed = self.embedded = 0  # of the batches before this one
        self.chunks: int | None = None
        self.last: IngestProgress | None = None

    def batch_progress(self, p: IngestProgress) -> None:
        from mnemo_sea.system.mnemo import IngestProgress

        self.last = p
        if self.progress is not None:
            chunks = self.chunks if p.chunks is None else (self.chunks or 0) + p.chunks
            self.progress(
                IngestProgress(
                    self.total,
                    self.stored + p.stored,
                    self.indexed + p.indexed,
                    self.embedded + p.chunks_embedded,
                    chunks,
                )
            )

    def end_batch(self) -> int:
        """The batch's indexed documents; later batches count on from here."""
        p, self.last = self.last, None
        if p is None:
            return 0
        self.stored += p.stored
        self.indexed += p.indexed
        self.embedded += p.chunks_embedded
        if p.chunks is not None:
            self.chunks = (self.chunks or 0) + p.chunks
        return p.indexed


__all__ = ["BatchFailure", "BatchedIngest", "StoredBatch", "ingest_in_batches"]
