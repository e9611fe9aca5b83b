"""MNEMO_API_THREADS: how many requests an API process runs at once in its thread pool."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from pydantic import ValidationError

from mnemo_sea.rest.app import create_app
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings


def test_no_more_blocking_requests_run_at_once_than_the_setting_allows(tmp_path: Path) -> None:
    """Six requests at once with two threads: two run and four wait, seen by the pool's own
    count rather than by how long a request happened to take (each is held until the test saw)."""
    mnemo = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    app = create_app(mnemo, MnemoSettings(data_dir=tmp_path / "data", api_threads=2))
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()
    pools: list[anyio.CapacityLimiter] = []
    probe = APIRouter(route_class=PooledRoute)

    @probe.get("/probe")
    def blocking() -> int:  # a plain function: run in the pool, as every blocking endpoint is
        nonlocal running, most
        pool = anyio.from_thread.run_sync(anyio.to_thread.current_default_thread_limiter)
        with lock:
            running += 1
            most = max(most, running)
            pools[:] = [pool]
        release.wait(120)  # held until the test has counted; the bound only ends a hang
        with lock:
            running -= 1
        return most

    def waiting() -> int:
        with lock:
            return running + (pools[0].statistics().tasks_waiting if pools else 0)

    app.include_router(probe)
    try:
        with TestClient(app) as client, ThreadPoolExecutor(6) as callers:
            asked = [callers.submit(client.get, "/probe") for _ in range(6)]
            deadline = time.monotonic() + 120
            while waiting() < 6:  # every request running or queued for the pool
                assert time.monotonic() < deadline, "the requests never reached the pool"
                time.sleep(0.01)
            with lock:
                assert running == 2  # six at once were asked for; two run, the others wait
            release.set()
            answers = [f.result(timeout=120).status_code for f in asked]
        assert answers == [200] * 6
        assert most == 2
    finally:
        release.set()
        mnemo.close()


def test_the_setting_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        MnemoSettings(api_threads=0)
    assert MnemoSettings().api_threads == 4
