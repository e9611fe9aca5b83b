"""Reversible context editing of a recorded Messages API conversation, in process.

What an agent relies on: past the trigger, old tool results become stubs naming their result
id (the newest `keep` and excluded tools stay), the conversation gets smaller, the archive holds
each original and gives back exactly it, a second run changes nothing, and nothing is written
when the edit does not go ahead.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from mnemo_sea.archive import InvalidInput, NotFound, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.integrations.claude_context import (
    RECOVER_TOOL,
    STUB_PREFIX,
    aclear_tool_results,
    arecover_tool_result,
    clear_tool_results,
    estimate_tokens,
    recover_tool_result,
)
from mnemo_sea.system.acting import AsyncMnemo
from mnemo_sea.system.mnemo import Mnemo

CONVERSATION: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "recorded" / "claude_conversation.json").read_text()
)
SETTINGS: dict[str, Any] = {"trigger_tokens": 1000, "keep": 2, "exclude_tools": ["memory"]}


def agent() -> Principal:
    return Principal(f"t-{uuid.uuid4().hex[:10]}", "claude", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


def rows(mnemo: Mnemo, table: Any, tenant: str) -> int:
    with mnemo.archive.store.read() as conn:
        return int(conn.execute(select(func.count()).where(table.c.tenant_id == tenant)).scalar_one())


def test_old_results_become_stubs_and_come_back_exactly(mnemo: Mnemo) -> None:
    me = agent()
    handle = mnemo.as_(me)
    original = copy.deepcopy(CONVERSATION)
    edit = clear_tool_results(handle, "conv-1", CONVERSATION, **SETTINGS)
    assert original == CONVERSATION  # the input is not changed
    assert [(c.tool_use_id, c.tool_name) for c in edit.cleared] == [
        ("toolu_02", "read_log"),
        ("toolu_03", "fetch_timetable"),
        ("toolu_04", "read_rules"),
    ]
    after, before = results(edit.messages), results(CONVERSATION)
    # memory is excluded; toolu_05 and toolu_06 are the newest two
    for kept in ("toolu_01", "toolu_05", "toolu_06"):
        assert after[kept] == before[kept]
    for c in edit.cleared:
        assert after[c.tool_use_id].startswith(f"{STUB_PREFIX}{c.result_id} in session conv-1")
    assert edit.tokens_after < edit.tokens_before / 2
    assert (edit.tokens_before, edit.tokens_after) == (
        estimate_tokens(CONVERSATION),
        estimate_tokens(edit.messages),
    )

    log, timetable = edit.cleared[0], edit.cleared[1]
    assert recover_tool_result(handle, "conv-1", {"result_id": log.result_id}) == before["toolu_02"]
    # A list of text blocks comes back as its JSON.
    assert (
        json.loads(recover_tool_result(handle, "conv-1", {"result_id": timetable.result_id}))
        == before["toolu_03"]
    )
    line = recover_tool_result(handle, "conv-1", {"result_id": log.result_id, "lines": [12, 12]})
    assert line.strip() == before["toolu_02"].splitlines()[11]
    assert "okapi-12 departed pier 3" in line

    # The session holds each original, archived with its note; the tool's input is kept.
    info = {r.result_id: r for r in mnemo.list_results(me, "conv-1")}
    assert [(info[c.result_id].state, info[c.result_id].note) for c in edit.cleared] == [
        ("archived", c.note) for c in edit.cleared
    ]
    assert (info[log.result_id].tool_name, info[log.result_id].arguments) == (
        "read_log",
        {"file": "ferry.log"},
    )


def test_a_second_run_changes_nothing(mnemo: Mnemo) -> None:
    me = agent()
    handle = mnemo.as_(me)
    edit = clear_tool_results(handle, "conv-2", CONVERSATION, **SETTINGS)
    written = rows(mnemo, t.tool_results, me.tenant_id)
    again = clear_tool_results(handle, "conv-2", edit.messages, **{**SETTINGS, "trigger_tokens": 0})
    assert (again.messages, again.cleared, again.skipped) == (edit.messages, (), "nothing_to_clear")
    assert rows(mnemo, t.tool_results, me.tenant_id) == written
    # A retry of the first run (its answer lost) records nothing twice.
    retried = clear_tool_results(handle, "conv-2", CONVERSATION, **SETTINGS)
    assert retried.messages == edit.messages
    assert rows(mnemo, t.tool_results, me.tenant_id) == written


def test_nothing_is_written_when_the_edit_does_not_go_ahead(mnemo: Mnemo) -> None:
    me = agent()
    handle = mnemo.as_(me)
    under = clear_tool_results(handle, "conv-3", CONVERSATION, **{**SETTINGS, "trigger_tokens": 10**6})
    assert (under.skipped, under.messages) == ("under_trigger", CONVERSATION)
    short = clear_tool_results(handle, "conv-3", CONVERSATION, **{**SETTINGS, "clear_at_least": 10**6})
    assert (short.skipped, short.messages) == ("below_clear_at_least", CONVERSATION)
    assert rows(mnemo, t.tool_results, me.tenant_id) == 0
    with pytest.raises(InvalidInput, match="keep"):
        clear_tool_results(handle, "conv-3", CONVERSATION, keep=-1)


def _conversation(names_and_inputs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i, (name, tool_input) in enumerate(names_and_inputs):
        use = {"type": "tool_use", "id": f"tu{i}", "name": name, "input": tool_input}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"tu{i}", "content": f"output {i} " * 200}
        messages.append({"role": "user", "content": [result]})
    return messages


def test_a_result_the_archive_would_refuse_stops_the_edit_before_any_write(mnemo: Mnemo) -> None:
    me = agent()
    handle = mnemo.as_(me)
    settings: dict[str, Any] = {"trigger_tokens": 10, "keep": 0}
    for name in ("x" * 201, "read\u200blog"):  # too long; a format character
        with pytest.raises(InvalidInput, match="tool_name"):
            clear_tool_results(handle, "conv-6", _conversation([("ok", {}), (name, {})]), **settings)
    assert rows(mnemo, t.tool_results, me.tenant_id) == 0
    # A tool input over the archive's size for arguments is not kept with the result (the
    # conversation's tool_use block keeps it); the result is still cleared and recoverable.
    big = {"text": "y" * 70_000}
    edit = clear_tool_results(handle, "conv-6", _conversation([("ok", {"a": 1}), ("write", big)]), **settings)
    assert [c.tool_name for c in edit.cleared] == ["ok", "write"]
    kept = {r.tool_name: r.arguments for r in mnemo.list_results(me, "conv-6")}
    assert kept == {"ok": {"a": 1}, "write": {}}


def test_a_session_of_another_tenant_is_not_found(mnemo: Mnemo) -> None:
    a, b = agent(), agent()
    edit = clear_tool_results(mnemo.as_(a), "conv-4", CONVERSATION, **SETTINGS)
    with pytest.raises(NotFound):
        recover_tool_result(mnemo.as_(b), "conv-4", {"result_id": edit.cleared[0].result_id})
    assert rows(mnemo, t.tool_results, b.tenant_id) == 0


def test_async_gives_what_blocking_gives(mnemo: Mnemo) -> None:
    handle = AsyncMnemo(mnemo, agent())

    async def run() -> tuple[Any, str]:
        edit = await aclear_tool_results(handle, "conv-5", CONVERSATION, **SETTINGS)
        return edit, await arecover_tool_result(handle, "conv-5", {"result_id": edit.cleared[0].result_id})

    edit, original = asyncio.run(run())
    assert (
        edit.messages == clear_tool_results(mnemo.as_(agent()), "conv-5", CONVERSATION, **SETTINGS).messages
    )
    assert original == results(CONVERSATION)["toolu_02"]


def test_the_recover_tool_is_a_messages_api_tool_definition() -> None:
    assert set(RECOVER_TOOL) == {"name", "description", "input_schema"}
    assert RECOVER_TOOL["input_schema"]["required"] == ["result_id"]
    assert json.loads(json.dumps(RECOVER_TOOL)) == RECOVER_TOOL
