"""The context and task state endpoints, on the embedded default and in server mode: the REST
answer is `Mnemo.context`'s accounting for the same state, over-budget and rejected writes are
422s naming what is wrong, a stale expected_version is a 409, and nothing is stored on a refusal."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_helpers import Api, assert_problem
from sqlalchemy import func, select

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t

LOG = "GET /orders 200\n" * 400  # about 2,400 tokens: an archive candidate
INSTRUCTIONS = "You are the shop's order assistant. Cite result ids."
STATE = {
    "goal": "answer whether order 1042 can be refunded",
    "constraints": ["never promise a refund before the payment clears"],
    "unresolved": ["has the payment cleared"],
    "confirmed": [{"fact": "order 1042 shipped on 3 May", "evidence_id": "result:o-1042/r2"}],
}


def _principal(api: Api, subject: str = "agent-1") -> Principal:
    """The principal of `api.headers("agent")`: what the same call through the library runs as."""
    return Principal(api.tenant, subject, frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def _session(api: Api, headers: dict[str, str]) -> None:
    for body in (
        {"tool_name": "orders.log", "content": LOG},
        {"tool_name": "orders.get", "content": "order 1042: shipped 3 May"},
        {"tool_name": "payments.get", "content": "payment 1042: pending", "policy_class": "approval_record"},
    ):
        assert api.client.post("/v1/sessions/o-1042/results", json=body, headers=headers).status_code == 201
    written = api.client.post("/v1/sessions/o-1042/task-state", json=STATE, headers=headers)
    assert written.status_code == 201, written.text


def _normalised(data: dict[str, Any]) -> dict[str, Any]:
    """The same accounting with candidate times as datetimes (JSON writes UTC as Z, isoformat as +00:00)."""
    out = dict(data)
    out["archive_candidates"] = [
        {**c, "observed_at": datetime.fromisoformat(c["observed_at"].replace("Z", "+00:00"))}
        for c in data["archive_candidates"]
    ]
    return out


def _task_state_rows(api: Api) -> int:
    with api.mnemo.archive.store.read() as conn:
        count = conn.execute(
            select(func.count()).select_from(t.task_states).where(t.task_states.c.tenant_id == api.tenant)
        ).scalar_one()
    return int(count)


# ---- context ---------------------------------------------------------------------------------------


def test_the_context_is_the_libraries_accounting_for_the_same_state(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    body = {"budget_tokens": 1500, "output_reserve": 200, "instructions": INSTRUCTIONS, "tools": ["lookup"]}
    response = api.client.post("/v1/sessions/o-1042/context", json=body, headers=agent)
    assert response.status_code == 200, response.text
    got = response.json()
    expected = api.mnemo.context(
        _principal(api),
        "o-1042",
        budget_tokens=1500,
        output_reserve=200,
        instructions=INSTRUCTIONS,
        tools=["lookup"],
    )
    assert _normalised(got) == _normalised(expected.to_dict())
    # What the accounting says, independently of to_dict: the log did not fit and is proposed.
    kinds = [s["kind"] for s in got["segments"]]
    assert kinds[:4] == ["instructions", "tools", "constraints", "task_state"]
    assert "protected_result" in kinds
    assert [(x["ids"], x["kind"]) for x in got["left_out"]] == [(["r1"], "live_result")]
    assert "over budget" in got["left_out"][0]["reason"]
    assert [(c["result_id"], c["left_out"]) for c in got["archive_candidates"]] == [("r1", True)]
    assert got["used_tokens"] == sum(s["tokens"] for s in got["segments"])
    assert got["used_tokens"] == sum(v for k, v in got["totals"].items() if k != "output_reserve")
    assert got["free_tokens"] == 1500 - 200 - got["used_tokens"]
    assert got["text"] == "".join(s["text"] for s in got["segments"])
    assert got["task_state_version"] == 1
    assert all(s["pinned"] for s in got["segments"] if s["kind"] in ("constraints", "task_state"))

    lean = api.client.post(
        "/v1/sessions/o-1042/context", json={**body, "with_text": False}, headers=agent
    ).json()
    assert lean["text"] is None and all(s["text"] is None for s in lean["segments"])
    assert [s["tokens"] for s in lean["segments"]] == [s["tokens"] for s in got["segments"]]
    # Reads only: the assembler proposed r1 but never archived it.
    items = api.client.get("/v1/sessions/o-1042/results", headers=agent).json()["items"]
    assert [r["state"] for r in items] == ["live", "live", "live"]


def test_a_context_the_pinned_part_overflows_is_422_naming_the_sizes(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    body = {"budget_tokens": 60, "output_reserve": 10, "instructions": INSTRUCTIONS}
    problem = assert_problem(
        api.client.post("/v1/sessions/o-1042/context", json=body, headers=agent), 422, "context_over_budget"
    )
    assert (problem["budget_tokens"], problem["output_reserve"], problem["available_tokens"]) == (60, 10, 50)
    assert set(problem["pinned"]) == {"instructions", "constraints", "task_state", "protected_result"}
    assert problem["pinned_tokens"] == sum(problem["pinned"].values()) > 50
    assert "pinned segments are never cut" in problem["detail"]
    # The floor is exact: the pinned tokens plus the reserve fit.
    enough = {**body, "budget_tokens": problem["pinned_tokens"] + 10}
    fitted = api.client.post("/v1/sessions/o-1042/context", json=enough, headers=agent)
    assert fitted.status_code == 200 and fitted.json()["free_tokens"] >= 0

    bad = {"budget_tokens": 100, "output_reserve": 100}
    assert (
        assert_problem(
            api.client.post("/v1/sessions/o-1042/context", json=bad, headers=agent), 422, "invalid_input"
        )["field"]
        == "output_reserve"
    )
    assert_problem(
        api.client.post("/v1/sessions/o-1042/context", json={"budget_tokens": 0}, headers=agent), 422
    )
    assert_problem(
        api.client.post("/v1/sessions/o-1042/context", json={"budget_tokens": 99, "budge": 1}, headers=agent),
        422,
        "invalid_request",
    )


def test_evidence_for_a_query_is_retrieved_into_the_context(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    api.client.post(
        "/v1/evidence",
        json={
            "evidence_id": "policy:refund",
            "body": "Refunds only after the payment clears.",
            "source": "kb",
        },
        headers=agent,
    )
    body = {"budget_tokens": 8000, "query": "refund payment clears", "kinds": ["knowledge"]}
    got = api.client.post("/v1/sessions/o-1042/context", json=body, headers=agent).json()
    evidence = [s for s in got["segments"] if s["component"] == "evidence"]
    assert [s["ids"] for s in evidence] == [["policy:refund@1"]]
    assert got["totals"]["evidence"] == evidence[0]["tokens"] > 0


# ---- task state ------------------------------------------------------------------------------------


def test_task_state_is_written_read_by_version_and_listed(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post(
        "/v1/sessions/o-1/results", json={"tool_name": "payments.get", "content": "cleared"}, headers=agent
    )
    none_yet = api.client.get("/v1/sessions/o-1/task-state", headers=agent)
    assert none_yet.status_code == 200 and none_yet.json() is None

    first = api.client.post(
        "/v1/sessions/o-1/task-state",
        json={"goal": "refund order 1", "unresolved": ["has the payment cleared"], "expected_version": 0},
        headers=agent,
    )
    assert first.status_code == 201 and first.json()["version"] == 1
    settled = {
        "goal": "refund order 1",
        "confirmed": [
            {
                "fact": "the payment cleared",
                "evidence_id": "result:o-1/r1",
                "resolves": "has the payment cleared",
            }
        ],
        "pending_operations": ["refund requested"],
        "trace_ref": "run-7",
        "expected_version": 1,
    }
    second = api.client.post("/v1/sessions/o-1/task-state", json=settled, headers=agent)
    assert second.status_code == 201, second.text
    state = second.json()
    assert (state["version"], state["status"], state["trace_ref"]) == (2, "current", "run-7")
    assert state["confirmed"] == [
        {
            "fact": "the payment cleared",
            "evidence_id": "result:o-1/r1",
            "version": None,
            "resolves": "has the payment cleared",
            "ref": "result:o-1/r1",
        }
    ]
    # A state read back can be sent again as it is (the fact's version is the archive's to set).
    again = {
        "goal": state["goal"],
        "confirmed": state["confirmed"],
        "pending_operations": ["refund requested"],
    }
    released = {
        **again,
        "pending_operations": [],
        "release": [{"item": "refund requested", "reason": "done"}],
    }
    third = api.client.post("/v1/sessions/o-1/task-state", json=released, headers=agent)
    assert third.status_code == 201, third.text
    assert third.json()["released"] == [
        {"item": "refund requested", "kind": "pending_operation", "reason": "done"}
    ]

    current = api.client.get("/v1/sessions/o-1/task-state", headers=agent).json()
    assert current["version"] == 3
    old = api.client.get("/v1/sessions/o-1/task-state", params={"version": 1}, headers=agent).json()
    assert (old["version"], old["status"], old["unresolved"]) == (
        1,
        "superseded",
        ["has the payment cleared"],
    )
    pages = api.client.get("/v1/sessions/o-1/task-state/history", params={"limit": 2}, headers=agent).json()
    assert [s["version"] for s in pages["items"]] == [1, 2] and pages["next_offset"] == 2
    rest = api.client.get("/v1/sessions/o-1/task-state/history", params={"offset": 2}, headers=agent).json()
    assert [s["version"] for s in rest["items"]] == [3] and rest["next_offset"] is None
    assert _task_state_rows(api) == 3

    assert_problem(
        api.client.get("/v1/sessions/o-1/task-state", params={"version": 4}, headers=agent), 404, "not_found"
    )
    assert_problem(api.client.get("/v1/sessions/o-1/task-state", params={"version": 0}, headers=agent), 422)
    assert_problem(api.client.get("/v1/sessions/nope/task-state", headers=agent), 404, "not_found")
    assert_problem(api.client.get("/v1/sessions/nope/task-state/history", headers=agent), 404, "not_found")


def test_a_rejected_write_lists_every_problem_and_stores_nothing(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    before = api.client.get("/v1/sessions/o-1042/task-state", headers=agent).json()
    dropped = {
        "goal": "",
        "confirmed": [
            {"fact": "the payment cleared", "evidence_id": "result:o-1042/r9"},
            {"fact": "it is fine"},
        ],
        "release": [{"item": "not in the state", "reason": "gone"}],
    }
    response = api.client.post("/v1/sessions/o-1042/task-state", json=dropped, headers=agent)
    # A fact without evidence is a shape the body's schema already refuses, by field.
    problem = assert_problem(response, 422, "invalid_request")
    assert [e["loc"] for e in problem["errors"]] == [["body", "confirmed", "1", "evidence_id"]]
    dropped["confirmed"][1]["evidence_id"] = "  "
    problem = assert_problem(
        api.client.post("/v1/sessions/o-1042/task-state", json=dropped, headers=agent),
        422,
        "task_state_rejected",
    )
    found = {(p["field"], p["problem"]) for p in problem["problems"]}
    assert found == {
        ("goal", "empty"),
        ("confirmed[0].evidence_id", "evidence_not_found"),
        ("confirmed[1].evidence_id", "evidence_required"),
        ("release[0].item", "unknown_item"),
        ("constraints", "constraint_dropped"),
        ("unresolved", "open_item_dropped"),
    }, problem["problems"]
    dropped_items = {p["item"] for p in problem["problems"] if p["problem"].endswith("_dropped")}
    assert dropped_items == {STATE["constraints"][0], STATE["unresolved"][0]}
    assert all(p["message"] for p in problem["problems"])
    # Nothing stored: the same current version, one row.
    assert api.client.get("/v1/sessions/o-1042/task-state", headers=agent).json() == before
    assert _task_state_rows(api) == 1


def test_a_stale_expected_version_is_409_naming_the_current_one(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    stale = {**STATE, "expected_version": 0}
    problem = assert_problem(
        api.client.post("/v1/sessions/o-1042/task-state", json=stale, headers=agent), 409, "state_conflict"
    )
    assert (problem["current_version"], problem["expected_version"]) == (1, 0)
    assert _task_state_rows(api) == 1
    fresh = api.client.post(
        "/v1/sessions/o-1042/task-state", json={**STATE, "expected_version": 1}, headers=agent
    )
    assert fresh.status_code == 201 and fresh.json()["version"] == 2


def test_an_idempotency_key_replays_the_write_and_refuses_another_body(api: Api) -> None:
    agent = api.headers("agent")
    _session(api, agent)
    keyed = {**agent, "Idempotency-Key": "ts-1"}
    body = {**STATE, "goal": "refund order 1042 if the payment cleared"}
    first = api.client.post("/v1/sessions/o-1042/task-state", json=body, headers=keyed)
    replay = api.client.post("/v1/sessions/o-1042/task-state", json=body, headers=keyed)
    assert first.status_code == replay.status_code == 201
    assert first.json() == replay.json() and first.json()["version"] == 2
    other = api.client.post("/v1/sessions/o-1042/task-state", json={**body, "goal": "other"}, headers=keyed)
    assert_problem(other, 409, "idempotency_mismatch")
    assert _task_state_rows(api) == 2


def test_another_tenants_session_is_404_on_every_context_and_task_state_endpoint(api: Api) -> None:
    _session(api, api.headers("agent"))
    other = api.other_tenant()
    stranger = other.headers("agent")
    for method, path, body in (
        ("POST", "/v1/sessions/o-1042/context", {"budget_tokens": 5000}),
        ("GET", "/v1/sessions/o-1042/task-state", None),
        ("GET", "/v1/sessions/o-1042/task-state?version=1", None),
        ("GET", "/v1/sessions/o-1042/task-state/history", None),
    ):
        assert_problem(api.client.request(method, path, json=body, headers=stranger), 404, "not_found")
    # A write under the same id is the other tenant's own session; ours is untouched.
    written = api.client.post("/v1/sessions/o-1042/task-state", json={"goal": "theirs"}, headers=stranger)
    assert written.status_code == 201 and written.json()["version"] == 1
    ours = api.client.get("/v1/sessions/o-1042/task-state", headers=api.headers("agent")).json()
    assert (ours["version"], ours["goal"]) == (1, STATE["goal"])
    assert _task_state_rows(api) == 1


def test_a_reader_may_read_the_context_and_state_but_not_write_the_state(api: Api) -> None:
    _session(api, api.headers("agent"))
    reader = api.headers("reader", subject="agent-1")
    assert api.client.get("/v1/sessions/o-1042/task-state", headers=reader).status_code == 200
    assert (
        api.client.post(
            "/v1/sessions/o-1042/context", json={"budget_tokens": 9000}, headers=reader
        ).status_code
        == 200
    )
    refused = api.client.post("/v1/sessions/o-1042/task-state", json=STATE, headers=reader)
    assert assert_problem(refused, 403, "forbidden")["needed_role"] == "agent"
    assert _task_state_rows(api) == 1
