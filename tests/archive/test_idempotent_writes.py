"""Idempotency keys on every archive write: a retry returns the first answer and writes nothing.

Each write is described once (`Write`): what it needs in place, the call under a key, other
requests that must not reuse that key, and what one call adds. Every test runs for every
write on SQLite and PostgreSQL (the `archive` fixture). "Writes nothing" is checked on every
table of the archive, audit, outbox and idempotency keys included.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Table, func, select

import mnemo_sea.archive.storage.idempotency as idempotency
from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.storage import schema as t

A = Principal("clinic-a", "ops-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
B = Principal("shop-b", "ops-9", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
KEY = "retry-1"

Call = Callable[[Archive, Principal, str | None], object]


def snapshot(archive: Archive) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table: equal snapshots mean nothing was written."""
    with archive.store.read() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in t.metadata.sorted_tables
        }


def rows(table: Table, **where: str) -> Callable[[Archive, Principal], int]:
    """Count the principal's tenant's rows of `table` (optionally where column == value)."""

    def count(archive: Archive, principal: Principal) -> int:
        stmt = select(func.count()).select_from(table).where(table.c.tenant_id == principal.tenant_id)
        for column, value in where.items():
            stmt = stmt.where(table.c[column] == value)
        with archive.store.read() as conn:
            return int(conn.execute(stmt).scalar_one())

    return count


keys_stored = rows(t.idempotency_keys)


@dataclass(frozen=True)
class Write:
    name: str
    seed: Callable[[Archive, Principal], object]
    call: Call
    others: tuple[tuple[str, Call], ...]  # other requests: each must be refused under the key
    count: Callable[[Archive, Principal], int]  # what the write adds to
    adds: int  # how much one call adds to `count`

    def __str__(self) -> str:
        return self.name


def nothing(archive: Archive, principal: Principal) -> None:
    return None


# ---- the writes --------------------------------------------------------------------------------


def record(
    session_id: str = "s1",
    tool: str = "search.web",
    content: str | bytes = "the page",
    **kw: Any,
) -> Call:
    kw.setdefault("arguments", {"q": "aspirin"})
    return lambda a, p, key: a.record(p, session_id, tool, content, idempotency_key=key, **kw)


def put(body: str = "aspirin 100 mg", **kw: Any) -> Call:
    kw.setdefault("source", "formulary.pdf")
    return lambda a, p, key: a.put_evidence(p, EvidenceInput(body=body, **kw), idempotency_key=key)


def put_batch(*bodies: str, evidence_id: str = "ev-batch") -> Call:
    items = [EvidenceInput(body=b, source="formulary.pdf", evidence_id=evidence_id) for b in bodies]
    return lambda a, p, key: a.write_evidence_batch(p, items, idempotency_key=key).records


def remember(owner: str = "pat-7", key_: str = "allergy", value: str = "penicillin", **kw: Any) -> Call:
    provenance = kw.pop("provenance", "user_claim")
    kw.setdefault("ttl_seconds", 30 * 86_400)  # with a TTL every call without a key is a new version
    return lambda a, p, key: a.remember(p, owner, key_, value, provenance, idempotency_key=key, **kw)


def seed_sources(archive: Archive, principal: Principal) -> None:
    archive.record(principal, "s-src", "labs.get", "potassium 5.9 mmol/L")
    archive.record(principal, "s-src", "labs.get", "sodium 139 mmol/L")


def summary(text: str = "potassium is high", refs: tuple[str, ...] = ("result:s-src/r1",), **kw: Any) -> Call:
    kw.setdefault("trace_ref", "trace-1")
    return lambda a, p, key: a.create_summary(p, text, list(refs), idempotency_key=key, **kw)


