"""The Session Evidence Archive transitions: record, archive (batch), live view, recover.

Invariants:
- a result id `rN` is issued once per session, in order, and never reused;
- an original, once recorded, is never modified; archive only flips the live state and
  adds the agent's note; recover appends a *new* result and never rewrites history;
- archive validates the whole batch first, inside the transaction that will apply it
  (SQLite holds the write lock, PostgreSQL row locks on the targets), so validation and
  change see the same state; any invalid target rejects the batch and nothing changes;
- results of a protected policy class are never archived;
- every original served is re-hashed; a mismatch is an IntegrityFailure, never served.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, Join, Row, bindparam, func, select, update
from sqlalchemy.sql.dml import ReturningInsert

from ..rules.checks import arguments_json, aware, check_tool_name, content_bytes
from ..rules.clock import utcnow
from ..rules.errors import (
    ArchiveConflict,
    BatchRejected,
    Forbidden,
    InvalidInput,
    NotFound,
    StateConflict,
    TargetStatus,
)
from ..rules.excerpts import DEFAULT_AROUND, Excerpt, check_span, resolve_span
from ..rules.operations import ArchiveResultsOp, ArchiveTarget, RecordOp
from ..rules.original_pages import page_count, page_ref
from ..rules.policy import check_list_limit, check_offset, check_policy_class
from ..rules.principal import Principal, Role, Sensitivity, check_identifier
from ..rules.records import ArchiveReceipt, LiveItem, LiveView, Recovered
from ..rules.tool_results import (
    ToolResult,
    is_textual,
    parse_result_id,
    render_live,
    render_stub,
    render_withheld,
    result_id,
)
from ..storage import schema as t
from ..storage.audit import append_event
from ..storage.blobs import put_blob, read_blob, read_blobs, sha256_hex, verified
from ..storage.idempotency import keyed, previous_reply, save_reply
from ..storage.outbox import OutboxRow, enqueue_many
from ..storage.session_rows import check_opened, readable_session, session_row
from ..storage.statements import prepared_insert
from ..storage.store import ArchiveStore
from ..storage.upserts import dialect_insert

_ENTRY_COLUMNS = tuple(c.key for c in t.archive_entries.columns)  # an entry gives every one

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def check_note(note: object, limit: int) -> str | None:
    """Return the problem with a note, or None when it is acceptable."""
    if not isinstance(note, str) or not note.strip():
        return "empty_note"
    if len(note) > limit:
        return "note_too_long"
    if _CONTROL.search(note):
        return "note_has_control_chars"
    if any(unicodedata.category(ch) == "Cs" for ch in note):
        return "note_invalid_text"
    return None


def _targets(raw: object) -> list[ArchiveTarget]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise InvalidInput("targets", "must be a list of {id, note} items")
    out: list[ArchiveTarget] = []
    for i, item in enumerate(raw):
        if isinstance(item, ArchiveTarget):
            out.append(item)
        elif isinstance(item, Mapping):
            rid = item.get("id", item.get("result_id"))
            note = item.get("note")
            # A non-string note becomes "" so that validation reports it as empty_note.
            out.append(
                ArchiveTarget(
                    result_id=rid if isinstance(rid, str) else repr(rid),
                    note=note if isinstance(note, str) else "",
                )
            )
        elif isinstance(item, tuple) and len(item) == 2:
            note = item[1]
            out.append(ArchiveTarget(result_id=str(item[0]), note=note if isinstance(note, str) else ""))
        else:
            raise InvalidInput(f"targets[{i}]", "must be {id, note}")
    return out


# ---- rows -> domain ------------------------------------------------------------------------


def _to_result(row: Row[Any] | SimpleNamespace, note: str | None = None) -> ToolResult:
    return ToolResult(
        session_id=row.session_id,
        result_id=result_id(row.result_no),
        tool_name=row.tool_name,
        arguments=json.loads(row.arguments_json),
        media_type=row.media_type,
        size=row.size,
        content_sha256=row.blob_sha256,
        observed_at=row.observed_at,
        recorded_at=row.recorded_at,
        sensitivity=Sensitivity(row.sensitivity),
        policy_class=row.policy_class,
        state=row.state,
        note=note,
        recovered_from=result_id(row.recovered_from_no) if row.recovered_from_no is not None else None,
        excerpt=(
            None
            if row.excerpt_start is None
            else Excerpt(row.excerpt_start, row.excerpt_end, row.excerpt_first_line, row.excerpt_last_line)
        ),
    )


# The excerpt columns of a result that shows its whole original (every result but an excerpt's copy).
_WHOLE = dict.fromkeys(("excerpt_start", "excerpt_end", "excerpt_first_line", "excerpt_last_line"))


def _excerpt_columns(excerpt: Excerpt | None) -> dict[str, int | None]:
    if excerpt is None:
        return dict(_WHOLE)
    return {
        "excerpt_start": excerpt.start,
        "excerpt_end": excerpt.end,
        "excerpt_first_line": excerpt.first_line,
        "excerpt_last_line": excerpt.last_line,
    }


def shown(result: ToolResult, original: bytes) -> bytes:
    """What a result shows of its original: all of it, or an excerpt copy's excerpt."""
    return original if result.excerpt is None else result.excerpt.of(original)


