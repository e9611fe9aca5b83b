"""The answers' value types: a SearchHit built on the search path is the constructor's own."""

from __future__ import annotations

import dataclasses

import pytest

from mnemo_sea.system.results import SearchHit

VALUES = (
    "doc-7",
    3,
    "knowledge",
    "policies",
    "shop",
    "p. 2",
    "Refunds within 30 days",
    0.031,
    1,
    None,
    (10, 33),
    "evidence",
)


def test_a_built_hit_is_the_constructed_one_field_for_field() -> None:
    built = SearchHit.built(*VALUES)
    made = SearchHit(*VALUES)
    assert built == made and hash(built) == hash(made)
    assert dataclasses.asdict(built) == dataclasses.asdict(made)
    # Every field is set (a field added to SearchHit but not to `built` would be missing here).
    assert vars(built).keys() == {f.name for f in dataclasses.fields(SearchHit)}
    assert built.to_dict() == made.to_dict()


def test_a_built_hit_is_as_frozen_as_a_constructed_one() -> None:
    built = SearchHit.built(*VALUES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.snippet = "changed"  # type: ignore[misc]
    assert dataclasses.replace(built, score=0.5).score == 0.5
