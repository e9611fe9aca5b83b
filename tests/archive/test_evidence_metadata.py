"""Evidence metadata: the JSON object a caller keeps with a version.

It is stored with the version (the `metadata_json` column, canonical JSON), read back on every
read of the version, part of what makes a version new and of an idempotent request, validated
whole before anything is written, deleted with the version, and never seen by another tenant.
Each test runs on SQLite and PostgreSQL (the `archive` fixture)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from sqlalchemy import func, select

from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    IdempotencyMismatch,
    InvalidBatch,
    InvalidInput,
    Principal,
)
from mnemo_sea.archive.rules.limits import JSON_DEPTH, METADATA_CHARS
from mnemo_sea.archive.storage import schema as t

DOC = {"source": "handbook.pdf", "page": 3, "tags": ["ferry", "timetable"], "score": 0.5, "draft": False}


def _put(archive: Archive, who: Principal, body: str, metadata: Any, eid: str = "kb/ferry", **kw: Any) -> Any:
    return archive.put_evidence(who, EvidenceInput(body, "doc", evidence_id=eid, metadata=metadata), **kw)


def _stored(archive: Archive, tenant: str) -> list[tuple[str, int, str | None]]:
    e = t.evidence
    with archive.store.read() as conn:
        rows = conn.execute(
            select(e.c.evidence_id, e.c.version, e.c.metadata_json)
            .where(e.c.tenant_id == tenant)
            .order_by(e.c.evidence_id, e.c.version)
        )
        return [(r.evidence_id, r.version, r.metadata_json) for r in rows]


def test_metadata_is_kept_with_its_version_and_read_back_everywhere(
    archive: Archive, agent: Principal
) -> None:
    made = _put(archive, agent, "The ferry leaves at noon.", DOC)
    assert made.metadata == DOC and made.version == 1
    # Stored as canonical JSON text (sorted keys, compact), in the version's own row.
    assert _stored(archive, agent.tenant_id) == [
        ("kb/ferry", 1, json.dumps(DOC, sort_keys=True, separators=(",", ":")))
    ]
    record, _ = archive.get_evidence(agent, "kb/ferry")
    assert record.metadata == DOC and record == made
    # A version without metadata reads None, and the older version keeps its own.
    _put(archive, agent, "The ferry leaves at one.", None)
    assert [(r.version, r.metadata) for r in archive.evidence_history(agent, "kb/ferry")] == [
        (1, DOC),
        (2, None),
    ]
    assert archive.get_evidence(agent, "kb/ferry", version=1)[0].metadata == DOC
    # Each read hands out a new dict: changing it changes nothing kept.
    record.metadata["page"] = 99  # type: ignore[index]
    assert archive.get_evidence(agent, "kb/ferry", version=1)[0].metadata == DOC
    batch = archive.write_evidence_batch(
        agent, [EvidenceInput("a", "doc", evidence_id="kb/a", metadata={"n": 1}), EvidenceInput("b", "doc")]
    )
    assert [r.metadata for r in batch.records] == [{"n": 1}, None]
    assert [record.metadata for record, _ in batch.made.values()] == [{"n": 1}, None]


def test_metadata_is_part_of_what_makes_a_version_new(archive: Archive, agent: Principal) -> None:
    _put(archive, agent, "body", {"a": 1, "b": [1, {"c": None}]})
    # Equal as a value (another key order) is the version unchanged: nothing is written.
    assert _put(archive, agent, "body", {"b": [1, {"c": None}], "a": 1}).version == 1
    # The same body with other metadata is a new version; so is dropping it.
    assert _put(archive, agent, "body", {"a": 2}).version == 2
    assert _put(archive, agent, "body", None).version == 3
    assert _put(archive, agent, "body", None).version == 3
    assert [m for _, _, m in _stored(archive, agent.tenant_id)] == [
        '{"a":1,"b":[1,{"c":null}]}',
        '{"a":2}',
        None,
    ]


def test_metadata_is_part_of_an_idempotent_request(archive: Archive, agent: Principal) -> None:
    first = _put(archive, agent, "body", {"a": 1}, idempotency_key="k-1")
    assert _put(archive, agent, "body", {"a": 1}, idempotency_key="k-1") == first
    with pytest.raises(IdempotencyMismatch):
        _put(archive, agent, "body", {"a": 2}, idempotency_key="k-1")
    # A key used without metadata names the request it named before metadata existed.
    plain = _put(archive, agent, "other", None, eid="kb/plain", idempotency_key="k-2")
    assert _put(archive, agent, "other", None, eid="kb/plain", idempotency_key="k-2") == plain
    with pytest.raises(IdempotencyMismatch):
        _put(archive, agent, "other", {}, eid="kb/plain", idempotency_key="k-2")
    assert len(_stored(archive, agent.tenant_id)) == 2


BAD: list[tuple[Any, str]] = [
    (["not", "an", "object"], "must be a JSON object"),
    ("text", "must be a JSON object"),
    ({1: "int key"}, "keys are strings"),
    ({"a": {"b": {("t",): 1}}}, "keys are strings"),
    ({"a": math.nan}, "finite"),
    ({"a": [1, math.inf]}, "finite"),
    ({"a": {1, 2}}, "not a JSON value"),
    ({"a": b"bytes"}, "not a JSON value"),
    ({"a": "x" * METADATA_CHARS}, f"over {METADATA_CHARS} characters"),
    ({"a": "\ud800"}, "lone surrogate"),
]


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


@pytest.mark.parametrize(("metadata", "problem"), BAD, ids=[p for _, p in BAD])
def test_bad_metadata_is_refused_naming_the_field_and_stores_nothing(
    archive: Archive, agent: Principal, metadata: Any, problem: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        _put(archive, agent, "body", metadata)
    assert raised.value.field == "metadata" and problem in raised.value.problem
    # In a batch every bad item is listed; the good item before it is not stored either.
    items = [
        EvidenceInput("fine", "doc", evidence_id="kb/fine"),
        EvidenceInput("b", "doc", metadata=metadata),
    ]
    with pytest.raises(InvalidBatch) as listed:
        archive.write_evidence_batch(agent, items)
    assert [(p["index"], p["field"]) for p in listed.value.problems] == [(1, "metadata")]
    assert _stored(archive, agent.tenant_id) == []


def test_metadata_at_the_caps_is_kept_and_past_them_refused(archive: Archive, agent: Principal) -> None:
    # The largest object the cap admits: its compact JSON is exactly METADATA_CHARS characters.
    edge = {"a": "x" * (METADATA_CHARS - len('{"a":""}'))}
    assert _put(archive, agent, "body", edge, eid="kb/edge").metadata == edge
    deepest = _deep(JSON_DEPTH)
    assert _put(archive, agent, "body", deepest, eid="kb/deep").metadata == deepest
    with pytest.raises(InvalidInput) as raised:
        _put(archive, agent, "body", _deep(JSON_DEPTH + 1), eid="kb/deeper")
    assert raised.value.field == "metadata"
    # Escaped characters count as they are stored: 40,000 quotes are 80,000 characters of JSON.
    with pytest.raises(InvalidInput, match=f"at most {METADATA_CHARS}"):
        _put(archive, agent, "body", {"q": '"' * 40_000}, eid="kb/quotes")
    assert [eid for eid, _, _ in _stored(archive, agent.tenant_id)] == ["kb/deep", "kb/edge"]


def test_metadata_goes_with_its_version_when_the_record_is_deleted(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    _put(archive, agent, "v1", {"secret": "alpha"})
    _put(archive, agent, "v2", {"secret": "beta"})
    _put(archive, other_tenant, "v1", {"secret": "theirs"})  # the same id in another tenant
    archive.delete_evidence(admin, "kb/ferry")
    e = t.evidence
    with archive.store.read() as conn:
        left = conn.execute(
            select(func.count()).select_from(e).where(e.c.metadata_json.like('%"secret"%'))
        ).scalar_one()
        mine = conn.execute(select(func.count()).select_from(e).where(e.c.tenant_id == agent.tenant_id))
        assert mine.scalar_one() == 0
    assert left == 1  # the other tenant's version only
    assert _stored(archive, other_tenant.tenant_id) == [("kb/ferry", 1, '{"secret":"theirs"}')]


def test_another_tenants_metadata_of_the_same_id_is_never_read(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    _put(archive, agent, "ours", {"who": "a"})
    _put(archive, other_tenant, "theirs", {"who": "b"})
    _put(archive, other_tenant, "theirs again", {"who": "b2"})
    assert [r.metadata for r in archive.evidence_history(agent, "kb/ferry")] == [{"who": "a"}]
    assert [r.metadata for r in archive.evidence_history(other_tenant, "kb/ferry")] == [
        {"who": "b"},
        {"who": "b2"},
    ]