# Statements of the write paths, built once: building a statement and its cache key anew cost
# 40-70 us each, as much as running it on SQLite and a third of it on PostgreSQL.
_RESULT_INSERT = t.tool_results.insert()
_NUMBER_ISSUE = (
    update(t.sessions)
    .where(
        t.sessions.c.tenant_id == bindparam("tenant"),
        t.sessions.c.session_id == bindparam("session"),
        t.sessions.c.deleted_at.is_(None),
    )
    .values(next_result_no=t.sessions.c.next_result_no + 1)
    .returning(t.sessions.c.next_result_no)
)


def _allocate_number(conn: Connection, tenant_id: str, session_id: str) -> int:
    """Issue the session's next result number. The UPDATE takes the row lock, so concurrent
    writers to one session are serialised and a number is never issued twice."""
    row = conn.execute(_NUMBER_ISSUE, {"tenant": tenant_id, "session": session_id}).first()
    if row is None:
        raise NotFound("session", session_id)
    return int(row.next_result_no) - 1


def open_and_number(
    conn: Connection, principal: Principal, session_id: str, owner: str | None, now: datetime
) -> int:
    """`open_session` then `_allocate_number` in one statement, for `record`: the session is
    created with its first number issued, or its counter advanced (the row lock serialises
    concurrent writers, as the UPDATE does), and the row's owner and tombstone come back to be
    checked. A refused write raises, so its transaction rolls the advance back. Raises
    StateConflict as `open_session` does."""
    session = conn.execute(
        _open_and_number_statement(conn.dialect.name),
        {
            "tenant": principal.tenant_id,
            "session": session_id,
            "owner_given": principal.subject if owner is None else owner,
            "now": now,
        },
    ).one()
    check_opened(session_id, owner, session.owner, session.deleted_at)
    return int(session.next_result_no) - 1


@functools.cache
def _open_and_number_statement(dialect_name: str) -> ReturningInsert[tuple[int, str, datetime | None]]:
    """`open_and_number`'s upsert, built once per kind of database."""
    insert = dialect_insert(dialect_name, t.sessions).values(
        tenant_id=bindparam("tenant", type_=t.sessions.c.tenant_id.type),
        session_id=bindparam("session", type_=t.sessions.c.session_id.type),
        owner=bindparam("owner_given", type_=t.sessions.c.owner.type),
        created_at=bindparam("now", type_=t.sessions.c.created_at.type),
        next_result_no=2,  # number 1 is this write's
    )
    statement: ReturningInsert[tuple[int, str, datetime | None]] = insert.on_conflict_do_update(
        index_elements=["tenant_id", "session_id"],
        set_={"next_result_no": t.sessions.c.next_result_no + 1},
    ).returning(t.sessions.c.next_result_no, t.sessions.c.owner, t.sessions.c.deleted_at)
    return statement


# ---- record --------------------------------------------------------------------------------


