"""Every endpoint's happy path and its honest errors, on the embedded default and in server mode."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rest_helpers import Api, assert_problem, evidence
from sqlalchemy import delete, event, select, update

from mnemo_sea.archive import Archive, ArchivePolicy
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.store import open_store
from mnemo_sea.rest.app import create_app
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.retrieval.points import point_id
from mnemo_sea.system.caches import MemoryCache, RedisCache
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

# ---- evidence ------------------------------------------------------------------------------------


def test_put_evidence_versions_and_reads_back(api: Api) -> None:
    agent = api.headers("agent")
    first = api.client.post("/v1/evidence", json=evidence("e1", "dose: 10 mg/kg"), headers=agent)
    assert first.status_code == 201
    assert (first.json()["version"], first.json()["status"]) == (1, "active")
    same = api.client.post("/v1/evidence", json=evidence("e1", "dose: 10 mg/kg"), headers=agent)
    assert same.json()["version"] == 1  # an unchanged body is not a new version
    second = api.client.post("/v1/evidence", json=evidence("e1", "dose: 12 mg/kg"), headers=agent)
    assert second.json()["version"] == 2

    current = api.client.get("/v1/evidence/e1", params={"content": True}, headers=agent).json()
    assert current["record"]["version"] == 2 and current["content"] == "dose: 12 mg/kg"
    assert current["record"]["content_sha256"] == hashlib.sha256(b"dose: 12 mg/kg").hexdigest()
    assert api.client.get("/v1/evidence/e1", headers=agent).json()["content"] is None

    old = api.client.get("/v1/evidence/e1", params={"version": 1, "content": True}, headers=agent).json()
    assert (old["record"]["status"], old["content"]) == ("superseded", "dose: 10 mg/kg")
    as_of = first.json()["recorded_at"]
    then = api.client.get("/v1/evidence/e1", params={"as_of": as_of, "content": True}, headers=agent)
    assert then.json()["content"] == "dose: 10 mg/kg"

    assert_problem(api.client.get("/v1/evidence/e1", params={"version": 3}, headers=agent), 404, "not_found")
    before = "2000-01-01T00:00:00Z"
    assert_problem(api.client.get("/v1/evidence/e1", params={"as_of": before}, headers=agent), 404)
    assert_problem(api.client.get("/v1/evidence/e1", params={"version": 0}, headers=agent), 422)
    assert_problem(api.client.get("/v1/evidence/nope", headers=agent), 404, "not_found")


def test_non_ascii_evidence_reads_back_exactly(api: Api) -> None:
    agent = api.headers("agent")
    body = "剂量 10 mg/kg — ½ tablet"
    api.client.post("/v1/evidence", json=evidence("zh", body), headers=agent)
    got = api.client.get("/v1/evidence/zh", params={"content": True}, headers=agent).json()
    assert got["content"] == body and got["content_base64"] is None
    assert got["record"]["content_sha256"] == hashlib.sha256(body.encode()).hexdigest()


def test_evidence_batch_is_all_or_nothing(api: Api) -> None:
    agent = api.headers("agent")
    good = evidence("b1", "fine item")
    bad_id = evidence("b 2", "an id with a space")
    no_source = {**evidence("b3", "a body"), "source": "  "}
    response = api.client.post("/v1/evidence/batch", json={"items": [good, bad_id, no_source]}, headers=agent)
    problem = assert_problem(response, 422, "invalid_batch")
    assert [(p["index"], p["field"]) for p in problem["problems"]] == [(1, "evidence_id"), (2, "source")]
    assert_problem(api.client.get("/v1/evidence/b1", headers=agent), 404)

    ok = api.client.post(
        "/v1/evidence/batch", json={"items": [good, evidence("b2", "second item")]}, headers=agent
    )
    assert ok.status_code == 201
    assert (ok.json()["new_versions"], ok.json()["unchanged"]) == (2, 0)
    again = api.client.post("/v1/evidence/batch", json={"items": [good]}, headers=agent).json()
    assert (again["new_versions"], again["unchanged"]) == (0, 1)


def test_evidence_history_pages(api: Api) -> None:
    agent = api.headers("agent")
    for n in range(5):
        api.client.post("/v1/evidence", json=evidence("h", f"revision {n}"), headers=agent)
    seen: list[int] = []
    offset: int | None = 0
    while offset is not None:
        page = api.client.get(
            "/v1/evidence-history/h", params={"offset": offset, "limit": 2}, headers=agent
        ).json()
        assert len(page["items"]) <= 2
        seen += [item["version"] for item in page["items"]]
        offset = page["next_offset"]
    assert seen == [1, 2, 3, 4, 5]
    statuses = [r["status"] for r in api.client.get("/v1/evidence-history/h", headers=agent).json()["items"]]
    assert statuses == ["superseded"] * 4 + ["active"]
    assert_problem(api.client.get("/v1/evidence-history/h", params={"limit": 0}, headers=agent), 422)
    assert_problem(api.client.get("/v1/evidence-history/none", headers=agent), 404)


def test_retract_withdraws_the_current_version_and_search_stops_finding_it(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post("/v1/evidence", json=evidence("r1", "amoxicillin recall lot 42"), headers=agent)
    found = api.client.post("/v1/search", json={"query": "amoxicillin recall"}, headers=agent).json()
    assert [h["evidence_id"] for h in found["hits"]] == ["r1"]
    point = point_id(api.tenant, "r1", 1, 0)
    assert point in api.mnemo.index.backend.payloads([point])  # the index did hold it

    body = {"evidence_id": "r1", "reason": "recall notice withdrawn by the supplier"}
    retracted = api.client.post("/v1/evidence/retract", json=body, headers=agent)
    assert retracted.status_code == 200, retracted.text
    assert (retracted.json()["version"], retracted.json()["status"]) == (1, "retracted")
    history = api.client.get("/v1/evidence-history/r1", headers=agent).json()["items"]
    assert [r["status"] for r in history] == ["retracted"]  # kept in history
    gone = api.client.post("/v1/search", json={"query": "amoxicillin recall"}, headers=agent).json()
    assert gone["hits"] == []
    # The stored state, not only the answers: the row says retracted, the index holds no point.
    with api.mnemo.archive.store.read() as conn:
        stored = conn.execute(
            select(t.evidence.c.status).where(
                t.evidence.c.tenant_id == api.tenant, t.evidence.c.evidence_id == "r1"
            )
        ).scalars()
        assert list(stored) == ["retracted"]
    assert point not in api.mnemo.index.backend.payloads([point])

    assert_problem(api.client.post("/v1/evidence/retract", json=body, headers=agent), 409, "state_conflict")
    missing = {"evidence_id": "nope", "reason": "x"}
    assert_problem(api.client.post("/v1/evidence/retract", json=missing, headers=agent), 404, "not_found")
    reader = api.headers("reader")
    assert_problem(api.client.post("/v1/evidence/retract", json=body, headers=reader), 403, "forbidden")
    assert_problem(api.client.post("/v1/evidence/retract", json={"evidence_id": "r1"}, headers=agent), 422)


def test_what_the_records_constrain_is_refused_by_the_schema_naming_the_field(api: Api) -> None:
    """The operation records constrain their fields (a non-empty query, known kinds and
    provenances, a non-empty value or batch), so the schema refuses these before the archive is
    asked: `invalid_request`, with `errors` naming each field, and nothing stored."""
    agent = api.headers("agent")
    session = api.client.post(
        "/v1/sessions/s-422/results", json={"tool_name": "t", "content": "x"}, headers=agent
    )
    assert session.status_code == 201, session.text
    cases = {
        ("/v1/search", "query"): {"query": ""},
        ("/v1/search", "kinds"): {"query": "x", "kinds": ["gossip"]},
        ("/v1/evidence", "provenance"): {**evidence("p1", "x"), "provenance": "rumour"},
        ("/v1/memory", "value"): {"owner": "o", "key": "k", "value": "", "provenance": "user_claim"},
        ("/v1/sessions/s-422/archive", "targets"): {"targets": []},
        ("/v1/sessions/s-422/context", "query"): {"budget_tokens": 4000, "query": ""},
    }
    for (path, field), body in cases.items():
        problem = assert_problem(api.client.post(path, json=body, headers=agent), 422, "invalid_request")
        assert any(e["loc"][-1] == field or field in e["loc"] for e in problem["errors"]), (path, problem)
    assert api.client.get("/v1/evidence/p1", headers=agent).status_code == 404  # nothing stored


# ---- search and citations ------------------------------------------------------------------------


def test_search_results_filters_and_no_match(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post(
        "/v1/evidence/batch",
        json={
            "items": [
                evidence("c1", "carprofen dose for dogs is 4 mg/kg", scope="vet", locator="p. 3"),
                {**evidence("c2", "carprofen side effects: vomiting", scope="vet"), "source": "leaflet"},
                evidence("c3", "carprofen tablets cost 12 EUR", scope="shop"),
            ]
        },
        headers=agent,
    )

    def ids(**body: Any) -> set[str]:
        response = api.client.post("/v1/search", json={"query": "carprofen", **body}, headers=agent)
        assert response.status_code == 200, response.text
        return {h["evidence_id"] for h in response.json()["hits"]}

    found = api.client.post("/v1/search", json={"query": "carprofen dose dogs"}, headers=agent).json()
    assert found["status"] == "results"
    top = found["hits"][0]
    assert (top["evidence_id"], top["locator"], top["label"]) == ("c1", "p. 3", "evidence")
    assert top["snippet"] in "carprofen dose for dogs is 4 mg/kg" and top["snippet"]
    assert ids() == {"c1", "c2", "c3"}
    assert ids(sources=["kb"]) == {"c1", "c3"}
    assert ids(scopes=["vet"]) == {"c1", "c2"}
    assert ids(kinds=["summary"]) == set()
    for mode in ("bm25", "dense"):
        assert "c1" in ids(mode=mode)
    assert ids(limit=1) <= {"c1", "c2", "c3"} and len(ids(limit=1)) == 1

    # Dense search always has neighbours, so "no match" shows on the lexical leg and in an empty tenant.
    nothing = api.client.post("/v1/search", json={"query": "zyxwvut", "mode": "bm25"}, headers=agent).json()
    assert nothing["status"] == "no_match" and nothing["hits"] == []
    empty = api.other_tenant().headers("reader")
    nothing = api.client.post("/v1/search", json={"query": "carprofen"}, headers=empty).json()
    assert nothing["status"] == "no_match" and nothing["hits"] == []
    assert_problem(api.client.post("/v1/search", json={"query": "x", "limit": 0}, headers=agent), 422)
    assert_problem(api.client.post("/v1/search", json={"query": "x", "mode": "fuzzy"}, headers=agent), 422)


def test_search_as_of_finds_what_was_in_force(api: Api) -> None:
    agent = api.headers("agent")
    v1 = api.client.post("/v1/evidence", json=evidence("p", "the ferry leaves at noon"), headers=agent).json()
    api.client.post("/v1/evidence", json=evidence("p", "the bus leaves at dawn"), headers=agent)
    now = api.client.post("/v1/search", json={"query": "ferry noon", "mode": "bm25"}, headers=agent).json()
    assert all(h["evidence_id"] != "p" for h in now["hits"])
    then = api.client.post(
        "/v1/search", json={"query": "ferry noon", "mode": "bm25", "as_of": v1["recorded_at"]}, headers=agent
    ).json()
    assert [(h["evidence_id"], h["version"]) for h in then["hits"]] == [("p", 1)]


def test_search_with_the_model_down_is_503_never_an_empty_200(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = api.headers("agent")
    api.client.post("/v1/evidence", json=evidence("m", "melatonin for cats"), headers=agent)

    def down(texts: Any) -> Any:
        raise IndexUnavailable("embedder", "the model is switched off")

    monkeypatch.setattr(api.mnemo.index.embedder, "embed_queries", down)
    problem = assert_problem(
        api.client.post("/v1/search", json={"query": "melatonin", "mode": "dense"}, headers=agent), 503
    )
    assert problem["code"] == "index_unavailable"
    bm25 = api.client.post("/v1/search", json={"query": "melatonin", "mode": "bm25"}, headers=agent)
    assert bm25.status_code == 200 and bm25.json()["hits"]


def test_citations_check(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post(
        "/v1/evidence", json=evidence("d", "Give 10 mg/kg twice daily.", locator="p. 12"), headers=agent
    )
    report = api.client.post(
        "/v1/citations/check",
        json={
            "citations": [
                {"evidence_id": "d", "quote": "10 mg/kg twice daily", "locator": "p. 12"},
                {"evidence_id": "d", "quote": "20 mg/kg"},
                {"evidence_id": "missing", "quote": "anything"},
            ]
        },
        headers=agent,
    )
    assert report.status_code == 200, report.text
    body = report.json()
    assert [c["verdict"] for c in body["citations"]] == ["ok", "quote_not_found", "unresolved"]
    assert (body["total"], body["ok"]) == (3, 1)
    assert body["precision"] == pytest.approx(1 / 3)
    empty = api.client.post("/v1/citations/check", json={"citations": []}, headers=agent).json()
    assert (empty["total"], empty["precision"]) == (0, None)


# ---- sessions ------------------------------------------------------------------------------------


def test_sessions_are_listed_in_pages_of_the_callers_tenant_only(api: Api) -> None:
    """GET /v1/sessions: oldest first, counts of live and archived results, paged; another
    tenant's sessions never appear (counted in the raw table, not only through the API), and a
    reader's key lists only the sessions about itself."""
    agent = api.headers("agent")
    for n in range(3):
        body = {"tool_name": "t", "content": f"x {n}", "owner": f"pet-{n}"}
        assert api.client.post(f"/v1/sessions/s-{n}/results", json=body, headers=agent).status_code == 201
    other = api.other_tenant()
    other_body = {"tool_name": "t", "content": "theirs"}
    other_agent = other.headers("agent")
    assert (
        api.client.post("/v1/sessions/s-x/results", json=other_body, headers=other_agent).status_code == 201
    )
    api.client.post(
        "/v1/sessions/s-1/archive", json={"targets": [{"result_id": "r1", "note": "n"}]}, headers=agent
    )

    first = api.client.get("/v1/sessions", params={"limit": 2}, headers=agent).json()
    assert [i["session_id"] for i in first["items"]] == ["s-0", "s-1"] and first["next_offset"] == 2
    assert (first["items"][1]["live"], first["items"][1]["archived"]) == (0, 1)
    rest = api.client.get("/v1/sessions", params={"offset": 2}, headers=agent).json()
    assert [i["session_id"] for i in rest["items"]] == ["s-2"] and rest["next_offset"] is None
    with api.system.mnemo.archive.store.read() as conn:
        ours = conn.execute(select(t.sessions.c.session_id).where(t.sessions.c.tenant_id == api.tenant))
        assert sorted(r.session_id for r in ours) == ["s-0", "s-1", "s-2"]
    theirs = api.client.get("/v1/sessions", headers=other_agent).json()["items"]
    assert [i["session_id"] for i in theirs] == ["s-x"]  # not one of ours

    reader = api.headers("reader", subject="pet-2")
    mine = api.client.get("/v1/sessions", headers=reader).json()["items"]
    assert [i["session_id"] for i in mine] == ["s-2"]
    assert_problem(api.client.get("/v1/sessions", params={"limit": 0}, headers=agent), 422)

    # One result, looked at without changing the session (recover is what appends).
    looked = api.client.get("/v1/sessions/s-1/results/r1", params={"content": True}, headers=agent).json()
    assert (looked["result"]["state"], looked["content"]) == ("archived", "x 1")
    assert api.client.get("/v1/sessions/s-1/results/r1", headers=agent).json()["content"] is None
    own_reader = api.headers("reader", subject="pet-1")
    refused = api.client.get("/v1/sessions/s-1/results/r1", params={"content": True}, headers=own_reader)
    assert_problem(refused, 403, "forbidden")  # an archived original: the agent role, as recover
    assert_problem(api.client.get("/v1/sessions/s-1/results/r1", headers=other_agent), 404, "not_found")
    with api.system.mnemo.archive.store.read() as conn:
        rows = conn.execute(select(t.tool_results).where(t.tool_results.c.tenant_id == api.tenant))
        assert len(list(rows)) == 3  # nothing appended by looking


