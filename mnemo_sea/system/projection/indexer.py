"""The indexer: applies outbox rows to the search index and the caches, then marks them done.

Every write commits to SQL first, with its outbox rows in the same transaction; this is the
other half. Applying a row twice is harmless (point ids are deterministic, deletes of
nothing are no-ops, generation bumps only invalidate), so a crash between applying and
marking done only means a replay. A row whose target no longer exists in the archive
(deleted since) is done: the later delete row removes whatever was indexed.

Group commit (wherever this process is the only drainer: a SQLite archive, or an embedded
index, which one process owns, over either archive): an index flush costs tens to hundreds of
milliseconds, so a write's rows are applied (visible to searches at once) and marked
`applied_at`, and the flush that makes them done is deferred until GROUP_COMMIT_ROWS rows await
it, GROUP_COMMIT_SECONDS passed (a timer), `Mnemo.sync()` or `close()`. Both bounds, the clock
that measures the wait and the timer that ends it are a `GroupCommit`, given at construction
(`Mnemo(group_commit=)`): a test passes a clock and timers it moves itself, so no flush comes
because the machine happened to be slow. A pass that deletes is
never deferred: it flushes (and compacts) before it returns, with every row awaiting. A row is
marked done only after the flush that made its effect durable: a crash before leaves it not
done, and the next open (`reclaim_applied`) applies it again. What a SIGKILL leaves at each
point is in docs/architecture.md ("What survives a kill -9").

Versions a write of this process made (`EvidenceBatch.made`, handed to `drain(made=)` by
`Mnemo.ingest` after the commit) are not read back for their index_upsert rows: they are what
the archive committed, and any later change to such a version (superseded, retracted, deleted)
writes outbox rows of its own after the upsert's, which are applied after it, re-reading the
archive (an index_status row always re-reads it, as do rows of other writers and every replay).
So the index ends as it would have, and the only window is the one every pass already has
between its archive read and its index write: a change committed meanwhile is applied by the
pass that claims its rows. A deletion committed before the claim leaves nothing to use, since it
marks the version's pending index_upsert done; a version stored again after it under the same
ref is another write's row, above the handing write's `EvidenceBatch.last_outbox_id`, so it is
read back. A handed-over version is checked once (`evidence_document(made_here=True)`): the
archive validated it moments ago under the index's rules or stricter.

On PostgreSQL with a Qdrant server several drainers may run at once (API processes, workers):
rows are claimed with `FOR UPDATE SKIP LOCKED` inside the transaction that marks them done, and
each pass flushes (a no-op over a server, which acknowledges writes durably). With one drainer
(a SQLite archive, or an embedded index on either archive: Edge admits one opening process),
rows are read, applied, then marked, so no lock is held while text is being embedded, and the
group commit applies, and the rows are read with one statement outside a transaction
(`outbox.pending_rows`). Every drainer counts the rows left after a pass so (`outbox.pending_total`).

The trail: pages of archived originals (archive/rules/original_pages.py) are indexed behind the
writes, not by them. A 2 MB original is about a thousand chunks, seconds of the real model; an
agent's `archive` call waits for its note only. A write's drain takes the `writes` lane (every
row but those pages); `trail()` then starts a thread (`GroupCommit.start_trail`, so a test
runs it when it chooses) that applies the `trailing` lane in passes of up to TRAIL_PASS_PAGES
pages, handed to the index TRAIL_PAGES_PER_CALL at a time and embedded one by one; once another
drain waits, the pass writes what it embedded and ends after the page under way, so a write
arriving meanwhile waits for one page's embedding (and the writing of a call's points, or the
planning of its pages) at most. `sync()`, the worker and fsck drain both lanes. Until its pages
are applied, a search says how many originals it could not search yet
(`SearchResult.pending_originals`).
A pass pays its bookkeeping once for its pages (`_apply_pages`): one read of the notes, one
read after the last page, one cache generation bump per tenant.
The trail's rows are not under GROUP_COMMIT_SECONDS: that bound is for the writes, whose rows
an agent just committed. A page applied but not flushed is not lost by a crash either (it is
reclaimed and the next open's trail applies it again), so the trail flushes at the end of
its round, or once TRAIL_FLUSH_PAGES of its rows await (the replay a crash may cost), or with
the writes' rows when those flush (a timer armed by a write, the row bound, `sync()`, `close()`).
The pass that goes through the last rows of its lane flushes and marks them done at once, rather
than mark them applied for the round's end to mark them done (unless a drain waits by then).
A deletion marks its result's pending pages done and removes every version of the result's
index id, pages included; a page applied by a pass that read the original just before the
deletion committed is removed by the deletion's own row, applied after that pass.

Deleted points: the embedded index (Qdrant Edge) only tombstones them, their bytes stay in its
files until `HybridIndex.compact()` rewrites the shard. By default a pass that deleted points
compacts (`COMPACT_AFTER_DELETED = 1`): a deletion's promise is that nothing of it stays in any
file, and deletions are rare. That costs a full copy of the shard (about 0.7 s for a small
index, 2.5 s at 10,000 points, more if HNSW graphs are rebuilt; measured), during which
searches wait; a deployment with a large embedded index may raise `compact_after_deleted` and
run `Mnemo.compact_index()` / `mnemo-sea fsck --compact` on its own schedule instead. A Qdrant
server vacuums by itself (its compact() does nothing).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Connection

from mnemo_sea.archive import (
    EvidenceRecord,
    StoreUnavailable,
)
from mnemo_sea.archive.internal_reads import InternalReads
from mnemo_sea.archive.rules.limits import BATCH_ITEMS
from mnemo_sea.archive.rules.original_pages import parse_page_ref
from mnemo_sea.archive.rules.refs import ResultIndexId, memory_index_id, parse_version_ref
from mnemo_sea.archive.storage.outbox import (
    Lane,
    OutboxItem,
    awaiting_flush_count,
    claim_pending,
    mark_applied,
    mark_done,
    mark_failed,
    pending_rows,
    pending_total,
    reclaim_applied,
    retry_set_aside,
)
from mnemo_sea.archive.storage.rows import ArchivedNote
from mnemo_sea.archive.storage.sources import source_owner
from mnemo_sea.archive.storage.store import ArchiveStore
from mnemo_sea.errors import MnemoError
from mnemo_sea.retrieval import EvidenceDocument, HybridIndex, IndexUnavailable, RetrievalError
from mnemo_sea.system.caches import Cache
from mnemo_sea.system.projection.index_documents import (
    evidence_document,
    memory_document,
    note_document,
    page_document,
    summary_document,
)

if TYPE_CHECKING:
    from mnemo_sea.archive.features.evidence import EvidenceBatch
    from mnemo_sea.retrieval import UpsertProgress

log = logging.getLogger(__name__)

# Deleted index points after which a drain pass compacts the embedded index (see the docstring).
COMPACT_AFTER_DELETED = 1
# Outbox rows one drain pass applies: an ingest batch of 1,000 records (the archive's largest)
# writes up to 2,001 (an upsert each, a status change for each it supersedes, one cache purge),
# so one pass and one index flush cover it.
DRAIN_LIMIT = 2_001
# Group commit (see the docstring): rows applied but not flushed that force the flush (at the end
# of the pass that reaches them), and the longest a row waits for it. The timer is the bound that
# matters: the rows wait at most a second, so the replay after a kill -9 stays about a second of
# writing. The row bound only caps that for the fastest writers: eight ingest batches of the
# archive's largest (1,000 records, 1,001 rows each), a little over a second of ingest with no
# model in the loop (the engine loads 5,000-7,500 documents a second on this project's
# machine). It is checked once a pass has applied its rows, so the replay stays below it plus
# one pass (DRAIN_LIMIT).
# A flush has a fixed cost (tens of milliseconds) besides what it carries: the engine's 6,000
# documents took 1.11 s flushing per batch of 1,000 and 0.98 s flushing once (`mnemo-sea bench
# mnemo-ingest --sweep`, docs/figures.md); with a bound of two such batches, `Mnemo.ingest` of
# the same batches flushed three times where the timer asks for one or two.
GROUP_COMMIT_ROWS = 8 * (BATCH_ITEMS + 1)
GROUP_COMMIT_SECONDS = 1.0
# Pages of originals a pass of the worker applies between its passes over the writes (the
# worker cannot see a write waiting in another process, so it takes one page at a time).
TRAIL_ROWS = 1
# Pages of originals one pass of the in-process trail may take. It embeds them one by one and
# ends after the page under way once another drain waits for the indexer (`Indexer._waiting`),
# so a write still waits for one page's embedding at most (plus a call's planning or writing,
# see TRAIL_PAGES_PER_CALL); a trail with the indexer to itself pays a pass's bookkeeping (its
# outbox reads, the write marking its rows) once per TRAIL_PASS_PAGES pages.
TRAIL_PASS_PAGES = 16
# Pages the trail hands the index per call (`HybridIndex.upsert(stop=)`): chunked and compared
# with the index together, embedded one by one, their points written back to back once the
# embedding stops. A call per page spent about 7 % of a large original's indexing on calling
# again; more pages a call gain more, but a write arriving meanwhile waits, besides the page
# being embedded, for the planning of the call's pages or the writing of their points, and
# writes beside the trail slowed as calls grew (docs/figures.md, issue 31's eighth round).
TRAIL_PAGES_PER_CALL = 4
# Pages of originals applied but not flushed after which the trail flushes (see the module
# docstring: the trail's rows are not under GROUP_COMMIT_SECONDS). A crash re-embeds at most
# these behind the next open: 64 pages are 2 MB of originals, about 1,100 chunks.
TRAIL_FLUSH_PAGES = 64


# A page of an original as a pass holds it: its tenant, its result, and its document (None when
# there is nothing to index, see `Indexer._page_documents`).
_Page = tuple[str, ResultIndexId, EvidenceDocument | None]


class FlushTimer(Protocol):
    """A started timer of the group commit; cancelled when the rows were flushed before it ran."""

    def cancel(self) -> None: ...


# Starts a timer that calls the action (once, on a thread of its own) after that many seconds.
StartTimer = Callable[[float, Callable[[], None]], FlushTimer]
# Starts the trail (see the module docstring): runs the action once, on a thread of its own.
StartTrail = Callable[[Callable[[], None]], None]


def thread_timer(seconds: float, action: Callable[[], None]) -> FlushTimer:
    """The real timer: a daemon thread, since the process may end without close() (the next
    open replays what was not flushed)."""
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.name = "mnemo-group-commit"
    timer.start()
    return timer


def thread_trail(action: Callable[[], None]) -> None:
    """The real trail: a daemon thread (what it leaves undone, the next open or sync applies)."""
    threading.Thread(target=action, name="mnemo-trail", daemon=True).start()


@dataclass(frozen=True)
class GroupCommit:
    """When deferred index work runs (see the module docstring): a flush once `rows` rows await
    it, or `seconds` (of `clock`, a monotonic clock) after the oldest of them was applied, by a
    timer `start_timer` starts, or by the next write once the clock says so; and the trail,
    on what `start_trail` starts (None: a thread, `thread_trail`). A test gives both starters
    of its own, to run them itself."""

    rows: int = GROUP_COMMIT_ROWS
    seconds: float = GROUP_COMMIT_SECONDS
    clock: Callable[[], float] = time.monotonic
    start_timer: StartTimer = thread_timer
    start_trail: StartTrail | None = None


@dataclass(frozen=True)
class DrainReport:
    applied: int
    failed: int
    pending: int  # rows not yet applied
    errors: tuple[str, ...] = ()
    awaiting_flush: int = 0  # rows applied (searchable), waiting for the group-commit flush
    last_claimed: int = 0  # the highest row id this pass went through (0: none)
    outage: bool = False  # a failure was a store out of reach, not a problem of its row


@dataclass(frozen=True)
class AppliedRow:
    """One outbox row applied, for progress reports (`Indexer.drain(on_applied=)`). An evidence
    upsert is reported as soon as its document's chunks are all written, inside its batch's
    index upsert (see `IndexingStep`), other rows once their batch is applied. A row may be
    reported twice: when its batch fails after that, the rows are applied again one by one."""

    op: str
    entity: str
    entity_ref: str  # `evidence_id@version` for evidence


@dataclass(frozen=True)
class IndexingStep:
    """Progress inside one index upsert of evidence (`Indexer.drain(on_applied=)`): first the
    upsert's chunk total, once its documents are chunked and before the model starts
    (`planned`), then one report per embedding step. Counts are increments, so a listener sums
    them over the several upserts a drain may make (a retried batch embeds, and counts, again)."""

    planned: int  # chunks this upsert embeds, reported once, before any of them is embedded
    embedded: int  # chunks embedded and written by this step
    applied: tuple[AppliedRow, ...]  # upsert rows whose document is now completely written


# What `Indexer.drain(on_applied=)` is called with: a row applied, or a step inside an upsert.
OnApplied = Callable[[AppliedRow | IndexingStep], None]


class _ListenerFailed(Exception):
    """What `on_applied` raised inside an index upsert, carried past the indexer's handlers of
    a row's own failure: a listener's bug must not count as the row's (after MAX_ATTEMPTS the row
    would be set aside). `drain` raises the listener's error itself, as it did when the listener
    was called only between rows."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class Failure:
    item_id: int
    error: str
    outage: bool  # a store was unreachable, not a problem of the row itself


