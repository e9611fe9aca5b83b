"""The runner every adapter's operations share (mnemo_sea/integrations/plans.py), on a stand-in
handle: a listing read page by page to its end, and a handle's error thrown into the plan."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mnemo_sea.archive import NotFound
from mnemo_sea.integrations.plans import LISTING_PAGE, Plan, arun_plan, call, every_item, run_plan


class Listing:
    """A handle whose `list_evidence` answers `size` numbered items by limit and offset."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.asked: list[tuple[int, int]] = []

    def list_evidence(self, *, prefix: str, limit: int, offset: int) -> list[str]:
        self.asked.append((offset, limit))
        return [f"{prefix}{i}" for i in range(offset, min(self.size, offset + limit))]

    def get_evidence(self, evidence_id: str) -> str:
        raise NotFound("evidence", evidence_id)


@pytest.mark.parametrize("size", [0, 5, LISTING_PAGE, 2 * LISTING_PAGE + 3])
def test_every_item_reads_a_listing_to_its_end(size: int) -> None:
    handle = Listing(size)
    items = run_plan(handle, every_item("list_evidence", prefix="doc:"))
    assert items == [f"doc:{i}" for i in range(size)]
    assert handle.asked == [(offset, LISTING_PAGE) for offset in range(0, size + 1, LISTING_PAGE)]


def test_a_handle_s_error_is_thrown_into_the_plan_that_can_answer_it() -> None:
    def found_or_none(evidence_id: str) -> Plan[str | None]:
        try:
            return (yield from call("get_evidence", evidence_id))  # type: ignore[no-any-return]
        except NotFound:
            return None

    assert run_plan(Listing(0), found_or_none("x")) is None
    assert asyncio.run(arun_plan(Listing(0), found_or_none("x"))) is None  # in a worker thread
    with pytest.raises(NotFound):
        run_plan(Listing(0), call("get_evidence", "x"))


def test_every_item_passes_its_arguments_through() -> None:
    class Facts:
        def facts(self, owner: str, **kwargs: Any) -> list[str]:
            return [owner] if kwargs["offset"] == 0 else []

    assert run_plan(Facts(), every_item("facts", "alice")) == ["alice"]