def test_record_list_and_live_view(api: Api) -> None:
    agent = api.headers("agent")
    ids = []
    for n in range(5):
        response = api.client.post(
            "/v1/sessions/visit-1/results",
            json={"tool_name": "vitals.read", "content": f"reading {n}", "arguments": {"n": n}},
            headers=agent,
        )
        assert response.status_code == 201
        ids.append(response.json()["result_id"])
    assert ids == ["r1", "r2", "r3", "r4", "r5"]

    first = api.client.get(
        "/v1/sessions/visit-1/results", params={"limit": 2, "offset": 0}, headers=agent
    ).json()
    assert [r["result_id"] for r in first["items"]] == ["r1", "r2"] and first["next_offset"] == 2
    last = api.client.get("/v1/sessions/visit-1/results", params={"limit": 2, "offset": 4}, headers=agent)
    assert [r["result_id"] for r in last.json()["items"]] == ["r5"] and last.json()["next_offset"] is None

    archived = api.client.post(
        "/v1/sessions/visit-1/archive",
        json={"targets": [{"result_id": "r2", "note": "pulse was normal"}]},
        headers=agent,
    )
    assert archived.status_code == 200 and archived.json()["archived"] == ["r2"]
    view = api.client.get("/v1/sessions/visit-1/live", headers=agent).json()
    assert [i["result"]["result_id"] for i in view["items"]] == ["r1", "r2", "r3", "r4", "r5"]
    assert [i["result"]["state"] for i in view["items"]][:3] == ["live", "archived", "live"]
    stub = view["items"][1]["rendered"]
    assert "pulse was normal" in stub and "reading 1" not in stub
    # The note sits in place, between its neighbours, in the working context.
    text = view["text"]
    assert text.index("reading 0") < text.index("pulse was normal") < text.index("reading 2")
    assert "reading 1" not in text

    assert_problem(api.client.get("/v1/sessions/no-such/live", headers=agent), 404, "not_found")
    assert_problem(
        api.client.post(
            "/v1/sessions/bad id/results", json={"tool_name": "t", "content": "x"}, headers=agent
        ),
        422,
    )


