"""Search: `owners` narrows hits to what is about those people, in the index (a pre-filter, as
kinds, scopes and sources are), on every kind that has an owner; and each evidence hit carries the
metadata its version was stored with. Another tenant holding the same owners, ids and words is
never found."""

from __future__ import annotations

import pytest

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.archive.rules.limits import FILTER_VALUES
from mnemo_sea.system.mnemo import Mnemo, SearchResultStatus

AGENT = Principal("clinic-a", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ALICE = Principal("clinic-a", "alice", frozenset({Role.READER}), Sensitivity.INTERNAL)
OTHER = Principal("shop-b", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
WORDS = "okapi ferry timetable"


def _seed(mnemo: Mnemo) -> None:
    for who in (AGENT, OTHER):
        # The same ids, owners and words in both tenants; each text names its tenant.
        mark = who.tenant_id
        mnemo.put_evidence(
            who, EvidenceInput(f"{WORDS} for alice {mark}", "kb", evidence_id="ev-alice", owner="alice")
        )
        mnemo.put_evidence(
            who, EvidenceInput(f"{WORDS} for bob {mark}", "kb", evidence_id="ev-bob", owner="bob")
        )
        mnemo.put_evidence(
            who,
            EvidenceInput(
                f"{WORDS} for everyone {mark}", "kb", evidence_id="ev-all", metadata={"page": 7, "t": mark}
            ),
        )
        mnemo.remember(who, "alice", "ferry", f"{WORDS} alice prefers the noon ferry {mark}", "user_claim")
        mnemo.remember(who, "bob", "ferry", f"{WORDS} bob prefers the late ferry {mark}", "user_claim")


def _found(mnemo: Mnemo, who: Principal, **filters: object) -> set[str]:
    result = mnemo.search(who, WORDS, limit=50, **filters)  # type: ignore[arg-type]
    assert result.status in (SearchResultStatus.RESULTS, SearchResultStatus.NO_MATCH), result.reason
    return {h.evidence_id for h in result.hits}


def test_owners_keeps_only_hits_about_those_people_in_one_tenant(mnemo: Mnemo) -> None:
    _seed(mnemo)
    everything = _found(mnemo, AGENT)
    assert everything == {"ev-alice", "ev-bob", "ev-all", "memory:alice/ferry", "memory:bob/ferry"}
    assert _found(mnemo, AGENT, owners=["alice"]) == {"ev-alice", "memory:alice/ferry"}
    assert _found(mnemo, AGENT, owners=("alice", "bob")) == everything - {"ev-all"}
    assert _found(mnemo, AGENT, owners=["carol"]) == set()
    # Narrowed with the other filters, and cached apart from the unfiltered search.
    assert _found(mnemo, AGENT, owners=["bob"], kinds=["memory"]) == {"memory:bob/ferry"}
    again = mnemo.search(AGENT, WORDS, limit=50, owners=["alice"])
    assert again.cached and {h.evidence_id for h in again.hits} == {"ev-alice", "memory:alice/ferry"}
    # Each tenant finds its own records only (the same ids and owners: the text tells them apart).
    for who, foreign in ((AGENT, "shop-b"), (OTHER, "clinic-a")):
        hits = mnemo.search(who, WORDS, limit=50, owners=["alice", "bob"]).hits
        assert len(hits) == 4 and not any(foreign in h.snippet for h in hits)


def test_a_reader_may_narrow_to_itself_only(mnemo: Mnemo) -> None:
    _seed(mnemo)
    # A reader sees what is about it and what is about nobody; `owners` narrows to its own.
    assert _found(mnemo, ALICE) == {"ev-alice", "ev-all", "memory:alice/ferry"}
    assert _found(mnemo, ALICE, owners=["alice"]) == {"ev-alice", "memory:alice/ferry"}
    refused = mnemo.search(ALICE, WORDS, owners=["bob"])
    assert refused.status is SearchResultStatus.FORBIDDEN and "bob" in refused.reason


@pytest.mark.parametrize(
    "owners",
    [[], "alice", ["not an id!"], ["x" * 129], [f"o{i}" for i in range(FILTER_VALUES + 1)]],
    ids=["empty", "bare-string", "bad-id", "too-long", "too-many"],
)
def test_bad_owners_are_refused_before_the_index_is_asked(mnemo: Mnemo, owners: object) -> None:
    from mnemo_sea.archive import InvalidInput

    try:
        result = mnemo.search(AGENT, WORDS, owners=owners)  # type: ignore[arg-type]
    except InvalidInput as e:  # a cap (too long, too many) is refused by the record's checks
        assert e.field.startswith("owners")
        return
    assert result.status is SearchResultStatus.INVALID and "owners" in result.reason


def test_each_evidence_hit_carries_its_versions_metadata(mnemo: Mnemo) -> None:
    _seed(mnemo)
    hits = {h.evidence_id: h for h in mnemo.search(AGENT, WORDS, limit=50).hits}
    assert hits["ev-all"].metadata == {"page": 7, "t": "clinic-a"}
    assert hits["ev-all"].to_dict()["metadata"] == {"page": 7, "t": "clinic-a"}
    assert hits["ev-alice"].metadata is None and hits["memory:alice/ferry"].metadata is None
    # A new version with other metadata: the hit is the new version, with its own.
    mnemo.put_evidence(
        AGENT,
        EvidenceInput(f"{WORDS} for everyone clinic-a", "kb", evidence_id="ev-all", metadata={"page": 8}),
    )
    (hit,) = [h for h in mnemo.search(AGENT, WORDS, limit=50).hits if h.evidence_id == "ev-all"]
    assert (hit.version, hit.metadata) == (2, {"page": 8})
    # A cached answer is hydrated again: the metadata is the archive's, never the cache's.
    cached = mnemo.search(AGENT, WORDS, limit=50)
    assert cached.cached and [h.metadata for h in cached.hits if h.evidence_id == "ev-all"] == [{"page": 8}]
    # An `as_of` search before the new version finds version 1 with its own metadata.
    first = mnemo.archive.evidence_history(AGENT, "ev-all")[0]
    old = mnemo.search(AGENT, WORDS, limit=50, as_of=first.recorded_at)
    assert [(h.version, h.metadata) for h in old.hits if h.evidence_id == "ev-all"] == [
        (1, {"page": 7, "t": "clinic-a"})
    ]
