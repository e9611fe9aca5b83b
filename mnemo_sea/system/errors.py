"""The system layer's own typed error: a cache store that could not be reached.

Apart from the caches (which import the Redis client) so that every error class a surface can
answer lives in a light `errors` module of its layer, where mnemo_sea.system.outcomes finds it
by its code (the REST client rebuilds problem answers that way).
"""

from __future__ import annotations

from mnemo_sea.archive import StoreUnavailable


class CacheUnavailable(StoreUnavailable):
    """The cache store could not be reached or failed; the operation may not have happened.

    A subclass of the archive's `StoreUnavailable` so that every surface maps it like any
    other unavailable store (503, "retry later") in the one place it maps errors.
    """

    code = "cache_unavailable"


__all__ = ["CacheUnavailable"]
