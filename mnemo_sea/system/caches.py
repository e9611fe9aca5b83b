"""The composition root's cache of search results (pointers, never text) per tenant generation.

Search results are keyed by (tenant, generation, query key). Every tenant has a generation
counter; `bump_generation` increments it, and since readers look entries up under the current
generation, every result cached before the bump becomes unreachable at once. A writer passes
the generation it read *before* it searched, so a result computed from pre-change data is filed
under the old generation and can never answer a later reader. Generations only grow:
`purge_tenant` bumps and drops entries (a deletion's cascade), it never resets the counter (a
reset would make old entries reachable again).

Embeddings are not cached here: the index caches document vectors by content hash itself
(retrieval/embedding_cache.py) and discards them when it deletes their points; query vectors
are never kept.

Use (the facade's search, then the outbox drainer's cache_purge row):

    gen, page = cache.lookup_search(tenant, key)    # the generation before searching, and its hit
    if page is None:
        page = run_search(...)
        cache.put_search(tenant, gen, key, page)    # refused if a bump happened meanwhile
    ...
    cache.bump_generation(tenant)                   # or purge_tenant(tenant) for a deletion;
                                                    # mark the row done only after it returned

The guarantee starts when `bump_generation` returns; the facade should apply the purge right
after the deletion commits, before it hands back the receipt.

Values: a search result is a JSON-able dict (str keys; str, int, float, bool, None, lists,
tuples and dicts); both implementations store it as JSON (orjson) and return a fresh copy, so
a caller can never mutate a cached value and both implementations accept exactly the same
values. Read back, a tuple is a list and a non-finite float is None; what orjson encodes
beyond JSON's own types (datetimes, UUIDs, dataclasses, enums) comes back as strings and
dicts, so the facade caches only JSON's own types (its pointers are tuples of them).

Failure semantics (fail closed). Every operation that cannot reach its store raises
`CacheUnavailable`; nothing is ever reported as a miss or as done when it was not. That
matters most for invalidation: when `bump_generation` or `purge_tenant` raises, the caller
leaves the deletion's outbox row pending and retries it later; had the failure been
swallowed, the row would be marked done and Redis, once back, would serve results from
before the deletion. Reads raise too, so the caller decides: falling back to
an uncached search is always safe (fresh data), serving anything from a store it could not
check is not.

Keys are tenant-safe: tenant ids and query keys are encoded into key components that cannot
collide (`a` and `a:1` never share a key or a SCAN pattern). Redis keys carry a configurable
prefix, so deployments and test runs sharing one server never see each other's keys.
Redis must not evict generation keys: run it with `noeviction` or a `volatile-*` policy
(search entries carry a TTL, generation keys do not), never `allkeys-*`.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import quote, urlsplit, urlunsplit

import orjson

from mnemo_sea.archive import InvalidInput
from mnemo_sea.extras import extra_missing
from mnemo_sea.system.errors import CacheUnavailable

if TYPE_CHECKING:
    import redis

T = TypeVar("T")

_PREFIX = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_QUERY_KEY_LIMIT = 4096
_TENANT_LIMIT = 256


@dataclass(frozen=True)
class CacheStats:
    """Hits and misses counted by this cache object (per process for Redis: the counters
    live in the client, not in the server)."""

    search_hits: int = 0
    search_misses: int = 0

    @property
    def hits(self) -> int:
        return self.search_hits

    @property
    def misses(self) -> int:
        return self.search_misses


@runtime_checkable
class Cache(Protocol):
    """What the facade and the outbox drainer need from a cache. See the module docstring."""

    def tenant_generation(self, tenant: str) -> int:
        """The tenant's current generation (0 before its first bump)."""
        ...

    def bump_generation(self, tenant: str) -> int:
        """Atomically increment the tenant's generation and return the new value.

        Every search result cached for the tenant is unreachable once this returns.
        Raises CacheUnavailable when the store cannot be reached (nothing is invalidated).
        """
        ...

    def lookup_search(self, tenant: str, query_key: str) -> tuple[int, dict[str, Any] | None]:
        """The tenant's current generation and the result cached under it, or None (a miss),
        read together (one round trip to Redis). A put of a freshly computed result passes the
        generation returned here. A result of an older generation is never read: there is no
        lookup by generation."""
        ...

    def put_search(self, tenant: str, generation: int, query_key: str, value: Mapping[str, Any]) -> bool:
        """Cache a result computed after reading `generation`.

        Returns False (and stores nothing) when the generation is no longer current: the
        result may predate an invalidation. InvalidInput when `value` is not JSON-able.
        """
        ...

    def purge_tenant(self, tenant: str) -> int:
        """Bump the tenant's generation and drop its cached search results; returns entries removed."""
        ...

    def stats(self) -> CacheStats: ...

    def ping(self) -> None:
        """Raise CacheUnavailable unless the store answers."""
        ...

    def close(self) -> None: ...


