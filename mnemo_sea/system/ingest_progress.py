"""What an ingest reports as it goes: one event type, from the first file read to the last chunk
indexed. A library caller's `progress` callback and the command line's bar see the same events
(the CLI's bar only renders them, mnemo_sea/cli/ingest_bar.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class IngestProgress:
    """How far an ingest has come. Each event carries every count, so a listener may render the
    last one alone; every count only grows.

    The events, in order:
    - reading (`load_documents(progress=)`): `files` is the number of files to read, reported
      at once with `files_read` 0 (before the first is opened), then after each file, with
      `documents` the documents found so far. Nothing is stored yet. `Mnemo.ingest`'s events
      have `files` None: it is given documents, not files.
    - stored (`Mnemo.ingest(progress=)`): the call's documents are committed to the archive,
      all at once (one transaction), so `stored == documents`. A document whose content was
      already current is indexed already and counts so from this event on.
    - chunks known: `chunks` (None until then) is the number of chunks the index will embed,
      known once every document is chunked and compared with the index, before the model
      starts. Chunks already indexed with the same text are not embedded again and not counted.
    - embedding: `chunks_embedded` moves after each embedding step (32 chunks by default) and
      `indexed` as each document's last chunk is written.

    Indexed means searchable: every chunk of the document is written to the index, where the
    next search finds it (an answer the search cache kept from before is dropped once the call's
    whole batch is applied; the index is flushed, durable, before `ingest` returns).

    At the end `stored == documents` and, unless indexing was left pending (the index out of
    reach: the outbox keeps the work for the next sync), `indexed == documents` and
    `chunks_embedded == chunks` (0 when nothing needed embedding). The chunk counts are those of
    the index passes that indexed the call: work earlier writes left pending and that the same
    pass applies counts too, and a batch that failed and was applied again record by record
    counts again (both counts grow with it).
    """

    documents: int  # in this call (while reading: found so far)
    stored: int  # committed to the archive
    indexed: int  # searchable: new versions whose chunks are all written, plus unchanged ones
    chunks_embedded: int  # chunks embedded and written to the index so far
    chunks: int | None = None  # chunks to embed, once known (before the first is embedded)
    files: int | None = None  # files to read (reading events only)
    files_read: int = 0


ProgressCallback = Callable[[IngestProgress], None]


__all__ = ["IngestProgress", "ProgressCallback"]
