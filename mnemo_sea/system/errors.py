"""The system layer's own typed errors: a cache store that could not be reached, JSON nested too
deep, and a service that will not take a tenant's request now.

Apart from the caches (which import the Redis client) so that every error class a surface can
answer lives in a light `errors` module of its layer, which the REST client imports cheaply:
mnemo_sea.system.outcomes finds a problem answer's class by its code among the loaded error
classes, and the client rebuilds the answer as that class.
"""

from __future__ import annotations

from mnemo_sea.archive import StoreUnavailable

# Defined in the archive, whose field caps (limits.JsonCap) raise it too; named here as before.
from mnemo_sea.archive.rules.errors import JsonTooDeep
from mnemo_sea.errors import Category


class CacheUnavailable(StoreUnavailable):
    """The cache store could not be reached or failed; the operation may not have happened.

    A subclass of the archive's `StoreUnavailable`, whose category it keeps, so that every
    surface answers it like any other unavailable store (503, "retry later").
    """

    code = "cache_unavailable"


class TooManyRequests(StoreUnavailable):
    """The caller's tenant already has as many requests running and waiting as the service
    holds for one tenant (MNEMO_API_TENANT_THREADS running, MNEMO_API_TENANT_QUEUE waiting);
    this one was refused before any work: nothing was read or changed. Send it again after
    `retry_after` seconds (REST: 429 with Retry-After).

    A StoreUnavailable, so code that retries an unavailable store later retries this too; its
    own category (busy) answers it 429 rather than 503: the service is up, this tenant is over
    its share.
    """

    code = "too_many_requests"
    category = Category.BUSY
    retry_after: int

    def __init__(self, *, retry_after: int, running: int, waiting: int) -> None:
        super().__init__(
            f"this tenant already has {running} requests running and {waiting} waiting, the most "
            f"this service holds for one tenant; nothing was done: send it again in {retry_after} s",
            retry_after=retry_after,
            running=running,
            waiting=waiting,
        )

    def _restore(self) -> None:
        self.retry_after = int(self.detail.get("retry_after", 1))


__all__ = ["CacheUnavailable", "JsonTooDeep", "TooManyRequests"]
