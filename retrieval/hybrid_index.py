"""HybridIndex: the retrieval layer's one entry point (write, delete, search).

    with HybridIndex.open("data/index") as index:          # embedded (Qdrant Edge)
        index.upsert([EvidenceDocument(tenant_id="acme", evidence_id="policy:1", version=1, text=...)])
        outcome = index.search(AccessScope("acme", clearance=1), SearchQuery("delivery policy"))

`HybridIndex.connect(url, collection)` is the same over a Qdrant server or cluster.

Write contract:
- `upsert(documents)` validates the whole batch before writing anything (InvalidDocument names
  the bad document); chunks already stored with the same payload are skipped, chunks whose text
  is unchanged but whose fields changed get a payload update only, the rest are embedded
  (through the cache) and written; chunks left over from a longer earlier text of the same
  version are deleted. Re-applying an upsert therefore changes nothing.
- `delete(tenant, evidence_id, version=None)` removes the points and the cached embeddings of
  their text; deleting again removes nothing and is not an error.
- writes are visible to the next search; `flush()` makes them durable (a commit point).
An engine or model failure raises IndexUnavailable; the caller (the outbox drainer) retries,
which is safe because every write is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType

from . import fields
from .backend import VectorIndex
from .edge_backend import EdgeIndex
from .embedding import Embedder, SentenceTransformerEmbedder
from .embedding_cache import CachingEmbedder, EmbeddingCache, InMemoryEmbeddingCache, SqliteEmbeddingCache
from .errors import InvalidDocument
from .evidence import EvidenceDocument
from .filters import FilterSpec, evidence_filter, tenant_filter
from .ingest import PointEncoder
from .lock import IndexLock
from .onnx_embedder import OnnxEmbedder
from .outcome import SearchOutcome
from .points import IndexPoint, PointPayload, point_id
from .query import AccessScope, SearchQuery
from .query_embedding import QueryEmbedder
from .search import Searcher
from .serialized import SerializedIndex
from .settings import EncodingSettings, IndexIdentity, SearchSettings, read_identity, write_identity
from .tuning import IndexTuning
from .upsert_plan import EMBED_STEP, StepTracker, UpsertPlan, UpsertProgress

IDENTITY_FILE = "retrieval.json"
CACHE_FILE = "embeddings.sqlite"


@dataclass(frozen=True)
class UpsertReport:
    documents: int = 0
    chunks: int = 0
    written: int = 0  # points (re)written with vectors
    payload_updates: int = 0  # same text, changed fields: payload rewritten only
    unchanged: int = 0  # already stored exactly so: nothing done
    stale_removed_from: int = 0  # documents whose surplus chunks (from a longer old text) were deleted

    def __add__(self, other: UpsertReport) -> UpsertReport:
        return UpsertReport(
            *(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__)  # all ints
        )


@dataclass(frozen=True)
class DeleteReport:
    points_removed: int
    embeddings_discarded: int


def _carried_out(plan: UpsertPlan, written: int, *, until: int | None = None) -> UpsertReport:
    """The report of `plan` carried out, `written` points embedded and written; with `until`
    (`_write_until` stopped there), its documents before that position only. The writes
    without the model were made for every document of the plan first, and are counted whole."""
    documents = plan.documents if until is None else until - plan.first
    return UpsertReport(
        documents=documents,
        chunks=sum(plan.document_chunks[:documents]),
        written=written,
        payload_updates=len(plan.payload_only),
        unchanged=plan.unchanged,
        stale_removed_from=len(plan.shrunk),
    )


def _points(embedded: list[list[IndexPoint]]) -> int:
    return sum(len(points) for points in embedded)


class HybridIndex:
    def __init__(
        self,
        backend: VectorIndex,
        embedder: Embedder,
        encoding: EncodingSettings,
        search_settings: SearchSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        embed_step: int = EMBED_STEP,
    ) -> None:
        """Compose an index from parts; `open` and `connect` are the usual ways in.

        `embedder` should be a CachingEmbedder for re-ingestion to be cheap. `embed_step`: the
        chunks embedded per step of an upsert whose progress is watched (see `upsert`).
        """
        if isinstance(embed_step, bool) or not isinstance(embed_step, int) or embed_step < 1:
            raise ValueError(f"embed_step must be a positive integer, got {embed_step!r}")
        self.embed_step = embed_step
        self.backend = backend
        self.embedder = embedder
        self.encoding = encoding
        self.search_settings = search_settings or SearchSettings()
        self.encoder = PointEncoder(encoding, embedder)
        # Queries go through a small LRU and, for torch, a micro-batcher (concurrent searches
        # share forward passes). ONNX Runtime runs concurrent calls in parallel outside the GIL,
        # so there the batcher's one worker and its padding only cost: at 8 callers it gave
        # 0.44-0.70x the queries/s of direct calls (bench query-embedding, three runs). Any
        # other embedder (the hashing one, a caller's own) is called directly: a hand-over to
        # the batcher's thread and back costs more than a cheap embedding itself.
        inner = getattr(embedder, "inner", embedder)
        self.query_embedder = QueryEmbedder(embedder, batching=isinstance(inner, SentenceTransformerEmbedder))
        self.searcher = Searcher(backend, self.encoder.bm25, self.query_embedder, self.search_settings, clock)
        # Points removed by `delete` since this object last compacted (not kept across opens):
        # the composition root compacts once enough have piled up.
        self.deleted_since_compaction = 0

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        embedder: Embedder | None = None,
        encoding: EncodingSettings | None = None,
        search_settings: SearchSettings | None = None,
        cache: EmbeddingCache | None = None,
        tuning: IndexTuning | None = None,
        clock: Callable[[], float] = time.time,
    ) -> HybridIndex:
        """Open the embedded index in directory `path`, creating it if needed.

        An existing index keeps the encoding it was built with: `encoding=None` adopts it, and a
        different one (or another embedding model) raises IndexConfigMismatch. The embedding
        cache defaults to `embeddings.sqlite` in the directory. Raises IndexLocked if another
        opener holds the directory.
        """
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        lock = IndexLock(directory)
        lock.acquire()
        try:
            inner = embedder or OnnxEmbedder()
            stored = read_identity(directory / IDENTITY_FILE)
            if stored is not None:
                wanted = IndexIdentity(inner.model_id, stored.dense_dimension, encoding or stored.encoding)
                stored.check_same(wanted, str(directory))
                identity = stored
            else:
                identity = IndexIdentity(inner.model_id, inner.dimension, encoding or EncodingSettings())
            edge = EdgeIndex.open(directory, identity.dense_dimension, tuning, lock=lock)
        except BaseException:
            lock.release()
            raise
        if stored is None:
            write_identity(directory / IDENTITY_FILE, identity)
        cached = CachingEmbedder(inner, cache or SqliteEmbeddingCache(directory / CACHE_FILE))
        return cls(SerializedIndex(edge), cached, identity.encoding, search_settings, clock=clock)

    @classmethod
    def connect(
        cls,
        url: str,
        collection: str,
        *,
        embedder: Embedder | None = None,
        encoding: EncodingSettings | None = None,
        search_settings: SearchSettings | None = None,
        cache: EmbeddingCache | None = None,
        api_key: str | None = None,
        tuning: IndexTuning | None = None,
        clock: Callable[[], float] = time.time,
    ) -> HybridIndex:
        """Use collection `collection` on the Qdrant at `url` (`:memory:` for an in-process one).

        The server does not record the encoding; callers sharing a collection must pass the same
        `encoding` (the composition root keeps it in its configuration).
        """
        from .server_backend import ServerIndex  # only here: qdrant-client's import costs seconds

        inner = embedder or OnnxEmbedder()
        server = ServerIndex.connect(url, collection, inner.dimension, api_key=api_key, tuning=tuning)
        # The in-process engine is not thread-safe; a real server is reached over HTTP.
        backend: VectorIndex = SerializedIndex(server) if url == ":memory:" else server
        cached = CachingEmbedder(inner, cache or InMemoryEmbeddingCache())
        return cls(backend, cached, encoding or EncodingSettings(), search_settings, clock=clock)

    # ----------------------------------------------------------------- writing

    def upsert(
        self,
        documents: Iterable[EvidenceDocument],
        *,
        batch_size: int = 1024,
        progress: Callable[[UpsertProgress], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> UpsertReport:
        """Index `documents` (see the module docstring), reporting to `progress` if given (see
        `UpsertProgress`: the chunk total before any is embedded, then each embedding step).

        Every document is chunked and compared with the index first, `batch_size` documents per
        lookup, so the chunks to embed are known before the model starts. Without `progress`
        each lookup batch is embedded in one call (the model sorts the texts by length: least
        padding); with it, in steps of `embed_step` chunks, each written as it is embedded, so
        the report moves while the model works.

        With `stop` (for a caller that must make way for others between documents: the
        indexer's trail) the documents are embedded one at a time and `stop()` is asked before
        each but the first that needs the model; once it answers true, the call writes what it
        embedded and returns. What needs no model, the chunks' sparse vectors, is encoded for
        every document of a lookup batch first: a caller waits for the model's part, and the
        tokenizer run over all the chunks at once, rather than between the model's steps,
        keeps its code and data warm. The report's `documents` and `chunks` then count the
        documents written, always the first ones of `documents`; a later call writes the rest
        (one written again changes nothing). `payload_updates`, `unchanged` and
        `stale_removed_from` count every document of the lookup batches the call began, since
        those writes come before any embedding. The points are written once the embedding
        stops, a document's a write, back to back (`_write_points`): planning and writing a few
        documents together, rather than a call per document, is most of the gain
        (docs/figures.md). They are held until then, so `stop` is for calls of a few documents
        (the trail hands 4 pages). `progress` and `stop` are not taken together (ValueError).
        """
        if progress is not None and stop is not None:
            raise ValueError("upsert takes `progress` or `stop`, not both")
        docs = list(documents)
        seen: set[tuple[str, str, int]] = set()
        for doc in docs:
            if not isinstance(doc, EvidenceDocument):
                raise InvalidDocument("documents", f"expected EvidenceDocument, got {type(doc).__name__}")
            key = (doc.tenant_id, doc.evidence_id, doc.version)
            if key in seen:
                raise InvalidDocument("documents", "appears twice in one batch", doc.evidence_id)
            seen.add(key)
        # Every document is planned before any is written, so the total is known first; no plan
        # depends on another's writes (the keys are distinct and a lookup reads its own points).
        plans = [self._plan(docs[i : i + batch_size], i) for i in range(0, len(docs), batch_size)]
        if stop is not None:
            return self._write_until(plans, stop)
        chunks = sum(len(plan.to_encode) for plan in plans)
        tracker = None if progress is None else StepTracker(chunks, progress)
        report = UpsertReport()
        for plan in plans:
            report = report + self._write(plan, tracker)
        return report

    def _plan(self, docs: Sequence[EvidenceDocument], first: int) -> UpsertPlan:
        """What upserting `docs` (positions `first`.. of the call) takes: chunks to embed,
        payloads to rewrite, stale chunks to delete. Reads the index, writes nothing."""
        prepared = [self.encoder.prepare(doc) for doc in docs]
        # Chunks are numbered 0..n-1 without gaps, so a point at chunk n (the "next" id) means an
        # earlier, longer text of this version left chunks n.. behind. One lookup answers both
        # "what is stored already" and "is anything stale".
        next_ids = [
            point_id(d.tenant_id, d.evidence_id, d.version, len(c))
            for d, c in zip(docs, prepared, strict=True)
        ]
        stored = self.backend.payloads([c.point_id for chunks in prepared for c in chunks] + next_ids)
        plan = UpsertPlan(first=first, document_chunks=[len(c) for c in prepared])
        for position, chunks in enumerate(prepared, start=first):
            before = len(plan.to_encode)
            for c in chunks:
                old = stored.get(c.point_id)
                if old == c.payload:
                    plan.unchanged += 1
                elif old is not None and old.chunk_sha256 == c.payload.chunk_sha256:
                    plan.payload_only.append(c)
                else:
                    plan.to_encode.append(c)
            if len(plan.to_encode) == before:
                plan.ready.append(position)
            else:
                plan.ends.append((len(plan.to_encode), position))
        plan.shrunk = [
            (d, len(c)) for d, c, nxt in zip(docs, prepared, next_ids, strict=True) if nxt in stored
        ]
        return plan

    def _write(self, plan: UpsertPlan, tracker: StepTracker | None) -> UpsertReport:
        """Carry out `plan`: the writes that need no model first (so a document with nothing to
        embed is done at once), then the embedding, in steps when `tracker` watches."""
        self._write_without_model(plan)
        todo = plan.to_encode
        if tracker is None:
            if todo:
                self.backend.upsert(self.encoder.encode(todo))
        else:
            tracker.started(plan)
            for start in range(0, len(todo), self.embed_step):
                part = todo[start : start + self.embed_step]
                self.backend.upsert(self.encoder.encode(part))
                tracker.step(plan, len(part), start + len(part))
        return _carried_out(plan, len(todo))

    def _write_without_model(self, plan: UpsertPlan) -> None:
        """`plan`'s writes that need no embedding: payload updates and stale chunks removed."""
        if plan.payload_only:
            self.backend.set_payloads({c.point_id: c.payload for c in plan.payload_only})
        for doc, n_chunks in plan.shrunk:
            self.backend.delete_matching(
                evidence_filter(doc.tenant_id, doc.evidence_id, doc.version, from_chunk=n_chunks)
            )

    def _write_until(self, plans: list[UpsertPlan], stop: Callable[[], bool]) -> UpsertReport:
        """Carry out `plans` (one call's, in order) a document at a time until `stop()` answers
        true before one (see `upsert`), then write the points embedded. A plan's work without
        the model comes first, for all its documents: its writes (as `_write` makes them) and
        its chunks' sparse vectors."""
        embedded: list[list[IndexPoint]] = []  # each document's points, in order
        report = UpsertReport()
        for plan in plans:
            self._write_without_model(plan)
            sparse = self.encoder.encode_sparse(plan.to_encode)
            before = len(embedded)
            start = 0
            for end, position in plan.ends:
                if embedded and stop():
                    self._write_points(embedded)
                    return report + _carried_out(plan, _points(embedded[before:]), until=position)
                embedded.append(self.encoder.encode(plan.to_encode[start:end], sparse[start:end]))
                start = end
            report = report + _carried_out(plan, _points(embedded[before:]))
        self._write_points(embedded)
        return report

    def _write_points(self, embedded: list[list[IndexPoint]]) -> None:
        """Write each document's points, one document a write, back to back once all are
        embedded: together after the embedding is what saves time (the index's code and data
        stay warm), and a write per document keeps each call into the index short, which an
        embedded index makes while holding the interpreter's lock (other threads wait for it)."""
        for points in embedded:
            self.backend.upsert(points)

    def set_status(
        self,
        tenant_id: str,
        evidence_id: str,
        version: int,
        status: str,
        *,
        valid_until: datetime | None = None,
    ) -> None:
        """Flip the status (and optionally close the validity) of one evidence version's points.

        Used for supersede and retract, which change no text: no re-embedding is needed.
        """
        fields.identifier("tenant_id", tenant_id)
        fields.evidence_id(evidence_id)
        fields.one_of("status", status, fields.STATUSES)
        values: dict[str, object] = {"status": status}
        if valid_until is not None:
            values["valid_until"] = fields.epoch_seconds(valid_until)
        self.backend.set_payload_matching(evidence_filter(tenant_id, evidence_id, version), values)

    def delete(self, tenant_id: str, evidence_id: str, version: int | None = None) -> DeleteReport:
        """Remove every point of the evidence (or of one version) and its cached embeddings."""
        fields.identifier("tenant_id", tenant_id)
        fields.evidence_id(evidence_id)
        spec = evidence_filter(tenant_id, evidence_id, version)
        removed = 0
        hashes: set[str] = set()
        # Page through by deleting what we have seen, so evidence of any size goes completely.
        while page := self.backend.matching(spec, limit=1_000):
            self.backend.delete_ids([pid for pid, _ in page])
            removed += len(page)
            self.deleted_since_compaction += len(page)
            hashes.update(p.chunk_sha256 for _, p in page)
        discarded = 0
        if hashes and isinstance(self.embedder, CachingEmbedder):
            discarded = self.embedder.cache.discard(hashes)
        return DeleteReport(points_removed=removed, embeddings_discarded=discarded)

    # ----------------------------------------------------------------- reading

    def search(self, scope: AccessScope, query: SearchQuery) -> SearchOutcome:
        """Search within `scope`; see search.py for the order of checks and SearchOutcome for statuses."""
        return self.searcher.search(scope, query)

    @property
    def owned_by_this_process(self) -> bool:
        """True for the embedded index (one opener); False over a Qdrant server."""
        return self.backend.owned_by_this_process

    def count(self, tenant_id: str | None = None) -> int:
        """Points stored (for one tenant, or all)."""
        return self.backend.count(None if tenant_id is None else tenant_filter(tenant_id))

    def count_matching(self, spec: FilterSpec) -> int:
        """Points whose payload matches `spec` (a deletion's leftovers, say)."""
        return self.backend.count(spec)

    def points_matching(self, spec: FilterSpec) -> list[PointPayload]:
        """The payload of every point matching `spec`, in no particular order (for the
        consistency check, which compares them with the archive)."""
        total = self.backend.count(spec)
        return [payload for _pid, payload in self.backend.matching(spec, limit=total + 1)]

    # ----------------------------------------------------------------- lifecycle

    def flush(self) -> None:
        self.backend.flush()

    def optimize(self) -> None:
        self.backend.optimize()

    def compact(self) -> int:
        """Rewrite the embedded index with its live points only, so nothing of a deleted point
        stays in its files (Edge only tombstones deletes); returns the points kept. A no-op
        returning 0 over a Qdrant server, which vacuums deleted points itself."""
        kept = self.backend.compact()
        self.deleted_since_compaction = 0
        return kept

    def close(self) -> None:
        """Flush and close the engine and the embedding cache, stop the query batcher; idempotent."""
        self.query_embedder.close()
        self.backend.close()
        if isinstance(self.embedder, CachingEmbedder):
            self.embedder.cache.close()

    def __enter__(self) -> HybridIndex:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
