"""`record`: stable ids, the original kept as a hash-addressed blob, and bad input refused whole.

Every test runs on SQLite and PostgreSQL (the `archive` fixture). "Stores nothing" is checked
on the tables themselves, not only through the API.
"""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Table, select

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    ContentTooLarge,
    Forbidden,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.storage import schema as t

DATA_TABLES: tuple[Table, ...] = (
    t.sessions,
    t.tool_results,
    t.archive_entries,
    t.blobs,
    t.outbox,
    t.idempotency_keys,
)
AUDIT_TABLES: tuple[Table, ...] = (t.audit_events, t.audit_heads)


def snapshot(archive: Archive, tables: tuple[Table, ...] = DATA_TABLES + AUDIT_TABLES) -> dict[str, Any]:
    """Every row of `tables`, order-independent: equal snapshots mean nothing was written."""
    with archive.store.read() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in tables
        }


def with_policy(archive: Archive, **limits: Any) -> Archive:
    """The same database under a different policy (shares the fixture's engine, closed by it)."""
    return Archive(dataclasses.replace(archive.store, policy=ArchivePolicy(**limits)))


def ids(archive: Archive, principal: Principal, session_id: str) -> list[str]:
    return [r.result_id for r in archive.list_results(principal, session_id)]


# ---- ids -----------------------------------------------------------------------------------


def test_ids_are_monotonic_per_session_and_independent_between_sessions(
    archive: Archive, agent: Principal
) -> None:
    issued: dict[str, list[str]] = {"s1": [], "s2": []}
    for i, session in enumerate(["s1", "s1", "s2", "s1", "s2", "s1"]):
        issued[session].append(archive.record(agent, session, "tool", f"content {i}").result_id)
    assert issued == {"s1": ["r1", "r2", "r3", "r4"], "s2": ["r1", "r2"]}
    assert ids(archive, agent, "s1") == ["r1", "r2", "r3", "r4"]
    assert ids(archive, agent, "s2") == ["r1", "r2"]


def test_ids_are_independent_per_tenant(archive: Archive, agent: Principal, other_tenant: Principal) -> None:
    assert archive.record(agent, "s1", "tool", "a").result_id == "r1"
    assert archive.record(agent, "s1", "tool", "b").result_id == "r2"
    # Same session id in another tenant: a separate session, numbered from r1.
    assert archive.record(other_tenant, "s1", "tool", "theirs").result_id == "r1"
    assert archive.record(agent, "s1", "tool", "c").result_id == "r3"
    assert ids(archive, other_tenant, "s1") == ["r1"]
    assert [r.content_sha256 for r in archive.list_results(other_tenant, "s1")] == [
        hashlib.sha256(b"theirs").hexdigest()
    ]


def test_ids_are_never_reused_after_archive_and_recover(archive: Archive, agent: Principal) -> None:
    archive.record(agent, "s1", "tool", "one")
    archive.record(agent, "s1", "tool", "two")
    archive.archive_results(agent, "s1", [("r1", "first result")])
    assert archive.recover(agent, "s1", "r1").appended.result_id == "r3"
    assert archive.record(agent, "s1", "tool", "three").result_id == "r4"
    archive.archive_results(agent, "s1", [("r3", "recovered copy set aside"), ("r2", "second")])
    assert archive.recover(agent, "s1", "r3").appended.result_id == "r5"
    assert archive.recover(agent, "s1", "r2").appended.result_id == "r6"
    assert archive.record(agent, "s1", "tool", "four").result_id == "r7"
    results = archive.list_results(agent, "s1")
    assert [r.result_id for r in results] == [f"r{n}" for n in range(1, 8)]
    assert [r.recovered_from for r in results] == [None, None, "r1", None, "r3", "r2", None]


# ---- what is kept --------------------------------------------------------------------------


