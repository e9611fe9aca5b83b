"""Old observations stay honest where they are shown: a live result of a time-sensitive class
carries the re-query warning once it is old, as a recovered copy does; a result that a later
result of the same call replaced says so, live or archived.

Time moves only when the test moves it (the `wall_clock` fixture). Every test runs on SQLite and
PostgreSQL (the `archive` fixture).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from fakes import ManualWallClock

from mnemo_sea.archive import Archive, ArchivePolicy, InvalidInput, Principal

STALE_AFTER = ArchivePolicy().stale_after_seconds


def rendered(archive: Archive, agent: Principal, result_id: str) -> str:
    (item,) = [i for i in archive.live_view(agent, "s1").items if i.result.result_id == result_id]
    return item.rendered


def test_a_live_price_is_warned_once_it_is_old_as_a_recovered_copy_is(
    archive: Archive, agent: Principal, wall_clock: ManualWallClock
) -> None:
    price = archive.record(
        agent, "s1", "shop.price", "widget: 4 EUR", arguments={"sku": "W-1"}, policy_class="price"
    )
    log = archive.record(agent, "s1", "logs.search", "carrier timed out", arguments={"q": "O-1"})
    assert "[warning: " not in rendered(archive, agent, price.result_id)  # fresh

    wall_clock.advance(STALE_AFTER - 5)
    assert "[warning: " not in rendered(archive, agent, price.result_id)
    wall_clock.advance(10)
    live_warning = rendered(archive, agent, price.result_id).split("\n")[1]
    assert live_warning.startswith("[warning: price data goes stale: this is what shop.price returned at")
    assert "[warning: " not in rendered(archive, agent, log.result_id)  # not a time-sensitive class

    # The same warning, word for word, as the recovered copy of the same observation carries.
    archive.archive_results(agent, "s1", [(price.result_id, "widget price")])
    copy = archive.recover(agent, "s1", price.result_id)
    assert f"[warning: {copy.staleness_warning}]" == live_warning


def test_a_session_s_newest_observation_ages_what_came_before(archive: Archive, agent: Principal) -> None:
    """A session replayed from a trace has its own time: an observation two hours after the
    price makes the price two hours old, whatever the wall clock says."""
    price = archive.record(
        agent, "s1", "shop.stock", "3 boxes", arguments={"sku": "A-5"}, policy_class="stock"
    )
    assert "[warning: " not in rendered(archive, agent, price.result_id)
    later = price.observed_at + timedelta(hours=2)
    archive.record(
        agent, "s1", "vet.schedule", "Dr. Li free at 15:00", arguments={"day": "mon"}, observed_at=later
    )
    assert "[warning: stock data goes stale" in rendered(archive, agent, price.result_id)


def test_a_later_result_of_the_same_call_marks_the_earlier_one_live_or_archived(
    archive: Archive, agent: Principal
) -> None:
    first = archive.record(agent, "s1", "orders.get", "status: packed", arguments={"order": "O-7"})
    other = archive.record(agent, "s1", "orders.get", "status: paid", arguments={"order": "O-8"})
    loose = archive.record(agent, "s1", "web.fetch", "page one")  # no arguments: no call to compare
    archive.record(agent, "s1", "web.fetch", "page two")
    second = archive.record(agent, "s1", "orders.get", "status: shipped", arguments={"order": "O-7"})

    view = {i.result.result_id: i for i in archive.live_view(agent, "s1").items}
    assert view[first.result_id].superseded_by == second.result_id
    assert (
        f"[superseded: {second.result_id} is a later result of the same call"
        in view[first.result_id].rendered
    )
    for unchanged in (other, loose, second):
        assert view[unchanged.result_id].superseded_by is None
        assert "[superseded" not in view[unchanged.result_id].rendered

    archive.archive_results(agent, "s1", [(first.result_id, "O-7 was packed")])
    stub = rendered(archive, agent, first.result_id)
    assert f"| superseded by {second.result_id} |" in stub and stub.startswith("<archived_result ")
    # Its recovered copy is the same old observation: marked too; the newest call is not.
    copy = archive.recover(agent, "s1", first.result_id).appended
    view = {i.result.result_id: i for i in archive.live_view(agent, "s1").items}
    assert view[copy.result_id].superseded_by == second.result_id
    assert view[second.result_id].superseded_by is None


@pytest.mark.parametrize("bad", [0, -1.0, True, "900", 10**9])
def test_the_staleness_age_must_be_a_positive_number_of_seconds(bad: object) -> None:
    with pytest.raises(InvalidInput) as e:
        ArchivePolicy(stale_after_seconds=bad)  # type: ignore[arg-type]
    assert e.value.field == "stale_after_seconds"
