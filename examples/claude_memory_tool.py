"""Claude's memory tool kept in mnemo-sea, and reversible context editing, with no model and no network.

    python examples/claude_memory_tool.py                      # in process, a temporary data folder
    python examples/claude_memory_tool.py --url http://127.0.0.1:8000   # a server; an admin's MNEMO_API_KEY

It plays a recorded list of the memory commands Claude sends (`memory_20250818`: view, create,
str_replace, insert, rename, delete, and a path that tries to leave /memories) through the
Anthropic SDK's own dispatch (`tool.call(input)`) into `MnemoMemoryTool`, shows the answers
Claude would read, the versions each write left and the receipt of each deletion. Then it
clears the old tool results of a recorded conversation into the archive (stubs in place, as
Anthropic's context editing clears them) and recovers one exactly. Exits 1 when a promise does
not hold. Needs the `[anthropic]` extra. In process it acts as an admin of the examples' tenant
(rename and delete are the archive's deletions, which only admins may do).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from anthropic.lib.tools import ToolError
from connect import AGENT, arguments, connect

from mnemo_sea.archive import Principal, Role
from mnemo_sea.integrations.claude_context import RECOVER_TOOL, clear_tool_results, recover_tool_result
from mnemo_sea.integrations.claude_memory import MnemoMemoryTool

COMMANDS: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {
        "command": "create",
        "path": "/memories/patients/rex.md",
        "file_text": "# Rex (collie)\n- MDR1 mutation: no ivermectin.\n- Weight 24 kg.\n",
    },
    {"command": "str_replace", "path": "/memories/patients/rex.md", "old_str": "24 kg", "new_str": "25 kg"},
    {
        "command": "insert",
        "path": "/memories/patients/rex.md",
        "insert_line": 1,
        "insert_text": "- Owner: A. Ng.",
    },
    {"command": "view", "path": "/memories/patients/rex.md", "view_range": [2, 3]},
    {"command": "create", "path": "/memories/scratch.md", "file_text": "temporary\n"},
    {"command": "rename", "old_path": "/memories/scratch.md", "new_path": "/memories/todo.md"},
    {"command": "view", "path": "/memories/../../etc/passwd"},
    {"command": "delete", "path": "/memories/todo.md"},
    {"command": "view", "path": "/memories"},
]

LOG = "\n".join(f"2025-03-{d:02d} weighed Rex: {23 + d / 10:.1f} kg" for d in range(1, 29))
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "How has Rex's weight changed this month?"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LOG}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "today", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "2025-03-29"}]},
]


def main() -> int:
    args = arguments(__doc__ or "")
    report: dict[str, Any] = {"commands": [], "failures": []}
    with connect(args) as connected:
        # In process: the examples' agent, as an admin of its tenant (a server: the key's roles).
        admin = Principal(AGENT.tenant_id, AGENT.subject, frozenset({Role.ADMIN}))
        handle = connected if args.url else connected.mnemo.as_(admin)
        tool = MnemoMemoryTool(handle, admin=True)
        for command in COMMANDS:
            try:
                report["commands"].append({"input": command, "answer": tool.call(command)})
            except ToolError as e:
                report["commands"].append({"input": command, "error": e.content})
        history = handle.evidence_history("memories/patients/rex.md")
        report["versions"] = [v.version for v in history]
        report["receipts"] = [
            {"target": r.target, "verified": handle.verify_deleted(r).ok} for r in tool.receipts
        ]
        if report["versions"] != [1, 2, 3]:
            report["failures"].append("each write of rex.md is a version")
        if [c.get("error", "")[:4] for c in report["commands"]].count("Path") != 1:
            report["failures"].append("the path leaving /memories is refused")
        if not report["receipts"] or not all(r["verified"] for r in report["receipts"]):
            report["failures"].append("every deletion's receipt verifies")

        edit = clear_tool_results(handle, "rex-weight", CONVERSATION, trigger_tokens=100, keep=1)
        cleared = edit.cleared[0]
        original = recover_tool_result(handle, "rex-weight", {"result_id": cleared.result_id})
        report["context"] = {
            "tokens_before": edit.tokens_before,
            "tokens_after": edit.tokens_after,
            "stub": edit.messages[2]["content"][0]["content"],
            "recover_tool": RECOVER_TOOL["name"],
            "recovered_exactly": original == LOG,
        }
        if original != LOG or edit.tokens_after >= edit.tokens_before:
            report["failures"].append("a cleared result comes back exactly, and clearing saves tokens")
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
