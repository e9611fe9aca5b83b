"""MNEMO_API_THREADS: how many requests an API process runs at once in its thread pool."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from pydantic import ValidationError

from mnemo_sea.rest.app import create_app
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.hashing_embedder import HashingEmbedder
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.settings import MnemoSettings


def test_no_more_blocking_requests_run_at_once_than_the_setting_allows(tmp_path: Path) -> None:
    mnemo = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    app = create_app(mnemo, MnemoSettings(data_dir=tmp_path / "data", api_threads=2))
    running = 0
    most = 0
    lock = threading.Lock()
    probe = APIRouter(route_class=PooledRoute)

    @probe.get("/probe")
    def blocking() -> int:  # a plain function: run in the pool, as every blocking endpoint is
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return most

    app.include_router(probe)
    try:
        with TestClient(app) as client, ThreadPoolExecutor(6) as callers:
            answers = list(callers.map(lambda _: client.get("/probe").status_code, range(6)))
        assert answers == [200] * 6
        assert most == 2  # six at once were asked for; two ran, the others waited their turn
    finally:
        mnemo.close()


def test_the_setting_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        MnemoSettings(api_threads=0)
    assert MnemoSettings().api_threads == 4
