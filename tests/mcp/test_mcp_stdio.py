"""`mnemo-sea mcp` over real stdio: a subprocess configured from the environment, driven by the
SDK's stdio client, acting as the configured principal."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_helpers import payload

from mnemo_sea.archive import Archive, NotFound, Principal, Role
from mnemo_sea.mcp import TOOLS
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE

REPORT = "Radiograph 2024-05-02: thorax clear, no masses."


def test_stdio_server_runs_the_tools_as_the_configured_principal(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo_sea.cli.mcp"],
        env={
            "MNEMO_DATA_DIR": str(tmp_path),
            "MNEMO_EMBEDDER": "hashing",
            "MNEMO_TENANT": "clinic-stdio",
            "MNEMO_SUBJECT": "agent-7",
            "MNEMO_ROLE": "agent",
            "MNEMO_CLEARANCE": "internal",
            # The SDK passes only a minimal environment to the child.
            **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
        },
    )

    async def main() -> None:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert names == {tool.name for tool in TOOLS}
                recorded = payload(
                    await session.call_tool(
                        "record_result", {"session_id": "visit-1", "tool_name": "xray", "content": REPORT}
                    )
                )
                assert recorded["result_id"] == "r1"
                await session.call_tool(
                    "archive_results",
                    {"session_id": "visit-1", "targets": [{"result_id": "r1", "note": "thorax clear"}]},
                )
                recovered = payload(
                    await session.call_tool("recover_result", {"session_id": "visit-1", "result_id": "r1"})
                )
                assert recovered["content"] == REPORT
                assert recovered["content_sha256"] == hashlib.sha256(REPORT.encode()).hexdigest()
                refused = await session.call_tool(
                    "archive_results", {"session_id": "visit-1", "targets": "r1"}
                )
                assert refused.is_error and payload(refused)["error"] == "invalid_input"

    anyio.run(main)

    # What the process wrote belongs to the configured tenant, and to no other.
    archive = Archive.open(str(tmp_path / ARCHIVE_FILE))
    try:
        agent = Principal("clinic-stdio", "auditor", frozenset({Role.AGENT}))
        results = archive.list_results(agent, "visit-1")
        assert [(r.result_id, r.state) for r in results] == [("r1", "archived"), ("r2", "live")]
        with pytest.raises(NotFound):
            archive.list_results(Principal("default", "mcp", frozenset({Role.AGENT})), "visit-1")
    finally:
        archive.close()
