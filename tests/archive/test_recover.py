"""`recover`: the exact, hash-verified original, appended as a new historical result; history untouched.

Every test runs on SQLite and PostgreSQL (the `archive` fixture).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Table, select, update

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    Forbidden,
    IntegrityFailure,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.storage import schema as t

T0 = datetime(2026, 3, 1, 9, 0, 12, 345678, tzinfo=UTC)
TIME_SENSITIVE = ("price", "stock", "inventory", "availability", "approval_progress")
SESSION_TABLES: tuple[Table, ...] = (t.sessions, t.tool_results, t.archive_entries, t.blobs, t.outbox)


def snapshot(archive: Archive, tables: tuple[Table, ...] = SESSION_TABLES) -> dict[str, Any]:
    with archive.store.read() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in tables
        }


def tamper(archive: Archive, tenant_id: str, sha256: str, content: bytes) -> None:
    """Change stored original bytes behind the archive's back."""
    with archive.store.write() as conn:
        conn.execute(
            update(t.blobs)
            .where(t.blobs.c.tenant_id == tenant_id, t.blobs.c.sha256 == sha256)
            .values(content=content)
        )


# ---- the exact original ---------------------------------------------------------------------


def test_recover_returns_the_exact_original_as_a_new_historical_result(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    originals: list[tuple[str | bytes, str | None]] = [
        ("plain text — 配送超时 ✓", None),
        ("line 1\r\nline 2\n\ttabbed\x00nul", None),
        (os.urandom(4096), None),
        (b"\xff\xfe\x00\x80 not utf-8", "text/plain; charset=latin-1"),
        ("x" * 300_000, "text/markdown"),
    ]
    recorded = [
        archive.record(
            agent,
            "s1",
            f"tool.{i}",
            content,
            media_type=media,
            arguments={"i": i, "q": "é"},
            observed_at=T0,
            sensitivity="confidential" if i % 2 else "internal",
            policy_class="search_result",
        )
        for i, (content, media) in enumerate(originals)
    ]
    archive.archive_results(agent, "s1", [(r.result_id, f"note {r.result_id}") for r in recorded])

    for n, (r, (content, _)) in enumerate(zip(recorded, originals, strict=True)):
        data = content.encode("utf-8") if isinstance(content, str) else content
        before = datetime.now(UTC)
        got = archive.recover(agent, "s1", r.result_id)
        assert got.content == data
        assert hashlib.sha256(got.content).hexdigest() == r.content_sha256
        assert got.text == (content if isinstance(content, str) else None)

        # The original, as it stands: archived with its note.
        assert got.original.result_id == r.result_id
        assert (got.original.state, got.original.note) == ("archived", f"note {r.result_id}")

        # The copy: a new result at the end, live, pointing back, with the original's facts.
        new = got.appended
        assert new.result_id == f"r{len(originals) + n + 1}"
        assert new.recovered_from == r.result_id
        assert new.state == "live"
        assert new.note is None
        assert new.observed_at == r.observed_at == T0  # when the tool said it, not now
        assert new.recorded_at >= before
        for attr in (
            "tool_name",
            "arguments",
            "media_type",
            "size",
            "content_sha256",
            "sensitivity",
            "policy_class",
            "session_id",
        ):
            assert getattr(new, attr) == getattr(r, attr), attr
        # ... and the list agrees with what recover returned.
        listed = {x.result_id: x for x in archive.list_results(agent, "s1")}
        assert listed[new.result_id] == new

        # Labelled as historical data from its observed_at, not as new instructions.
        head = got.rendered.split("\n", 2)
        assert head[0].startswith(f'<context_result id="{new.result_id}" ')
        assert f'recovered_from="{r.result_id}"' in head[0]
        assert 'status="historical"' in head[0]
        assert f'observed_at="{T0.isoformat()}"' in head[0]
        assert "historical data" in head[1] and T0.isoformat() in head[1]
        assert "not new instructions" in head[1]
        assert got.rendered.endswith("</context_result>")

    recovers = [e for e in archive.audit_events(admin) if e.action == "recover"]
    assert [(e.target, e.detail["appended_as"]) for e in recovers] == [
        (f"session:s1/r{i}", f"r{i + len(originals)}") for i in range(1, len(originals) + 1)
    ]
    assert [e.detail["sha256"] for e in recovers] == [r.content_sha256 for r in recorded]
    assert archive.verify_audit(admin).ok


def test_time_sensitive_classes_carry_a_requery_warning(
    archive: Archive, agent: Principal, subtests: pytest.Subtests
) -> None:
    for cls in TIME_SENSITIVE:
        archive.record(agent, "s1", "shop.lookup", f"{cls}: 42", policy_class=cls, observed_at=T0)
    archive.archive_results(agent, "s1", [(f"r{i}", "was 42") for i in range(1, len(TIME_SENSITIVE) + 1)])
    for i, cls in enumerate(TIME_SENSITIVE, start=1):
        with subtests.test(policy_class=cls):
            got = archive.recover(agent, "s1", f"r{i}")
            assert got.staleness_warning is not None
            assert "re-query the live system" in got.staleness_warning
            assert T0.isoformat() in got.staleness_warning
            assert cls in got.staleness_warning
            assert "[warning: " in got.rendered and "re-query the live system" in got.rendered


def test_other_classes_carry_no_warning_and_the_set_is_policy(archive: Archive, agent: Principal) -> None:
    for cls in ("default", "search_result", "shipment_status", "prices"):
        archive.record(agent, "s1", "tool", f"{cls} data", policy_class=cls)
    archive.archive_results(agent, "s1", [(f"r{i}", "set aside") for i in range(1, 5)])
    for i in range(1, 5):
        got = archive.recover(agent, "s1", f"r{i}")
        assert got.staleness_warning is None
        assert "re-query" not in got.rendered
        assert "[warning:" not in got.rendered
    # A configured time-sensitive class warns; a default one that was dropped does not.
    weather = Archive(
        dataclasses.replace(
            archive.store, policy=ArchivePolicy(time_sensitive_classes=frozenset({"weather"}))
        )
    )
    weather.record(agent, "s1", "forecast", "sunny", policy_class="weather")
    weather.record(agent, "s1", "shop", "price 3", policy_class="price")
    weather.archive_results(agent, "s1", [("r9", "sunny"), ("r10", "price 3")])
    assert weather.recover(agent, "s1", "r9").staleness_warning is not None
    assert weather.recover(agent, "s1", "r10").staleness_warning is None


# ---- history is never rewritten -------------------------------------------------------------


def test_history_is_never_rewritten(archive: Archive, agent: Principal) -> None:
    archive.record(agent, "s1", "inventory.check", "stock: 3", policy_class="stock", observed_at=T0)
    archive.record(agent, "s1", "notes", "other")
    archive.archive_results(agent, "s1", [("r1", "stock was 3 at 09:00")])
    with archive.store.read() as conn:
        original_rows = {
            name: conn.execute(select(table).where(table.c.result_no == 1)).all()
            for name, table in (("result", t.tool_results), ("entry", t.archive_entries))
        }

    first = archive.recover(agent, "s1", "r1")
    second = archive.recover(agent, "s1", "r1")  # recovering again appends again
    assert (first.appended.result_id, second.appended.result_id) == ("r3", "r4")
    assert first.content == second.content == b"stock: 3"

    with archive.store.read() as conn:
        for name, table in (("result", t.tool_results), ("entry", t.archive_entries)):
            assert conn.execute(select(table).where(table.c.result_no == 1)).all() == original_rows[name]
    results = {r.result_id: r for r in archive.list_results(agent, "s1")}
    assert (results["r1"].state, results["r1"].note) == ("archived", "stock was 3 at 09:00")
    assert results["r2"].state == "live"
    assert [results[x].recovered_from for x in ("r3", "r4")] == ["r1", "r1"]

    # A recovered copy is a result like any other: it can be archived and recovered in turn.
    archive.archive_results(agent, "s1", [("r3", "the copy, set aside")])
    third = archive.recover(agent, "s1", "r3")
    assert third.appended.result_id == "r5"
    assert third.appended.recovered_from == "r3"
    assert third.content == b"stock: 3"
    assert third.appended.observed_at == T0


# ---- refusals -------------------------------------------------------------------------------


def test_recover_refuses_live_unknown_and_malformed_ids_without_appending(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    archive.record(agent, "s1", "tool", "live one")
    archive.record(agent, "s1", "tool", "archived one")
    archive.archive_results(agent, "s1", [("r2", "set aside")])
    archive.recover(agent, "s1", "r2")  # r3: a live recovered copy
    before = snapshot(archive)

    for live in ("r1", "r3"):
        with pytest.raises(StateConflict) as err:
            archive.recover(agent, "s1", live)
        assert (err.value.detail["result_id"], err.value.detail["state"]) == (live, "live")
    for unknown in ("r4", "r99", "r999999999"):
        with pytest.raises(NotFound):
            archive.recover(agent, "s1", unknown)
    malformed: list[Any] = ["x1", "r0", "r01", "R2", "r-1", "r2 ", "", "r1234567890", None, 2]
    for bad in malformed:
        with pytest.raises(InvalidInput) as bad_err:
            archive.recover(agent, "s1", bad)
        assert bad_err.value.field == "result_id"
    with pytest.raises(NotFound) as missing:
        archive.recover(agent, "nope", "r2")
    with pytest.raises(InvalidInput):
        archive.recover(agent, "bad session", "r2")
    # Another tenant: not found, in the same words as a session that does not exist.
    with pytest.raises(NotFound) as theirs:
        archive.recover(other_tenant, "s1", "r2")
    assert theirs.value.detail["what"] == missing.value.detail["what"]
    assert theirs.value.message == missing.value.message.replace("nope", "s1")

    assert snapshot(archive) == before
    assert archive.record(agent, "s1", "tool", "next").result_id == "r4"  # no number was consumed


def test_a_tampered_original_is_an_integrity_error_and_nothing_is_appended(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    r = archive.record(agent, "s1", "lab.report", "potassium 4.1 mmol/L")
    archive.record(agent, "s1", "notes", "untouched")
    archive.archive_results(agent, "s1", [("r1", "lab report"), ("r2", "notes")])
    tamper(archive, agent.tenant_id, r.content_sha256, b"potassium 9.9 mmol/L")
    before = snapshot(archive)

    with pytest.raises(IntegrityFailure) as err:
        archive.recover(agent, "s1", "r1")
    assert err.value.detail["sha256"] == r.content_sha256
    assert err.value.detail["actual_sha256"] == hashlib.sha256(b"potassium 9.9 mmol/L").hexdigest()
    assert snapshot(archive) == before  # nothing appended, no number consumed
    events = archive.audit_events(admin)
    assert [e.action for e in events] == ["archive", "integrity_failure"]
    failure = events[-1]
    assert failure.target == "session:s1/r1"
    assert (failure.detail["action"], failure.detail["sha256"]) == ("recover", r.content_sha256)
    assert archive.verify_audit(admin).ok

    # Other originals are unaffected, and restoring the bytes makes r1 recoverable again.
    assert archive.recover(agent, "s1", "r2").content == b"untouched"
    tamper(archive, agent.tenant_id, r.content_sha256, b"potassium 4.1 mmol/L")
    assert archive.recover(agent, "s1", "r1").content == b"potassium 4.1 mmol/L"


def test_forbidden_recoveries_are_audited_and_append_nothing(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    reader = Principal("clinic-a", "viewer-1", frozenset({Role.READER}), Sensitivity.RESTRICTED)
    low = Principal("clinic-a", "agent-low", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    archive.record(agent, "s1", "chart.get", "confidential chart", sensitivity="confidential")
    archive.record(agent, "s1", "hours.get", "open 9-18", sensitivity="public")
    archive.archive_results(agent, "s1", [("r1", "chart"), ("r2", "hours")])
    before = snapshot(archive)

    with pytest.raises(Forbidden) as no_role:
        archive.recover(reader, "s1", "r2")
    assert no_role.value.detail["needed_role"] == "agent"
    with pytest.raises(Forbidden) as no_clearance:
        archive.recover(low, "s1", "r1")
    assert no_clearance.value.detail["needed_clearance"] == "confidential"
    assert snapshot(archive) == before

    denied = [e for e in archive.audit_events(admin) if e.action == "denied"]
    assert [(e.actor, e.target, e.detail["action"]) for e in denied] == [
        ("viewer-1", "session:s1/r2", "recover"),
        ("agent-low", "session:s1/r1", "recover"),
    ]
    assert all(e.detail["reason"] for e in denied)
    assert archive.verify_audit(admin).ok
    # The low-clearance agent may recover what it is cleared for.
    assert low.can_read(Sensitivity.PUBLIC)
    assert archive.recover(low, "s1", "r2").content == b"open 9-18"
