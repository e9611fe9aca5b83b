"""Out-of-range times and oversized batches are the caller's errors (InvalidInput, 422 over
REST), never a server error, and a refused batch stores nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mnemo_sea.archive import EvidenceInput, InvalidInput, NotFound, Principal, Role, Sensitivity
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.archive.rules.policy import ArchivePolicy
from mnemo_sea.rest.app import create_app
from mnemo_sea.system.mnemo import Mnemo

A_AGENT = Principal("ta", "agent-a", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def test_out_of_range_times_are_invalid_input(mnemo: Mnemo) -> None:
    edge = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14)))
    with pytest.raises(InvalidInput) as e:
        mnemo.record(A_AGENT, "s1", "lab", "x", observed_at=edge)
    assert e.value.field == "observed_at"
    with pytest.raises(InvalidInput):
        mnemo.search(A_AGENT, "x", as_of=edge)
    with pytest.raises(InvalidInput):
        mnemo.remember(A_AGENT, "alice", "pet", "cat", "user_claim", ttl_seconds=100_000 * 86_400)
    key, _ = create_key(mnemo.archive.store, tenant_id="ta", subject="agent-a", roles=["agent"])
    client = TestClient(create_app(mnemo))
    headers = {"Authorization": f"Bearer {key}"}
    for path, body in (
        ("/v1/search", {"query": "x", "as_of": "9999-12-31T23:59:59-14:00"}),
        (
            "/v1/sessions/s1/results",
            {"tool_name": "t", "content": "x", "observed_at": "9999-12-31T23:59:59-14:00"},
        ),
        ("/v1/citations/check", {"citations": [], "answered_at": "0001-01-01T00:00:00+14:00"}),
    ):
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == 422, (path, response.text)


def test_a_batch_over_the_policy_limit_is_refused_whole(tmp_path: Path) -> None:
    from mnemo_sea.archive import Archive

    archive = Archive.open(str(tmp_path / "a.db"), ArchivePolicy(max_batch_size=3))
    try:
        items = [EvidenceInput(body=f"doc {i}", source="kb", evidence_id=f"d:{i}") for i in range(4)]
        with pytest.raises(InvalidInput, match="at most 3"):
            archive.write_evidence_batch(A_AGENT, items)
        with pytest.raises(NotFound):  # nothing of the batch was stored
            archive.get_evidence(A_AGENT, "d:0")
    finally:
        archive.close()