# ---- validation and encoding shared by both implementations --------------------------------------


def search_query_key(parts: Mapping[str, Any]) -> str:
    """A stable key for a search request: the sha256 of its canonical JSON.

    `parts` must hold everything that changes the answer besides the tenant: the query, the
    principal's clearance, roles and subject where owner filters apply, every filter,
    `as_of`, the limit. Two principals of one tenant with different clearances must not share
    a key, or one would be served results filtered for the other.
    """
    return hashlib.sha256(_dump_json("parts", parts, canonical=True)).hexdigest()


def _check_tenant(tenant: object) -> str:
    if not isinstance(tenant, str) or not tenant or len(tenant) > _TENANT_LIMIT:
        raise InvalidInput("tenant", f"must be a non-empty string of at most {_TENANT_LIMIT} characters")
    return tenant


def _check_generation(generation: object) -> int:
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise InvalidInput("generation", f"must be a non-negative integer, got {generation!r}")
    return generation


def _check_query_key(query_key: object) -> str:
    if not isinstance(query_key, str) or not query_key or len(query_key) > _QUERY_KEY_LIMIT:
        raise InvalidInput(
            "query_key", f"must be a non-empty string of at most {_QUERY_KEY_LIMIT} characters"
        )
    return query_key


def _check_ttl(name: str, ttl: float | None) -> float | None:
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
        raise InvalidInput(name, f"must be a positive number of seconds or None, got {ttl!r}")
    return ttl


def _dump_json(field: str, value: Mapping[str, Any], *, canonical: bool = False) -> bytes:
    """`value` as compact UTF-8 JSON; `canonical` sorts the keys (a key: `search_query_key`).

    Encoded by orjson: a missed search encodes its answer for the cache, and the standard
    library's encoder took several times as long. orjson writes NaN and the infinities as
    null, where the standard library could refuse them. A key refuses them (None and NaN
    must not name one entry; its parts are few, so the walk is cheap). A cached value is the
    facade's own (a search's pointers, whose scores are finite): a non-finite float reads back
    as None rather than costing every put a walk through the value."""
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"must be a JSON-able dict, got {type(value).__name__}")
    if canonical and _holds_non_finite(value):
        raise InvalidInput(field, "is not JSON-able: NaN and infinities have no JSON form")
    try:
        return orjson.dumps(value, default=_as_array, option=orjson.OPT_SORT_KEYS if canonical else 0)
    except TypeError as e:  # orjson.JSONEncodeError is a TypeError
        raise InvalidInput(field, f"is not JSON-able: {e}") from None


def _holds_non_finite(value: object) -> bool:
    # A search's key is strings and integers: they are let through before the ABC checks below
    # (an isinstance against Mapping costs more than the rest of the walk).
    if type(value) is str or type(value) is int:
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_holds_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_non_finite(v) for v in value)
    return False


