"""The memory routes keep the library's promises: precedence conflicts are 409 naming the current
fact, derived_from is checked, expired facts read as expired, and purge-expired and forget
delete like a deletion (with a receipt /v1/deletions/verify proves)."""

from __future__ import annotations

from typing import Any

from fakes import ManualWallClock
from rest_helpers import Api, assert_problem


def test_memory_conflict_derived_from_expiry_purge_and_forget(api: Api, wall_clock: ManualWallClock) -> None:
    agent, admin = api.headers("agent"), api.headers("admin", clearance="restricted")

    def remember(value: str, provenance: str, **extra: Any) -> Any:
        body = {"owner": "alice", "key": "diet", "value": value, "provenance": provenance, **extra}
        return api.client.post("/v1/memory", json=body, headers=agent)

    assert remember("salmon", "user_correction").status_code == 200
    conflict = assert_problem(remember("chicken", "user_claim"), 409, "memory_conflict")
    assert (conflict["current_provenance"], conflict["current_version"]) == ("user_correction", 1)
    missing = assert_problem(remember("beef", "document", derived_from="evidence:nope"), 404, "not_found")
    assert missing["ref"] == "evidence:nope"

    short = {
        "owner": "alice",
        "key": "mood",
        "value": "tired",
        "provenance": "user_claim",
        "ttl_seconds": 0.3,
    }
    assert api.client.post("/v1/memory", json=short, headers=agent).status_code == 200
    wall_clock.advance(0.4)
    history = api.client.get("/v1/memory/alice/history", params={"key": "mood"}, headers=agent).json()
    assert [f["status"] for f in history["items"]] == ["expired"]
    assert_problem(api.client.get("/v1/memory/alice", params={"key": "mood"}, headers=agent), 404)

    assert_problem(api.client.post("/v1/memory/purge-expired", headers=agent), 403)
    purged = api.client.post("/v1/memory/purge-expired", headers=admin).json()
    assert purged["purged"] == 1 and purged["receipt"]["memory_facts"] == [["alice", "mood", 1]]
    assert api.client.post("/v1/memory/purge-expired", headers=admin).json() == {"purged": 0, "receipt": None}
    history = api.client.get("/v1/memory/alice/history", params={"key": "mood"}, headers=agent).json()
    assert history["items"] == []

    forgot = api.client.delete("/v1/memory/alice", params={"key": "diet"}, headers=agent)
    assert forgot.status_code == 200, forgot.text
    receipt = forgot.json()
    assert receipt["target"] == "memory:alice/diet" and receipt["memory_facts"] == [["alice", "diet", 1]]
    check = api.client.post("/v1/deletions/verify", json=receipt, headers=admin).json()
    assert check["ok"] is True, check
    assert_problem(api.client.get("/v1/memory/alice", params={"key": "diet"}, headers=agent), 404)
    assert_problem(api.client.delete("/v1/memory/alice", params={"key": "diet"}, headers=agent), 404)
