"""Fixtures of the REST API tests: the app over the embedded default and over server mode.

`system` is parametrised, so every test that takes `api` runs on both:

- embedded: a SQLite archive and a Qdrant Edge index in a temporary folder;
- server: a fresh migrated database on this machine's PostgreSQL, Redis under a key prefix of
  its own (deleted afterwards), and qdrant-client's in-process engine standing in for a Qdrant
  server (the same client code path).

Opening a system takes about a second, so one system serves a whole test module; each test
gets a tenant of its own (`api`), which isolates it as the product isolates customers. With
CI=true an unreachable PostgreSQL or Redis fails the server-mode tests instead of skipping them.
The embedder is the deterministic hashing one: the model is not the subject here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from rest_helpers import OPERATOR_TENANT, Api, System
from stores import REDIS_URL, create_database, delete_prefix, drop_database, require_redis

from mnemo_sea.rest.app import create_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings


@pytest.fixture(scope="module")
def module_pg_url(pg_template: str) -> Iterator[str]:
    """A migrated PostgreSQL database for one test module (copied from the session's template)."""
    name = f"mnemo_rest_{uuid.uuid4().hex[:12]}"
    try:
        yield create_database(name, template=pg_template)
    finally:
        drop_database(name)


@pytest.fixture(scope="module")
def module_redis_prefix() -> Iterator[str]:
    """A Redis key prefix of this module's own; every key under it is deleted afterwards."""
    require_redis()
    prefix = f"mnemo-rest:{uuid.uuid4().hex[:12]}:"
    try:
        yield prefix
    finally:
        delete_prefix(prefix)


def server_settings(database_url: str, redis_prefix: str) -> MnemoSettings:
    return MnemoSettings(
        database_url=database_url,
        qdrant_url=":memory:",
        redis_url=REDIS_URL,
        redis_prefix=redis_prefix,
        operator_tenant=OPERATOR_TENANT,
    )


@pytest.fixture(scope="module", params=["embedded", pytest.param("server", marks=pytest.mark.postgres)])
def system(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    if request.param == "embedded":
        folder = tmp_path_factory.mktemp("rest-embedded")
        mnemo = Mnemo.open(folder, embedder=HashingEmbedder())
        settings = MnemoSettings(data_dir=folder, database_url=None, operator_tenant=OPERATOR_TENANT)
    else:
        url: str = request.getfixturevalue("module_pg_url")
        settings = server_settings(url, request.getfixturevalue("module_redis_prefix"))
        mnemo = Mnemo.from_settings(settings, embedder=HashingEmbedder())
    app = create_app(mnemo, settings)
    made = System(request.param, mnemo, app, TestClient(app), settings.data_dir, settings.database_url)
    try:
        yield made
    finally:
        made.client.close()
        mnemo.close()


@pytest.fixture
def api(system: System) -> Api:
    """A tenant of this test's own on the module's system."""
    return Api(system)
