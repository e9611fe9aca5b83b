"""Bad input to a search is a clear InvalidQuery naming the field, never a crash."""

from __future__ import annotations

from datetime import datetime

import pytest

from mnemo_sea.retrieval import AccessScope, InvalidQuery, SearchQuery
from mnemo_sea.retrieval.filters import AbsentOrKeywordIn, KeywordIn, NumberRange, search_filter
from mnemo_sea.retrieval.query import MAX_QUERY_CHARS


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "   \n\t"}, "text"),
        ({"text": "x" * (MAX_QUERY_CHARS + 1)}, "text"),
        ({"text": "ok", "limit": 0}, "limit"),
        ({"text": "ok", "limit": 10_001}, "limit"),
        ({"text": "ok", "limit": True}, "limit"),
        ({"text": "ok", "mode": "fuzzy"}, "mode"),
        ({"text": "ok", "kinds": frozenset({"secret"})}, "kinds"),
        ({"text": "ok", "kinds": frozenset()}, "kinds"),
        ({"text": "ok", "scopes": "default"}, "scopes"),  # a bare string, not a set
        ({"text": "ok", "sources": frozenset({"crm\x00"})}, "sources"),
        ({"text": "ok", "owners": frozenset({"alice bob"})}, "owners"),
        ({"text": "ok", "owners": frozenset({"*"})}, "owners"),
        ({"text": "ok", "as_of": datetime(2026, 1, 1)}, "as_of"),  # naive: no timezone
    ],
)
def test_malformed_queries_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidQuery) as caught:
        SearchQuery(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.to_dict()["code"] == "invalid_query"


@pytest.mark.parametrize("tenant", ["", "a b", "acme' OR '1'='1", "*", "x" * 200, "../etc"])
def test_malformed_tenant_is_rejected(tenant: str) -> None:
    with pytest.raises(InvalidQuery) as caught:
        AccessScope(tenant)
    assert caught.value.field == "tenant_id"


def test_quotes_and_wildcards_in_labels_are_literal_values() -> None:
    query = SearchQuery("refund", scopes=frozenset({'" OR tenant_id:*', "*"}))
    spec = search_filter(AccessScope("acme"), query, as_of=0.0, historical=False)
    assert KeywordIn("scope", ('" OR tenant_id:*', "*")) in spec.clauses
    assert KeywordIn("tenant_id", ("acme",)) in spec.clauses  # always there, whatever else is asked


def test_filter_always_holds_tenant_clearance_status_and_validity() -> None:
    spec = search_filter(AccessScope("acme", clearance=1), SearchQuery("x"), as_of=100.0, historical=False)
    assert spec.clauses[:5] == (
        KeywordIn("tenant_id", ("acme",)),
        NumberRange("sensitivity", lte=1),
        KeywordIn("status", ("active",)),
        NumberRange("valid_from", lte=100.0),
        NumberRange("valid_until", gt=100.0),
    )


def test_historical_search_admits_superseded_versions() -> None:
    spec = search_filter(AccessScope("acme"), SearchQuery("x"), as_of=1.0, historical=True)
    assert KeywordIn("status", ("active", "superseded")) in spec.clauses


def test_restricted_owners_see_unowned_evidence_and_their_own() -> None:
    scope = AccessScope("acme", owners=frozenset({"alice"}))
    spec = search_filter(scope, SearchQuery("x"), as_of=0.0, historical=False)
    clause = AbsentOrKeywordIn("owner", ("alice",))
    assert clause in spec.clauses
    assert clause.matches({}) and clause.matches({"owner": "alice"}) and not clause.matches({"owner": "bob"})
