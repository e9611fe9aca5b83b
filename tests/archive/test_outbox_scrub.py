"""Outbox rows keep no content longer than needed: applied rows are emptied, a deletion empties
the rows about its targets in its own transaction (pending re-reads become done, pending deletes
stay pending), nothing of another tenant or target is touched, and the migration empties the done
rows an older version kept."""

from __future__ import annotations

import json
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, select

from mnemo_sea.archive import Archive, ArchiveTarget, Principal
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import EMPTY_PAYLOAD, claim_pending, enqueue, mark_done
from mnemo_sea.archive.storage.store import open_store, upgrade


def rows(archive: Archive) -> list[tuple[str, str, str, str, dict[str, object], bool]]:
    with archive.store.read() as conn:
        found = conn.execute(select(t.outbox).order_by(t.outbox.c.id)).all()
    return [
        (r.tenant_id, r.op, r.entity, r.entity_ref, json.loads(r.payload_json), r.done_at is not None)
        for r in found
    ]


def test_a_deletion_empties_its_targets_rows_and_nothing_else(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    archive.record(agent, "s", "t", "secret original")
    archive.archive_results(agent, "s", [ArchiveTarget("r1", "secret note")])
    archive.record(agent, "kept", "t", "other original")
    archive.archive_results(agent, "kept", [ArchiveTarget("r1", "kept note")])
    with archive.store.write() as conn:  # another tenant's row about the same ids
        enqueue(conn, other_tenant.tenant_id, "index_upsert", "tool_result", "s/r1", {"note": "theirs"})
    with archive.store.write() as conn:  # a drainer applied the first cache purge
        purge = next(item for item in claim_pending(conn) if item.op == "cache_purge")
        mark_done(conn, [purge.id])
    applied = [r for r in rows(archive) if r[5]]
    assert [(r[1], r[4]) for r in applied] == [("cache_purge", {})]  # an applied row keeps no payload
    assert next(r for r in rows(archive) if r[3] == "s/r1")[4]["note"] == "secret note"

    receipt = archive.delete_session(admin, "s")
    after = rows(archive)
    about = [r for r in after if r[0] == agent.tenant_id and r[3] in ("s/r1", "s/r1#0")]
    assert [(op, entity, payload, done) for _, op, entity, _, payload, done in about] == [
        ("index_upsert", "tool_result", {}, True),  # a re-read of a deleted target has nothing left to do
        ("index_upsert", "result_original", {}, True),  # nor has its original's page
        ("index_delete", "tool_result", {}, False),  # the deletion's own row still has to remove the points
    ]
    assert ("index_upsert", "tool_result", "kept/r1") in {r[1:4] for r in after if not r[5]}
    assert ("index_upsert", "result_original", "kept/r1#0") in {r[1:4] for r in after if not r[5]}
    kept = next(r for r in after if r[3] == "kept/r1")
    assert kept[4]["note"] == "kept note" and not kept[5]
    theirs = next(r for r in after if r[0] == other_tenant.tenant_id)
    assert theirs[4] == {"note": "theirs"} and not theirs[5]
    assert archive.verify_deleted(admin, receipt) == []


def test_the_migration_empties_done_rows_of_older_versions(tmp_path: Path) -> None:
    url = f"sqlite+pysqlite:///{tmp_path / 'old.db'}"
    store = open_store(url, migrate=False)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(t.__file__).parents[1] / "migrations"))
    with store.write() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")  # the schema before this change
    with store.write() as conn:
        done = enqueue(conn, "a", "index_upsert", "tool_result", "s/r1", {"note": "old note"})
        enqueue(conn, "a", "index_upsert", "tool_result", "s/r2", {"note": "pending note"})
        # 0002's mark_done kept the payload
        conn.execute(t.outbox.update().where(t.outbox.c.id == done).values(done_at=t.outbox.c.created_at))
    upgrade(store)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            payloads = [r.payload_json for r in conn.execute(select(t.outbox).order_by(t.outbox.c.id))]
    finally:
        engine.dispose()
        store.dispose()
    assert payloads == [EMPTY_PAYLOAD, '{"note": "pending note"}']
