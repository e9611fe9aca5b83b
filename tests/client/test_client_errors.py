"""Errors over the wire are the library's typed errors: a problem+json answer raises the class
the server raised (the one error table, mnemo_sea.system.outcomes), with its structured detail
and the request id; no key, a wrong key and an API that does not answer are typed too."""

from __future__ import annotations

import re
import uuid

import pytest
from client_helpers import FAST_RETRY, MAX_REQUEST_BYTES, Served, Tenant

from mnemo_sea.archive import (
    ArchiveConflict,
    BatchRejected,
    ContentTooLarge,
    EvidenceInput,
    Forbidden,
    IdempotencyMismatch,
    InvalidInput,
    MemoryConflict,
    NotFound,
    StateConflict,
    StoreUnavailable,
    TargetStatus,
    TaskStateRejected,
    Unauthenticated,
)
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import ApiUnreachable, MnemoClient, RetryPolicy
from mnemo_sea.context import ContextOverBudget
from mnemo_sea.eval.api_stack import free_port, wait_until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_404_is_not_found_with_the_request_id_the_server_logged(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    with pytest.raises(NotFound) as err:
        mnemo.get_evidence(unique("missing"))
    assert err.value.detail["what"] == "evidence" and err.value.code == "not_found"
    assert re.fullmatch(r"[0-9a-f]{32}", err.value.request_id or "")
    # The access line is written once the answer is sent: it may come a moment after it.
    wait_until(lambda: tenant.served.logged(err.value.request_id or "") == [404], 120, "the access log line")


def test_another_tenants_record_is_the_same_not_found(tenant: Tenant, served: Served) -> None:
    evidence_id = unique("ev")
    tenant.client("agent").put_evidence(EvidenceInput(body="ours", source="x", evidence_id=evidence_id))
    stranger = Tenant(served, tenant.flavour)
    try:
        with pytest.raises(NotFound) as theirs:
            stranger.client("agent").get_evidence(evidence_id)
        with pytest.raises(NotFound) as missing:
            stranger.client("agent").get_evidence(unique("ev"))
    finally:
        stranger.close()
    assert theirs.value.message == f"evidence {evidence_id!r} not found"  # no oracle: as for a missing one
    assert set(theirs.value.detail) == set(missing.value.detail) == {"what", "ref"}


def test_403_is_forbidden_for_a_role_and_for_a_clearance(tenant: Tenant) -> None:
    with pytest.raises(Forbidden) as role:
        tenant.client("reader").record(unique("s"), "tool", "text")
    assert role.value.detail == {"needed_role": "agent"} and role.value.request_id
    evidence_id = unique("ev")
    tenant.client("agent").put_evidence(EvidenceInput(body="internal", source="x", evidence_id=evidence_id))
    with pytest.raises(Forbidden) as clearance:
        tenant.client("public").get_evidence(evidence_id)
    assert clearance.value.detail == {"needed_clearance": "internal"}


def test_422_keeps_each_targets_status_and_each_problem(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    session = unique("s")
    mnemo.record(session, "tool", "text")
    with pytest.raises(BatchRejected) as batch:
        mnemo.archive_results(session, [("r1", "fine"), ("r9", "no such result")])
    assert not isinstance(batch.value, StateConflict)
    assert [(s.result_id, s.status) for s in batch.value.targets] == [("r1", "ok"), ("r9", "unknown")]
    assert all(isinstance(s, TargetStatus) for s in batch.value.targets)
    assert tenant.count(t.archive_entries) == 0  # nothing was archived

    with pytest.raises(TaskStateRejected) as state:
        mnemo.update_task_state(session, goal="g", confirmed=[{"fact": "f", "evidence_id": "no-such-record"}])
    assert state.value.problems and state.value.problems[0]["field"] == "confirmed[0].evidence_id"

    with pytest.raises(ContextOverBudget) as budget:
        mnemo.context(session, budget_tokens=20, instructions="be careful " * 50)
    assert isinstance(budget.value, InvalidInput) and budget.value.detail["budget_tokens"] == 20

    # REST's own validation (no error class of its own): the most general class of its category.
    with pytest.raises(InvalidInput) as invalid:
        mnemo.search("anything", limit=0)
    assert invalid.value.code == "invalid_request" and invalid.value.detail["errors"][0]["loc"][-1] == "limit"


def test_413_a_body_over_the_apis_limit_is_content_too_large(tenant: Tenant) -> None:
    session = unique("s")
    with pytest.raises(ContentTooLarge) as err:
        tenant.client("agent").record(session, "tool", "x" * MAX_REQUEST_BYTES)
    assert err.value.code == "request_too_large" and err.value.limit == MAX_REQUEST_BYTES
    assert err.value.size > MAX_REQUEST_BYTES and tenant.count(t.tool_results, session_id=session) == 0


def test_409_conflicts(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    session = unique("s")
    mnemo.record(session, "tool", "text")
    mnemo.archive_results(session, [("r1", "note")])
    with pytest.raises(ArchiveConflict) as archived:
        mnemo.archive_results(session, [("r1", "note again")])
    assert isinstance(archived.value, BatchRejected) and isinstance(archived.value, StateConflict)
    assert archived.value.targets[0].status == "already_archived"

    owner = unique("pat")
    mnemo.remember(owner, "allergy", "latex", "user_correction")
    with pytest.raises(MemoryConflict) as memory:
        mnemo.remember(owner, "allergy", "none", "document")
    assert memory.value.detail["current_provenance"] == "user_correction"

    key = unique("key")
    mnemo.record(session, "tool", "first", idempotency_key=key)
    with pytest.raises(IdempotencyMismatch) as reused:
        mnemo.record(session, "tool", "another body", idempotency_key=key)
    assert reused.value.detail["idempotency_key"] == key

    evidence_id = unique("ev")
    mnemo.put_evidence(EvidenceInput(body="x", source="y", evidence_id=evidence_id))
    mnemo.retract(evidence_id, "wrong")
    with pytest.raises(StateConflict):  # a second retract under another key: nothing is active
        mnemo.retract(evidence_id, "wrong")


def test_401_for_a_key_the_server_does_not_know(served: Served) -> None:
    with (
        MnemoClient(served.base_url, api_key="msk_nobody_0000000000000000", retry=FAST_RETRY) as mnemo,
        pytest.raises(Unauthenticated) as err,
    ):
        mnemo.search("anything")
    assert err.value.request_id and err.value.code == "unauthenticated"


def test_no_key_is_a_typed_error_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMO_API_KEY", raising=False)
    with pytest.raises(Unauthenticated, match="MNEMO_API_KEY"):
        MnemoClient("http://127.0.0.1:9")
    with pytest.raises(Unauthenticated):
        MnemoClient("http://127.0.0.1:9", api_key="")


def test_the_key_and_the_url_come_from_the_environment(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_API_KEY", tenant.served.key(tenant.id, "reader"))
    monkeypatch.setenv("MNEMO_URL", tenant.served.base_url)
    with MnemoClient() as mnemo:
        assert mnemo.base_url == tenant.served.base_url and mnemo.health().ok


def test_an_api_that_does_not_answer_is_api_unreachable_a_store_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with (
        MnemoClient(url, api_key="msk_x", retry=RetryPolicy(retries=1, backoff=0.01)) as mnemo,
        pytest.raises(ApiUnreachable) as err,
    ):
        mnemo.search("anything")
    assert isinstance(err.value, StoreUnavailable) and err.value.code == "api_unreachable"
    assert err.value.detail["sent"] is False and err.value.request_id == err.value.detail["request_id"]
    assert url in err.value.message
