"""A batch stores exactly what the same items stored one call at a time would.

`write_evidence_batch` writes a whole batch with multi-row statements and works out the version
chains in memory, so an id that appears several times in one batch (new versions, unchanged
repeats, a body that comes back) and a re-ingest of the same batch must leave the same rows as
sequential `put_evidence` calls: evidence versions, blobs, outbox rows in order. The audit chain
names the same versions in the same order, in one event per write: one per put, one per batch.
Both sides run on one database under two tenants, so they are compared row by row on each
backend.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select

from mnemo_sea.archive import Archive, EvidenceInput, EvidenceRecord, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t

SEQUENTIAL = Principal("seq-tenant", "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
BATCHED = Principal("batch-tenant", "loader", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
# Columns stamped with the time of the write: compared by their order, not their value.
TIMES = {"observed_at", "recorded_at", "ended_at", "created_at", "at"}
START = datetime(2026, 3, 1, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))


def item(eid: str, body: str | bytes, **fields: Any) -> EvidenceInput:
    return EvidenceInput(body=body, source=f"kb/{eid}", evidence_id=eid, **fields)


BEFORE = [item("x", "x first"), item("y", "y only"), item("r", "r to retract")]
BATCH = [
    item("x", "x second"),  # supersedes the stored version
    item("x", "x second"),  # unchanged: the version the previous item made
    item("x", "x third", statement="a claim"),  # supersedes a version made in this batch
    item("z", "z one", valid_from=START, valid_until=START + timedelta(days=3)),  # a new chain
    item(
        "z", "z one", valid_from=START.astimezone(UTC), valid_until=START + timedelta(days=3)
    ),  # same instants
    item("z", "z two", owner="owner-7", sensitivity=Sensitivity.CONFIDENTIAL),
    item("y", "y only"),  # unchanged since before the batch
    item("w", "z one"),  # a blob another record of this batch stored
    item("x", "x first"),  # a body that comes back: a new version, the blob exists
    item("r", "r again"),  # supersedes nothing: the chain's last version is retracted
    item("b", b"\x00\x01binary", media_type="application/octet-stream"),
]


def rows(archive: Archive, table: Any, tenant: str, order: list[str]) -> list[dict[str, Any]]:
    with archive.store.read() as conn:
        stmt = select(table).where(table.c.tenant_id == tenant).order_by(*(table.c[c] for c in order))
        return [dict(r._mapping) for r in conn.execute(stmt)]


def comparable(found: list[dict[str, Any]], drop: set[str]) -> list[dict[str, Any]]:
    """Rows without what differs by design: the tenant (also a cache purge's target) and times."""
    return [
        {k: "<tenant>" if v == r["tenant_id"] else v for k, v in r.items() if k not in drop | TIMES}
        for r in found
    ]


def record_view(records: list[EvidenceRecord]) -> list[tuple[Any, ...]]:
    return [(r.evidence_id, r.version, r.status, r.content_sha256, r.ended_at is None) for r in records]


def check_chains(evidence: list[dict[str, Any]]) -> None:
    """The timing a batch must keep: a superseded version ends exactly when the next begins."""
    for eid, versions in itertools.groupby(evidence, key=lambda r: r["evidence_id"]):
        chain = list(versions)
        for older, newer in itertools.pairwise(chain):
            assert older["recorded_at"] <= newer["recorded_at"]
            if older["status"] == "superseded":
                assert older["ended_at"] == newer["recorded_at"], eid
        assert (chain[-1]["ended_at"] is None) == (chain[-1]["status"] == "active")


def test_a_batch_stores_what_sequential_puts_store(archive: Archive) -> None:
    returned: dict[str, list[EvidenceRecord]] = {}
    for principal in (SEQUENTIAL, BATCHED):
        for before in BEFORE:
            archive.put_evidence(principal, before)
        archive.retract(principal, "r", "withdrawn")
    returned["seq"] = [archive.put_evidence(SEQUENTIAL, i) for i in BATCH]
    returned["seq"] += [archive.put_evidence(SEQUENTIAL, i) for i in BATCH]  # a re-ingest
    returned["batch"] = archive.write_evidence_batch(BATCHED, BATCH).records
    returned["batch"] += archive.write_evidence_batch(BATCHED, BATCH).records

    assert record_view(returned["batch"]) == record_view(returned["seq"])
    # A put answers with the version it made (or found) current, even if the batch superseded it.
    assert {r.status for r in returned["batch"]} == {"active"}
    assert [r.version for r in returned["batch"][:3]] == [2, 2, 3]

    tables = {
        "evidence": (t.evidence, ["evidence_id", "version"], set()),
        "blobs": (t.blobs, ["sha256"], set()),
    }
    for name, (table, order, drop) in tables.items():
        seq = rows(archive, table, SEQUENTIAL.tenant_id, order)
        batch = rows(archive, table, BATCHED.tenant_id, order)
        assert comparable(batch, drop) == comparable(seq, drop), name
        if name == "evidence":
            check_chains(seq)
            check_chains(batch)
    outbox = rows(archive, t.outbox, BATCHED.tenant_id, ["id"])
    assert all(r["created_at"] is not None and r["done_at"] is None for r in outbox)
    # The outbox: the same index rows in the same order; a put purges the tenant's cached
    # searches once each, a batch once, after all its index rows.
    seq_outbox = rows(archive, t.outbox, SEQUENTIAL.tenant_id, ["id"])

    def index_rows(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return comparable([r for r in found if r["op"] != "cache_purge"], {"id"})

    assert index_rows(outbox) == index_rows(seq_outbox)
    ops = [r["op"] for r in outbox]
    before = len(BEFORE) + 1  # three puts and a retraction, each its index row then its purge
    assert "cache_purge" not in ops[: 2 * before : 2] and ops[1 : 2 * before : 2] == ["cache_purge"] * before
    first, second = "|".join(ops[2 * before :]).removesuffix("|cache_purge").split("|cache_purge|")
    assert "cache_purge" not in first + second and first and second, ops

    # The audit chains: the writes before the batch (three puts, a retraction) alike on both
    # sides; then an event per put that made a version, and one per batch naming the same
    # versions in the same order (unchanged items name none).
    drop = {"seq", "at", "hash", "prev_hash"}
    seq_events = rows(archive, t.audit_events, SEQUENTIAL.tenant_id, ["seq"])
    batch_events = rows(archive, t.audit_events, BATCHED.tenant_id, ["seq"])
    assert [e["action"] for e in seq_events[:4]] == ["put_evidence"] * 3 + ["retract"]
    assert comparable(batch_events[:4], drop) == comparable(seq_events[:4], drop)
    per_put = [json.loads(e["detail_json"]) for e in seq_events[4:]]
    per_batch = [json.loads(e["detail_json"]) for e in batch_events[4:]]
    assert {e["action"] for e in seq_events[4:] + batch_events[4:]} == {"put_evidence"}
    assert all(d["count"] == 1 and len(d["versions"]) == 1 for d in per_put)
    assert [d["versions"] for d in per_batch] == [
        ["x@2", "x@3", "z@1", "z@2", "w@1", "x@4", "r@2", "b@1"],
        ["x@5", "x@6", "z@3", "z@4", "x@7"],  # the re-ingest: what changed since the first batch
    ]
    assert [e["target"] for e in batch_events[4:]] == ["evidence:batch of 8", "evidence:batch of 5"]
    assert [v for d in per_batch for v in d["versions"]] == [d["versions"][0] for d in per_put]


def test_a_batch_names_the_last_outbox_row_it_saw(archive: Archive, agent: Principal) -> None:
    """`EvidenceBatch.last_outbox_id`: the write's own rows are at or below it, every row written
    after it commits above it (the indexer takes a handed-over version only for a row at or below)."""

    def outbox_ids() -> list[int]:
        with archive.store.read() as conn:
            return [int(i) for i in conn.execute(select(t.outbox.c.id).order_by(t.outbox.c.id)).scalars()]

    first = archive.write_evidence_batch(
        agent, [EvidenceInput(body=f"b{i}", source="s", evidence_id=f"x{i}") for i in range(3)]
    )
    before = outbox_ids()
    assert len(before) == 4 and first.last_outbox_id == max(before)  # 3 upserts and a cache purge
    second = archive.write_evidence_batch(
        agent, [EvidenceInput(body="changed", source="s", evidence_id="x0")], idempotency_key="k"
    )
    after = [i for i in outbox_ids() if i not in before]
    assert len(after) == 3 and min(after) > first.last_outbox_id  # a status change, an upsert, a purge
    assert second.last_outbox_id == max(after)
    replayed = archive.write_evidence_batch(
        agent, [EvidenceInput(body="changed", source="s", evidence_id="x0")], idempotency_key="k"
    )
    assert (replayed.made, replayed.last_outbox_id) == ({}, 0)  # made nothing: nothing to hand over


def test_what_a_batch_answers_and_hands_over_is_what_a_read_returns(archive: Archive) -> None:
    """Nothing is read back by the write: its answers and `made` are built from the rows it
    inserted. Each must equal what a read after the commit returns, field for field (every
    field of the record, metadata included), for items that give every field or none."""
    for before in BEFORE:
        archive.put_evidence(BATCHED, before)
    full = item(
        "f",
        "every field given",
        kind="memory",
        scope="billing",
        locator="§4",
        statement="a claim",
        observed_at=START - timedelta(days=1),
        valid_from=START,
        valid_until=START + timedelta(days=3),
        sensitivity=Sensitivity.CONFIDENTIAL,
        provenance="user_correction",
        owner="owner-7",
        session_id="sess-1",
        metadata={"n": 1, "tags": ["a", "b"]},
    )
    batch = archive.write_evidence_batch(BATCHED, [*BATCH, full])
    history = {eid: {r.version: r for r in archive.evidence_history(BATCHED, eid)} for eid in "xyzwrbf"}
    assert list(batch.made) == ["x@2", "x@3", "z@1", "z@2", "w@1", "x@4", "r@2", "b@1", "f@1"]
    for ref, (made, content) in batch.made.items():
        eid, version = ref.rsplit("@", 1)
        assert made == history[eid][int(version)], ref  # as it stands now (a later item may supersede it)
        stored, original = archive.get_evidence(BATCHED, eid, version=int(version), with_content=True)
        assert stored == made and original == content, ref
    for answer in batch.records:
        stored = history[answer.evidence_id][answer.version]
        # A put answers with the version it made (or found) current, even if superseded since.
        assert answer == replace(stored, status="active", ended_at=None), answer.evidence_id
    assert history["f"][1].metadata == {"n": 1, "tags": ["a", "b"]} and history["f"][1].owner == "owner-7"
