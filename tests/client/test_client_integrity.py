"""The client returns an original only when its bytes hash to the hash its record names.

A real answer is taken from the served API, then served again altered (other bytes, or none)
through httpx's MockTransport, as a proxy that cut or rewrote the body would: the client must
raise IntegrityError, never hand the bytes back as the exact original.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from client_helpers import Served

from mnemo_sea.archive import EvidenceInput, IntegrityError
from mnemo_sea.client import MnemoClient


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
        with _replaying(altered) as fake, pytest.raises(IntegrityError):
            fake.recover("s1", result.result_id)


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
        with _replaying(altered) as fake, pytest.raises(IntegrityError):
            fake.get_evidence("kb:1", with_content=True)
