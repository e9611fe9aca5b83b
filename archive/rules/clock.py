"""The archive's clock: the current time in UTC (the rule that every time given is aware is
`rules.checks.aware`).

Every part of the system reads the wall clock here (records' times, TTL expiry, the outbox, the
index's `as_of` filters), so `wall_clock` is the one place a test replaces it (tests/conftest.py,
the `wall_clock` fixture): a TTL then runs out when the test moves the clock, not when a loaded
machine happens to get round to the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


def system_now() -> datetime:
    return datetime.now(UTC)


wall_clock: Callable[[], datetime] = system_now


def utcnow() -> datetime:
    return wall_clock()
