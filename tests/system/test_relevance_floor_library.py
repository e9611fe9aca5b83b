"""`Mnemo.search` with a relevance floor: each hit's leg scores and relevance come through hydration
and the cache, the floor leaves out what is under it (fresh and cached alike, the floor being part
of the cache key), and a floor the search cannot apply answers `invalid`. The hashing embedder
stands in for the model."""

from __future__ import annotations

import math

import pytest

from mnemo_sea.archive import EvidenceInput, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic", "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
DOCS = {
    "ferry": "the ferry to the island leaves at noon",
    "ferry-late": "the ferry is late on sundays in winter",
    "menu": "the cafeteria menu changes every monday",
}
QUERY = "ferry island noon"


@pytest.fixture
def loaded(mnemo: Mnemo) -> Mnemo:
    mnemo.ingest(AGENT, [EvidenceInput(body=b, source="kb", evidence_id=e) for e, b in DOCS.items()])
    return mnemo


def test_hits_carry_each_legs_score_and_their_relevance(loaded: Mnemo) -> None:
    hits = loaded.search(AGENT, QUERY).raise_for_status().hits
    top = hits[0]
    assert top.evidence_id == "ferry"
    assert top.bm25_rank == 1 and top.bm25_score is not None and top.bm25_score > 0
    assert top.dense_rank == 1 and top.dense_score is not None and -1 <= top.dense_score <= 1
    assert top.relevance is not None and top.relevance >= top.dense_score
    menu = next(h for h in hits if h.evidence_id == "menu")
    assert menu.bm25_rank is None and menu.bm25_score is None  # no shared term
    assert menu.relevance == pytest.approx(menu.dense_score)  # nothing lexical to raise it
    assert top.to_dict()["relevance"] == top.relevance and "dense_score" in top.to_dict()
    bm25 = loaded.search(AGENT, QUERY, mode="bm25").hits[0]
    assert bm25.bm25_score is not None and bm25.dense_score is None and bm25.relevance is None


def test_the_floor_leaves_out_hits_under_it_fresh_and_cached(loaded: Mnemo) -> None:
    everything = loaded.search(AGENT, QUERY).hits
    relevance = {h.evidence_id: h.relevance for h in everything}
    floor = sorted(r for r in relevance.values() if r is not None)[1]
    expected = [h.evidence_id for h in everything if h.relevance is not None and h.relevance >= floor]
    assert 0 < len(expected) < len(everything)
    fresh = loaded.search(AGENT, QUERY, min_score=floor)
    cached = loaded.search(AGENT, QUERY, min_score=floor)
    assert not fresh.cached and cached.cached
    assert [h.evidence_id for h in fresh.hits] == [h.evidence_id for h in cached.hits] == expected
    assert cached.hits == fresh.hits  # the leg scores come back from the cache as they were
    # Another floor is another cache entry, not the first answer again.
    other = loaded.search(AGENT, QUERY, min_score=-1.0)
    assert not other.cached and [h.evidence_id for h in other.hits] == [h.evidence_id for h in everything]


def test_a_floor_reached_by_nothing_is_no_match(loaded: Mnemo) -> None:
    found = loaded.search(AGENT, "cafeteria island", min_score=1.0)
    assert found.status == "no_match" and found.hits == () and "min_score" in found.reason


@pytest.mark.parametrize(
    ("value", "mode"), [(math.nan, "hybrid"), (1.01, "hybrid"), (-3, "dense"), (0.5, "bm25")]
)
def test_a_floor_the_search_cannot_apply_is_invalid(loaded: Mnemo, value: float, mode: str) -> None:
    found = loaded.search(AGENT, QUERY, mode=mode, min_score=value)
    assert found.status == "invalid" and "min_score" in found.reason
    with pytest.raises(InvalidInput):
        found.raise_for_status()
