"""Task state: a structured, versioned record per session of what the agent is doing.

A version holds the goal, the facts the agent holds as confirmed (each citing evidence), what is
still unresolved, the constraints it works under, the operations it started whose outcome is not
known yet, a reference to the raw trace it was condensed from, and what it released from the
previous version (with reasons). It is derived text, never evidence, and labelled so.

Invariants:
- a version is never overwritten: a write inserts version n+1 and marks n superseded; the old
  versions stay readable (only the deletion cascade rewrites them, below);
- every write is validated whole, against the current version, inside the transaction that
  inserts the next one (`store.write()`); any problem refuses it, nothing is stored, and the one
  error (TaskStateRejected) lists every problem found;
- a confirmed fact cites evidence the writer may read: an evidence record (or one version of it),
  a tool result or a current memory fact. A summary is derived, never evidence;
- nothing of the previous version disappears unnoticed. A constraint goes only when released
  with a reason. An open item (unresolved or pending) goes only when a confirmed fact naming it
  in `resolves` settles it with evidence, or when released with a reason: an unknown state never
  becomes definite by rewording it ("delivery status unknown" edited into "delivery failed" is a
  drop of the old item);
- a confirmed fact carried over unchanged keeps the evidence version it first resolved to, so a
  reader can tell a fact that rests on a version superseded since;
- deleting anything a confirmed fact cites removes that fact from every version, since the fact
  may repeat what was deleted, and reopens what it settled up to the current version, which a
  new audited version then supersedes (task_state_cascade.py, called by the deletion cascade).

The rules themselves are pure functions (task_state_rules.py); this module resolves the cited ids
in the writing transaction, stores, reads, and rewrites versions for the deletion cascade.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, not_, select, update

from ..rules.clock import utcnow
from ..rules.errors import Forbidden, InvalidInput, NotFound, StateConflict, TaskStateRejected
from ..rules.in_force import expired_clause
from ..rules.operations import UpdateTaskStateOp
from ..rules.principal import Principal, Role, Sensitivity, check_identifier
from ..rules.records import ConfirmedFact, ReleasedItem, TaskState
from ..rules.refs import (
    EVIDENCE_REF_PREFIX,
    SUMMARY_PREFIX,
    MemoryIndexId,
    ResultIndexId,
    evidence_ref,
    memory_ref,
)
from ..rules.task_state_rules import (
    Claim,
    Proposal,
    Resolution,
    check_update,
    cited_memory,
    cited_result,
    parse_proposal,
    release_kind,
    split_versioned,
)
from ..rules.tool_results import parse_result_id
from ..storage import schema as t
from ..storage.idempotency import keyed, previous_reply, save_reply
from ..storage.locks import lock_chain
from ..storage.session_rows import open_session, readable_session
from ..storage.sources import source_owner
from ..storage.store import ArchiveStore

_NOT_FOUND = (
    "does not resolve to anything you can cite: no active evidence record, stored version (X@v), "
    "tool result (result:<session>/<rN>) or current memory fact (memory:<owner>/<key>) by that id"
)


# ---- resolving cited ids (reads the database) ----------------------------------------------


def _split_result(named: ResultIndexId) -> tuple[str, int] | None:
    """The session and result number a result citation names, if both are well-formed."""
    try:
        check_identifier("session_id", named.session_id)
        return named.session_id, parse_result_id(named.result_id)
    except InvalidInput:
        return None


def _lock_cited(conn: Connection, tenant: str, claims: Iterable[Claim]) -> None:
    """Take the locks a deletion takes on what the claims cite, in the order deletions take them
    (sessions, then evidence and memory chains; each kind sorted): a deletion of a cited record
    then either commits before this write resolves it (and it does not resolve) or waits until
    this write committed (and its cascade finds the new refs)."""
    sessions: set[str] = set()
    chains: set[tuple[str, ...]] = set()
    for claim in claims:
        eid = claim.evidence_id
        if eid is None or eid.startswith(SUMMARY_PREFIX):
            continue
        result, memory = cited_result(eid), cited_memory(eid)
        if result is not None:
            parsed = _split_result(result)
            if parsed is not None:
                sessions.add(parsed[0])
        elif memory is not None:
            chains.add(("memory", tenant, memory.owner, memory.key))
        else:
            chains.add(("evidence", tenant, eid))
            versioned = split_versioned(eid)
            if versioned is not None:
                chains.add(("evidence", tenant, versioned[0]))
    for session_id in sorted(sessions):
        # FOR KEY SHARE: a deletion of that session (which takes FOR UPDATE first) waits for this
        # write, while results recorded into it meanwhile (an UPDATE of a non-key column) do not.
        conn.execute(
            select(t.sessions.c.session_id)
            .where(t.sessions.c.tenant_id == tenant, t.sessions.c.session_id == session_id)
            .with_for_update(read=True, key_share=True)
        ).first()
    for key in sorted(chains):
        lock_chain(conn, *key)


def _evidence_row(conn: Connection, tenant: str, evidence_id: str, version: int | None) -> Row[Any] | None:
    stmt = select(t.evidence).where(t.evidence.c.tenant_id == tenant, t.evidence.c.evidence_id == evidence_id)
    stmt = (
        stmt.where(t.evidence.c.status == "active")
        if version is None
        else stmt.where(t.evidence.c.version == version)
    )
    return conn.execute(stmt).first()


def _granted(
    principal: Principal, ref: str, version: int | None, level: int, owner: str | None
) -> Resolution:
    sensitivity = Sensitivity(level)
    if not principal.can_read(sensitivity):
        needed, held = sensitivity.name.lower(), principal.clearance.name.lower()
        return Resolution(problem="evidence_forbidden", message=f"needs clearance {needed}; you have {held}")
    if owner is not None and not principal.may_act_for(owner):
        return Resolution(problem="evidence_forbidden", message="is another owner's data")
    return Resolution(ref=ref, version=version, sensitivity=sensitivity)


def _not_found() -> Resolution:
    # One message whether the id is missing or another tenant's: the answer is no oracle.
    return Resolution(problem="evidence_not_found", message=_NOT_FOUND)


def _resolve_result(conn: Connection, principal: Principal, named: ResultIndexId) -> Resolution:
    parsed = _split_result(named)
    if parsed is None:
        return _not_found()
    session_id, number = parsed
    tenant = principal.tenant_id
    session = conn.execute(
        select(t.sessions.c.owner).where(
            t.sessions.c.tenant_id == tenant,
            t.sessions.c.session_id == session_id,
            t.sessions.c.deleted_at.is_(None),
        )
    ).first()
    row = (
        None
        if session is None
        else conn.execute(
            select(t.tool_results.c.sensitivity).where(
                t.tool_results.c.tenant_id == tenant,
                t.tool_results.c.session_id == session_id,
                t.tool_results.c.result_no == number,
            )
        ).first()
    )
    if session is None or row is None:
        return _not_found()
    return _granted(principal, str(named), None, row.sensitivity, session.owner)


def _resolve_memory(
    conn: Connection, principal: Principal, named: MemoryIndexId, now: datetime, *, current: bool
) -> Resolution:
    """A memory fact: a new citation needs its current, unexpired version; a carried one only
    that the fact still exists (a purge or forget removes carried facts through the cascade)."""
    owner, key = named.owner, named.key
    stmt = select(t.memory_facts.c.version).where(
        t.memory_facts.c.tenant_id == principal.tenant_id,
        t.memory_facts.c.owner == owner,
        t.memory_facts.c.key == key,
    )
    if current:
        stmt = stmt.where(
            t.memory_facts.c.status == "active",
            not_(expired_clause(t.memory_facts.c.expires_at, now)),
        )
    if conn.execute(stmt.limit(1)).first() is None:
        return _not_found()
    # Memory has no sensitivity of its own: the index holds it as internal.
    return _granted(principal, memory_ref(owner, key), None, int(Sensitivity.INTERNAL), owner)


def _resolve_new(conn: Connection, principal: Principal, evidence_id: str, now: datetime) -> Resolution:
    tenant = principal.tenant_id
    if evidence_id.startswith(SUMMARY_PREFIX):
        return Resolution(
            problem="derived_not_evidence",
            message="a summary is derived text, not evidence: cite the records it was made from",
        )
    result, memory = cited_result(evidence_id), cited_memory(evidence_id)
    if result is not None:
        return _resolve_result(conn, principal, result)
    if memory is not None:
        return _resolve_memory(conn, principal, memory, now, current=True)
    row = _evidence_row(conn, tenant, evidence_id, None)
    if row is not None:
        return _granted(principal, evidence_ref(evidence_id), row.version, row.sensitivity, row.owner)
    versioned = split_versioned(evidence_id)
    if versioned is not None:
        base, version = versioned
        row = _evidence_row(conn, tenant, base, version)
        if row is not None and row.status == "retracted":
            # Withdrawn as wrong: a new fact (or the settling of an unknown) cannot rest on it.
            # A fact written before the retraction keeps it, and the context marks the conflict.
            found = _granted(principal, evidence_ref(base), version, row.sensitivity, row.owner)
            if not found.ok:
                return found
            return Resolution(
                problem="evidence_retracted",
                message=f"{base}@{version} was retracted: cite a version in force (a retracted one "
                "settles nothing)",
            )
        if row is not None:
            return _granted(principal, evidence_ref(base), version, row.sensitivity, row.owner)
    return _not_found()


def _resolve_carried(
    conn: Connection, principal: Principal, fact: ConfirmedFact, ref: str | None, now: datetime
) -> Resolution:
    """A fact carried over unchanged: it keeps the version it resolved to, which must still
    exist (a version retracted or superseded since still does; a deleted one does not)."""
    tenant = principal.tenant_id
    if ref is None:  # not written by this module: judged as a new citation
        return _resolve_new(conn, principal, fact.evidence_id, now)
    result, memory = cited_result(ref), cited_memory(ref)
    if result is not None:
        return _resolve_result(conn, principal, result)
    if memory is not None:
        return _resolve_memory(conn, principal, memory, now, current=False)
    evidence_id = ref.removeprefix(EVIDENCE_REF_PREFIX)
    row = _evidence_row(conn, tenant, evidence_id, fact.version)
    if row is None:
        return _not_found()
    return _granted(principal, ref, fact.version, row.sensitivity, row.owner)


# ---- storage -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stored:
    """A version as stored: the state, and the normalised ref of each confirmed fact."""

    state: TaskState
    refs: tuple[str | None, ...]


def _body(state: TaskState, refs: Sequence[str | None]) -> str:
    return json.dumps(
        {
            "goal": state.goal,
            "confirmed": [
                {
                    "fact": c.fact,
                    "evidence_id": c.evidence_id,
                    "version": c.version,
                    "resolves": c.resolves,
                    "ref": r,
                }
                for c, r in zip(state.confirmed, refs, strict=True)
            ],
            "unresolved": list(state.unresolved),
            "constraints": list(state.constraints),
            "pending_operations": list(state.pending_operations),
            "trace_ref": state.trace_ref,
            "released": [{"item": r.item, "kind": r.kind, "reason": r.reason} for r in state.released],
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def _from_row(row: Row[Any]) -> _Stored:
    body = json.loads(row.body_json)
    confirmed = body.get("confirmed", [])
    state = TaskState(
        session_id=row.session_id,
        version=row.version,
        goal=body["goal"],
        confirmed=tuple(
            ConfirmedFact(c["fact"], c["evidence_id"], c.get("version"), c.get("resolves"), c.get("ref"))
            for c in confirmed
        ),
        unresolved=tuple(body.get("unresolved", [])),
        constraints=tuple(body.get("constraints", [])),
        pending_operations=tuple(body.get("pending_operations", [])),
        trace_ref=body.get("trace_ref"),
        released=tuple(ReleasedItem(r["item"], r["kind"], r["reason"]) for r in body.get("released", [])),
        status="current" if row.superseded_at is None else "superseded",
        created_at=row.created_at,
        created_by=row.created_by,
        sensitivity=Sensitivity(row.sensitivity),
    )
    return _Stored(state, tuple(c.get("ref") for c in confirmed))


def _versions_stmt(tenant: str, session_id: str) -> Any:
    return (
        select(t.task_states)
        .where(t.task_states.c.tenant_id == tenant, t.task_states.c.session_id == session_id)
        .order_by(t.task_states.c.version)
    )


def _latest(conn: Connection, tenant: str, session_id: str) -> _Stored | None:
    row = conn.execute(
        select(t.task_states)
        .where(t.task_states.c.tenant_id == tenant, t.task_states.c.session_id == session_id)
        .order_by(t.task_states.c.version.desc())
        .limit(1)
    ).first()
    return None if row is None else _from_row(row)


def _one(conn: Connection, tenant: str, session_id: str, version: int) -> _Stored | None:
    row = conn.execute(
        select(t.task_states).where(
            t.task_states.c.tenant_id == tenant,
            t.task_states.c.session_id == session_id,
            t.task_states.c.version == version,
        )
    ).first()
    return None if row is None else _from_row(row)


def _lock_session(conn: Connection, tenant: str, session_id: str) -> None:
    """Hold the session row until commit: concurrent writers of one session's state take turns,
    and a deletion of the session waits for this write (or this write sees the tombstone).

    FOR NO KEY UPDATE, not FOR UPDATE: a deletion's cascade inserting a reopened version takes
    FOR KEY SHARE on this row (the foreign key) while holding the current version's row, which
    this write then waits for; FOR UPDATE would close that ring into a deadlock."""
    row = conn.execute(
        select(t.sessions.c.session_id)
        .where(
            t.sessions.c.tenant_id == tenant,
            t.sessions.c.session_id == session_id,
            t.sessions.c.deleted_at.is_(None),
        )
        .with_for_update(key_share=True)
    ).first()
    if row is None:
        raise StateConflict(
            f"session {session_id!r} was deleted; its ids are never reused, so write into a new session",
            session_id=session_id,
        )


def _check_version(field: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= 2**31 - 1:
        raise InvalidInput(field, f"must be an integer of at least {minimum}, got {value!r}")
    return value


# ---- write ---------------------------------------------------------------------------------


def update_task_state(
    store: ArchiveStore,
    principal: Principal,
    session_id: str,
    op: UpdateTaskStateOp,
    *,
    idempotency_key: str | None = None,
) -> TaskState:
    """Write the next version of the session's task state; returns it (status current).

    The session is created when absent, as `record` creates it (`owner` as there). The update
    is validated whole against the current version (module docstring); any problem raises
    TaskStateRejected listing them all (field, item, problem, message), and nothing is stored.
    `confirmed` items are {fact, evidence_id, resolves?} (or ConfirmedFact); `release` items
    {item, reason}, the kind taken from where the item was in the previous version.

    `expected_version` (0: no state yet) makes the write conditional: StateConflict, with
    `current_version` in its detail, when another version is current. Raises Forbidden without
    the agent role or when the current version is above the caller's clearance (its problems
    would repeat it), StateConflict for a deleted session or one about another `owner`.
    With an idempotency key, repeating the same call returns the version it first wrote
    (NotFound if deleted since) and writes nothing; reusing the key for another request
    raises IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "writing a task state")
    owner, expected_version = op.owner, op.expected_version
    check_identifier("session_id", session_id)
    if owner is not None:
        check_identifier("owner", owner)
    expected = (
        None if expected_version is None else _check_version("expected_version", expected_version, minimum=0)
    )
    proposal, problems = parse_proposal(
        goal=op.goal,
        confirmed=op.confirmed,
        unresolved=op.unresolved,
        constraints=op.constraints,
        pending_operations=op.pending_operations,
        trace_ref=op.trace_ref,
        release=op.release,
    )
    tenant = principal.tenant_id
    # A request with problems stores nothing, so its key has nothing to answer with; a valid
    # retry of a successful call always parses without problems.
    operation = {**proposal.request(), "session_id": session_id, "owner": owner, "expected_version": expected}
    request = keyed(principal, idempotency_key, "update_task_state", operation) if not problems else None
    if problems and idempotency_key is not None:
        check_identifier("idempotency_key", idempotency_key)

    with store.write() as conn:
        replay = previous_reply(conn, request)
        if replay is not None:
            return _replayed(conn, principal, replay["session_id"], int(replay["version"]))
        open_session(conn, principal, session_id, owner, utcnow())
        _lock_session(conn, tenant, session_id)
        now = utcnow()  # after the lock: versions of one session are stamped in commit order
        latest = _latest(conn, tenant, session_id)
        previous = None if latest is None else latest.state
        if previous is not None:
            principal.require_clearance(
                previous.sensitivity, f"updating the task state of {session_id} (its current version)"
            )
        current_version = 0 if previous is None else previous.version
        if expected is not None and expected != current_version:
            raise StateConflict(
                f"the task state of {session_id!r} is at version {current_version}, not {expected}: "
                "read it and write again on top of it",
                session_id=session_id,
                current_version=current_version,
                expected_version=expected,
            )
        resolved = _resolve_claims(conn, principal, proposal, latest, now)
        problems += check_update(previous, proposal, resolved)
        if problems:
            raise TaskStateRejected(problems)
        state, refs = _next_version(
            principal, session_id, proposal, previous, resolved, current_version + 1, now
        )
        if previous is not None:
            superseded = conn.execute(
                update(t.task_states)
                .where(
                    t.task_states.c.tenant_id == tenant,
                    t.task_states.c.session_id == session_id,
                    t.task_states.c.version == previous.version,
                    t.task_states.c.superseded_at.is_(None),
                )
                .values(superseded_at=now)
            )
            if superseded.rowcount != 1:
                # A deletion's cascade committed a version reopening items meanwhile (it holds
                # the current row, not the session's, and supersedes it in the same way).
                raise StateConflict(
                    f"the task state of {session_id!r} changed while this write was checked (a "
                    "deletion reopened items): read it and write again on top of it",
                    session_id=session_id,
                    current_version=current_version + 1,
                    expected_version=current_version,
                )
        conn.execute(
            t.task_states.insert().values(
                tenant_id=tenant,
                session_id=session_id,
                version=state.version,
                body_json=_body(state, refs),
                created_at=now,
                created_by=principal.subject,
                sensitivity=int(state.sensitivity),
                superseded_at=None,
            )
        )
        distinct = sorted({r for r in refs if r is not None})
        if distinct:
            conn.execute(
                t.task_state_refs.insert(),
                [
                    {"tenant_id": tenant, "session_id": session_id, "version": state.version, "ref": r}
                    for r in distinct
                ],
            )
        save_reply(conn, request, {"session_id": session_id, "version": state.version})
        return state