def record(
    store: ArchiveStore,
    principal: Principal,
    session_id: str,
    op: RecordOp,
    *,
    idempotency_key: str | None = None,
) -> ToolResult:
    """Record a tool result; returns it with its new stable id (`r1`, `r2`, … per session).

    `owner` is the person the session is about (default: the recording principal); it is set
    by the session's first result, and `delete_owner` reaches the session through it.

    The original is stored as a content-addressed blob with its sha256. A session is
    created by its first result. Raises InvalidInput/ContentTooLarge for bad input,
    Forbidden without the agent role or for a sensitivity above the principal's clearance.

    With an idempotency key, repeating the same call returns the first call's result and
    records nothing (NotFound if that result was deleted since); reusing the key for another
    request raises IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "recording a tool result")
    policy = store.policy
    check_identifier("session_id", session_id)
    check_tool_name(op.tool_name, policy.max_tool_name_chars)
    data, media = content_bytes(op.content, op.media_type, policy.max_content_bytes)
    args_json = arguments_json(op.arguments, policy.max_arguments_bytes)
    level = Sensitivity.parse(op.sensitivity)
    principal.require_clearance(level, "recording a result of this sensitivity")
    check_policy_class(op.policy_class)
    # Recording needs the agent role, and agents act for any owner in their tenant.
    if op.owner is not None:
        check_identifier("owner", op.owner)
    given_observed = aware("observed_at", op.observed_at)
    observed = given_observed or utcnow()
    now = utcnow()
    tenant = principal.tenant_id
    keyed_request = keyed(
        principal,
        idempotency_key,
        "record",
        {
            "session_id": session_id,
            "tool_name": op.tool_name,
            "content_sha256": sha256_hex(data),
            "media_type": media,
            "arguments": args_json,
            "observed_at": given_observed,
            "sensitivity": int(level),
            "policy_class": op.policy_class,
            "owner": op.owner,
        },
    )

    with store.write() as conn:
        previous = previous_reply(conn, keyed_request)
        if previous is not None:
            return _recorded(conn, tenant, previous["session_id"], previous["result_id"])
        number = open_and_number(conn, principal, session_id, op.owner, now)
        digest = put_blob(conn, tenant, data, media)
        values = {
            "tenant_id": tenant,
            "session_id": session_id,
            "result_no": number,
            "tool_name": op.tool_name,
            "arguments_json": args_json,
            "blob_sha256": digest,
            "media_type": media,
            "size": len(data),
            "observed_at": observed,
            "recorded_at": now,
            "recorded_by": principal.subject,
            "sensitivity": int(level),
            "policy_class": op.policy_class,
            "state": "live",
            "recovered_from_no": None,
            **_WHOLE,
        }
        conn.execute(_RESULT_INSERT, values)
        save_reply(conn, keyed_request, {"session_id": session_id, "result_id": result_id(number)})
    # The row as the database holds it, without reading it back: times in UTC, as read.
    stored = {**values, "observed_at": observed.astimezone(UTC), "recorded_at": now.astimezone(UTC)}
    return _to_result(SimpleNamespace(**stored))


def _recorded(conn: Connection, tenant_id: str, session_id: str, ref: str) -> ToolResult:
    """A recorded result as `record` first returned it (for a replay)."""
    row = conn.execute(
        select(t.tool_results).where(
            t.tool_results.c.tenant_id == tenant_id,
            t.tool_results.c.session_id == session_id,
            t.tool_results.c.result_no == parse_result_id(ref),
        )
    ).first()
    if row is None:
        raise NotFound("result", f"{session_id}/{ref}")
    # A result is recorded live; archiving it later is a later state, not another answer to the call.
    return dataclasses.replace(_to_result(row), state="live")


_CONFLICT_HINT = "Reload the live view: those results were archived already (perhaps by another caller)."

# ---- archive -------------------------------------------------------------------------------

_REJECT_HINT = (
    "Fix or drop the targets listed with a status other than ok and send the batch again; "
    "the targets marked ok were not archived either."
)


def _validate_batch(
    conn: Connection,
    store: ArchiveStore,
    principal: Principal,
    session_id: str,
    targets: Sequence[ArchiveTarget],
) -> tuple[list[TargetStatus], dict[int, Row[Any]]]:
    policy = store.policy
    numbers: dict[str, int] = {}
    for x in targets:
        try:
            numbers[x.result_id] = parse_result_id(x.result_id)
        except InvalidInput:
            continue
    wanted = {
        "of_tenant": principal.tenant_id,
        "of_session": session_id,
        "numbers": sorted(set(numbers.values())),
    }
    rows = {int(r.result_no): r for r in conn.execute(_TARGETS, wanted)}
    seen: set[int] = set()
    statuses: list[TargetStatus] = []
    for x in targets:
        rid = x.result_id
        number = numbers.get(rid)
        row = rows.get(number) if number is not None else None
        note_problem = check_note(x.note, policy.max_note_chars)
        if number is None:
            st = TargetStatus(rid, "malformed", "not a result id (ids look like r1, r2, ...)")
        elif number in seen:
            st = TargetStatus(rid, "duplicate", "appears more than once in this batch")
        elif row is None:
            st = TargetStatus(rid, "unknown", f"no result {rid} was issued in session {session_id!r}")
        elif not principal.can_read(Sensitivity(row.sensitivity)):
            st = TargetStatus(rid, "forbidden", "its sensitivity is above your clearance")
        elif row.state == "archived":
            st = TargetStatus(rid, "already_archived", "is archived already; its stub is in the live view")
        elif policy.is_protected(row.policy_class):
            st = TargetStatus(
                rid, "protected", f"policy class {row.policy_class!r} is never archived; it stays live"
            )
        elif note_problem == "empty_note":
            st = TargetStatus(rid, "empty_note", "the note must say what the result held")
        elif note_problem == "note_too_long":
            st = TargetStatus(rid, "note_too_long", f"notes are at most {policy.max_note_chars} characters")
        elif note_problem == "note_invalid_text":
            st = TargetStatus(rid, note_problem, "the note must be valid Unicode text (no lone surrogates)")
        elif note_problem is not None:
            st = TargetStatus(rid, note_problem, "the note must not contain control characters")
        else:
            st = TargetStatus(rid, "ok", "valid")
        if number is not None:
            seen.add(number)
        statuses.append(st)
    return statuses, rows


# An archive call's statements, built once: building them per call cost SQLAlchemy more than
# SQLite spends running them (see storage/outbox.py's _claim_statement).
_IN_SESSION = (
    # Not named after their columns: an UPDATE's SET clause reserves those names.
    t.tool_results.c.tenant_id == bindparam("of_tenant"),
    t.tool_results.c.session_id == bindparam("of_session"),
    t.tool_results.c.result_no.in_(bindparam("numbers", expanding=True)),
)
_TARGETS = select(t.tool_results).where(*_IN_SESSION).with_for_update()
_ARCHIVE_LIVE = (
    update(t.tool_results).where(*_IN_SESSION, t.tool_results.c.state == "live").values(state="archived")
)


def archive(
    store: ArchiveStore,
    principal: Principal,
    session_id: str,
    op: ArchiveResultsOp,
    *,
    idempotency_key: str | None = None,
) -> ArchiveReceipt:
    """Archive a batch of results, each replaced in the live view by its note.

    All or nothing: BatchRejected (ArchiveConflict when the only problem is that targets
    are archived already, e.g. by a concurrent archiver) lists every target's status and
    nothing changes. With an idempotency key, repeating the same call returns the first
    receipt (replayed=True); reusing the key for a different call raises IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "archiving results")
    check_identifier("session_id", session_id)
    batch = _targets(op.targets)
    if not batch:
        raise InvalidInput("targets", "the batch is empty")
    if len(batch) > store.policy.max_batch_size:
        raise InvalidInput(
            "targets", f"{len(batch)} targets; at most {store.policy.max_batch_size} per batch"
        )
    tenant = principal.tenant_id
    # A list, not a mapping: the hash of this request is the one keys stored before have.
    keyed_request = keyed(
        principal, idempotency_key, "archive", [session_id, [[x.result_id, x.note] for x in batch]]
    )

    with store.write() as conn:
        previous = previous_reply(conn, keyed_request)
        if previous is not None:
            return ArchiveReceipt(
                session_id=previous["session_id"],
                batch_id=previous["batch_id"],
                archived=tuple(previous["archived"]),
                replayed=True,
            )
        session_row(conn, tenant, session_id, lock=False)
        statuses, rows = _validate_batch(conn, store, principal, session_id, batch)
        bad = [s for s in statuses if not s.ok]
        if bad:
            if all(s.status == "already_archived" for s in bad):
                raise ArchiveConflict(statuses, _CONFLICT_HINT)
            raise BatchRejected(statuses, _REJECT_HINT)

        batch_id = uuid.uuid4().hex
        now = utcnow()
        numbers = [parse_result_id(x.result_id) for x in batch]
        flipped = conn.execute(
            _ARCHIVE_LIVE, {"of_tenant": tenant, "of_session": session_id, "numbers": numbers}
        ).rowcount
        if flipped != len(numbers):  # cannot happen under the locks; kept as a last line of defence
            raise ArchiveConflict(statuses, "another archiver changed these results; reload the live view")
        # Multi-row on SQLite (archive/storage/statements.py): an executemany steps once an
        # entry, and each step waits out any other thread running Python (the trail).
        prepared_insert("archive_entries", t.archive_entries.insert, _ENTRY_COLUMNS, conn.dialect).execute(
            conn,
            [
                {
                    "tenant_id": tenant,
                    "session_id": session_id,
                    "result_no": n,
                    "note": x.note,
                    "batch_id": batch_id,
                    "archived_at": now,
                    "archived_by": principal.subject,
                }
                for n, x in zip(numbers, batch, strict=True)
            ],
        )
        # In one call, in this order (the indexer applies rows by id): each note, which
        # becomes searchable (the index points back to the result, never holds it); then its
        # original, a page per row, indexed behind this write (original_pages.py; a recovered
        # copy's original is its source's); then the tenant's cached searches purged.
        notes: list[OutboxRow] = [
            (
                tenant,
                "index_upsert",
                "tool_result",
                f"{session_id}/{result_id(n)}",
                {
                    "session_id": session_id,
                    "result_id": result_id(n),
                    "note": x.note,
                    "tool_name": rows[n].tool_name,
                    "sensitivity": int(rows[n].sensitivity),
                    "content_sha256": rows[n].blob_sha256,
                },
            )
            for n, x in zip(numbers, batch, strict=True)
        ]
        pages: list[OutboxRow] = [
            (tenant, "index_upsert", "result_original", page_ref(f"{session_id}/{result_id(n)}", page), None)
            for n in numbers
            if rows[n].recovered_from_no is None
            for page in range(page_count(int(rows[n].size)))
        ]
        enqueue_many(
            conn, [*notes, *pages, (tenant, "cache_purge", "tenant", tenant, {"reason": "results archived"})]
        )
        archived = tuple(x.result_id for x in batch)
        append_event(
            conn,
            tenant,
            principal.subject,
            "archive",
            f"session:{session_id}",
            {"batch_id": batch_id, "results": list(archived)},
        )
        save_reply(
            conn,
            keyed_request,
            {"session_id": session_id, "batch_id": batch_id, "archived": list(archived)},
        )
        return ArchiveReceipt(session_id=session_id, batch_id=batch_id, archived=archived)


