"""Every search says what happened: results, no match, forbidden, unavailable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mnemo_sea.retrieval import (
    AccessScope,
    EvidenceDocument,
    FusionSettings,
    HybridIndex,
    IndexUnavailable,
    LegQuery,
    ScoredPoint,
    SearchMode,
    SearchQuery,
    SearchStatus,
)
from mnemo_sea.retrieval.filters import tenant_filter
from mnemo_sea.retrieval.query import MAX_QUERY_CHARS

DOCS = [
    ("refund", "Refunds are paid within 30 days of a complaint."),
    ("carrier", "The carrier delayed order O-1042 by two days."),
    ("menu", "The cafeteria menu changes every Monday."),
    ("order-zh", "订单延迟了怎么办？联系客服。"),
]


@pytest.fixture
def loaded(index: HybridIndex) -> HybridIndex:
    index.upsert(EvidenceDocument(tenant_id="acme", evidence_id=e, version=1, text=t) for e, t in DOCS)
    return index


def search(index: HybridIndex, text: str, tenant: str = "acme", **kwargs: Any) -> Any:
    return index.search(AccessScope(tenant), SearchQuery(text, **kwargs))


def test_hybrid_hits_carry_both_legs_ranks_and_scores(loaded: HybridIndex) -> None:
    outcome = search(loaded, "carrier delayed O-1042")
    assert outcome.status is SearchStatus.RESULTS
    top = outcome.hits[0]
    assert top.evidence_id == "carrier"
    assert top.bm25 is not None and top.bm25.rank == 1 and top.bm25.score > 0
    assert top.dense is not None and top.dense.rank == 1
    assert top.score == pytest.approx(1 / 61 + 1 / 61)
    assert {"encode_bm25", "embed_query", "index", "total"} <= set(outcome.timings_ms)


def test_single_leg_modes_report_only_their_leg(loaded: HybridIndex) -> None:
    lexical = search(loaded, "O-1042", mode=SearchMode.BM25)
    assert [h.evidence_id for h in lexical.hits] == ["carrier"]
    assert lexical.hits[0].dense is None and lexical.hits[0].score == lexical.hits[0].bm25.score
    dense = search(loaded, "cafeteria menu", mode=SearchMode.DENSE)
    assert dense.hits[0].evidence_id == "menu" and dense.hits[0].bm25 is None
    assert len(dense.hits) == len(DOCS)  # the dense leg ranks everything in scope


def test_fusion_can_be_overridden_per_query(loaded: HybridIndex) -> None:
    only_bm25 = search(loaded, "carrier", fusion=FusionSettings(bm25_weight=1.0, dense_weight=0.0))
    assert [h.evidence_id for h in only_bm25.hits] == ["carrier"]
    assert "embed_query" not in only_bm25.timings_ms  # a zero-weight leg does not run


def test_an_empty_tenant_is_no_match(loaded: HybridIndex) -> None:
    outcome = search(loaded, "refund", tenant="nobody")
    assert outcome.status is SearchStatus.NO_MATCH and outcome.hits == ()
    assert outcome.ok


def test_stop_words_only_query(loaded: HybridIndex) -> None:
    lexical = search(loaded, "the of and", mode=SearchMode.BM25)
    assert lexical.status is SearchStatus.NO_MATCH and "no searchable terms" in lexical.reason
    hybrid = search(loaded, "the of and")
    assert hybrid.status is SearchStatus.RESULTS  # the dense leg still has something to look for
    assert all(h.bm25 is None for h in hybrid.hits)


@pytest.mark.parametrize(
    "text",
    [
        "refund " * (MAX_QUERY_CHARS // 7),  # about 16k characters: at the limit, still served
        "🙂🚚📦 refund 🙂",
        "refund\x00\x07\x1b[31m policy",
        "订单延迟",
        "' OR 1=1 --",
        "tenant_id:* OR *",
    ],
)
def test_odd_queries_are_served_within_the_tenant(loaded: HybridIndex, index: HybridIndex, text: str) -> None:
    index.upsert([EvidenceDocument(tenant_id="globex", evidence_id="x", version=1, text=text.strip() or "x")])
    outcome = search(loaded, text)
    assert outcome.status in (SearchStatus.RESULTS, SearchStatus.NO_MATCH)
    assert all(h.tenant_id == "acme" for h in outcome.hits)


def test_chinese_query_finds_chinese_document(loaded: HybridIndex) -> None:
    assert search(loaded, "订单延迟", mode=SearchMode.BM25).hits[0].evidence_id == "order-zh"


def test_dead_dense_leg_is_unavailable_not_empty(loaded: HybridIndex, embedder: Any) -> None:
    embedder.fail = True
    outcome = search(loaded, "refund")
    assert outcome.status is SearchStatus.UNAVAILABLE
    assert "dense leg" in outcome.reason and not outcome.ok
    assert search(loaded, "refund", mode=SearchMode.BM25).status is SearchStatus.RESULTS


def test_closed_index_is_unavailable(loaded: HybridIndex) -> None:
    loaded.close()
    outcome = search(loaded, "refund")
    assert outcome.status is SearchStatus.UNAVAILABLE and "closed" in outcome.reason
    with pytest.raises(IndexUnavailable):
        loaded.upsert([EvidenceDocument(tenant_id="acme", evidence_id="z", version=1, text="z")])


class BrokenEngine:
    """Wraps a backend; its queries fail the way a lost connection does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]:
        raise IndexUnavailable("qdrant collection 'x'", "connection refused")


def test_engine_failure_is_unavailable(loaded: HybridIndex) -> None:
    loaded.searcher.index = BrokenEngine(loaded.backend)
    outcome = search(loaded, "refund")
    assert outcome.status is SearchStatus.UNAVAILABLE and "connection refused" in outcome.reason


class LeakyEngine(BrokenEngine):
    """Simulates an engine bug: returns another tenant's point despite the filter."""

    def __init__(self, inner: Any, foreign: ScoredPoint) -> None:
        super().__init__(inner)
        self.foreign = foreign

    def query(self, legs: Sequence[LegQuery]) -> list[list[ScoredPoint]]:
        return [[self.foreign, *results] for results in self.inner.query(legs)]


def test_a_point_outside_the_filter_is_dropped_even_if_the_engine_returns_it(loaded: HybridIndex) -> None:
    loaded.upsert(
        [EvidenceDocument(tenant_id="globex", evidence_id="theirs", version=1, text="refund secrets")]
    )
    (foreign_id, _), *_ = loaded.backend.matching(tenant_filter("globex"))
    loaded.searcher.index = LeakyEngine(loaded.backend, ScoredPoint(foreign_id, 99.0))
    outcome = search(loaded, "refund")
    assert outcome.status is SearchStatus.RESULTS
    assert all(h.tenant_id == "acme" for h in outcome.hits)
