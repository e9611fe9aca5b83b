"""The system layer's own typed errors: a cache store that could not be reached, JSON nested too deep.

Apart from the caches (which import the Redis client) so that every error class a surface can
answer lives in a light `errors` module of its layer, where mnemo_sea.system.outcomes finds it
by its code (the REST client rebuilds problem answers that way).
"""

from __future__ import annotations

from mnemo_sea.archive import InvalidInput, StoreUnavailable


class CacheUnavailable(StoreUnavailable):
    """The cache store could not be reached or failed; the operation may not have happened.

    A subclass of the archive's `StoreUnavailable` so that every surface maps it like any
    other unavailable store (503, "retry later") in the one place it maps errors.
    """

    code = "cache_unavailable"


class JsonTooDeep(InvalidInput):
    """User JSON nests arrays and objects deeper than `limit` levels (mnemo_sea.system.json_text);
    nothing was done with it. `field` names where it came from (a file, a line, an option)."""

    code = "json_too_deep"
    limit: int

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(
            where,
            f"JSON nested deeper than {limit} levels of arrays and objects; flatten it",
            limit=limit,
        )

    def _restore(self) -> None:
        super()._restore()
        self.limit = int(self.detail.get("limit", 0))


__all__ = ["CacheUnavailable", "JsonTooDeep"]