def test_record_keeps_original_metadata_and_hash(archive: Archive, agent: Principal) -> None:
    shanghai = timezone(timedelta(hours=8))
    observed = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=shanghai)
    arguments = {"order": "O-1042", "filters": {"since": "2026-02-01", "limit": 5}, "tags": ["a", "é"]}
    content = "trace: carrier timeout after 30s — 配送超时"
    r = archive.record(
        agent,
        "s1",
        "logistics.trace",
        content,
        arguments=arguments,
        observed_at=observed,
        sensitivity="confidential",
        policy_class="shipment_status",
    )
    assert r.session_id == "s1"
    assert r.result_id == "r1"
    assert r.tool_name == "logistics.trace"
    assert r.arguments == arguments
    assert r.observed_at == observed
    assert r.observed_at.utcoffset() == timedelta(0)  # normalised to UTC, same instant
    assert r.sensitivity is Sensitivity.CONFIDENTIAL
    assert r.policy_class == "shipment_status"
    assert r.state == "live"
    assert r.note is None
    assert r.recovered_from is None
    assert r.media_type == "text/plain; charset=utf-8"
    encoded = content.encode("utf-8")
    assert r.size == len(encoded)
    assert r.content_sha256 == hashlib.sha256(encoded).hexdigest()
    assert r.recorded_at.tzinfo is not None
    # Reading it back gives the very same value.
    assert archive.list_results(agent, "s1") == [r]

    with archive.store.read() as conn:
        blob = conn.execute(select(t.blobs).where(t.blobs.c.sha256 == r.content_sha256)).one()
    assert blob.tenant_id == agent.tenant_id
    assert bytes(blob.content) == encoded
    assert blob.size == len(encoded)
    assert hashlib.sha256(bytes(blob.content)).hexdigest() == blob.sha256


def test_record_defaults_and_accepted_input_forms(archive: Archive, agent: Principal) -> None:
    before = datetime.now(UTC)
    r = archive.record(agent, "s1", "tool", "x")
    after = datetime.now(UTC)
    assert before <= r.observed_at <= after
    assert before <= r.recorded_at <= after
    assert (r.arguments, r.sensitivity, r.policy_class) == ({}, Sensitivity.INTERNAL, "default")

    # Sensitivity as enum, name (any case) or number.
    given: list[Sensitivity | str | int] = [Sensitivity.PUBLIC, "Internal", 2]
    for value in given:
        archive.record(agent, "s1", "tool", "x", sensitivity=value)
    stored = [res.sensitivity for res in archive.list_results(agent, "s1")[1:]]
    assert stored == [Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.CONFIDENTIAL]

    # Bytes-like originals are binary by default (accepted beyond the annotated str | bytes).
    b1 = archive.record(agent, "s1", "tool", bytearray(b"\x01\x02"))  # type: ignore[arg-type]
    b2 = archive.record(agent, "s1", "tool", memoryview(b"\x03\x04"))  # type: ignore[arg-type]
    assert (b1.size, b1.media_type) == (2, "application/octet-stream")
    assert b2.content_sha256 == hashlib.sha256(b"\x03\x04").hexdigest()

    # Values exactly at the limits are accepted.
    name = "t" * archive.policy.max_tool_name_chars
    assert archive.record(agent, "s1", name, "x").tool_name == name
    small = with_policy(archive, max_content_bytes=64)
    assert small.record(agent, "s1", "tool", b"x" * 64).size == 64
    assert small.record(agent, "s1", "tool", "é" * 32).size == 64


