"""The MCP `remember` tool obeys the memory rules: derived_from must name a readable source, and a
user_claim does not supersede a user_correction (a tool error naming the current fact)."""

from __future__ import annotations

from mcp import Client
from mcp_helpers import CLINIC, payload, with_client

from mnemo_sea.system.mnemo import Mnemo


def test_remember_checks_derived_from_and_provenance_precedence(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        fact = {"owner": "owner-mcp", "key": "weight", "value": "12 kg"}
        missing = await client.call_tool(
            "remember", {**fact, "provenance": "document", "derived_from": "evidence:never-stored"}
        )
        assert missing.is_error
        error = payload(missing)
        assert error["error"] == "not_found" and "evidence:never-stored" in error["message"]
        sourced = payload(
            await client.call_tool(
                "remember", {**fact, "provenance": "document", "derived_from": "evidence:amox-dose"}
            )
        )
        assert sourced["persisted"] is True and sourced["fact"]["derived_from"] == "evidence:amox-dose"

        corrected = {**fact, "value": "11 kg", "provenance": "user_correction"}
        assert payload(await client.call_tool("remember", corrected))["fact"]["version"] == 2
        refused = await client.call_tool("remember", {**fact, "value": "13 kg", "provenance": "user_claim"})
        assert refused.is_error
        conflict = payload(refused)
        assert conflict["error"] == "memory_conflict"
        assert "user_correction (version 2)" in conflict["message"]

    with_client(mnemo, CLINIC, body)
    current = mnemo.current(CLINIC, "owner-mcp", "weight")
    assert current is not None and current.value == "11 kg"
