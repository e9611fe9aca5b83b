"""The caches of the deletion cascade, on both backends through one suite.

What a user relies on: a bumped generation makes every cached result of the tenant
unreachable at once and for good; a result computed before a bump is never served after it;
tenants and key prefixes never see each other's entries; and an unreachable Redis raises
instead of looking like a miss.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import redis
from fakes import ManualClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo_sea.archive import InvalidInput, StoreUnavailable
from mnemo_sea.extras import ExtraMissing
from mnemo_sea.system.caches import (
    Cache,
    CacheStats,
    CacheUnavailable,
    MemoryCache,
    RedisCache,
    search_query_key,
)

CacheFactory = Callable[..., Cache]


def cached(cache: Cache, tenant: str, query_key: str) -> dict[str, Any] | None:
    """What a reader gets: the result under the tenant's current generation, as the facade
    reads it (`lookup_search`, the generation and its result in one round trip)."""
    return cache.lookup_search(tenant, query_key)[1]


PAGE = {"status": "results", "hits": [{"evidence_id": "policy:delivery:2026-10", "version": 2, "rank": 1}]}


# ---- generations and search results --------------------------------------------------------------


def test_generation_starts_at_zero_and_bumps_per_tenant(cache: Cache) -> None:
    assert cache.tenant_generation("clinic-a") == 0
    assert cache.bump_generation("clinic-a") == 1
    assert cache.bump_generation("clinic-a") == 2
    assert cache.tenant_generation("clinic-a") == 2
    # Another tenant, including one whose id extends the first with the key separator.
    assert cache.tenant_generation("clinic-a:1") == 0
    assert cache.tenant_generation("shop-b") == 0


def test_bump_makes_every_cached_result_of_the_tenant_unreachable(cache: Cache) -> None:
    gen = cache.tenant_generation("clinic-a")
    assert cache.put_search("clinic-a", gen, "q1", PAGE)
    assert cache.put_search("clinic-a", gen, "q2", {"status": "no_match", "hits": []})
    assert cache.put_search("shop-b", 0, "q1", {"status": "results", "hits": ["other"]})
    assert cached(cache, "clinic-a", "q1") == PAGE

    new = cache.bump_generation("clinic-a")
    assert cache.lookup_search("clinic-a", "q1") == (new, None)
    assert cached(cache, "clinic-a", "q2") is None
    # The other tenant's results are untouched.
    assert cached(cache, "shop-b", "q1") == {"status": "results", "hits": ["other"]}


def test_result_computed_before_a_bump_is_never_stored_or_served_after_it(cache: Cache) -> None:
    before = cache.tenant_generation("clinic-a")  # a search reads the generation, then runs ...
    after = cache.bump_generation("clinic-a")  # ... a deletion commits meanwhile ...
    assert cache.put_search("clinic-a", before, "q", {"stale": True}) is False  # ... its put is refused
    assert cache.lookup_search("clinic-a", "q") == (after, None)  # nothing under either generation
    assert cache.put_search("clinic-a", after, "q", {"stale": False}) is True
    assert cached(cache, "clinic-a", "q") == {"stale": False}


def test_a_lookup_reads_the_generation_and_its_result_together(cache: Cache) -> None:
    assert cache.lookup_search("clinic-a", "q") == (0, None)
    assert cache.put_search("clinic-a", 0, "q", PAGE)
    assert cache.put_search("shop-b", 0, "q", {"status": "results", "hits": ["other"]})
    assert cache.lookup_search("clinic-a", "q") == (0, PAGE)
    assert cache.lookup_search("clinic-a", "another q") == (0, None)
    new = cache.bump_generation("clinic-a")
    assert cache.lookup_search("clinic-a", "q") == (new, None)  # the old entry is unreachable
    assert cache.put_search("clinic-a", new, "q", {"fresh": True})
    assert cache.lookup_search("clinic-a", "q") == (new, {"fresh": True})
    # Another tenant, including one whose id extends the first with the key separator.
    assert cache.lookup_search("shop-b", "q") == (0, {"status": "results", "hits": ["other"]})
    assert cache.lookup_search("clinic-a:1", "q") == (0, None)
    cache.purge_tenant("clinic-a")
    assert cache.lookup_search("clinic-a", "q") == (new + 1, None)
    assert cache.stats() == CacheStats(search_hits=3, search_misses=5)


def test_values_round_trip_as_fresh_copies(cache: Cache) -> None:
    value: dict[str, Any] = {
        "statement": "超过约定配送期后可申请物流调查",
        "nested": {"ranks": [1, 2.5, None, True]},
        "empty": "",
    }
    assert cache.put_search("clinic-a", 0, "q", value)
    got = cached(cache, "clinic-a", "q")
    assert got == value
    assert got is not None
    got["nested"]["ranks"].append(99)
    value["empty"] = "changed by the caller"
    assert cached(cache, "clinic-a", "q") == {
        "statement": "超过约定配送期后可申请物流调查",
        "nested": {"ranks": [1, 2.5, None, True]},
        "empty": "",
    }


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"x": object()}, "not JSON-able"),
        ({"x": {1: "an int key"}}, "not JSON-able"),
        ({"x": 2**64}, "not JSON-able"),
        (["not", "a", "dict"], "JSON-able dict"),
    ],
)
def test_non_json_values_are_refused(cache: Cache, value: Any, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem):
        cache.put_search("clinic-a", 0, "q", value)
    assert cached(cache, "clinic-a", "q") is None


def test_tuples_read_back_as_arrays_and_non_finite_floats_as_none(cache: Cache) -> None:
    """The encoding's two liberties (caches._dump_json): a NamedTuple, such as the facade's
    cached Pointer, is an array; NaN and the infinities are null (orjson), never refused."""

    class Pair(NamedTuple):
        a: int
        b: float

    value = {"pairs": [Pair(1, 0.5), (2, float("nan"))], "inf": float("inf")}
    assert cache.put_search("clinic-a", 0, "q", value) is True
    assert cached(cache, "clinic-a", "q") == {"pairs": [[1, 0.5], [2, None]], "inf": None}


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.tenant_generation(""), "tenant"),
        (lambda c: c.put_search("clinic-a", -1, "q", PAGE), "generation"),
        (lambda c: c.put_search("clinic-a", True, "q", PAGE), "generation"),
        (lambda c: c.lookup_search("clinic-a", ""), "query_key"),
        (lambda c: c.put_search("clinic-a", 0, "", PAGE), "query_key"),
    ],
)
def test_bad_arguments_raise_invalid_input_naming_the_field(cache: Cache, call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        call(cache)
    assert e.value.field == field


def test_tenants_with_separator_characters_never_share_entries(cache: Cache) -> None:
    # Percent-encoding keeps "a" and "a:1" (and glob characters) apart in keys and SCAN patterns.
    assert cache.put_search("a", 0, "q", {"tenant": "a"})
    assert cache.put_search("a:1", 0, "q", {"tenant": "a:1"})
    assert cache.put_search("a*", 0, "q", {"tenant": "a*"})
    assert cache.purge_tenant("a") == 1
    assert cached(cache, "a:1", "q") == {"tenant": "a:1"}
    assert cached(cache, "a*", "q") == {"tenant": "a*"}
    assert cache.purge_tenant("a*") == 1
    assert cached(cache, "a:1", "q") == {"tenant": "a:1"}


def test_purge_tenant_drops_results_and_never_resets_the_generation(cache: Cache) -> None:
    cache.bump_generation("clinic-a")
    gen = cache.bump_generation("clinic-a")
    assert cache.put_search("clinic-a", gen, "q1", PAGE)
    assert cache.put_search("clinic-a", gen, "q2", PAGE)
    assert cache.put_search("shop-b", 0, "q1", PAGE)

    assert cache.purge_tenant("clinic-a") == 2
    after = cache.tenant_generation("clinic-a")
    assert after == gen + 1  # bumped, not reset: results cached under 0..gen stay unreachable
    assert cache.lookup_search("clinic-a", "q1") == (after, None)
    assert cached(cache, "shop-b", "q1") == PAGE
    assert cache.purge_tenant("clinic-a") == 0


# ---- stats, TTL ---------------------------------------------------------------------------------


def test_stats_count_hits_and_misses(cache: Cache) -> None:
    assert cache.stats() == CacheStats()
    cached(cache, "clinic-a", "q")
    cache.put_search("clinic-a", 0, "q", PAGE)
    cached(cache, "clinic-a", "q")
    cached(cache, "clinic-a", "q")
    stats = cache.stats()
    assert stats == CacheStats(search_hits=2, search_misses=1)
    assert (stats.hits, stats.misses) == (2, 1)


def test_memory_entries_expire_after_their_ttl() -> None:
    clock = ManualClock()  # the cache's clock: only the test moves it
    cache = MemoryCache(search_ttl=0.2, clock=clock)
    cache.put_search("clinic-a", 0, "q", PAGE)
    clock.now += 0.19
    assert cached(cache, "clinic-a", "q") == PAGE
    clock.now += 0.01
    assert cached(cache, "clinic-a", "q") is None
    assert cache.tenant_generation("clinic-a") == 0  # generations never expire


def test_a_redis_result_whose_ttl_ran_out_is_a_miss_and_its_generation_stays(
    redis_url: str, redis_prefix: str
) -> None:
    """Redis expires keys on its own clock: its TTL is set on every result (the test below
    reads it), and here the key's expiry is moved into the past, which Redis applies at once."""
    cache = RedisCache(redis_url, prefix=redis_prefix, search_ttl=120)
    client = redis.Redis.from_url(redis_url)
    try:
        cache.put_search("clinic-a", 0, "q", PAGE)
        assert cached(cache, "clinic-a", "q") == PAGE
        (key,) = [k for k in client.scan_iter(match=redis_prefix + "search:*")]
        assert client.pexpireat(key, 1)  # 1970: expired
        assert cached(cache, "clinic-a", "q") is None
        assert cache.tenant_generation("clinic-a") == 0  # generations never expire
    finally:
        cache.close()
        client.close()


