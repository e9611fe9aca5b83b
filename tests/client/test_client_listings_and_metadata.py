"""Through the REST client, sync and async, on both served modes: evidence metadata round-trips
(put, ingest, reads, search hits), the listings page by prefix (`list_evidence`,
`list_memory_owners`, `facts`), and `owners` narrows a search; each checked against the archive's
tables, with another tenant holding the same ids, owners and words."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from client_helpers import Tenant
from sqlalchemy import select

from mnemo_sea.archive import EvidenceInfo, EvidenceInput, Forbidden, InvalidInput, MemoryFact, MemoryOwner
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import MnemoClient
from mnemo_sea.client.errors import InconsistentAnswer

WORDS = "okapi ferry timetable"


@pytest.fixture
def neighbour(tenant: Tenant) -> Iterator[Tenant]:
    """Another tenant on the same server, holding the same ids, owners and words."""
    made = Tenant(tenant.served, tenant.flavour)
    try:
        yield made
    finally:
        made.close()


def _seed(client: object, mark: str) -> None:
    c: object = client
    c.ingest(  # type: ignore[attr-defined]
        [
            EvidenceInput(
                f"{WORDS} alice {mark}", "kb", "kb/alice", owner="alice", metadata={"page": 1, "t": mark}
            ),
            EvidenceInput(f"{WORDS} bob {mark}", "kb", "kb/bob", owner="bob"),
            EvidenceInput(f"{WORDS} all {mark}", "kb", "kb_all", metadata={"tags": ["x", mark]}),
            EvidenceInput(f"{WORDS} other {mark}", "kb", "kbzall"),
        ]
    )
    for owner in ("alice", "a_b", "bob"):
        c.remember(owner, "ferry", f"{WORDS} {owner} {mark}", "user_claim")  # type: ignore[attr-defined]
        c.remember(owner, "pier", f"pier 4 {owner} {mark}", "user_claim")  # type: ignore[attr-defined]


# A list sent as metadata: pydantic warns while the client serialises it; the server refuses it.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_metadata_round_trips_and_rides_on_search_hits(tenant: Tenant, neighbour: Tenant) -> None:
    mnemo = tenant.client("agent")
    _seed(mnemo, tenant.id)
    _seed(neighbour.client("agent"), neighbour.id)
    report = mnemo.put_evidence(
        EvidenceInput("body", "kb", "kb/meta", metadata={"a": [1, {"b": None}], "n": 2.5})
    )
    (stored,) = report.stored
    assert stored.metadata == {"a": [1, {"b": None}], "n": 2.5}
    # The same body with other metadata is a new version; equal metadata is unchanged.
    assert (
        mnemo.put_evidence(
            EvidenceInput("body", "kb", "kb/meta", metadata={"n": 2.5, "a": [1, {"b": None}]})
        ).unchanged
        == 1
    )
    assert (
        mnemo.put_evidence(EvidenceInput("body", "kb", "kb/meta", metadata={"n": 3})).stored[0].version == 2
    )
    assert mnemo.get_evidence("kb/meta")[0].metadata == {"n": 3}
    assert [r.metadata for r in mnemo.evidence_history("kb/meta")] == [
        {"a": [1, {"b": None}], "n": 2.5},
        {"n": 3},
    ]
    with tenant.served.archive.store.read() as conn:
        stored_json = (
            conn.execute(
                select(t.evidence.c.metadata_json)
                .where(t.evidence.c.tenant_id == tenant.id, t.evidence.c.evidence_id == "kb/meta")
                .order_by(t.evidence.c.version)
            )
            .scalars()
            .all()
        )
    assert stored_json == ['{"a":[1,{"b":null}],"n":2.5}', '{"n":3}']
    hits = {h.evidence_id: h for h in mnemo.search(WORDS, limit=20).hits}
    assert hits["kb/alice"].metadata == {"page": 1, "t": tenant.id}
    assert hits["kb_all"].metadata == {"tags": ["x", tenant.id]}
    assert hits["kb/bob"].metadata is None and hits["memory:alice/ferry"].metadata is None
    # Bad metadata is refused naming the field, and nothing is stored.
    for bad in ([1, 2], {"a": "x" * 70_000}):
        with pytest.raises(InvalidInput) as raised:
            mnemo.put_evidence(EvidenceInput("other", "kb", "kb/bad", metadata=bad))  # type: ignore[arg-type]
        assert "metadata" in str(raised.value)
    assert tenant.count(t.evidence, evidence_id="kb/bad") == 0


def test_listings_page_by_prefix_in_one_tenant(tenant: Tenant, neighbour: Tenant) -> None:
    mnemo = tenant.client("agent")
    _seed(mnemo, tenant.id)
    theirs = neighbour.client("agent")
    _seed(theirs, neighbour.id)
    theirs.put_evidence(EvidenceInput("b", "kb", "kb/only-b"))
    listed = mnemo.list_evidence(prefix="kb/")
    assert all(isinstance(e, EvidenceInfo) for e in listed)
    assert [e.evidence_id for e in listed] == ["kb/alice", "kb/bob"]
    # `_` is a character, not a wildcard; pages follow one another.
    assert [e.evidence_id for e in mnemo.list_evidence(prefix="kb_")] == ["kb_all"]
    assert [e.evidence_id for e in mnemo.list_evidence(prefix="kb%")] == []
    whole = [e.evidence_id for e in mnemo.list_evidence(prefix="kb")]
    assert (
        len(whole) == 4
        and [e.evidence_id for e in mnemo.list_evidence(prefix="kb", limit=2, offset=2)] == whole[2:]
    )
    assert "kb/only-b" in [e.evidence_id for e in theirs.list_evidence(prefix="kb/")]

    owners = mnemo.list_memory_owners()
    assert all(isinstance(o, MemoryOwner) for o in owners)
    assert [(o.owner, o.facts) for o in owners] == [("a_b", 2), ("alice", 2), ("bob", 2)]
    assert [o.owner for o in mnemo.list_memory_owners(prefix="a_")] == ["a_b"]
    assert [o.owner for o in mnemo.list_memory_owners(prefix="a", limit=1, offset=1)] == ["alice"]
    facts = mnemo.facts("alice")
    assert all(isinstance(f, MemoryFact) for f in facts)
    assert [(f.key, f.value) for f in facts] == [
        ("ferry", f"{WORDS} alice {tenant.id}"),
        ("pier", f"pier 4 alice {tenant.id}"),
    ]
    assert [f.key for f in mnemo.facts("alice", offset=1, limit=1)] == ["pier"]
    assert mnemo.facts("nobody") == []
    # A reader lists only itself and reads only its own facts.
    reader = tenant.client("reader")
    assert reader.list_memory_owners() == []
    with pytest.raises(Forbidden):
        reader.facts("alice")
    with pytest.raises(InvalidInput):
        mnemo.list_evidence(prefix="x" * 300)


def test_owners_narrows_a_search_through_the_api(tenant: Tenant, neighbour: Tenant) -> None:
    mnemo = tenant.client("agent")
    _seed(mnemo, tenant.id)
    _seed(neighbour.client("agent"), neighbour.id)
    found = mnemo.search(WORDS, limit=20, mode="bm25", owners=["alice"])
    assert {h.evidence_id for h in found.hits} == {"kb/alice", "memory:alice/ferry"}
    assert all(tenant.id in h.snippet for h in found.hits)
    assert {
        h.evidence_id for h in mnemo.search(WORDS, limit=20, mode="bm25", owners=["a_b", "bob"]).hits
    } == {
        "kb/bob",
        "memory:a_b/ferry",
        "memory:bob/ferry",
    }
    with pytest.raises(Forbidden):
        tenant.client("reader").search(WORDS, owners=["alice"])
    with pytest.raises(InvalidInput):
        mnemo.search(WORDS, owners="alice")  # a bare string is no list of owners


def test_a_listed_name_outside_the_prefix_is_an_inconsistent_answer() -> None:
    """A server (or a proxy) answering a listing by prefix with a name that does not start with
    it: the client says so rather than hand an adapter another record or owner."""
    at = "2026-01-01T00:00:00Z"
    answers = {
        "/v1/evidence": {
            "evidence_id": "other/x",
            "kind": "knowledge",
            "source": "kb",
            "latest_version": 1,
            "status": "active",
            "versions": 1,
            "recorded_at": at,
            "ended_at": None,
            "size": 3,
        },
        "/v1/memory": {"owner": "bob", "facts": 1, "keys": 1, "changed_at": at},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"items": [answers[request.url.path]], "next_offset": None})

    client = MnemoClient("http://mnemo.invalid", api_key="k", transport=httpx.MockTransport(answer))
    with pytest.raises(InconsistentAnswer, match="prefix"):
        client.list_evidence(prefix="kb/")
    with pytest.raises(InconsistentAnswer, match="prefix"):
        client.list_memory_owners(prefix="a")
    assert [e.evidence_id for e in client.list_evidence(prefix="other/")] == ["other/x"]
    assert [o.owner for o in client.list_memory_owners(prefix="b")] == ["bob"]