def _resolve_claims(
    conn: Connection, principal: Principal, proposal: Proposal, latest: _Stored | None, now: datetime
) -> dict[int, Resolution]:
    carried: dict[tuple[str, str], tuple[ConfirmedFact, str | None]] = {}
    if latest is not None:
        for fact, ref in zip(latest.state.confirmed, latest.refs, strict=True):
            carried[(fact.fact, fact.evidence_id)] = (fact, ref)
    _lock_cited(conn, principal.tenant_id, proposal.confirmed)
    out: dict[int, Resolution] = {}
    for claim in proposal.confirmed:
        if claim.evidence_id is None:
            continue
        before = carried.get((claim.fact, claim.evidence_id))
        out[claim.index] = (
            _resolve_new(conn, principal, claim.evidence_id, now)
            if before is None
            else _resolve_carried(conn, principal, before[0], before[1], now)
        )
    return out


def _next_version(
    principal: Principal,
    session_id: str,
    proposal: Proposal,
    previous: TaskState | None,
    resolved: Mapping[int, Resolution],
    version: int,
    now: datetime,
) -> tuple[TaskState, list[str | None]]:
    confirmed: list[ConfirmedFact] = []
    refs: list[str | None] = []
    for claim in proposal.confirmed:
        assert claim.evidence_id is not None  # a claim without one was a problem
        r = resolved[claim.index]
        confirmed.append(ConfirmedFact(claim.fact, claim.evidence_id, r.version, claim.resolves, r.ref))
        refs.append(r.ref)
    released = []
    for item in proposal.release:
        kind = release_kind(previous, item.item)
        assert kind is not None  # an unknown item was a problem
        released.append(ReleasedItem(item.item, kind, item.reason))
    sensitivity = max([Sensitivity.INTERNAL, *(r.sensitivity for r in resolved.values())])
    state = TaskState(
        session_id=session_id,
        version=version,
        goal=proposal.goal,
        confirmed=tuple(confirmed),
        unresolved=proposal.unresolved,
        constraints=proposal.constraints,
        pending_operations=proposal.pending_operations,
        trace_ref=proposal.trace_ref,
        released=tuple(released),
        status="current",
        created_at=now,
        created_by=principal.subject,
        sensitivity=sensitivity,
    )
    return state, refs