def test_memory_cache_is_a_bounded_lru_that_never_evicts_generations() -> None:
    cache = MemoryCache(max_search_entries=2)
    for tenant in ("t1", "t2", "t3"):
        cache.bump_generation(tenant)
    cache.put_search("t1", 1, "q1", {"n": 1})
    cache.put_search("t1", 1, "q2", {"n": 2})
    assert cached(cache, "t1", "q1") == {"n": 1}  # q1 is now the most recently used
    cache.put_search("t1", 1, "q3", {"n": 3})
    assert cached(cache, "t1", "q2") is None
    assert cached(cache, "t1", "q1") == {"n": 1}
    assert cached(cache, "t1", "q3") == {"n": 3}
    assert [cache.tenant_generation(t) for t in ("t1", "t2", "t3")] == [1, 1, 1]


def test_memory_cache_ttl_follows_its_clock() -> None:
    now = [1000.0]
    cache = MemoryCache(search_ttl=60, clock=lambda: now[0])
    cache.put_search("clinic-a", 0, "q", PAGE)
    now[0] += 59.9
    assert cached(cache, "clinic-a", "q") == PAGE
    now[0] += 0.2
    assert cached(cache, "clinic-a", "q") is None


@pytest.mark.parametrize("bad", [0, -1, True, "60"])
def test_ttl_and_bounds_must_be_positive(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        MemoryCache(search_ttl=bad)
    with pytest.raises(InvalidInput):
        MemoryCache(max_search_entries=bad)


# ---- concurrency and a model-based property ------------------------------------------------------


def test_concurrent_bumps_are_atomic_and_readers_never_see_an_older_generation(
    make_cache: CacheFactory,
) -> None:
    cache = make_cache()
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    bumpers, bumps_each = 4, 40
    returned: list[int] = []
    problems: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(bumpers + 3)

    def bump() -> None:
        start.wait()
        got = [cache.bump_generation(tenant) for _ in range(bumps_each)]
        with lock:
            returned.extend(got)

    def read() -> None:
        start.wait()
        last = 0
        while not stop.is_set():
            seen = cache.tenant_generation(tenant)
            if seen < last:
                problems.append(f"generation went back from {last} to {seen}")
            last = seen
            cache.put_search(tenant, seen, "q", {"generation": seen})
            current, hit = cache.lookup_search(tenant, "q")
            if hit is not None and hit["generation"] != current:
                problems.append(f"generation {current} served a result computed at {hit['generation']}")

    threads = [threading.Thread(target=bump) for _ in range(bumpers)]
    threads += [threading.Thread(target=read) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads[:bumpers]:
        th.join(timeout=120)  # bounds a hang only
    stop.set()
    for th in threads[bumpers:]:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a cache call hung"

    assert problems == []
    total = bumpers * bumps_each
    assert sorted(returned) == list(range(1, total + 1))  # every INCR returned a distinct value
    assert cache.tenant_generation(tenant) == total


_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["t1", "t2"]), st.sampled_from(["q1", "q2"]), st.booleans()),
    st.tuples(st.just("get"), st.sampled_from(["t1", "t2"]), st.sampled_from(["q1", "q2"]), st.just(False)),
    st.tuples(st.just("bump"), st.sampled_from(["t1", "t2"]), st.just(""), st.just(False)),
    st.tuples(st.just("purge"), st.sampled_from(["t1", "t2"]), st.just(""), st.just(False)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, max_size=25))