# ---- read ----------------------------------------------------------------------------------


def _results_and_notes() -> Join:
    """Results joined to their archive entries: an archived result's row carries its note."""
    return t.tool_results.outerjoin(
        t.archive_entries,
        (t.archive_entries.c.tenant_id == t.tool_results.c.tenant_id)
        & (t.archive_entries.c.session_id == t.tool_results.c.session_id)
        & (t.archive_entries.c.result_no == t.tool_results.c.result_no),
    )


def _results_with_notes(
    conn: Connection,
    tenant_id: str,
    session_id: str,
    result_no: int | None = None,
    *,
    window: tuple[int, int | None] = (0, None),
) -> list[ToolResult]:
    """`window`: (offset, limit), the page of results to read (all of them by default)."""
    stmt = (
        select(t.tool_results, t.archive_entries.c.note)
        .select_from(_results_and_notes())
        .where(t.tool_results.c.tenant_id == tenant_id, t.tool_results.c.session_id == session_id)
        .order_by(t.tool_results.c.result_no)
    )
    if result_no is not None:
        stmt = stmt.where(t.tool_results.c.result_no == result_no)
    offset, limit = window
    if offset or limit is not None:
        stmt = stmt.offset(offset).limit(limit)
    return [_to_result(row, row.note) for row in conn.execute(stmt)]


