"""Concurrent writers of one archive, as threads sharing an `Archive` and as separate processes.

The promises under test (ARCHITECTURE.md, "The session evidence archive"):
- two (or N) concurrent archivers of one result: exactly one wins; every other one gets
  ArchiveConflict naming the result as already archived; the result ends with exactly one
  archive entry, one outbox row and one audit event, and the audit chain still verifies;
- a loser's batch changes nothing, including its targets that nobody else touched;
- concurrent `record` into one session issues unique, gap-free ids and loses no write,
  also when the session does not exist yet (its first row is itself a race).

Every contender waits at a barrier, so they really start together; each scenario repeats
for several rounds to give a missing lock many chances to show.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from _workers import (
    ADMIN,
    AGENT,
    TENANT,
    archive_rounds,
    record_rounds,
    run_archive_rounds,
    run_record_rounds,
)
from sqlalchemy import Table, select

from mnemo_sea.archive import Archive
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.blobs import sha256_hex

SPAWN = multiprocessing.get_context("spawn")
RESULT_TIMEOUT_S = 120.0


@pytest.fixture
def store(db_url: str) -> Iterator[Archive]:
    a = Archive.open(db_url)
    try:
        yield a
    finally:
        a.close()


def contend(
    mode: str,
    url: str,
    shared: Archive,
    n: int,
    thread_body: Callable[[Archive, int, threading.Barrier], Any],
    process_target: Callable[..., None],
    process_args: Callable[[int], tuple[Any, ...]],
) -> list[Any]:
    """Run n contenders (threads over `shared`, or spawned processes) and return their reports."""
    if mode == "threads":
        barrier = threading.Barrier(n)

        def body(w: int) -> Any:
            try:
                return thread_body(shared, w, barrier)
            except BaseException:
                barrier.abort()  # the other threads stop waiting for this one
                raise

        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(body, w) for w in range(n)]
            return [f.result(timeout=RESULT_TIMEOUT_S) for f in futures]

    mp_barrier = SPAWN.Barrier(n)
    reports: Any = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=process_target, args=(url, w, *process_args(w), mp_barrier, reports))
        for w in range(n)
    ]
    for p in procs:
        p.start()
    try:
        got: dict[int, Any] = {}
        for _ in range(n):
            try:
                worker, status, payload = reports.get(timeout=RESULT_TIMEOUT_S)
            except queue.Empty:
                codes = [p.exitcode for p in procs]
                pytest.fail(
                    f"a contender process did not report within {RESULT_TIMEOUT_S}s: exit codes {codes}"
                )
            assert status == "ok", f"contender process {worker} crashed:\n{payload}"
            got[worker] = payload
        return [got[w] for w in range(n)]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()


def session_rows(a: Archive, session_id: str) -> dict[str, list[Any]]:
    """Everything the archive holds for one session, read straight from the tables."""
    with a.store.read() as conn:

        def rows(table: Table) -> list[Any]:
            return list(
                conn.execute(
                    select(table).where(table.c.tenant_id == TENANT, table.c.session_id == session_id)
                )
            )

        outbox = list(
            conn.execute(
                select(t.outbox).where(
                    t.outbox.c.tenant_id == TENANT, t.outbox.c.entity_ref.like(f"{session_id}/%")
                )
            )
        )
        audit = list(conn.execute(select(t.audit_events).where(t.audit_events.c.tenant_id == TENANT)))
        return {
            "results": rows(t.tool_results),
            "entries": rows(t.archive_entries),
            "outbox": outbox,
            "audit": audit,
        }


def archive_events(audit_rows: Sequence[Any], session_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.detail_json)
        for r in audit_rows
        if r.action == "archive" and r.target == f"session:{session_id}"
    ]


def seed_session(a: Archive, session_id: str, count: int) -> None:
    for i in range(count):
        a.record(AGENT, session_id, "logs.search", f"original {i} of {session_id}", arguments={"i": i})


MODES = ["threads", "processes"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [2, 5])
def test_concurrent_archivers_of_one_result_exactly_one_wins(
    store: Archive, db_url: str, mode: str, n: int
) -> None:
    rounds = 6
    session = "race"
    seed_session(store, session, rounds)
    # Round k: every contender archives r{k+1}, each with a note of its own.
    per_worker = [[[(f"r{k + 1}", f"worker {w} archived r{k + 1}")] for k in range(rounds)] for w in range(n)]

    reports = contend(
        mode,
        db_url,
        store,
        n,
        lambda a, w, b: run_archive_rounds(a, session, per_worker[w], b),
        archive_rounds,
        lambda w: (session, per_worker[w]),
    )

    data = session_rows(store, session)
    entries = {r.result_no: r for r in data["entries"]}
    events = archive_events(data["audit"], session)
    for k in range(rounds):
        rid = f"r{k + 1}"
        outcomes = [reports[w][k] for w in range(n)]
        winners = [w for w in range(n) if outcomes[w][0] == "ok"]
        assert len(winners) == 1, f"{rid}: expected exactly one winner among {outcomes}"
        (winner,) = winners
        for w in range(n):
            if w != winner:
                assert outcomes[w] == ("conflict", ((rid, "already_archived"),)), outcomes[w]
        _, batch_id, archived = outcomes[winner]
        assert archived == (rid,)

        entry = entries[k + 1]
        assert entry.batch_id == batch_id
        assert entry.note == f"worker {winner} archived {rid}"
        assert [e for e in events if rid in e["results"]] == [{"batch_id": batch_id, "results": [rid]}]
        notes = Counter(o.entity_ref for o in data["outbox"] if o.entity == "tool_result")
        pages = Counter(o.entity_ref for o in data["outbox"] if o.entity == "result_original")
        assert notes[f"{session}/{rid}"] == pages[f"{session}/{rid}#0"] == 1  # one note, one page

    assert len(data["entries"]) == rounds
    assert all(r.state == "archived" for r in data["results"])
    report = store.verify_audit(ADMIN)
    assert report.ok, report.problems
    # The archive still answers: the winner's note is the stub, and the original comes back intact.
    assert "r1" in store.live_view(AGENT, session).items[0].rendered
    assert store.recover(AGENT, session, "r1").content == b"original 0 of race"


@pytest.mark.parametrize("mode", MODES)
def test_overlapping_batches_loser_changes_nothing(store: Archive, db_url: str, mode: str) -> None:
    """Each contender archives a shared result plus one of its own: one batch wins whole."""
    n, rounds = 4, 4
    session = "overlap"
    # Round k uses r(k*(n+1)+1) as the shared target and the next n results as private targets.
    seed_session(store, session, rounds * (n + 1))

    def shared(k: int) -> str:
        return f"r{k * (n + 1) + 1}"

    def private(k: int, w: int) -> str:
        return f"r{k * (n + 1) + 2 + w}"

    per_worker = [
        [[(shared(k), f"shared by {w}"), (private(k, w), f"private of {w}")] for k in range(rounds)]
        for w in range(n)
    ]
    reports = contend(
        mode,
        db_url,
        store,
        n,
        lambda a, w, b: run_archive_rounds(a, session, per_worker[w], b),
        archive_rounds,
        lambda w: (session, per_worker[w]),
    )

    data = session_rows(store, session)
    state = {f"r{r.result_no}": r.state for r in data["results"]}
    entries = {f"r{r.result_no}": r for r in data["entries"]}
    for k in range(rounds):
        outcomes = [reports[w][k] for w in range(n)]
        winners = [w for w in range(n) if outcomes[w][0] == "ok"]
        assert len(winners) == 1, outcomes
        (winner,) = winners
        assert outcomes[winner][2] == (shared(k), private(k, winner))
        assert entries[shared(k)].batch_id == entries[private(k, winner)].batch_id == outcomes[winner][1]
        for w in range(n):
            if w == winner:
                continue
            # The loser learns which target collided and that its own target was fine ...
            assert outcomes[w] == ("conflict", ((shared(k), "already_archived"), (private(k, w), "ok")))
            # ... and nothing of its batch was applied.
            assert state[private(k, w)] == "live"
            assert private(k, w) not in entries
    assert len(data["entries"]) == 2 * rounds
    assert len(archive_events(data["audit"], session)) == rounds
    report = store.verify_audit(ADMIN)
    assert report.ok, report.problems


def check_recorded(store: Archive, reports: list[list[tuple[str, str, str, str]]], session: str) -> None:
    """Ids unique and contiguous r1..rN; each stored result holds exactly what its writer sent."""
    mine = [item for per_worker in reports for item in per_worker if item[0] == session]
    ids = [rid for _, rid, _, _ in mine]
    assert len(ids) == len(set(ids)), f"an id was issued twice: {Counter(ids).most_common(3)}"
    assert sorted(int(r[1:]) for r in ids) == list(range(1, len(ids) + 1)), "ids have a gap"

    data = session_rows(store, session)
    stored = {f"r{r.result_no}": r.blob_sha256 for r in data["results"]}
    assert len(stored) == len(mine), "a recorded result is missing (lost write) or one too many"
    for _, rid, content, sha in mine:
        assert sha == sha256_hex(content.encode("utf-8"))
        assert stored[rid] == sha, f"{rid} holds another writer's content"
    with store.store.read() as conn:
        next_no = conn.execute(
            select(t.sessions.c.next_result_no).where(
                t.sessions.c.tenant_id == TENANT, t.sessions.c.session_id == session
            )
        ).scalar_one()
    assert next_no == len(mine) + 1
    # And the archive serves every one of them back, in order.
    view = store.live_view(AGENT, session)
    assert [i.result.result_id for i in view.items] == [f"r{i}" for i in range(1, len(mine) + 1)]


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_record_into_one_session(store: Archive, db_url: str, mode: str) -> None:
    n, per_worker = 4, 25
    session = "busy"
    store.record(AGENT, session, "t", "the session exists before the race")
    rounds = [(session, per_worker)]
    reports = contend(
        mode,
        db_url,
        store,
        n,
        lambda a, w, b: run_record_rounds(a, w, rounds, b),
        record_rounds,
        lambda w: (rounds,),
    )
    # The pre-existing r1 belongs to no worker; give check_recorded the full picture.
    first = (
        session,
        "r1",
        "the session exists before the race",
        sha256_hex(b"the session exists before the race"),
    )
    check_recorded(store, [[first], *reports], session)


@pytest.mark.parametrize("mode", MODES)
def test_first_record_into_a_new_session_race(store: Archive, db_url: str, mode: str) -> None:
    """Every contender's first record creates the session row; exactly one row, no error."""
    n, sessions = 4, 6
    rounds = [(f"fresh-{k}", 2) for k in range(sessions)]
    reports = contend(
        mode,
        db_url,
        store,
        n,
        lambda a, w, b: run_record_rounds(a, w, rounds, b),
        record_rounds,
        lambda w: (rounds,),
    )
    for session, _ in rounds:
        check_recorded(store, reports, session)
    with store.store.read() as conn:
        owners = list(conn.execute(select(t.sessions.c.session_id).where(t.sessions.c.tenant_id == TENANT)))
    assert sorted(r.session_id for r in owners) == sorted(s for s, _ in rounds)


def test_concurrent_retries_with_one_idempotency_key_all_get_the_first_receipt(store: Archive) -> None:
    """A client retrying while its first call is in flight must get that call's receipt, not a conflict."""
    results, contenders = 12, 4
    seed_session(store, "retry", results)

    def body(r: int, barrier: threading.Barrier) -> tuple[str, bool]:
        barrier.wait(timeout=30)
        receipt = store.archive_results(AGENT, "retry", [(f"r{r}", f"note {r}")], idempotency_key=f"turn-{r}")
        return receipt.batch_id, receipt.replayed

    for r in range(1, results + 1):
        barrier = threading.Barrier(contenders)
        with ThreadPoolExecutor(max_workers=contenders) as pool:
            outcomes = [
                f.result(timeout=RESULT_TIMEOUT_S)
                for f in [pool.submit(body, r, barrier) for _ in range(contenders)]
            ]
        assert len({batch for batch, _ in outcomes}) == 1, outcomes
        assert sorted(replayed for _, replayed in outcomes) == [False] + [True] * (contenders - 1)