def seed_deletable(archive: Archive, principal: Principal) -> None:
    for evidence_id in ("ev-del", "ev-other"):
        archive.put_evidence(
            principal, EvidenceInput(body=f"body of {evidence_id}", source="x", evidence_id=evidence_id)
        )
    for session_id, owner in (("s-del", "pat-del"), ("s-other", "pat-other")):
        archive.record(principal, session_id, "tool", f"original of {session_id}", owner=owner)
        archive.record(principal, session_id, "tool", f"second of {session_id}", owner=owner)
    for owner in ("pat-del", "pat-other"):
        archive.remember(principal, owner, "allergy", "latex", "user_claim")
        archive.put_evidence(principal, EvidenceInput(body=f"note on {owner}", source="x", owner=owner))
    archive.create_summary(principal, "about s-del", ["result:s-del/r1"])


def delete(what: str, target: str) -> Call:
    def call(a: Archive, p: Principal, key: str | None) -> object:
        if what == "evidence":
            return a.delete_evidence(p, target, idempotency_key=key)
        if what == "session":
            return a.delete_session(p, target, idempotency_key=key)
        return a.delete_owner(p, target, idempotency_key=key)

    return call


deletions = rows(t.audit_events, action="delete")


def seed_recoverable(archive: Archive, principal: Principal) -> None:
    for n in (1, 2):
        archive.record(principal, "s-rec", "labs.get", f"potassium {n}", policy_class="price")
    archive.archive_results(principal, "s-rec", [("r1", "potassium, first"), ("r2", "potassium, second")])


def recover(result_id: str = "r1", session_id: str = "s-rec") -> Call:
    return lambda a, p, key: a.recover(p, session_id, result_id, idempotency_key=key)


def seed_retractable(archive: Archive, principal: Principal) -> None:
    for evidence_id in ("ev-retract", "ev-keep"):
        archive.put_evidence(
            principal, EvidenceInput(body=f"dose of {evidence_id}", source="x", evidence_id=evidence_id)
        )


def retract(evidence_id: str = "ev-retract", reason: str = "wrong dose") -> Call:
    return lambda a, p, key: a.retract(p, evidence_id, reason, idempotency_key=key)


WRITES = (
    Write(
        "record",
        nothing,
        record(),
        (
            ("another content", record(content="another page")),
            ("the same text as bytes", record(content=b"the page")),
            ("another session", record(session_id="s2")),
            ("another tool", record(tool="search.news")),
            ("other arguments", record(arguments={"q": "ibuprofen"})),
            ("another sensitivity", record(sensitivity="confidential")),
            ("another policy class", record(policy_class="user_confirmed_fact")),
            ("an explicit owner", record(owner="pat-7")),
        ),
        rows(t.tool_results),
        1,
    ),
    Write(
        "put_evidence",
        nothing,
        put(),  # no evidence id: without a key every call would create a new record
        (
            ("another body", put("aspirin 500 mg")),
            ("another source", put(source="leaflet.pdf")),
            ("an explicit id", put(evidence_id="ev-1")),
            ("another sensitivity", put(sensitivity="confidential")),
            ("another statement", put(statement="aspirin thins the blood")),
        ),
        rows(t.evidence),
        1,
    ),
    Write(
        "put_evidence_batch",
        nothing,
        put_batch("first body", "second body"),  # one id twice: two versions
        (
            ("another order", put_batch("second body", "first body")),
            ("fewer items", put_batch("first body")),
            ("another id", put_batch("first body", "second body", evidence_id="ev-else")),
        ),
        rows(t.evidence),
        2,
    ),
    Write(
        "remember",
        nothing,
        remember(),
        (
            ("another value", remember(value="latex")),
            ("another owner", remember(owner="pat-8")),
            ("another key", remember(key_="diet")),
            ("another provenance", remember(provenance="user_correction")),
            ("another ttl", remember(ttl_seconds=31 * 86_400)),
            ("no ttl", remember(ttl_seconds=None)),
        ),
        rows(t.memory_facts),
        1,
    ),
    Write(
        # Not stored (the policy keeps model inferences as candidates), yet a retry gets the same answer.
        "remember a candidate",
        nothing,
        remember(provenance="model_inference"),
        (("another value", remember(value="latex", provenance="model_inference")),),
        keys_stored,
        1,
    ),
    Write(
        "create_summary",
        seed_sources,
        summary(),
        (
            ("another text", summary(text="potassium is normal")),
            ("another source", summary(refs=("result:s-src/r2",))),
            ("more sources", summary(refs=("result:s-src/r1", "result:s-src/r2"))),
            ("another trace", summary(trace_ref="trace-2")),
        ),
        rows(t.summaries),
        1,
    ),
    Write(
        # Appends a copy: a retry without a key would append a second one.
        "recover",
        seed_recoverable,
        recover(),
        (("another result", recover("r2")),),
        rows(t.tool_results),
        1,
    ),
    Write(
        # A retry without a key would be a StateConflict (nothing left to retract).
        "retract",
        seed_retractable,
        retract(),
        (("another record", retract("ev-keep")), ("another reason", retract(reason="superseded"))),
        rows(t.audit_events, action="retract"),
        1,
    ),
    Write(
        "delete_evidence",
        seed_deletable,
        delete("evidence", "ev-del"),
        (
            ("another record", delete("evidence", "ev-other")),
            ("another operation", delete("owner", "ev-del")),
        ),
        deletions,
        1,
    ),
    Write(
        "delete_session",
        seed_deletable,
        delete("session", "s-del"),
        (("another session", delete("session", "s-other")), ("another operation", delete("owner", "s-del"))),
        deletions,
        1,
    ),
    Write(
        "delete_owner",
        seed_deletable,
        delete("owner", "pat-del"),
        (("another owner", delete("owner", "pat-other")), ("another operation", delete("session", "s-del"))),
        deletions,
        1,
    ),
)


