"""Server mode as deployed: two API processes on one PostgreSQL database, an outbox worker between.

Each app has its own archive engine (connection pool) and its own Redis client under one
prefix; they share the index, as they would share a Qdrant server (qdrant-client's in-process
engine stands in for it). Writes return after the SQL commit (`sync_writes=False`), and only the
worker applies them to the index and the caches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rest_helpers import evidence
from stores import REDIS_URL

from mnemo_sea.archive import Archive
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.rest.app import create_app
from mnemo_sea.system.caches import RedisCache
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings
from mnemo_sea.system.worker import run_worker

pytestmark = pytest.mark.postgres


@pytest.fixture
def two_apps(pg_migrated_url: str, module_redis_prefix: str) -> Iterator[tuple[Mnemo, Mnemo, Mnemo]]:
    settings = MnemoSettings(
        database_url=pg_migrated_url,
        qdrant_url=":memory:",
        redis_url=REDIS_URL,
        redis_prefix=module_redis_prefix,
    )
    first = Mnemo.from_settings(settings, embedder=HashingEmbedder(), sync_writes=False)

    def another() -> Mnemo:
        cache = RedisCache(REDIS_URL, prefix=module_redis_prefix)
        # Another process of the same deployment: the same database and the same receipt key.
        archive = Archive.open(pg_migrated_url, receipt_key=first.archive.store.receipt_key)
        return Mnemo(archive, first.index, cache, sync_writes=False)

    second, worker = another(), another()
    try:
        yield first, second, worker
    finally:
        for m in (second, worker):
            m.archive.close()
            m.cache.close()
        first.close()


def _eventually(check: Callable[[], bool], timeout: float = 120.0) -> None:
    """Until `check` holds; the timeout only ends a hang (the worker polls every 0.05 s)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the worker did not apply the outbox in time"
        time.sleep(0.05)


def test_a_write_through_one_app_is_searchable_through_the_other_once_drained(
    two_apps: tuple[Mnemo, Mnemo, Mnemo],
) -> None:
    first, second, worker = two_apps
    key, _ = create_key(first.archive.store, tenant_id="shop", subject="ops", roles=["admin"])
    headers = {"X-API-Key": key}
    a, b = TestClient(create_app(first)), TestClient(create_app(second))

    stored = a.post(
        "/v1/evidence", json=evidence("ship", "parcels to Hobart take nine days"), headers=headers
    )
    assert stored.status_code == 201
    query = {"query": "parcels Hobart", "mode": "bm25"}

    def found_through_b() -> list[Any]:
        response = b.post("/v1/search", json=query, headers=headers)
        assert response.status_code == 200, response.text
        return list(response.json()["hits"])

    # Committed and readable at once through the other app, but not indexed until drained.
    assert b.get("/v1/evidence/ship", headers=headers).status_code == 200
    assert found_through_b() == []

    stop = threading.Event()
    stats: list[Any] = []
    thread = threading.Thread(target=lambda: stats.append(run_worker(worker, stop, poll_seconds=0.05)))
    thread.start()
    try:
        _eventually(lambda: [h["evidence_id"] for h in found_through_b()] == ["ship"])

        receipt = b.delete("/v1/evidence/ship", headers=headers).json()
        # Hydration drops a deleted record at once, before the worker catches up.
        assert a.post("/v1/search", json=query, headers=headers).json()["hits"] == []
        _eventually(lambda: a.post("/v1/deletions/verify", json=receipt, headers=headers).json()["ok"])
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert stats[0].applied >= 2 and stats[0].failed == 0
