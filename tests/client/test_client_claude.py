"""Claude's memory tool and the context editing through the REST client, against the served API.

The recorded command sequences of tests/integrations/recorded give the same answers through
MnemoClient and AsyncMnemoClient as in process; what they wrote is read raw from the served
archive's tables: one version per write, no row after a delete (whose receipt verifies), the
same path in another tenant untouched.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from anthropic.lib.tools import ToolError
from client_helpers import FAST_RETRY, Tenant

from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.claude_context import (
    aclear_tool_results,
    arecover_tool_result,
    clear_tool_results,
    recover_tool_result,
)
from mnemo_sea.integrations.claude_memory import AsyncMnemoMemoryTool, MnemoMemoryTool

RECORDED = Path(__file__).resolve().parents[1] / "integrations" / "recorded"
SESSION: list[dict[str, Any]] = json.loads((RECORDED / "claude_memory_session.json").read_text())
CONVERSATION: list[dict[str, Any]] = json.loads((RECORDED / "claude_conversation.json").read_text())
SETTINGS: dict[str, Any] = {"trigger_tokens": 1000, "keep": 2, "exclude_tools": ["memory"]}


def play(
    tenant: Tenant, role: str, commands: list[dict[str, Any]]
) -> tuple[list[tuple[Any, bool]], list[Any]]:
    """The answers to `commands` through the tenant's flavour of client, and the receipts."""
    key = tenant.served.key(tenant.id, role)
    if tenant.flavour == "sync":
        with MnemoClient(tenant.served.base_url, api_key=key, retry=FAST_RETRY) as client:
            tool = MnemoMemoryTool(client, admin=role == "admin")
            answers = []
            for command in commands:
                try:
                    answers.append((tool.call(command), False))
                except ToolError as e:
                    answers.append((e.content, True))
            return answers, tool.receipts

    async def run() -> tuple[list[tuple[Any, bool]], list[Any]]:
        async with AsyncMnemoClient(tenant.served.base_url, api_key=key, retry=FAST_RETRY) as client:
            tool = AsyncMnemoMemoryTool(client, admin=role == "admin")
            answers = []
            for command in commands:
                try:
                    answers.append((await tool.call(command), False))
                except ToolError as e:
                    answers.append((e.content, True))
            return answers, tool.receipts

    return asyncio.run(run())


def test_the_recorded_session_answers_the_same_through_the_client(tenant: Tenant) -> None:
    writes = SESSION[:5]
    answers, _ = play(tenant, "admin", [s["input"] for s in writes])
    assert answers == [(s["result"], s["is_error"]) for s in writes]
    assert tenant.count(t.evidence, evidence_id="memories/notes.md") == 3  # create, str_replace, insert

    answers, receipts = play(tenant, "admin", [s["input"] for s in SESSION[5:]])
    assert answers == [(s["result"], s["is_error"]) for s in SESSION[5:]]
    assert [r.target for r in receipts] == [
        "evidence:memories/notes.md",
        "evidence:memories/projects/budget.txt",
        "evidence:memories/projects/okapi/plan.md",
    ]
    assert tenant.count(t.evidence) == 1  # only memories/archive/notes.md is left
    assert tenant.count(t.evidence, evidence_id="memories/notes.md") == 0
    admin = tenant.client("admin")
    assert all(admin.verify_deleted(r).ok for r in receipts)
    assert tenant.count(t.audit_events, action="delete") == 3


def test_an_agent_key_deletes_nothing_and_another_tenant_sees_nothing(tenant: Tenant) -> None:
    create = {"command": "create", "path": "/memories/notes.md", "file_text": "mine\n"}
    answers, _ = play(tenant, "agent", [create, {"command": "delete", "path": "/memories/notes.md"}])
    assert answers[1][1] and "only admins delete" in answers[1][0]
    assert tenant.count(t.evidence, evidence_id="memories/notes.md") == 1

    other = Tenant(tenant.served, tenant.flavour)
    answers, _ = play(other, "admin", [{"command": "view", "path": "/memories"}, SESSION[2]["input"]])
    assert answers[0][0].endswith("\n0B\t/memories")
    assert answers[1] == ("The path /memories/notes.md does not exist. Please provide a valid path.", True)
    assert other.count(t.evidence) == 0
    assert tenant.count(t.evidence) == 1


def test_context_editing_through_the_client_recovers_the_exact_original(tenant: Tenant) -> None:
    key = tenant.served.key(tenant.id, "agent")
    original = next(b["content"] for m in CONVERSATION[4:5] for b in m["content"])
    if tenant.flavour == "sync":
        with MnemoClient(tenant.served.base_url, api_key=key, retry=FAST_RETRY) as client:
            edit = clear_tool_results(client, "conv-1", CONVERSATION, **SETTINGS)
            again = clear_tool_results(client, "conv-1", edit.messages, **{**SETTINGS, "trigger_tokens": 0})
            back = recover_tool_result(client, "conv-1", {"result_id": edit.cleared[0].result_id})
    else:

        async def run() -> tuple[Any, Any, str]:
            async with AsyncMnemoClient(tenant.served.base_url, api_key=key, retry=FAST_RETRY) as client:
                edit = await aclear_tool_results(client, "conv-1", CONVERSATION, **SETTINGS)
                again = await aclear_tool_results(
                    client, "conv-1", edit.messages, **{**SETTINGS, "trigger_tokens": 0}
                )
                rid = edit.cleared[0].result_id
                return edit, again, await arecover_tool_result(client, "conv-1", {"result_id": rid})

        edit, again, back = asyncio.run(run())
    assert [c.tool_use_id for c in edit.cleared] == ["toolu_02", "toolu_03", "toolu_04"]
    assert edit.tokens_after < edit.tokens_before
    assert (again.messages, again.cleared) == (edit.messages, ())
    assert back == original
    assert tenant.count(t.tool_results, state="archived") == 3
