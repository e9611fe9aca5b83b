"""Who may call what: API keys, tenants from keys only, roles, clearance, and key management."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from rest_helpers import Api, assert_problem, evidence
from sqlalchemy import select, update
from typer.testing import CliRunner

from mnemo_sea.archive.features.api_keys import list_keys, revoke_key
from mnemo_sea.archive.rules.clock import utcnow
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.verified_keys import VerifiedKeys
from mnemo_sea.cli.app import app as cli_app

PROTECTED = [
    ("GET", "/v1/evidence/some-id", None),
    ("POST", "/v1/search", {"query": "dose"}),
    ("POST", "/v1/sessions/s1/results", {"tool_name": "t", "content": "x"}),
    ("GET", "/v1/health/ready", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/admin/fsck", None),
    ("DELETE", "/v1/evidence/some-id", None),
]


def _call(api: Api, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    return api.client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
def test_no_key_is_401_with_a_bearer_challenge(api: Api, method: str, path: str, body: Any) -> None:
    response = _call(api, method, path, body, {})
    assert_problem(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer msk_"},
        {"Authorization": "Bearer msk__secret"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"X-API-Key": "msk_only-an-id"},
        {"X-API-Key": ""},
    ],
)
def test_malformed_keys_are_401(api: Api, headers: dict[str, str]) -> None:
    response = api.client.post("/v1/search", json={"query": "dose"}, headers=headers)
    assert_problem(response, 401, "unauthenticated")
    assert "www-authenticate" in response.headers


def test_unknown_ids_and_wrong_secrets_get_the_same_401(api: Api) -> None:
    key = api.key("reader")
    key_id = key.split("_")[1]
    unknown = api.client.post(
        "/v1/search", json={"query": "x"}, headers={"X-API-Key": f"msk_{'0' * 16}_{key[-43:]}"}
    )
    wrong_secret = api.client.post(
        "/v1/search", json={"query": "x"}, headers={"X-API-Key": f"msk_{key_id}_{'A' * 43}"}
    )
    first = assert_problem(unknown, 401, "unauthenticated")
    second = assert_problem(wrong_secret, 401, "unauthenticated")
    # No oracle: an existing key id with a wrong secret reads exactly like an unknown id.
    assert first["detail"] == second["detail"]


def test_a_revoked_key_is_refused_at_once(api: Api) -> None:
    key = api.key("reader")
    headers = {"X-API-Key": key}
    assert api.client.post("/v1/search", json={"query": "x"}, headers=headers).status_code == 200
    revoke_key(api.mnemo.archive.store, key.split("_")[1])
    assert_problem(api.client.post("/v1/search", json={"query": "x"}, headers=headers), 401)


def test_a_key_revoked_by_another_process_is_refused_within_the_cache_bound(api: Api) -> None:
    """Another process's revocation reaches this API process through the key table only, so
    a key it verified stays accepted for at most MNEMO_KEY_CACHE_SECONDS after that check."""
    now = [1000.0]
    app = api.system.app
    served = app.state.verified_keys
    app.state.verified_keys = VerifiedKeys(5.0, clock=lambda: now[0])
    try:
        key = api.key("reader")
        headers = {"X-API-Key": key}
        assert api.client.post("/v1/search", json={"query": "x"}, headers=headers).status_code == 200
        with api.mnemo.archive.store.write() as conn:  # what `mnemo-sea keys revoke` elsewhere writes
            conn.execute(
                update(t.api_keys).where(t.api_keys.c.key_id == key.split("_")[1]).values(revoked_at=utcnow())
            )
        now[0] += 4.9
        assert api.client.post("/v1/search", json={"query": "x"}, headers=headers).status_code == 200
        now[0] += 0.1
        assert_problem(api.client.post("/v1/search", json={"query": "x"}, headers=headers), 401)
    finally:
        app.state.verified_keys = served


def test_bearer_and_x_api_key_both_authenticate(api: Api) -> None:
    key = api.key("agent")
    for headers, status in (({"Authorization": f"Bearer {key}"}, 201), ({"X-API-Key": key}, 200)):
        response = api.client.post("/v1/evidence", json=evidence("e1", "ten mg per kg"), headers=headers)
        assert response.status_code == status, response.text  # the second time it is unchanged
    got = api.client.get("/v1/evidence/e1", headers={"X-API-Key": key})
    assert got.status_code == 200 and got.json()["record"]["version"] == 1


def test_a_tenant_in_the_body_is_rejected_and_nothing_is_stored(api: Api) -> None:
    headers = api.headers("admin")
    other = api.other_tenant()
    sneaky = evidence("e1", "planted text", tenant_id=other.tenant)
    body = assert_problem(api.client.post("/v1/evidence", json=sneaky, headers=headers), 422)
    assert any(e["loc"][-1] == "tenant_id" for e in body["errors"])
    for who in (api, other):
        assert_problem(api.client.get("/v1/evidence/e1", headers=who.headers("admin")), 404)


def test_a_tenant_in_the_query_is_ignored(api: Api) -> None:
    other = api.other_tenant()
    api.client.post("/v1/evidence", json=evidence("mine", "my own text"), headers=api.headers("agent"))
    api.client.post("/v1/evidence", json=evidence("theirs", "their text"), headers=other.headers("agent"))
    headers = api.headers("admin")
    params = {"tenant_id": other.tenant}
    assert api.client.get("/v1/evidence/mine", params=params, headers=headers).status_code == 200
    assert_problem(api.client.get("/v1/evidence/theirs", params=params, headers=headers), 404)


def _without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "request_id"}


def test_another_tenants_records_are_404_exactly_like_missing_ones(api: Api) -> None:
    other = api.other_tenant()
    mine = api.headers("admin", clearance="restricted")
    probes = [
        ("GET", "/v1/evidence/x1", None),
        ("GET", "/v1/evidence-history/x1", None),
        ("GET", "/v1/sessions/s1/results", None),
        ("GET", "/v1/sessions/s1/live", None),
        ("POST", "/v1/sessions/s1/results/r1/recover", None),
        ("POST", "/v1/sessions/s1/archive", {"targets": [{"result_id": "r1", "note": "n"}]}),
        ("GET", "/v1/memory/alice", None),
        ("DELETE", "/v1/evidence/x1", None),
        ("DELETE", "/v1/sessions/s1", None),
    ]

    def answers() -> list[dict[str, Any]]:
        out = []
        for method, path, body in probes:
            params = {"key": "diet"} if path.startswith("/v1/memory") else None
            response = api.client.request(method, path, json=body, params=params, headers=mine)
            out.append(_without_request_id(assert_problem(response, 404, "not_found")))
        return out

    before = answers()
    theirs = other.headers("admin", clearance="restricted")
    api.client.post("/v1/evidence", json=evidence("x1", "their record"), headers=theirs)
    api.client.post("/v1/sessions/s1/results", json={"tool_name": "t", "content": "c"}, headers=theirs)
    api.client.post(
        "/v1/sessions/s1/archive", json={"targets": [{"result_id": "r1", "note": "n"}]}, headers=theirs
    )
    api.client.post(
        "/v1/memory",
        json={"owner": "alice", "key": "diet", "value": "v", "provenance": "user_claim"},
        headers=theirs,
    )
    assert api.client.get("/v1/evidence/x1", headers=theirs).status_code == 200
    assert answers() == before


def test_a_reader_reads_but_cannot_write(api: Api) -> None:
    api.client.post("/v1/evidence", json=evidence("e1", "amoxicillin dose"), headers=api.headers("agent"))
    reader = api.headers("reader")
    assert api.client.get("/v1/evidence/e1", headers=reader).status_code == 200
    assert api.client.post("/v1/search", json={"query": "amoxicillin"}, headers=reader).json()["hits"]
    writes = [
        ("POST", "/v1/evidence", evidence("e2", "new")),
        ("POST", "/v1/evidence/batch", {"items": [evidence("e2", "new")]}),
        ("POST", "/v1/sessions/s1/results", {"tool_name": "t", "content": "c"}),
        ("POST", "/v1/summaries", {"text": "s", "derived_from": ["evidence:e1"]}),
    ]
    for method, path, body in writes:
        problem = assert_problem(
            api.client.request(method, path, json=body, headers=reader), 403, "forbidden"
        )
        assert problem["needed_role"] == "agent"
    assert_problem(api.client.get("/v1/evidence/e2", headers=reader), 404)


def test_an_agent_cannot_delete_or_administer_and_an_admin_can(api: Api) -> None:
    agent = api.headers("agent")
    api.client.post("/v1/evidence", json=evidence("e1", "text to keep"), headers=agent)
    admin_only = [
        ("DELETE", "/v1/evidence/e1"),
        ("DELETE", "/v1/owners/alice"),
        ("GET", "/v1/admin/audit/verify"),
        ("GET", "/v1/admin/audit/events"),
        ("GET", "/v1/admin/fsck"),
    ]
    for method, path in admin_only:
        assert_problem(api.client.request(method, path, headers=agent), 403, "forbidden")
    assert api.client.get("/v1/evidence/e1", headers=agent).status_code == 200

    admin = api.headers("admin")
    for method, path in admin_only:
        assert api.client.request(method, path, headers=admin).status_code == 200, (method, path)
    assert_problem(api.client.get("/v1/evidence/e1", headers=agent), 404)


def test_clearance_filters_reads_search_and_writes(api: Api) -> None:
    admin = api.headers("admin", clearance="restricted")
    secret = evidence("e-conf", "ivermectin toxicity in collies", sensitivity="confidential")
    assert api.client.post("/v1/evidence", json=secret, headers=admin).status_code == 201
    api.client.post("/v1/evidence", json=evidence("e-int", "ivermectin dose for cats"), headers=admin)

    low = api.headers("reader", clearance="internal")
    found = api.client.post("/v1/search", json={"query": "ivermectin", "limit": 50}, headers=low).json()
    assert {h["evidence_id"] for h in found["hits"]} == {"e-int"}
    assert_problem(api.client.get("/v1/evidence/e-conf", headers=low), 403, "forbidden")

    high = api.headers("reader", clearance="confidential")
    found = api.client.post("/v1/search", json={"query": "ivermectin", "limit": 50}, headers=high).json()
    assert {h["evidence_id"] for h in found["hits"]} == {"e-int", "e-conf"}
    assert api.client.get("/v1/evidence/e-conf", headers=high).status_code == 200

    # Nobody writes above their own clearance.
    agent = api.headers("agent", clearance="internal")
    too_high = evidence("e-r", "restricted note", sensitivity="restricted")
    assert_problem(api.client.post("/v1/evidence", json=too_high, headers=agent), 403, "forbidden")


# ---- key management (CLI) and storage ------------------------------------------------------------


def _cli(api: Api, *args: str) -> Any:
    """Run `mnemo-sea keys ...` against the system the app serves (folder or database)."""
    env: dict[str, str | None]
    if api.system.mode == "embedded":
        argv = ["keys", *args, "--json", "--data-dir", str(api.system.data_dir)]
        env = {"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None}
    else:
        argv = ["keys", *args, "--json"]
        env = {"MNEMO_DATABASE_URL": api.system.database_url, "MNEMO_DATA_DIR": None}
    result = CliRunner().invoke(cli_app, argv, env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_keys_create_list_revoke(api: Api) -> None:
    created = _cli(
        api, "create", "--tenant", api.tenant, "--subject", "bot", "--role", "agent", "--name", "ci bot"
    )
    key = created["api_key"]
    assert key.startswith(f"msk_{created['key_id']}_")
    assert (created["tenant_id"], created["roles"], created["clearance"]) == (
        api.tenant,
        ["agent"],
        "internal",
    )
    headers = {"Authorization": f"Bearer {key}"}
    assert (
        api.client.post("/v1/evidence", json=evidence("e1", "via cli key"), headers=headers).status_code
        == 201
    )

    listed = _cli(api, "list", "--tenant", api.tenant)
    assert [k["key_id"] for k in listed] == [created["key_id"]]
    assert listed[0]["revoked_at"] is None and listed[0]["name"] == "ci bot"
    secret = key.split("_", 2)[2]
    for entry in listed:
        assert "api_key" not in entry
        assert secret not in json.dumps(entry)

    revoked = _cli(api, "revoke", created["key_id"])
    assert revoked["revoked_at"] is not None
    assert_problem(api.client.get("/v1/evidence/e1", headers=headers), 401, "unauthenticated")
    assert _cli(api, "list", "--tenant", api.tenant)[0]["revoked_at"] is not None


def test_cli_keys_create_prints_lines_for_people_and_json_with_the_flag(api: Api) -> None:
    env = {"MNEMO_DATABASE_URL": api.system.database_url, "MNEMO_DATA_DIR": None}
    data = [] if api.system.data_dir is None else ["--data-dir", str(api.system.data_dir)]
    argv = ["keys", "create", "--tenant", api.tenant, "--subject", "bot", "--role", "agent", *data]
    plain = CliRunner().invoke(cli_app, argv, env=env)
    assert plain.exit_code == 0, plain.output
    lines = dict(line.split(": ", 1) for line in plain.stdout.splitlines())
    assert lines["api_key"].startswith(f"msk_{lines['key_id']}_") and lines["roles"] == '["agent"]'
    created = CliRunner().invoke(cli_app, [*argv, "--json"], env=env)
    assert created.exit_code == 0, created.output
    body = json.loads(created.stdout)
    assert body["api_key"].startswith(f"msk_{body['key_id']}_") and body["tenant_id"] == api.tenant
    listed = {k.key_id for k in list_keys(api.mnemo.archive.store, api.tenant)}
    assert listed == {lines["key_id"], body["key_id"]}


def test_cli_refuses_a_bad_role_and_an_unknown_key(api: Api) -> None:
    env = {"MNEMO_DATABASE_URL": api.system.database_url, "MNEMO_DATA_DIR": None}
    data = [] if api.system.data_dir is None else ["--data-dir", str(api.system.data_dir)]
    runner = CliRunner()
    bad_role = runner.invoke(
        cli_app,
        ["keys", "create", "--tenant", api.tenant, "--subject", "x", "--role", "root", *data],
        env=env,
    )
    assert bad_role.exit_code != 0 and "role" in bad_role.output
    # With --json the refusal is the JSON error every command prints (stdout), beside its line.
    as_json = runner.invoke(
        cli_app,
        ["keys", "create", "--tenant", api.tenant, "--subject", "x", "--role", "root", "--json", *data],
        env=env,
    )
    error = json.loads(as_json.stdout)["error"]
    assert (as_json.exit_code, error["code"], error["exit_code"]) == (2, "invalid_input", 2)
    unknown = runner.invoke(cli_app, ["keys", "revoke", "0123456789abcdef", *data], env=env)
    assert unknown.exit_code != 0 and "not found" in unknown.output
    assert list_keys(api.mnemo.archive.store, api.tenant) == []


def test_the_key_table_holds_only_hashes(api: Api) -> None:
    key = api.key("admin")
    secret = key.split("_", 2)[2]
    with api.mnemo.archive.store.read() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(t.api_keys))]
    mine = [r for r in rows if r["tenant_id"] == api.tenant]
    assert len(mine) == 1
    assert mine[0]["secret_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    for row in rows:
        for value in row.values():
            assert secret not in str(value) and key not in str(value)