def test_identical_content_shares_one_blob_per_tenant(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    a = archive.record(agent, "s1", "tool", "same bytes")
    b = archive.record(agent, "s2", "tool", "same bytes")
    c = archive.record(other_tenant, "s1", "tool", "same bytes")
    assert a.content_sha256 == b.content_sha256 == c.content_sha256
    with archive.store.read() as conn:
        rows = conn.execute(select(t.blobs.c.tenant_id).where(t.blobs.c.sha256 == a.content_sha256)).all()
    assert sorted(r.tenant_id for r in rows) == sorted([agent.tenant_id, other_tenant.tenant_id])


def test_non_utf8_bytes_are_stored_and_recovered_byte_exact(archive: Archive, agent: Principal) -> None:
    latin1 = "café — prix: 12,50 €".encode("cp1252")
    with pytest.raises(UnicodeDecodeError):
        latin1.decode("utf-8")
    r = archive.record(agent, "s1", "catalog.fetch", latin1, media_type="text/plain; charset=windows-1252")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00\x80"
    p = archive.record(agent, "s1", "camera.snapshot", png)
    assert r.media_type == "text/plain; charset=windows-1252"
    assert p.media_type == "application/octet-stream"
    assert r.content_sha256 == hashlib.sha256(latin1).hexdigest()

    archive.archive_results(agent, "s1", [("r1", "catalog page in cp1252"), ("r2", "camera image")])
    back = archive.recover(agent, "s1", "r1")
    assert back.content == latin1
    assert back.text is None
    assert back.appended.media_type == "text/plain; charset=windows-1252"
    image = archive.recover(agent, "s1", "r2")
    assert image.content == png
    assert image.appended.media_type == "application/octet-stream"


def test_nul_bytes_in_text_round_trip(archive: Archive, agent: Principal) -> None:
    text = "before\x00after\x00\x00end"
    r = archive.record(agent, "s1", "tool", text)
    assert r.size == len(text.encode("utf-8"))
    raw = b"\x00" * 5 + b"payload\x00"
    archive.record(agent, "s1", "tool", raw, media_type="application/octet-stream")
    archive.archive_results(agent, "s1", [("r1", "text with NULs"), ("r2", "binary with NULs")])
    recovered = archive.recover(agent, "s1", "r1")
    assert recovered.content == text.encode("utf-8")
    assert recovered.text == text
    assert archive.recover(agent, "s1", "r2").content == raw

    # Arguments are stored as JSON text, where NUL is the escape \u0000 (PostgreSQL text holds no NUL).
    r3 = archive.record(agent, "s1", "tool", "x", arguments={"q": "a\x00b"})
    assert r3.arguments == {"q": "a\x00b"}
    stored = {r.result_id: r for r in archive.list_results(agent, "s1")}
    assert stored[r3.result_id].arguments == {"q": "a\x00b"}


# ---- bad input: a typed error, nothing stored -----------------------------------------------

# (field the error must name, the bad keyword argument to record, case id)
BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("tool_name", {"tool_name": None}, "none"),
    ("tool_name", {"tool_name": 42}, "int"),
    ("tool_name", {"tool_name": b"tool"}, "bytes"),
    ("tool_name", {"tool_name": ""}, "empty"),
    ("tool_name", {"tool_name": "   \t "}, "whitespace"),
    ("tool_name", {"tool_name": "t" * 201}, "too-long"),
    ("tool_name", {"tool_name": "x" * 10_000}, "very-long"),
    ("tool_name", {"tool_name": "tool\x00name"}, "nul"),
    ("tool_name", {"tool_name": "tool\nname"}, "newline"),
    ("tool_name", {"tool_name": "tool\rname"}, "cr"),
    ("tool_name", {"tool_name": "tool\tname"}, "tab"),
    ("tool_name", {"tool_name": "tool\x1b[31m"}, "ansi-escape"),
    ("tool_name", {"tool_name": "tool\x7f"}, "del"),
    ("tool_name", {"tool_name": "tool\x85name"}, "c1-next-line"),
    ("tool_name", {"tool_name": "tool\u2028name"}, "line-separator"),
    ("tool_name", {"tool_name": "tool\u202ename"}, "bidi-override"),
    ("tool_name", {"tool_name": "tool\ud800"}, "lone-surrogate"),
    ("arguments", {"arguments": {"x": object()}}, "object"),
    ("arguments", {"arguments": {"x": {1, 2}}}, "set"),
    ("arguments", {"arguments": {"x": b"bytes"}}, "bytes"),
    ("arguments", {"arguments": {"x": float("nan")}}, "nan"),
    ("arguments", {"arguments": {"x": float("inf")}}, "inf"),
    ("arguments", {"arguments": {1: "a", "b": 2}}, "mixed-keys"),
    ("arguments", {"arguments": {"x": "\udc80"}}, "lone-surrogate"),
    ("arguments", {"arguments": [("a", 1)]}, "list-not-mapping"),
    ("arguments", {"arguments": "a=1"}, "string"),
    ("content", {"content": None}, "none"),
    ("content", {"content": 123}, "int"),
    ("content", {"content": ["a"]}, "list"),
    ("content", {"content": "bad \ud800 text"}, "lone-surrogate"),
    ("observed_at", {"observed_at": datetime(2026, 3, 1, 9, 30)}, "naive"),
    ("observed_at", {"observed_at": "2026-03-01T09:30:00Z"}, "string"),
    ("observed_at", {"observed_at": 1_700_000_000}, "epoch-int"),
    ("media_type", {"media_type": ""}, "empty"),
    ("media_type", {"media_type": "text"}, "no-subtype"),
    ("media_type", {"media_type": "text/"}, "empty-subtype"),
    ("media_type", {"media_type": "/plain"}, "empty-type"),
    ("media_type", {"media_type": "text/plain\nX-Injected: 1"}, "newline"),
    ("media_type", {"media_type": "tëxt/plain"}, "non-ascii"),
    ("media_type", {"media_type": "text plain"}, "space"),
    ("media_type", {"media_type": 42}, "int"),
    ("media_type", {"media_type": "a" * 120 + "/" + "b" * 120 + ";" + "c" * 100}, "longer-than-column"),
    ("session_id", {"session_id": ""}, "empty"),
    ("session_id", {"session_id": "has space"}, "space"),
    ("session_id", {"session_id": "-leading-dash"}, "leading-dash"),
    ("session_id", {"session_id": "a/b"}, "slash"),
    ("session_id", {"session_id": "s\x00"}, "nul"),
    ("session_id", {"session_id": "s" * 129}, "too-long"),
    ("session_id", {"session_id": None}, "none"),
    ("session_id", {"session_id": 7}, "int"),
    ("sensitivity", {"sensitivity": "secret"}, "unknown-name"),
    ("sensitivity", {"sensitivity": ""}, "empty"),
    ("sensitivity", {"sensitivity": 9}, "too-high"),
    ("sensitivity", {"sensitivity": -1}, "negative"),
    ("policy_class", {"policy_class": "Price"}, "upper-case"),
    ("policy_class", {"policy_class": "with space"}, "space"),
    ("policy_class", {"policy_class": ""}, "empty"),
    ("policy_class", {"policy_class": "9lives"}, "leading-digit"),
    ("policy_class", {"policy_class": "x" * 65}, "too-long"),
    ("policy_class", {"policy_class": "a-b"}, "dash"),
]


