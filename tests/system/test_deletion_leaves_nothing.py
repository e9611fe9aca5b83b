"""Deleting a session leaves no byte of its content anywhere: every column of every table (the
schema reflected from the database, SQLite and PostgreSQL), the SQLite files (free pages and
the write-ahead log), the embedded index's directory and embedding cache, and Redis.

A unique marker goes into everything the session holds or anything derived from it: the
originals, tool arguments, archive notes, evidence recorded from it (body, statement, source,
locator), a memory fact and a summary derived from its results, the session's task state, and
confirmed facts of another session's task state citing its result and its evidence. Each write carries an
idempotency key, so replies are stored too. The scan first finds the marker (so it can see),
then, after `delete_session`, finds it nowhere, and `verify_deleted` also reads the raw tables.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import redis
from fakes import HashingEmbedder, ManualWallClock
from leftovers import files_holding, new_marker, scan_database

from mnemo_sea.archive import ArchiveTarget, EvidenceInput, NotFound, Principal, Role, Sensitivity
from mnemo_sea.archive.deletion import verify_deleted
from mnemo_sea.archive.storage.outbox import scrub
from mnemo_sea.retrieval.hybrid_index import CACHE_FILE
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE, INDEX_DIR
from mnemo_sea.system.wiring.settings import MnemoSettings

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ADMIN = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
SESSION = "s-private"
OTHER_SESSION = "s-follow-up"


def fill(m: Mnemo, marker: str, source: str | None = None) -> None:
    """A session holding the marker everywhere, and what is derived from it; all searchable.

    `source` marks the evidence's source instead when given: unlike any text, a source is a
    payload field of the index too (see the README on what the index files keep)."""
    m.record(
        AGENT,
        SESSION,
        "lookup",
        f"lab result {marker} positive",
        arguments={"q": marker},
        idempotency_key="k1",
    )
    m.record(AGENT, SESSION, "lookup", f"second original {marker}", idempotency_key="k2")
    m.archive_results(
        AGENT, SESSION, [ArchiveTarget("r1", f"note {marker} kept aside")], idempotency_key="k3"
    )
    m.recover(AGENT, SESSION, "r1")  # a copy appended as r3 (its audit event names a hash, no content)
    m.put_evidence(
        AGENT,
        EvidenceInput(
            body=f"evidence body {marker}",
            source=f"src-{source or marker}",
            evidence_id="ev-1",
            locator=f"page-{marker}",
            statement=f"statement {marker}",
            session_id=SESSION,
        ),
        idempotency_key="k4",
    )
    m.remember(
        AGENT,
        "bob",
        "allergy",
        f"value {marker}",
        "tool_fact",
        derived_from=f"result:{SESSION}/r1",
        idempotency_key="k5",
    )
    m.create_summary(AGENT, f"summary {marker}", [f"result:{SESSION}/r1"], idempotency_key="k6")
    m.update_task_state(
        AGENT, SESSION, goal=f"goal {marker}", unresolved=[f"open {marker}"], idempotency_key="k7"
    )
    m.update_task_state(
        AGENT,
        OTHER_SESSION,
        goal="follow up",
        confirmed=[
            {"fact": f"lab result {marker} positive", "evidence_id": f"result:{SESSION}/r1"},
            {"fact": f"the evidence says {marker}", "evidence_id": "ev-1"},
        ],
        idempotency_key="k8",
    )
    assert m.search(AGENT, marker).status == "results"  # the search cache holds a page now


def delete_and_check(m: Mnemo, marker: str) -> None:
    receipt = m.delete_session(ADMIN, SESSION)
    assert receipt.summaries and receipt.memory_facts and receipt.evidence_versions
    assert receipt.task_states == ((SESSION, 1), (OTHER_SESSION, 1))
    check = m.verify_deleted(ADMIN, receipt)
    assert check.ok, check
    kept = m.task_state(AGENT, OTHER_SESSION)
    assert kept is not None and kept.goal == "follow up" and kept.confirmed == ()
    assert [s.version for s in m.task_state_history(AGENT, OTHER_SESSION)] == [1]
    assert scan_database(m.archive.store.engine, marker) == []
    assert m.search(AGENT, marker).status == "no_match"


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[tuple[Mnemo, Path]]:
    folder = tmp_path / "data"
    m = Mnemo.open(folder, embedder=HashingEmbedder())
    try:
        yield m, folder
    finally:
        m.close()


def test_embedded_deletion_leaves_no_byte_in_tables_files_or_index(embedded: tuple[Mnemo, Path]) -> None:
    m, folder = embedded
    marker, source = new_marker(), new_marker()
    fill(m, marker, source)
    assert scan_database(m.archive.store.engine, source) == ["evidence.source"]
    before = scan_database(m.archive.store.engine, marker)
    assert {
        "archive_entries.note",
        "blobs.content",
        "evidence.locator",
        "evidence.statement",
        "memory_facts.value",
        "summaries.text",
        "task_states.body_json",
        "tool_results.arguments_json",
    } <= set(before), before
    m.index.flush()
    assert any(f.startswith(f"{INDEX_DIR}/shard/") for f in files_holding(folder, source))
    # By default the drain compacts the embedded index after every pass that deleted points.

    delete_and_check(m, marker)
    assert scan_database(m.archive.store.engine, source) == []
    # Below SQL: deleted cells zeroed in the file (secure_delete), the log checkpointed away.
    # A source is also an index payload field: compaction rewrote the shard without it.
    assert {p.name for p in folder.glob(f"{ARCHIVE_FILE}*")} >= {ARCHIVE_FILE, f"{ARCHIVE_FILE}-wal"}
    assert files_holding(folder, source) == []
    # No text reaches the index's files at all (BM25 keeps token ids; payloads keep pointers).
    assert files_holding(folder, marker) == []
    # The embedding cache holds no vector of the deleted texts, in its table or its files.
    with closing(sqlite3.connect(folder / INDEX_DIR / CACHE_FILE)) as cache:
        assert cache.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)
    vector = np.asarray(HashingEmbedder().embed_documents([f"note {marker} kept aside"])[0], dtype=np.float32)
    assert not [p for p in (folder / INDEX_DIR).glob(f"{CACHE_FILE}*") if vector.tobytes() in p.read_bytes()]


@pytest.mark.postgres
def test_server_deletion_leaves_no_byte_in_postgresql_or_redis(
    pg_migrated_url: str, redis_url: str, redis_prefix: str
) -> None:
    settings = MnemoSettings(
        database_url=pg_migrated_url, qdrant_url=":memory:", redis_url=redis_url, redis_prefix=redis_prefix
    )
    marker = new_marker()
    client = redis.Redis.from_url(redis_url)
    try:
        with Mnemo.from_settings(settings, embedder=HashingEmbedder()) as m:
            fill(m, marker)
            assert "archive_entries.note" in scan_database(m.archive.store.engine, marker)
            pages = set(client.scan_iter(match=f"{redis_prefix}search:*"))
            assert pages  # the search in `fill` cached a page naming the session's records
            delete_and_check(m, marker)
        keys = set(client.scan_iter(match=f"{redis_prefix}*"))
        # The deletion dropped the pages cached before it (a bump alone leaves them until their TTL).
        assert pages & keys == set()
        for k in keys:
            value = client.dump(k) or b""
            assert marker.encode() not in value and SESSION.encode() not in value, k
    finally:
        client.close()


def test_verify_deleted_reads_the_outbox_rows_of_the_deleted_targets(embedded: tuple[Mnemo, Path]) -> None:
    """A row that still holds a deleted note (a drainer held it locked, or an old database) is
    named by verify_deleted; emptying it (what the deletion does) clears the finding."""
    m, _ = embedded
    marker = new_marker()
    fill(m, marker)
    receipt = m.delete_session(ADMIN, SESSION)
    store = m.archive.store
    with store.write() as conn:
        conn.exec_driver_sql(
            "UPDATE outbox SET payload_json = ? WHERE entity = 'tool_result' AND entity_ref = ?",
            (f'{{"note": "{marker}"}}', f"{SESSION}/r1"),
        )
    left = verify_deleted(store, ADMIN, receipt)
    assert left and all("outbox" in x and f"tool_result {SESSION}/r1" in x for x in left), left
    assert not m.verify_deleted(ADMIN, receipt).ok
    with store.write() as conn:
        scrub(conn, ADMIN.tenant_id, [("tool_result", f"{SESSION}/r1")])
    assert verify_deleted(store, ADMIN, receipt) == []


def _remember_twice(m: Mnemo, owner: str, key: str, first: str, second: str) -> None:
    m.remember(AGENT, owner, key, first, provenance="user_claim")
    m.remember(AGENT, owner, key, second, provenance="user_claim")


@pytest.mark.parametrize("how", ["forget", "purge"])
def test_forgotten_and_purged_memory_leaves_no_byte_in_tables_or_files(
    embedded: tuple[Mnemo, Path], how: str, wall_clock: ManualWallClock
) -> None:
    m, folder = embedded
    old, new = new_marker(), new_marker()
    if how == "forget":
        _remember_twice(m, "u-1", "pet", f"dog {old}", f"cat {new}")
        receipt = m.forget(AGENT, "u-1", "pet")
        gone = [old, new]
    else:  # the expired first version goes, the second (no TTL) stays current
        m.remember(AGENT, "u-1", "pet", f"dog {old}", provenance="user_claim", ttl_seconds=1)
        wall_clock.advance(1.1)
        m.remember(AGENT, "u-1", "pet", f"cat {new}", provenance="user_claim")
        found = m.purge_expired(ADMIN)
        assert found is not None
        receipt = found
        gone = [old]
    check = m.verify_deleted(ADMIN, receipt)
    assert check.ok, check
    for marker in gone:
        assert scan_database(m.archive.store.engine, marker) == []
        assert files_holding(folder, marker) == [], marker  # archive.db, its WAL, the index
    if how == "purge":
        assert "memory_facts.value" in scan_database(m.archive.store.engine, new)


def test_numbers_issued_again_are_named_as_come_back_and_old_keys_do_not_answer(
    embedded: tuple[Mnemo, Path],
) -> None:
    """A forgotten fact starts over at version 1: `verify_deleted` names that version as come back
    (as it does for a deleted evidence id stored again), and the first call's idempotency key
    does not answer with the new fact."""
    m, _ = embedded
    m.remember(AGENT, "u-1", "pet", "dog", provenance="user_claim", idempotency_key="first-pet")
    forgot = m.forget(AGENT, "u-1", "pet")
    again = m.remember(AGENT, "u-1", "pet", "cat", provenance="user_claim")
    assert (again.fact.version, forgot.memory_facts) == (1, (("u-1", "pet", 1),))
    check = m.verify_deleted(ADMIN, forgot)
    assert check.archive_leftovers == ("memory u-1/pet@1",) and check.index_leftovers == ("memory:u-1/pet",)
    with pytest.raises(NotFound):  # the first call's fact is gone; this key never answers "cat"
        m.remember(AGENT, "u-1", "pet", "dog", provenance="user_claim", idempotency_key="first-pet")
    m.forget(AGENT, "u-1", "pet")
    assert m.verify_deleted(ADMIN, forgot).ok