def test_only_results_of_the_current_generation_are_ever_served(
    make_cache: CacheFactory, ops: list[tuple[str, str, str, bool]]
) -> None:
    cache = make_cache()
    run = uuid.uuid4().hex[:8]  # fresh tenants per example: the Redis prefix outlives one example
    generation = {"t1": 0, "t2": 0}
    stored: dict[tuple[str, int, str], int] = {}
    for n, (op, t, q, stale) in enumerate(ops):
        tenant = f"{t}-{run}"
        if op == "put":
            gen = generation[t] - 1 if stale else generation[t]
            if gen < 0:
                continue
            ok = cache.put_search(tenant, gen, q, {"n": n})
            assert ok is (not stale)
            if ok:
                stored[(t, gen, q)] = n
        elif op == "get":
            current, hit = cache.lookup_search(tenant, q)
            assert current == generation[t]
            expected = stored.get((t, generation[t], q))
            assert hit == (None if expected is None else {"n": expected})
        elif op == "bump":
            generation[t] += 1
            assert cache.bump_generation(tenant) == generation[t]
        else:
            cache.purge_tenant(tenant)
            generation[t] += 1
        assert cache.tenant_generation(tenant) == generation[t]


def test_search_query_key_is_canonical_and_separates_principals() -> None:
    a = search_query_key(
        {"q": "物流调查", "clearance": 1, "filters": {"scope": "domestic", "kind": "knowledge"}}
    )
    b = search_query_key(
        {"filters": {"kind": "knowledge", "scope": "domestic"}, "clearance": 1, "q": "物流调查"}
    )
    c = search_query_key(
        {"q": "物流调查", "clearance": 2, "filters": {"scope": "domestic", "kind": "knowledge"}}
    )
    assert a == b
    assert a != c
    with pytest.raises(InvalidInput):
        search_query_key({"as_of": object()})
    # orjson would write NaN as null: a key refuses it, so None and NaN never name one entry.
    assert search_query_key({"x": None}) != search_query_key({"x": [None]})
    for non_finite in (float("nan"), float("inf")):
        with pytest.raises(InvalidInput, match="NaN and infinities"):
            search_query_key({"x": [1, {"y": non_finite}]})
        with pytest.raises(InvalidInput, match="NaN and infinities"):  # beside the strings of a search key
            search_query_key({"query": "text", "roles": ["agent"], "clearance": 2, "x": ("a", non_finite)})


