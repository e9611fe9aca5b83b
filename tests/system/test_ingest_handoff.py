"""`Mnemo.ingest` indexes the versions its write made without reading them back
(`EvidenceBatch.made`, mnemo_sea/system/projection/indexer.py): the index must hold exactly what a replay
from the archive writes, and a change committed between the write and its drain must win.

Each test reads the index's stored points and the outbox table, not only the reports.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import select, update

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval.filters import tenant_filter
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("handoff", "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
BERLIN = datetime(2031, 3, 1, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))


def item(eid: str, body: str | bytes, **fields: object) -> EvidenceInput:
    return EvidenceInput(body=body, source=f"kb/{eid}", evidence_id=eid, **fields)  # type: ignore[arg-type]


def points(m: Mnemo) -> dict[tuple[str, int, int], dict[str, object]]:
    """Every stored point of the tenant, by (evidence id, version, chunk), with its payload."""
    found = m.index.backend.matching(tenant_filter(AGENT.tenant_id))
    return {(p.evidence_id, p.version, p.chunk): p.to_dict() for _, p in found}


def outbox_state(m: Mnemo) -> list[tuple[str, str, bool]]:
    with m.archive.store.read() as conn:
        rows = conn.execute(
            select(t.outbox.c.op, t.outbox.c.entity_ref, t.outbox.c.done_at).order_by(t.outbox.c.id)
        )
        return [(r.op, r.entity_ref, r.done_at is not None) for r in rows]


def test_an_ingest_indexes_what_a_replay_from_the_archive_indexes(mnemo: Mnemo) -> None:
    mnemo.ingest(AGENT, [item("x", "x first version about otters")])
    report = mnemo.ingest(
        AGENT,
        [
            item("x", "x second version about otters"),  # supersedes a version stored before
            item("x", "x third version about otters", statement="a claim"),  # supersedes the one above
            item("z", "zebras in the valley", valid_from=BERLIN, valid_until=BERLIN + timedelta(days=3)),
            item(
                "z",
                "zebras in the valley",
                valid_from=BERLIN.astimezone(UTC),
                valid_until=BERLIN + timedelta(days=3),
            ),
            item("w", "walruses", owner="owner-7", observed_at=BERLIN),
            item("b", b"\xff\xfe not utf-8", media_type="application/octet-stream"),  # kept, not searchable
        ],
    )
    assert [(r.evidence_id, r.version, r.status) for r in report.stored] == [
        ("x", 2, "active"),
        ("x", 3, "active"),
        ("z", 1, "active"),
        ("z", 1, "active"),  # the same instants: unchanged
        ("w", 1, "active"),
        ("b", 1, "active"),
    ]
    # Searchable on return; a small batch's flush is left to the group commit, which sync ends.
    mnemo.sync()
    assert all(done for _, _, done in outbox_state(mnemo))
    handed = points(mnemo)
    statuses = {(eid, v): p["status"] for (eid, v, _), p in handed.items()}
    assert statuses == {
        ("x", 1): "superseded",
        ("x", 2): "superseded",
        ("x", 3): "active",
        ("z", 1): "active",
        ("w", 1): "active",
    }
    # The records answered are what the archive holds (times in UTC).
    for record in report.stored:
        stored, _ = mnemo.archive.get_evidence(AGENT, record.evidence_id, version=record.version)
        assert record == stored.__class__(**{**stored.__dict__, "status": "active", "ended_at": None})
        times = (record.observed_at, record.recorded_at, record.valid_from, record.valid_until)
        assert all(when is None or when.tzinfo is UTC for when in times)  # as a read returns them
    # Replay every row from the archive alone: the index must not change by a single field.
    with mnemo.archive.store.write() as conn:
        conn.execute(update(t.outbox).values(done_at=None, applied_at=None))
    assert mnemo.sync().applied == len(outbox_state(mnemo))
    assert points(mnemo) == handed


def test_a_change_committed_between_the_write_and_its_drain_wins(mnemo: Mnemo) -> None:
    batch = mnemo.archive.write_evidence_batch(
        AGENT, [item("a", "aardvarks dig burrows"), item("r", "ravens remember faces")]
    )
    assert set(batch.made) == {"a@1", "r@1"}
    # Before the drain: another write supersedes one version, and one is retracted.
    mnemo.archive.put_evidence(AGENT, item("a", "aardvarks dig deeper burrows"))
    mnemo.archive.retract(AGENT, "r", "wrong bird")
    report = mnemo.indexer.drain(made=batch)
    assert report.pending == 0 and report.failed == 0
    statuses = {(eid, v): p["status"] for (eid, v, _), p in points(mnemo).items()}
    assert statuses == {("a", 1): "superseded", ("a", 2): "active"}
    assert all(done for _, _, done in outbox_state(mnemo))
    hits = mnemo.search(AGENT, "aardvarks burrows", mode="bm25").hits
    assert [(h.evidence_id, h.version) for h in hits] == [("a", 2)]


ADMIN = Principal("handoff", "admin", frozenset({Role.ADMIN, Role.AGENT}), Sensitivity.RESTRICTED)


def test_a_record_deleted_and_made_again_before_the_drain_is_indexed_as_stored(mnemo: Mnemo) -> None:
    """Deleted, then stored again under the same id, the record's new version has the ref the
    first write handed over (`d@1`): the drain must index what the archive holds now, never the
    deleted text (another thread's or process's writes can fall between a write and its drain)."""
    batch = mnemo.archive.write_evidence_batch(AGENT, [item("d", "dodos were flightless")])
    mnemo.archive.delete_evidence(ADMIN, "d")
    again = mnemo.archive.write_evidence_batch(AGENT, [item("d", "dugongs graze seagrass")])
    assert set(batch.made) == set(again.made) == {"d@1"}
    report = mnemo.indexer.drain(made=batch)
    assert report.pending == 0 and report.failed == 0
    stored = points(mnemo)
    assert {key[:2] for key in stored} == {("d", 1)}
    assert {p["content_sha256"] for p in stored.values()} == {again.records[0].content_sha256}
    assert mnemo.search(AGENT, "dodos flightless", mode="bm25").hits == ()
    assert [h.evidence_id for h in mnemo.search(AGENT, "dugongs seagrass", mode="bm25").hits] == ["d"]
    assert all(done for _, _, done in outbox_state(mnemo))