# Recover's read, built once (building a statement and its cache key cost as much as running it).
_RESULT_WITH_ORIGINAL = (
    select(t.tool_results, t.archive_entries.c.note, t.blobs.c.content)
    .select_from(
        _results_and_notes().outerjoin(
            t.blobs,
            (t.blobs.c.tenant_id == t.tool_results.c.tenant_id)
            & (t.blobs.c.sha256 == t.tool_results.c.blob_sha256),
        )
    )
    .where(
        t.tool_results.c.tenant_id == bindparam("tenant"),
        t.tool_results.c.session_id == bindparam("session"),
        t.tool_results.c.result_no == bindparam("result_no"),
    )
)


def _result_with_original(
    conn: Connection, tenant_id: str, session_id: str, result_no: int
) -> tuple[ToolResult, bytes | None] | None:
    """One result with its note and its original's stored bytes (None when the blob row is
    missing), in one statement: recover reads both, and on PostgreSQL each statement is a
    round trip. The bytes are not yet checked against the hash (`blobs.verified` does that)."""
    row = conn.execute(
        _RESULT_WITH_ORIGINAL, {"tenant": tenant_id, "session": session_id, "result_no": result_no}
    ).first()
    return None if row is None else (_to_result(row, row.note), row.content)


def list_results(
    store: ArchiveStore, principal: Principal, session_id: str, *, offset: int = 0, limit: int | None = None
) -> list[ToolResult]:
    """The results of a session in order, with notes on archived ones (metadata, no content):
    every one, or at most `limit` (1 to 10,000) after the first `offset`, read as one page (a
    session may hold tens of thousands)."""
    principal.require(Role.READER, "reading a session")
    check_identifier("session_id", session_id)
    check_offset(offset)
    if limit is not None:
        check_list_limit(limit)
    with store.read() as conn:
        readable_session(conn, principal, session_id)
        found = _results_with_notes(conn, principal.tenant_id, session_id, window=(offset, limit))
        return [_as_seen_by(principal, r) for r in found]


def list_results_with_content(
    store: ArchiveStore, principal: Principal, session_id: str, *, offset: int = 0, limit: int | None = None
) -> list[tuple[ToolResult, bytes | None]]:
    """The page `list_results` reads, each result with what it shows when that is in view: a
    live result's hash-verified original (an excerpt copy's excerpt), as `get_result` returns
    it; None for an archived result (its stub is in view; its original comes back through
    `recover`) and for one above the principal's clearance. One transaction, and one statement
    for the originals however long the page (a timeline of 50 results read them one `get_result`
    at a time: 50 transactions). IntegrityFailure when an original fails its hash, as
    `get_result`."""
    principal.require(Role.READER, "reading a session")
    check_identifier("session_id", session_id)
    check_offset(offset)
    if limit is not None:
        check_list_limit(limit)
    tenant = principal.tenant_id
    with store.read() as conn:
        readable_session(conn, principal, session_id)
        found = _results_with_notes(conn, tenant, session_id, window=(offset, limit))
        in_view = [r for r in found if r.state == "live" and principal.can_read(r.sensitivity)]
        originals = read_blobs(conn, tenant, (r.content_sha256 for r in in_view))
    shows = {r.result_id: shown(r, originals[r.content_sha256]) for r in in_view}
    return [(_as_seen_by(principal, r), shows.get(r.result_id)) for r in found]


