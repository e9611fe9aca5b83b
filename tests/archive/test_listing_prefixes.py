"""Listings by prefix: `list_evidence(prefix=...)` and `list_memory_owners(prefix=...)` list the ids
that start with the prefix, chosen in SQL, literally (LIKE's `%`, `_` and escape character are
characters here) and case-sensitively on both backends, paged as the whole listing is, and only
in the caller's tenant: another tenant holding the same ids is scanned by the same statement and
never comes back."""

from __future__ import annotations

import pytest

from mnemo_sea.archive import Archive, EvidenceInput, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.archive.rules.limits import EVIDENCE_ID_CHARS, ID_CHARS

IDS = ("kb/a", "kb/b", "kb_x", "kbzx", "kbx1", "kb#1", "KB/c", "other/kb/a")
OWNERS = ("a_b", "axb", "a.b", "A_b", "b_a")


def _listed(archive: Archive, who: Principal, prefix: str | None, **page: int) -> list[str]:
    return [e.evidence_id for e in archive.list_evidence(who, prefix=prefix, **page)]


def _owners(archive: Archive, who: Principal, prefix: str | None, **page: int) -> list[str]:
    return [o.owner for o in archive.list_memory_owners(who, prefix=prefix, **page)]


def _seed(archive: Archive, agent: Principal, other_tenant: Principal) -> None:
    for who in (agent, other_tenant):
        for eid in IDS:
            archive.put_evidence(who, EvidenceInput(f"{who.tenant_id} {eid}", "doc", evidence_id=eid))
        for owner in OWNERS:
            archive.remember(who, owner, "k", f"{who.tenant_id} v", "user_claim")
    # Ids only the other tenant holds: a leak would list them.
    archive.put_evidence(other_tenant, EvidenceInput("b", "doc", evidence_id="kb/only-b"))
    archive.remember(other_tenant, "a_only_b", "k", "v", "user_claim")


def test_evidence_ids_starting_with_the_prefix_literally(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _seed(archive, agent, other_tenant)
    assert _listed(archive, agent, "kb/") == ["kb/a", "kb/b"]
    # `_` and `%` are characters, not wildcards (unescaped, `kb_` would list `kbzx` too, and `kb%`
    # every id starting with kb); so is the escape character.
    assert _listed(archive, agent, "kb_") == ["kb_x"]
    assert _listed(archive, agent, "kb%") == []
    assert _listed(archive, agent, "%") == []
    assert _listed(archive, agent, "_") == []
    assert _listed(archive, agent, "kb\\") == [] and _listed(archive, agent, "kb/") == ["kb/a", "kb/b"]
    # Case-sensitive on SQLite too (its LIKE is not).
    assert _listed(archive, agent, "KB") == ["KB/c"]
    # No prefix (None or empty) lists everything; a prefix nothing starts with, nothing.
    assert sorted(_listed(archive, agent, None)) == sorted(IDS)
    assert sorted(_listed(archive, agent, "")) == sorted(IDS)
    assert _listed(archive, agent, "kb/a/") == []
    # Paged within the prefix: the pages are the listing cut in order.
    whole = _listed(archive, agent, "kb")
    assert len(whole) == 6 and "kb/only-b" not in whole
    pages = [_listed(archive, agent, "kb", limit=3, offset=at) for at in (0, 3, 6, 9)]
    assert [i for p in pages for i in p] == whole and pages[-1] == []
    # The other tenant lists its own, one more.
    assert _listed(archive, other_tenant, "kb/") == ["kb/a", "kb/b", "kb/only-b"]


def test_memory_owners_starting_with_the_prefix_literally(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _seed(archive, agent, other_tenant)
    assert _owners(archive, agent, "a_") == ["a_b"]
    assert _owners(archive, agent, "%") == [] and _owners(archive, agent, "_") == []
    assert _owners(archive, agent, "a") == sorted(["a_b", "axb", "a.b"])
    assert _owners(archive, agent, "A") == ["A_b"]
    assert sorted(_owners(archive, agent, None)) == sorted(OWNERS)
    assert _owners(archive, agent, "a", limit=1, offset=1) == sorted(["a_b", "axb", "a.b"])[1:2]
    assert "a_only_b" in _owners(archive, other_tenant, "a_")
    # A reader lists itself only, prefix or not.
    reader = Principal(agent.tenant_id, "a_b", frozenset({Role.READER}), Sensitivity.INTERNAL)
    assert _owners(archive, reader, "a") == ["a_b"]
    assert _owners(archive, reader, "b") == []


@pytest.mark.parametrize(
    ("prefix", "problem"),
    [(7, "must be a string"), ("a\x00", "NUL"), (["kb"], "must be a string")],
)
def test_a_bad_prefix_is_refused_naming_it(
    archive: Archive, agent: Principal, prefix: object, problem: str
) -> None:
    for listing in (archive.list_evidence, archive.list_memory_owners):
        with pytest.raises(InvalidInput) as raised:
            listing(agent, prefix=prefix)  # type: ignore[arg-type]
        assert raised.value.field == "prefix" and problem in raised.value.problem


def test_a_prefix_longer_than_any_id_is_refused(archive: Archive, agent: Principal) -> None:
    assert _listed(archive, agent, "x" * EVIDENCE_ID_CHARS) == []
    with pytest.raises(InvalidInput, match="prefix"):
        _listed(archive, agent, "x" * (EVIDENCE_ID_CHARS + 1))
    assert _owners(archive, agent, "x" * ID_CHARS) == []
    with pytest.raises(InvalidInput, match="prefix"):
        _owners(archive, agent, "x" * (ID_CHARS + 1))


def test_a_listed_record_says_the_size_of_its_newest_original(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    """A listing answers what a file listing needs without reading each original (the memory
    tool's view of a folder): the bytes of the newest version, in the caller's tenant."""
    archive.put_evidence(agent, EvidenceInput("short", "doc", evidence_id="size/a"))
    archive.put_evidence(agent, EvidenceInput("now ünïcode, longer", "doc", evidence_id="size/a"))
    archive.put_evidence(other_tenant, EvidenceInput("x" * 999, "doc", evidence_id="size/a"))
    archive.put_evidence(agent, EvidenceInput(b"\x00\x01", "doc", evidence_id="size/b"))
    sizes = {e.evidence_id: e.size for e in archive.list_evidence(agent, prefix="size/")}
    assert sizes == {"size/a": len("now ünïcode, longer".encode()), "size/b": 2}