# ---- Redis specifics ------------------------------------------------------------------------------


def test_redis_caches_sharing_a_prefix_share_state_and_other_prefixes_see_nothing(
    redis_url: str, redis_prefix: str
) -> None:
    api_1 = RedisCache(redis_url, prefix=redis_prefix)
    api_2 = RedisCache(redis_url, prefix=redis_prefix)  # another API process
    stranger = RedisCache(redis_url, prefix=redis_prefix + "other:")
    try:
        gen = api_1.tenant_generation("clinic-a")
        assert api_1.put_search("clinic-a", gen, "q", PAGE)
        assert cached(api_2, "clinic-a", "q") == PAGE
        assert cached(stranger, "clinic-a", "q") is None

        new = api_2.bump_generation("clinic-a")  # the drainer in another process bumps ...
        assert api_1.tenant_generation("clinic-a") == new  # ... and every process sees it at once
        assert api_1.lookup_search("clinic-a", "q") == (new, None)
        assert stranger.tenant_generation("clinic-a") == 0
    finally:
        for c in (api_1, api_2, stranger):
            c.close()


def test_redis_keys_live_under_the_prefix_with_ttls_only_on_results(
    redis_url: str, redis_prefix: str
) -> None:
    cache = RedisCache(redis_url, prefix=redis_prefix, search_ttl=120)
    client = redis.Redis.from_url(redis_url)
    try:
        gen = cache.bump_generation("clinic-a")
        cache.put_search("clinic-a", gen, "q", PAGE)
        keys = sorted(k.decode() for k in client.scan_iter(match=redis_prefix + "*"))
        assert len(keys) == 2
        assert all(k.startswith(redis_prefix) for k in keys)
        ttls = {k.removeprefix(redis_prefix).split(":", 1)[0]: client.pttl(k) for k in keys}
        assert ttls["gen"] == -1  # a generation must never expire
        assert 0 < ttls["search"] <= 120_000
    finally:
        cache.close()
        client.close()


