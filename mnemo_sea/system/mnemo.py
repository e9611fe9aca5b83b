"""`Mnemo`: the archive and the retrieval index as one consistent system.

Writes go to the archive (SQL) with outbox rows in the same transaction; by default the
indexer applies them right after the commit (`sync()`), so a call returns with the index and
caches up to date. If that step fails, the write still stands and the outbox keeps the work
for the next `sync()`; search hydrates every hit from the archive and drops any whose record
is no longer there or no longer current, so a lagging index never shows deleted text.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, NamedTuple, ParamSpec, TypeVar

from mnemo_sea.archive import (
    DEFAULT_AROUND,
    Archive,
    DeletionReceipt,
    EvidenceInput,
    EvidenceRecord,
    InvalidInput,
    Principal,
    Role,
    StoreUnavailable,
    ToolResult,
)
from mnemo_sea.archive.features.evidence import EvidenceBatch
from mnemo_sea.archive.hits import HydratedHit
from mnemo_sea.archive.rules.checks import aware
from mnemo_sea.archive.rules.clock import utcnow
from mnemo_sea.archive.rules.operations import check_caps
from mnemo_sea.archive.rules.records import ORIGINAL_KIND, SEARCH_KINDS
from mnemo_sea.archive.rules.refs import ResultIndexId, memory_index_id, version_ref
from mnemo_sea.archive.storage.outbox import Lane, SoleDrainer, claim_sole_drainer
from mnemo_sea.context import AssembledContext, BpeCounter, CachedCounter, TokenCounter
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS, assemble
from mnemo_sea.context.gather import check_instructions, gather, tool_texts
from mnemo_sea.context.material import EvidenceItem
from mnemo_sea.curation.policy import CurationPolicy
from mnemo_sea.errors import MnemoError
from mnemo_sea.retrieval import (
    AccessScope,
    Embedder,
    Hit,
    HybridIndex,
    RetrievalError,
    SearchMode,
    SearchQuery,
    SearchStatus,
)
from mnemo_sea.retrieval.filters import evidence_filter
from mnemo_sea.system import curating
from mnemo_sea.system.caches import Cache, MemoryCache, RedisCache, search_query_key
from mnemo_sea.system.citations import Citation, CitationReport, check_citations
from mnemo_sea.system.curating import CurationReport, RecallResult
from mnemo_sea.system.ingest_progress import IngestProgress, ProgressCallback
from mnemo_sea.system.operations import CheckCitationsOp, ContextOp, CurateOp, GetResultOp, RecallOp, SearchOp
from mnemo_sea.system.projection.indexer import (
    AppliedRow,
    DrainReport,
    GroupCommit,
    Indexer,
    IndexingStep,
    OnApplied,
)
from mnemo_sea.system.results import DeletionCheck, IngestReport, SearchHit, SearchResult, SearchResultStatus
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE, INDEX_DIR
from mnemo_sea.system.wiring.settings import MnemoSettings, settings_receipt_key

log = logging.getLogger(__name__)


# The layout of a cached Pointer: 1 was a JSON object per hit; 2 named an original's page
# kind tool_result; 3 had no leg scores.
POINTER_FORMAT = 4
_ORIGINALS_FOR_AGENTS = "archived originals are searched by principals with the agent role only"


@functools.lru_cache(maxsize=4096)
def _access_scope(principal: Principal) -> AccessScope:
    """The index's pre-filters for `principal`: its tenant and clearance, and its own records
    only unless it acts for any owner. Kept per principal (both are immutable): validating the
    scope anew cost every search as much as its own cache lookup."""
    owners = None if principal.has(Role.AGENT) else frozenset({principal.subject})
    return AccessScope(principal.tenant_id, clearance=int(principal.clearance), owners=owners)


def _narrowing(values: Iterable[str] | None) -> frozenset[str] | None:
    """A filter's values as the index takes them. A bare string is passed as it is, for the
    query to refuse (`frozenset("alice")` would be a filter on five letters)."""
    if values is None or isinstance(values, str):
        return values  # type: ignore[return-value]
    return frozenset(values)


class Pointer(NamedTuple):
    """The index's `Hit` as the search cache keeps it: the fields a search answer needs from
    the index (the archive's `PointsToHit` and what `SearchHit` shows of scores and ranks),
    without text, hydrated on every use, fresh or cached.

    Not one more hit shape but the cache's row: a cached answer is read back without the index,
    and a `Hit` cannot be rebuilt from it (no point id, chunk, owner, sensitivity or status,
    which the facade never shows), so both paths hydrate this. A tuple, cached as a JSON array
    of its fields in this order (`POINTER_FORMAT` is part of every search's cache key, so a
    changed layout never reads an entry of the old one): each search builds ten of these and
    encodes them, and a tuple is built and encoded several times faster than a frozen
    dataclass of eleven fields and its dict."""

    evidence_id: str
    version: int
    kind: str
    source: str
    scope: str
    start: int
    end: int
    content_sha256: str
    score: float
    bm25_rank: int | None
    dense_rank: int | None
    bm25_score: float | None
    dense_score: float | None
    relevance: float | None

    @classmethod
    def from_hit(cls, hit: Hit) -> Pointer:
        return cls(
            hit.evidence_id,
            hit.version,
            hit.kind,
            hit.source,
            hit.scope,
            hit.start,
            hit.end,
            hit.content_sha256,
            hit.score,
            hit.bm25.rank if hit.bm25 else None,
            hit.dense.rank if hit.dense else None,
            hit.bm25.score if hit.bm25 else None,
            hit.dense.score if hit.dense else None,
            hit.relevance,
        )

    def hydrated(self, text: HydratedHit) -> SearchHit:
        return SearchHit.built(
            self.evidence_id,
            self.version,
            self.kind,
            self.source,
            self.scope,
            text.locator,
            text.snippet,
            self.score,
            self.bm25_rank,
            self.dense_rank,
            (self.start, self.end),
            text.label,
            text.lines,
            text.byte_range,
            self.bm25_score,
            self.dense_score,
            self.relevance,
            text.metadata,
        )


class _IngestWatch:
    """The indexer's `on_applied` for one `Mnemo.ingest` call: turns its rows and embedding steps
    into `IngestProgress` events. Reports the stored batch at once.

    Only this call's own upserts count as indexed (a sync also applies rows other writes left
    pending), so `indexed` never passes `documents`; a row reported twice (a batch applied
    again row by row) counts once.
    """

    def __init__(
        self, stored: Sequence[EvidenceRecord], started: datetime, progress: ProgressCallback
    ) -> None:
        self.progress = progress
        self.documents = len(stored)
        self.waiting = {version_ref(r.evidence_id, r.version) for r in stored if r.recorded_at >= started}
        self.indexed = self.documents - len(self.waiting)
        self.chunks: int | None = None
        self.embedded = 0
        self.report()

    def report(self) -> None:
        self.progress(
            IngestProgress(self.documents, self.documents, self.indexed, self.embedded, self.chunks)
        )

    def __call__(self, event: AppliedRow | IndexingStep) -> None:
        if isinstance(event, AppliedRow):
            if self._indexed(event):
                self.report()
            return
        self.chunks = (self.chunks or 0) + event.planned
        self.embedded += event.embedded
        # One event per document indexed (the first carries the step's chunks too), or one for
        # the chunks alone when the step finished none.
        finished = 0
        for row in event.applied:
            if self._indexed(row):
                finished += 1
                self.report()
        if not finished:
            self.report()

    def _indexed(self, row: AppliedRow) -> bool:
        if row.entity != "evidence" or row.op != "index_upsert" or row.entity_ref not in self.waiting:
            return False
        self.waiting.discard(row.entity_ref)
        self.indexed += 1
        return True

    def finish(self) -> None:
        """After the drain: a call indexed without embedding anything says so (`chunks` 0)."""
        if self.chunks is None and not self.waiting:
            self.chunks = 0
            self.report()


if TYPE_CHECKING:
    from mnemo_sea.system.acting import MnemoAs


P = ParamSpec("P")
R = TypeVar("R")


def _archive_call(method: Callable[Concatenate[Archive, P], R]) -> Callable[Concatenate[Mnemo, P], R]:
    """`Mnemo.<name>` as `Archive.<name>` of its archive: the same parameters and types (those
    of the operation's record) and the same docstring, written once. The method is looked up at
    each call, so an archive's own (or a patched) method is the one called."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: Mnemo, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[P, R] = getattr(self.archive, name)
        return run(*args, **kwargs)

    call.__module__, call.__qualname__ = __name__, f"Mnemo.{name}"
    return call


def _archive_write(
    method: Callable[Concatenate[Archive, P], R], *, trails: bool = False
) -> Callable[Concatenate[Mnemo, P], R]:
    """`_archive_call` of a write whose outbox rows change the index or the caches: they are
    applied after the commit (`Mnemo._after_write`); with `trails`, it also leaves rows to the
    indexer's trail (an archive's pages of originals), which is started."""
    archived = _archive_call(method)

    @functools.wraps(method)
    def call(self: Mnemo, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not trails:
            out = archived(self, *args, **kwargs)
        else:
            with self.indexer.filling_trail():  # from before the commit: no search misses it
                out = archived(self, *args, **kwargs)
        self._after_write(trail=trails)
        return out

    call.__module__, call.__qualname__ = __name__, archived.__qualname__
    call.__doc__ = f"{inspect.getdoc(method) or ''}\n\nThen the index and caches are brought up to date."
    return call


class Mnemo:
    """The system users call. Every method takes the calling principal first."""

    def __init__(
        self,
        archive: Archive,
        index: HybridIndex,
        cache: Cache,
        *,
        sync_writes: bool = True,
        token_counter: TokenCounter | None = None,
        group_commit: GroupCommit | None = None,
    ) -> None:
        """`group_commit`: when deferred index flushes come (mnemo_sea/system/projection/indexer.py); the
        default is 8,008 rows (eight ingest batches of the largest) or 1 s of the monotonic clock,
        the timer a thread."""
        self.archive = archive
        self.index = index
        self.cache = cache
        self.indexer = Indexer(archive.store, index, cache, group_commit=group_commit)
        self.sync_writes = sync_writes
        self._token_counter = token_counter
        self._sole_drainer: SoleDrainer | None = None  # see from_settings

    @property
    def token_counter(self) -> TokenCounter:
        """What `context` counts with: cl100k_base unless another counter was given, loaded on
        first use (about 0.25 s) and counting each distinct segment once."""
        if self._token_counter is None:
            self._token_counter = CachedCounter(BpeCounter())
        return self._token_counter

    @classmethod
    def open(
        cls, path: str | Path, *, embedder: Embedder | None = None, group_commit: GroupCommit | None = None
    ) -> Mnemo:
        """The embedded default: a SQLite archive and a Qdrant Edge index under one data folder.

        A folder without an archive is initialised: the archive, its deployment key
        (`receipt.key`, audited) and the index are created. An existing archive whose key file
        is gone is refused with ReceiptKeyMissing before anything is written: a new key would
        reject every receipt and anchor signed before (see archive/storage/deployment_key.py).
        """
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        archive = Archive.open(str(folder / ARCHIVE_FILE))  # a lost key: ReceiptKeyMissing here
        try:
            # The key is read now, not at the first deletion: a key file this process cannot
            # read (its permissions) still lets the folder open for reading; deletions then
            # fail closed.
            try:
                archive.store.receipt_key  # noqa: B018
            except StoreUnavailable as e:
                log.warning("deletion receipts unavailable: %s", e)
            index = HybridIndex.open(folder / INDEX_DIR, embedder=embedder)
        except BaseException:
            archive.close()
            raise
        mnemo = cls(archive, index, MemoryCache(), group_commit=group_commit)
        mnemo._replay()
        return mnemo

    @classmethod
    def from_settings(
        cls,
        settings: MnemoSettings | None = None,
        *,
        embedder: Embedder | None = None,
        sync_writes: bool = True,
        group_commit: GroupCommit | None = None,
    ) -> Mnemo:
        """Server mode: the archive on PostgreSQL, the index on a Qdrant server, caches on Redis.

        Instead of a Qdrant server, `index_path` keeps an embedded Qdrant Edge index owned by
        this process (one API process, writes synchronous; a worker cannot open it too).
        Every component is reached before this returns; an unreachable one raises
        StoreUnavailable (CacheUnavailable for Redis, IndexUnavailable for Qdrant) naming it.
        With `sync_writes=False` writes return after the SQL commit and an outbox worker
        (`mnemo_sea.system.worker.run_worker`, `mnemo-sea worker`) applies them.
        """
        cfg = settings or MnemoSettings()
        if cfg.database_url is None:
            raise InvalidInput("settings", "server mode needs MNEMO_DATABASE_URL")
        if (cfg.qdrant_url is None) == (cfg.index_path is None):
            raise InvalidInput(
                "settings",
                "server mode needs one index: MNEMO_QDRANT_URL (a Qdrant server) or MNEMO_INDEX_PATH",
            )
        receipt_key = settings_receipt_key(cfg)
        if receipt_key is None:
            # A key per process would make one API process reject another's receipts.
            raise InvalidInput(
                "settings",
                "server mode needs a deployment key that signs deletion receipts: MNEMO_RECEIPT_KEY "
                "(32+ characters, e.g. `openssl rand -hex 32`) or MNEMO_RECEIPT_KEY_FILE",
            )
        cache: Cache = (
            MemoryCache() if cfg.redis_url is None else RedisCache(cfg.redis_url, prefix=cfg.redis_prefix)
        )
        try:
            cache.ping()
            archive = Archive.open(cfg.database_url, receipt_key=receipt_key)
        except BaseException:
            cache.close()
            raise
        try:
            if cfg.qdrant_url is not None:
                api_key = cfg.qdrant_api_key.get_secret_value() if cfg.qdrant_api_key else None
                index = HybridIndex.connect(
                    cfg.qdrant_url, cfg.qdrant_collection, embedder=embedder, api_key=api_key
                )
            else:
                assert cfg.index_path is not None
                index = HybridIndex.open(cfg.index_path, embedder=embedder)
        except BaseException:
            archive.close()
            cache.close()
            raise
        try:
            # An embedded index makes this process the outbox's only drainer (the group commit
            # relies on it): a second process with an index of its own is refused here.
            sole = claim_sole_drainer(archive.store) if index.owned_by_this_process else None
        except BaseException:
            index.close()
            archive.close()
            cache.close()
            raise
        mnemo = cls(archive, index, cache, sync_writes=sync_writes, group_commit=group_commit)
        mnemo._sole_drainer = sole
        if index.owned_by_this_process and sync_writes:
            # The only process that can apply the outbox to this index: replay what a crash
            # left pending or applied but never flushed, as Mnemo.open does.
            try:
                mnemo._replay()
            except BaseException:
                mnemo.close()
                raise
        return mnemo

    def close(self) -> None:
        """Flush what the group commit holds (its rows become done), then close every store."""
        try:
            self.indexer.close()
            self.index.close()
        finally:
            if self._sole_drainer is not None:
                self._sole_drainer.release()
                self._sole_drainer = None
            self.archive.close()
            self.cache.close()

    def __enter__(self) -> Mnemo:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- consistency -------------------------------------------------------------------------

    def sync(self, *, on_applied: OnApplied | None = None) -> DrainReport:
        """Apply every pending outbox row to the index and caches (idempotent) and flush the
        index, so every row is done, none left to the group commit; `on_applied` is called
        after each row and each embedding step (see `Indexer.drain`)."""
        return self._drain_all(on_applied, defer_flush=False)

    def _replay(self) -> None:
        """At open: apply what a crash left pending or applied but never flushed, except pages
        of archived originals, which are left to the trail (a backlog of them must not hold
        the open for minutes: search says which originals are not yet searchable)."""
        self._drain_all(None, defer_flush=False, lane="writes")
        self.indexer.trail()

    def _drain_all(
        self,
        on_applied: OnApplied | None,
        *,
        defer_flush: bool,
        made: EvidenceBatch | None = None,
        lane: Lane | None = None,
    ) -> DrainReport:
        total = DrainReport(0, 0, 0)
        while True:
            report = self.indexer.drain(on_applied=on_applied, defer_flush=defer_flush, made=made, lane=lane)
            total = DrainReport(
                total.applied + report.applied,
                total.failed + report.failed,
                report.pending,
                total.errors + report.errors,
                report.awaiting_flush,
            )
            if report.applied == 0 or report.pending == 0:
                return total

    def _after_write(
        self,
        on_applied: OnApplied | None = None,
        *,
        defer_flush: bool = True,
        made: EvidenceBatch | None = None,
        trail: bool = False,
    ) -> DrainReport | None:
        """Apply the outbox after a committed write. The write already stands, so a store that
        fails now (index, cache, or the database right after the commit) must not turn it into
        an error: the rows stay pending for the next sync or the worker, and search hydrates
        from the archive meanwhile. The rows are searchable when this returns; the index's
        flush may be left to the group commit (mnemo_sea/system/projection/indexer.py), which marks them
        done within GROUP_COMMIT_SECONDS, at `sync()` or at `close()`; `defer_flush=False`
        flushes before returning. Pages of archived originals are left to the indexer's trail
        (started when `trail`), which indexes them behind the writes; `sync()` applies them too."""
        if not self.sync_writes:
            return None
        try:
            return self._drain_all(on_applied, defer_flush=defer_flush, made=made, lane="writes")
        except MnemoError as e:
            log.warning("outbox left pending after a committed write: %s", e)
            return None
        finally:
            if trail:
                self.indexer.trail()

    # ---- knowledge ---------------------------------------------------------------------------

    def ingest(
        self,
        principal: Principal,
        items: Iterable[EvidenceInput],
        *,
        idempotency_key: str | None = None,
        progress: ProgressCallback | None = None,
        reactivate: bool = False,
    ) -> IngestReport:
        """Store evidence records all or nothing (new versions supersede), then index them.

        Raises InvalidBatch naming every bad item before anything is stored, RetractedContent
        marking every item whose content is a retracted version of its record (a retraction
        stands until the content changes) unless `reactivate`. A retry under the same
        idempotency key stores nothing and reports every record as unchanged. `progress` is
        called once the batch is stored, once the chunks to embed are known, after each
        embedding step and as each record is indexed (see `IngestProgress`).
        """
        started = utcnow()
        batch = self.archive.write_evidence_batch(
            principal, list(items), idempotency_key=idempotency_key, reactivate=reactivate
        )
        # The batch is searchable when the call returns; its flush is left to the group commit as
        # a single write's is (mnemo_sea/system/projection/indexer.py): a batch shares one flush
        # with the calls around it (a flush costs as much as indexing a hundred records), until
        # the rows awaiting it reach GROUP_COMMIT_ROWS or a second has passed (a batch writes an
        # upsert per new version and one cache purge: eight batches of 1,000 records reach it).
        # The indexer takes the versions the write made as committed instead of reading them back.
        return self._ingested(started, batch.records, progress, made=batch)

    def put_evidence(
        self, principal: Principal, item: EvidenceInput, *, idempotency_key: str | None = None
    ) -> IngestReport:
        """`ingest` of one record, failing with that record's own error (e.g. ContentTooLarge)
        rather than a batch's InvalidBatch."""
        started = utcnow()
        stored = self.archive.put_evidence(principal, item, idempotency_key=idempotency_key)
        return self._ingested(started, [stored])

    def _ingested(
        self,
        started: datetime,
        stored: Sequence[EvidenceRecord],
        progress: ProgressCallback | None = None,
        *,
        defer_flush: bool = True,
        made: EvidenceBatch | None = None,
    ) -> IngestReport:
        # An unchanged record comes back as the version that was already current.
        new_versions = sum(1 for rec in stored if rec.recorded_at >= started)
        watch = None if progress is None else _IngestWatch(stored, started, progress)
        report = self._after_write(watch, defer_flush=defer_flush, made=made)
        if watch is not None:
            watch.finish()
        return IngestReport(tuple(stored), new_versions, len(stored) - new_versions, report)

    def retract(
        self, principal: Principal, evidence_id: str, reason: str, *, idempotency_key: str | None = None
    ) -> EvidenceRecord:
        """Withdraw the current version of a record (it stays in history), then drop it from the
        index; StateConflict when it has no active version."""
        record = self.archive.retract(principal, evidence_id, reason, idempotency_key=idempotency_key)
        self._after_write()
        return record

    def search(
        self,
        principal: Principal,
        query: str,
        *,
        limit: int = 10,
        mode: SearchMode | str = SearchMode.HYBRID,
        kinds: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
        sources: Iterable[str] | None = None,
        owners: Iterable[str] | None = None,
        as_of: datetime | None = None,
        min_score: float | None = None,
    ) -> SearchResult:
        """Hybrid search under the principal's tenant, clearance and owner pre-filters.

        Hits come hydrated from the archive with the exact text of their span; a hit whose
        record is gone or not current is dropped (counted in `dropped`). Inputs over their caps
        (mnemo_sea/archive/rules/limits.py) raise InvalidInput before anything is embedded.
        `min_score` is a floor on each hit's `relevance` (its cosine in [-1, 1], raised by a strong
        BM25 match): hits under it are left out before `limit` is counted, except a chunk holding
        every term of the query (retrieval/floor.py); out of [-1, 1], NaN or with mode bm25 the
        answer is `invalid`. `owners` keeps only hits about those people (a memory fact's owner,
        an evidence record's, an archived result's session's), in the index like every filter;
        a reader may name only itself (`forbidden` otherwise).
        """
        check_caps(SearchOp, locals())
        principal.require(Role.READER, "searching")
        when = aware("as_of", as_of)
        asked = None if kinds is None else frozenset(kinds)
        if not principal.may_read_originals():
            # Their pages are left out in the index, so they neither crowd out hits the caller
            # may read nor show in `dropped`; asking for them alone is asking for what it may not read.
            if asked == frozenset({ORIGINAL_KIND}):
                return SearchResult(SearchResultStatus.FORBIDDEN, reason=_ORIGINALS_FOR_AGENTS)
            asked = (frozenset(SEARCH_KINDS) if asked is None else asked) - {ORIGINAL_KIND}
        try:
            scope = _access_scope(principal)
            request = SearchQuery(
                query,
                limit=limit,
                mode=SearchMode(mode),
                kinds=asked,
                scopes=_narrowing(scopes),
                sources=_narrowing(sources),
                owners=_narrowing(owners),
                as_of=when,
                one_hit_per_evidence=True,
                min_score=min_score,
            )
        except ValueError as e:
            return SearchResult(SearchResultStatus.INVALID, reason=str(e))
        except RetrievalError as e:
            return SearchResult(SearchResultStatus.INVALID, reason=str(e))
        key = search_query_key(
            {
                "format": POINTER_FORMAT,
                "subject": principal.subject,
                "clearance": int(principal.clearance),
                "roles": sorted(r.value for r in principal.roles),
                "query": repr(request),
            }
        )
        # The cache keeps pointers, never text: a cached answer is hydrated from the archive
        # like a fresh one, so a deletion not yet applied to the caches still cannot leak.
        # The generation is read before searching: a result filed under it is refused if an
        # invalidation came meanwhile.
        generation, cached = self.cache.lookup_search(principal.tenant_id, key)
        if cached is not None:
            pointers = [Pointer(*p) for p in cached["pointers"]]
            reason = str(cached["reason"])
        else:
            outcome = self.index.search(scope, request)
            if outcome.status in (SearchStatus.FORBIDDEN, SearchStatus.UNAVAILABLE):
                return SearchResult(SearchResultStatus(outcome.status), reason=outcome.reason)
            pointers = [Pointer.from_hit(h) for h in outcome.hits]
            reason = outcome.reason
            self.cache.put_search(
                principal.tenant_id,
                generation,
                key,
                {"reason": reason, "pointers": pointers},  # tuples: JSON arrays
            )
        hits, dropped = self._hydrate(principal, pointers, when)
        status = SearchResultStatus.RESULTS if hits else SearchResultStatus.NO_MATCH
        # Originals whose pages the trail has not indexed yet are not found by their text: say so.
        # Asked of the archive only when the trail may be behind: an embedded index's only drainer
        # knows (Indexer.trail_may_be_pending); over a server, other processes archive too.
        searched_results = request.kinds is None or ORIGINAL_KIND in request.kinds
        behind = self.indexer.trail_may_be_pending or not self.index.owned_by_this_process
        waiting = self.archive.pending_originals(principal) if searched_results and behind else 0
        return SearchResult(
            status=status,
            hits=tuple(hits),
            reason=reason,
            dropped=dropped,
            cached=cached is not None,
            pending_originals=waiting,
        )

    def _hydrate(
        self, principal: Principal, hits: Sequence[Pointer], as_of: datetime | None
    ) -> tuple[list[SearchHit], int]:
        """The hits the caller may read at `as_of` (None: now), with their text; the rest count as dropped.
        One access-checked, batched archive read (archive/hits.py): the index's own filters
        are not trusted to decide what the caller sees."""
        read = self.archive.read_hits(principal, hits, as_of)  # a Pointer is a PointsToHit, passed as is
        out = [hit.hydrated(text) for hit, text in zip(hits, read, strict=True) if text is not None]
        return out, len(hits) - len(out)

    # ---- sessions ----------------------------------------------------------------------------
    # The archive's operations as they are: their parameters are the records' fields
    # (mnemo_sea/archive/rules/operations.py), declared once, on `Archive`. A result is indexed only
    # once it is archived with a note, so recording needs no sync.

    record = _archive_call(Archive.record)
    archive_results = _archive_write(Archive.archive_results, trails=True)
    live_view = _archive_call(Archive.live_view)
    recover = _archive_call(Archive.recover)

    def as_(self, principal: Principal) -> MnemoAs:
        """This facade acting as `principal`: every method that takes the principal first,
        without it (`mnemo.as_(agent).search("refund")`), as the REST client reads."""
        from mnemo_sea.system.acting import MnemoAs

        return MnemoAs(self, principal)

    # Reads, named and typed as the REST client's are, so code moves between the two unchanged.
    list_sessions = _archive_call(Archive.list_sessions)
    list_results = _archive_call(Archive.list_results)
    session_info = _archive_call(Archive.session_info)
    get_evidence = _archive_call(Archive.get_evidence)
    evidence_history = _archive_call(Archive.evidence_history)
    get_summary = _archive_call(Archive.get_summary)
    # Listings a person (the console) or a program (the REST client, the integrations) pages through.
    list_evidence = _archive_call(Archive.list_evidence)
    list_summaries = _archive_call(Archive.list_summaries)
    list_memory_owners = _archive_call(Archive.list_memory_owners)
    facts = _archive_call(Archive.facts)

    def get_result(
        self, principal: Principal, session_id: str, result_id: str, *, with_content: bool = False
    ) -> tuple[ToolResult, bytes | None]:
        """One result of a session, and with `with_content` what it shows (the hash-verified
        original, an excerpt copy's excerpt), changing nothing: `recover` is the operation that
        appends a copy to the session; this one only looks. Raises NotFound, Forbidden (another
        owner's session for a reader, above the clearance, or an archived original asked by a
        principal who may not recover it; audited as every refusal) and IntegrityFailure."""
        check_caps(GetResultOp, locals())
        return self.archive.get_result(principal, session_id, result_id, with_content=with_content)

    def curate(
        self,
        principal: Principal,
        session_id: str,
        *,
        budget_tokens: int = CurationPolicy.budget_tokens,
        large_result_tokens: int = CurationPolicy.large_result_tokens,
        keep_recent: int = CurationPolicy.keep_recent,
        need: str | None = None,
        around: int = DEFAULT_AROUND,
        idempotency_key: str | None = None,
    ) -> CurationReport:
        """Apply the automatic policy to the session (mnemo_sea/curation/policy.py): archive, in
        one batch, each live result of at least `large_result_tokens` that `keep_recent` newer
        results followed, and, while the results it may set aside exceed `budget_tokens`, the
        oldest (of 500 tokens or more first) until they fit in half of it; each with its
        automatic note (curation/notes.py). Protected classes, results above the caller's
        clearance and the newest `keep_recent` stay; a recovered copy that the task state does
        not cite yet stays through the size trigger and goes last for the budget.
        With `need` (what the next step needs, in words), `recall` runs first, so the excerpt
        that holds it is in view and, being newest, stays (`report.recall`): one call per turn
        is the whole policy. Deterministic, no model. Raises InvalidInput (a parameter out of
        range), Forbidden (not an agent), NotFound, and the archive's errors (ArchiveConflict
        when another caller archived one of them first: nothing was archived, curate again)."""
        check_caps(CurateOp, locals())
        policy = CurationPolicy(budget_tokens, large_result_tokens, keep_recent)
        recalled = None
        keep: frozenset[str] = frozenset()
        if need is not None:
            key = curating.part_key(idempotency_key, "recall")
            recalled = curating.recall(self, principal, session_id, need, around, key)
            if recalled.recovered is not None:
                keep = frozenset({recalled.recovered.appended.result_id})  # what it just brought stays
        report = curating.curate(self, principal, session_id, policy, idempotency_key, keep)
        return dataclasses.replace(report, recall=recalled)

    def recall(
        self,
        principal: Principal,
        session_id: str,
        query: str,
        *,
        around: int = DEFAULT_AROUND,
        idempotency_key: str | None = None,
    ) -> RecallResult:
        """Find what a need phrased as `query` asks for among the session's results and bring
        back the excerpt that holds it (mnemo_sea/system/curating.py): `in_view` when a live
        result holds it already, `recovered` with the excerpt (a short original whole, else the
        `2 * around + 1` lines that carry most of the need; lines far apart that hold it
        alike, all of them, up to 32 KiB) appended to the session, `ambiguous` when such lines
        span more (where they are, nothing appended), `not_found` with every result checked
        (never a guess). Raises InvalidInput (a query with no word to look for), Forbidden,
        NotFound."""
        check_caps(RecallOp, locals())
        return curating.recall(self, principal, session_id, query, around, idempotency_key)

    def context(
        self,
        principal: Principal,
        session_id: str,
        *,
        budget_tokens: int,
        output_reserve: int | None = None,
        instructions: str = "",
        tools: Sequence[Mapping[str, Any] | str] | None = None,
        query: str | None = None,
        evidence_limit: int = 8,
        kinds: Iterable[str] | None = None,
        candidate_min_tokens: int = DEFAULT_CANDIDATE_MIN_TOKENS,
    ) -> AssembledContext:
        """The session's working context for this turn under `budget_tokens` (B = I + T + H + E + O).

        In order: instructions, tool definitions, the task state's constraints, its goal and
        confirmed state, the session's results (live envelopes, archived stubs in place,
        recovered copies), then evidence retrieved for `query` (hybrid search, hydrated). Pinned
        segments are never cut; the rest fits by priority and what is left out is listed with
        the reason (see mnemo_sea/context/assembler.py). `output_reserve` defaults to 4,096
        tokens or a quarter of the budget, whichever is smaller. Reads only: nothing is archived.

        Raises InvalidInput (bad budget, instructions or tools), ContextOverBudget (the pinned
        part alone exceeds the budget), NotFound/Forbidden as `live_view`, and the search's
        errors (IndexUnavailable) when a query is given and the search cannot run. Inputs over
        their caps (mnemo_sea/archive/rules/limits.py: tool definitions, instructions...) raise
        InvalidInput naming the field and the limit before anything is rendered or counted.
        """
        check_caps(ContextOp, locals())
        if output_reserve is None:
            output_reserve = min(4096, budget_tokens // 4) if isinstance(budget_tokens, int) else 0
        check_instructions(instructions)
        definitions = tool_texts(tools)
        evidence: list[EvidenceItem] = []
        if query is not None:
            found = self.search(principal, query, limit=evidence_limit, kinds=kinds).raise_for_status()
            evidence = [
                EvidenceItem(
                    h.evidence_id,
                    h.version,
                    h.kind,
                    h.source,
                    h.scope,
                    h.locator,
                    h.snippet,
                    h.label,
                    h.score,
                    rank,
                )
                for rank, h in enumerate(found.hits, start=1)
            ]
        material = gather(
            self.archive,
            principal,
            session_id,
            instructions=instructions,
            tools=definitions,
            evidence=evidence,
        )
        return assemble(
            material,
            budget_tokens=budget_tokens,
            output_reserve=output_reserve,
            counter=self.token_counter,
            candidate_min_tokens=candidate_min_tokens,
        )

    # ---- memory ------------------------------------------------------------------------------

    remember = _archive_write(Archive.remember)
    current = _archive_call(Archive.current)
    memory_history = _archive_call(Archive.memory_history)
    forget = _archive_write(Archive.forget)

    def purge_expired(self, principal: Principal) -> DeletionReceipt | None:
        """Delete the tenant's expired memory versions now (admin); None when none had expired."""
        receipt = self.archive.purge_expired(principal)
        if receipt is not None:
            self._after_write()
        return receipt

    def purge_expired_everywhere(self) -> list[DeletionReceipt]:
        """The worker's scheduled purge, over every tenant (no principal: it is the deployment's
        own housekeeping, audited in each tenant as the purge's system subject)."""
        try:
            return self.archive.purge_expired_everywhere()
        finally:  # what was purged before a tenant failed is committed: apply it either way
            self._after_write()

    # ---- summaries ---------------------------------------------------------------------------

    create_summary = _archive_write(Archive.create_summary)

    # ---- task state (derived, never indexed: nothing to sync) --------------------------------

    update_task_state = _archive_call(Archive.update_task_state)
    task_state = _archive_call(Archive.task_state)
    task_state_history = _archive_call(Archive.task_state_history)

    # ---- deletion ----------------------------------------------------------------------------

    delete_evidence = _archive_write(Archive.delete_evidence)
    delete_session = _archive_write(Archive.delete_session)
    delete_owner = _archive_write(Archive.delete_owner)

    def compact_index(self) -> int:
        """Apply pending rows, then rewrite the embedded index with its live points only, so no
        byte of a deleted point stays in its files (deletions do it by themselves only once
        enough points were deleted: see mnemo_sea/system/projection/indexer.py); returns the
        points kept. Over a Qdrant server it does nothing and returns 0 (the server vacuums by
        itself)."""
        self.sync()
        return self.index.compact()

    def verify_deleted(self, principal: Principal, receipt: DeletionReceipt) -> DeletionCheck:
        """Check every store: archive rows and (SQLite) its write-ahead log, index points of each
        deleted id, pending outbox rows."""
        archive = self.archive.check_deleted(principal, receipt)
        tenant = principal.tenant_id
        pending = len(self.archive.pending_outbox_ids(tenant) & set(receipt.outbox_ids))
        # Evidence and memory points are counted per deleted version: a purge may delete some
        # versions of a fact and keep the rest, whose points are not leftovers.
        points: list[tuple[str, int | None]] = list(receipt.evidence_versions)
        points += [(memory_index_id(owner, key), v) for owner, key, v in receipt.memory_facts]
        points += [(str(ResultIndexId.of_ref(ref)), None) for ref in receipt.tool_results]
        points += [(summary_id, None) for summary_id in receipt.summaries]
        index_left = sorted(
            {i for i, v in points if self.index.count_matching(evidence_filter(tenant, i, v)) > 0}
        )
        return DeletionCheck(
            receipt, archive.leftovers, tuple(index_left), pending, archive.erasure, archive.erasure_detail
        )

    # ---- citations ---------------------------------------------------------------------------

    def check_citations(
        self,
        principal: Principal,
        citations: Sequence[Citation | Mapping[str, Any]],
        *,
        answered_at: datetime | None = None,
    ) -> CitationReport:
        check_caps(CheckCitationsOp, locals())
        return check_citations(self.archive, principal, citations, answered_at=answered_at)


__all__ = [
    "DeletionCheck",
    "IngestProgress",
    "IngestReport",
    "Mnemo",
    "ProgressCallback",
    "SearchHit",
    "SearchResult",
    "SearchResultStatus",
]
