"""What a search asks for, and on whose behalf.

AccessScope is built by the composition root from an authenticated principal: the tenant is
never taken from the request. SearchQuery is what the caller asks: text, mode, narrowing
filters and a point in time. Both validate on construction and raise InvalidQuery naming the
offending field, so a malformed request never reaches the engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from . import fields
from .errors import InvalidQuery
from .fusion import FusionSettings

MAX_QUERY_CHARS = 16_384
MAX_LIMIT = 1_000
MAX_FILTER_VALUES = 256


class SearchMode(StrEnum):
    HYBRID = "hybrid"  # both legs, fused by weighted RRF
    BM25 = "bm25"  # the lexical leg alone (ablation, exact-term lookups)
    DENSE = "dense"  # the dense leg alone (ablation)


@dataclass(frozen=True)
class AccessScope:
    """Whose data a search may touch.

    `clearance`: the highest sensitivity ordinal the caller may read.
    `owners`: None means the caller may read every owner's memory in the tenant (agents,
    admins); otherwise only evidence without an owner and evidence owned by one of these
    (a user reads its own memory, not another user's).
    """

    tenant_id: str
    clearance: int = 0
    owners: frozenset[str] | None = None

    def __post_init__(self) -> None:
        fields.identifier("tenant_id", self.tenant_id, for_query=True)
        if isinstance(self.clearance, bool) or not isinstance(self.clearance, int) or self.clearance < 0:
            raise InvalidQuery("clearance", f"{self.clearance!r} is not a non-negative integer")
        object.__setattr__(self, "clearance", int(self.clearance))
        if self.owners is not None:
            object.__setattr__(self, "owners", _values("owners", self.owners, fields.identifier))


@dataclass(frozen=True)
class SearchQuery:
    """One search request.

    `kinds`, `scopes`, `sources`, `owners`: None means any; a set narrows to those values (an
    empty set is an error, not "nothing"). `as_of`: None searches what is active now; a moment
    searches the versions valid then (active or since superseded, never retracted or deleted).
    `one_hit_per_evidence`: keep only the best chunk of each evidence version (fewer than `limit`
    hits when chunks of one evidence fill the candidate lists).
    `fusion`: overrides the index's default RRF settings for this call.
    `min_score`: a relevance floor on the dense similarity (the cosine of query and chunk, in
    [-1, 1]): a hit below it is left out before `limit` is counted, unless the chunk holds every
    searchable term of the query (an exact lexical match: an order number, an error code). None
    keeps every hit. Not allowed in `bm25` mode, which computes no similarity.
    """

    text: str
    limit: int = 10
    mode: SearchMode = SearchMode.HYBRID
    kinds: frozenset[str] | None = None
    scopes: frozenset[str] | None = None
    sources: frozenset[str] | None = None
    owners: frozenset[str] | None = None
    as_of: datetime | None = None
    one_hit_per_evidence: bool = False
    fusion: FusionSettings | None = field(default=None)
    min_score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidQuery("text", f"must be a string, got {type(self.text).__name__}")
        if not self.text.strip():
            raise InvalidQuery("text", "is empty or only whitespace")
        if len(self.text) > MAX_QUERY_CHARS:
            raise InvalidQuery("text", f"is {len(self.text)} characters; the limit is {MAX_QUERY_CHARS}")
        if (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or not 1 <= self.limit <= MAX_LIMIT
        ):
            raise InvalidQuery("limit", f"{self.limit!r} is not an integer in [1, {MAX_LIMIT}]")
        try:
            object.__setattr__(self, "mode", SearchMode(self.mode))
        except ValueError:
            raise InvalidQuery("mode", f"{self.mode!r} is not one of hybrid, bm25, dense") from None
        if self.kinds is not None:
            object.__setattr__(self, "kinds", _values("kinds", self.kinds, _kind))
        if self.scopes is not None:
            object.__setattr__(self, "scopes", _values("scopes", self.scopes, fields.label))
        if self.sources is not None:
            object.__setattr__(self, "sources", _values("sources", self.sources, fields.label))
        if self.owners is not None:
            object.__setattr__(self, "owners", _values("owners", self.owners, fields.identifier))
        if self.min_score is not None:
            object.__setattr__(self, "min_score", _floor(self.min_score, self.mode))
        if self.as_of is not None:
            if not isinstance(self.as_of, datetime):
                raise InvalidQuery("as_of", f"must be a datetime, got {type(self.as_of).__name__}")
            try:
                fields.epoch_seconds(self.as_of)
            except ValueError as exc:
                raise InvalidQuery("as_of", str(exc)) from None


def _floor(value: object, mode: SearchMode) -> float:
    # NaN compares false with everything, so it would keep (or drop) every hit silently.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidQuery("min_score", f"{value!r} is not a number in [-1, 1]")
    if not -1.0 <= value <= 1.0:
        raise InvalidQuery("min_score", f"{value!r} is outside [-1, 1], the range of a cosine similarity")
    if mode is SearchMode.BM25:
        raise InvalidQuery(
            "min_score",
            "applies to the dense similarity, which a bm25 search does not compute; use mode hybrid or dense",
        )
    return float(value)


def _kind(name: str, value: object, *, for_query: bool) -> str:
    return fields.one_of(name, value, fields.KINDS, for_query=for_query)


def _values(name: str, values: Iterable[str], check: Callable[..., str]) -> frozenset[str]:
    if isinstance(values, str):  # a bare string would silently become a set of characters
        raise InvalidQuery(name, f"must be a set of values, got the string {values!r}")
    try:
        items = list(values)
    except TypeError:
        raise InvalidQuery(name, f"must be a set of values, got {type(values).__name__}") from None
    if not items:
        raise InvalidQuery(name, "is empty; pass None for any value")
    if len(items) > MAX_FILTER_VALUES:
        raise InvalidQuery(name, f"has {len(items)} values; the limit is {MAX_FILTER_VALUES}")
    return frozenset(check(name, v, for_query=True) for v in items)
