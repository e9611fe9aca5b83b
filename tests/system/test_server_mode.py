"""Server mode on real components: the archive on PostgreSQL, caches on Redis, and the index on
qdrant-client's in-process engine standing in for a Qdrant server (same client code path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import HashingEmbedder

from mnemo_sea.archive import EvidenceInput, InvalidInput, Principal, Role, Sensitivity, StoreUnavailable
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.caches import CacheUnavailable, RedisCache
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

AGENT = Principal("shop", "investigator", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ADMIN = Principal("shop", "admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
CLI_MAIN = "from mnemo_sea.cli.app import main; main()"


@pytest.fixture
def server(pg_migrated_url: str, redis_url: str, redis_prefix: str) -> Iterator[Mnemo]:
    settings = MnemoSettings(
        database_url=pg_migrated_url, qdrant_url=":memory:", redis_url=redis_url, redis_prefix=redis_prefix
    )
    m = Mnemo.from_settings(settings, embedder=HashingEmbedder())
    try:
        yield m
    finally:
        m.close()


def test_the_whole_cycle_runs_on_postgresql_redis_and_the_qdrant_client(server: Mnemo) -> None:
    assert server.archive.store.engine.dialect.name == "postgresql"
    assert isinstance(server.cache, RedisCache)
    server.ingest(
        AGENT, [EvidenceInput(body="cross-border parcels take 7 to 12 days", source="kb", evidence_id="p:1")]
    )
    first = server.search(AGENT, "cross-border parcels")
    assert first.status == "results" and first.hits[0].evidence_id == "p:1"
    assert server.search(AGENT, "cross-border parcels").cached
    receipt = server.delete_evidence(ADMIN, "p:1")
    assert server.verify_deleted(ADMIN, receipt).ok
    after = server.search(AGENT, "cross-border parcels")
    assert not after.cached and after.status == "no_match"


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_DATABASE_URL", "postgresql+psycopg://u@h/db")
    monkeypatch.setenv("MNEMO_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("MNEMO_REDIS_URL", "redis://cache:6379/0")
    s = MnemoSettings()
    assert (s.database_url, s.qdrant_url, s.redis_url) == (
        "postgresql+psycopg://u@h/db",
        "http://qdrant:6333",
        "redis://cache:6379/0",
    )


def test_missing_or_unreachable_components_fail_closed(pg_migrated_url: str) -> None:
    with pytest.raises(InvalidInput, match="MNEMO_QDRANT_URL"):
        Mnemo.from_settings(MnemoSettings(database_url=pg_migrated_url), embedder=HashingEmbedder())
    with pytest.raises(CacheUnavailable):
        Mnemo.from_settings(
            MnemoSettings(
                database_url=pg_migrated_url, qdrant_url=":memory:", redis_url="redis://127.0.0.1:1/0"
            ),
            embedder=HashingEmbedder(),
        )
    with pytest.raises(StoreUnavailable):
        Mnemo.from_settings(
            MnemoSettings(database_url="postgresql+psycopg://postgres@127.0.0.1:1/x", qdrant_url=":memory:"),
            embedder=HashingEmbedder(),
        )
    with pytest.raises(IndexUnavailable):
        Mnemo.from_settings(
            MnemoSettings(database_url=pg_migrated_url, qdrant_url="http://127.0.0.1:1"),
            embedder=HashingEmbedder(),
        )


def test_server_mode_needs_one_shared_deployment_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without a configured key each process would sign with its own and reject the others' receipts."""
    monkeypatch.delenv("MNEMO_RECEIPT_KEY", raising=False)
    monkeypatch.delenv("MNEMO_RECEIPT_KEY_FILE", raising=False)
    where = {"database_url": "postgresql+psycopg://postgres@127.0.0.1:1/x", "qdrant_url": ":memory:"}
    for extra, message in [
        ({}, "MNEMO_RECEIPT_KEY"),
        ({"receipt_key": "too short"}, "at least 32 characters"),
        ({"receipt_key": "k" * 40, "receipt_key_file": tmp_path / "key"}, "not both"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            Mnemo.from_settings(MnemoSettings(**where, **extra), embedder=HashingEmbedder())
    assert not (tmp_path / "key").exists()
    from mnemo_sea.system.opening import open_archive
    from mnemo_sea.system.wiring.settings import settings_receipt_key

    # A missing key file is refused at start, by the API (from_settings) and by archive-only
    # commands alike, and never created: a mistyped path or an unshared volume would otherwise
    # give each node a key of its own.
    missing = MnemoSettings(**where, receipt_key_file=tmp_path / "mistyped.key")
    for start in (
        lambda: Mnemo.from_settings(missing, embedder=HashingEmbedder()),
        lambda: open_archive(missing),
    ):
        with pytest.raises(InvalidInput, match="MNEMO_RECEIPT_KEY_FILE") as refused:
            start()
        assert str(tmp_path / "mistyped.key") in refused.value.message
        assert "openssl rand -hex 32" in refused.value.message
        assert refused.value.detail["receipt_key_file"] == str(tmp_path / "mistyped.key")
    assert not (tmp_path / "mistyped.key").exists()

    (tmp_path / "key").write_text("k" * 64 + "\n", encoding="utf-8")  # as `openssl rand -hex 32 >` does
    from_file = settings_receipt_key(MnemoSettings(**where, receipt_key_file=tmp_path / "key"))
    same = settings_receipt_key(MnemoSettings(**where, receipt_key="k" * 64))
    assert from_file is not None and same is not None and from_file.key_id == same.key_id
    with pytest.raises(InvalidInput, match="at least 32 characters"):
        (tmp_path / "short").write_text("too short\n", encoding="utf-8")
        settings_receipt_key(MnemoSettings(**where, receipt_key_file=tmp_path / "short"))


def test_background_workers_apply_the_outbox_once_each(
    pg_migrated_url: str, redis_url: str, redis_prefix: str
) -> None:
    import threading
    import time

    from mnemo_sea.archive.storage.outbox import pending_count
    from mnemo_sea.system.worker import run_worker

    settings = MnemoSettings(
        database_url=pg_migrated_url, qdrant_url=":memory:", redis_url=redis_url, redis_prefix=redis_prefix
    )
    api = Mnemo.from_settings(settings, embedder=HashingEmbedder(), sync_writes=False)
    try:
        docs = [
            EvidenceInput(body=f"warehouse note {i} about pallets", source="ops", evidence_id=f"w:{i}")
            for i in range(30)
        ]
        api.ingest(AGENT, docs)
        with api.archive.store.read() as conn:
            queued = pending_count(conn)
        assert queued >= 30
        assert api.search(AGENT, "warehouse pallets").status == "no_match"  # the index lags until drained

        stop = threading.Event()
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(run_worker(api, stop, poll_seconds=0.05, batch=5)))
            for _ in range(2)
        ]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 120  # bounds a hang, not a speed
        while time.monotonic() < deadline:
            with api.archive.store.read() as conn:
                if pending_count(conn) == 0:
                    break
            threading.Event().wait(0.05)
        stop.set()
        for th in threads:
            th.join(timeout=120)
        assert not any(th.is_alive() for th in threads), "a worker did not stop"
        assert sum(r.applied for r in results) == queued  # every row once, none twice
        assert all(r.failed == 0 for r in results)
        assert api.search(AGENT, "warehouse pallets", limit=50).status == "results"
    finally:
        api.close()


