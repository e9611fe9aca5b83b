"""The listings a person pages through (the console): evidence records by id, the owners memory is
kept about and an owner's facts, summaries. Each is paged, shows what the principal may read and
nothing else, and only its tenant's rows: another tenant holding the very same ids and owners is
scanned by the same statements and never comes back."""

from __future__ import annotations

import pytest
from fakes import ManualWallClock

from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    Forbidden,
    InvalidInput,
    Principal,
    Role,
    Sensitivity,
)

READER = Principal("clinic-a", "pet-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
IDS = ("kb/a#1", "kb/b.2", "kb/c:3", "kb/d@4")


def _evidence(archive: Archive, who: Principal, eid: str, body: str, **fields: object) -> None:
    archive.put_evidence(who, EvidenceInput(body, "doc", evidence_id=eid, **fields))  # type: ignore[arg-type]


def _both_tenants(archive: Archive, agent: Principal, other_tenant: Principal) -> None:
    """The same ids in two tenants; the other's are more, newer and differently shaped, so a
    leak would show in every column."""
    for eid in IDS:
        _evidence(archive, agent, eid, f"a: {eid}")
    _evidence(archive, agent, "kb/a#1", "a: second version")
    archive.retract(agent, "kb/c:3", "wrong")
    for eid in (*IDS, "kb/only-b"):
        for n in range(3):
            _evidence(archive, other_tenant, eid, f"b: {eid} {n}", kind="tool_result")


def test_evidence_is_listed_by_id_with_its_newest_version_in_one_tenant_only(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _both_tenants(archive, agent, other_tenant)
    listed = archive.list_evidence(agent)
    assert [e.evidence_id for e in listed] == sorted(IDS)  # ASCII ids: every collation agrees
    by_id = {e.evidence_id: e for e in listed}
    assert (by_id["kb/a#1"].latest_version, by_id["kb/a#1"].versions, by_id["kb/a#1"].status) == (
        2,
        2,
        "active",
    )
    retracted = by_id["kb/c:3"]
    assert (retracted.status, retracted.versions, retracted.kind) == ("retracted", 1, "knowledge")
    assert retracted.ended_at is not None and retracted.ended_at > retracted.recorded_at
    history = archive.evidence_history(agent, "kb/a#1")
    assert by_id["kb/a#1"].recorded_at == history[-1].recorded_at
    # The other tenant sees its own: the same ids, other counts and kinds, and one more.
    theirs = archive.list_evidence(other_tenant)
    assert [e.evidence_id for e in theirs] == sorted((*IDS, "kb/only-b"))
    assert {(e.versions, e.kind) for e in theirs} == {(3, "tool_result")}


def test_evidence_pages_follow_one_another_without_gaps_or_repeats(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _both_tenants(archive, agent, other_tenant)
    whole = [e.evidence_id for e in archive.list_evidence(agent)]
    pages = [[e.evidence_id for e in archive.list_evidence(agent, limit=3, offset=o)] for o in (0, 3, 6)]
    assert pages[0] + pages[1] == whole and pages[2] == []
    for bad in ({"limit": 0}, {"limit": 10_001}, {"offset": -1}, {"limit": True}):
        with pytest.raises(InvalidInput):
            archive.list_evidence(agent, **bad)  # type: ignore[arg-type]


def test_a_record_the_principal_may_not_read_is_not_even_named(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    _evidence(archive, agent, "open", "for anyone")
    _evidence(archive, agent, "about-pet-7", "pet 7's", owner="pet-7")
    _evidence(archive, agent, "about-pet-8", "pet 8's", owner="pet-8")
    _evidence(archive, admin, "secret", "restricted", sensitivity=Sensitivity.RESTRICTED)
    _evidence(archive, agent, "once-open", "internal")
    _evidence(archive, admin, "once-open", "restricted now", sensitivity=Sensitivity.RESTRICTED)
    assert [e.evidence_id for e in archive.list_evidence(admin)] == sorted(
        ["about-pet-7", "about-pet-8", "once-open", "open", "secret"]
    )
    assert [e.evidence_id for e in archive.list_evidence(agent)] == ["about-pet-7", "about-pet-8", "open"]
    listed = [e.evidence_id for e in archive.list_evidence(READER)]
    assert listed == ["about-pet-7", "open"]
    for eid in listed:  # every id listed opens for the one it was listed to
        archive.evidence_history(READER, eid)
    nobody = Principal("clinic-a", "x", frozenset(), Sensitivity.INTERNAL)
    with pytest.raises(Forbidden):
        archive.list_evidence(nobody)


def test_memory_owners_and_their_facts_page_in_one_tenant_only(
    archive: Archive, agent: Principal, other_tenant: Principal, wall_clock: ManualWallClock
) -> None:
    for owner in ("pet-7", "pet-8"):
        for key in ("diet", "weight", "allergy/food"):
            archive.remember(agent, owner, key, f"{owner} {key}", "user_claim")
    archive.remember(agent, "pet-7", "diet", "kibble", "user_correction")
    archive.remember(agent, "pet-7", "mood", "calm", "tool_fact", ttl_seconds=60)
    for owner in ("pet-7", "pet-9"):
        for key in ("diet", "leak-1", "leak-2", "leak-3"):
            archive.remember(other_tenant, owner, key, f"b {owner} {key}", "user_claim")
    wall_clock.advance(61)  # the mood has lapsed: kept, but no fact now
    owners = archive.list_memory_owners(agent)
    assert [(o.owner, o.facts, o.keys) for o in owners] == [("pet-7", 3, 4), ("pet-8", 3, 3)]
    assert owners[0].changed_at == archive.memory_history(agent, "pet-7", "mood")[-1].created_at
    assert [o.owner for o in archive.list_memory_owners(agent, limit=1, offset=1)] == ["pet-8"]
    assert [o.owner for o in archive.list_memory_owners(READER)] == ["pet-7"]  # a user: itself
    facts = archive.facts(agent, "pet-7")
    assert [(f.key, f.value) for f in facts] == [
        ("allergy/food", "pet-7 allergy/food"),
        ("diet", "kibble"),
        ("weight", "pet-7 weight"),
    ]
    pages = [archive.facts(agent, "pet-7", offset=o, limit=2) for o in (0, 2, 4)]
    assert pages[0] + pages[1] == facts and pages[2] == []
    with pytest.raises(InvalidInput):
        archive.facts(agent, "pet-7", limit=0)
    with pytest.raises(Forbidden):
        archive.facts(READER, "pet-8")
    assert [o.owner for o in archive.list_memory_owners(other_tenant)] == ["pet-7", "pet-9"]


def test_summaries_page_over_the_ones_the_principal_may_read(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _evidence(archive, agent, "open", "for anyone")
    _evidence(archive, agent, "about-pet-8", "pet 8's", owner="pet-8")
    _evidence(archive, other_tenant, "open", "theirs")
    made = [archive.create_summary(agent, f"summary {n}", ["evidence:open"]).summary_id for n in range(5)]
    hidden = archive.create_summary(agent, "about pet 8", ["evidence:about-pet-8"]).summary_id
    made.append(archive.create_summary(agent, "summary 5", ["evidence:open"]).summary_id)
    for n in range(4):
        archive.create_summary(other_tenant, f"theirs {n}", ["evidence:open"])
    assert [s.summary_id for s in archive.list_summaries(READER)] == made  # pet 8's is skipped
    pages = [[s.summary_id for s in archive.list_summaries(READER, limit=4, offset=o)] for o in (0, 4, 8)]
    assert pages == [made[:4], made[4:], []]
    assert hidden in [s.summary_id for s in archive.list_summaries(agent, limit=10)]
    assert len(archive.list_summaries(other_tenant)) == 4