def test_record_needs_exactly_one_content(api: Api) -> None:
    agent = api.headers("agent")
    both = {"tool_name": "t", "content": "x", "content_base64": "eA=="}
    assert_problem(api.client.post("/v1/sessions/s/results", json=both, headers=agent), 422)
    neither = {"tool_name": "t"}
    assert_problem(api.client.post("/v1/sessions/s/results", json=neither, headers=agent), 422)
    not_b64 = {"tool_name": "t", "content_base64": "***"}
    problem = assert_problem(api.client.post("/v1/sessions/s/results", json=not_b64, headers=agent), 422)
    assert problem["field"] == "content_base64"
    assert_problem(api.client.get("/v1/sessions/s/results", headers=agent), 404)


def test_archive_batch_rejections_change_nothing(api: Api) -> None:
    agent = api.headers("agent")
    for content, policy in [
        ("price 10 EUR", "price"),
        ("approved by dr. li", "vet_approval"),
        ("log", "default"),
    ]:
        api.client.post(
            "/v1/sessions/s/results",
            json={"tool_name": "tool", "content": content, "policy_class": policy},
            headers=agent,
        )

    def states() -> list[str]:
        items = api.client.get("/v1/sessions/s/results", headers=agent).json()["items"]
        return [r["state"] for r in items]

    unknown = api.client.post(
        "/v1/sessions/s/archive",
        json={"targets": [{"result_id": "r1", "note": "price"}, {"result_id": "r9", "note": "?"}]},
        headers=agent,
    )
    problem = assert_problem(unknown, 422, "batch_rejected")
    assert [(t["result_id"], t["status"]) for t in problem["targets"]] == [("r1", "ok"), ("r9", "unknown")]
    assert states() == ["live", "live", "live"]

    protected = api.client.post(
        "/v1/sessions/s/archive", json={"targets": [{"result_id": "r2", "note": "approval"}]}, headers=agent
    )
    assert [t["status"] for t in assert_problem(protected, 422, "batch_rejected")["targets"]] == ["protected"]
    assert states() == ["live", "live", "live"]

    ok = api.client.post(
        "/v1/sessions/s/archive",
        json={"targets": [{"result_id": "r1", "note": "price"}, {"result_id": "r3", "note": "log"}]},
        headers=agent,
    )
    assert ok.status_code == 200 and ok.json()["archived"] == ["r1", "r3"]
    again = api.client.post(
        "/v1/sessions/s/archive", json={"targets": [{"result_id": "r1", "note": "again"}]}, headers=agent
    )
    problem = assert_problem(again, 409, "archive_conflict")
    assert problem["targets"][0]["status"] == "already_archived"
    assert states() == ["archived", "live", "archived"]


