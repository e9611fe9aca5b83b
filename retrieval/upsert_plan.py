"""What one `HybridIndex.upsert` call does, decided before it writes, and how it reports progress.

The plan is made for every document of the call before anything is embedded, so the number of
chunks the model will embed is known first: a caller can show a total and an ETA from the start
instead of a counter that stands still until the whole embedding is done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .evidence import EvidenceDocument
from .ingest import PreparedChunk

# Chunks embedded (and written) per step when the caller watches progress: a step of the default
# model takes about 3 s on two busy cores, so the report moves every few seconds. Cutting a batch
# in steps costs nothing measurable: 128 chunks of ~1,700 characters took 9.9-11.7 s of CPU in
# steps of 16, 10.2-11.1 in steps of 32, 10.6-12.1 in steps of 64 and 10.8-11.5 in one call (three
# runs each, all-MiniLM-L6-v2 on ONNX Runtime, two threads). With the hashing test embedder, whose
# vectors cost next to nothing, the extra index writes cost about 0.05 s per 3,000 chunks.
EMBED_STEP = 32


@dataclass(frozen=True)
class UpsertProgress:
    """How far one `HybridIndex.upsert` call has come, as its `progress` callback sees it.

    The first report comes once every document is chunked and compared with the index, before
    anything is embedded (`embedded` 0); then one after the writes that need no model (payload
    updates, stale chunks removed) when some document needed nothing else, and one after each
    embedding step. `embedded` only grows and ends equal to `chunks`.
    """

    chunks: int  # chunks this call embeds: new or changed text (chunks stored exactly so are not)
    embedded: int  # of them, embedded and written to the index so far
    # Documents (positions in the call's input) written completely since the previous report: each
    # of their chunks is in the index, visible to the next search (durable at the next flush).
    written: tuple[int, ...]


@dataclass
class UpsertPlan:
    """The writes for documents `first`..`first + documents - 1` of one upsert call."""

    first: int
    # Each document's chunks, in order, whatever is done with them.
    document_chunks: list[int] = field(default_factory=list)
    unchanged: int = 0
    to_encode: list[PreparedChunk] = field(default_factory=list)
    payload_only: list[PreparedChunk] = field(default_factory=list)
    shrunk: list[tuple[EvidenceDocument, int]] = field(default_factory=list)  # (document, its chunks now)
    # Documents with nothing to embed, and (chunks of `to_encode` up to its last, position) of the
    # others, in order: a document is written once that many chunks are.
    ready: list[int] = field(default_factory=list)
    ends: list[tuple[int, int]] = field(default_factory=list)

    @property
    def documents(self) -> int:
        return len(self.document_chunks)


class StepTracker:
    """Reports one upsert call to its `progress` callback (see `UpsertProgress`); the first
    report, with the call's chunk total, as it is made."""

    def __init__(self, chunks: int, progress: Callable[[UpsertProgress], None]) -> None:
        self.chunks = chunks
        self.embedded = 0
        self.progress = progress
        self._next_end = 0  # into the current plan's `ends`: the first document not yet reported
        progress(UpsertProgress(chunks, 0, ()))

    def started(self, plan: UpsertPlan) -> None:
        """`plan`'s writes without the model are done: its documents with nothing to embed are written."""
        self._next_end = 0
        if plan.ready:
            self.progress(UpsertProgress(self.chunks, self.embedded, tuple(plan.ready)))

    def step(self, plan: UpsertPlan, chunks: int, encoded: int) -> None:
        """`chunks` more were embedded and written: `encoded` of `plan.to_encode` so far."""
        self.embedded += chunks
        ends, i = plan.ends, self._next_end
        while i < len(ends) and ends[i][0] <= encoded:
            i += 1
        written = tuple(position for _, position in ends[self._next_end : i])
        self._next_end = i
        self.progress(UpsertProgress(self.chunks, self.embedded, written))
