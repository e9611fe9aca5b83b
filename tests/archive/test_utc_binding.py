"""UTCDateTime's one-step SQLite binding (archive/storage/schema.py) gives exactly the text
SQLAlchemy's chain gives (`process_bind_param`, then the dialect's DATETIME processor, kept here
as the reference), for any aware time in any offset, and the chain's errors otherwise."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import DateTime
from sqlalchemy.dialects import postgresql, sqlite

from mnemo_sea.archive.storage.schema import UTCDateTime

_SQLITE = sqlite.dialect()


def _reference(value: Any) -> Any:
    """What SQLAlchemy's chain binds on SQLite."""
    impl = DateTime().dialect_impl(_SQLITE).bind_processor(_SQLITE)
    assert impl is not None
    return impl(UTCDateTime().process_bind_param(value, _SQLITE))


def _bind() -> Any:
    processor = UTCDateTime().dialect_impl(_SQLITE).bind_processor(_SQLITE)
    assert processor is not None
    return processor


# Offsets of any size Python allows (strictly within a day), down to the microsecond.
_offsets = st.builds(
    lambda us: timezone(timedelta(microseconds=us)),
    st.integers(min_value=-86_399_999_999, max_value=86_399_999_999),
)
_aware = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_offsets),
)


@given(_aware)
def test_an_aware_time_binds_to_the_chains_text(value: datetime) -> None:
    assert _bind()(value) == _reference(value)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 6, 17, 0, 0, tzinfo=UTC),  # no microseconds: still six digits
        datetime(2026, 12, 6, 23, 30, 0, 1, tzinfo=timezone(timedelta(hours=-5))),  # the next day in UTC
        datetime(999, 1, 1, 0, 0, 0, tzinfo=UTC),  # a year of three digits
    ],
)
def test_edge_times_bind_to_the_chains_text(value: datetime) -> None:
    assert _bind()(value) == _reference(value)


def test_none_binds_to_null() -> None:
    assert _bind()(None) is None


def test_a_naive_time_is_refused_as_by_the_chain() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        _bind()(datetime(2026, 12, 6, 17, 0, 0))


def test_a_date_fails_as_in_the_chain() -> None:
    with pytest.raises(AttributeError):
        _reference(date(2026, 12, 6))
    with pytest.raises(AttributeError):
        _bind()(date(2026, 12, 6))


def test_other_dialects_keep_the_chain() -> None:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    processor = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None
    value = datetime(2026, 12, 6, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert processor(value) == datetime(2026, 12, 7, 4, 30)


def test_sqlite_binds_in_one_step() -> None:
    # Not the chain (which the probe falls back to when the one step's text differs).
    assert _bind().__qualname__ == "UTCDateTime.bind_processor.<locals>.process"