def test_recover_with_a_span_returns_the_excerpt_checked_against_the_whole_original(api: Api) -> None:
    agent = api.headers("agent")
    log = "".join(f"step {n} ok\n" for n in range(1, 30)).replace("step 17 ok", "step 17 ERROR disk full")
    api.client.post("/v1/sessions/s/results", json={"tool_name": "deploy", "content": log}, headers=agent)
    api.client.post(
        "/v1/sessions/s/archive", json={"targets": [{"result_id": "r1", "note": "deploy log"}]}, headers=agent
    )

    found = api.client.post("/v1/sessions/s/results/r1/recover", json={"lines": [17, 17]}, headers=agent)
    assert found.status_code == 200
    body = found.json()
    assert body["content"] == "step 17 ERROR disk full\n"
    assert body["content_sha256"] == hashlib.sha256(log.encode()).hexdigest()
    assert body["excerpt_sha256"] == hashlib.sha256(b"step 17 ERROR disk full\n").hexdigest()
    assert body["appended"]["excerpt"]["first_line"] == 17 and body["appended"]["recovered_from"] == "r1"

    problem = assert_problem(
        api.client.post("/v1/sessions/s/results/r1/recover", json={"byte_range": [10, 2]}, headers=agent),
        422,
        "invalid_span",
    )
    assert (problem["field"], problem["lines"], problem["bytes"]) == ("byte_range", 29, len(log.encode()))
    assert_problem(
        api.client.post(
            "/v1/sessions/s/results/r1/recover", json={"lines": [1, 2], "match": "x"}, headers=agent
        ),
        422,
        "invalid_input",
    )
    assert_problem(
        api.client.post("/v1/sessions/s/results/r1/recover", json={"lines": "1-2"}, headers=agent),
        422,
        "invalid_request",  # a shape the schema refuses, before the archive is asked
    )
    results = api.client.get("/v1/sessions/s/results", headers=agent).json()
    assert [r["result_id"] for r in results["items"]] == ["r1", "r2"]  # refusals appended nothing


