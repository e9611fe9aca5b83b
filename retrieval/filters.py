"""Pre-filters as a small backend-neutral expression, translated by each backend.

A FilterSpec is a conjunction of clauses over payload keys. Both backends translate the same
spec into their engine's filter type and pass it *inside* every prefetch, so the engine never
scores a point the caller may not see (no post-filtering, no over-fetching).

`FilterSpec.matches(payload)` evaluates the same spec in Python. It is the reference the
property tests hold the engines to, and documents the semantics in executable form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import fields
from .query import AccessScope, SearchQuery


@dataclass(frozen=True)
class KeywordIn:
    """payload[field] equals one of `values`."""

    field: str
    values: tuple[str, ...]

    def matches(self, payload: Mapping[str, Any]) -> bool:
        return payload.get(self.field) in self.values


@dataclass(frozen=True)
class AbsentOrKeywordIn:
    """payload[field] is absent, or equals one of `values` (e.g. unowned or owned by the caller)."""

    field: str
    values: tuple[str, ...]

    def matches(self, payload: Mapping[str, Any]) -> bool:
        value = payload.get(self.field)
        return value is None or value in self.values


@dataclass(frozen=True)
class NumberRange:
    """payload[field] is a number within every bound given."""

    field: str
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None

    def matches(self, payload: Mapping[str, Any]) -> bool:
        value = payload.get(self.field)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        return (
            (self.gte is None or value >= self.gte)
            and (self.gt is None or value > self.gt)
            and (self.lte is None or value <= self.lte)
            and (self.lt is None or value < self.lt)
        )


Clause = KeywordIn | AbsentOrKeywordIn | NumberRange


@dataclass(frozen=True)
class FilterSpec:
    clauses: tuple[Clause, ...]

    def matches(self, payload: Mapping[str, Any]) -> bool:
        return all(c.matches(payload) for c in self.clauses)


def tenant_filter(tenant_id: str) -> FilterSpec:
    return FilterSpec((KeywordIn("tenant_id", (tenant_id,)),))


def evidence_filter(
    tenant_id: str, evidence_id: str, version: int | None = None, *, from_chunk: int | None = None
) -> FilterSpec:
    """The points of one evidence record (all versions, or one), optionally from a chunk on."""
    clauses: list[Clause] = [KeywordIn("tenant_id", (tenant_id,)), KeywordIn("evidence_id", (evidence_id,))]
    if version is not None:
        clauses.append(NumberRange("version", gte=version, lte=version))
    if from_chunk is not None:
        clauses.append(NumberRange("chunk", gte=from_chunk))
    return FilterSpec(tuple(clauses))


def search_filter(scope: AccessScope, query: SearchQuery, as_of: float, *, historical: bool) -> FilterSpec:
    """Every pre-filter of a search: tenant, clearance, status, validity at `as_of`, narrowing.

    `historical` (an explicit as_of) admits superseded versions; otherwise only active ones.
    Query owners narrow within what the scope allows; the caller checks beforehand that they
    are allowed at all (a forbidden owner is a FORBIDDEN outcome, not an empty result).
    """
    statuses = ("active", "superseded") if historical else ("active",)
    clauses: list[Clause] = [
        KeywordIn("tenant_id", (scope.tenant_id,)),
        NumberRange("sensitivity", lte=scope.clearance),
        KeywordIn("status", statuses),
        NumberRange("valid_from", lte=as_of),
        NumberRange("valid_until", gt=as_of),
    ]
    for key, values in (("kind", query.kinds), ("scope", query.scopes), ("source", query.sources)):
        if values is not None:
            clauses.append(KeywordIn(key, tuple(sorted(values))))
    if query.owners is not None:
        clauses.append(KeywordIn("owner", tuple(sorted(query.owners))))
    elif scope.owners is not None:
        clauses.append(AbsentOrKeywordIn("owner", tuple(sorted(scope.owners))))
    assert set(statuses) <= fields.SEARCHABLE_STATUSES
    return FilterSpec(tuple(clauses))
