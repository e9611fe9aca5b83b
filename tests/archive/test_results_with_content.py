"""`list_results_with_content`: a page of a session's results with what each live one shows, in
one read (the console's timeline). It answers as `list_results` and `get_result` answer one by
one, and serves no original that fails its hash. Every test runs on SQLite and PostgreSQL (the
`archive` fixture)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from mnemo_sea.archive import (
    Archive,
    Forbidden,
    IntegrityFailure,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.storage import schema as t


def _session(archive: Archive, agent: Principal) -> None:
    """s1: r1-r6 (r2 archived, r3 confidential, r4 empty, r5 the same bytes as r1), then r7 an
    excerpt of r2 and r8 a whole copy of r2."""
    archive.record(agent, "s1", "grep", "one\ntwo\nthree\n", owner="pet-7")
    archive.record(agent, "s1", "logs", "a\nb\nc\nd\n")
    archive.record(agent, "s1", "lab", "ALT 112", sensitivity=Sensitivity.CONFIDENTIAL)
    archive.record(agent, "s1", "noop", "")
    archive.record(agent, "s1", "grep", "one\ntwo\nthree\n")
    archive.record(agent, "s1", "ls", "x")
    archive.archive_results(agent, "s1", [("r2", "four letters")])
    archive.recover(agent, "s1", "r2", lines=(2, 3))
    archive.recover(agent, "s1", "r2")


def test_each_result_comes_with_what_get_result_shows_and_archived_ones_without(
    archive: Archive, agent: Principal
) -> None:
    _session(archive, agent)
    page = archive.list_results_with_content(agent, "s1")
    assert [r for r, _ in page] == archive.list_results(agent, "s1")
    shown = {r.result_id: content for r, content in page}
    assert shown == {
        "r1": b"one\ntwo\nthree\n",
        "r2": None,  # archived: its stub is in view; the original comes back through recover
        "r3": b"ALT 112",
        "r4": b"",
        "r5": b"one\ntwo\nthree\n",
        "r6": b"x",
        "r7": b"b\nc\n",  # the excerpt, cut from the verified whole
        "r8": b"a\nb\nc\nd\n",
    }
    for result, content in page:
        if result.state == "live":
            assert archive.get_result(agent, "s1", result.result_id, with_content=True)[1] == content


def test_a_page_is_the_page_list_results_reads(archive: Archive, agent: Principal) -> None:
    _session(archive, agent)
    for offset, limit in ((0, 3), (3, 3), (6, 3), (8, 3), (0, 10_000)):
        page = archive.list_results_with_content(agent, "s1", offset=offset, limit=limit)
        assert [r for r, _ in page] == archive.list_results(agent, "s1", offset=offset, limit=limit)
    with pytest.raises(InvalidInput):
        archive.list_results_with_content(agent, "s1", limit=0)
    with pytest.raises(InvalidInput):
        archive.list_results_with_content(agent, "s1", offset=-1)


def test_above_the_clearance_a_result_keeps_its_place_and_shows_nothing(
    archive: Archive, agent: Principal
) -> None:
    _session(archive, agent)
    internal = Principal(agent.tenant_id, "agent-2", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
    page = archive.list_results_with_content(internal, "s1")
    assert [r for r, _ in page] == archive.list_results(internal, "s1")
    r3, content = page[2]
    assert (r3.result_id, r3.content_sha256, content) == ("r3", "", None)


def test_who_may_read_the_session_is_checked_as_for_list_results(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _session(archive, agent)
    owner = Principal(agent.tenant_id, "pet-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    stranger = Principal(agent.tenant_id, "pet-8", frozenset({Role.READER}), Sensitivity.INTERNAL)
    assert dict((r.result_id, c) for r, c in archive.list_results_with_content(owner, "s1"))["r1"]
    with pytest.raises(Forbidden):
        archive.list_results_with_content(stranger, "s1")
    with pytest.raises(NotFound):
        archive.list_results_with_content(other_tenant, "s1")


def test_a_tampered_original_fails_the_page_and_is_audited(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    _session(archive, agent)
    r6 = archive.list_results(agent, "s1")[5]
    with archive.store.write() as conn:
        conn.execute(
            update(t.blobs)
            .where(t.blobs.c.tenant_id == agent.tenant_id, t.blobs.c.sha256 == r6.content_sha256)
            .values(content=b"a forged original")
        )
    with pytest.raises(IntegrityFailure):
        archive.list_results_with_content(agent, "s1")
    assert archive.list_results_with_content(agent, "s1", limit=5)[0][1] == b"one\ntwo\nthree\n"
    events = [e for e in archive.audit_events(admin) if e.action == "integrity_failure"]
    assert [(e.detail["action"], e.detail["sha256"]) for e in events] == [
        ("list_results_with_content", r6.content_sha256)
    ]
