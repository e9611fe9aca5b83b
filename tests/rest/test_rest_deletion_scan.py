"""Over REST, as through the library: deleting a session leaves its content in no column of
any table (embedded SQLite and server-mode PostgreSQL), and on the embedded default in no
byte of the archive's files (free pages, write-ahead log)."""

from __future__ import annotations

from leftovers import files_holding, new_marker, scan_database
from rest_helpers import Api

from mnemo_sea.system.wiring.layout import ARCHIVE_FILE


def test_deleting_a_session_over_rest_leaves_no_byte_of_it(api: Api) -> None:
    agent, admin = api.headers("agent"), api.headers("admin")
    marker = new_marker()

    def post(path: str, body: dict[str, object], key: str) -> None:
        response = api.client.post(path, json=body, headers={**agent, "Idempotency-Key": key})
        assert response.status_code in (200, 201), response.text

    post(
        "/v1/sessions/s/results",
        {"tool_name": "t", "content": f"raw {marker}", "arguments": {"q": marker}},
        "k1",
    )
    post("/v1/sessions/s/archive", {"targets": [{"result_id": "r1", "note": f"note {marker}"}]}, "k2")
    post(
        "/v1/evidence",
        {
            "evidence_id": "e",
            "body": f"body {marker}",
            "source": "kb",
            "statement": marker,
            "session_id": "s",
        },
        "k3",
    )
    post(
        "/v1/memory",
        {
            "owner": "agent-1",
            "key": "k",
            "value": f"v {marker}",
            "provenance": "tool_fact",
            "derived_from": "result:s/r1",
        },
        "k4",
    )
    post("/v1/summaries", {"text": f"summary {marker}", "derived_from": ["result:s/r1"]}, "k5")
    assert api.client.post("/v1/search", json={"query": marker}, headers=agent).json()["hits"]
    engine = api.mnemo.archive.store.engine
    assert "archive_entries.note" in scan_database(engine, marker)

    receipt = api.client.delete("/v1/sessions/s", headers=admin).json()
    assert receipt["summaries"] and receipt["memory_facts"] and receipt["evidence_versions"]
    check = api.client.post("/v1/deletions/verify", json=receipt, headers=admin).json()
    assert check["ok"] is True, check
    assert scan_database(engine, marker) == []
    if api.system.data_dir is not None:  # the embedded default: the archive's files themselves
        assert ARCHIVE_FILE in {p.name for p in api.system.data_dir.iterdir()}
        assert files_holding(api.system.data_dir, marker) == []
