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

import psycopg
import pytest

from mnemo_sea.archive import Archive
from mnemo_sea.archive.store import open_store

PG_ADMIN_URL = os.environ.get("MNEMO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_reachable() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0]


def require_postgres() -> None:
    problem = _pg_reachable()
    if problem is None:
        return
    message = f"PostgreSQL at {PG_ADMIN_URL} is unreachable: {problem}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the PostgreSQL suite must run)")
    pytest.skip(message)


def _sqlalchemy_url(name: str) -> str:
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}"


def _drop(name: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A database migrated once per run; each test copies it (much cheaper than migrating)."""
    require_postgres()
    name = f"mnemo_tmpl_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        store = open_store(_sqlalchemy_url(name))
        store.dispose()  # CREATE DATABASE ... TEMPLATE needs the template to have no sessions
        yield name
    finally:
        _drop(name)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database URL (SQLAlchemy + psycopg 3), dropped afterwards."""
    require_postgres()
    name = f"mnemo_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _sqlalchemy_url(name)
    finally:
        _drop(name)


@pytest.fixture
def pg_migrated_url(pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database already at the newest schema, dropped afterwards."""
    name = f"mnemo_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    try:
        yield _sqlalchemy_url(name)
    finally:
        _drop(name)


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