def _replayed(conn: Connection, principal: Principal, session_id: str, version: int) -> TaskState:
    found = _one(conn, principal.tenant_id, session_id, version)
    if found is None:
        raise NotFound("task state", f"{session_id}@{version}")
    principal.require_clearance(found.state.sensitivity, f"reading the task state of {session_id}")
    # The write answers with the version it made current; superseding it later is a later state.
    return replace(found.state, status="current")


# ---- read ----------------------------------------------------------------------------------


def task_state(
    store: ArchiveStore, principal: Principal, session_id: str, *, version: int | None = None
) -> TaskState | None:
    """The session's current task state (or the given version); None when it has none yet.

    A user reads only sessions about itself, as with `live_view`. Raises NotFound for a missing
    (or deleted, or another tenant's) session or version, Forbidden for another owner's session
    or a version above the caller's clearance.
    """
    principal.require(Role.READER, "reading a task state")
    check_identifier("session_id", session_id)
    wanted = None if version is None else _check_version("version", version, minimum=1)
    tenant = principal.tenant_id
    with store.read() as conn:
        readable_session(conn, principal, session_id)
        found = (
            _latest(conn, tenant, session_id) if wanted is None else _one(conn, tenant, session_id, wanted)
        )
        others = found is not None and _repeats_another_owner(conn, principal, found.refs)
    if found is None:
        if wanted is None:
            return None
        raise NotFound("task state", f"{session_id}@{wanted}")
    principal.require_clearance(found.state.sensitivity, f"reading the task state of {session_id}")
    if others:
        raise Forbidden(
            f"reading the task state of {session_id}: it repeats another owner's data",
            session_id=session_id,
        )
    return found.state