@pytest.fixture(params=WRITES, ids=str)
def write(request: pytest.FixtureRequest) -> Write:
    w: Write = request.param
    return w


# ---- every write -------------------------------------------------------------------------------


def test_a_retry_returns_the_first_answer_and_writes_nothing(archive: Archive, write: Write) -> None:
    write.seed(archive, A)
    before = write.count(archive, A)
    first = write.call(archive, A, KEY)
    assert write.count(archive, A) == before + write.adds
    after_first = snapshot(archive)
    again = write.call(archive, A, KEY)
    assert again == first
    assert snapshot(archive) == after_first  # no row, no audit event, no outbox row


def test_reusing_a_key_for_another_request_is_a_mismatch_and_changes_nothing(
    archive: Archive, write: Write, subtests: pytest.Subtests
) -> None:
    write.seed(archive, A)
    first = write.call(archive, A, KEY)
    before = snapshot(archive)
    for case, other in write.others:
        with subtests.test(case=case):
            with pytest.raises(IdempotencyMismatch) as err:
                other(archive, A, KEY)
            assert err.value.detail["idempotency_key"] == KEY
            assert snapshot(archive) == before
    assert write.call(archive, A, KEY) == first  # the key still answers its own request


def test_a_key_used_by_another_write_is_a_mismatch(
    archive: Archive, write: Write, subtests: pytest.Subtests
) -> None:
    seeded: set[str] = set()
    for w in WRITES:
        if w.seed.__name__ not in seeded:
            w.seed(archive, A)
            seeded.add(w.seed.__name__)
    write.call(archive, A, KEY)
    before = snapshot(archive)
    for other in WRITES:
        if other.name == write.name:
            continue
        with subtests.test(other=other.name):
            with pytest.raises(IdempotencyMismatch):
                other.call(archive, A, KEY)
            assert snapshot(archive) == before


def test_tenants_use_one_key_independently(archive: Archive, write: Write) -> None:
    for p in (A, B):
        write.seed(archive, p)
    before_a, before_b = write.count(archive, A), write.count(archive, B)
    write.call(archive, A, KEY)
    write.call(archive, B, KEY)  # not a replay of A's answer, not a mismatch
    assert write.count(archive, A) == before_a + write.adds
    assert write.count(archive, B) == before_b + write.adds
    assert keys_stored(archive, A) == keys_stored(archive, B) == 1


