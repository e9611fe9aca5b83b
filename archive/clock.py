"""The archive's clock: the current time in UTC, and the rule that every time given is aware.

Every part of the system reads the wall clock here (records' times, TTL expiry, the outbox, the
index's `as_of` filters), so `wall_clock` is the one place a test replaces it (tests/conftest.py,
the `wall_clock` fixture): a TTL then runs out when the test moves the clock, not when a loaded
machine happens to get round to the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .errors import InvalidInput


def system_now() -> datetime:
    return datetime.now(UTC)


wall_clock: Callable[[], datetime] = system_now


def utcnow() -> datetime:
    return wall_clock()


def aware(field: str, value: datetime | None) -> datetime | None:
    """Reject naive datetimes: an archive that guesses time zones mis-orders evidence."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must be time-zone aware (e.g. datetime.now(UTC))")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59-14:00 is past datetime.max in UTC
        raise InvalidInput(field, f"{value.isoformat()} is out of range in UTC") from None