def test_curate_and_recall_over_rest(api: Api) -> None:
    agent = api.headers("agent")
    log = "\n".join(f"2026-12-01T10:00:{n % 60:02d}Z INFO step {n} ok" for n in range(300))
    log += "\n2026-12-01T10:05:00Z ERROR payment gateway 502 for order O-7781"
    for tool, content in (("logs.search", log), ("ask_owner", "ok"), ("notes", "next: refund check")):
        api.client.post(
            "/v1/sessions/s/results",
            json={"tool_name": tool, "content": content, "arguments": {"q": tool}},
            headers=agent,
        )
    curated = api.client.post(
        "/v1/sessions/s/curate",
        json={"large_result_tokens": 500},
        headers={**agent, "Idempotency-Key": "t-1"},
    )
    assert curated.status_code == 200, curated.text
    body = curated.json()
    assert [a["result_id"] for a in body["archived"]] == ["r1"]
    assert "ERROR payment gateway 502 for order O-7781" in body["archived"][0]["note"]
    again = api.client.post(
        "/v1/sessions/s/curate",
        json={"large_result_tokens": 500},
        headers={**agent, "Idempotency-Key": "t-1"},
    )
    assert again.status_code == 200 and again.json()["archived"] == []  # a retry archives nothing twice

    found = api.client.post(
        "/v1/sessions/s/recall", json={"query": "gateway 502 O-7781", "around": 0}, headers=agent
    )
    assert found.status_code == 200, found.text
    recall = found.json()
    assert recall["status"] == "recovered" and recall["lines"] == [301, 301]
    assert recall["recovered"]["content"] == "2026-12-01T10:05:00Z ERROR payment gateway 502 for order O-7781"
    missing = api.client.post(
        "/v1/sessions/s/recall", json={"query": "vet approval for carprofen"}, headers=agent
    )
    assert missing.json()["status"] == "not_found" and missing.json()["recovered"] is None
    # A need every line of a 2,000-line log holds alike: where, and nothing brought back.
    wide = "\n".join(f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z INFO step {n} ok" for n in range(2_000))
    for tool, content in (("logs.tail", wide), ("notes", "a"), ("notes", "b")):
        api.client.post("/v1/sessions/w/results", json={"tool_name": tool, "content": content}, headers=agent)
    api.client.post("/v1/sessions/w/curate", json={"large_result_tokens": 500}, headers=agent)
    alike = api.client.post("/v1/sessions/w/recall", json={"query": "step ok", "around": 0}, headers=agent)
    assert alike.status_code == 200, alike.text
    assert {k: alike.json()[k] for k in ("status", "result_id", "lines", "recovered")} == {
        "status": "ambiguous",
        "result_id": "r1",
        "lines": [1, 2_000],
        "recovered": None,
    }
    assert_problem(api.client.post("/v1/sessions/s/recall", json={"query": ""}, headers=agent), 422)
    reader = api.headers("reader")
    assert_problem(api.client.post("/v1/sessions/s/curate", headers=reader), 403)


def test_recover_returns_the_exact_bytes_with_a_staleness_warning(api: Api) -> None:
    agent = api.headers("agent")
    raw = b"\x89PNG\r\n\x1a\n\x00\xff binary"
    api.client.post(
        "/v1/sessions/s/results",
        json={"tool_name": "shop.price", "content": "widget: 4 EUR", "policy_class": "price"},
        headers=agent,
    )
    api.client.post(
        "/v1/sessions/s/results",
        json={"tool_name": "xray", "content_base64": base64.b64encode(raw).decode()},
        headers=agent,
    )
    assert_problem(api.client.post("/v1/sessions/s/results/r1/recover", headers=agent), 409, "state_conflict")
    api.client.post(
        "/v1/sessions/s/archive",
        json={"targets": [{"result_id": "r1", "note": "price seen"}, {"result_id": "r2", "note": "image"}]},
        headers=agent,
    )

    price = api.client.post("/v1/sessions/s/results/r1/recover", headers=agent).json()
    assert price["content"] == "widget: 4 EUR" and price["content_base64"] is None
    assert price["content_sha256"] == hashlib.sha256(b"widget: 4 EUR").hexdigest()
    assert price["staleness_warning"] and "re-query" in price["staleness_warning"]
    assert price["appended"]["result_id"] == "r3" and price["appended"]["recovered_from"] == "r1"
    assert "widget: 4 EUR" in price["rendered"]

    image = api.client.post("/v1/sessions/s/results/r2/recover", headers=agent).json()
    assert image["content"] is None and base64.b64decode(image["content_base64"]) == raw
    assert image["content_sha256"] == hashlib.sha256(raw).hexdigest()
    assert image["staleness_warning"] is None

    assert_problem(api.client.post("/v1/sessions/s/results/r9/recover", headers=agent), 404, "not_found")
    assert_problem(api.client.post("/v1/sessions/s/results/x1/recover", headers=agent), 422)
    reader = api.headers("reader")
    assert_problem(api.client.post("/v1/sessions/s/results/r1/recover", headers=reader), 403)


# ---- memory and summaries ------------------------------------------------------------------------


def test_memory_remember_current_history(api: Api) -> None:
    agent = api.headers("agent")

    def remember(value: str, provenance: str) -> dict[str, Any]:
        body = {"owner": "alice", "key": "pet/diet", "value": value, "provenance": provenance}
        response = api.client.post("/v1/memory", json=body, headers=agent)
        assert response.status_code == 200, response.text
        return dict(response.json())

    assert remember("chicken", "user_claim")["persisted"] is True
    assert remember("salmon", "user_correction")["fact"]["version"] == 2
    guess = remember("beef", "model_inference")
    assert guess["persisted"] is False and guess["reason"]

    params = {"key": "pet/diet"}
    current = api.client.get("/v1/memory/alice", params=params, headers=agent).json()
    assert (current["value"], current["provenance"]) == ("salmon", "user_correction")
    history = api.client.get("/v1/memory/alice/history", params={**params, "limit": 1}, headers=agent).json()
    assert [f["value"] for f in history["items"]] == ["chicken"] and history["next_offset"] == 1
    rest = api.client.get("/v1/memory/alice/history", params={**params, "offset": 1}, headers=agent).json()
    assert [f["value"] for f in rest["items"]] == ["salmon"] and rest["next_offset"] is None

    assert_problem(api.client.get("/v1/memory/alice", params={"key": "other"}, headers=agent), 404)
    bad = {"owner": "alice", "key": "k", "value": "v", "provenance": "rumour"}
    assert_problem(api.client.post("/v1/memory", json=bad, headers=agent), 422)


def test_summaries(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post("/v1/evidence", json=evidence("src", "long original text about kidneys"), headers=agent)
    created = api.client.post(
        "/v1/summaries",
        json={"text": "kidney summary", "derived_from": ["evidence:src"], "trace_ref": "run-7"},
        headers=agent,
    )
    assert created.status_code == 201
    summary = created.json()
    assert summary["derived_from"] == ["evidence:src"] and "derived" in summary["label"]
    got = api.client.get(f"/v1/summaries/{summary['summary_id']}", headers=agent).json()
    assert got == summary
    hits = api.client.post(
        "/v1/search", json={"query": "kidney summary", "kinds": ["summary"]}, headers=agent
    ).json()["hits"]
    assert [h["evidence_id"] for h in hits] == [summary["summary_id"]]

    missing = api.client.post(
        "/v1/summaries", json={"text": "t", "derived_from": ["evidence:none"]}, headers=agent
    )
    assert assert_problem(missing, 404, "not_found")["ref"] == "evidence:none"
    assert_problem(api.client.get("/v1/summaries/sum:none", headers=agent), 404)


# ---- deletion --------------------------------------------------------------------------------------


def test_delete_evidence_receipt_verify_then_gone(api: Api) -> None:
    agent, admin = api.headers("agent"), api.headers("admin")
    api.client.post("/v1/evidence", json=evidence("gone", "quokka sightings on rottnest"), headers=agent)
    api.client.post("/v1/evidence", json=evidence("gone", "quokka counts on rottnest"), headers=agent)
    api.client.post(
        "/v1/summaries", json={"text": "quokka notes", "derived_from": ["evidence:gone"]}, headers=agent
    )
    assert api.client.post("/v1/search", json={"query": "quokka rottnest"}, headers=agent).json()["hits"]

    receipt = api.client.delete("/v1/evidence/gone", headers=admin)
    assert receipt.status_code == 200
    body = receipt.json()
    assert body["tenant_id"] == api.tenant and sorted(map(tuple, body["evidence_versions"])) == [
        ("gone", 1),
        ("gone", 2),
    ]
    assert len(body["summaries"]) == 1
    check = api.client.post("/v1/deletions/verify", json=body, headers=admin).json()
    assert check == {
        "ok": True,
        "status": "ok",
        "archive_leftovers": [],
        "index_leftovers": [],
        "pending_outbox": 0,
        "erasure": "done",
        "erasure_detail": "",
    }

    found = api.client.post("/v1/search", json={"query": "quokka rottnest"}, headers=agent).json()
    assert found["status"] == "no_match"
    assert_problem(api.client.get("/v1/evidence/gone", headers=agent), 404)
    assert_problem(api.client.get("/v1/evidence-history/gone", headers=agent), 404)
    assert_problem(api.client.get(f"/v1/summaries/{body['summaries'][0]}", headers=agent), 404)
    assert_problem(api.client.delete("/v1/evidence/gone", headers=admin), 404)

    # Another tenant's receipt (or a forged one) proves nothing here.
    other = api.other_tenant()
    assert_problem(api.client.post("/v1/deletions/verify", json=body, headers=other.headers("admin")), 404)


def test_forged_receipts_and_a_rewound_audit_chain_are_rejected(api: Api) -> None:
    agent, admin = api.headers("agent"), api.headers("admin")
    api.client.post("/v1/evidence", json=evidence("real", "a record to delete"), headers=agent)
    receipt = api.client.delete("/v1/evidence/real", headers=admin).json()
    assert len(receipt["signature"]) == 64 and receipt["audit_hash"] and receipt["key_id"]
    anchor = api.client.post("/v1/admin/audit/anchor", headers=admin).json()
    assert anchor["seq"] == receipt["audit_seq"] and anchor["hash"] == receipt["audit_hash"]

    def verify(doc: dict[str, Any]) -> Any:
        return api.client.post("/v1/deletions/verify", json=doc, headers=admin)

    forged = {**receipt, "evidence_versions": [["never-existed", 1]], "target": "evidence:never-existed"}
    unsigned = {k: v for k, v in receipt.items() if k not in ("signature", "key_id")}
    for doc, check in [
        (forged, "signature"),
        (unsigned, "unsigned"),
        ({**receipt, "key_id": "f" * 16}, "foreign_key"),
    ]:
        assert assert_problem(verify(doc), 422, "receipt_invalid")["check"] == check
    assert verify(receipt).json()["ok"] is True

    # The truncation attack: drop the newest audit rows and set the head back.
    store = api.mnemo.archive.store
    with store.write() as conn:
        first = receipt["audit_seq"] - 1
        conn.execute(
            delete(t.audit_events).where(
                t.audit_events.c.tenant_id == api.tenant, t.audit_events.c.seq > first
            )
        )
        survivor = conn.execute(
            select(t.audit_events.c.hash).where(
                t.audit_events.c.tenant_id == api.tenant, t.audit_events.c.seq == first
            )
        ).scalar_one()
        conn.execute(
            update(t.audit_heads)
            .where(t.audit_heads.c.tenant_id == api.tenant)
            .values(last_seq=first, last_hash=survivor)
        )
    assert api.client.get("/v1/admin/audit/verify", headers=admin).json()["ok"] is True
    anchored = api.client.post("/v1/admin/audit/verify", json={"anchors": [anchor]}, headers=admin).json()
    assert anchored["ok"] is False and "rewound" in anchored["problems"][0]
    by_receipt = api.client.post("/v1/admin/audit/verify", json={"receipts": [receipt]}, headers=admin).json()
    assert by_receipt["ok"] is False
    assert assert_problem(verify(receipt), 422, "receipt_invalid")["check"] == "unknown_audit_event"
    bad_anchor = {**anchor, "seq": 1}
    response = api.client.post("/v1/admin/audit/verify", json={"anchors": [bad_anchor]}, headers=admin)
    assert assert_problem(response, 422, "receipt_invalid")["check"] == "signature"


def test_delete_session_and_owner(api: Api) -> None:
    agent, admin = api.headers("agent"), api.headers("admin")
    api.client.post(
        "/v1/sessions/s/results", json={"tool_name": "t", "content": "walrus tusk report"}, headers=agent
    )
    api.client.post(
        "/v1/sessions/s/archive", json={"targets": [{"result_id": "r1", "note": "walrus"}]}, headers=agent
    )
    receipt = api.client.delete("/v1/sessions/s", headers=admin).json()
    assert receipt["sessions"] == ["s"] and receipt["tool_results"] == ["s/r1"]
    assert api.client.post("/v1/deletions/verify", json=receipt, headers=admin).json()["ok"] is True
    assert_problem(api.client.post("/v1/sessions/s/results/r1/recover", headers=agent), 404)
    assert_problem(api.client.get("/v1/sessions/s/live", headers=agent), 404)
    assert (
        api.client.post("/v1/search", json={"query": "walrus"}, headers=agent).json()["status"] == "no_match"
    )

    api.client.post(
        "/v1/memory",
        json={"owner": "bob", "key": "allergy", "value": "penicillin", "provenance": "user_claim"},
        headers=agent,
    )
    owner = api.client.delete("/v1/owners/bob", headers=admin).json()
    assert [tuple(f[:2]) for f in owner["memory_facts"]] == [("bob", "allergy")]
    assert_problem(api.client.get("/v1/memory/bob", params={"key": "allergy"}, headers=agent), 404)


# ---- admin -----------------------------------------------------------------------------------------


def test_admin_audit_and_fsck(api: Api) -> None:
    agent, admin = api.headers("agent"), api.headers("admin")
    for n in range(3):
        api.client.post("/v1/evidence", json=evidence(f"a{n}", f"audit me {n}"), headers=agent)
        api.client.delete(f"/v1/evidence/a{n}", headers=admin)

    verify = api.client.get("/v1/admin/audit/verify", headers=admin).json()
    assert verify["ok"] is True and verify["events"] >= 3 and verify["problems"] == []

    seqs: list[int] = []
    after = 0
    while True:
        page = api.client.get(
            "/v1/admin/audit/events", params={"after_seq": after, "limit": 2}, headers=admin
        ).json()
        seqs += [e["seq"] for e in page["items"]]
        if page["next_offset"] is None:
            break
        after = page["next_offset"]
    assert seqs == sorted(seqs) and len(seqs) == verify["events"]
    deletes = api.client.get("/v1/admin/audit/events", headers=admin).json()["items"]
    assert [e["target"] for e in deletes if e["action"] == "delete"] == [
        "evidence:a0",
        "evidence:a1",
        "evidence:a2",
    ]

    fsck = api.client.get("/v1/admin/fsck", headers=admin).json()
    assert fsck == {"ok": True, "problems": []}


# ---- health ----------------------------------------------------------------------------------------


def test_liveness_is_public_and_readiness_lists_components(api: Api) -> None:
    live = api.client.get("/v1/health/live")
    assert live.status_code == 200 and live.json() == {"status": "alive"}
    ready = api.client.get("/v1/health/ready", headers=api.headers("reader"))
    assert ready.status_code == 200
    body = ready.json()
    assert body["status"] == "ready" and body["mode"] == api.system.mode
    assert set(body["components"]) == {"archive", "index", "cache"}
    assert all(c["ok"] for c in body["components"].values())


def test_readiness_is_503_when_the_cache_is_unreachable(api: Api) -> None:
    dead_cache = RedisCache("redis://127.0.0.1:1/0", prefix="mnemo-rest-dead:", timeout=0.2, retries=0)
    try:
        # The same archive and index, with a cache that cannot be reached.
        broken = Mnemo(api.mnemo.archive, api.mnemo.index, dead_cache)
        client = TestClient(create_app(broken))
        response = client.get("/v1/health/ready", headers=api.headers("reader"))
        problem = assert_problem(response, 503, "not_ready")
        assert response.headers["retry-after"]
        components = problem["components"]
        assert components["cache"]["ok"] is False and components["cache"]["error"]
        assert components["archive"]["ok"] is True and components["index"]["ok"] is True
        assert client.get("/v1/health/live").status_code == 200
    finally:
        dead_cache.close()


def test_an_unreachable_database_is_503_and_liveness_still_answers(api: Api) -> None:
    store = open_store("postgresql+psycopg://postgres@127.0.0.1:1/nowhere", migrate=False)
    try:
        broken = Mnemo(Archive(store), api.mnemo.index, MemoryCache())
        client = TestClient(create_app(broken))
        key = api.key("admin")  # minted in the real database; the broken app cannot even check it
        for method, path in [("GET", "/v1/health/ready"), ("POST", "/v1/sessions/s/results")]:
            body = {"tool_name": "t", "content": "x"} if method == "POST" else None
            response = client.request(method, path, json=body, headers={"X-API-Key": key})
            assert_problem(response, 503, "store_unavailable")
            assert response.headers["retry-after"]
        assert client.get("/v1/health/live").status_code == 200
    finally:
        store.dispose()


@contextmanager
def failing_writes(api: Api) -> Iterator[None]:
    """The database fails every INSERT (as a dropped connection or full disk would), reads work."""
    engine = api.mnemo.archive.store.engine
    error = engine.dialect.loaded_dbapi.OperationalError

    def fail(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            raise error("simulated outage: could not write")

    event.listen(engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail)


def test_a_store_failing_mid_write_is_503_and_nothing_is_written(api: Api) -> None:
    agent = api.headers("agent")
    with failing_writes(api):
        for path, body in [
            ("/v1/evidence", evidence("w", "never stored")),
            ("/v1/sessions/w/results", {"tool_name": "t", "content": "never stored"}),
        ]:
            response = api.client.post(path, json=body, headers=agent)
            assert_problem(response, 503, "store_unavailable")
            assert response.headers["retry-after"]
    assert_problem(api.client.get("/v1/evidence/w", headers=agent), 404)
    assert_problem(api.client.get("/v1/sessions/w/results", headers=agent), 404)
    assert api.client.post("/v1/search", json={"query": "never stored"}, headers=agent).json()["hits"] == []


# ---- limits ----------------------------------------------------------------------------------------


def test_a_body_over_the_request_limit_is_413(api: Api) -> None:
    client = TestClient(create_app(api.mnemo, MnemoSettings(max_request_bytes=2048)))
    agent = api.headers("agent")
    big = evidence("big", "x" * 4096)
    response = client.post("/v1/evidence", json=big, headers=agent)
    assert_problem(response, 413, "request_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield b'{"evidence_id": "big", "source": "kb", "body": "'
        for _ in range(8):
            yield b"x" * 512
        yield b'"}'

    streamed = client.post(
        "/v1/evidence", content=chunks(), headers={**agent, "Content-Type": "application/json"}
    )
    assert_problem(streamed, 413, "request_too_large")
    assert_problem(api.client.get("/v1/evidence/big", headers=agent), 404)
    small = client.post("/v1/evidence", json=evidence("small", "fits"), headers=agent)
    assert small.status_code == 201


def test_content_over_the_archive_limit_is_413_and_not_stored(api: Api) -> None:
    # The same database, index and cache, under a policy with a 1 KiB content limit.
    store = dataclasses.replace(api.mnemo.archive.store, policy=ArchivePolicy(max_content_bytes=1024))
    limited = Mnemo(Archive(store), api.mnemo.index, api.mnemo.cache)
    client = TestClient(create_app(limited))
    agent = api.headers("agent")
    too_big = "y" * 1025
    for path, body in [
        ("/v1/evidence", evidence("huge", too_big)),
        ("/v1/sessions/s/results", {"tool_name": "t", "content": too_big}),
        (
            "/v1/sessions/s/results",
            {"tool_name": "t", "content_base64": base64.b64encode(b"\0" * 1025).decode()},
        ),
    ]:
        problem = assert_problem(client.post(path, json=body, headers=agent), 413, "content_too_large")
        assert problem["limit"] == 1024 and problem["size"] == 1025
    assert_problem(client.get("/v1/evidence/huge", headers=agent), 404)
    assert_problem(client.get("/v1/sessions/s/results", headers=agent), 404)
    assert client.post("/v1/evidence", json=evidence("fits", "y" * 1024), headers=agent).status_code == 201


# ---- idempotency -----------------------------------------------------------------------------------


def test_idempotency_keys_replay_and_refuse_reuse(api: Api) -> None:
    agent = api.headers("agent")
    keyed = {**agent, "Idempotency-Key": "rec-1"}
    body = {"tool_name": "lab.result", "content": "ALT 45 U/L"}
    first = api.client.post("/v1/sessions/s/results", json=body, headers=keyed)
    second = api.client.post("/v1/sessions/s/results", json=body, headers=keyed)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    items = api.client.get("/v1/sessions/s/results", headers=agent).json()["items"]
    assert [r["result_id"] for r in items] == ["r1"]  # one write

    other = api.client.post("/v1/sessions/s/results", json={**body, "content": "ALT 90 U/L"}, headers=keyed)
    assert assert_problem(other, 409, "idempotency_mismatch")["idempotency_key"] == "rec-1"
    assert len(api.client.get("/v1/sessions/s/results", headers=agent).json()["items"]) == 1

    ev = {**agent, "Idempotency-Key": "ev-1"}
    stored = api.client.post("/v1/evidence", json=evidence("k", "first body"), headers=ev)
    assert (
        api.client.post("/v1/evidence", json=evidence("k", "first body"), headers=ev).json() == stored.json()
    )
    assert_problem(api.client.post("/v1/evidence", json=evidence("k", "second body"), headers=ev), 409)
    history = api.client.get("/v1/evidence-history/k", headers=agent).json()["items"]
    assert [r["version"] for r in history] == [1]

    archive = {**agent, "Idempotency-Key": "arch-1"}
    targets = {"targets": [{"result_id": "r1", "note": "liver value"}]}
    done = api.client.post("/v1/sessions/s/archive", json=targets, headers=archive)
    replay = api.client.post("/v1/sessions/s/archive", json=targets, headers=archive)
    assert done.status_code == replay.status_code == 200
    assert replay.json()["batch_id"] == done.json()["batch_id"] and replay.json()["replayed"] is True

    too_long = {**agent, "Idempotency-Key": "k" * 256}
    assert_problem(api.client.post("/v1/sessions/s/results", json=body, headers=too_long), 422)


# ---- inputs no store can hold --------------------------------------------------------------------


def test_numbers_beyond_64_bits_are_422_not_500(api: Api) -> None:
    admin = api.headers("admin")
    huge = 2**64
    receipt = {"tenant_id": api.tenant, "target": "evidence:x", "deleted_at": "2030-01-01T00:00:00Z"}
    for extra in (
        {"evidence_versions": [["x", huge]]},
        {"memory_facts": [["o", "k", huge]]},
        {"audit_seq": -1},
    ):
        response = api.client.post("/v1/deletions/verify", json={**receipt, **extra}, headers=admin)
        assert_problem(response, 422, "invalid_input")
    assert_problem(api.client.get("/v1/admin/audit/events", params={"after_seq": huge}, headers=admin), 422)
    ttl = {"owner": "o", "key": "k", "value": "v", "provenance": "user_claim", "ttl_seconds": 1e12}
    assert_problem(api.client.post("/v1/memory", json=ttl, headers=admin), 422)
    assert api.client.post("/v1/memory", json={**ttl, "ttl_seconds": 3e9}, headers=admin).status_code == 200


def test_a_body_that_is_not_utf8_json_is_422(api: Api) -> None:
    headers = {**api.headers("agent"), "Content-Type": "application/json"}
    for raw in (b'{"query": "\xff\xfe"}', b"{not json", b""):
        response = api.client.post("/v1/search", content=raw, headers=headers)
        problem = assert_problem(response, 422, "invalid_request")
        assert problem["errors"] and problem["errors"][0]["loc"][0] == "body"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [101, 300, 100_000])  # before: accepted; a 500; a generic 422
def test_a_body_nested_past_the_limit_is_a_422_naming_it_and_nothing_is_stored(api: Api, depth: int) -> None:
    from mnemo_sea.archive.rules.limits import BODY_JSON_VALUES
    from mnemo_sea.system.json_text import MAX_JSON_DEPTH

    headers = {**api.headers("agent"), "Content-Type": "application/json"}
    deep = _nested(depth)
    bodies = {
        "/v1/sessions/s-deep/results": '{"tool_name": "t", "content": "x", "arguments": {"a": ' + deep + "}}",
        "/v1/evidence": '{"evidence_id": "deep", "source": "s", "body": "b", "statement": ' + deep + "}",
        "/v1/search": '{"query": ' + deep + "}",
    }
    for path, body in bodies.items():
        answer = api.client.post(path, content=body, headers=headers)
        if depth > BODY_JSON_VALUES:  # a bracket is a value: the count refuses it before the parse
            problem = assert_problem(answer, 413, "request_too_large")
            assert str(BODY_JSON_VALUES) in problem["detail"], path
            continue
        problem = assert_problem(answer, 422, "json_too_deep")
        assert problem["limit"] == MAX_JSON_DEPTH and str(MAX_JSON_DEPTH) in problem["detail"], path
    with api.mnemo.archive.store.read() as conn:  # raw state: nothing of any of them stored
        for table in (t.tool_results, t.evidence):
            assert conn.execute(select(table).where(table.c.tenant_id == api.tenant)).first() is None


def test_a_field_at_its_depth_limit_is_accepted_in_a_body_and_one_more_is_json_too_deep(api: Api) -> None:
    # The field limit is the one Python and the CLI apply (JSON_DEPTH); the body around it gets
    # its own allowance (DOCUMENT_JSON_DEPTH), so the same arguments are accepted on every surface.
    from mnemo_sea.archive.rules.limits import JSON_DEPTH

    headers = {**api.headers("agent"), "Content-Type": "application/json"}

    def body(levels: int) -> str:  # `arguments` nested `levels` deep: its object and the arrays in it
        return '{"tool_name": "t", "content": "x", "arguments": {"a": ' + _nested(levels - 1) + "}}"

    response = api.client.post("/v1/sessions/s-deep/results", content=body(JSON_DEPTH), headers=headers)
    assert response.status_code == 201, response.text[:300]
    response = api.client.post("/v1/sessions/s-deep/results", content=body(JSON_DEPTH + 1), headers=headers)
    problem = assert_problem(response, 422, "invalid_request")
    [error] = problem["errors"]
    assert (error["loc"][-1], error["type"], error["limit"]) == ("arguments", "json_too_deep", JSON_DEPTH)
    with api.mnemo.archive.store.read() as conn:  # raw state: only the one at the limit stored
        rows = conn.execute(select(t.tool_results).where(t.tool_results.c.tenant_id == api.tenant)).all()
    assert len(rows) == 1


NUL_PROBES = [
    ("POST", "/v1/summaries", {"text": "t", "derived_from": ["evidence:src"], "trace_ref": "run\x00"}),
    ("GET", "/v1/memory/alice?key=diet%00", None),
    ("GET", "/v1/memory/alice/history?key=diet%00", None),
    ("GET", "/v1/summaries/sum:%00", None),
    ("POST", "/v1/deletions/verify", {"sessions": ["s\x00"]}),
    ("POST", "/v1/deletions/verify", {"summaries": ["sum:\x00"]}),
]


@pytest.mark.parametrize(("method", "path", "body"), NUL_PROBES, ids=lambda v: str(v)[:30])
def test_a_nul_character_is_refused_not_a_server_error(api: Api, method: str, path: str, body: Any) -> None:
    # PostgreSQL text cannot hold NUL: a value no validator caught must still be a 4xx.
    admin = api.headers("admin")
    api.client.post("/v1/evidence", json=evidence("src", "source text"), headers=admin)
    if path == "/v1/deletions/verify":
        body = {"tenant_id": api.tenant, "target": "x", "deleted_at": "2030-01-01T00:00:00Z", **body}
    response = api.client.request(method, path, json=body, headers=admin)
    assert response.status_code < 500, response.text


def test_an_unexpected_error_is_a_500_problem_logged_with_its_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(api.mnemo.archive, "get_summary", broken)
    client = TestClient(api.system.app, raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="mnemo_sea.rest"):
        response = client.get("/v1/summaries/sum:1", headers=api.headers("reader"))
    problem = assert_problem(response, 500, "internal_error")
    assert "secret internal detail" not in response.text and problem["detail"]
    logged = [r for r in caplog.records if r.name == "mnemo_sea.rest"]
    assert logged and logged[-1].exc_info is not None
    assert "secret internal detail" in caplog.text and "Traceback" in caplog.text


def test_search_hits_show_each_legs_score_and_min_score_is_a_floor(api: Api) -> None:
    agent = api.headers("agent")
    items = [
        evidence("f1", "the ferry to the island leaves at noon"),
        evidence("f2", "the menu changes on monday"),
    ]
    api.client.post("/v1/evidence/batch", json={"items": items}, headers=agent)

    def search(**body: Any) -> Any:
        return api.client.post("/v1/search", json={"query": "ferry island noon", **body}, headers=agent)

    hits = search().json()["hits"]
    assert [h["evidence_id"] for h in hits] == ["f1", "f2"]
    top, other = hits
    assert top["bm25_rank"] == 1 and top["bm25_score"] > 0 and -1 <= top["dense_score"] <= 1
    assert other["bm25_score"] is None and other["relevance"] == pytest.approx(other["dense_score"])
    kept = search(min_score=top["relevance"]).json()
    assert kept["status"] == "results" and [h["evidence_id"] for h in kept["hits"]] == ["f1"]
    # Out of range, or not a number: the schema refuses it, naming the field.
    for body in ({"min_score": 1.5}, {"min_score": -1.5}, {"min_score": "high"}):
        problem = assert_problem(search(**body), 422, "invalid_request")
        assert any("min_score" in e["loc"] for e in problem["errors"]), problem
    raw = api.client.post(
        "/v1/search",
        content=b'{"query": "ferry", "min_score": NaN}',
        headers={**agent, "content-type": "application/json"},
    )
    assert raw.status_code in (400, 422) and raw.headers["content-type"].startswith("application/problem")
    # In range, but a bm25 search has no similarity to hold it against: the search refuses it.
    problem = assert_problem(search(mode="bm25", min_score=0.5), 422)
    assert "min_score" in problem["detail"], problem
