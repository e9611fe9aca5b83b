"""Shared fixtures: archive stores on SQLite and on the PostgreSQL server of this machine.

Each PostgreSQL test gets a database of its own, created and dropped here. When the server
is unreachable these tests skip with a message, except with CI=true, where they fail: CI
must exercise PostgreSQL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import ManualWallClock
from hypothesis import settings
from stores import create_database, drop_database, require_postgres

from mnemo_sea.archive import Archive
from mnemo_sea.archive.rules import clock as archive_clock
from mnemo_sea.archive.storage.store import open_store
from mnemo_sea.system.projection import indexer as indexer_module

# Server mode refuses to start without a deployment key (it signs deletion receipts); every
# server-mode test and the service subprocesses they start share this one.
TEST_RECEIPT_KEY = "test-only-receipt-key-0123456789abcdef"
os.environ.setdefault("MNEMO_RECEIPT_KEY", TEST_RECEIPT_KEY)

# No hypothesis deadline anywhere: its default fails an example that takes over 200 ms, which a
# loaded machine reaches with no bug at all. Property tests check results, never speed.
settings.register_profile("mnemo", deadline=None)
settings.load_profile("mnemo")


@pytest.fixture(scope="session", autouse=True)
def inline_trail() -> Iterator[None]:
    """The trail (archived originals indexed behind the writes) runs inline, right after the
    write that started it, instead of on a thread: a test then never races it (a page indexed
    or not yet, depending on the machine's load). Tests of the moment before it runs give a
    starter of their own (`ManualClock.group_commit`); one test runs the real thread.

    Session-scoped, so that it is in place before any fixture opens a system: an indexer takes
    its starter when it is built, and a module's system built before a per-test patch kept the
    real thread (a console test raced it on a busy machine)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(indexer_module, "thread_trail", lambda action: action())
        yield


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A database migrated once per run; each test copies it (much cheaper than migrating)."""
    require_postgres()
    name = f"mnemo_tmpl_{uuid.uuid4().hex[:12]}"
    url = create_database(name)
    try:
        store = open_store(url)
        store.dispose()  # CREATE DATABASE ... TEMPLATE needs the template to have no sessions
        yield name
    finally:
        drop_database(name)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database URL (SQLAlchemy + psycopg 3), dropped afterwards."""
    require_postgres()
    name = f"mnemo_test_{uuid.uuid4().hex[:12]}"
    try:
        yield create_database(name)
    finally:
        drop_database(name)


@pytest.fixture
def pg_migrated_url(pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database already at the newest schema, dropped afterwards."""
    name = f"mnemo_test_{uuid.uuid4().hex[:12]}"
    try:
        yield create_database(name, template=pg_template)
    finally:
        drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on both backends."""
    if request.param == "sqlite":
        yield f"sqlite+pysqlite:///{tmp_path / 'archive.db'}"
    else:
        # Every store opens migrated, so starting from the migrated template changes nothing
        # but time; tests of migration itself use `pg_url` (an empty database).
        yield request.getfixturevalue("pg_migrated_url")


@pytest.fixture
def archive(db_url: str) -> Iterator[Archive]:
    """An archive on each backend (see `db_url`)."""
    a = Archive.open(db_url)
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> ManualWallClock:
    """The system's wall clock, moved only by the test (in this process: its threads too)."""
    manual = ManualWallClock()
    monkeypatch.setattr(archive_clock, "wall_clock", manual)
    return manual
