"""The one rule for "does this version answer at moment t", on both of the archive's time axes.

Transaction time: a version is *in force* at t from the moment it was recorded (`recorded_at`,
`created_at` for memory) until the moment it stopped being the archive's current one
(`ended_at`: superseded or retracted), half-open, so at the instant of a supersession the new
version answers and the old one does not. Valid time: its content holds in the world from
`valid_from` until `valid_until`, half-open too; a memory fact's TTL expiry is its
`valid_until`.

`as_of=t` reads (evidence, memory, search, citations) go through these functions. The
`*_answers_at` variants read `at=None` as "now" by the stored status instead of the clock, as
`get_evidence` without `as_of` does, so a version recorded by a node whose clock runs ahead
still answers at once, as its status says it does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import ColumnElement, and_

from .clock import utcnow


def in_force(recorded_at: datetime, ended_at: datetime | None, at: datetime) -> bool:
    """Whether the version was the archive's current one at `at` (transaction time)."""
    return recorded_at <= at and (ended_at is None or at < ended_at)


def valid_at(valid_from: datetime | None, valid_until: datetime | None, at: datetime) -> bool:
    """Whether the content holds in the world at `at` (valid time; None is unbounded)."""
    return (valid_from is None or valid_from <= at) and (valid_until is None or at < valid_until)


def expired(expires_at: datetime | None, at: datetime) -> bool:
    """Whether a TTL has run out by `at`: the expiry is the end of the fact's valid time."""
    return not valid_at(None, expires_at, at)


def expired_clause(expires_at: ColumnElement[Any], at: datetime) -> ColumnElement[bool]:
    """`expired` as SQL, for statements that select what has expired by `at`."""
    return and_(expires_at.is_not(None), expires_at <= at)


class EvidenceTimes(Protocol):
    """What the rule reads of an evidence version (a record or its row)."""

    @property
    def status(self) -> str: ...
    @property
    def recorded_at(self) -> datetime: ...
    @property
    def ended_at(self) -> datetime | None: ...
    @property
    def valid_from(self) -> datetime | None: ...
    @property
    def valid_until(self) -> datetime | None: ...


class MemoryTimes(Protocol):
    """What the rule reads of a memory fact version (a fact or its row); `ended_at` comes apart
    for a fact, which does not carry it."""

    @property
    def status(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime | None: ...


def evidence_answers_at(version: EvidenceTimes, at: datetime | None) -> bool:
    """Whether an evidence version answers at `at`: in force and valid then. At None (now):
    the active version, if it is valid now."""
    if at is None:
        return evidence_answers_now(version.status, version.valid_from, version.valid_until, utcnow())
    return in_force(version.recorded_at, version.ended_at, at) and valid_at(
        version.valid_from, version.valid_until, at
    )


def evidence_answers_now(
    status: str, valid_from: datetime | None, valid_until: datetime | None, now: datetime
) -> bool:
    """`evidence_answers_at(version, None)`, with the clock read once by the caller (search
    hydration checks every hit at one moment, and needs no transaction-time columns for it)."""
    return status == "active" and valid_at(valid_from, valid_until, now)


def memory_answers_at(fact: MemoryTimes, ended_at: datetime | None, at: datetime | None) -> bool:
    """Whether a memory fact version answers at `at`, as `current(at=...)` reads it: in force
    and not expired then. At None (now): the active version, unless its TTL has run out."""
    if at is None:
        return fact.status == "active" and not expired(fact.expires_at, utcnow())
    return in_force(fact.created_at, ended_at, at) and not expired(fact.expires_at, at)
