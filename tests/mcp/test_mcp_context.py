"""The context and task state tools through the SDK's client: the accounting is `Mnemo.context`'s
for the same state, the descriptions teach what the agent must do, and every refusal is a tool
error with its code (and nothing stored)."""

from __future__ import annotations

from typing import Any

from mcp import Client
from mcp_helpers import CLINIC, SHOP, payload, with_client

from mnemo_sea.archive import Principal, Role
from mnemo_sea.system.mnemo import Mnemo

LOG = "lab.log line: all values within range\n" * 300  # over 1,000 tokens: an archive candidate
INSTRUCTIONS = "You are the clinic's assistant. Cite result ids."


def _visit(mnemo: Mnemo, session_id: str) -> None:
    mnemo.record(CLINIC, session_id, "lab.log", LOG)
    mnemo.record(
        CLINIC, session_id, "lab.mdr1", "MDR1 mut/mut: no ivermectin", policy_class="prescription_basis"
    )
    mnemo.record(CLINIC, session_id, "pharmacy.stock", "doramectin: 3 in stock", policy_class="stock")


def _first_state(session_id: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "goal": "choose a deworming plan for pet-7",
        "constraints": ["no ivermectin: MDR1 mutant"],
        "unresolved": ["is doramectin approved by the vet"],
        "confirmed": [{"fact": "pet-7 is MDR1 mut/mut", "evidence_id": f"result:{session_id}/r2"}],
        "expected_version": 0,
    }


