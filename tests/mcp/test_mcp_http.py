"""Streamable HTTP with API keys, on a real uvicorn server: no valid key, no service (401), and a
valid key acts as its own principal, in its own tenant only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import CLINIC, payload

from mnemo_sea.archive import NotFound, Principal, Role
from mnemo_sea.archive.features.api_keys import create_key, revoke_key
from mnemo_sea.mcp import http_app
from mnemo_sea.system.mnemo import Mnemo


@pytest.fixture(scope="module")
def url(mnemo: Mnemo) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(http_app(mnemo), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # bounds a hang, not a speed
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the HTTP server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


def _key(mnemo: Mnemo, tenant: str, subject: str, role: str = "agent") -> str:
    key, _ = create_key(mnemo.archive.store, tenant_id=tenant, subject=subject, roles=[role], name="test")
    return key


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def test_requests_without_a_valid_key_get_401(mnemo: Mnemo, url: str) -> None:
    revoked = _key(mnemo, "clinic", "old-agent")
    revoke_key(mnemo.archive.store, revoked.split("_")[1])
    headers: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer msk_0123456789abcdef_wrongsecret"},
        {"Authorization": f"Bearer {revoked}"},
    ]
    accept = {"Accept": "application/json, text/event-stream"}
    for extra in headers:
        response = httpx.post(url, json=INITIALIZE, headers=accept | extra)
        assert response.status_code == 401, extra
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "unauthenticated"
    good = _key(mnemo, "clinic", "agent-ok")
    response = httpx.post(url, json=INITIALIZE, headers=accept | {"Authorization": f"Bearer {good}"})
    assert response.status_code == 200


def test_a_key_acts_as_its_principal_in_its_own_tenant_only(mnemo: Mnemo, url: str, session_id: str) -> None:
    clinic_key = _key(mnemo, "clinic", "agent-http")
    shop_key = _key(mnemo, "shop", "agent-http")
    reader_key = _key(mnemo, "clinic", "nurse-http", role="reader")

    async def call(key: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool(tool, arguments)
        return result.is_error, payload(result)

    async def legacy_call(key: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(tool, arguments)
        return result.is_error, payload(result)

    async def main() -> None:
        record = {"session_id": session_id, "tool_name": "lab", "content": "ALT 112 U/L"}
        failed, recorded = await call(clinic_key, "record_result", record)
        assert not failed and recorded["result_id"] == "r1"
        # Both protocol eras carry the key's principal to the tool.
        failed, live = await legacy_call(clinic_key, "live_context", {"session_id": session_id})
        assert not failed and "ALT 112 U/L" in live["text"]

        # The same session id from another tenant's key: nothing there, and not an oracle.
        failed, error = await call(shop_key, "live_context", {"session_id": session_id})
        assert failed and error["error"] == "not_found"
        failed, found = await call(shop_key, "search_evidence", {"query": "amoxicillin dose dogs"})
        assert not failed and all(h["evidence_id"] != "amox-dose" for h in found["hits"])
        failed, found = await call(clinic_key, "search_evidence", {"query": "amoxicillin dose dogs"})
        assert found["hits"][0]["evidence_id"] == "amox-dose"

        # The key's roles hold too.
        failed, error = await call(reader_key, "record_result", record)
        assert failed and error["error"] == "forbidden"

    anyio.run(main)
    assert [item.result.result_id for item in mnemo.live_view(CLINIC, session_id).items] == ["r1"]
    with pytest.raises(NotFound):
        mnemo.live_view(Principal("shop", "x", frozenset({Role.ADMIN})), session_id)


def test_a_request_body_over_the_limit_gets_413_before_any_work(mnemo: Mnemo) -> None:
    from starlette.testclient import TestClient

    client = TestClient(http_app(mnemo, max_request_bytes=2048))
    good = _key(mnemo, "clinic", "agent-big")
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {good}"}
    big = {**INITIALIZE, "padding": "x" * 4096}
    response = client.post("/mcp", json=big, headers=headers)
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"


def test_refusals_carry_a_request_id_in_the_body_and_the_header_as_rest_does(mnemo: Mnemo) -> None:
    from starlette.testclient import TestClient

    # A loopback Host: the SDK refuses others on a loopback server (DNS-rebinding protection).
    client = TestClient(http_app(mnemo, max_request_bytes=2048), base_url="http://127.0.0.1:8765")
    accept = {"Accept": "application/json, text/event-stream"}
    good = {"Authorization": f"Bearer {_key(mnemo, 'clinic', 'agent-ids')}"}
    answers = {
        "no key": client.post("/mcp", json=INITIALIZE, headers=accept),
        "bad key": client.post("/mcp", json=INITIALIZE, headers=accept | {"Authorization": "Bearer nope"}),
        "too large": client.post("/mcp", json={**INITIALIZE, "pad": "x" * 4096}, headers=accept | good),
    }
    for why, response in answers.items():
        assert response.status_code in (401, 413), why
        request_id = response.json()["request_id"]
        assert isinstance(request_id, str) and request_id, why
        assert response.headers["x-request-id"] == request_id, why
    assert len({r.json()["request_id"] for r in answers.values()}) == 3  # one per request

    # A well-formed id the client sent is echoed, as the REST API does; a malformed one replaced.
    echoed = client.post("/mcp", json=INITIALIZE, headers=accept | {"X-Request-ID": "trace-42"})
    assert echoed.json()["request_id"] == "trace-42" and echoed.headers["x-request-id"] == "trace-42"
    replaced = client.post("/mcp", json=INITIALIZE, headers=accept | {"X-Request-ID": "bad id!"})
    assert replaced.json()["request_id"] not in ("bad id!", None)
    with client:  # the lifespan starts the SDK's session manager, which serves the accepted key
        served = client.post("/mcp", json=INITIALIZE, headers=accept | good)
    assert served.status_code == 200 and served.headers["x-request-id"]