def _as_array(value: object) -> tuple[Any, ...]:
    """What orjson does not encode by itself: a tuple subclass (a NamedTuple) is an array."""
    if isinstance(value, tuple):
        return tuple(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _load_json(text: str | bytes) -> dict[str, Any]:
    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


# ---- in-process implementation -------------------------------------------------------------------


@dataclass
class _Entry:
    value: bytes  # the JSON encoding
    expires_at: float | None


class MemoryCache:
    """The embedded-mode cache: one process, thread-safe, a bounded LRU with an optional TTL.

    Past `max_search_entries` the least recently used result goes. Generation counters are kept
    apart from the LRU and never evicted: an evicted counter would restart at 0 and make results
    cached under 0 reachable again.
    """

    def __init__(
        self,
        *,
        max_search_entries: int = 10_000,
        search_ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (
            isinstance(max_search_entries, bool)
            or not isinstance(max_search_entries, int)
            or max_search_entries < 1
        ):
            raise InvalidInput(
                "max_search_entries", f"must be a positive integer, got {max_search_entries!r}"
            )
        self.max_search_entries = max_search_entries
        self.search_ttl = _check_ttl("search_ttl", search_ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        # (tenant, generation, query_key) -> JSON text
        self._search: OrderedDict[tuple[str, int, str], _Entry] = OrderedDict()
        self._counts = [0, 0]  # search hits, search misses

    def _expiry(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    def _live(self, entry: _Entry | None) -> bool:
        return entry is not None and (entry.expires_at is None or self._clock() < entry.expires_at)

    def tenant_generation(self, tenant: str) -> int:
        tenant = _check_tenant(tenant)
        with self._lock:
            return self._generations.get(tenant, 0)

    def bump_generation(self, tenant: str) -> int:
        tenant = _check_tenant(tenant)
        with self._lock:
            return self._bump(tenant)

    def _bump(self, tenant: str) -> int:
        generation = self._generations.get(tenant, 0) + 1
        self._generations[tenant] = generation
        # Entries of older generations are unreachable now; free their slots at once.
        self._drop_search(tenant)
        return generation

    def _drop_search(self, tenant: str) -> int:
        keys = [k for k in self._search if k[0] == tenant]
        for k in keys:
            del self._search[k]
        return len(keys)

    def lookup_search(self, tenant: str, query_key: str) -> tuple[int, dict[str, Any] | None]:
        tenant, query_key = _check_tenant(tenant), _check_query_key(query_key)
        with self._lock:
            generation = self._generations.get(tenant, 0)
            key = (tenant, generation, query_key)
            entry = self._search.get(key)
            if entry is None or not self._live(entry):
                self._search.pop(key, None)
                self._counts[1] += 1
                return generation, None
            self._search.move_to_end(key)
            self._counts[0] += 1
            text = entry.value
        return generation, _load_json(text)

    def put_search(self, tenant: str, generation: int, query_key: str, value: Mapping[str, Any]) -> bool:
        key = (_check_tenant(tenant), _check_generation(generation), _check_query_key(query_key))
        text = _dump_json("value", value)
        with self._lock:
            if generation != self._generations.get(tenant, 0):
                return False
            self._search[key] = _Entry(text, self._expiry(self.search_ttl))
            self._search.move_to_end(key)
            while len(self._search) > self.max_search_entries:
                self._search.popitem(last=False)
            return True

    def purge_tenant(self, tenant: str) -> int:
        tenant = _check_tenant(tenant)
        with self._lock:
            removed = self._drop_search(tenant)
            self._bump(tenant)
            return removed

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(*self._counts)

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None


# ---- Redis implementation ------------------------------------------------------------------------

# Store a search result only while the tenant's generation is still the one the writer read.
# Checked and written in one script, so no bump can slip between the check and the write.
_PUT_IF_CURRENT = """
local current = redis.call('GET', KEYS[1]) or '0'
if current ~= ARGV[1] then
  return 0
end
if ARGV[3] == '' then
  redis.call('SET', KEYS[2], ARGV[2])
else
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
"""


# The tenant's generation and the result cached under it, in one round trip. The entry's key
# is built here from the generation just read; it carries the tenant's hash tag like KEYS[1],
# so both live in one cluster slot.
_LOOKUP = """
local current = redis.call('GET', KEYS[1]) or '0'
return {current, redis.call('GET', ARGV[1] .. current .. ':' .. ARGV[2])}
"""


def _digest(query_key: str) -> str:
    return hashlib.sha256(query_key.encode("utf-8")).hexdigest()


def _component(value: str) -> str:
    # Percent-encoding leaves only letters, digits and _.-~, so an encoded tenant contains no
    # ':' (no two tenants share a key or a SCAN pattern) and no glob or hash-tag characters.
    return quote(value, safe="")


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class RedisCache:
    """The server-mode cache: shared by every API process and outbox drainer through Redis.

    Key layout under `prefix` (tenant hash-tagged, so one tenant's keys share a cluster slot):
      `{prefix}gen:{<tenant>}`                  the generation (INCR; no TTL)
      `{prefix}search:{<tenant>}:<gen>:<sha>`   a result as JSON (TTL `search_ttl`)

    Results of old generations are never read again and expire with their TTL, which is why
    `search_ttl` defaults to an hour rather than forever. Connection problems are retried
    `retries` times with a short backoff, then raise CacheUnavailable naming the server
    (password redacted) and the operation.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "mnemo-sea:",
        search_ttl: float | None = 3600.0,
        timeout: float = 2.0,
        retries: int = 2,
        client: redis.Redis | None = None,
    ) -> None:
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise InvalidInput("prefix", f"{prefix!r} must be 1-64 characters of letters, digits and . _ : -")
        self.prefix = prefix
        self.search_ttl = _check_ttl("search_ttl", search_ttl)
        self.url = _redacted(url)
        # redis is imported by the cache that uses it: a process without a Redis cache (every
        # embedded one) never needs it, the `embedded` extra does not install it, and the import
        # costs a tenth of the command line's start-up.
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ModuleNotFoundError as e:
            raise (extra_missing(e, "a Redis cache") or e) from e

        if client is None:
            try:
                client = redis.Redis.from_url(
                    url,
                    socket_connect_timeout=timeout,
                    socket_timeout=timeout,
                    retry=Retry(ExponentialBackoff(cap=0.25, base=0.05), retries),
                )
            except ValueError as e:
                raise InvalidInput("url", f"{self.url!r} is not a Redis URL: {e}") from None
        self._client = client
        # The errors `_run` maps, held here so the module that defines them is imported once.
        self._unreachable = (redis.ConnectionError, redis.TimeoutError)
        self._failed = redis.RedisError
        self._put_if_current = client.register_script(_PUT_IF_CURRENT)
        self._lookup = client.register_script(_LOOKUP)
        self._lock = threading.Lock()
        self._counts = [0, 0]  # search hits, search misses

    # keys
    def _gen_key(self, tenant: str) -> str:
        return f"{self.prefix}gen:{{{_component(tenant)}}}"

    def _search_key(self, tenant: str, generation: int, query_key: str) -> str:
        return f"{self._search_key_head(tenant)}{generation}:{_digest(query_key)}"

    def _search_key_head(self, tenant: str) -> str:
        return f"{self.prefix}search:{{{_component(tenant)}}}:"

    def _search_pattern(self, tenant: str) -> str:
        return f"{self.prefix}search:{{{_component(tenant)}}}:*"

    def _run(self, operation: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except self._unreachable as e:
            raise CacheUnavailable(
                f"Redis cache at {self.url} is unreachable ({operation} failed: {e}); nothing was "
                "read or invalidated, retry when Redis is back",
                backend="redis",
                url=self.url,
                operation=operation,
            ) from e
        except self._failed as e:
            raise CacheUnavailable(
                f"Redis cache at {self.url} failed during {operation}: {e}; treat the operation as not done",
                backend="redis",
                url=self.url,
                operation=operation,
            ) from e

    def _count(self, slot: int) -> None:
        with self._lock:
            self._counts[slot] += 1

    def tenant_generation(self, tenant: str) -> int:
        key = self._gen_key(_check_tenant(tenant))
        raw = self._run("tenant_generation", lambda: self._client.get(key))
        return 0 if raw is None else int(raw)

    def bump_generation(self, tenant: str) -> int:
        key = self._gen_key(_check_tenant(tenant))
        return int(self._run("bump_generation", lambda: self._client.incr(key)))

    def lookup_search(self, tenant: str, query_key: str) -> tuple[int, dict[str, Any] | None]:
        tenant = _check_tenant(tenant)
        args = [self._search_key_head(tenant), _digest(_check_query_key(query_key))]
        current, raw = self._run(
            "lookup_search", lambda: self._lookup(keys=[self._gen_key(tenant)], args=args)
        )
        if raw is None:
            self._count(1)
            return int(current), None
        self._count(0)
        return int(current), _load_json(raw)

    def put_search(self, tenant: str, generation: int, query_key: str, value: Mapping[str, Any]) -> bool:
        tenant = _check_tenant(tenant)
        key = self._search_key(tenant, _check_generation(generation), _check_query_key(query_key))
        text = _dump_json("value", value)
        ttl_ms = "" if self.search_ttl is None else str(max(1, round(self.search_ttl * 1000)))
        stored = self._run(
            "put_search",
            lambda: self._put_if_current(
                keys=[self._gen_key(tenant), key], args=[str(generation), text, ttl_ms]
            ),
        )
        return bool(stored)

    def purge_tenant(self, tenant: str) -> int:
        tenant = _check_tenant(tenant)

        def purge() -> int:
            # Bump first: from here on nothing cached for the tenant is reachable, even if the
            # sweep below is interrupted (then it only leaves garbage that expires).
            self._client.incr(self._gen_key(tenant))
            removed = 0
            batch: list[bytes | str] = []  # keys as the client returns them
            for k in self._client.scan_iter(match=self._search_pattern(tenant), count=500):
                batch.append(k)
                if len(batch) >= 500:
                    removed += int(self._client.delete(*batch))
                    batch = []
            if batch:
                removed += int(self._client.delete(*batch))
            return removed

        return self._run("purge_tenant", purge)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(*self._counts)

    def ping(self) -> None:
        self._run("ping", self._client.ping)

    def close(self) -> None:
        self._client.close()