def test_redis_refuses_a_bad_prefix() -> None:
    with pytest.raises(InvalidInput, match="prefix"):
        RedisCache(prefix="tests:*")


def test_a_redis_cache_without_redis_installed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """redis is imported when a Redis cache is opened (the `embedded` extra does not install it):
    its absence is the typed error every surface maps, naming the extra to install."""
    monkeypatch.setitem(sys.modules, "redis", None)  # as if not installed
    with pytest.raises(ExtraMissing, match=r"a Redis cache needs the 'server' extra") as caught:
        RedisCache()
    assert (caught.value.extra, caught.value.module) == ("server", "redis")


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.tenant_generation("clinic-a"),
        lambda c: c.bump_generation("clinic-a"),
        lambda c: c.lookup_search("clinic-a", "q"),
        lambda c: c.put_search("clinic-a", 0, "q", PAGE),
        lambda c: c.purge_tenant("clinic-a"),
        lambda c: c.ping(),
    ],
)
def test_unreachable_redis_raises_cache_unavailable_never_a_miss(call: Any) -> None:
    cache = RedisCache("redis://mnemo:s3cret@127.0.0.1:1/0", prefix="unreachable:", timeout=0.5, retries=1)
    started = time.monotonic()
    try:
        with pytest.raises(CacheUnavailable) as e:
            call(cache)
    finally:
        cache.close()
    # Bounds a hang, not a speed: refused at once, the call fails in well under a second.
    assert time.monotonic() - started < 60
    err = e.value
    assert isinstance(err, StoreUnavailable)  # mapped like any unavailable store (503)
    assert err.code == "cache_unavailable"
    assert "127.0.0.1:1" in err.message
    assert "unreachable" in err.message
    assert "s3cret" not in err.message and "s3cret" not in str(err.to_dict())
    assert err.detail["operation"] in err.message
    assert cache.stats() == CacheStats()  # a failure is not counted as a miss


def test_the_cached_pointer_layout_is_the_one_its_format_names() -> None:
    """A cached search answer holds each hit as a JSON array of Pointer's fields in order, and
    POINTER_FORMAT is part of every search's cache key: changing the fields without a new
    format would read old entries with the fields shifted. Change both together."""
    from mnemo_sea.system.mnemo import POINTER_FORMAT, Pointer

    assert (POINTER_FORMAT, Pointer._fields) == (
        4,
        (
            "evidence_id",
            "version",
            "kind",
            "source",
            "scope",
            "start",
            "end",
            "content_sha256",
            "score",
            "bm25_rank",
            "dense_rank",
            "bm25_score",
            "dense_score",
            "relevance",
        ),
    )