def test_the_worker_command_drains_the_outbox_and_stops_on_sigterm(pg_migrated_url: str) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from mnemo_sea.archive import Archive
    from mnemo_sea.archive.storage.outbox import pending_count

    archive = Archive.open(pg_migrated_url)
    try:
        for i in range(5):
            archive.put_evidence(AGENT, EvidenceInput(body=f"note {i}", source="ops", evidence_id=f"n:{i}"))
        with archive.store.read() as conn:
            queued = pending_count(conn)
        env = {
            **os.environ,
            "MNEMO_DATABASE_URL": pg_migrated_url,
            "MNEMO_QDRANT_URL": ":memory:",
            "MNEMO_EMBEDDER": "hashing",
        }
        env.pop("MNEMO_REDIS_URL", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()", "worker", "--poll", "0.05"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 180  # a cold start on a loaded machine; bounds a hang
            while time.monotonic() < deadline:
                with archive.store.read() as conn:
                    if pending_count(conn) == 0:
                        break
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out)["applied"] == queued
    finally:
        archive.close()


def test_the_worker_command_fails_closed_on_an_unreachable_database() -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "MNEMO_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/x",
        "MNEMO_QDRANT_URL": ":memory:",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mnemo_sea.cli.app import main; main()",
            "worker",
            "--embedder",
            "hashing",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 6
    assert proc.stderr.startswith("error: archive store unreachable") and "Traceback" not in proc.stderr


def test_the_worker_waits_out_an_unavailable_store() -> None:
    import threading
    from types import SimpleNamespace

    from mnemo_sea.system.projection.indexer import DrainReport
    from mnemo_sea.system.worker import run_worker

    stop = threading.Event()
    calls = {"n": 0}

    def drain(_batch: int, lane: str) -> DrainReport:
        if lane == "trailing":  # no archived original waits: the writes are the subject
            return DrainReport(applied=0, failed=0, pending=0)
        calls["n"] += 1
        if calls["n"] <= 2:
            raise StoreUnavailable("database restarting")
        if calls["n"] == 3:
            return DrainReport(applied=4, failed=0, pending=0)
        stop.set()
        return DrainReport(applied=0, failed=0, pending=0)

    fake = SimpleNamespace(indexer=SimpleNamespace(drain=drain), purge_expired_everywhere=list)
    stats = run_worker(fake, stop, poll_seconds=0.01)  # type: ignore[arg-type]
    assert (stats.store_errors, stats.applied, stats.passes) == (2, 4, 2)