def _rejects(archive: Archive, agent: Principal, field: str, call: dict[str, Any]) -> InvalidInput:
    """Call record with `call` over sane defaults; assert InvalidInput on `field` and no write at all."""
    before = snapshot(archive)
    kwargs: dict[str, Any] = {"session_id": "s1", "tool_name": "tool", "content": "content", **call}
    with pytest.raises(InvalidInput) as err:
        archive.record(agent, **kwargs)
    assert err.value.field == field, err.value
    assert err.value.to_dict()["code"] in ("invalid_input", "content_too_large")
    assert snapshot(archive) == before
    return err.value


def test_bad_input_gets_a_typed_error_and_stores_nothing(
    archive: Archive, agent: Principal, admin: Principal, subtests: pytest.Subtests
) -> None:
    # Into a new session: not even the session is created.
    with pytest.raises(InvalidInput):
        archive.record(agent, "fresh", "tool\x00", "x")
    with pytest.raises(NotFound):
        archive.list_results(admin, "fresh")

    archive.record(agent, "s1", "seed", "an earlier result")  # the session exists and has rows
    for field, call, case in BAD_INPUT:
        with subtests.test(field=field, case=case):
            _rejects(archive, agent, field, call)
    # Nothing was consumed by all those failures: the next id is r2.
    assert archive.record(agent, "s1", "tool", "fine").result_id == "r2"


