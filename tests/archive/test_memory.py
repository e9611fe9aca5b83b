"""Memory facts: `(owner, key) -> value` with a supersede chain, owner isolation, model inferences
as candidates, TTL enforced at read time, and reads as of a past moment."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import ManualWallClock
from sqlalchemy import func, select

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    EvidenceInput,
    Forbidden,
    InvalidInput,
    Principal,
    Role,
    Sensitivity,
    SourceRef,
)
from mnemo_sea.archive.storage import schema as t

TICK = timedelta(microseconds=1)


def user(subject: str, tenant: str = "clinic-a") -> Principal:
    """An end user: reader role, acting for itself only."""
    return Principal(tenant, subject, frozenset({Role.READER}), Sensitivity.INTERNAL)


def count(archive: Archive, table: Any) -> int:
    with archive.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def memory_outbox(archive: Archive) -> list[tuple[str, str, dict[str, Any]]]:
    with archive.store.read() as conn:
        rows = conn.execute(select(t.outbox).where(t.outbox.c.entity == "memory").order_by(t.outbox.c.id))
        return [(r.op, r.entity_ref, json.loads(r.payload_json)) for r in rows]


def test_design_note_example_timezone_correction(archive: Archive) -> None:
    """../shared/design-notes/002: UTC then a user correction gives Asia/Shanghai, 2 versions,
    latest source user_correction."""
    me = user("user-7")
    first = archive.remember(me, "user-7", "timezone", "UTC", "user_claim")
    assert (first.persisted, first.reason, first.fact.version) == (True, "new fact", 1)
    second = archive.remember(me, "user-7", "timezone", "Asia/Shanghai", "user_correction")
    assert (second.persisted, second.reason, second.fact.version) == (True, "supersedes version 1", 2)

    current = archive.current(me, "user-7", "timezone")
    assert current is not None
    assert current.value == "Asia/Shanghai"
    assert current.provenance == "user_correction"
    history = archive.memory_history(me, "user-7", "timezone")
    assert len(history) == 2
    assert [(h.value, h.provenance, h.status) for h in history] == [
        ("UTC", "user_claim", "superseded"),
        ("Asia/Shanghai", "user_correction", "active"),
    ]
    assert memory_outbox(archive) == [
        (
            "index_upsert",
            "user-7/timezone@1",
            {"owner": "user-7", "key": "timezone", "version": 1, "expires_at": None},
        ),
        ("index_status", "user-7/timezone@1", {"owner": "user-7"}),  # stays searchable as_of
        (
            "index_upsert",
            "user-7/timezone@2",
            {"owner": "user-7", "key": "timezone", "version": 2, "expires_at": None},
        ),
    ]


def test_same_value_again_is_unchanged(archive: Archive, agent: Principal) -> None:
    first = archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    outbox_before = memory_outbox(archive)
    again = archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    assert again.persisted and again.reason == "unchanged"
    assert again.fact == first.fact
    assert len(archive.memory_history(agent, "user-7", "timezone")) == 1
    assert memory_outbox(archive) == outbox_before
    # The same value from another source is a new version: the provenance is part of the fact.
    confirmed = archive.remember(agent, "user-7", "timezone", "UTC", "user_correction")
    assert confirmed.fact.version == 2 and confirmed.fact.provenance == "user_correction"


def test_history_keeps_every_superseded_version(archive: Archive, agent: Principal) -> None:
    values = ["UTC", "Europe/Berlin", "Asia/Shanghai", "UTC"]
    outcomes = [archive.remember(agent, "user-7", "timezone", v, "user_correction") for v in values]
    history = archive.memory_history(agent, "user-7", "timezone")
    assert [h.value for h in history] == values
    assert [h.version for h in history] == [1, 2, 3, 4]
    assert [h.status for h in history] == ["superseded"] * 3 + ["active"]
    assert history[-1] == outcomes[-1].fact
    # Keys and owners are separate chains.
    archive.remember(agent, "user-7", "language", "zh", "user_claim")
    archive.remember(agent, "user-8", "timezone", "UTC", "user_claim")
    assert len(archive.memory_history(agent, "user-7", "timezone")) == 4
    assert [f.key for f in archive.facts(agent, "user-7")] == ["language", "timezone"]
    assert [f.value for f in archive.facts(agent, "user-7")] == ["zh", "UTC"]


def test_current_at_shows_the_version_in_force_then(archive: Archive, agent: Principal) -> None:
    v1 = archive.remember(agent, "user-7", "timezone", "UTC", "user_claim").fact
    v2 = archive.remember(agent, "user-7", "timezone", "Asia/Shanghai", "user_correction").fact
    assert archive.current(agent, "user-7", "timezone", at=v1.created_at - TICK) is None
    at_v1 = archive.current(agent, "user-7", "timezone", at=v1.created_at)
    assert at_v1 is not None and (at_v1.value, at_v1.version) == ("UTC", 1)
    just_before = archive.current(agent, "user-7", "timezone", at=v2.created_at - TICK)
    assert just_before is not None and just_before.value == "UTC"
    at_v2 = archive.current(agent, "user-7", "timezone", at=v2.created_at)
    assert at_v2 is not None and at_v2.value == "Asia/Shanghai"
    later = archive.current(agent, "user-7", "timezone", at=datetime.now(UTC) + timedelta(days=365))
    assert later is not None and later.value == "Asia/Shanghai"
    with pytest.raises(InvalidInput) as err:
        archive.current(agent, "user-7", "timezone", at=datetime(2026, 1, 1))
    assert err.value.field == "at"


def test_concurrent_corrections_of_one_fact_take_turns(archive: Archive, agent: Principal) -> None:
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def correct(i: int) -> None:
        barrier.wait()
        try:
            archive.remember(agent, "user-7", "timezone", f"Etc/GMT-{i}", "user_correction")
        except BaseException as e:  # asserted on below
            errors.append(e)

    threads = [threading.Thread(target=correct, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = archive.memory_history(agent, "user-7", "timezone")
    assert [h.version for h in history] == [1, 2, 3, 4, 5, 6]
    assert [h.status for h in history] == ["superseded"] * 5 + ["active"]
    assert [h.created_at for h in history] == sorted(h.created_at for h in history)
    current = archive.current(agent, "user-7", "timezone")
    assert current is not None and current.version == 6
    assert {h.value for h in history} == {f"Etc/GMT-{i}" for i in range(6)}


# ---- TTL -----------------------------------------------------------------------------------


def test_ttl_hides_an_expired_fact_at_read_time(
    archive: Archive, agent: Principal, wall_clock: ManualWallClock
) -> None:
    fact = archive.remember(agent, "user-7", "mood", "hungry", "user_claim", ttl_seconds=0.3).fact
    assert fact.expires_at is not None and fact.expires_at == fact.created_at + timedelta(milliseconds=300)
    visible = archive.current(agent, "user-7", "mood")
    assert visible is not None and visible.value == "hungry"
    assert [f.key for f in archive.facts(agent, "user-7")] == ["mood"]

    # The `at` parameter gives the same answer as waiting, without any sweep.
    assert archive.current(agent, "user-7", "mood", at=fact.expires_at - TICK) is not None
    assert archive.current(agent, "user-7", "mood", at=fact.expires_at) is None

    # A short-lived correction does not bring the superseded value back when it expires.
    archive.remember(agent, "user-7", "city", "Berlin", "user_claim")
    paris = archive.remember(agent, "user-7", "city", "Paris", "user_claim", ttl_seconds=0.3).fact
    assert paris.expires_at is not None
    assert archive.current(agent, "user-7", "city", at=paris.expires_at) is None

    wall_clock.past(max(fact.expires_at, paris.expires_at))
    assert archive.current(agent, "user-7", "mood") is None
    assert archive.current(agent, "user-7", "city") is None
    assert archive.facts(agent, "user-7") == []
    # The rows are still there (no sweep ran); history shows them.
    assert count(archive, t.memory_facts) == 3
    assert [h.value for h in archive.memory_history(agent, "user-7", "mood")] == ["hungry"]

    # Remembering the same value after expiry is a new version, not "unchanged".
    again = archive.remember(agent, "user-7", "mood", "hungry", "user_claim")
    assert again.reason != "unchanged" and again.fact.version == 2 and again.fact.expires_at is None
    current = archive.current(agent, "user-7", "mood")
    assert current is not None and current.version == 2


# ---- model inferences ----------------------------------------------------------------------


def test_model_inference_is_a_candidate_unless_policy_allows(
    archive: Archive, db_url: str, agent: Principal
) -> None:
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    outcome = archive.remember(agent, "user-7", "timezone", "America/New_York", "model_inference")
    assert outcome.persisted is False and "candidate" in outcome.reason
    assert (outcome.fact.value, outcome.fact.provenance, outcome.fact.version) == (
        "America/New_York",
        "model_inference",
        0,
    )
    current = archive.current(agent, "user-7", "timezone")
    assert current is not None and current.value == "UTC"
    assert len(archive.memory_history(agent, "user-7", "timezone")) == 1
    fresh = archive.remember(agent, "user-7", "diet", "vegetarian", "model_inference")
    assert not fresh.persisted
    assert archive.current(agent, "user-7", "diet") is None
    assert count(archive, t.memory_facts) == 1
    assert [ref for _, ref, _ in memory_outbox(archive)] == ["user-7/timezone@1"]

    permissive = Archive.open(db_url, ArchivePolicy(persist_model_inferences=True))
    try:
        stored = permissive.remember(agent, "user-7", "diet", "vegetarian", "model_inference")
        assert stored.persisted and stored.fact.version == 1
    finally:
        permissive.close()
    diet = archive.current(agent, "user-7", "diet")
    assert diet is not None and diet.provenance == "model_inference" and diet.value == "vegetarian"


# ---- owner isolation -----------------------------------------------------------------------


def test_a_user_reads_and_writes_only_its_own_facts(archive: Archive, agent: Principal) -> None:
    me, other = user("user-7"), user("user-8")
    archive.remember(me, "user-7", "timezone", "UTC", "user_claim")
    archive.remember(other, "user-8", "timezone", "Europe/Paris", "user_claim")

    mine = archive.current(me, "user-7", "timezone")
    assert mine is not None and mine.value == "UTC"
    for call in (
        lambda: archive.current(me, "user-8", "timezone"),
        lambda: archive.memory_history(me, "user-8", "timezone"),
        lambda: archive.facts(me, "user-8"),
        lambda: archive.remember(me, "user-8", "timezone", "UTC", "user_correction"),
    ):
        with pytest.raises(Forbidden) as err:
            call()
        assert err.value.detail["owner"] == "user-8"
        assert "Europe/Paris" not in err.value.message

    theirs = archive.current(agent, "user-8", "timezone")
    assert theirs is not None and theirs.value == "Europe/Paris" and theirs.version == 1


def test_another_tenant_sees_nothing(archive: Archive, agent: Principal, other_tenant: Principal) -> None:
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    assert archive.current(other_tenant, "user-7", "timezone") is None
    assert archive.memory_history(other_tenant, "user-7", "timezone") == []
    assert archive.facts(other_tenant, "user-7") == []
    # A same-named owner in the other tenant is another person: its own chain starts at 1.
    theirs = archive.remember(other_tenant, "user-7", "timezone", "Asia/Tokyo", "user_claim")
    assert theirs.fact.version == 1
    mine = archive.current(agent, "user-7", "timezone")
    assert mine is not None and mine.value == "UTC" and mine.version == 1
    tokyo = archive.current(other_tenant, "user-7", "timezone")
    assert tokyo is not None and tokyo.value == "Asia/Tokyo"


# ---- derived_from and bad input ------------------------------------------------------------


def test_derived_from_is_kept_as_a_source_ref(archive: Archive, agent: Principal) -> None:
    archive.put_evidence(agent, EvidenceInput(evidence_id="form:7", body="tz UTC", source="intake"))
    archive.record(agent, "s1", "crm.lookup", "city: Paris")
    archive.record(agent, "s1", "crm.lookup", "city: Berlin")
    a = archive.remember(agent, "user-7", "timezone", "UTC", "document", derived_from="evidence:form:7")
    assert a.fact.derived_from == "evidence:form:7"
    b = archive.remember(
        agent, "user-7", "city", "Berlin", "tool_fact", derived_from=SourceRef.result("s1", "r2")
    )
    assert b.fact.derived_from == "result:s1/r2"


BAD_INPUT: list[tuple[str, str, str, str, dict[str, Any], str]] = [
    ("bad owner", "timezone", "UTC", "user_claim", {}, "owner"),
    ("user-7", "", "UTC", "user_claim", {}, "key"),
    ("user-7", "has space", "UTC", "user_claim", {}, "key"),
    ("user-7", "k" * 256, "UTC", "user_claim", {}, "key"),
    ("user-7", "timezone", "", "user_claim", {}, "value"),
    ("user-7", "timezone", "   ", "user_claim", {}, "value"),
    ("user-7", "timezone", "U\x00TC", "user_claim", {}, "value"),
    ("user-7", "timezone", "x" * 8001, "user_claim", {}, "value"),
    ("user-7", "timezone", "UTC", "gossip", {}, "provenance"),
    ("user-7", "timezone", "UTC", "user_claim", {"ttl_seconds": 0}, "ttl_seconds"),
    ("user-7", "timezone", "UTC", "user_claim", {"ttl_seconds": -1}, "ttl_seconds"),
    ("user-7", "timezone", "UTC", "user_claim", {"derived_from": "doc:7"}, "derived_from"),
    ("user-7", "timezone", "UTC", "user_claim", {"derived_from": "result:s1/7"}, "result_id"),
    # A model inference is validated like any fact before it is turned away as a candidate.
    ("user-7", "bad key!", "UTC", "model_inference", {}, "key"),
]


def test_bad_input_is_rejected_and_stores_nothing(archive: Archive, agent: Principal) -> None:
    archive.remember(agent, "user-7", "timezone", "Asia/Shanghai", "user_claim")
    outbox_before = memory_outbox(archive)
    for owner, key, value, provenance, kw, field in BAD_INPUT:
        with pytest.raises(InvalidInput) as err:
            archive.remember(agent, owner, key, value, provenance, **kw)
        assert err.value.field == field, (owner, key, value, provenance, kw)
    assert count(archive, t.memory_facts) == 1
    assert memory_outbox(archive) == outbox_before
    current = archive.current(agent, "user-7", "timezone")
    assert current is not None and current.value == "Asia/Shanghai"
