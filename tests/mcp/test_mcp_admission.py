"""MCP tool calls take turns by tenant, as REST requests do: over HTTP many keys share one
process, so one tenant's calls must never hold every thread, and a body is bounded before the
SDK parses it. The turns are held by the test itself (no clock, no timing)."""

from __future__ import annotations

import anyio
from mcp import Client
from mcp_helpers import CLINIC, SHOP, payload
from starlette.testclient import TestClient

from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.archive.rules.limits import BODY_JSON_VALUES
from mnemo_sea.mcp import build_server, fixed_principal, http_app
from mnemo_sea.rest.admission import TenantAdmission, TenantLoad
from mnemo_sea.system.mnemo import Mnemo

SEARCH = {"query": "amoxicillin dose"}


def test_a_tenant_past_its_line_gets_too_many_requests_while_another_tenants_call_runs(mnemo: Mnemo) -> None:
    admission = TenantAdmission(slots=2, per_tenant=1, queue=0)

    async def main() -> None:
        clinic_server = build_server(mnemo, fixed_principal(CLINIC), admission)
        shop_server = build_server(mnemo, fixed_principal(SHOP), admission)
        async with Client(clinic_server) as clinic, Client(shop_server) as shop:
            async with admission.slot(CLINIC.tenant_id):  # the clinic's one turn is taken
                refused = await clinic.call_tool("search_evidence", SEARCH)
                assert refused.is_error
                error = payload(refused)
                assert error["error"] == "too_many_requests" and error["retry_after"] >= 1
                answered = await shop.call_tool("search_evidence", {"query": "widget price"})
                assert not answered.is_error, payload(answered)
            assert admission.load(CLINIC.tenant_id) == TenantLoad(0, 0)
            found = await clinic.call_tool("search_evidence", SEARCH)
            assert not found.is_error and payload(found)["hits"]

    anyio.run(main)
    # Each call's CPU was charged to its own tenant.
    assert admission.recent_cpu_s(SHOP.tenant_id) > 0 and admission.recent_cpu_s(CLINIC.tenant_id) > 0


def test_an_http_body_of_more_json_values_than_the_limit_is_413_and_read_only_after_the_key(
    mnemo: Mnemo,
) -> None:
    client = TestClient(http_app(mnemo), base_url="http://127.0.0.1:8765")
    key, _ = create_key(mnemo.archive.store, tenant_id="clinic", subject="agent-values", roles=["agent"])
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    over = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"junk": ['
        + b",".join([b"[]"] * BODY_JSON_VALUES)
        + b"]}}"
    )
    refused = client.post("/mcp", content=over, headers=accept | {"Authorization": f"Bearer {key}"})
    assert refused.status_code == 413
    assert refused.json()["code"] == "request_too_large" and refused.json()["limit"] == BODY_JSON_VALUES
    anonymous = client.post("/mcp", content=over, headers=accept)
    assert anonymous.status_code == 401
