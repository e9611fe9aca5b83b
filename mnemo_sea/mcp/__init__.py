"""The agent's tools over MCP: `mnemo-sea mcp` (stdio as one principal, or streamable HTTP with API keys).

Ten tools, named for what an agent does: search_evidence, record_result, archive_results,
recover_result, live_context, remember, check_citations, assemble_context, update_task_state,
get_task_state. Their descriptions teach the archive protocol (see `tools.INSTRUCTIONS`).

    inputs   the typed arguments of each tool (the published JSON Schemas)
    tools    the tool table: descriptions and the `Mnemo` call each tool makes
    results  payloads and the one error shape `{"error": code, "category": ..., "message": ..., **detail}`
    server   the MCP server over the table; stdio
    http     streamable HTTP behind `Authorization: Bearer <api key>`
"""

from .http import http_app, serve_http
from .server import build_server, fixed_principal, serve_stdio
from .tools import INSTRUCTIONS, TOOLS

__all__ = [
    "INSTRUCTIONS",
    "TOOLS",
    "build_server",
    "fixed_principal",
    "http_app",
    "serve_http",
    "serve_stdio",
]
