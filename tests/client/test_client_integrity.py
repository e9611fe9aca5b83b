"""The client returns an original only when its bytes hash to the hash its record names, and to
the hash the caller holds (`expected_sha256`).

A real answer is taken from the served API, then served again altered (other bytes, or none;
other bytes with every hash naming them; members that disagree) through httpx's MockTransport,
as a proxy that cut or rewrote the body would: the client must raise IntegrityFailure (its
InconsistentAnswer, where the answer contradicts itself or the hash held), never hand the bytes
back as the exact original.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from client_helpers import Served, Tampering, Tenant, json_altered

from mnemo_sea.archive import EvidenceInput, IntegrityFailure, InvalidInput
from mnemo_sea.client import MnemoClient
from mnemo_sea.client.errors import InconsistentAnswer


def _altered(answer: dict[str, Any]) -> list[dict[str, Any]]:
    without = {k: v for k, v in answer.items() if k not in ("content", "content_base64")}
    return [{**without, "content": "other bytes than the original's"}, without]


def _replaying(answer: dict[str, Any]) -> MnemoClient:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
    return MnemoClient("http://mnemo.invalid", api_key="k", transport=transport)


def test_an_altered_recovered_original_is_refused(served: Served) -> None:
    key = served.key(f"integrity-{uuid.uuid4().hex[:8]}", "agent")
    with MnemoClient(served.base_url, api_key=key) as client:
        result = client.record("s1", "logs.search", "the exact original bytes")
        client.archive_results("s1", [(result.result_id, "set aside")])
        assert client.recover("s1", result.result_id).content == b"the exact original bytes"
    answer = httpx.post(
        f"{served.base_url}/v1/sessions/s1/results/{result.result_id}/recover",
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    assert answer["content"] == "the exact original bytes"  # the real answer passes (above)
    for altered in _altered(answer):
        with _replaying(altered) as fake, pytest.raises(IntegrityFailure):
            fake.recover("s1", result.result_id)


def test_an_altered_excerpt_is_refused(served: Served) -> None:
    """The whole original is not sent with an excerpt: its bytes must hash to the answer's
    `excerpt_sha256` and be as long as its place in the original; and the original's hash must
    still be the one the caller holds."""
    key = served.key(f"integrity-{uuid.uuid4().hex[:8]}", "agent")
    text = "line one\nthe figure: 42\nline three\n"
    with MnemoClient(served.base_url, api_key=key) as client:
        result = client.record("s1", "report", text)
        client.archive_results("s1", [(result.result_id, "set aside")])
        got = client.recover("s1", result.result_id, lines=(2, 2), expected_sha256=result.content_sha256)
        assert got.content == b"the figure: 42\n"
    answer = httpx.post(
        f"{served.base_url}/v1/sessions/s1/results/{result.result_id}/recover",
        headers={"Authorization": f"Bearer {key}"},
        json={"lines": [2, 2]},
    ).json()
    longer = "the figure: 4242\n"
    resized = {**answer, "content": longer, "excerpt_sha256": hashlib.sha256(longer.encode()).hexdigest()}
    for altered in [*_altered(answer), resized]:
        with _replaying(altered) as fake, pytest.raises(IntegrityFailure):
            fake.recover("s1", result.result_id, lines=(2, 2))
    # An excerpt rewritten with its hash and at its length is consistent: the client, which is not
    # sent the whole original, cannot tell it from the real one (the server cut it from the
    # verified original). What it can check is that the original is the one the caller holds:
    with _replaying(answer) as fake, pytest.raises(InconsistentAnswer):
        fake.recover("s1", result.result_id, lines=(2, 2), expected_sha256="0" * 64)


def test_an_altered_evidence_body_is_refused(served: Served) -> None:
    key = served.key(f"integrity-{uuid.uuid4().hex[:8]}", "agent")
    with MnemoClient(served.base_url, api_key=key) as client:
        client.put_evidence(EvidenceInput("a policy text", "kb", evidence_id="kb:1"))
        _, body = client.get_evidence("kb:1", with_content=True)
        assert body == b"a policy text"
        assert client.get_evidence("kb:1")[1] is None  # no content asked, none checked
    answer = httpx.get(
        f"{served.base_url}/v1/evidence/kb:1",
        params={"content": "true"},
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    for altered in _altered(answer):
        with _replaying(altered) as fake, pytest.raises(IntegrityFailure):
            fake.get_evidence("kb:1", with_content=True)


# ---- an original altered together with its hashes ----------------------------------------------
#
# An answer whose content and every hash naming it were changed alike is consistent: only a hash
# the caller held before (the ToolResult `record` gave, the EvidenceRecord `put_evidence` gave)
# catches it, passed as `expected_sha256`. The client keeps none of its own.

FORGED = "the forged original"
FORGED_SHA = hashlib.sha256(FORGED.encode()).hexdigest()


def _forged_recovery(body: dict[str, Any]) -> None:
    for part in (body["original"], body["appended"]):
        part.update(content_sha256=FORGED_SHA, size=len(FORGED))
    body.update(content=FORGED, content_sha256=FORGED_SHA)


def test_a_recovered_original_changed_with_its_hashes_is_refused_against_the_hash_held(
    tenant: Tenant, tampering: Tampering
) -> None:
    client = tenant.client(transport=tampering.transport())
    result = client.record("s1", "logs.search", "the exact original bytes")
    client.archive_results("s1", [(result.result_id, "set aside")])
    key = uuid.uuid4().hex  # every recovery below is the one answer the server replays
    recovered = client.recover(
        "s1", result.result_id, expected_sha256=result.content_sha256, idempotency_key=key
    )
    assert recovered.content == b"the exact original bytes"  # the real answer passes the held hash
    tampering.alter = json_altered(_forged_recovery)
    # Consistent in itself: without a hash of its own the client cannot tell.
    assert client.recover("s1", result.result_id, idempotency_key=key).content == FORGED.encode()
    with pytest.raises(InconsistentAnswer) as refused:
        client.recover("s1", result.result_id, expected_sha256=result.content_sha256, idempotency_key=key)
    assert (refused.value.operation, refused.value.path) == ("recover", "content_sha256")
    assert refused.value.detail["expected_sha256"] == result.content_sha256


@pytest.mark.parametrize(
    ("change", "at"),
    [
        (lambda body: body.update(content_sha256=FORGED_SHA), "content_sha256"),
        (lambda body: body["appended"].update(content_sha256=FORGED_SHA), "appended.content_sha256"),
        (lambda body: body["original"].update(size=1), "original.size"),
        (lambda body: body["appended"].update(recovered_from="r9"), "appended.recovered_from"),
        (lambda body: body["original"].update(session_id="s2"), "original.session_id"),
    ],
    ids=["answer-hash", "copy-hash", "size", "copy-of-another", "other-session"],
)
def test_a_recovery_whose_members_disagree_is_refused(
    change: Callable[[dict[str, Any]], None], at: str, tenant: Tenant, tampering: Tampering
) -> None:
    client = tenant.client(transport=tampering.transport())
    result = client.record("s1", "logs.search", "the exact original bytes")
    client.archive_results("s1", [(result.result_id, "set aside")])
    key = uuid.uuid4().hex
    client.recover("s1", result.result_id, idempotency_key=key)
    tampering.alter = json_altered(change)
    with pytest.raises(InconsistentAnswer) as refused:
        client.recover("s1", result.result_id, idempotency_key=key)
    assert refused.value.path == at


def _forged_evidence(body: dict[str, Any]) -> None:
    body["record"]["content_sha256"] = FORGED_SHA
    body["content"] = FORGED


def test_an_evidence_body_changed_with_its_hash_is_refused_against_the_hash_held(
    tenant: Tenant, tampering: Tampering
) -> None:
    client = tenant.client(transport=tampering.transport())
    held = client.put_evidence(EvidenceInput("a policy text", "kb", evidence_id="kb:1")).stored[0]
    _, body = client.get_evidence("kb:1", with_content=True, expected_sha256=held.content_sha256)
    assert body == b"a policy text"
    tampering.alter = json_altered(_forged_evidence)
    assert client.get_evidence("kb:1", with_content=True)[1] == FORGED.encode()  # consistent in itself
    for with_content in (True, False):  # the record's hash alone is checked too
        with pytest.raises(InconsistentAnswer) as refused:
            client.get_evidence(
                "kb:1", with_content=with_content, expected_sha256=held.content_sha256.upper()
            )
        assert refused.value.path == "record.content_sha256"


def test_an_expected_hash_that_is_none_is_refused_before_any_request(
    tenant: Tenant, tampering: Tampering
) -> None:
    client = tenant.client(transport=tampering.transport())
    for call in (
        lambda: client.get_evidence("kb:1", expected_sha256="abc"),
        lambda: client.recover("s1", "r1", expected_sha256="g" * 64),
    ):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.field == "expected_sha256"
    assert tampering.sent == 0


def test_a_write_answered_with_another_hash_than_the_content_sent_is_refused(
    tenant: Tenant, tampering: Tampering
) -> None:
    client = tenant.client(transport=tampering.transport())
    client.record("s1", "logs.search", "sent bytes")
    client.put_evidence(EvidenceInput("a policy text", "kb", evidence_id="kb:1"))
    tampering.alter = json_altered(lambda body: body.update(content_sha256=FORGED_SHA))
    with pytest.raises(InconsistentAnswer) as refused:
        client.record("s1", "logs.search", "sent bytes")
    assert refused.value.path == "content_sha256"
    with pytest.raises(InconsistentAnswer) as refused:
        client.put_evidence(EvidenceInput("a policy text", "kb", evidence_id="kb:1"))
    assert refused.value.path == "content_sha256"
