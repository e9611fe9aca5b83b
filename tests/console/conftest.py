"""Fixtures of the console's tests: the console mounted in the REST app (as `serve` mounts it)
over the embedded default and over server mode, a tenant of each test's own with keys, and a
real headless Chromium signed in to a live server.

`system` is parametrised like the REST tests' (tests/rest/conftest.py): embedded (SQLite and
Qdrant Edge in a folder) and server (a fresh PostgreSQL database, Redis under a prefix of its
own, qdrant-client in process). The embedder is the hashing one: the model is not the subject.
With CI=true a missing PostgreSQL, Redis or Chromium fails these tests instead of skipping them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_helpers import SCREENSHOTS, Console, Tenant
from fastapi.testclient import TestClient
from stores import REDIS_URL, create_database, delete_prefix, drop_database, require, require_redis

from mnemo_sea.console.app import mount
from mnemo_sea.eval.browser import browser_problem, headless_chromium, served
from mnemo_sea.rest.app import create_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a test may write the curation report the console shows (empty until one does)."""
    return tmp_path_factory.mktemp("console-report") / "report.json"


@pytest.fixture(scope="module", params=["embedded", pytest.param("server", marks=pytest.mark.postgres)])
def console(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, report_file: Path
) -> Iterator[Console]:
    if request.param == "embedded":
        folder = tmp_path_factory.mktemp("console-embedded")
        mnemo = Mnemo.open(folder, embedder=HashingEmbedder())
        settings = MnemoSettings(data_dir=folder, database_url=None)
        cleanup = None
    else:
        require_redis()
        name = f"mnemo_console_{uuid.uuid4().hex[:12]}"
        pg_template: str = request.getfixturevalue("pg_template")
        url = create_database(name, template=pg_template)
        prefix = f"mnemo-console:{uuid.uuid4().hex[:12]}:"
        settings = MnemoSettings(
            database_url=url, qdrant_url=":memory:", redis_url=REDIS_URL, redis_prefix=prefix
        )
        mnemo = Mnemo.from_settings(settings, embedder=HashingEmbedder())
        cleanup = (name, prefix)
    app = create_app(mnemo, settings)
    mount(app, report=report_file)
    made = Console(request.param, mnemo, app, TestClient(app))
    try:
        yield made
    finally:
        made.client.close()
        mnemo.close()
        if cleanup is not None:
            drop_database(cleanup[0])
            delete_prefix(cleanup[1])


@pytest.fixture
def tenant(console: Console) -> Tenant:
    """A tenant of this test's own on the module's console."""
    return Tenant(console)


@pytest.fixture(scope="module")
def live_url(console: Console) -> Iterator[str]:
    """The console's app served on a free loopback port, for the browser."""
    with served(console.app) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    require(browser_problem(), "browser")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with headless_chromium() as driver:
        yield driver