def task_state_history(store: ArchiveStore, principal: Principal, session_id: str) -> list[TaskState]:
    """Every version of the session's task state, oldest first (empty: none yet).

    Versions above the caller's clearance are left out (their numbers show the gap); reading
    one by number raises Forbidden. Access otherwise as for `task_state`.
    """
    principal.require(Role.READER, "reading a task state")
    check_identifier("session_id", session_id)
    with store.read() as conn:
        readable_session(conn, principal, session_id)
        stored = [_from_row(r) for r in conn.execute(_versions_stmt(principal.tenant_id, session_id))]
        return [
            v.state
            for v in stored
            if principal.can_read(v.state.sensitivity) and not _repeats_another_owner(conn, principal, v.refs)
        ]


def _repeats_another_owner(conn: Connection, principal: Principal, refs: Sequence[str | None]) -> bool:
    """Whether a version cites data of an owner the principal may not act for. Agents act for
    every owner; a user reading its own session must not find another owner's facts repeated in
    it (the rule summaries keep: see sources.source_owner)."""
    if principal.has(Role.AGENT):
        return False
    cited = [r for r in refs if r is not None]
    memories = [m for m in map(cited_memory, cited) if m is not None]
    owners = {m.owner for m in memories}
    other = source_owner(conn, principal.tenant_id, [r for r in cited if cited_memory(r) is None])
    if other is not None:
        owners.add(other)
    return any(not principal.may_act_for(owner) for owner in owners)
