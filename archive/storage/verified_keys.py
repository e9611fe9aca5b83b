"""A short-lived cache of verified API keys, so a busy API process does not read the key
table on every request.

What it promises, and why it is safe:

- An entry is the answer the database gave when the key was last checked there: the key id,
  the SHA-256 of its secret and the principal its row maps to. A presented key is served from
  the cache only if its id is cached and the SHA-256 of its secret matches the cached one
  (compared in constant time), so the cache never answers differently from the table it read,
  and a tenant, subject or role comes from the key's own row, never from another key's.
- An entry lives at most `ttl_s` seconds after that check (a monotonic clock). A key revoked
  elsewhere (the `mnemo-sea keys revoke` command, another API process) is refused at the latest
  `ttl_s` seconds after the revocation committed. A key revoked in this process
  (`api_keys.revoke_key`) is dropped from every cache of the process at once.
- Only successes are cached: an unknown, wrong or revoked key is looked up every time, so a
  failure never outlives the row that caused it, and no one can fill the cache without a key.
- At most `max_entries` keys are kept (the least recently used one goes first).
"""

from __future__ import annotations

import hmac
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ..rules.principal import Principal

DEFAULT_TTL_S = 5.0
DEFAULT_MAX_ENTRIES = 10_000

# Every live cache of this process, so a revocation made here reaches all of them at once.
_live_caches: weakref.WeakSet[VerifiedKeys] = weakref.WeakSet()
_live_lock = threading.Lock()


@dataclass(frozen=True)
class Check:
    """When a database check began: the clock, and how many revocations this cache had seen."""

    at: float
    revocations: int


@dataclass(frozen=True)
class _Entry:
    secret_sha256: str
    principal: Principal
    expires_at: float


class VerifiedKeys:
    """Keys verified against the database in the last `ttl_s` seconds (0: no caching)."""

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not ttl_s >= 0:  # also refuses NaN
            raise ValueError(f"ttl_s must be a number of seconds >= 0, got {ttl_s!r}")
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries!r}")
        self.ttl_s = float(ttl_s)
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._revocations = 0
        with _live_lock:
            _live_caches.add(self)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key_id: str, secret_sha256: str) -> Principal | None:
        """The principal of a key verified less than `ttl_s` ago whose secret hashes the same;
        None means: ask the database."""
        with self._lock:
            entry = self._entries.get(key_id)
            if entry is None:
                return None
            if self._clock() >= entry.expires_at:
                del self._entries[key_id]
                return None
            self._entries.move_to_end(key_id)
        if not hmac.compare_digest(entry.secret_sha256, secret_sha256):
            return None
        return entry.principal

    def begin(self) -> Check:
        """Taken before the database is read: the entry's life counts from the read, not from
        its end, and a revocation made here while the read ran keeps its answer out."""
        with self._lock:
            return Check(self._clock(), self._revocations)

    def put(self, key_id: str, secret_sha256: str, principal: Principal, check: Check) -> None:
        """Remember a key the database accepted in the read that began at `check`."""
        if self.ttl_s == 0:
            return
        with self._lock:
            if self._revocations != check.revocations:
                # A key was revoked in this process since the read began: that read may have
                # seen the row before the revocation, so its answer is not kept.
                return
            self._entries[key_id] = _Entry(secret_sha256, principal, check.at + self.ttl_s)
            self._entries.move_to_end(key_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, key_id: str) -> None:
        with self._lock:
            self._revocations += 1
            self._entries.pop(key_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def forget_everywhere(key_id: str) -> None:
    """Drop a key from every cache of this process (it was just revoked here)."""
    with _live_lock:
        caches = list(_live_caches)
    for cache in caches:
        cache.forget(key_id)