class Indexer:
    def __init__(
        self,
        store: ArchiveStore,
        index: HybridIndex,
        cache: Cache,
        *,
        compact_after_deleted: int = COMPACT_AFTER_DELETED,
        group_commit: GroupCommit | None = None,
    ) -> None:
        policy = group_commit or GroupCommit()
        self.store = store
        self.index = index
        self.cache = cache
        self.compact_after_deleted = compact_after_deleted
        self.group_commit_rows = policy.rows
        self.group_commit_seconds = policy.seconds
        self._clock = policy.clock
        self._start_timer = policy.start_timer
        # Looked up now, not when the class was defined: the test suite runs the trail inline.
        self._start_trail = policy.start_trail or thread_trail
        # One drain at a time per process: with one drainer rows are read, not claimed, so two
        # threads could apply an upsert after the delete that follows it. Other processes: on
        # SQLite the embedded index admits one opener; on PostgreSQL a process owning an
        # embedded index holds the sole-drainer lock (outbox.claim_sole_drainer), and over a
        # Qdrant server drainers claim rows with SKIP LOCKED.
        self._draining = threading.Lock()
        # Drains other than the trail's waiting for `_draining`, under `_turns`: the trail ends its
        # pass after the page under way while one waits, and lets it in before its next pass.
        self._waiting = 0
        self._turns = threading.Condition(threading.Lock())
        # Group commit state, under `_draining`: ids applied and marked `applied_at`, not yet
        # flushed; when the oldest of them was applied; the timer that flushes them, and how
        # many were started (a timer that runs after it was replaced or cancelled does nothing).
        self._awaiting: set[int] = set()
        self._awaiting_since: float | None = None  # of the writes' rows only (not the trail's)
        self._trail_awaiting = 0  # of them, rows the trail applied
        self._timer: FlushTimer | None = None
        self._timers_started = 0
        self._reclaimed = False
        self._closed = False
        self._made: EvidenceBatch | None = None  # the write this drain applies, if any (drain(made=))
        # The original the trail cuts pages from: (tenant, sha256, bytes), under `_draining`.
        self._kept_original: tuple[str, str, bytes] | None = None
        # The trail (see the module docstring): whether its thread runs, and how many times it
        # was asked to, so a request arriving as it finishes is not lost.
        self._trail_lock = threading.Lock()
        self._trailing = False
        self._trail_asked = 0
        # Whether the trailing lane may hold rows: set before a write that fills it, cleared by
        # a drain that leaves it empty; unknown (True) until the first such drain. A search asks
        # the archive which originals are not yet searchable only while it is set. A drain
        # clears it only if no such write was under way when it started nor began since (the
        # writes started, and those not yet committed): a write committing while the drain read
        # the lane empty would otherwise leave its pages pending with the flag down.
        self.trail_may_be_pending = True
        self._fills_started = 0
        self._fills_in_flight = 0

    @contextlib.contextmanager
    def filling_trail(self) -> Iterator[None]:
        """Around a write that leaves rows to the trail (see `trail_may_be_pending`)."""
        with self._trail_lock:
            self._fills_started += 1
            self._fills_in_flight += 1
            self.trail_may_be_pending = True
        try:
            yield
        finally:
            with self._trail_lock:
                self._fills_in_flight -= 1

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """`_draining`, for a drain the trail makes way for (see `TRAIL_PASS_PAGES`)."""
        with self._turns:
            self._waiting += 1
            self._turns.notify_all()
        try:
            self._draining.acquire()
        finally:
            with self._turns:
                self._waiting -= 1
                self._turns.notify_all()
        try:
            yield
        finally:
            self._draining.release()

    def _let_waiting_drains_in(self) -> None:
        """Before a pass of the trail: wait until no other drain waits for `_draining` (each has
        taken it), so the trail, which just let it go, does not take it again first."""
        with self._turns:
            self._turns.wait_for(lambda: self._waiting == 0)

    @property
    def awaiting_flush(self) -> int:
        """Rows this indexer applied whose flush is deferred (not yet done)."""
        return len(self._awaiting)

    def drain(
        self,
        limit: int = DRAIN_LIMIT,
        *,
        on_applied: OnApplied | None = None,
        defer_flush: bool = False,
        made: EvidenceBatch | None = None,
        lane: Lane | None = None,
        after: int = 0,
    ) -> DrainReport:
        """Apply up to `limit` pending rows, oldest first, of one lane or all (`lane=None`),
        from the first after row id `after`; failures stay pending with their error.

        `on_applied` is called after each row is applied to the index (before the pass is
        flushed and marked done) and, inside an upsert of evidence, with its chunk total and
        after each embedding step (`IndexingStep`), so a caller can show progress through a
        long pass. Without it the index embeds each batch in one call.
        With `defer_flush` (one drainer only) the flush may be left to the group commit (see the
        module docstring); without, the pass ends flushed, with every row awaiting done too.
        `made`: a committed write's versions, applied without reading them back (see the module
        docstring).
        """
        with self._draining if lane == "trailing" else self._turn():
            if self._closed and lane == "trailing":
                return DrainReport(0, 0, 0)  # the trail's last pass, after close()
            with self._trail_lock:
                fills = (self._fills_started, self._fills_in_flight)
            self._made = made
            try:
                report = self._drain(limit, on_applied, defer_flush, lane, after)
            except _ListenerFailed as e:
                # The rows stay applied but not done (the pass stopped before marking them): the
                # next pass applies them again.
                raise e.error from None
            finally:
                self._made = None
            if lane != "writes" and report.pending == 0:
                self._kept_original = None  # no page left to cut from it (see `_original`)
                with self._trail_lock:
                    if fills == (self._fills_started, 0):
                        self.trail_may_be_pending = False
            return report

    def trail(self) -> None:
        """Have the trailing lane applied behind the writes (see the module docstring): starts
        its thread unless it runs already, in which case it makes one more round."""
        with self._trail_lock:
            self._trail_asked += 1
            if self._trailing or self._closed:
                return
            self._trailing = True
        try:
            self._start_trail(self._run_trail)
        except Exception as e:  # noqa: BLE001
            # No thread (the process is out of them): the write that asked stands, its pages stay
            # pending for the next write's trail or sync, which must be able to start one.
            with self._trail_lock:
                self._trailing = False
            log.warning("indexing archived originals not started, retried by the next write or sync: %s", e)

    def _run_trail(self) -> None:
        while True:
            with self._trail_lock:
                asked = self._trail_asked
            try:
                # A row that fails is passed over for the rest of the round (its failure is
                # recorded, and the next round tries it again), so one bad page does not hold
                # back every other original; a pass that met an outage or found nothing ends it.
                after = 0
                while not self._closed:
                    self._let_waiting_drains_in()
                    passed = self.drain(TRAIL_PASS_PAGES, defer_flush=True, lane="trailing", after=after)
                    # Nothing pending when the pass ended: no pass is left to find that out (a
                    # page enqueued since asked for a round of its own, see `trail`).
                    if passed.outage or passed.last_claimed == 0 or passed.pending == 0:
                        break
                    # Past every row the pass claimed: those applied are done, a failed one waits
                    # for the next round (restarting from 0 would retry it in this one).
                    after = passed.last_claimed
                # The end of the round flushes what the trail applied (see the module docstring).
                self._let_waiting_drains_in()
                self.settle()
            # A thread of its own: whatever stops it is logged, never lost with the thread.
            except Exception as e:  # noqa: BLE001
                log.warning("indexing archived originals stopped, resumed by the next write or sync: %s", e)
            with self._trail_lock:
                if self._closed or asked == self._trail_asked:
                    self._trailing = False
                    return

    def settle(self) -> int:
        """Flush the index if rows await it and mark them done; returns how many were marked."""
        with self._draining:
            return self._settle()

    def retry_set_aside(self, tenant_id: str | None = None) -> int:
        """Make rows set aside after MAX_ATTEMPTS failures claimable again (fsck --repair, before
        it drains); returns how many."""
        with self.store.write() as conn:
            return retry_set_aside(conn, tenant_id)

    def close(self) -> None:
        """Stop the group-commit timer and settle what awaits it (no drain runs after this).
        A failure is logged: the rows stay applied, not done, and the next open replays them."""
        with self._draining:
            self._closed = True
            self._kept_original = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            try:
                self._settle()
            except MnemoError as e:
                log.warning(
                    "closing with %d outbox rows not flushed (replayed at the next open): %s",
                    len(self._awaiting),
                    e,
                )

    def _drain(
        self, limit: int, on_applied: OnApplied | None, defer_flush: bool, lane: Lane | None, after: int
    ) -> DrainReport:
        if self.store.is_sqlite or self.index.owned_by_this_process:
            if not self._reclaimed:
                # The first pass of this opener: rows an earlier process applied but never
                # flushed may be missing from the index; they become pending again. Read first:
                # an open with none to reclaim writes nothing.
                with self.store.read() as conn:
                    stale = awaiting_flush_count(conn)
                if stale:
                    with self.store.write() as conn:
                        reclaim_applied(conn)
                self._reclaimed = True
            trailing = lane == "trailing"
            claimed = pending_rows(self.store, limit, lane, after)
            done, problems, items = self._apply_all(claimed, on_applied, yields=trailing)
            deleting = any(item.op == "index_delete" for item in items) or self._compaction_due()
            # A set: rows whose flush failed are claimed and applied again by the next pass.
            self._awaiting.update(done)
            if trailing:
                self._trail_awaiting += len(done)
            elif done and self._awaiting_since is None:
                self._awaiting_since = self._clock()
            # The trail's pass that went through the last rows of its lane ends the round (see
            # `_run_trail`), whose end flushes: it settles now, rather than write its rows
            # applied for the round's end to write them done. Not while a drain waits: the
            # flush (tens of milliseconds) is left to the round's end, after that drain. (A flush
            # that fails leaves the pass's rows pending, its failures unrecorded: the next round
            # applies them all again, as after a crash.)
            went_through_all = len(items) == len(claimed)
            lane_emptied = len(claimed) < limit
            ends_round = trailing and went_through_all and lane_emptied and not self._a_drain_waits()
            if not defer_flush or deleting or self._closed or self._flush_due() or ends_round:
                self._settle(problems)
            else:
                if done or problems:
                    with self.store.write() as conn:
                        mark_applied(conn, done)
                        self._record(conn, [], problems)
                self._arm_timer()
        else:
            # Rows are claimed (locked) by this transaction: they are flushed and marked in it.
            with self.store.write() as conn:
                items = claim_pending(conn, limit, lane, after)
                done, problems, items = self._apply_all(items, on_applied, yields=lane == "trailing")
                if done:
                    self.index.flush()
                    self._compact_if_due()
                self._record(conn, done, problems)
        pending = pending_total(self.store, lane)
        errors = tuple(f.error for f in problems[:20])
        return DrainReport(
            applied=len(done),
            failed=len(problems),
            pending=pending,
            errors=errors,
            awaiting_flush=len(self._awaiting),
            last_claimed=max((item.id for item in items), default=0),
            outage=any(f.outage for f in problems),
        )

    def _flush_due(self) -> bool:
        if len(self._awaiting) >= self.group_commit_rows or self._trail_awaiting >= TRAIL_FLUSH_PAGES:
            return True
        since = self._awaiting_since
        return since is not None and self._clock() - since >= self.group_commit_seconds

    def _settle(self, problems: list[Failure] | None = None) -> int:
        """Flush, compact if due, then mark every awaiting row done (and record `problems`)."""
        settled = sorted(self._awaiting)
        if settled:
            self.index.flush()
            self._compact_if_due()
        if settled or problems:
            with self.store.write() as conn:
                self._record(conn, settled, problems or [])
        self._awaiting, self._awaiting_since, self._trail_awaiting = set(), None, 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return len(settled)

    def _arm_timer(self) -> None:
        if self._timer is not None or self._awaiting_since is None or self._closed:
            return  # nothing of the writes awaits: the trail flushes its own rows
        self._timers_started += 1
        started = self._timers_started
        self._timer = self._start_timer(self.group_commit_seconds, lambda: self._on_timer(started))

    def _on_timer(self, started: int) -> None:
        with self._draining:
            if self._timer is None or started != self._timers_started:
                return  # settled (or closed) meanwhile
            self._timer = None
            if self._closed:
                return
            try:
                self._settle()
            except MnemoError as e:
                # The rows stay applied, not done; the next pass (or close, or open) flushes.
                log.warning("group-commit flush failed, retried by the next write or sync: %s", e)

    def _apply_all(
        self, items: list[OutboxItem], on_applied: OnApplied | None = None, *, yields: bool = False
    ) -> tuple[list[int], list[Failure], list[OutboxItem]]:
        """Apply rows in order, without flushing: the caller flushes before any row may be
        marked done. Returns the rows applied, those that failed, and the rows gone through
        (the others stay pending, as if never claimed).

        A run of evidence upserts, status changes and cache purges (what an ingest writes) is
        applied as one batch (see `_apply_run`); any other row, or a run whose batch failed,
        row by row. An outage (index, cache or database unreachable) ends the pass: the rows
        behind would meet the same dead store, and each try would add its timeout to the
        caller's write. With `yields` (the trail) the pass ends before any run but the first
        once another drain waits for the indexer (see `TRAIL_PASS_PAGES`).
        """
        done: list[int] = []
        problems: list[Failure] = []
        went = 0
        for run in _runs(items):
            # Read without `_turns`: a drain that starts waiting just after costs one page more.
            if yields and went and self._a_drain_waits():
                break
            kind = _run_kind(run[0])
            if kind == "pages":
                passed = self._apply_pages(run, yields)
                if passed is not None:
                    went += passed
                    done += [item.id for item in run[:passed]]
                    if on_applied is not None:
                        for item in run[:passed]:
                            on_applied(AppliedRow(item.op, item.entity, item.entity_ref))
                    if passed < len(run):
                        break  # it made way for a waiting drain
                    continue
            reported = self._apply_run(run, on_applied) if len(run) > 1 and kind == "ingest" else None
            if reported is not None:
                went += len(run)
                done += [item.id for item in run]
                if on_applied is not None:
                    for item in run:
                        if item.id not in reported:
                            on_applied(AppliedRow(item.op, item.entity, item.entity_ref))
                continue
            stop = False
            for item in run:
                if yields and went and self._a_drain_waits():
                    stop = True  # the pages of a failed pass, one by one: still a page at most
                    break
                went += 1
                row_reported: set[int] = set()
                failure = self._apply_one(item, on_applied, row_reported)
                if failure is None:
                    done.append(item.id)
                    if on_applied is not None and item.id not in row_reported:
                        on_applied(AppliedRow(item.op, item.entity, item.entity_ref))
                    continue
                problems.append(failure)
                if failure.outage:
                    stop = True
                    break
            if stop:
                break
        return done, problems, items[:went]

    def _apply_run(self, run: list[OutboxItem], on_applied: OnApplied | None) -> set[int] | None:
        """Apply a run of batchable rows (`_BATCHABLE`) at once; the ids of the rows reported to
        `on_applied` already (upserts, as their documents were written), or None when anything
        failed (the caller then applies the run row by row, which names the failing row; what
        the batch applied already is applied again, harmlessly).

        Every evidence version the run names is read in one statement, every upsert goes to the
        index in one call (the embedder sees the whole batch), and the cache is purged once per
        tenant after the index changed. Rows about one version come out as applying them in
        order would: an upsert and a status change both write what the archive holds now.
        """
        try:
            # The version each row's write handed over (None: read it, or a cache purge), in one
            # list: a tuple a row would be one more object per row for the collector to trace.
            committed = [None if item.op == "cache_purge" else self._committed(item) for item in run]
            wanted: dict[str, set[tuple[str, int]]] = {}
            for item, handed in zip(run, committed, strict=True):
                if handed is None and item.op != "cache_purge":
                    wanted.setdefault(item.tenant_id, set()).add(parse_version_ref(item.entity_ref))
            found: dict[str, dict[tuple[str, int], tuple[EvidenceRecord, bytes]]] = {}
            if wanted:
                with self.store.read() as conn:
                    found = {
                        tenant: InternalReads(conn).evidence_versions(tenant, sorted(keys))
                        for tenant, keys in wanted.items()
                    }
            documents: list[EvidenceDocument] = []
            rows: list[OutboxItem] = []  # rows[i] the row of documents[i]
            upserted: dict[str, set[str]] = {}  # tenant -> the refs of the versions upserted
            statuses: list[tuple[str, str, int, EvidenceDocument]] = []
            purges: dict[str, bool] = {}  # tenant -> whether search results must be dropped
            for item, handed in zip(run, committed, strict=True):
                tenant = item.tenant_id
                if item.op == "cache_purge":
                    purges[tenant] = purges.get(tenant, False) or bool(item.payload.get("drop_search"))
                    continue
                stored = handed or found.get(tenant, {}).get(parse_version_ref(item.entity_ref))
                if stored is None or (item.op == "index_upsert" and stored[0].status == "retracted"):
                    continue  # deleted or withdrawn since; the row that did so removes what was indexed
                doc = evidence_document(tenant, *stored, made_here=handed is not None)
                if doc is None:
                    continue
                if item.op == "index_status":
                    statuses.append((tenant, doc.evidence_id, doc.version, doc))
                    continue
                refs = upserted.setdefault(tenant, set())
                if item.entity_ref not in refs:
                    refs.add(item.entity_ref)
                    documents.append(doc)
                    rows.append(item)
            reported: set[int] = set()
            if documents:
                self._upsert(documents, rows, on_applied, reported)
            for tenant, evidence_id, version, doc in statuses:
                self.index.set_status(tenant, evidence_id, version, doc.status, valid_until=doc.valid_until)
            for tenant, drop_search in purges.items():
                self._purge(tenant, drop_search)
        except (MnemoError, ValueError, KeyError) as e:
            log.info("a batch of %d outbox rows failed, applying them one by one: %s", len(run), e)
            return None
        return reported

    def _upsert(
        self,
        documents: list[EvidenceDocument],
        rows: list[OutboxItem],
        on_applied: OnApplied | None,
        reported: set[int],
    ) -> None:
        """`index.upsert(documents)` (`rows[i]` the row of `documents[i]`), its steps reported to
        `on_applied` (see `IndexingStep`), each row as its document is written (its id then
        added to `reported`). Without a listener the index embeds in one call, as fast as it can."""
        if on_applied is None:
            self.index.upsert(documents)
        else:
            self.index.upsert(documents, progress=_StepRelay(rows, on_applied, reported))

    def _committed(self, item: OutboxItem) -> tuple[EvidenceRecord, bytes] | None:
        """The version an evidence index_upsert row names (by its entity_ref, a `version_ref`), if
        the write this drain was handed made it (see the module docstring); None when it must be
        read from the archive."""
        made = self._made
        if (
            made is None
            or item.id > made.last_outbox_id  # a later write's row (see `EvidenceBatch`)
            or item.op != "index_upsert"
            or item.entity != "evidence"
            or item.tenant_id != made.tenant_id
        ):
            return None
        return made.made.get(item.entity_ref)

    def _compaction_due(self) -> bool:
        return self.index.deleted_since_compaction >= self.compact_after_deleted

    def _compact_if_due(self) -> None:
        """Compact once enough points were deleted. The rows are applied and flushed already, so
        a failed compaction only logs: the shard in use is intact and the next pass retries."""
        if not self._compaction_due():
            return
        try:
            self.index.compact()
        except RetrievalError as e:
            log.warning("index compaction failed, retried by the next pass: %s", e)

    @staticmethod
    def _record(conn: Connection, done: list[int], problems: list[Failure]) -> None:
        mark_done(conn, done)
        for failure in problems:
            mark_failed(conn, failure.item_id, failure.error, counts=not failure.outage)

    def _apply_one(
        self, item: OutboxItem, on_applied: OnApplied | None, reported: set[int]
    ) -> Failure | None:
        """Apply one row; its failure, if any. An evidence upsert reports its steps to
        `on_applied`, the row as its document is written (its id then added to `reported`)."""
        try:
            if item.op == "cache_purge":
                # Reads nothing of the archive: no transaction.
                self._purge(item.tenant_id, bool(item.payload.get("drop_search")))
            else:
                with self.store.read() as conn:
                    self._apply(conn, item, on_applied, reported)
            return None
        except (MnemoError, ValueError, KeyError) as e:
            # A malformed or failing row stays pending with its error (and is retried up to
            # MAX_ATTEMPTS times); it never stops the rows behind it. An outage is not the
            # row's fault and does not count towards setting it aside.
            outage = isinstance(e, StoreUnavailable | IndexUnavailable)
            where = f"outbox {item.id} ({item.op} {item.entity} {item.entity_ref})"
            return Failure(item.id, f"{where}: {e}", outage)

    def _apply(
        self, conn: Connection, item: OutboxItem, on_applied: OnApplied | None, reported: set[int]
    ) -> None:
        """Apply one row but a cache purge, reading its target from the archive (see `_apply_one`)."""
        tenant = item.tenant_id
        if item.entity == "evidence":
            evidence_id, version = parse_version_ref(item.entity_ref)
            if item.op == "index_delete":
                self.index.delete(tenant, evidence_id, version)
            elif item.op == "index_status":
                stored = InternalReads(conn).evidence_version(tenant, evidence_id, version)
                if stored is not None:
                    doc = evidence_document(tenant, *stored)
                    if doc is not None:
                        self.index.set_status(
                            tenant, evidence_id, version, doc.status, valid_until=doc.valid_until
                        )
            else:
                self._upsert_evidence(conn, item, on_applied, reported)
        elif item.entity == "tool_result":
            if item.op == "index_delete":
                self.index.delete(tenant, str(ResultIndexId.of_ref(item.entity_ref)))
            else:
                result = ResultIndexId.of_ref(item.entity_ref)
                note = InternalReads(conn).archived_note(tenant, result.session_id, result.result_id)
                if note is not None:
                    self.index.upsert([note_document(tenant, note)])
        elif item.entity == "result_original":
            self._write_pages(self._page_documents(conn, [item]), yields=False)
        elif item.entity == "memory":
            ref, _, version_text = item.entity_ref.rpartition("@")
            owner, _, key = ref.partition("/")
            version = int(version_text)
            if item.op == "index_delete":
                self.index.delete(tenant, memory_index_id(owner, key), version)
            else:
                # index_upsert (a new version) and index_status (superseded): either way the
                # archive's row says what the index holds now. A superseded version stays
                # searchable `as_of` the time it was current, as superseded evidence does.
                fact_row = InternalReads(conn).memory_version(tenant, owner, key, version)
                if fact_row is not None:
                    fact_doc = memory_document(tenant, *fact_row)
                    if fact_doc is None:
                        self.index.delete(tenant, memory_index_id(owner, key), version)
                    else:
                        self.index.upsert([fact_doc])
        elif item.entity == "summary":
            if item.op == "index_delete":
                self.index.delete(tenant, item.entity_ref)
            else:
                found = InternalReads(conn).summary(tenant, item.entity_ref)
                if found is not None:
                    summary_owner = source_owner(conn, tenant, found.derived_from)
                    self.index.upsert([summary_document(tenant, found, summary_owner)])
        else:
            raise ValueError(f"unknown outbox entity {item.entity!r}")

    def _purge(self, tenant: str, drop_search: bool) -> None:
        """Apply a tenant's cache_purge rows."""
        if drop_search:
            # A deletion: cached result pages name what was deleted; drop them, not only make
            # them unreachable (Redis would keep them until their TTL).
            self.cache.purge_tenant(tenant)
        else:
            self.cache.bump_generation(tenant)
        # The payload's content hashes need nothing here: the index discards the embeddings of
        # the deleted text itself when the row's index_delete siblings remove its points.

    def _apply_pages(self, run: list[OutboxItem], yields: bool) -> int | None:
        """Apply a run of pages of originals (rows of the trailing lane); how many rows it went
        through (from the first: the rest stay pending), or None when anything failed (the
        caller then applies the run row by row, which names the failing row).

        A pass pays its reads once, not per page: one transaction reads the notes (and the
        original, see `_original`), the pages are written (`_write_pages`), then one transaction
        reads the notes again and one generation bump per tenant follows. With `yields` (the
        trail) it stops after the page under way once another drain waits (`TRAIL_PASS_PAGES`).
        """
        try:
            with self.store.read() as conn:
                pages = self._page_documents(conn, run)
            return self._write_pages(pages, yields)
        except (MnemoError, ValueError, KeyError) as e:
            log.info("a pass of %d pages of originals failed, applying them one by one: %s", len(run), e)
            return None

    def _page_documents(self, conn: Connection, run: list[OutboxItem]) -> list[_Page]:
        """Each page row of `run` as (tenant, its result, the page's document or None when there
        is nothing to index: the result deleted since, whose deletion removed every page, or a
        page without text). Each result's note is read once for all its pages in the run."""
        notes: dict[tuple[str, str], ArchivedNote | None] = {}
        pages: list[_Page] = []
        for item in run:
            tenant = item.tenant_id
            result_ref, page_no = parse_page_ref(item.entity_ref)
            result = ResultIndexId.of_ref(result_ref)
            if (tenant, result_ref) not in notes:
                notes[(tenant, result_ref)] = InternalReads(conn).archived_note(
                    tenant, result.session_id, result.result_id
                )
            note = notes[(tenant, result_ref)]
            doc = None
            if note is not None:
                doc = page_document(tenant, note, self._original(conn, tenant, note.content_sha256), page_no)
            pages.append((tenant, result, doc))
        return pages

    def _write_pages(self, pages: list[_Page], yields: bool) -> int:
        """Upsert the documents of `pages` (see `_page_documents`), TRAIL_PAGES_PER_CALL pages a
        call; with `yields`, a call embeds them one by one and stops after the page under way
        once another drain waits (writing what it embedded first), and so does this pass.
        Returns how many of `pages` it went through."""
        went = 0
        written: set[tuple[str, ResultIndexId]] = set()
        stop = self._a_drain_waits if yields else None
        while went < len(pages):
            # Read without `_turns`, as in `_apply_all`: a drain that starts waiting just after
            # costs one page more.
            if yields and went and self._a_drain_waits():
                break
            group = pages[went : went + TRAIL_PAGES_PER_CALL]
            documents = [doc for _, _, doc in group if doc is not None]
            upserted = self.index.upsert(documents, stop=stop).documents if documents else 0
            taken = _pages_through(group, upserted)
            written.update((tenant, result) for tenant, result, doc in group[:taken] if doc is not None)
            went += taken
            if taken < len(group):
                break  # it made way for a waiting drain
        if not written:
            return went
        # Read again after writing: with several drainers (PostgreSQL and a Qdrant server) a
        # deletion may have committed, and its points been removed, while these pages were
        # embedded. One read after the last page covers every page before it: it removes every
        # page of the result. (With one drainer a deletion's own rows are applied after this
        # pass, under the same lock, and remove them anyway.)
        with self.store.read() as after:
            reads = InternalReads(after)
            for tenant, result in sorted(written, key=lambda w: (w[0], str(w[1]))):
                if reads.archived_note(tenant, result.session_id, result.result_id) is None:
                    self.index.delete(tenant, str(result))
        # A search cached before these pages were indexed would not show them. Once per tenant,
        # after the last page: a search that read the generation before this bump is refused
        # by the cache or filed under the old generation; one that reads it after sees every page.
        for tenant in sorted({tenant for tenant, _ in written}):
            self.cache.bump_generation(tenant)
        return went

    def _a_drain_waits(self) -> bool:
        """Whether another drain waits for the indexer (read without `_turns`, see `_write_pages`)."""
        return self._waiting > 0

    def _original(self, conn: Connection, tenant: str, digest: str) -> bytes:
        """An archived original's bytes, hash-verified when read. The one read last is kept for
        the pages after it (a 2 MB original has about 60): reading and hashing it again for each
        page made its trail quadratic in its size. Blobs are addressed by their hash, so kept
        bytes are the stored bytes of that digest; whether the result is still archived is read
        for every page (its note), never kept. Dropped once no page of an original is pending."""
        kept = self._kept_original
        if kept is not None and kept[:2] == (tenant, digest):
            return kept[2]
        content = InternalReads(conn).original(tenant, digest)
        self._kept_original = (tenant, digest, content)
        return content

    def _upsert_evidence(
        self, conn: Connection, item: OutboxItem, on_applied: OnApplied | None, reported: set[int]
    ) -> None:
        tenant = item.tenant_id
        found = InternalReads(conn).evidence_version(tenant, *parse_version_ref(item.entity_ref))
        if found is None or found[0].status == "retracted":
            return  # deleted or withdrawn since; the row that did so removes what was indexed
        doc = evidence_document(tenant, *found)
        if doc is not None:
            self._upsert([doc], [item], on_applied, reported)


