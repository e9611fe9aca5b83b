"""Helpers of the MCP server tests: principals, the fixture's evidence, and calling through the SDK client."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import Client
from mcp_types import CallToolResult, TextContent

from mnemo_sea.archive import Principal, Role
from mnemo_sea.mcp import build_server, fixed_principal
from mnemo_sea.system.mnemo import Mnemo

CLINIC = Principal("clinic", "agent-1", frozenset({Role.AGENT}))
SHOP = Principal("shop", "agent-9", frozenset({Role.AGENT}))
AMOXICILLIN = "Amoxicillin for dogs: 10 mg/kg by mouth twice daily for 7 days. Give with food."


def payload(result: CallToolResult) -> dict[str, Any]:
    """The JSON a tool answered; its text and its structured content must say the same."""
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    data: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


def with_client(mnemo: Mnemo, principal: Principal, body: Callable[[Client], Awaitable[None]]) -> None:
    """Run `body` against an in-memory server acting as `principal`, through the SDK's own client."""

    async def main() -> None:
        async with Client(build_server(mnemo, fixed_principal(principal))) as client:
            await body(client)

    anyio.run(main)
