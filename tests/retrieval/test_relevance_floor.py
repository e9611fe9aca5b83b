"""Scores a person can read: each leg's own score on every hit, a relevance built from them, and a
floor on it (`SearchQuery.min_score`) that leaves out what is under it before `limit` is counted
but never a chunk holding every term of the query. The fake embedder (bag of words) stands in for
the model, which is not the subject: the floor's quality on SciFact is measured on the whole corpus
by `mnemo-sea eval floor` (eval/README.md), like every quality figure."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from mnemo_sea.retrieval import (
    AccessScope,
    EvidenceDocument,
    HybridIndex,
    InvalidQuery,
    SearchMode,
    SearchQuery,
    SearchStatus,
)

FILLER = " ".join(f"word{i}" for i in range(40))
DOCS = [
    ("exact", f"ticket ORD-4417 {FILLER}"),  # every query term, drowned in other words
    ("close", "refund ticket for the delayed parcel"),
    ("partial", f"ticket {FILLER}"),
    ("unrelated", "the cafeteria menu changes every monday"),
]


@pytest.fixture
def loaded(index: HybridIndex) -> HybridIndex:
    index.upsert(EvidenceDocument(tenant_id="acme", evidence_id=e, version=1, text=t) for e, t in DOCS)
    return index


def search(index: HybridIndex, text: str, **kwargs: Any) -> Any:
    return index.search(AccessScope("acme"), SearchQuery(text, **kwargs))


def cosines(index: HybridIndex, text: str) -> dict[str, float]:
    """The dense leg's own cosine of every document, by a dense search deep enough for all."""
    return {h.evidence_id: h.dense.score for h in search(index, text, mode=SearchMode.DENSE, limit=50).hits}


def test_every_hybrid_hit_carries_both_legs_scores_and_its_relevance(loaded: HybridIndex) -> None:
    text = "refund ticket ORD-4417"
    outcome = search(loaded, text, limit=10)
    dense = cosines(loaded, text)
    best_bm25 = max(h.bm25.score for h in outcome.hits if h.bm25 is not None)
    assert {h.evidence_id for h in outcome.hits} == set(dense)
    for hit in outcome.hits:
        assert hit.dense is not None and hit.dense.score == pytest.approx(dense[hit.evidence_id], abs=1e-5)
        lexical = 0.0 if hit.bm25 is None else hit.bm25.score / best_bm25
        assert hit.relevance == pytest.approx(max(hit.dense.score, (hit.dense.score + lexical) / 2))
    assert next(h for h in outcome.hits if h.evidence_id == "unrelated").bm25 is None  # no shared term


def test_a_hit_only_bm25_found_gets_the_cosine_the_dense_leg_would_give(loaded: HybridIndex) -> None:
    # One candidate per leg: the BM25 leg's best is outside the dense leg's list.
    loaded.searcher.settings = replace(loaded.searcher.settings, candidates=1)
    text = "ORD-4417 refund"
    outcome = search(loaded, text, limit=1)
    (hit,) = outcome.hits
    assert hit.bm25 is not None and hit.bm25.rank == 1
    assert hit.dense is not None and hit.dense.rank is None  # computed, not ranked
    loaded.searcher.settings = replace(loaded.searcher.settings, candidates=100)
    assert hit.dense.score == pytest.approx(cosines(loaded, text)[hit.evidence_id], abs=1e-5)


def test_bm25_mode_has_no_dense_score(loaded: HybridIndex) -> None:
    hits = search(loaded, "ticket", mode=SearchMode.BM25).hits
    assert hits and all(h.dense is None and h.relevance is None for h in hits)


def test_the_floor_keeps_hits_at_or_above_it_and_leaves_out_the_rest(loaded: HybridIndex) -> None:
    text = "refund ticket for the parcel"
    everything = search(loaded, text, limit=10).hits
    relevance = sorted({h.relevance for h in everything})
    assert len(relevance) >= 3
    floor = relevance[1]  # the lowest one is under it; the others reach it
    kept = search(loaded, text, limit=10, min_score=floor).hits
    assert [h.evidence_id for h in kept] == [h.evidence_id for h in everything if h.relevance >= floor]
    assert all(h.relevance >= floor for h in kept)