def _as_seen_by(principal: Principal, result: ToolResult) -> ToolResult:
    """A result above the principal's clearance keeps its place (id, tool, sensitivity, times)
    but shows nothing derived from its content: no arguments, no note, no hash."""
    if principal.can_read(result.sensitivity):
        return result
    return dataclasses.replace(result, arguments={}, note=None, content_sha256="")


def staleness_warning(store: ArchiveStore, result: ToolResult) -> str | None:
    if not store.policy.is_time_sensitive(result.policy_class):
        return None
    return (
        f"{result.policy_class} data goes stale: this is what {result.tool_name} returned at "
        f"{result.observed_at.isoformat()}; re-query the live system before relying on it"
    )


def live_view(store: ArchiveStore, principal: Principal, session_id: str) -> LiveView:
    """The session's working context in order: live results in envelopes, archived ones as stubs.

    Two marks keep old observations honest where they are shown: a live result of a
    time-sensitive class `policy.stale_after_seconds` old (counted to now, or to the session's
    newest observation if that is later: a session replayed from a trace has its own time) carries
    the re-query warning a recovered copy carries; and a result that a later result of the same
    call (the same tool and the same, non-empty arguments) replaced says so, in its envelope or
    its stub."""
    principal.require(Role.READER, "reading a session")
    check_identifier("session_id", session_id)
    tenant = principal.tenant_id
    items: list[LiveItem] = []
    with store.read() as conn:
        readable_session(conn, principal, session_id)
        results = _results_with_notes(conn, tenant, session_id)
        readable = [r for r in results if principal.can_read(r.sensitivity)]
        newer = _superseders(readable)
        now = max([utcnow(), *(r.observed_at for r in readable)])
        # Every live original in one read (in parts), not one statement per result: a session
        # of 10,000 results took a second in reads alone. Each is hash-verified as read_blob does.
        originals = read_blobs(conn, tenant, [r.content_sha256 for r in readable if r.state != "archived"])
        for result in results:
            if not principal.can_read(result.sensitivity):
                items.append(
                    LiveItem(result=_as_seen_by(principal, result), rendered=render_withheld(result))
                )
                continue
            superseded_by = newer.get(result.result_id)
            if result.state == "archived":
                rendered = render_stub(result, superseded_by)
            else:
                content = shown(result, originals[result.content_sha256])
                stale = result.recovered_from is not None or (
                    (now - result.observed_at).total_seconds() >= store.policy.stale_after_seconds
                )
                warning = staleness_warning(store, result) if stale else None
                rendered = render_live(result, content, warning, superseded_by)
            items.append(LiveItem(result=result, rendered=rendered, superseded_by=superseded_by))
    return LiveView(session_id=session_id, items=tuple(items))


def _superseders(results: Sequence[ToolResult]) -> dict[str, str]:
    """For each result that a later observation of the same call replaced: the newest such result.
    A call is its tool and its arguments; a result recorded without arguments names no call (two
    of them may have fetched anything), so it neither replaces nor is replaced. A recovered copy
    keeps its original's time, so it never replaces its original."""
    results = [r for r in results if r.arguments]
    newest: dict[tuple[str, str], ToolResult] = {}
    for r in results:
        call = (r.tool_name, json.dumps(r.arguments, sort_keys=True, ensure_ascii=False))
        held = newest.get(call)
        if held is None or (r.observed_at, parse_result_id(r.result_id)) > (
            held.observed_at,
            parse_result_id(held.result_id),
        ):
            newest[call] = r
    out: dict[str, str] = {}
    for r in results:
        latest = newest[(r.tool_name, json.dumps(r.arguments, sort_keys=True, ensure_ascii=False))]
        if latest.observed_at > r.observed_at:
            out[r.result_id] = latest.result_id
    return out