def test_configured_limits_are_enforced_with_typed_errors(
    archive: Archive, agent: Principal, subtests: pytest.Subtests
) -> None:
    archive.record(agent, "s1", "seed", "an earlier result")
    # A policy above its ceiling (limits.py, the width of the column too) is refused when it is
    # made, and a name over the ceiling is a typed error on both backends.
    with pytest.raises(InvalidInput) as refused:
        ArchivePolicy(max_tool_name_chars=1_000)
    assert refused.value.field == "max_tool_name_chars"
    _rejects(archive, agent, "tool_name", {"tool_name": "t" * 300})
    few_args = with_policy(archive, max_arguments_bytes=100)
    assert isinstance(
        _rejects(few_args, agent, "arguments", {"arguments": {"q": "x" * 200}}), ContentTooLarge
    )

    small = with_policy(archive, max_content_bytes=64)
    cases: list[tuple[str, str | bytes]] = [
        ("bytes", b"x" * 65),
        ("ascii-text", "x" * 65),
        ("multibyte-text-under-65-chars", "é" * 33),
        ("huge", b"x" * 1_000_000),
    ]
    for case, content in cases:
        with subtests.test(case=case):
            err = _rejects(small, agent, "content", {"content": content})
            assert isinstance(err, ContentTooLarge)
            assert err.limit == 64
            assert err.size == (len(content.encode("utf-8")) if isinstance(content, str) else len(content))
            assert err.to_dict()["code"] == "content_too_large"


# ---- access --------------------------------------------------------------------------------


def _denied_events(archive: Archive, admin: Principal) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e.action, e.target, e.detail) for e in archive.audit_events(admin) if e.action == "denied"]


def test_recording_above_ones_clearance_is_forbidden_and_audited(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    before = snapshot(archive, DATA_TABLES)
    with pytest.raises(Forbidden) as err:
        archive.record(agent, "s1", "vault.read", "top secret", sensitivity=Sensitivity.RESTRICTED)
    assert err.value.detail["needed_clearance"] == "restricted"
    assert snapshot(archive, DATA_TABLES) == before
    with pytest.raises(NotFound):  # the session was not even created
        archive.list_results(admin, "s1")
    denied = _denied_events(archive, admin)
    assert len(denied) == 1
    _, target, detail = denied[0]
    assert (target, detail["action"]) == ("session:s1", "record")
    # An admin with restricted clearance may record it; the refused attempt consumed no id.
    assert archive.record(admin, "s1", "vault.read", "top secret", sensitivity="restricted").result_id == "r1"
    with pytest.raises(Forbidden):
        archive.record(agent, "s1", "vault.read", "again", sensitivity=Sensitivity.RESTRICTED)
    assert archive.record(agent, "s1", "tool", "fine").result_id == "r2"


def test_reader_may_not_record(archive: Archive, agent: Principal, admin: Principal) -> None:
    reader = Principal("clinic-a", "viewer-1", frozenset({Role.READER}), Sensitivity.RESTRICTED)
    archive.record(agent, "s1", "tool", "x")
    before = snapshot(archive, DATA_TABLES)
    with pytest.raises(Forbidden) as err:
        archive.record(reader, "s1", "tool", "y")
    assert err.value.detail["needed_role"] == "agent"
    assert snapshot(archive, DATA_TABLES) == before
    denied = _denied_events(archive, admin)
    assert [(target, detail["action"]) for _, target, detail in denied] == [("session:s1", "record")]
    assert archive.verify_audit(admin).ok


def test_a_deleted_session_never_reissues_its_ids(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.record(agent, "s-del", "t", "first")
    archive.record(agent, "s-del", "t", "second")
    receipt = archive.delete_session(admin, "s-del")
    with pytest.raises(StateConflict):
        archive.record(agent, "s-del", "t", "third")
    with pytest.raises(NotFound):
        archive.live_view(agent, "s-del")
    with pytest.raises(NotFound):
        archive.delete_session(admin, "s-del")
    assert archive.verify_deleted(admin, receipt) == []
    with archive.store.read() as conn:
        tombstone = conn.execute(select(t.sessions).where(t.sessions.c.session_id == "s-del")).one()
    assert tombstone.owner == "deleted" and tombstone.deleted_at is not None
