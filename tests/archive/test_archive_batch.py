"""`archive(batch)`: whole-batch validation, all-or-nothing, idempotency, audit and outbox rows.

Every test runs on SQLite and PostgreSQL (the `archive` fixture). "Nothing changed" is
checked on every table of the session archive, audit and outbox included.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from sqlalchemy import Table, select

from mnemo_sea.archive import (
    Archive,
    ArchiveConflict,
    ArchivePolicy,
    ArchiveTarget,
    BatchRejected,
    Forbidden,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.storage import schema as t

ALL_TABLES: tuple[Table, ...] = (
    t.sessions,
    t.tool_results,
    t.archive_entries,
    t.blobs,
    t.outbox,
    t.idempotency_keys,
    t.audit_events,
    t.audit_heads,
)
PROTECTED = ("user_confirmed_fact", "prescription_basis", "approval_record", "vet_approval")


def snapshot(archive: Archive) -> dict[str, Any]:
    """Every row of every session-archive table: equal snapshots mean nothing was written."""
    with archive.store.read() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in ALL_TABLES
        }


def with_policy(archive: Archive, **limits: Any) -> Archive:
    return Archive(dataclasses.replace(archive.store, policy=ArchivePolicy(**limits)))


def states(
    archive: Archive, principal: Principal, session_id: str = "s1"
) -> dict[str, tuple[str, str | None]]:
    return {r.result_id: (r.state, r.note) for r in archive.list_results(principal, session_id)}


def outbox_rows(archive: Archive) -> list[Any]:
    with archive.store.read() as conn:
        return list(conn.execute(select(t.outbox).order_by(t.outbox.c.id)))


def audit_actions(archive: Archive, admin: Principal) -> list[str]:
    return [e.action for e in archive.audit_events(admin)]


def record_n(archive: Archive, principal: Principal, n: int, session_id: str = "s1") -> None:
    for i in range(n):
        archive.record(principal, session_id, f"tool.{i}", f"original {i} of {session_id}")


# ---- validation: every target's status -------------------------------------------------------


def test_rejection_names_every_targets_status_and_changes_nothing(archive: Archive, agent: Principal) -> None:
    low = Principal("clinic-a", "agent-low", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    # r1..r11, r14, r15 live and ordinary; r12 protected; r13 confidential (above `low`'s clearance).
    record_n(archive, agent, 11)
    archive.record(
        agent,
        "s1",
        "owner.confirm",
        "owner confirmed: allergy to penicillin",
        policy_class="user_confirmed_fact",
    )
    archive.record(agent, "s1", "lab.report", "confidential lab values", sensitivity="confidential")
    record_n(archive, agent, 2)  # r14, r15
    archive.archive_results(agent, "s1", [("r2", "already set aside")])
    max_note = archive.policy.max_note_chars
    batch: list[tuple[str, str]] = [
        ("r1", "fine"),
        ("r99", "never issued"),
        ("x1", "not an id"),
        ("r0", "ids start at r1"),
        ("r01", "leading zero"),
        ("R3", "upper case"),
        (" r3", "leading space"),
        ("r3", "first mention is fine"),
        ("r3", "second mention"),
        ("r2", "again"),
        ("r4", ""),
        ("r5", "  \n\t "),
        ("r6", "n" * (max_note + 1)),
        ("r7", "bell\x07"),
        ("r8", "nul\x00"),
        ("r9", "escape \x1b[2J"),
        ("r14", "c1 next-line \x85"),
        ("r15", "lone \ud800 surrogate"),
        ("r12", "protected"),
        ("r13", "above clearance"),
        ("r10", "x" * max_note),  # exactly at the limit: fine
        ("r11", "multi-line\nnote\twith tab"),  # newlines and tabs are allowed in notes
    ]
    before = snapshot(archive)
    with pytest.raises(BatchRejected) as err:
        archive.archive_results(low, "s1", batch, idempotency_key="first-try")
    assert not isinstance(err.value, ArchiveConflict)
    got = [(s.result_id, s.status) for s in err.value.targets]
    assert got == [
        ("r1", "ok"),
        ("r99", "unknown"),
        ("x1", "malformed"),
        ("r0", "malformed"),
        ("r01", "malformed"),
        ("R3", "malformed"),
        (" r3", "malformed"),
        ("r3", "ok"),
        ("r3", "duplicate"),
        ("r2", "already_archived"),
        ("r4", "empty_note"),
        ("r5", "empty_note"),
        ("r6", "note_too_long"),
        ("r7", "note_has_control_chars"),
        ("r8", "note_has_control_chars"),
        ("r9", "note_has_control_chars"),
        ("r14", "note_has_control_chars"),
        ("r15", "note_invalid_text"),
        ("r12", "protected"),
        ("r13", "forbidden"),
        ("r10", "ok"),
        ("r11", "ok"),
    ]
    assert all(s.message for s in err.value.targets)
    # The structured detail carries the same statuses; the message names every bad target.
    detail = err.value.to_dict()
    assert detail["code"] == "batch_rejected"
    assert [d["status"] for d in detail["targets"]] == [s for _, s in got]
    for rid, status in got:
        if status != "ok":
            assert f"{rid}: {status}" in err.value.message
    # Nothing changed: not the states, not the notes, no outbox, no idempotency key. The one
    # audit event added is the denied access to r13, which is above `low`'s clearance.
    after = snapshot(archive)
    audit_tables = ("audit_events", "audit_heads")
    assert {k: v for k, v in after.items() if k not in audit_tables} == {
        k: v for k, v in before.items() if k not in audit_tables
    }
    columns = [c.name for c in t.audit_events.columns]
    # The rows that were not there before (a seq numbers one chain, and a new SQLite archive
    # also holds the deployment chain's key creation).
    old_rows = set(before["audit_events"])
    new_events = [
        dict(zip(columns, row, strict=True)) for row in after["audit_events"] if row not in old_rows
    ]
    assert [(e["actor"], e["action"]) for e in new_events] == [("agent-low", "denied")]
    assert json.loads(new_events[0]["detail_json"])["results"] == ["r13"]
    # The key was not consumed by the rejected batch.
    receipt = archive.archive_results(low, "s1", [("r1", "fine")], idempotency_key="first-try")
    assert receipt.archived == ("r1",) and not receipt.replayed


def test_each_protected_class_is_never_archived(archive: Archive, agent: Principal) -> None:
    for cls in PROTECTED:
        archive.record(agent, "s1", "clinic.tool", f"a {cls} record", policy_class=cls)
    before = snapshot(archive)
    with pytest.raises(BatchRejected) as err:
        archive.archive_results(agent, "s1", [(f"r{i}", "set aside") for i in range(1, 5)])
    assert [s.status for s in err.value.targets] == ["protected"] * 4
    for status, cls in zip(err.value.targets, PROTECTED, strict=True):
        assert cls in status.message
    assert snapshot(archive) == before
    # One at a time fares no better.
    for i in range(1, 5):
        with pytest.raises(BatchRejected):
            archive.archive_results(agent, "s1", [(f"r{i}", "set aside")])
    assert {state for state, _ in states(archive, agent).values()} == {"live"}
    # The protected set is policy: a configured class is protected, a default one no longer is.
    custom = with_policy(archive, protected_classes=frozenset({"consent_form"}))
    custom.record(agent, "s1", "forms.get", "signed consent", policy_class="consent_form")
    with pytest.raises(BatchRejected) as err2:
        custom.archive_results(agent, "s1", [("r5", "consent")])
    assert err2.value.targets[0].status == "protected"
    assert custom.archive_results(agent, "s1", [("r1", "now allowed")]).archived == ("r1",)


def test_one_bad_target_rejects_the_whole_batch(
    archive: Archive, agent: Principal, admin: Principal, subtests: pytest.Subtests
) -> None:
    record_n(archive, agent, 4)
    cases: list[tuple[tuple[str, str], str]] = [
        (("r9", "note"), "unknown"),
        (("r1x", "note"), "malformed"),
        (("r2", "dup"), "duplicate"),
        (("r3", ""), "empty_note"),
        (("r3", "ctl\x01"), "note_has_control_chars"),
    ]
    before = snapshot(archive)
    for bad, status in cases:
        with subtests.test(status=status):
            batch = [("r1", "one"), ("r2", "two"), bad, ("r4", "four")]
            with pytest.raises(BatchRejected) as err:
                archive.archive_results(agent, "s1", batch)
            assert {s.status for s in err.value.targets} == {"ok", status}
            assert snapshot(archive) == before
    assert set(states(archive, agent).values()) == {("live", None)}
    assert audit_actions(archive, admin) == []
    assert outbox_rows(archive) == []


def test_only_already_archived_targets_give_archive_conflict(archive: Archive, agent: Principal) -> None:
    record_n(archive, agent, 3)
    archive.archive_results(agent, "s1", [("r1", "first")])
    before = snapshot(archive)
    with pytest.raises(ArchiveConflict) as err:
        archive.archive_results(agent, "s1", [("r1", "again")])
    assert isinstance(err.value, BatchRejected)
    assert isinstance(err.value, StateConflict)
    assert err.value.to_dict()["code"] == "archive_conflict"
    # A mix of ok and already-archived is still a conflict, and the ok target is not archived either.
    with pytest.raises(ArchiveConflict) as err2:
        archive.archive_results(agent, "s1", [("r2", "fine"), ("r1", "again")])
    assert [(s.result_id, s.status) for s in err2.value.targets] == [("r2", "ok"), ("r1", "already_archived")]
    assert snapshot(archive) == before
    # Any other problem makes it a plain rejection, not a conflict.
    with pytest.raises(BatchRejected) as err3:
        archive.archive_results(agent, "s1", [("r1", "again"), ("r7", "unknown")])
    assert not isinstance(err3.value, ArchiveConflict)
    assert states(archive, agent)["r1"] == ("archived", "first")  # the first note is kept


# ---- the batch itself -----------------------------------------------------------------------


def test_empty_oversized_and_malformed_batches_are_invalid_input(archive: Archive, agent: Principal) -> None:
    record_n(archive, agent, 4)
    small = with_policy(archive, max_batch_size=3)
    before = snapshot(archive)
    bad_batches: list[Any] = [
        [],
        (),
        "r1",
        b"r1",
        42,
        None,
        [42],
        [("r1",)],
        [("r1", "a", "b")],
        [["r1", "a"]],
    ]
    for batch in bad_batches:
        with pytest.raises(InvalidInput) as err:
            small.archive_results(agent, "s1", batch)
        assert err.value.field.startswith("targets"), batch
    with pytest.raises(InvalidInput) as too_many:
        small.archive_results(agent, "s1", [(f"r{i}", "n") for i in range(1, 5)])
    assert "at most 3" in too_many.value.problem
    assert snapshot(archive) == before
    # Exactly the limit is fine.
    assert small.archive_results(agent, "s1", [(f"r{i}", "n") for i in range(1, 4)]).archived == (
        "r1",
        "r2",
        "r3",
    )


def test_targets_may_be_given_as_mappings_tuples_or_archive_targets(
    archive: Archive, agent: Principal
) -> None:
    record_n(archive, agent, 5)
    targets: list[Any] = [
        {"id": "r1", "note": "by id"},
        {"result_id": "r2", "note": "by result_id"},
        ("r3", "as a tuple"),
        ArchiveTarget("r4", "as a dataclass"),
    ]
    receipt = archive.archive_results(agent, "s1", iter(targets))  # any iterable, consumed once
    assert receipt.archived == ("r1", "r2", "r3", "r4")
    assert states(archive, agent) == {
        "r1": ("archived", "by id"),
        "r2": ("archived", "by result_id"),
        "r3": ("archived", "as a tuple"),
        "r4": ("archived", "as a dataclass"),
        "r5": ("live", None),
    }
    # Non-string ids and notes are reported per target, not as a crash.
    with pytest.raises(BatchRejected) as err:
        archive.archive_results(
            agent, "s1", [{"id": 5, "note": "x"}, {"id": "r5", "note": None}, {"note": "no id"}]
        )
    assert [s.status for s in err.value.targets] == ["malformed", "empty_note", "malformed"]


def test_unknown_session_other_tenant_and_bad_session_id(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    record_n(archive, agent, 2)
    before = snapshot(archive)
    with pytest.raises(NotFound) as theirs:
        archive.archive_results(other_tenant, "s1", [("r1", "not yours")])
    with pytest.raises(NotFound) as missing:
        archive.archive_results(agent, "nope", [("r1", "no such session")])
    # Same shape of answer: no oracle for what another tenant holds.
    assert theirs.value.detail["what"] == missing.value.detail["what"] == "session"
    with pytest.raises(InvalidInput):
        archive.archive_results(agent, "bad session", [("r1", "x")])
    with pytest.raises(InvalidInput):
        archive.archive_results(agent, "s1", [("r1", "x")], idempotency_key="has space")
    assert snapshot(archive) == before
    # Their own session of the same name is theirs alone.
    archive.record(other_tenant, "s1", "tool", "theirs")
    archive.archive_results(other_tenant, "s1", [("r1", "their note")])
    assert states(archive, agent) == {"r1": ("live", None), "r2": ("live", None)}


def test_reader_may_not_archive_and_is_audited(archive: Archive, agent: Principal, admin: Principal) -> None:
    reader = Principal("clinic-a", "viewer-1", frozenset({Role.READER}), Sensitivity.RESTRICTED)
    record_n(archive, agent, 1)
    with pytest.raises(Forbidden):
        archive.archive_results(reader, "s1", [("r1", "x")])
    assert states(archive, agent) == {"r1": ("live", None)}
    assert outbox_rows(archive) == []
    events = archive.audit_events(admin)
    assert [(e.action, e.actor, e.target, e.detail["action"]) for e in events] == [
        ("denied", "viewer-1", "session:s1", "archive")
    ]


# ---- success --------------------------------------------------------------------------------


def test_success_writes_notes_state_one_audit_event_and_one_outbox_row_per_target(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    record_n(archive, agent, 4)
    originals = {r.result_id: r for r in archive.list_results(agent, "s1")}
    notes = {"r3": "carrier timeout for O-1042 — 配送超时", "r1": "stock was 3 at 09:00", "r4": "<b>html</b>"}
    receipt = archive.archive_results(agent, "s1", list(notes.items()))
    assert receipt.session_id == "s1"
    assert receipt.archived == ("r3", "r1", "r4")  # batch order
    assert not receipt.replayed
    assert len(receipt.batch_id) >= 16

    assert states(archive, agent) == {
        "r1": ("archived", notes["r1"]),
        "r2": ("live", None),
        "r3": ("archived", notes["r3"]),
        "r4": ("archived", notes["r4"]),
    }
    with archive.store.read() as conn:
        entries = conn.execute(select(t.archive_entries).order_by(t.archive_entries.c.result_no)).all()
        blobs = {r.sha256: bytes(r.content) for r in conn.execute(select(t.blobs))}
    assert [(e.result_no, e.note, e.batch_id, e.archived_by) for e in entries] == [
        (1, notes["r1"], receipt.batch_id, "agent-1"),
        (3, notes["r3"], receipt.batch_id, "agent-1"),
        (4, notes["r4"], receipt.batch_id, "agent-1"),
    ]
    # The original is kept untouched.
    for r in originals.values():
        assert r.content_sha256 in blobs

    events = archive.audit_events(admin)
    assert [e.action for e in events] == ["archive"]
    assert events[0].actor == "agent-1"
    assert events[0].target == "session:s1"
    assert events[0].detail == {"batch_id": receipt.batch_id, "results": ["r3", "r1", "r4"]}
    assert archive.verify_audit(admin).ok

    all_rows = outbox_rows(archive)
    # One cache purge, so cached searches see the new notes; one index row per target.
    assert [(r.op, r.entity, r.entity_ref) for r in all_rows if r.op == "cache_purge"] == [
        ("cache_purge", "tenant", "clinic-a")
    ]
    # And one row per page of each original (the trail's), named by the page, holding nothing.
    pages = [r for r in all_rows if r.entity == "result_original"]
    assert sorted((r.op, r.entity_ref, r.payload_json) for r in pages) == [
        ("index_upsert", f"s1/{rid}#0", "{}") for rid in ("r1", "r3", "r4")
    ]
    rows = [r for r in all_rows if r.op != "cache_purge" and r.entity != "result_original"]
    assert len(rows) == 3
    assert {(r.op, r.entity, r.tenant_id) for r in rows} == {("index_upsert", "tool_result", "clinic-a")}
    assert sorted(r.entity_ref for r in rows) == ["s1/r1", "s1/r3", "s1/r4"]
    for row in rows:
        payload = json.loads(row.payload_json)
        rid = payload["result_id"]
        assert row.entity_ref == f"s1/{rid}"
        assert payload["session_id"] == "s1"
        assert payload["note"] == notes[rid]
        assert payload["content_sha256"] == originals[rid].content_sha256
        assert payload["tool_name"] == originals[rid].tool_name
        assert payload["sensitivity"] == int(originals[rid].sensitivity)
        # The index gets pointers and the note, never the original text.
        assert blobs[originals[rid].content_sha256].decode() not in row.payload_json
        assert row.done_at is None

    # A second batch is a second event with its own rows.
    second = archive.archive_results(agent, "s1", [("r2", "last one")])
    assert second.batch_id != receipt.batch_id
    assert audit_actions(archive, admin) == ["archive", "archive"]
    assert len(outbox_rows(archive)) == 10  # (3 + 1) notes and (3 + 1) pages, and a cache purge per batch


# ---- idempotency ----------------------------------------------------------------------------


def test_idempotent_replay_returns_the_same_receipt_and_writes_nothing(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    record_n(archive, agent, 3)
    first = archive.archive_results(agent, "s1", [("r1", "one"), ("r2", "two")], idempotency_key="batch-7")
    assert not first.replayed
    after_first = snapshot(archive)
    # The same request in another shape (dicts instead of tuples) is the same request.
    again = archive.archive_results(
        agent, "s1", [{"id": "r1", "note": "one"}, {"id": "r2", "note": "two"}], idempotency_key="batch-7"
    )
    assert again == dataclasses.replace(first, replayed=True)
    assert snapshot(archive) == after_first  # no audit, no outbox, no state change
    # Without the key, the same request is a conflict: it really was archived once.
    with pytest.raises(ArchiveConflict):
        archive.archive_results(agent, "s1", [("r1", "one"), ("r2", "two")])
    # Keys are per tenant: another tenant may use the same key for its own request.
    archive.record(other_tenant, "s1", "tool", "theirs")
    theirs = archive.archive_results(other_tenant, "s1", [("r1", "theirs")], idempotency_key="batch-7")
    assert not theirs.replayed and theirs.batch_id != first.batch_id


def test_reusing_a_key_for_a_different_request_is_a_mismatch(
    archive: Archive, agent: Principal, subtests: pytest.Subtests
) -> None:
    record_n(archive, agent, 3)
    record_n(archive, agent, 2, session_id="s2")
    archive.archive_results(agent, "s1", [("r1", "one"), ("r2", "two")], idempotency_key="batch-7")
    before = snapshot(archive)
    cases: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("another result", "s1", [("r1", "one"), ("r3", "three")]),
        ("another note", "s1", [("r1", "one"), ("r2", "TWO")]),
        ("another order", "s1", [("r2", "two"), ("r1", "one")]),
        ("another session", "s2", [("r1", "one"), ("r2", "two")]),
    ]
    for case, session_id, targets in cases:
        with subtests.test(case=case):
            with pytest.raises(IdempotencyMismatch) as err:
                archive.archive_results(agent, session_id, targets, idempotency_key="batch-7")
            assert isinstance(err.value, StateConflict)
            assert err.value.detail["idempotency_key"] == "batch-7"
            assert snapshot(archive) == before


def test_a_target_above_clearance_is_audited_as_denied_though_the_batch_wrote_nothing(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.record(admin, "s-clear", "hr.lookup", "salary table", sensitivity="restricted")
    archive.record(agent, "s-clear", "logs.search", "ok")
    with pytest.raises(BatchRejected):
        archive.archive_results(agent, "s-clear", [("r1", "salaries"), ("r2", "logs")])
    denied = [e for e in archive.audit_events(admin) if e.action == "denied"]
    assert len(denied) == 1
    assert denied[0].actor == agent.subject and denied[0].detail["results"] == ["r1"]
    assert all(r.state == "live" for r in archive.list_results(admin, "s-clear"))
