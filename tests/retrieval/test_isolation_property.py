"""Property: a search returns exactly the in-scope matches, and never another tenant's hit.

Random tenants, documents (sensitivity, owner, kind) and queries; the expected hit set is
computed in plain Python from the documents themselves, so the engine's pre-filters are held to
an independent reference: nothing outside the scope, nothing in scope missing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval import (
    AccessScope,
    EvidenceDocument,
    HybridIndex,
    SearchMode,
    SearchQuery,
    SearchStatus,
    Tokenizer,
)

TENANTS = ("acme", "globex", "initech")
WORDS = ("refund", "parcel", "carrier", "delay", "invoice", "订单", "延迟", "O-1042", "the", "policy")
OWNERS = (None, "alice", "bob")


@dataclass(frozen=True)
class Case:
    docs: list[EvidenceDocument]
    scope: AccessScope
    query: SearchQuery


documents = st.builds(
    lambda tenant, n, words, sensitivity, owner: EvidenceDocument(
        tenant_id=tenant,
        evidence_id=f"e{n}",
        version=1,
        text=" ".join(words),
        kind="memory" if owner else "knowledge",
        owner=owner,
        sensitivity=sensitivity,
    ),
    st.sampled_from(TENANTS),
    st.integers(0, 30),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.integers(0, 3),
    st.sampled_from(OWNERS),
)

cases = st.builds(
    Case,
    st.lists(documents, max_size=25, unique_by=lambda d: (d.tenant_id, d.evidence_id)),
    st.builds(
        AccessScope,
        st.sampled_from(TENANTS),
        st.integers(0, 3),
        st.sampled_from([None, frozenset({"alice"}), frozenset({"bob"})]),
    ),
    st.builds(
        lambda words, mode: SearchQuery(" ".join(words), limit=100, mode=mode),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        st.sampled_from(list(SearchMode)),
    ),
)


def expected_hits(case: Case) -> set[str]:
    tok = Tokenizer()
    terms = set(tok.tokenize(case.query.text))
    hits = set()
    for doc in case.docs:
        in_scope = (
            doc.tenant_id == case.scope.tenant_id
            and doc.sensitivity <= case.scope.clearance
            and (case.scope.owners is None or doc.owner is None or doc.owner in case.scope.owners)
        )
        lexical = bool(terms & set(tok.tokenize(doc.text)))
        if in_scope and (case.query.mode is not SearchMode.BM25 or lexical):
            hits.add(doc.evidence_id)
    return hits


@pytest.fixture(scope="module")
def shared_indexes(
    tmp_path_factory: pytest.TempPathFactory, embedder_factory: type
) -> Iterator[dict[str, HybridIndex]]:
    """One index per backend for all examples: each example writes under fresh tenant names, so
    the documents of every earlier example are other tenants' data that must never show up."""
    indexes = {
        "edge": HybridIndex.open(tmp_path_factory.mktemp("iso") / "ix", embedder=embedder_factory()),
        "server": HybridIndex.connect(":memory:", "iso", embedder=embedder_factory()),
    }
    yield indexes
    for index in indexes.values():
        index.close()


_examples = itertools.count()


def check(case: Case, index: HybridIndex) -> None:
    n = next(_examples)
    case = Case(
        docs=[replace(d, tenant_id=f"{d.tenant_id}-{n}") for d in case.docs],
        scope=replace(case.scope, tenant_id=f"{case.scope.tenant_id}-{n}"),
        query=case.query,
    )
    index.upsert(case.docs)
    outcome = index.search(case.scope, case.query)
    assert outcome.ok, outcome.reason
    assert all(h.tenant_id == case.scope.tenant_id for h in outcome.hits)
    got = {h.evidence_id for h in outcome.hits}
    assert got == expected_hits(case)
    assert (outcome.status is SearchStatus.RESULTS) == bool(got)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases)
def test_embedded_search_returns_exactly_the_in_scope_matches(
    case: Case, shared_indexes: dict[str, HybridIndex]
) -> None:
    check(case, shared_indexes["edge"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases)
def test_server_search_returns_exactly_the_in_scope_matches(
    case: Case, shared_indexes: dict[str, HybridIndex]
) -> None:
    check(case, shared_indexes["server"])