def test_a_failing_ttl_purge_is_logged_and_retried_while_the_worker_drains_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A purge failing with an IntegrityFailure (a tenant's broken audit chain) or a conflict does
    not stop the worker: the drain goes on, the purge is tried again at its next interval."""
    import logging
    import threading
    from types import SimpleNamespace

    from mnemo_sea.archive import IntegrityFailure, MemoryConflict
    from mnemo_sea.system.projection.indexer import DrainReport
    from mnemo_sea.system.worker import run_worker

    now = [0.0]
    stop = threading.Event()
    drains: list[float] = []
    purges: list[float] = []

    def drain(_batch: int, lane: str) -> DrainReport:
        if lane == "trailing":  # no archived original waits: the writes are the subject
            return DrainReport(applied=0, failed=0, pending=0)
        drains.append(now[0])
        now[0] += 4.0
        if len(drains) == 8:
            stop.set()
        return DrainReport(applied=1, failed=0, pending=0)

    def purge() -> list[object]:
        purges.append(now[0])
        if len(purges) == 1:
            raise IntegrityFailure("the audit chain of tenant t-9 is broken", tenant_id="t-9")
        if len(purges) == 2:
            raise MemoryConflict("u-1", "tz", "user_claim", 2, "user_correction")
        return [SimpleNamespace(memory_facts=[("u-1", "tz", 1)])]

    fake = SimpleNamespace(indexer=SimpleNamespace(drain=drain), purge_expired_everywhere=purge)
    with caplog.at_level(logging.ERROR, logger="mnemo_sea.system.worker"):
        stats = run_worker(fake, stop, poll_seconds=0, purge_seconds=10, clock=lambda: now[0])  # type: ignore[arg-type]
    assert drains == [0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0]  # every pass drained
    assert purges == [0.0, 12.0, 24.0]  # each failure retried one interval later
    assert (stats.purge_errors, stats.purges, stats.purged_facts) == (2, 1, 1)
    assert (stats.passes, stats.applied, stats.store_errors) == (8, 8, 0)
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 2 and "TTL purge failed" in logged[0]
    assert "integrity_error" in logged[0] and "t-9" in logged[0] and "memory_conflict" in logged[1]


def test_server_mode_can_keep_an_embedded_edge_index_instead_of_a_qdrant_server(
    pg_migrated_url: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match="one index"):
        Mnemo.from_settings(
            MnemoSettings(database_url=pg_migrated_url, qdrant_url=":memory:", index_path=tmp_path / "ix"),
            embedder=HashingEmbedder(),
        )
    settings = MnemoSettings(database_url=pg_migrated_url, index_path=tmp_path / "ix")
    with Mnemo.from_settings(settings, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [EvidenceInput(body="returns within 30 days", source="kb", evidence_id="r:1")])
        assert [h.evidence_id for h in m.search(AGENT, "returns days").hits] == ["r:1"]
    assert (tmp_path / "ix").is_dir()
    with Mnemo.from_settings(settings, embedder=HashingEmbedder()) as again:  # the index persisted
        assert again.index.count("shop") == 1


def test_a_page_drain_that_fails_leaves_the_passes_writes_counted_and_the_heartbeat_touched(
    tmp_path: Path,
) -> None:
    """Writes and pages drain in turn: an index outage while embedding a page must not hide the
    writes the same pass applied, nor make a live worker look stuck to its health check."""
    import threading
    from types import SimpleNamespace

    from mnemo_sea.archive import StoreUnavailable
    from mnemo_sea.system.projection.indexer import DrainReport
    from mnemo_sea.system.worker import run_worker

    stop = threading.Event()
    heartbeat = tmp_path / "heartbeat"

    def drain(_batch: int, lane: str) -> DrainReport:
        if lane == "trailing":
            stop.set()
            raise StoreUnavailable("index restarting")
        return DrainReport(applied=5, failed=0, pending=0)

    fake = SimpleNamespace(indexer=SimpleNamespace(drain=drain), purge_expired_everywhere=list)
    stats = run_worker(fake, stop, poll_seconds=0, heartbeat=heartbeat, purge_seconds=None)  # type: ignore[arg-type]
    assert (stats.passes, stats.applied, stats.store_errors) == (1, 5, 1)
    assert heartbeat.exists()
