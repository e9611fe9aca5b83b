"""The only drainer's reads outside a transaction (`pending_rows`, `pending_total`) answer what
`claim_pending` and `pending_count` answer inside one, for each lane, from any row and up to any
limit, on both backends: rows done, applied awaiting the flush, and set aside (failed
MAX_ATTEMPTS times) among the pending ones."""

from __future__ import annotations

from sqlalchemy import update

from mnemo_sea.archive import Archive
from mnemo_sea.archive.rules.original_pages import page_ref
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import (
    MAX_ATTEMPTS,
    OutboxRow,
    claim_pending,
    enqueue_many,
    mark_applied,
    mark_done,
    pending_count,
    pending_rows,
    pending_total,
)


def test_the_sole_drainers_reads_are_the_claims_and_counts_of_a_transaction(archive: Archive) -> None:
    rows: list[OutboxRow] = []
    for i in range(6):
        tenant = "clinic-a" if i % 2 else "shop-b"
        rows.append((tenant, "index_upsert", "evidence", f"doc:{i}@1", None))
        rows.append((tenant, "index_upsert", "result_original", page_ref("s1/r1", i), None))
        rows.append((tenant, "cache_purge", "tenant", tenant, {"drop_search": i == 3}))
    with archive.store.write() as conn:
        enqueue_many(conn, rows)
    with archive.store.read() as conn:
        ids = [item.id for item in claim_pending(conn, 100)]
    assert len(ids) == len(rows)
    with archive.store.write() as conn:
        mark_done(conn, ids[0:2])
        mark_applied(conn, ids[4:6])  # a page and a write's row, awaiting the flush
        conn.execute(update(t.outbox).where(t.outbox.c.id.in_(ids[9:11])).values(attempts=MAX_ATTEMPTS))

    for lane in (None, "writes", "trailing"):
        for after in (0, ids[3], ids[8], ids[-1]):
            for limit in (1, 3, 100):
                with archive.store.read() as conn:
                    expected = claim_pending(conn, limit, lane, after)
                assert pending_rows(archive.store, limit, lane, after) == expected, (lane, after, limit)
        with archive.store.read() as conn:
            assert pending_total(archive.store, lane) == pending_count(conn, lane=lane), lane

    # What the comparison rests on: each lane holds its own rows, set-aside rows are counted but
    # not claimed, and rows are the claims' own type with their payloads.
    trailing = pending_rows(archive.store, 100, "trailing")
    writes = pending_rows(archive.store, 100, "writes")
    assert {item.entity for item in trailing} == {"result_original"}
    assert {item.entity for item in writes} == {"evidence", "tenant"}
    assert len(trailing) + len(writes) == len(rows) - 2 - 2 - 2
    assert pending_total(archive.store) == len(rows) - 2 - 2
    purges = [item.payload["drop_search"] for item in writes if item.op == "cache_purge"]
    assert purges == [False, False, True, False, False]  # the second one is applied
