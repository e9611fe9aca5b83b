"""Over REST, on the embedded default and server mode: `as_of` holds for every kind a search
returns, and every id a search returns can be checked as a citation."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rest_helpers import Api, evidence

LONG_AGO = "1971-01-01T00:00:00+00:00"


def tick() -> str:
    time.sleep(0.005)
    moment = datetime.now(UTC).isoformat()
    time.sleep(0.005)
    return moment


def write(api: Api, path: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    response = api.client.post(path, json=body, headers=headers)
    assert response.status_code in (200, 201), response.text
    out: dict[str, Any] = response.json()
    return out


def seed(api: Api, agent: dict[str, str]) -> tuple[str, str, str]:
    start = tick()
    write(api, "/v1/evidence", evidence("ferry", "okapi ferry leaves at noon"), agent)
    memory = {"owner": "u-1", "key": "pet", "provenance": "user_claim"}
    write(api, "/v1/memory", {**memory, "value": "okapi named Mimi"}, agent)
    middle = tick()
    write(api, "/v1/evidence", evidence("ferry", "okapi ferry leaves at dawn"), agent)
    write(api, "/v1/memory", {**memory, "value": "okapi named Rex", "provenance": "user_correction"}, agent)
    write(api, "/v1/summaries", {"text": "okapi ferry summary", "derived_from": ["evidence:ferry"]}, agent)
    write(api, "/v1/sessions/s-1/results", {"tool_name": "zoo.lookup", "content": "raw zoo log"}, agent)
    note = {"result_id": "r1", "note": "okapi sighting note"}
    write(api, "/v1/sessions/s-1/archive", {"targets": [note]}, agent)
    return start, middle, tick()


def search(api: Api, headers: dict[str, str], as_of: str | None, **extra: Any) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": "okapi", "mode": "bm25", **extra}
    if as_of is not None:
        body["as_of"] = as_of
    response = api.client.post("/v1/search", json=body, headers=headers)
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


def test_search_as_of_holds_for_every_kind(api: Api) -> None:
    agent = api.headers("agent")
    start, middle, end = seed(api, agent)
    assert search(api, agent, LONG_AGO) == []
    assert search(api, agent, start) == []
    between = {(h["kind"], h["evidence_id"], h["version"], h["snippet"]) for h in search(api, agent, middle)}
    assert between == {
        ("knowledge", "ferry", 1, "okapi ferry leaves at noon"),
        ("memory", "memory:u-1/pet", 1, "pet: okapi named Mimi"),
    }
    for when in (end, None):
        now = {(h["kind"], h["version"], h["snippet"]) for h in search(api, agent, when)}
        assert now == {
            ("knowledge", 2, "okapi ferry leaves at dawn"),
            ("memory", 2, "pet: okapi named Rex"),
            ("summary", 1, "okapi ferry summary"),
            ("tool_result", 1, "okapi sighting note"),
        }


def check(api: Api, headers: dict[str, str], citations: list[dict[str, Any]]) -> list[str]:
    response = api.client.post("/v1/citations/check", json={"citations": citations}, headers=headers)
    assert response.status_code == 200, response.text
    return [c["verdict"] for c in response.json()["citations"]]


def test_every_search_hit_is_a_checkable_citation(api: Api) -> None:
    agent = api.headers("agent")
    seed(api, agent)
    admin = api.headers("admin", clearance="restricted")
    write(
        api,
        "/v1/sessions/vault/results",
        {"tool_name": "t", "content": "x", "sensitivity": "restricted"},
        admin,
    )
    write(
        api, "/v1/sessions/vault/archive", {"targets": [{"result_id": "r1", "note": "okapi secret"}]}, admin
    )
    hits = search(api, agent, None)
    assert {h["kind"] for h in hits} == {"knowledge", "memory", "summary", "tool_result"}
    cited = [{k: h[k] for k in ("evidence_id", "version")} | {"quote": h["snippet"]} for h in hits]
    assert check(api, agent, cited) == ["ok"] * 4
    assert check(api, agent, [c | {"quote": "okapi named Zed"} for c in cited]) == ["quote_not_found"] * 4
    missing = ["result:s-1/r9", "memory:u-1/nothing", "sum:" + "f" * 32]
    assert check(api, agent, [{"evidence_id": i, "quote": "okapi"} for i in missing]) == ["unresolved"] * 3
    # Above the agent's clearance; another owner's session and memory, for a reader.
    secret = {"evidence_id": "result:vault/r1", "quote": "okapi secret"}
    assert check(api, agent, [secret]) == ["forbidden"]
    assert check(api, admin, [secret]) == ["ok"]
    about_others = [c for c in cited if c["evidence_id"].startswith(("result:", "memory:"))]
    assert check(api, api.headers("reader", subject="u-2"), about_others) == ["forbidden"] * 2
    # Another tenant's ids are unresolved, exactly like missing ones.
    stranger = api.other_tenant().headers("admin", clearance="restricted")
    assert check(api, stranger, [*cited, secret]) == ["unresolved"] * 5
