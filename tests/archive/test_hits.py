"""Search hydration through the archive (`Archive.read_hits`, archive/hits.py): a hit pointer is
read back as the caller, so a pointer the caller may not read is dropped even when handed to
the read directly, as a stale or wrong index payload would; and the read is batched.

Each test builds one archive with every case in it (a PostgreSQL database per test is the
expensive part of the suite)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hits import index_hit
from sqlalchemy import select, update
from statements import statements_of

from mnemo_sea.archive import Archive, EvidenceInput, Forbidden, Principal, Role, Sensitivity
from mnemo_sea.archive.hits import HydratedHit
from mnemo_sea.archive.rules.refs import memory_index_id, result_index_id
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval.outcome import Hit

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
READER = Principal("clinic-a", "u-1", frozenset({Role.READER}), Sensitivity.INTERNAL)
STRANGER = Principal("shop-b", "agent-9", frozenset({Role.AGENT}), Sensitivity.RESTRICTED)


def tick() -> datetime:
    time.sleep(0.002)
    moment = datetime.now(UTC)
    time.sleep(0.002)
    return moment


def evidence(archive: Archive, principal: Principal, evidence_id: str, body: str, **kw: Any) -> Hit:
    rec = archive.put_evidence(
        principal, EvidenceInput(evidence_id=evidence_id, body=body, source="test", **kw)
    )
    return index_hit(rec.evidence_id, rec.version, rec.kind, 0, len(body), rec.content_sha256)


def note(archive: Archive, session_id: str, owner: str, text: str, **kw: Any) -> Hit:
    result = archive.record(AGENT, session_id, "lab.lookup", "raw lab output", owner=owner, **kw)
    archive.archive_results(AGENT, session_id, [(result.result_id, text)])
    return index_hit(result_index_id(session_id, result.result_id), 1, "tool_result", 0, len(text))


def fact(archive: Archive, owner: str, key: str, value: str, provenance: str = "user_claim") -> Hit:
    stored = archive.remember(AGENT, owner, key, value, provenance).fact
    return index_hit(memory_index_id(owner, key), stored.version, "memory", 0, len(key) + 2 + len(value))


def summary(archive: Archive, text: str, derived_from: list[str]) -> Hit:
    made = archive.create_summary(AGENT, text, derived_from)
    return index_hit(made.summary_id, 1, "summary", 0, len(text))


@dataclass(frozen=True)
class World:
    readable: Hit  # what every case is compared with: the reader may read it
    other_tenant: Hit
    above_clearance: Hit
    other_owner: Hit
    retracted: Hit
    superseded: Hit  # version 1 of a record rewritten at `rewritten`
    rewritten: datetime
    rewrite: Hit  # its version 2
    corrupt: Hit
    own_note: Hit
    other_owners_note: Hit
    secret_note: Hit
    own_fact: Hit
    other_owners_fact: Hit
    old_fact: Hit  # version 1, superseded after `still_fish`
    still_fish: datetime
    open_summary: Hit
    other_owners_summary: Hit


def build(archive: Archive) -> World:
    readable = evidence(archive, AGENT, "policy:open", "open hours are nine to five")
    other_tenant = evidence(archive, STRANGER, "policy:theirs", "another tenant's policy")
    above = evidence(
        archive, AGENT, "policy:secret", "confidential dosage", sensitivity=Sensitivity.CONFIDENTIAL
    )
    other_owner = evidence(archive, AGENT, "chart:u-2", "u-2's chart", owner="u-2")
    retracted = evidence(archive, AGENT, "policy:withdrawn", "a withdrawn policy")
    archive.retract(AGENT, "policy:withdrawn", "wrong")
    superseded = evidence(archive, AGENT, "policy:fees", "fees are ten")
    rewritten = tick()
    rewrite = evidence(archive, AGENT, "policy:fees", "fees are twelve")
    corrupt = evidence(archive, AGENT, "scan:1", "a scan's text")
    with archive.store.write() as conn:
        conn.execute(
            update(t.blobs).where(t.blobs.c.sha256 == corrupt.content_sha256).values(content=b"forged")
        )
    own_fact = fact(archive, "u-1", "pet", "a cat")
    old_fact = fact(archive, "u-1", "diet", "fish")
    still_fish = tick()
    fact(archive, "u-1", "diet", "no fish", "user_correction")
    chart = evidence(archive, AGENT, "chart:u-1", "u-1's chart", owner="u-1")
    return World(
        readable=readable,
        other_tenant=other_tenant,  # read as clinic-a, it names nothing
        above_clearance=above,
        other_owner=other_owner,
        retracted=retracted,
        superseded=superseded,
        rewritten=rewritten,
        rewrite=rewrite,
        corrupt=corrupt,
        own_note=note(archive, "s-u1", "u-1", "u-1's lab note"),
        other_owners_note=note(archive, "s-u2", "u-2", "u-2's lab note"),
        secret_note=note(
            archive, "s-u1b", "u-1", "a confidential note", sensitivity=Sensitivity.CONFIDENTIAL
        ),
        own_fact=own_fact,
        other_owners_fact=fact(archive, "u-2", "pet", "a dog"),
        old_fact=old_fact,
        still_fish=still_fish,
        open_summary=summary(archive, "summary of u-1's chart", [f"evidence:{chart.evidence_id}"]),
        other_owners_summary=summary(archive, "summary of u-2's chart", ["evidence:chart:u-2"]),
    )


@pytest.fixture
def world(archive: Archive) -> World:
    return build(archive)


def read_one(
    archive: Archive, principal: Principal, pointer: Hit, as_of: datetime | None = None
) -> HydratedHit | None:
    [found] = archive.read_hits(principal, [pointer], as_of)
    return found


def test_what_the_caller_may_read_comes_back_with_the_text_of_its_span(
    archive: Archive, world: World
) -> None:
    assert read_one(archive, READER, world.readable) == HydratedHit(
        "open hours are nine to five", "", "evidence"
    )
    assert read_one(archive, READER, replace(world.readable, start=5, end=10)) == HydratedHit(
        "hours", "", "evidence"
    )
    assert read_one(archive, READER, world.own_note) == HydratedHit(
        "u-1's lab note", "s-u1/r1", "archived result note"
    )
    assert read_one(archive, READER, world.own_fact) == HydratedHit(
        "pet: a cat", "u-1/pet", "memory (user_claim)"
    )
    found = read_one(archive, READER, world.open_summary)
    assert found is not None and found.snippet == "summary of u-1's chart" and "derived" in found.label
    # The agent acts for every owner: what the reader may not read for its owner, it may.
    for pointer in (
        world.other_owner,
        world.other_owners_note,
        world.other_owners_fact,
        world.other_owners_summary,
    ):
        assert read_one(archive, AGENT, pointer) is not None


def test_a_pointer_the_caller_may_not_read_is_dropped(archive: Archive, world: World) -> None:
    cases = {
        "another tenant's record": (READER, world.other_tenant),
        "above the caller's clearance": (READER, world.above_clearance),
        "another owner's evidence": (READER, world.other_owner),
        "another owner's session note": (READER, world.other_owners_note),
        "a note above the caller's clearance": (READER, world.secret_note),
        "another owner's fact": (READER, world.other_owners_fact),
        "a summary of another owner's data": (READER, world.other_owners_summary),
        "a retracted record": (AGENT, world.retracted),
        "a superseded version": (AGENT, world.superseded),
        "a superseded fact": (AGENT, world.old_fact),
        "stored bytes that fail their hash": (AGENT, world.corrupt),
        "a hash the record does not have": (AGENT, replace(world.readable, content_sha256="0" * 64)),
        "a version that does not exist": (AGENT, replace(world.readable, version=7)),
        "a result id no result could have": (AGENT, replace(world.own_note, evidence_id="result:s-u1/x1")),
    }
    read = archive.read_hits(AGENT, [world.readable], None)
    assert read[0] is not None  # the control: the pointers differ only in what the case says
    for case, (principal, pointer) in cases.items():
        assert read_one(archive, principal, pointer) is None, case
    # In one call, the others still come back, in order.
    mixed = [world.readable, world.other_owner, world.own_fact, world.corrupt]
    assert [x is not None for x in archive.read_hits(READER, mixed, None)] == [True, False, True, False]


def test_a_sensitivity_stored_outside_the_scale_is_readable_by_no_one(archive: Archive) -> None:
    pointer = evidence(archive, AGENT, "policy:odd", "a level written around the archive")
    assert read_one(archive, AGENT, pointer) is not None
    for level in (-1, 4):  # no write of the archive stores these; a hand-edited row could
        with archive.store.write() as conn:
            conn.execute(
                update(t.evidence).where(t.evidence.c.evidence_id == "policy:odd").values(sensitivity=level)
            )
        assert read_one(archive, AGENT, pointer) is None, level
        assert read_one(archive, replace(AGENT, clearance=Sensitivity.RESTRICTED), pointer) is None, level


def test_an_original_failing_its_hash_is_audited_as_a_direct_read_of_it_is(
    archive: Archive, world: World
) -> None:
    def failures() -> list[tuple[str, str, str]]:
        with archive.store.read() as conn:
            rows = conn.execute(
                select(t.audit_events.c.action, t.audit_events.c.target, t.audit_events.c.actor)
                .where(
                    t.audit_events.c.tenant_id == AGENT.tenant_id,
                    t.audit_events.c.action == "integrity_failure",
                )
                .order_by(t.audit_events.c.seq)
            )
            return [tuple(r) for r in rows]

    before = failures()
    assert read_one(archive, AGENT, world.corrupt) is None  # dropped, never served
    assert read_one(archive, AGENT, world.readable) is not None
    new = failures()[len(before) :]
    assert new == [("integrity_failure", f"evidence:{world.corrupt.evidence_id}@1", AGENT.subject)]


def test_as_of_reads_what_answered_then(archive: Archive, world: World) -> None:
    before = world.rewritten
    assert read_one(archive, AGENT, world.superseded, before) is not None
    assert read_one(archive, AGENT, world.rewrite, before) is None  # written later
    assert read_one(archive, AGENT, world.rewrite) is not None
    long_ago = datetime(1971, 1, 1, tzinfo=UTC)
    for pointer in (world.readable, world.own_note, world.own_fact, world.open_summary):
        assert read_one(archive, AGENT, pointer, long_ago) is None
    assert read_one(archive, AGENT, world.old_fact, world.still_fish) is not None


def test_the_caller_needs_the_reader_role(archive: Archive, world: World) -> None:
    nobody = Principal("clinic-a", "u-1", frozenset(), Sensitivity.RESTRICTED)
    with pytest.raises(Forbidden):
        archive.read_hits(nobody, [world.readable], None)


def test_the_read_is_batched_whatever_the_number_of_hits(archive: Archive) -> None:
    kinds: list[list[Hit]] = [[], [], [], []]
    for n in range(10):
        text = f"fact number {n}"
        kinds[0].append(evidence(archive, AGENT, f"doc:{n}", text, owner=f"u-{n}"))
        kinds[1].append(note(archive, f"s-{n}", f"u-{n}", f"note {n}"))
        kinds[2].append(fact(archive, f"u-{n}", "pet", f"pet {n}"))
        kinds[3].append(summary(archive, f"summary {n}", [f"evidence:doc:{n}", f"result:s-{n}/r1"]))

    def count(pointers: list[Hit]) -> int:
        with statements_of(archive.store) as seen:
            found = archive.read_hits(AGENT, pointers, None)
        assert all(x is not None for x in found)
        return len(seen)

    one = count([k[0] for k in kinds])
    ten = count([p for k in kinds for p in k])
    assert one == ten, f"{one} statements for one hit of each kind, {ten} for ten"
    # Evidence (prepared, no transaction); BEGIN (SQLite); notes, memory; summaries, their
    # sources, their sources' owners (2).
    assert ten <= 8
    assert count(kinds[0][:1]) == count(kinds[0]) == 1  # evidence alone, the common search: one SELECT
    assert count(kinds[1][:1]) == count(kinds[1]) < ten  # one kind alone: as many for 1 or 10, fewer


def test_evidence_alone_reads_as_it_does_beside_other_kinds(archive: Archive, world: World) -> None:
    """A search of evidence only takes the read's short way (no target per hit); beside a hit of
    another kind the same versions go the general way. Both answer alike, hit for hit: the
    readable, the forbidden, the retracted, the superseded (now and as of before), the corrupt,
    a wrong hash, a span, metadata, and the same version twice."""
    with_metadata = evidence(archive, AGENT, "doc:meta", "tagged text", metadata={"page": 3})
    pointers = [
        world.readable,
        replace(world.readable, start=5, end=10),
        world.readable,
        world.other_tenant,
        world.above_clearance,
        world.other_owner,
        world.retracted,
        world.superseded,
        world.rewrite,
        world.corrupt,
        replace(world.readable, content_sha256="0" * 64),
        with_metadata,
    ]
    for principal in (READER, AGENT):
        for at in (None, world.rewritten):
            alone = archive.read_hits(principal, pointers, at)
            beside = archive.read_hits(principal, [*pointers, world.own_note], at)[:-1]
            assert alone == beside, (principal.subject, at)
    found = archive.read_hits(AGENT, pointers, None)
    assert [x is not None for x in found] == [
        True,
        True,
        True,
        False,
        True,
        True,
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    assert found[1] == HydratedHit("hours", "", "evidence")
    assert found[-1] is not None and found[-1].metadata == {"page": 3}
    assert archive.read_hits(AGENT, [], None) == []


def test_every_number_of_evidence_hits_reads_each_version_once_in_order(archive: Archive) -> None:
    """The statement names exactly as many versions up to 16 and pads to a power of two above
    (archive/hits.py `_slots`): every count around those edges reads back each hit, once, in the
    order asked, and a padded slot (no evidence id is empty) never matches a row."""
    stored = [evidence(archive, AGENT, f"doc:{n}", f"text number {n}") for n in range(40)]
    for n in (1, 2, 9, 10, 15, 16, 17, 31, 32, 33, 40):
        asked = stored[n - 1 :: -1][:n]  # reversed: the read sorts its keys, the answer must not
        found = archive.read_hits(AGENT, asked, None)
        assert [x.snippet if x else None for x in found] == [
            f"text number {int(p.evidence_id.split(':')[1])}" for p in asked
        ], n


@pytest.fixture
def sqlite_archive(tmp_path: Path) -> Iterator[Archive]:
    """An archive on SQLite only: the query plan below is SQLite's planner's."""
    a = Archive.open(str(tmp_path / "archive.db"))
    try:
        yield a
    finally:
        a.close()


def test_the_evidence_read_searches_the_primary_key_not_the_tenant(sqlite_archive: Archive) -> None:
    # With only an (id, version) row-value IN, SQLite picked ix_evidence_blob by tenant and
    # scanned the tenant's whole evidence table on every search (a cost growing with the
    # archive, not with the hits). The plan of the statement the read runs must look each
    # version up by its whole primary key, and build no temporary index for a list of ids.
    archive = sqlite_archive
    pointers = [evidence(archive, AGENT, f"doc:{n}", f"text {n}") for n in range(3)]
    with statements_of(archive.store) as seen:
        assert all(x is not None for x in archive.read_hits(AGENT, pointers, None))
    [(sql, params)] = [(s.sql, s.parameters) for s in seen if "JOIN evidence" in s.sql]
    with archive.store.read() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", tuple(params)).all()
    details = " | ".join(str(row[-1]) for row in plan)
    assert "evidence_id=? AND version=?" in details, details
    assert "ix_evidence_blob" not in details and "LIST SUBQUERY" not in details, details


def test_targets_of_two_kinds_with_equal_fields_never_share_an_answer(archive: Archive) -> None:
    """An evidence record named like a session, at the version that equals a result's number:
    read together, each pointer gets its own text (the targets' kind tag keeps their keys apart)."""
    note_pointer = note(archive, "visit-7", "u-1", "note of visit 7")  # result r1 of session visit-7
    evidence_pointer = evidence(archive, AGENT, "visit-7", "the record named visit-7")  # version 1
    got = archive.read_hits(AGENT, [evidence_pointer, note_pointer])
    assert [h.snippet if h else None for h in got] == [
        "the record named visit-7"[: evidence_pointer.end],
        "note of visit 7",
    ]