def test_concurrent_calls_with_one_key_write_once(archive: Archive, write: Write) -> None:
    write.seed(archive, A)
    before = write.count(archive, A)
    contenders = 4
    barrier = threading.Barrier(contenders)

    def contender(_: int) -> object:
        barrier.wait(timeout=30)
        return write.call(archive, A, KEY)

    with ThreadPoolExecutor(max_workers=contenders) as pool:
        answers = list(pool.map(contender, range(contenders), timeout=120))
    assert all(answer == answers[0] for answer in answers)
    assert write.count(archive, A) == before + write.adds
    assert keys_stored(archive, A) == 1


def test_a_key_that_is_not_an_identifier_is_refused_before_anything_is_written(
    archive: Archive, write: Write
) -> None:
    write.seed(archive, A)
    before = snapshot(archive)
    with pytest.raises(InvalidInput) as err:
        write.call(archive, A, "has space")
    assert err.value.field == "idempotency_key"
    assert snapshot(archive) == before


def test_the_reply_commits_with_the_write_or_not_at_all(
    archive: Archive, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write.seed(archive, A)
    before = snapshot(archive)

    def crash() -> None:
        raise RuntimeError("crashed while storing the reply")

    # The reply row is the last statement of the write's transaction: failing there must undo the write.
    monkeypatch.setattr(idempotency, "utcnow", crash)
    with pytest.raises(RuntimeError):
        write.call(archive, A, KEY)
    assert snapshot(archive) == before
    monkeypatch.undo()
    write.call(archive, A, KEY)
    assert write.count(archive, A) > 0 and keys_stored(archive, A) == 1


# ---- what a replay answers after later changes --------------------------------------------------


def test_a_failed_write_leaves_its_key_free(archive: Archive) -> None:
    with pytest.raises(NotFound):
        archive.delete_evidence(A, "ev-missing", idempotency_key=KEY)
    assert keys_stored(archive, A) == 0
    archive.put_evidence(A, EvidenceInput(body="x", source="y", evidence_id="ev-here"))
    receipt = archive.delete_evidence(A, "ev-here", idempotency_key=KEY)
    assert receipt.evidence_versions == (("ev-here", 1),)


def test_a_replayed_record_is_the_result_as_recorded_though_it_was_archived_since(archive: Archive) -> None:
    first = archive.record(A, "s1", "search.web", "the page", idempotency_key=KEY)
    archive.archive_results(A, "s1", [("r1", "a search result")])
    again = archive.record(A, "s1", "search.web", "the page", idempotency_key=KEY)
    assert again == first and again.state == "live"
    assert [r.result_id for r in archive.list_results(A, "s1")] == ["r1"]


def test_a_replayed_put_is_the_version_as_stored_though_it_was_superseded_since(archive: Archive) -> None:
    item = EvidenceInput(body="v1", source="x", evidence_id="ev-1")
    first = archive.put_evidence(A, item, idempotency_key=KEY)
    archive.put_evidence(A, EvidenceInput(body="v2", source="x", evidence_id="ev-1"))
    assert archive.put_evidence(A, item, idempotency_key=KEY) == first
    assert [v.version for v in archive.evidence_history(A, "ev-1")] == [1, 2]


def test_a_replay_of_a_deleted_result_is_not_found_and_writes_nothing(archive: Archive) -> None:
    archive.record(A, "s1", "search.web", "the page", idempotency_key=KEY)
    archive.delete_session(A, "s1")
    before = snapshot(archive)
    with pytest.raises(NotFound):
        archive.record(A, "s1", "search.web", "the page", idempotency_key=KEY)
    assert snapshot(archive) == before


def test_a_deleted_record_leaves_no_content_in_the_key_table(archive: Archive) -> None:
    archive.record(
        A, "s1", "search.web", "secret page text", arguments={"q": "secret query"}, idempotency_key=KEY
    )
    archive.remember(A, "pat-7", "allergy", "secret allergy", "user_claim", idempotency_key="k2")
    archive.create_summary(A, "secret summary", ["result:s1/r1"], idempotency_key="k3")
    with archive.store.read() as conn:
        replies = " ".join(r.response_json for r in conn.execute(select(t.idempotency_keys)))
    assert "secret" not in replies
