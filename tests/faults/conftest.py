"""Fixtures of the API load and fault tests: the shared stores, and the binaries of throwaway ones.

The load smoke runs on the PostgreSQL and Redis of this machine (a scratch database and key
prefix of its own); the fault scenario starts, kills and restarts servers of its own, so it
needs initdb/pg_ctl/postgres and redis-server. Either missing skips, except with CI=true,
where it fails: CI must run these.
"""

from __future__ import annotations

import os

import pytest

from mnemo_sea.eval._api_stack import postgres_problem, redis_problem
from mnemo_sea.eval._throwaway_stores import missing_fault_binaries
from mnemo_sea.eval.load_api import DEFAULT_PG_ADMIN_URL, DEFAULT_REDIS_URL


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the API fault suite must run)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def shared_stores() -> tuple[str, str]:
    """(PostgreSQL admin URL, Redis URL) of the machine's servers, both reachable."""
    for what, url, problem in (
        ("PostgreSQL", DEFAULT_PG_ADMIN_URL, postgres_problem(DEFAULT_PG_ADMIN_URL)),
        ("Redis", DEFAULT_REDIS_URL, redis_problem(DEFAULT_REDIS_URL)),
    ):
        if problem is not None:
            _unavailable(f"{what} at {url} is unreachable: {problem}")
    return DEFAULT_PG_ADMIN_URL, DEFAULT_REDIS_URL


@pytest.fixture(scope="session")
def fault_binaries() -> None:
    missing = missing_fault_binaries()
    if missing:
        _unavailable(
            "the fault scenario starts throwaway servers and needs: "
            + ", ".join(missing)
            + " (install postgresql-15 and redis-server, or set MNEMO_PG_BIN to PostgreSQL's bin folder)"
        )
