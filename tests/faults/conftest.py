"""Fixtures of the API load and fault tests: the shared stores, and the binaries of throwaway ones.

The load smoke runs on the PostgreSQL and Redis of this machine (a scratch database and key
prefix of its own); the fault scenario starts, kills and restarts servers of its own, so it
needs initdb/pg_ctl/postgres and redis-server. Either missing skips, except with CI=true,
where it fails: CI must run these (see tests/stores.py).
"""

from __future__ import annotations

import pytest
from stores import PG_ADMIN_URL, REDIS_URL, require, require_postgres, require_redis

from mnemo_sea.eval.throwaway_stores import missing_fault_binaries


@pytest.fixture(scope="session")
def shared_stores() -> tuple[str, str]:
    """(PostgreSQL admin URL, Redis URL) of the machine's servers, both reachable."""
    require_postgres()
    require_redis()
    return PG_ADMIN_URL, REDIS_URL


@pytest.fixture(scope="session")
def fault_binaries() -> None:
    missing = missing_fault_binaries()
    problem = None
    if missing:
        problem = (
            f"the fault scenario starts throwaway servers and needs: {', '.join(missing)} (install "
            "postgresql-15 and redis-server, or set MNEMO_PG_BIN to PostgreSQL's bin folder)"
        )
    require(problem, "API fault")
