"""The one "does this version answer at t" rule (archive/rules/in_force.py): half-open intervals on
both time axes, None as unbounded, and "now" read by the stored status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.archive.rules.in_force import (
    evidence_answers_at,
    expired,
    in_force,
    memory_answers_at,
    valid_at,
)

T0 = datetime(2026, 10, 1, 9, tzinfo=UTC)
TICK = timedelta(microseconds=1)
FAR = timedelta(days=3650)


@dataclass(frozen=True)
class Version:
    status: str
    recorded_at: datetime
    ended_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None


@dataclass(frozen=True)
class Fact:
    status: str
    created_at: datetime
    expires_at: datetime | None = None


def test_transaction_time_is_half_open_from_recording_to_end() -> None:
    end = T0 + timedelta(hours=1)
    assert not in_force(T0, end, T0 - TICK)
    assert in_force(T0, end, T0)  # the instant it was recorded
    assert in_force(T0, end, end - TICK)
    assert not in_force(T0, end, end)  # at the supersession the new version answers, not this one
    assert in_force(T0, None, T0 + FAR)  # never ended: in force ever after


def test_valid_time_is_half_open_and_none_is_unbounded() -> None:
    until = T0 + timedelta(days=1)
    assert valid_at(None, None, T0)
    assert not valid_at(T0, None, T0 - TICK) and valid_at(T0, None, T0)
    assert valid_at(None, until, until - TICK) and not valid_at(None, until, until)


def test_a_ttl_expires_at_its_instant() -> None:
    assert not expired(None, T0 + FAR)
    assert not expired(T0, T0 - TICK)
    assert expired(T0, T0)


def test_evidence_answers_when_in_force_and_valid() -> None:
    superseded = Version(
        "superseded", T0, ended_at=T0 + timedelta(hours=2), valid_from=T0 + timedelta(hours=1)
    )
    assert not evidence_answers_at(superseded, T0)  # recorded, but not valid yet
    assert evidence_answers_at(superseded, T0 + timedelta(hours=1))
    assert not evidence_answers_at(superseded, T0 + timedelta(hours=2))  # superseded by then
    assert not evidence_answers_at(superseded, None)  # and not now


def test_now_goes_by_the_stored_status_not_the_clock() -> None:
    # Recorded by a node whose clock runs an hour ahead: active, so it answers now.
    ahead = Version("active", datetime.now(UTC) + timedelta(hours=1))
    assert evidence_answers_at(ahead, None)
    assert not evidence_answers_at(Version("retracted", T0, ended_at=T0 + TICK), None)
    assert not evidence_answers_at(
        Version("active", T0, valid_until=T0 + TICK), None
    )  # valid time still counts
    assert memory_answers_at(Fact("active", datetime.now(UTC) + timedelta(hours=1)), None, None)
    assert not memory_answers_at(Fact("active", T0, expires_at=T0 + TICK), None, None)
    assert not memory_answers_at(Fact("superseded", T0), T0 + TICK, None)


def test_memory_answers_from_its_write_until_superseded_or_expired() -> None:
    fact = Fact("superseded", T0, expires_at=T0 + timedelta(days=2))
    ended = T0 + timedelta(days=1)
    assert not memory_answers_at(fact, ended, T0 - TICK)
    assert memory_answers_at(fact, ended, T0)
    assert not memory_answers_at(fact, ended, ended)
    unended = Fact("active", T0, expires_at=T0 + timedelta(days=2))
    assert memory_answers_at(unended, None, T0 + timedelta(days=2) - TICK)
    assert not memory_answers_at(unended, None, T0 + timedelta(days=2))


offsets = st.integers(min_value=-5, max_value=5).map(lambda n: T0 + n * timedelta(seconds=1))


@given(
    recorded=offsets,
    ended=st.none() | offsets,
    valid_from=st.none() | offsets,
    valid_until=st.none() | offsets,
    at=offsets,
)
def test_evidence_rule_is_membership_of_both_half_open_intervals(
    recorded: datetime,
    ended: datetime | None,
    valid_from: datetime | None,
    valid_until: datetime | None,
    at: datetime,
) -> None:
    version = Version("superseded", recorded, ended, valid_from, valid_until)
    seconds = {T0 + timedelta(seconds=n) for n in range(-6, 7)}  # every moment the offsets can name
    transaction = {s for s in seconds if s >= recorded and (ended is None or s < ended)}
    valid = {
        s
        for s in seconds
        if (valid_from is None or s >= valid_from) and (valid_until is None or s < valid_until)
    }
    assert evidence_answers_at(version, at) == (at in transaction and at in valid)