class _StepRelay:
    """One index upsert's `UpsertProgress` (cumulative, documents by position) as `IndexingStep`s
    (increments, documents by outbox row)."""

    def __init__(self, rows: list[OutboxItem], on_applied: OnApplied, reported: set[int]) -> None:
        self.rows = rows
        self.on_applied = on_applied
        self.reported = reported
        self.embedded: int | None = None  # None until the first report, which carries the total

    def __call__(self, p: UpsertProgress) -> None:
        rows = [self.rows[i] for i in p.written]
        self.reported.update(row.id for row in rows)
        planned = p.chunks if self.embedded is None else 0
        step = p.embedded - (self.embedded or 0)
        self.embedded = p.embedded
        applied = tuple(AppliedRow(row.op, row.entity, row.entity_ref) for row in rows)
        try:
            self.on_applied(IndexingStep(planned, step, applied))
        except Exception as e:
            raise _ListenerFailed(e) from e


# Rows an ingest writes; a run of them is applied as one batch (`Indexer._apply_run`).
_BATCHABLE = {("index_upsert", "evidence"), ("index_status", "evidence"), ("cache_purge", "tenant")}


def _pages_through(pages: list[_Page], documents: int) -> int:
    """How many of `pages` are done once the first `documents` of their documents are written:
    every page before the next page with a document (a page without one needs nothing)."""
    for i, (_, _, doc) in enumerate(pages):
        if doc is not None:
            if documents == 0:
                return i
            documents -= 1
    return len(pages)


def _run_kind(item: OutboxItem) -> str | None:
    """Which run `item` may join: an ingest's rows (`Indexer._apply_run`), pages of originals
    (`Indexer._apply_pages`), or none (applied alone)."""
    if (item.op, item.entity) in _BATCHABLE:
        return "ingest"
    if item.entity == "result_original":
        return "pages"
    return None


def _runs(items: list[OutboxItem]) -> list[list[OutboxItem]]:
    """`items` in order, cut into maximal runs of rows of one kind (`_run_kind`) and single other
    rows; a run of pages holds TRAIL_PASS_PAGES at most (a drain of every lane, as `sync()`'s,
    may claim thousands of pages: their documents are built a run at a time)."""
    runs: list[list[OutboxItem]] = []
    for item in items:
        kind = _run_kind(item)
        full = kind == "pages" and runs and len(runs[-1]) >= TRAIL_PASS_PAGES
        if kind is not None and runs and _run_kind(runs[-1][0]) == kind and not full:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs
