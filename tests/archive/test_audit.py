"""The audit chain: every archive, recover, evidence write, retract, delete and denied access
appends an event; `verify_audit` passes an untouched chain and names any edited, removed or
reordered event; chains are per tenant; only admins verify."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import ManualWallClock
from sqlalchemy import delete, select, update

from mnemo_sea.archive import Archive, EvidenceInput, Forbidden, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import audit as audit_module
from mnemo_sea.archive.storage import schema as t


def build_history(archive: Archive, agent: Principal, admin: Principal) -> None:
    """Six events in the agent's tenant: archive, recover, put_evidence, retract, denied, delete."""
    archive.record(agent, "s1", "orders.lookup", "order O-1042: shipped")
    archive.archive_results(agent, "s1", [("r1", "order shipped")])
    archive.recover(agent, "s1", "r1")
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v1", source="doc"))
    archive.retract(agent, "kb", "outdated")
    with pytest.raises(Forbidden):
        archive.delete_evidence(agent, "kb")
    archive.delete_evidence(admin, "kb")


def test_each_transition_appends_an_event(archive: Archive, agent: Principal, admin: Principal) -> None:
    build_history(archive, agent, admin)
    events = archive.audit_events(admin)
    assert [(e.seq, e.action, e.actor, e.target) for e in events] == [
        (1, "archive", "agent-1", "session:s1"),
        (2, "recover", "agent-1", "session:s1/r1"),
        (3, "put_evidence", "agent-1", "evidence:kb@1"),
        (4, "retract", "agent-1", "evidence:kb@1"),
        (5, "denied", "agent-1", "evidence:kb"),
        (6, "delete", "admin-1", "evidence:kb"),
    ]
    assert events[0].detail["results"] == ["r1"]
    assert events[1].detail["appended_as"] == "r2"
    assert events[2].detail == {
        "count": 1,
        "versions": ["kb@1"],
        "versions_sha256": hashlib.sha256(b"kb@1").hexdigest(),
    }
    assert events[3].detail == {"reason": "outdated"}
    assert events[4].detail["action"] == "delete" and "admin" in events[4].detail["reason"]
    assert events[5].detail["evidence_versions"] == 1
    assert all(e.at.tzinfo is not None for e in events)
    assert [e.at for e in events] == sorted(e.at for e in events)
    # Paging.
    assert [e.seq for e in archive.audit_events(admin, after_seq=2, limit=2)] == [3, 4]
    # A record's versions are found by target: the put that made kb@1, then its retraction.
    assert [e.action for e in archive.find_audit_events(admin, target="evidence:kb@1")] == [
        "retract",
        "put_evidence",
    ]


def test_an_untouched_chain_verifies(archive: Archive, agent: Principal, admin: Principal) -> None:
    report = archive.verify_audit(admin)
    assert report.ok and report.events == 0 and report.tenant_id == "clinic-a"
    build_history(archive, agent, admin)
    report = archive.verify_audit(admin)
    assert report.ok, report.problems
    assert report.events == 6 and report.problems == ()

    # Each stored row links to its predecessor and the head names the newest.
    rows, head = chain_rows(archive, "clinic-a")
    assert rows[0]["prev_hash"] == "0" * 64
    assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(rows))
    assert len({r["hash"] for r in rows}) == len(rows)
    assert head is not None and (head["last_seq"], head["last_hash"]) == (6, rows[-1]["hash"])

    # Whatever an event records (non-ASCII details, a target longer than the column) verifies.
    archive.record(agent, "s2", "t", "x")
    archive.archive_results(agent, "s2", [("r1", "订单已发货 — shipped")])
    reader = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    with pytest.raises(Forbidden):
        archive.record(reader, "s" * 2000, "t", "x")  # the role check comes first; the target is long
    with pytest.raises(Forbidden):  # a memory key is capped before any check (limits.py): the owner is long
        archive.remember(reader, "u" * 128, "k" * 100, "v", "user_claim")
    assert [e.action for e in archive.audit_events(admin)][-3:] == ["archive", "denied", "denied"]
    report = archive.verify_audit(admin)
    assert report.ok, report.problems
    assert report.events == 9


Row = dict[str, Any]


def chain_rows(archive: Archive, tenant: str) -> tuple[list[Row], Row | None]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.audit_events).where(t.audit_events.c.tenant_id == tenant).order_by(t.audit_events.c.seq)
        ).all()
        head = conn.execute(select(t.audit_heads).where(t.audit_heads.c.tenant_id == tenant)).first()
    return [dict(r._mapping) for r in rows], (dict(head._mapping) if head is not None else None)


def restore(archive: Archive, tenant: str, rows: list[Row], head: Row | None) -> None:
    with archive.store.write() as conn:
        conn.execute(delete(t.audit_events).where(t.audit_events.c.tenant_id == tenant))
        conn.execute(delete(t.audit_heads).where(t.audit_heads.c.tenant_id == tenant))
        if rows:
            conn.execute(t.audit_events.insert(), rows)
        if head is not None:
            conn.execute(t.audit_heads.insert().values(**head))


def tamper(archive: Archive, *statements: Any) -> None:
    with archive.store.write() as conn:
        for statement in statements:
            conn.execute(statement)


def event(seq: int) -> Any:
    c = t.audit_events.c
    return (c.tenant_id == "clinic-a") & (c.seq == seq)


def altered(seq: int) -> str:
    return f"event {seq} was altered (its content no longer matches its hash)"


TAMPERING: list[tuple[str, list[Any], Callable[[tuple[str, ...]], bool]]] = [
    (
        "edited detail",
        [update(t.audit_events).where(event(4)).values(detail_json='{"reason":"routine"}')],
        lambda p: p == (altered(4),),
    ),
    (
        "edited versions of an evidence write",
        [update(t.audit_events).where(event(3)).values(detail_json='{"count":1,"versions":["kb@2"]}')],
        lambda p: p == (altered(3),),
    ),
    (
        "edited actor",
        [update(t.audit_events).where(event(6)).values(actor="someone-else")],
        lambda p: p == (altered(6),),
    ),
    (
        "edited action",
        [update(t.audit_events).where(event(5)).values(action="recover")],
        lambda p: p == (altered(5),),
    ),
    (
        "edited target",
        [update(t.audit_events).where(event(1)).values(target="session:other")],
        lambda p: p == (altered(1),),
    ),
    (
        "edited time",
        [update(t.audit_events).where(event(2)).values(at=datetime(2020, 1, 1, tzinfo=UTC))],
        lambda p: p == (altered(2),),
    ),
    (
        "edited hash",
        [update(t.audit_events).where(event(2)).values(hash="f" * 64)],
        lambda p: altered(2) in p and "event 3 does not link to event 2 (previous hash differs)" in p,
    ),
    (
        "removed middle event",
        [delete(t.audit_events).where(event(3))],
        lambda p: p == ("event 3 is missing (next stored event is 4)",),
    ),
    (
        "removed two middle events",
        [delete(t.audit_events).where(event(2)), delete(t.audit_events).where(event(3))],
        lambda p: p == ("events 2-3 are missing (next stored event is 4)",),
    ),
    (
        "removed event and edited a later one",
        [
            delete(t.audit_events).where(event(2)),
            update(t.audit_events).where(event(4)).values(detail_json="{}"),
        ],
        lambda p: p == ("event 2 is missing (next stored event is 3)", altered(4)),
    ),
    (
        "removed newest event",
        [delete(t.audit_events).where(event(6))],
        lambda p: p == ("the chain head names event 6 but the chain ends at event 5",),
    ),
    (
        "removed chain head",
        [delete(t.audit_heads).where(t.audit_heads.c.tenant_id == "clinic-a")],
        lambda p: p == ("the chain head is missing",),
    ),
    (
        "wiped chain",
        [delete(t.audit_events).where(t.audit_events.c.tenant_id == "clinic-a")],
        lambda p: p == ("the chain head names event 6 but the chain ends at event 0",),
    ),
    (
        "reordered events",
        [
            update(t.audit_events).where(event(2)).values(seq=1000),
            update(t.audit_events).where(event(3)).values(seq=2),
            update(t.audit_events).where(event(1000)).values(seq=3),
        ],
        lambda p: any(x.startswith("event 2 ") for x in p) and any(x.startswith("event 3 ") for x in p),
    ),
]


def rehashed_newest(rows: list[Row]) -> list[Any]:
    """Rewrite the newest event and give it a hash that is valid for its new content."""
    newest = dict(rows[-1], actor="someone-else")
    digest = audit_module._event_hash(
        newest["tenant_id"],
        newest["seq"],
        newest["at"],
        newest["actor"],
        newest["action"],
        newest["target"],
        newest["detail_json"],
        newest["prev_hash"],
    )
    return [update(t.audit_events).where(event(newest["seq"])).values(actor="someone-else", hash=digest)]


def test_tampering_is_detected_and_named(archive: Archive, agent: Principal, admin: Principal) -> None:
    build_history(archive, agent, admin)
    rows, head = chain_rows(archive, "clinic-a")
    cases = [
        *TAMPERING,
        (
            "newest event rewritten with a fresh hash",
            rehashed_newest(rows),
            lambda p: p == ("event 6 is not the event the chain head recorded (its hash differs)",),
        ),
    ]
    for name, statements, expected in cases:
        tamper(archive, *statements)
        report = archive.verify_audit(admin)
        assert not report.ok, name
        assert expected(report.problems), (name, report.problems)
        restore(archive, "clinic-a", rows, head)
        assert archive.verify_audit(admin).ok, name  # the untouched chain verifies again


def test_new_events_after_tampering_do_not_heal_the_chain(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    build_history(archive, agent, admin)
    tamper(archive, delete(t.audit_events).where(event(6)))
    archive.record(agent, "s2", "t", "x")
    archive.archive_results(agent, "s2", [("r1", "note")])
    report = archive.verify_audit(admin)
    assert report.problems == ("event 6 is missing (next stored event is 7)",)
    assert report.events == 6  # 1-5 and the new 7


def test_chains_are_per_tenant(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    build_history(archive, agent, admin)
    archive.record(other_tenant, "s1", "t", "theirs")
    archive.archive_results(other_tenant, "s1", [("r1", "theirs")])
    archive.recover(other_tenant, "s1", "r1")

    # Each tenant sees only its own events, numbered from 1.
    theirs = archive.audit_events(other_tenant)
    assert [(e.seq, e.action, e.actor) for e in theirs] == [
        (1, "archive", "agent-9"),
        (2, "recover", "agent-9"),
    ]
    assert [e.seq for e in archive.audit_events(admin)] == [1, 2, 3, 4, 5, 6]

    tamper(
        archive,
        update(t.audit_events)
        .where(t.audit_events.c.tenant_id == "clinic-a", t.audit_events.c.seq == 1)
        .values(target="session:other"),
    )
    assert not archive.verify_audit(admin).ok
    report_b = archive.verify_audit(other_tenant)
    assert report_b.ok and report_b.events == 2 and report_b.tenant_id == "shop-b"

    # And the other way round: B's chain edited, A's report is only about A.
    tamper(
        archive,
        delete(t.audit_events).where(t.audit_events.c.tenant_id == "shop-b", t.audit_events.c.seq == 2),
    )
    assert not archive.verify_audit(other_tenant).ok
    assert archive.verify_audit(admin).problems == (
        "event 1 was altered (its content no longer matches its hash)",
    )


def test_only_admins_verify_or_read_the_chain(archive: Archive, agent: Principal, admin: Principal) -> None:
    reader = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    for who in (agent, reader):
        with pytest.raises(Forbidden) as err:
            archive.verify_audit(who)
        assert err.value.detail["needed_role"] == "admin"
        with pytest.raises(Forbidden):
            archive.audit_events(who)
    events = archive.audit_events(admin)
    assert [(e.action, e.actor, e.target, e.detail["action"]) for e in events] == [
        ("denied", "agent-1", "audit", "verify_audit"),
        ("denied", "agent-1", "audit", "audit_events"),
        ("denied", "user-7", "audit", "verify_audit"),
        ("denied", "user-7", "audit", "audit_events"),
    ]
    assert archive.verify_audit(admin).ok


def test_events_are_found_by_kind_subject_target_and_time_newest_first(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal, wall_clock: ManualWallClock
) -> None:
    """`find_audit_events` filters in SQL, within the caller's tenant, and pages by seq downwards."""
    start = wall_clock.now
    build_history(
        archive, agent, admin
    )  # 1 archive, 2 recover, 3 put_evidence, 4 retract, 5 denied, 6 delete
    wall_clock.advance(3600)
    middle = wall_clock.now
    archive.record(agent, "S-2", "t", "x")
    archive.archive_results(agent, "S-2", [("r1", "later")])  # 7 archive, an hour on
    archive.record(other_tenant, "s1", "t", "theirs")
    archive.archive_results(other_tenant, "s1", [("r1", "theirs")])  # shop-b's own event 1

    def seqs(**filters: Any) -> list[int]:
        return [e.seq for e in archive.find_audit_events(admin, **filters)]

    assert seqs() == [7, 6, 5, 4, 3, 2, 1]  # newest first, this tenant's only
    assert seqs(action="archive") == [7, 1]
    assert seqs(action="put_evidence") == [3]
    assert seqs(actor="admin-1") == [6]
    assert seqs(target="session:s1") == [1]  # exactly: session:s1/r1 (the recover) is another target
    assert seqs(target_contains="S1") == [2, 1]  # a substring, letter case ignored
    assert seqs(target_contains="s-2") == [7]
    assert seqs(target_contains="100%_") == []  # LIKE's wildcards are plain characters
    assert seqs(since=middle) == [7]
    assert seqs(until=middle) == [6, 5, 4, 3, 2, 1]
    assert seqs(since=start, until=middle, action="archive") == [1]
    assert seqs(before_seq=4, limit=2) == [3, 2]  # the next page after 4
    assert seqs(before_seq=2) == [1]
    found = archive.find_audit_events(admin, action="denied")
    assert [(e.actor, e.target, e.detail["action"]) for e in found] == [("agent-1", "evidence:kb", "delete")]
    assert [e.seq for e in archive.find_audit_events(other_tenant, action="archive")] == [1]

    for bad in ({"since": datetime(2026, 1, 1)}, {"action": ""}, {"actor": "a" * 129}, {"before_seq": 0}):
        with pytest.raises(InvalidInput):
            archive.find_audit_events(admin, **bad)
    with pytest.raises(Forbidden):
        archive.find_audit_events(agent)
    assert archive.verify_audit(admin).ok
