"""The servers the tests talk to (this machine's PostgreSQL and Redis) and the one rule for
when they are missing: skip with a message, except with CI=true, where the test fails, because
CI must exercise them. Every conftest imports from here (conftests cannot import each other:
every one of them is the module `conftest`)."""

from __future__ import annotations

import os

import psycopg
import pytest
import redis

PG_ADMIN_URL = os.environ.get("MNEMO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("MNEMO_TEST_REDIS", "redis://127.0.0.1:6379/0")


def require(problem: str | None, suite: str) -> None:
    """Go on when `problem` is None; else skip, or fail with CI=true (the suite must run there)."""
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem} (CI=true: the {suite} suite must run)")
    pytest.skip(problem)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0]


def require_postgres() -> None:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            problem = None
    except psycopg.Error as e:
        problem = f"PostgreSQL at {PG_ADMIN_URL} is unreachable: {_first_line(e)}"
    require(problem, "PostgreSQL")


def require_redis() -> None:
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
        problem = None
    except redis.RedisError as e:
        problem = f"Redis at {REDIS_URL} is unreachable: {_first_line(e)}"
    require(problem, "Redis")


def sqlalchemy_url(name: str) -> str:
    """The SQLAlchemy (psycopg 3) URL of database `name` on the test server."""
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}"


def create_database(name: str, template: str | None = None) -> str:
    """Create database `name` (a copy of `template` when given); returns its SQLAlchemy URL."""
    copy = "" if template is None else f' TEMPLATE "{template}"'
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return sqlalchemy_url(name)


def drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def delete_prefix(prefix: str) -> int:
    """Delete exactly the Redis keys under `prefix` (never FLUSHDB: the server may be shared)."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        return int(client.delete(*keys)) if keys else 0
    finally:
        client.close()
