"""Writes on both backends: idempotent, pointer-only payloads, deterministic ids, cascades."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mnemo_sea.retrieval import (
    AccessScope,
    CachingEmbedder,
    EvidenceDocument,
    HybridIndex,
    InvalidDocument,
    SearchMode,
    SearchQuery,
    SearchStatus,
    point_id,
    sha256_hex,
)
from mnemo_sea.retrieval.filters import tenant_filter

LONG = " ".join(
    f"Paragraph {i} explains how the carrier handles delayed parcels in region {i}." for i in range(60)
)
PAYLOAD_KEYS = {
    "tenant_id",
    "evidence_id",
    "version",
    "chunk",
    "chunk_start",
    "chunk_end",
    "chunk_sha256",
    "content_sha256",
    "kind",
    "scope",
    "source",
    "sensitivity",
    "status",
    "valid_from",
    "valid_until",
}


def doc(evidence_id: str, text: str, tenant: str = "acme", **fields: object) -> EvidenceDocument:
    return EvidenceDocument(tenant_id=tenant, evidence_id=evidence_id, version=1, text=text, **fields)  # type: ignore[arg-type]


def ids(index: HybridIndex, text: str, scope: AccessScope | None = None, **query: object) -> list[str]:
    outcome = index.search(scope or AccessScope("acme", clearance=3), SearchQuery(text, **query))  # type: ignore[arg-type]
    assert outcome.ok, outcome.reason
    return [h.evidence_id for h in outcome.hits]


def test_reapplying_an_upsert_changes_nothing(index: HybridIndex, embedder: object) -> None:
    docs = [doc("policy:refund", "Refunds within 30 days."), doc("long", LONG)]
    first = index.upsert(docs)
    embedded = embedder.documents_embedded  # type: ignore[attr-defined]
    second = index.upsert(docs)
    assert first.written == first.chunks > 2
    assert (second.written, second.payload_updates, second.unchanged) == (0, 0, first.chunks)
    assert embedder.documents_embedded == embedded  # type: ignore[attr-defined]
    assert index.count("acme") == first.chunks


def test_payload_holds_pointers_only(index: HybridIndex) -> None:
    index.upsert([doc("policy:refund", "Refunds within 30 days.", owner="alice", kind="memory")])
    [(pid, payload)] = index.backend.matching(tenant_filter("acme"))
    stored = payload.to_dict()
    assert set(stored) == PAYLOAD_KEYS | {"owner"}
    assert "Refunds" not in repr(stored)
    assert pid == point_id("acme", "policy:refund", 1, 0)
    assert stored["content_sha256"] == sha256_hex("Refunds within 30 days.")


def test_text_never_reaches_the_embedded_index_files(tmp_path: Path, embedder_factory: type) -> None:
    marker = "zebraquartz9931 marmalade"
    with HybridIndex.open(tmp_path / "ix", embedder=embedder_factory()) as index:
        index.upsert([doc("secret", f"The code word is {marker}.")])
        index.flush()
        assert ids(index, "zebraquartz9931", mode=SearchMode.BM25) == ["secret"]
    files = [p for p in (tmp_path / "ix").rglob("*") if p.is_file()]
    assert len(files) > 3
    for path in files:
        assert b"zebraquartz9931" not in path.read_bytes(), path


def test_hits_point_to_exact_spans_with_deterministic_ids(index: HybridIndex) -> None:
    index.upsert([doc("long", LONG)])
    outcome = index.search(AccessScope("acme"), SearchQuery("region 42 delayed parcels", limit=3))
    hit = outcome.hits[0]
    assert "region 42" in LONG[hit.start : hit.end]
    assert hit.point_id == point_id("acme", "long", 1, hit.chunk)
    assert hit.content_sha256 == sha256_hex(LONG)


def test_a_shorter_text_removes_the_chunks_it_no_longer_has(index: HybridIndex) -> None:
    first = index.upsert([doc("long", LONG)])
    assert index.count("acme") == first.chunks > 2
    report = index.upsert([doc("long", "Now one short sentence.")])
    assert report.stale_removed_from == 1
    assert index.count("acme") == 1
    assert ids(index, "region", mode=SearchMode.BM25) == []


def test_changed_fields_on_unchanged_text_rewrite_payload_without_embedding(
    index: HybridIndex, embedder: object
) -> None:
    index.upsert([doc("p", "Refunds within 30 days.", scope="billing")])
    before = embedder.documents_embedded  # type: ignore[attr-defined]
    report = index.upsert([doc("p", "Refunds within 30 days.", scope="support")])
    assert (report.payload_updates, report.written) == (1, 0)
    assert embedder.documents_embedded == before  # type: ignore[attr-defined]
    assert ids(index, "refunds", scopes={"support"}) == ["p"]
    assert ids(index, "refunds", scopes={"billing"}) == []


def test_same_evidence_id_in_two_tenants_are_two_records(index: HybridIndex) -> None:
    index.upsert([doc("policy:delivery:2026-10", "Acme ships in 2 days.", tenant="acme")])
    index.upsert([doc("policy:delivery:2026-10", "Globex ships in 5 days.", tenant="globex")])
    assert index.count("acme") == index.count("globex") == 1
    acme = index.search(AccessScope("acme"), SearchQuery("ships days", mode=SearchMode.BM25))
    assert [h.tenant_id for h in acme.hits] == ["acme"]


def test_delete_is_idempotent_and_forgets_cached_embeddings(index: HybridIndex) -> None:
    index.upsert([doc("p", "Refunds within 30 days."), doc("q", "Carriers deliver parcels.")])
    chunk_hash = sha256_hex("Refunds within 30 days.")
    assert isinstance(index.embedder, CachingEmbedder)
    assert index.embedder.cache.get_many(index.embedder.model_id, [chunk_hash])
    first = index.delete("acme", "p")
    assert (first.points_removed, first.embeddings_discarded) == (1, 1)
    assert index.embedder.cache.get_many(index.embedder.model_id, [chunk_hash]) == {}
    second = index.delete("acme", "p")
    assert (second.points_removed, second.embeddings_discarded) == (0, 0)
    assert ids(index, "refunds") == ["q"]  # the dense leg still finds the other document


def test_delete_of_one_version_keeps_the_others(index: HybridIndex) -> None:
    index.upsert([doc("p", "Refunds within 30 days.")])
    index.upsert(
        [EvidenceDocument(tenant_id="acme", evidence_id="p", version=2, text="Refunds within 60 days.")]
    )
    assert index.delete("acme", "p", version=1).points_removed == 1
    assert index.count("acme") == 1


def test_superseded_versions_are_history(index: HybridIndex) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t1 = t0 + timedelta(days=30)
    index.upsert([doc("policy", "Refunds within 30 days.", valid_from=t0)])
    index.set_status("acme", "policy", 1, "superseded", valid_until=t1)
    index.upsert(
        [
            EvidenceDocument(
                tenant_id="acme",
                evidence_id="policy",
                version=2,
                text="Refunds within 60 days.",
                valid_from=t1,
            )
        ]
    )
    now = index.search(AccessScope("acme"), SearchQuery("refunds days", mode=SearchMode.BM25))
    assert [(h.evidence_id, h.version) for h in now.hits] == [("policy", 2)]
    then = index.search(
        AccessScope("acme"), SearchQuery("refunds days", mode=SearchMode.BM25, as_of=t0 + timedelta(days=1))
    )
    assert [(h.version, h.status) for h in then.hits] == [(1, "superseded")]


def test_retracted_evidence_is_never_found(index: HybridIndex) -> None:
    index.upsert([doc("rumour", "The warehouse closes on Friday.")])
    index.set_status("acme", "rumour", 1, "retracted")
    assert ids(index, "warehouse friday") == []
    assert ids(index, "warehouse friday", as_of=datetime.now(UTC)) == []


def test_expired_validity_is_out_of_the_present(index: HybridIndex) -> None:
    past = datetime(2020, 1, 1, tzinfo=UTC)
    index.upsert(
        [doc("promo", "Free shipping for all orders.", valid_from=past, valid_until=past + timedelta(days=7))]
    )
    assert ids(index, "free shipping") == []
    assert ids(index, "free shipping", as_of=past + timedelta(days=1)) == ["promo"]


def test_clearance_kind_scope_source_and_owner_filters(index: HybridIndex) -> None:
    index.upsert(
        [
            doc("public", "Parcel tracking guide.", kind="knowledge", scope="support", source="wiki"),
            doc("secret", "Parcel fraud investigation.", sensitivity=3, scope="security", source="jira"),
            doc("mem-a", "Alice prefers parcel lockers.", kind="memory", owner="alice"),
            doc("mem-b", "Bob prefers parcel delivery at home.", kind="memory", owner="bob"),
        ]
    )
    everything = AccessScope("acme", clearance=3)
    assert set(ids(index, "parcel", everything)) == {"public", "secret", "mem-a", "mem-b"}
    assert "secret" not in ids(index, "parcel", AccessScope("acme", clearance=2))
    assert set(ids(index, "parcel", everything, kinds={"memory"})) == {"mem-a", "mem-b"}
    assert ids(index, "parcel", everything, scopes={"security"}) == ["secret"]
    assert ids(index, "parcel", everything, sources={"wiki"}) == ["public"]
    alice = AccessScope("acme", clearance=3, owners=frozenset({"alice"}))
    assert set(ids(index, "parcel", alice)) == {"public", "secret", "mem-a"}
    assert ids(index, "parcel", alice, owners={"alice"}) == ["mem-a"]
    denied = index.search(alice, SearchQuery("parcel", owners=frozenset({"bob"})))
    assert denied.status is SearchStatus.FORBIDDEN and "bob" in denied.reason


def test_a_batch_with_a_duplicate_writes_nothing(index: HybridIndex) -> None:
    with pytest.raises(InvalidDocument):
        index.upsert([doc("p", "one"), doc("q", "two"), doc("p", "three")])
    assert index.count() == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"tenant_id": "a b"}, "tenant_id"),
        ({"evidence_id": "has space"}, "evidence_id"),
        ({"version": 0}, "version"),
        ({"kind": "gossip"}, "kind"),
        ({"status": "archived"}, "status"),
        ({"sensitivity": -1}, "sensitivity"),
        ({"scope": "bad\x00scope"}, "scope"),
        ({"owner": "*"}, "owner"),
        ({"content_sha256": "0" * 64}, "content_sha256"),
        ({"valid_from": datetime(2026, 1, 1)}, "valid_from/valid_until"),
        (
            {"valid_from": datetime(2026, 2, 1, tzinfo=UTC), "valid_until": datetime(2026, 1, 1, tzinfo=UTC)},
            "valid_until",
        ),
    ],
)
def test_malformed_documents_name_the_field(fields: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"tenant_id": "acme", "evidence_id": "e", "version": 1, "text": "x"}
    with pytest.raises(InvalidDocument) as caught:
        EvidenceDocument(**(base | fields))  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_heading_is_searched_with_every_chunk_and_is_no_part_of_a_span(index: HybridIndex) -> None:
    heading = 'bash {"command": "cat /var/log/wombatgateway.log"}'
    doc = EvidenceDocument("t1", "log:1", 1, LONG, heading=heading)
    index.upsert([doc])
    index.flush()
    scope = AccessScope("t1", clearance=0)
    found = index.search(scope, SearchQuery("wombatgateway", mode=SearchMode.BM25, limit=50))
    assert found.status == SearchStatus.RESULTS
    # Every chunk carries the heading's words, yet each span is of the text alone.
    chunks = {h.chunk for h in found.hits}
    assert len(chunks) > 1 and chunks == set(range(len(chunks)))
    assert all("wombatgateway" not in LONG[h.start : h.end] for h in found.hits)
    plain = EvidenceDocument("t1", "log:2", 1, LONG)
    index.upsert([plain])
    index.flush()
    again = index.search(scope, SearchQuery("wombatgateway", mode=SearchMode.BM25, limit=50))
    assert {h.evidence_id for h in again.hits} == {"log:1"}
    for bad in ("two\nlines", "x" * 513):
        with pytest.raises(InvalidDocument):
            EvidenceDocument("t1", "log:3", 1, "text", heading=bad)
