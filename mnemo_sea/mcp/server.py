"""The MCP server: the tool table published over the low-level SDK server, one principal per call.

`build_server(mnemo, principal_of)` needs only to know who is calling: stdio runs as one
configured principal (`fixed_principal`), HTTP as the principal of each request's API key
(`mnemo_sea.mcp.http`). A call validates its arguments against the tool's model, runs the
`Mnemo` call in a worker thread (the archive and index are synchronous) and answers through
`results`, so every outcome is a tool result: never a protocol error, never a traceback.

Given a `TenantAdmission` (HTTP, where many keys share one process), a call first waits for a
turn of its principal's tenant, as a REST request does (rest/admission.py), and its CPU is
charged to that tenant: one tenant's calls never hold every thread, and a tenant past its line
gets a `too_many_requests` tool error with `retry_after`, nothing done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread
from mcp.server import Server, ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)

from mnemo_sea import __version__
from mnemo_sea.archive import Principal
from mnemo_sea.rest.admission import TenantAdmission, charged
from mnemo_sea.retrieval.tokenizer import load_chinese_segmentation
from mnemo_sea.system.json_text import check_json_depth
from mnemo_sea.system.mnemo import Mnemo

from .results import failure, from_exception, success
from .tools import INSTRUCTIONS, TOOLS, AgentTool

Context = ServerRequestContext[dict[str, Any], Any]
PrincipalOf = Callable[[Context], Principal]
SERVER_NAME = "mnemo-sea"


def fixed_principal(principal: Principal) -> PrincipalOf:
    """Every call runs as this principal (stdio: one process, one configured caller)."""
    return lambda _ctx: principal


def _published(tool: AgentTool[Any]) -> Tool:
    return Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.inputs.model_json_schema(),
        annotations=ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            # Archiving is reversible (recover_result) and nothing here deletes.
            destructive_hint=False,
            open_world_hint=False,
        ),
    )


def build_server(
    mnemo: Mnemo, principal_of: PrincipalOf, admission: TenantAdmission | None = None
) -> Server[dict[str, Any]]:
    """An MCP server exposing `TOOLS` over `mnemo`, each call run as `principal_of(ctx)`, in a
    turn of its tenant when `admission` is given."""
    load_chinese_segmentation()  # now, not at a call's first Han text (see there)
    by_name = {tool.name: tool for tool in TOOLS}
    listed = [_published(tool) for tool in TOOLS]

    async def list_tools(ctx: Context, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult | InputRequiredResult:
        tool = by_name.get(params.name)
        if tool is None:
            return failure("unknown_tool", f"there is no tool {params.name!r}", tools=[t.name for t in TOOLS])
        try:
            principal = principal_of(ctx)
            # The SDK's parser stops near 200 levels; the system's one limit is lower (json_text).
            raw = check_json_depth(params.arguments or {}, "arguments")
            arguments = tool.inputs.model_validate(raw)
            if admission is None:
                payload = await anyio.to_thread.run_sync(tool.run, mnemo, principal, arguments)
            else:
                async with admission.slot(principal.tenant_id) as turn:
                    payload = await anyio.to_thread.run_sync(
                        charged, turn, tool.run, mnemo, principal, arguments
                    )
        except Exception as e:  # noqa: BLE001 - the boundary: every failure becomes a tool error result
            return from_exception(e, tool.name)
        return success(payload)

    def input_schema(name: str) -> Mapping[str, Any] | None:
        tool = by_name.get(name)
        return None if tool is None else tool.inputs.model_json_schema()

    return Server(
        SERVER_NAME,
        version=__version__,
        title="mnemo-sea evidence archive",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[dict[str, Any]]) -> None:
    """Serve one client over stdin/stdout until it closes the connection."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