def test_the_floor_applies_before_the_limit_is_counted(loaded: HybridIndex) -> None:
    text = "refund ticket for the parcel"
    everything = search(loaded, text, limit=10).hits
    floor = max(h.relevance for h in everything[1:])  # the first hit may be under it; some hit is not
    above = [h.evidence_id for h in everything if h.relevance >= floor]
    assert above and len(above) < len(everything)
    kept = search(loaded, text, limit=len(above), min_score=floor).hits
    assert [h.evidence_id for h in kept] == above  # not the first `limit` hits, then floored


def test_a_chunk_holding_every_query_term_passes_any_floor(loaded: HybridIndex) -> None:
    text = "ticket ORD-4417"
    everything = {h.evidence_id: h for h in search(loaded, text, limit=10).hits}
    assert everything["exact"].relevance < 0.99  # the floor below would leave it out by relevance
    kept = [h.evidence_id for h in search(loaded, text, limit=10, min_score=0.99).hits]
    assert kept == ["exact"]  # "partial" holds one of the terms only: out


def test_the_exact_match_rule_holds_in_dense_mode_too(loaded: HybridIndex) -> None:
    kept = [
        h.evidence_id for h in search(loaded, "ticket ORD-4417", mode=SearchMode.DENSE, min_score=0.99).hits
    ]
    assert kept == ["exact"]


def test_a_query_of_stop_words_matches_nothing_exactly(loaded: HybridIndex) -> None:
    # No terms: "holds every term" would be true of every chunk; the floor alone decides.
    outcome = search(loaded, "the of and", mode=SearchMode.DENSE, min_score=0.99)
    assert outcome.status is SearchStatus.NO_MATCH


def test_nothing_over_the_floor_is_no_match_saying_so(loaded: HybridIndex) -> None:
    outcome = search(loaded, "cafeteria parcel", min_score=1.0)
    assert outcome.status is SearchStatus.NO_MATCH and outcome.hits == ()
    assert "min_score 1.0" in outcome.reason


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.nan, "not a number"),
        (math.inf, "not a number"),
        (1.5, "outside [-1, 1]"),
        (-1.01, "outside [-1, 1]"),
        (True, "not a number"),
        ("0.5", "not a number"),
    ],
)
def test_a_floor_out_of_range_is_refused_naming_the_field(value: object, problem: str) -> None:
    with pytest.raises(InvalidQuery) as caught:
        SearchQuery("refund", min_score=value)  # type: ignore[arg-type]
    assert caught.value.field == "min_score" and problem in caught.value.problem


def test_a_floor_in_bm25_mode_is_refused_since_it_computes_no_similarity() -> None:
    with pytest.raises(InvalidQuery) as caught:
        SearchQuery("refund", mode=SearchMode.BM25, min_score=0.5)
    assert caught.value.field == "min_score" and "bm25" in caught.value.problem


def test_the_ends_of_the_range_are_floors() -> None:
    assert SearchQuery("refund", min_score=-1).min_score == -1.0
    assert SearchQuery("refund", min_score=1).min_score == 1.0


def test_relevance_is_the_cosine_without_lexical_evidence_and_never_lower_with_it() -> None:
    from mnemo_sea.retrieval.floor import relevance

    assert relevance(-0.4, None, 0.0) == relevance(-0.4, None, 7.0) == -0.4  # not halved by a mean with 0
    assert relevance(0.3, 7.0, 7.0) == (0.3 + 1.0) / 2  # the best lexical match, raised halfway
    assert relevance(0.9, 1.0, 7.0) == 0.9  # weak lexical evidence never lowers the cosine
    assert relevance(-0.4, 3.5, 7.0) == (-0.4 + 0.5) / 2
