"""TTL forgets across the whole system: an expired memory fact leaves search at once, and the
purge (on demand, and on the worker's schedule) removes its rows, index points and cached
searches; `forget` does the same for one fact."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

from fakes import HashingEmbedder, ManualWallClock
from sqlalchemy import select

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.archive.rules.refs import memory_index_id
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.retrieval.filters import evidence_filter
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.indexer import DrainReport
from mnemo_sea.system.worker import run_worker

AGENT = Principal("clinic", "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
ADMIN = Principal("clinic", "dpo", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
MARKER = "gate-code-4417-zq"


def points(mnemo: Mnemo, owner: str, key: str) -> int:
    return mnemo.index.backend.count(evidence_filter("clinic", memory_index_id(owner, key)))


def archive_holds(mnemo: Mnemo, marker: str) -> list[str]:
    found = []
    with mnemo.archive.store.read() as conn:
        for table in t.metadata.sorted_tables:
            if any(marker in str(v) for row in conn.execute(select(table)) for v in row):
                found.append(table.name)
    return found


def memory_hits(mnemo: Mnemo) -> list[str]:
    return [h.evidence_id for h in mnemo.search(AGENT, f"gate code {MARKER}", kinds=["memory"]).hits]


def test_purge_removes_an_expired_fact_from_archive_index_and_caches(
    mnemo: Mnemo, wall_clock: ManualWallClock
) -> None:
    fact = mnemo.remember(AGENT, "owner-1", "gate", MARKER, "user_claim", ttl_seconds=1.5).fact
    assert memory_hits(mnemo) == ["memory:owner-1/gate"]  # also caches the search's pointers
    assert points(mnemo, "owner-1", "gate") > 0
    assert fact.expires_at is not None
    wall_clock.past(fact.expires_at)

    # Expired: out of search (even from the cached pointers) before any purge ran.
    assert memory_hits(mnemo) == []
    assert [f.status for f in mnemo.memory_history(AGENT, "owner-1", "gate")] == ["expired"]

    receipt = mnemo.purge_expired(ADMIN)
    assert receipt is not None and receipt.memory_facts == (("owner-1", "gate", 1),)
    check = mnemo.verify_deleted(ADMIN, receipt)
    assert check.ok, check
    assert points(mnemo, "owner-1", "gate") == 0
    assert archive_holds(mnemo, MARKER) == []
    assert memory_hits(mnemo) == []
    assert mnemo.purge_expired(ADMIN) is None


def test_forget_removes_the_fact_and_its_index_points(mnemo: Mnemo) -> None:
    mnemo.remember(AGENT, "owner-1", "gate", MARKER, "user_claim")
    mnemo.remember(AGENT, "owner-1", "gate", MARKER + "-v2", "user_correction")
    assert memory_hits(mnemo) == ["memory:owner-1/gate"]
    receipt = mnemo.forget(AGENT, "owner-1", "gate")
    assert mnemo.verify_deleted(ADMIN, receipt).ok
    assert points(mnemo, "owner-1", "gate") == 0
    assert archive_holds(mnemo, MARKER) == []
    assert memory_hits(mnemo) == []
    assert mnemo.current(AGENT, "owner-1", "gate") is None


def test_the_worker_purges_on_its_schedule() -> None:
    """A fake clock: the worker purges on its first pass, then only once `purge_seconds` passed."""
    now = [100.0]
    purges: list[float] = []
    passes = {"n": 0}
    stop = threading.Event()

    def drain(_batch: int, lane: str) -> DrainReport:
        if lane == "trailing":
            return DrainReport(applied=0, failed=0, pending=0)
        passes["n"] += 1
        now[0] += 4.0  # each pass takes 4 s of the fake clock
        if passes["n"] == 8:
            stop.set()
        return DrainReport(applied=0, failed=0, pending=0)

    def purge() -> list[object]:
        purges.append(now[0])
        return [SimpleNamespace(memory_facts=[("o", "k", 1)])]

    fake = SimpleNamespace(indexer=SimpleNamespace(drain=drain), purge_expired_everywhere=purge)
    stats = run_worker(fake, stop, poll_seconds=0, purge_seconds=10, clock=lambda: now[0])  # type: ignore[arg-type]
    assert purges == [100.0, 112.0, 124.0]  # passes start at 100, 104, 108, 112, ... 128
    assert (stats.purges, stats.purged_facts, stats.passes) == (3, 3, 8)

    stop.clear()
    passes["n"], purges[:] = 0, []
    run_worker(fake, stop, poll_seconds=0, purge_seconds=None, clock=lambda: now[0])  # type: ignore[arg-type]
    assert purges == []


def test_a_running_worker_forgets_an_expired_fact(tmp_path: Path, wall_clock: ManualWallClock) -> None:
    mnemo = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    mnemo.sync_writes = False  # as in server mode: the worker applies the outbox
    stop = threading.Event()
    try:
        gate = mnemo.remember(AGENT, "owner-1", "gate", MARKER, "user_claim", ttl_seconds=0.2).fact
        mnemo.remember(AGENT, "owner-1", "name", "Ada", "user_claim")
        wall_clock.past(gate.expires_at)  # expired before the worker's first pass, which purges
        stats: list[object] = []
        thread = threading.Thread(
            target=lambda: stats.append(run_worker(mnemo, stop, poll_seconds=0.02, purge_seconds=0.05))
        )
        thread.start()
        deadline = time.monotonic() + 120  # bounds a hang: the first pass purges
        while time.monotonic() < deadline and (
            mnemo.memory_history(AGENT, "owner-1", "gate") or points(mnemo, "owner-1", "gate")
        ):
            time.sleep(0.05)
        stop.set()
        thread.join(120)
        assert not thread.is_alive(), "the worker did not stop"
        assert mnemo.memory_history(AGENT, "owner-1", "gate") == []
        assert points(mnemo, "owner-1", "gate") == 0
        assert archive_holds(mnemo, MARKER) == []
        kept = mnemo.current(AGENT, "owner-1", "name")
        assert kept is not None and kept.value == "Ada"
        assert points(mnemo, "owner-1", "name") > 0
        events = mnemo.archive.audit_events(ADMIN)
        assert [(e.actor, e.action, e.target) for e in events][-1] == (
            "system:ttl-purge",
            "delete",
            "memory:expired",
        )
    finally:
        stop.set()
        mnemo.close()