def test_the_descriptions_teach_pinning_archiving_and_what_a_refused_write_needs(mnemo: Mnemo) -> None:
    async def body(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        context = listed["assemble_context"].description or ""
        for needle in ("never cut", "never archives", "archive_results", "note", "left_out",
                       "archive_candidates", "context_over_budget", "protected"):  # fmt: skip
            assert needle in context, needle
        write = listed["update_task_state"].description or ""
        for needle in ("WHOLE", "task_state_rejected", "release", "reason", "resolves", "evidence",
                       "expected_version", "state_conflict", "nothing stored"):  # fmt: skip
            assert needle in write, needle
        read = listed["get_task_state"].description or ""
        assert "null" in read and "expected_version" in read and "never evidence" in read
        assert listed["assemble_context"].annotations is not None
        assert listed["assemble_context"].annotations.read_only_hint is True
        assert listed["update_task_state"].annotations is not None
        assert listed["update_task_state"].annotations.read_only_hint is False
        assert set(listed["assemble_context"].input_schema["required"]) == {"session_id", "budget_tokens"}
        assert set(listed["update_task_state"].input_schema["required"]) == {"session_id", "goal"}
        instructions = client.instructions or ""
        assert "assemble_context" in instructions and "update_task_state" in instructions

    with_client(mnemo, CLINIC, body)


def test_assemble_context_answers_the_libraries_accounting(mnemo: Mnemo, session_id: str) -> None:
    _visit(mnemo, session_id)

    async def body(client: Client) -> None:
        none_yet = payload(await client.call_tool("get_task_state", {"session_id": session_id}))
        assert none_yet == {"session_id": session_id, "task_state": None}
        written = payload(await client.call_tool("update_task_state", _first_state(session_id)))
        assert (written["version"], written["status"], written["sensitivity"]) == (1, "current", "internal")
        arguments = {
            "session_id": session_id,
            "budget_tokens": 900,
            "output_reserve": 100,
            "instructions": INSTRUCTIONS,
        }
        got = payload(await client.call_tool("assemble_context", arguments))
        expected = mnemo.context(
            CLINIC, session_id, budget_tokens=900, output_reserve=100, instructions=INSTRUCTIONS
        )
        assert got == {**expected.to_dict(with_text=False), "text": expected.text}
        assert all("text" not in s for s in got["segments"])  # the text comes once, whole
        kinds = [s["kind"] for s in got["segments"]]
        assert kinds[:3] == ["instructions", "constraints", "task_state"] and "protected_result" in kinds
        assert [x["ids"] for x in got["left_out"]] == [["r1"]]
        assert [(c["result_id"], c["left_out"]) for c in got["archive_candidates"]] == [("r1", True)]
        assert "no ivermectin: MDR1 mutant" in got["text"] and "all values within range" not in got["text"]

        # The agent frees room as the description says: archive with a note, assemble again.
        archived = await client.call_tool(
            "archive_results",
            {"session_id": session_id, "targets": [{"result_id": "r1", "note": "lab log: all normal"}]},
        )
        assert not archived.is_error
        again = payload(await client.call_tool("assemble_context", arguments))
        assert again["left_out"] == [] and again["archive_candidates"] == []
        assert '<archived_result id="r1"' in again["text"] and "lab log: all normal" in again["text"]

    with_client(mnemo, CLINIC, body)


def test_a_pinned_part_over_the_budget_is_a_tool_error_naming_the_sizes(
    mnemo: Mnemo, session_id: str
) -> None:
    _visit(mnemo, session_id)

    async def body(client: Client) -> None:
        result = await client.call_tool(
            "assemble_context",
            {
                "session_id": session_id,
                "budget_tokens": 40,
                "output_reserve": 10,
                "instructions": INSTRUCTIONS,
            },
        )
        assert result.is_error
        error = payload(result)
        assert error["error"] == "context_over_budget"
        assert (error["budget_tokens"], error["output_reserve"], error["available_tokens"]) == (40, 10, 30)
        assert set(error["pinned"]) == {"instructions", "protected_result"}
        assert error["pinned_tokens"] == sum(error["pinned"].values()) > 30
        assert "never cut" in error["message"]
        bad = await client.call_tool("assemble_context", {"session_id": session_id, "budget_tokens": 0})
        assert bad.is_error and payload(bad)["error"] == "invalid_input"

    with_client(mnemo, CLINIC, body)


def test_a_refused_task_state_write_lists_each_problem_and_stores_nothing(
    mnemo: Mnemo, session_id: str
) -> None:
    _visit(mnemo, session_id)

    async def body(client: Client) -> None:
        assert not (await client.call_tool("update_task_state", _first_state(session_id))).is_error
        reworded = {
            "session_id": session_id,
            "goal": "choose a deworming plan for pet-7",
            "unresolved": ["doramectin is approved"],  # an unknown edited into an outcome
            "confirmed": [{"fact": "stock is fine", "evidence_id": "sum:0123abcd"}],
            "release": [{"item": "never there", "reason": ""}],
            "expected_version": 1,
        }
        result = await client.call_tool("update_task_state", reworded)
        assert result.is_error
        error = payload(result)
        assert error["error"] == "task_state_rejected" and "nothing was stored" in error["message"]
        found = {(p["field"], p["problem"], p["item"]) for p in error["problems"]}
        assert found == {
            ("constraints", "constraint_dropped", "no ivermectin: MDR1 mutant"),
            ("unresolved", "open_item_dropped", "is doramectin approved by the vet"),
            ("confirmed[0].evidence_id", "derived_not_evidence", "sum:0123abcd"),
            ("release[0].reason", "reason_required", "never there"),
            ("release[0].item", "unknown_item", "never there"),
        }, error["problems"]
        assert all(p["message"] for p in error["problems"])

        stale = await client.call_tool(
            "update_task_state", {**_first_state(session_id), "expected_version": 0}
        )
        assert stale.is_error
        conflict = payload(stale)
        assert (conflict["error"], conflict["current_version"]) == ("state_conflict", 1)

        current = payload(await client.call_tool("get_task_state", {"session_id": session_id}))
        assert current["task_state"]["version"] == 1

    with_client(mnemo, CLINIC, body)
    assert [s.version for s in mnemo.task_state_history(CLINIC, session_id)] == [1]


def test_settling_and_releasing_are_how_items_leave(mnemo: Mnemo, session_id: str) -> None:
    _visit(mnemo, session_id)
    mnemo.record(
        CLINIC, session_id, "vet.approval", "Dr. Li approved doramectin", policy_class="vet_approval"
    )

    async def body(client: Client) -> None:
        first = payload(await client.call_tool("update_task_state", _first_state(session_id)))
        read = payload(await client.call_tool("get_task_state", {"session_id": session_id}))["task_state"]
        assert read == first
        settled = {
            "session_id": session_id,
            "goal": read["goal"],
            "confirmed": [
                *read["confirmed"],  # carried over as read back, version included
                {
                    "fact": "Dr. Li approved doramectin",
                    "evidence_id": f"result:{session_id}/r4",
                    "resolves": "is doramectin approved by the vet",
                },
            ],
            "release": [{"item": "no ivermectin: MDR1 mutant", "reason": "plan switched to doramectin"}],
            "expected_version": read["version"],
        }
        second = payload(await client.call_tool("update_task_state", settled))
        assert (second["version"], second["unresolved"], second["constraints"]) == (2, [], [])
        assert second["released"] == [
            {
                "item": "no ivermectin: MDR1 mutant",
                "kind": "constraint",
                "reason": "plan switched to doramectin",
            }
        ]
        old = payload(await client.call_tool("get_task_state", {"session_id": session_id, "version": 1}))
        assert old["task_state"]["status"] == "superseded"
        missing = await client.call_tool("get_task_state", {"session_id": session_id, "version": 9})
        assert missing.is_error and payload(missing)["error"] == "not_found"

    with_client(mnemo, CLINIC, body)
    state = mnemo.task_state(CLINIC, session_id)
    assert state is not None and state.version == 2 and state.constraints == ()


def test_another_tenant_gets_not_found_and_a_reader_may_not_write(mnemo: Mnemo, session_id: str) -> None:
    _visit(mnemo, session_id)
    mnemo.update_task_state(CLINIC, session_id, goal="ours", constraints=["keep"])

    async def stranger(client: Client) -> None:
        for tool, arguments in (
            ("get_task_state", {"session_id": session_id}),
            ("assemble_context", {"session_id": session_id, "budget_tokens": 9000}),
        ):
            result = await client.call_tool(tool, arguments)
            assert result.is_error and payload(result)["error"] == "not_found", tool

    async def reader(client: Client) -> None:
        refused = await client.call_tool("update_task_state", {"session_id": session_id, "goal": "theirs"})
        assert refused.is_error and payload(refused)["error"] == "forbidden"
        assert not (await client.call_tool("get_task_state", {"session_id": session_id})).is_error

    with_client(mnemo, SHOP, stranger)
    with_client(mnemo, Principal("clinic", "agent-1", frozenset({Role.READER})), reader)
    state = mnemo.task_state(CLINIC, session_id)
    assert state is not None and (state.version, state.goal) == (1, "ours")
