"""Marking outbox rows touches exactly the rows named: ids given as runs of consecutive numbers
(what a drain pass marks) or scattered (hundreds of runs in one executemany), on both backends."""

from __future__ import annotations

from sqlalchemy import select

from mnemo_sea.archive import Archive
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import _CHUNK, enqueue_many, mark_applied, mark_done, pending_ids


def states(archive: Archive) -> dict[int, tuple[bool, bool, str]]:
    """Each row's (applied_at set, done_at set, payload)."""
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.outbox.c.id, t.outbox.c.applied_at, t.outbox.c.done_at, t.outbox.c.payload_json)
        )
        return {r.id: (r.applied_at is not None, r.done_at is not None, r.payload_json) for r in rows}


def test_marks_reach_exactly_the_ids_given(archive: Archive) -> None:
    n = 3 * _CHUNK  # hundreds of runs: ids scattered, singles and long runs mixed
    with archive.store.write() as conn:
        enqueue_many(conn, [("t", "cache_purge", "tenant", "t", {"reason": f"r{i}"}) for i in range(n)])
    ids = sorted(states(archive))
    assert len(ids) == n
    done = ids[:10] + ids[11:12] + ids[20 : 20 + _CHUNK] + ids[_CHUNK + 40 :: 2]  # runs and singles
    applied = [i for i in ids if i not in set(done)][::3]
    with archive.store.write() as conn:
        mark_applied(conn, applied)
        mark_done(conn, list(reversed(done)))  # any order
        mark_done(conn, [])
    found = states(archive)
    for i in ids:
        applied_at, done_at, payload = found[i]
        assert done_at == (i in done), i
        assert applied_at == (i in applied and i not in done), i
        assert (payload == "{}") == (i in done or i in applied), i
    with archive.store.read() as conn:
        assert pending_ids(conn) == set(ids) - set(done) - set(applied)