def recover(
    store: ArchiveStore,
    principal: Principal,
    session_id: str,
    result_ref: str,
    *,
    lines: tuple[int, int] | None = None,
    byte_range: tuple[int, int] | None = None,
    match: str | None = None,
    around: int = DEFAULT_AROUND,
    idempotency_key: str | None = None,
) -> Recovered:
    """Return the exact original of an archived result, or the excerpt a span names, appended to
    the session as a new result.

    The copy is labelled historical data from its `observed_at`; time-sensitive classes carry
    a re-query warning. A span (`lines`, `byte_range` or `match` with `around`, see
    rules/excerpts.py) names part of the original: the whole original is hash-verified, then
    cut; the copy shows only those bytes, labelled with their lines and bytes and the whole
    original's hash, and a citation of it resolves to the original's text it shows. Recovering an
    excerpt's copy without a span brings back the same excerpt; a span always counts in the
    original.

    Raises InvalidInput (malformed id), InvalidSpan (a span the original cannot satisfy, naming
    its size in lines and bytes), NotFound (not issued here), StateConflict (the result is live,
    so it is already in the context), Forbidden (clearance) or IntegrityFailure (the stored
    original fails its hash). On any of them nothing is appended.

    With an idempotency key, repeating the same call returns the first call's copy (the
    original read again, hash-checked) and appends nothing (NotFound if either was deleted
    since); reusing the key for another request (another span too) raises IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "recovering a result")
    check_identifier("session_id", session_id)
    number = parse_result_id(result_ref)
    tenant = principal.tenant_id
    check_span(lines=lines, byte_range=byte_range, match=match, around=around)
    # The span is part of the request an idempotency key stands for (a whole recovery's request
    # is as it was before spans existed, so keys stored then still match).
    span: dict[str, object] = {
        name: value
        for name, value in (("lines", lines), ("byte_range", byte_range), ("match", match))
        if value is not None
    }
    if match is not None:
        span["around"] = around
    request = {"session_id": session_id, "result_id": result_ref, **span}
    keyed_request = keyed(principal, idempotency_key, "recover", request)
    with store.write() as conn:
        previous = previous_reply(conn, keyed_request)
        found = _result_with_original(conn, tenant, session_id, number)
        if found is None:
            raise NotFound("result", f"{session_id}/{result_ref}")
        original, stored = found
        principal.require_clearance(original.sensitivity, f"recovering {result_ref}")
        if previous is not None:
            appended = _recorded(conn, tenant, session_id, previous["appended"])
            content = shown(appended, verified(original.content_sha256, stored))
            return Recovered(original, appended, content, staleness_warning(store, original))
        if original.state != "archived":
            raise StateConflict(
                f"{result_ref} is live: its original is already in the context; only archived results "
                "are recovered",
                result_id=result_ref,
                state=original.state,
            )
        whole = verified(original.content_sha256, stored)
        excerpt = resolve_span(
            whole,
            result_id=result_ref,
            textual=is_textual(original.media_type),
            lines=lines,
            byte_range=byte_range,
            match=match,
            around=around,
        )
        if excerpt is None:
            excerpt = original.excerpt  # an excerpt's copy comes back as the same excerpt
        now = utcnow()
        new_number = _allocate_number(conn, tenant, session_id)
        conn.execute(
            _RESULT_INSERT,
            {
                "tenant_id": tenant,
                "session_id": session_id,
                "result_no": new_number,
                "tool_name": original.tool_name,
                "arguments_json": json.dumps(original.arguments, ensure_ascii=False, sort_keys=True),
                "blob_sha256": original.content_sha256,
                "media_type": original.media_type,
                "size": original.size,
                "observed_at": original.observed_at,
                "recorded_at": now,
                "recorded_by": principal.subject,
                "sensitivity": int(original.sensitivity),
                "policy_class": original.policy_class,
                "state": "live",
                "recovered_from_no": number,
                **_excerpt_columns(excerpt),
            },
        )
        detail: dict[str, Any] = {"appended_as": result_id(new_number), "sha256": original.content_sha256}
        if excerpt is not None:
            detail["excerpt"] = excerpt.describe()
        append_event(conn, tenant, principal.subject, "recover", f"session:{session_id}/{result_ref}", detail)
        save_reply(conn, keyed_request, {**request, "appended": result_id(new_number)})
    appended = ToolResult(
        session_id=session_id,
        result_id=result_id(new_number),
        tool_name=original.tool_name,
        arguments=original.arguments,
        media_type=original.media_type,
        size=original.size,
        content_sha256=original.content_sha256,
        observed_at=original.observed_at,
        recorded_at=now,
        sensitivity=original.sensitivity,
        policy_class=original.policy_class,
        state="live",
        recovered_from=result_ref,
        excerpt=excerpt,
    )
    return Recovered(
        original=original,
        appended=appended,
        content=shown(appended, whole),
        staleness_warning=staleness_warning(store, original),
    )


def read_result(
    store: ArchiveStore, principal: Principal, session_id: str, result_ref: str
) -> tuple[ToolResult, datetime | None, bytes | None]:
    """One result as this principal may read it, changing nothing (citation checks use it).

    Returns the result with its note, the time it was archived (None while live) and its
    hash-verified original (an excerpt's copy: the excerpt, cut from it) when the principal may
    see that: a live result's original is in the
    live view of anyone who may read the session; an archived one's only comes back through
    `recover`, which needs the agent role, so a reader gets None. Raises InvalidInput (malformed
    ids), NotFound (no such result in a session of this tenant), Forbidden (another owner's
    session for a reader, or above the principal's clearance) or IntegrityFailure.
    """
    number = _check_result_read(principal, session_id, result_ref)
    tenant = principal.tenant_id
    with store.read() as conn:
        result = _readable_result(conn, principal, session_id, result_ref, number)
        archived_at = conn.execute(
            select(t.archive_entries.c.archived_at).where(
                t.archive_entries.c.tenant_id == tenant,
                t.archive_entries.c.session_id == session_id,
                t.archive_entries.c.result_no == number,
            )
        ).scalar_one_or_none()
        readable = archived_at is None or principal.may_read_originals()
        content = shown(result, read_blob(conn, tenant, result.content_sha256)) if readable else None
    return result, archived_at, content


def get_result(
    store: ArchiveStore, principal: Principal, session_id: str, result_id: str, *, with_content: bool = False
) -> tuple[ToolResult, bytes | None]:
    """One result, and with `with_content` what it shows (its hash-verified original, an excerpt
    copy's excerpt), changing nothing: `recover` appends a copy, this only looks. The original is
    read only when asked. An archived original comes back only to a principal who may recover
    it (Forbidden otherwise, as `recover` answers); NotFound, Forbidden and IntegrityFailure as
    `read_result`."""
    number = _check_result_read(principal, session_id, result_id)
    with store.read() as conn:
        result = _readable_result(conn, principal, session_id, result_id, number)
        if not with_content:
            return result, None
        if result.state == "archived" and not principal.may_read_originals():
            raise Forbidden(
                f"reading the archived original of {session_id}/{result_id} (it comes back through "
                "recover, which needs the agent role)"
            )
        return result, shown(result, read_blob(conn, principal.tenant_id, result.content_sha256))


def _check_result_read(principal: Principal, session_id: str, result_ref: str) -> int:
    """Validate a read of one result before touching the store; its number."""
    principal.require(Role.READER, "reading a result")
    check_identifier("session_id", session_id)
    return parse_result_id(result_ref)


def _readable_result(
    conn: Connection, principal: Principal, session_id: str, result_ref: str, number: int
) -> ToolResult:
    """One result with its note, as this principal may read it (its session, its clearance),
    else NotFound or Forbidden: the rule `read_result` and `get_result` share."""
    readable_session(conn, principal, session_id)
    found = _results_with_notes(conn, principal.tenant_id, session_id, number)
    if not found:
        raise NotFound("result", f"{session_id}/{result_ref}")
    result = found[0]
    principal.require_clearance(result.sensitivity, f"reading {session_id}/{result_ref}")
    return result


# ---- listing -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SessionInfo:
    """One session as a listing shows it: who it is about and how many results it holds."""

    session_id: str
    owner: str
    created_at: datetime
    results: int
    live: int
    archived: int


def list_sessions(
    store: ArchiveStore, principal: Principal, *, limit: int = 1000, offset: int = 0
) -> list[SessionInfo]:
    """The tenant's sessions, oldest first (deleted ones never); a user sees only sessions
    about itself, as with `live_view`. At most `limit` (1 to 10,000), after the first `offset`."""
    principal.require(Role.READER, "listing sessions")
    check_list_limit(limit)
    check_offset(offset)
    tenant = principal.tenant_id
    stmt = (
        select(t.sessions.c.session_id, t.sessions.c.owner, t.sessions.c.created_at)
        .where(t.sessions.c.tenant_id == tenant, t.sessions.c.deleted_at.is_(None))
        .order_by(t.sessions.c.created_at, t.sessions.c.session_id)
    )
    if not principal.has(Role.AGENT):
        stmt = stmt.where(t.sessions.c.owner == principal.subject)
    with store.read() as conn:
        return _with_counts(conn, tenant, list(conn.execute(stmt.limit(limit).offset(offset))))


def session_info(store: ArchiveStore, principal: Principal, session_id: str) -> SessionInfo:
    """One session as `list_sessions` shows it; NotFound (another tenant's, or none) or
    Forbidden (a reader's not about itself) as for `live_view`."""
    principal.require(Role.READER, "reading a session")
    check_identifier("session_id", session_id)
    with store.read() as conn:
        row = readable_session(conn, principal, session_id)
        return _with_counts(conn, principal.tenant_id, [row])[0]


def _with_counts(conn: Connection, tenant: str, rows: list[Row[Any]]) -> list[SessionInfo]:
    """Sessions (id, owner, created_at rows) with their live and archived result counts."""
    listed = [r.session_id for r in rows]
    counts: dict[tuple[str, str], int] = {}
    for row in conn.execute(
        select(t.tool_results.c.session_id, t.tool_results.c.state, func.count().label("results"))
        .where(t.tool_results.c.tenant_id == tenant, t.tool_results.c.session_id.in_(listed))
        .group_by(t.tool_results.c.session_id, t.tool_results.c.state)
    ):
        counts[(row.session_id, row.state)] = row.results
    return [
        SessionInfo(
            r.session_id,
            r.owner,
            r.created_at,
            counts.get((r.session_id, "live"), 0) + counts.get((r.session_id, "archived"), 0),
            counts.get((r.session_id, "live"), 0),
            counts.get((r.session_id, "archived"), 0),
        )
        for r in rows
    ]


__all__ = [
    "Forbidden",
    "SessionInfo",
    "archive",
    "get_result",
    "list_sessions",
    "live_view",
    "read_result",
    "record",
    "recover",
    "session_info",
]
