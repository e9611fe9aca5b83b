"""Index ids of what is not an evidence record, and the refs outbox rows name evidence versions by
(archive/rules/refs.py): built and parsed in one place, so what the indexer writes is what search,
citations and deletion checks take apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.archive.rules.refs import (
    EVIDENCE_ID,
    SUMMARY_PREFIX,
    MemoryIndexId,
    ResultIndexId,
    SourceRef,
    memory_index_id,
    memory_ref,
    parse_index_id,
    parse_version_ref,
    result_index_id,
    version_ref,
)

# As the archive accepts them: principal.check_identifier for sessions and owners (no `/`),
# result ids as the archive issues them, memory keys as memory.remember accepts them (`/` allowed).
identifiers = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")
result_ids = st.integers(min_value=1, max_value=999_999_999).map(lambda n: f"r{n}")
memory_keys = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}\Z")


@given(session_id=identifiers, result_id=result_ids)
def test_a_result_index_id_parses_back_to_its_session_and_result(session_id: str, result_id: str) -> None:
    built = result_index_id(session_id, result_id)
    assert parse_index_id(built) == ResultIndexId(session_id, result_id)
    assert ResultIndexId.of_ref(f"{session_id}/{result_id}") == ResultIndexId(session_id, result_id)
    # The same string is the result's source ref, so a hit's id can be cited as it came.
    assert str(SourceRef.parse(built)) == built


@given(owner=identifiers, key=memory_keys)
def test_a_memory_index_id_parses_back_to_its_owner_and_key(owner: str, key: str) -> None:
    built = memory_index_id(owner, key)
    assert parse_index_id(built) == MemoryIndexId(owner, key)
    assert memory_ref(owner, key) == built


@given(evidence_id=st.from_regex(EVIDENCE_ID))
def test_other_ids_are_not_taken_apart(evidence_id: str) -> None:
    named = parse_index_id(evidence_id)
    if evidence_id.startswith(("result:", "memory:")) and "/" in evidence_id:
        assert named is not None  # the shapes the archive refuses as evidence ids (refs.DERIVED_ID_PREFIXES)
    else:
        assert named is None


@given(
    evidence_id=st.from_regex(EVIDENCE_ID, fullmatch=True), version=st.integers(min_value=1, max_value=2**31)
)
def test_a_version_ref_parses_back_to_its_record_and_version(evidence_id: str, version: int) -> None:
    """The ref an outbox row names a version by (and `EvidenceBatch.made` is keyed by): an
    evidence id may hold `@` itself, so the last one splits."""
    assert parse_version_ref(version_ref(evidence_id, version)) == (evidence_id, version)


def test_examples() -> None:
    assert result_index_id("s-1", "r3") == "result:s-1/r3"
    assert version_ref("kb:a@b", 3) == "kb:a@b@3"
    assert memory_index_id("u-1", "diet/fish") == "memory:u-1/diet/fish"
    assert parse_index_id("memory:u-1/diet/fish") == MemoryIndexId("u-1", "diet/fish")
    assert parse_index_id("result:s-1") is None  # no result id: not a result's id
    assert parse_index_id(f"{SUMMARY_PREFIX}0123abcd") is None  # summaries are indexed under their own id
