"""The servers the tests talk to (this machine's PostgreSQL and Redis) and the one rule for
when they are missing: skip with a message, except with CI=true, where the test fails, because
CI must exercise them. Every conftest imports from here (conftests cannot import each other:
every one of them is the module `conftest`). Probing and cleaning up reuse the helpers the
benchmarks ship with (mnemo_sea.eval.api_stack)."""

from __future__ import annotations

import os

import psycopg
import pytest

from mnemo_sea.eval.api_stack import delete_redis_prefix, postgres_problem, redis_problem, sqlalchemy_url
from mnemo_sea.eval.load_api import DEFAULT_PG_ADMIN_URL, DEFAULT_REDIS_URL

# MNEMO_TEST_PG / MNEMO_TEST_REDIS, read once by the benchmarks and used here too.
PG_ADMIN_URL = DEFAULT_PG_ADMIN_URL
REDIS_URL = DEFAULT_REDIS_URL


def require(problem: str | None, suite: str) -> None:
    """Go on when `problem` is None; else skip, or fail with CI=true (the suite must run there)."""
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem} (CI=true: the {suite} suite must run)")
    pytest.skip(problem)


def require_postgres() -> None:
    problem = postgres_problem(PG_ADMIN_URL)
    require(
        None if problem is None else f"PostgreSQL at {PG_ADMIN_URL} is unreachable: {problem}", "PostgreSQL"
    )


def require_redis() -> None:
    problem = redis_problem(REDIS_URL)
    require(None if problem is None else f"Redis at {REDIS_URL} is unreachable: {problem}", "Redis")


def create_database(name: str, template: str | None = None) -> str:
    """Create database `name` (a copy of `template` when given); returns its SQLAlchemy URL."""
    copy = "" if template is None else f' TEMPLATE "{template}"'
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return sqlalchemy_url(PG_ADMIN_URL, name)


def drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def delete_prefix(prefix: str) -> int:
    """Delete exactly the Redis keys under `prefix` (never FLUSHDB: the server may be shared)."""
    return delete_redis_prefix(REDIS_URL, prefix)
