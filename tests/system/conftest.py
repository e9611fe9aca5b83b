"""Fixtures of the composition-root tests: caches on both backends, archives with principals.

Redis tests run against the server of this machine (MNEMO_TEST_REDIS, default
127.0.0.1:6379) under a key prefix unique to the test, and delete exactly the keys under that
prefix afterwards (never FLUSHDB/FLUSHALL: the server may be shared). When Redis is
unreachable they skip with a message, except with CI=true, where they fail: CI must
exercise Redis.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import HashingEmbedder
from stores import REDIS_URL, delete_prefix, require_redis

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.system.caches import Cache, MemoryCache, RedisCache
from mnemo_sea.system.mnemo import Mnemo


@pytest.fixture
def redis_url() -> str:
    """The test server's URL; skips (fails with CI=true) when it is unreachable."""
    require_redis()
    return REDIS_URL


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix no other test uses; every key under it is deleted afterwards."""
    require_redis()
    prefix = f"mnemo-test:{uuid.uuid4().hex[:12]}:"
    try:
        yield prefix
    finally:
        delete_prefix(prefix)


CacheFactory = Callable[..., Cache]


@pytest.fixture(params=["memory", "redis"])
def make_cache(request: pytest.FixtureRequest) -> Iterator[CacheFactory]:
    """Builds caches of one backend (keyword arguments go to the constructor); closes them after."""
    made: list[Cache] = []
    prefix = request.getfixturevalue("redis_prefix") if request.param == "redis" else ""

    def make(**kw: Any) -> Cache:
        cache: Cache = (
            MemoryCache(**kw) if request.param == "memory" else RedisCache(REDIS_URL, prefix=prefix, **kw)
        )
        made.append(cache)
        return cache

    try:
        yield make
    finally:
        for cache in made:
            cache.close()


@pytest.fixture
def cache(make_cache: CacheFactory) -> Cache:
    return make_cache()


# ---- archives and principals --------------------------------------------------------------------


@pytest.fixture
def agent() -> Principal:
    return Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


@pytest.fixture
def admin() -> Principal:
    return Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


@pytest.fixture
def other_tenant() -> Principal:
    return Principal("shop-b", "admin-9", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


@pytest.fixture
def mnemo(tmp_path: Path) -> Iterator[Mnemo]:
    """The embedded system in a fresh folder, with the deterministic hashing embedder."""
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    try:
        yield m
    finally:
        m.close()
