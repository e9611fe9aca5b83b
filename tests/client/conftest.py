"""Fixtures of the REST client tests: a real `mnemo-sea serve` process on loopback, per mode.

`served` starts one API process for the whole folder and mode (the processes the benchmarks
run, mnemo_sea.eval.api_stack.ApiServer), on

- embedded: a SQLite archive and a Qdrant Edge index in a temporary folder;
- server: a fresh database on this machine's PostgreSQL, Redis under a key prefix of its own and
  qdrant-client's in-process engine (skipped when PostgreSQL or Redis is unreachable, except
  with CI=true, where the tests fail: tests/stores.py).

Each test takes a tenant of its own (`tenant`), its keys minted in the server's key table as it
asks for them; the test process reads the archive's tables directly (`Served.count`) to check
what a call wrote, not only what it answered. `tenant` runs each test on the sync client and on
the async one (`Tenant.client`; client_helpers.SyncOfAsync drives the async client's coroutines
on a loop of its own), so one test body covers both.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import MAX_REQUEST_BYTES, Served, Tampering, Tenant
from stores import REDIS_URL, create_database, delete_prefix, drop_database, require_postgres, require_redis

from mnemo_sea.archive import Archive
from mnemo_sea.eval.api_stack import ApiServer


def _serve(mode: str, env: dict[str, str], folder: Path, database_url: str) -> Iterator[Served]:
    archive = Archive.open(database_url)  # migrates a fresh database before the server opens it
    server = ApiServer(
        {**env, "MNEMO_EMBEDDER": "hashing", "MNEMO_MAX_REQUEST_BYTES": str(MAX_REQUEST_BYTES)},
        folder / "api.log",
    )
    try:
        server.start()
        yield Served(mode, server, archive)
    finally:
        server.stop()
        archive.close()


@pytest.fixture(scope="package", params=["embedded", pytest.param("server", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(f"client-{request.param}")
    if request.param == "embedded":
        data = folder / "data"
        data.mkdir()
        yield from _serve(
            "embedded", {"MNEMO_DATA_DIR": str(data)}, folder, f"sqlite+pysqlite:///{data / 'archive.db'}"
        )
        return
    require_postgres()
    require_redis()
    name = f"mnemo_client_{uuid.uuid4().hex[:12]}"
    prefix = f"mnemo-client:{uuid.uuid4().hex[:12]}:"
    url = create_database(name)
    try:
        env = {
            "MNEMO_DATABASE_URL": url,
            "MNEMO_QDRANT_URL": ":memory:",
            "MNEMO_REDIS_URL": REDIS_URL,
            "MNEMO_REDIS_PREFIX": prefix,
        }
        yield from _serve("server", env, folder, url)
    finally:
        drop_database(name)
        delete_prefix(prefix)


@pytest.fixture(params=["sync", "async"])
def tenant(request: pytest.FixtureRequest, served: Served) -> Iterator[Tenant]:
    made = Tenant(served, request.param)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def tampering() -> Iterator[Tampering]:
    """A man in the middle: forwards each request to the served API and alters its answer."""
    made = Tampering()
    try:
        yield made
    finally:
        made.close()
