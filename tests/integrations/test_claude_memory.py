"""Claude's memory tool over the archive, driven in process by recorded command sequences.

What a Claude agent relies on: each command answers what the SDK's own filesystem tool answers
(the recorded texts; the same texts as BetaLocalFilesystemMemoryTool but for directory sizes and
the strict view_range); every write is a version in the archive with its one audit event; a
delete leaves no row and its
receipt verifies; a path outside /memories never reaches the archive; a principal that may not
delete changes nothing; another tenant's /memories is invisible; and the SDK's tool runner
turns a refusal into an `is_error` tool result.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anthropic import Anthropic
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool
from sqlalchemy import func, select

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.integrations.claude_memory import SOURCE, AsyncMnemoMemoryTool, MnemoMemoryTool
from mnemo_sea.system.acting import AsyncMnemo, MnemoAs
from mnemo_sea.system.mnemo import Mnemo

RECORDED = Path(__file__).parent / "recorded"
SESSION: list[dict[str, Any]] = json.loads((RECORDED / "claude_memory_session.json").read_text())
TRAVERSAL: list[dict[str, Any]] = json.loads((RECORDED / "claude_memory_traversal.json").read_text())


def principal(*roles: Role) -> Principal:
    return Principal(
        f"t-{uuid.uuid4().hex[:10]}", "claude", frozenset(roles or {Role.ADMIN}), Sensitivity.INTERNAL
    )


def answer(tool: MnemoMemoryTool, command: dict[str, Any]) -> tuple[Any, bool]:
    """What the tool answers, and whether the runner marks it an error (a ToolError)."""
    try:
        return tool.call(command), False
    except ToolError as e:
        return e.content, True


def rows(mnemo: Mnemo, table: Any, tenant: str, **where: Any) -> int:
    stmt = select(func.count()).select_from(table).where(table.c.tenant_id == tenant)
    for column, value in where.items():
        stmt = stmt.where(table.c[column] == value)
    with mnemo.archive.store.read() as conn:
        return int(conn.execute(stmt).scalar_one())


def audit(mnemo: Mnemo, tenant: str) -> list[tuple[str, str]]:
    e = t.audit_events
    with mnemo.archive.store.read() as conn:
        return [
            (r.action, r.target)
            for r in conn.execute(select(e).where(e.c.tenant_id == tenant).order_by(e.c.seq))
        ]


def events(mnemo: Mnemo, tenant: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The tenant's audit events as stored (actor, action, target, detail), oldest first."""
    e = t.audit_events
    with mnemo.archive.store.read() as conn:
        return [
            (r.actor, r.action, r.target, json.loads(r.detail_json))
            for r in conn.execute(select(e).where(e.c.tenant_id == tenant).order_by(e.c.seq))
        ]


# ---- the recorded session -------------------------------------------------------------------------


def test_a_recorded_session_answers_as_recorded_and_each_write_is_a_version(mnemo: Mnemo) -> None:
    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))
    first_writes = 5  # view, create, view, str_replace, insert
    for step in SESSION[:first_writes]:
        assert answer(tool, step["input"]) == (step["result"], step["is_error"]), step["input"]
    history = mnemo.evidence_history(agent, "memories/notes.md")
    assert [(v.version, v.status) for v in history] == [(1, "superseded"), (2, "superseded"), (3, "active")]
    assert {(v.kind, v.source, v.locator, v.media_type.split(";")[0]) for v in history} == {
        ("knowledge", SOURCE, "/memories/notes.md", "text/plain")
    }
    assert (
        rows(mnemo, t.evidence, agent.tenant_id, evidence_id="memories/notes.md", recorded_by="claude") == 3
    )
    _, body = mnemo.get_evidence(agent, "memories/notes.md", with_content=True)
    assert body is not None and body.decode().splitlines()[2] == "- The user likes dark mode."
    # The version before the insert is what the str_replace made: nothing was overwritten.
    _, v2 = mnemo.get_evidence(agent, "memories/notes.md", version=2, with_content=True)
    assert v2 is not None and "dark mode" not in v2.decode() and "Python 3.12" in v2.decode()

    for step in SESSION[first_writes:]:
        assert answer(tool, step["input"]) == (step["result"], step["is_error"]), step["input"]
    # Refused commands wrote nothing; the rename made the new path's first version.
    assert [v.version for v in mnemo.evidence_history(agent, "memories/archive/notes.md")] == [1]
    assert rows(mnemo, t.evidence, agent.tenant_id) == 1


def test_deletes_leave_no_row_and_their_receipts_verify(mnemo: Mnemo) -> None:
    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))
    for step in SESSION:
        tool.call(step["input"]) if not step["is_error"] else answer(tool, step["input"])
    # notes.md (renamed away), projects/budget.txt and projects/okapi/plan.md (the folder)
    deleted = ["memories/notes.md", "memories/projects/budget.txt", "memories/projects/okapi/plan.md"]
    assert [r.target for r in tool.receipts] == [f"evidence:{i}" for i in deleted]
    for receipt in tool.receipts:
        assert mnemo.verify_deleted(agent, receipt).ok
    for evidence_id in deleted:
        assert rows(mnemo, t.evidence, agent.tenant_id, evidence_id=evidence_id) == 0
    deletes = [target for action, target in audit(mnemo, agent.tenant_id) if action == "delete"]
    assert deletes == [f"evidence:{i}" for i in deleted]


def test_the_texts_are_the_sdk_filesystem_tool_s(mnemo: Mnemo, tmp_path: Path) -> None:
    ours, theirs = MnemoMemoryTool(mnemo.as_(principal())), BetaLocalFilesystemMemoryTool(str(tmp_path))
    departures = []
    for i, step in enumerate(SESSION):
        mine, sdk = answer(ours, step["input"]), answer(theirs, step["input"])  # type: ignore[arg-type]
        if mine != sdk:
            departures.append(i)
            if step["input"].get("view_range"):  # ours refuses a range the file does not have
                assert mine[1] and not sdk[1]
            else:  # a listing: the same lines, a directory's size is its files' total, not 4K
                assert [line.split("\t")[1] for line in mine[0].splitlines()[1:]] == [
                    line.split("\t")[1] for line in sdk[0].splitlines()[1:]
                ]
    assert departures == [0, 9, 14, 22]


def test_the_async_tool_answers_what_the_blocking_one_does(mnemo: Mnemo) -> None:
    tool = AsyncMnemoMemoryTool(AsyncMnemo(mnemo, principal()))

    async def run() -> list[tuple[Any, bool]]:
        answers = []
        for step in SESSION:
            try:
                answers.append((await tool.call(step["input"]), False))
            except ToolError as e:
                answers.append((e.content, True))
        return answers

    assert asyncio.run(run()) == [(s["result"], s["is_error"]) for s in SESSION]
    assert len(tool.receipts) == 3


def test_each_write_appends_one_audit_event_naming_its_version(mnemo: Mnemo) -> None:
    """create, str_replace, insert and rename each append exactly one `put_evidence` event, by the
    principal, in the tenant's chain, naming the version it made (a renamed directory: every
    file's, in one event); a read or a write that changes nothing appends none."""
    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))

    def appended(command: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
        before = events(mnemo, agent.tenant_id)
        tool.call(command)
        after = events(mnemo, agent.tenant_id)
        assert after[: len(before)] == before  # appended, nothing before it changed
        return after[len(before) :]

    def put(*versions: str) -> tuple[str, str, str, list[str], int]:
        target = f"evidence:{versions[0]}" if len(versions) == 1 else f"evidence:batch of {len(versions)}"
        return ("claude", "put_evidence", target, list(versions), len(versions))

    def shown(found: list[tuple[str, str, str, dict[str, Any]]]) -> list[tuple[Any, ...]]:
        return [
            (actor, action, target, detail["versions"], detail["count"])
            if action == "put_evidence"
            else (actor, action, target)
            for actor, action, target, detail in found
        ]

    notes = "memories/notes.md"
    writes = [
        ({"command": "create", "path": "/memories/notes.md", "file_text": "alpha\n"}, f"{notes}@1"),
        (
            {"command": "str_replace", "path": "/memories/notes.md", "old_str": "alpha", "new_str": "beta"},
            f"{notes}@2",
        ),
        (
            {"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "gamma"},
            f"{notes}@3",
        ),
    ]
    for command, version in writes:
        assert shown(appended(command)) == [put(version)], command
    assert [v.version for v in mnemo.evidence_history(agent, notes)] == [1, 2, 3]
    # Reading, and a replacement that leaves the text as it is, make no version and no event.
    assert appended({"command": "view", "path": "/memories/notes.md"}) == []
    same = {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "beta"}
    assert appended(same) == []
    assert [v.version for v in mnemo.evidence_history(agent, notes)] == [1, 2, 3]

    # A rename: the new path's version in one event, then the old path's deletion.
    renamed = appended(
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/kept.md"}
    )
    assert shown(renamed) == [put("memories/kept.md@1"), ("claude", "delete", f"evidence:{notes}")]
    # A directory's rename writes all its files in one transaction: one event names them all.
    for name in ("a", "b"):
        tool.call({"command": "create", "path": f"/memories/dir/{name}.md", "file_text": f"{name}\n"})
    moved = appended({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"})
    assert shown(moved) == [
        put("memories/moved/a.md@1", "memories/moved/b.md@1"),
        ("claude", "delete", "evidence:memories/dir/a.md"),
        ("claude", "delete", "evidence:memories/dir/b.md"),
    ]
    assert mnemo.archive.verify_audit(agent).ok


# ---- paths ------------------------------------------------------------------------------------------


def test_paths_outside_memories_are_refused_before_the_archive_is_touched(mnemo: Mnemo) -> None:
    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))
    tool.call({"command": "create", "path": "/memories/notes.md", "file_text": "kept\n"})
    for step in TRAVERSAL:
        got = answer(tool, step["input"])
        assert got == (step["result"], True), step["input"]
    assert rows(mnemo, t.evidence, agent.tenant_id) == 1  # only notes.md, one version
    # The create's version is the chain's one event: no refusal reached the archive.
    assert audit(mnemo, agent.tenant_id) == [("put_evidence", "evidence:memories/notes.md@1")]


# ---- who may delete ---------------------------------------------------------------------------------


def test_a_principal_that_may_not_delete_changes_nothing(mnemo: Mnemo) -> None:
    agent = principal(Role.AGENT)
    tool = MnemoMemoryTool(mnemo.as_(agent))
    tool.call({"command": "create", "path": "/memories/a/notes.md", "file_text": "one\n"})
    content, is_error = answer(tool, {"command": "delete", "path": "/memories/a"})
    assert is_error and content.startswith("/memories/a was not deleted: the archive lets only admins delete")
    assert content.endswith("Nothing was changed.")
    content, is_error = answer(
        tool, {"command": "rename", "old_path": "/memories/a/notes.md", "new_path": "/memories/b.md"}
    )
    assert is_error and "Nothing was changed" in content
    assert rows(mnemo, t.evidence, agent.tenant_id) == 1
    assert tool.receipts == []
    assert audit(mnemo, agent.tenant_id) == [
        ("put_evidence", "evidence:memories/a/notes.md@1"),  # the create
        ("denied", "evidence:memories/a/notes.md"),  # the delete, refused; the rename never asked
    ]


# ---- tenants ------------------------------------------------------------------------------------------


def test_another_tenant_s_memories_are_invisible(mnemo: Mnemo) -> None:
    a, b = principal(), principal()
    MnemoMemoryTool(mnemo.as_(b)).call(
        {"command": "create", "path": "/memories/notes.md", "file_text": "B's secret okapi code 7731\n"}
    )
    tool = MnemoMemoryTool(mnemo.as_(a))
    assert tool.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")
    assert answer(tool, {"command": "view", "path": "/memories/notes.md"})[1]
    assert answer(tool, {"command": "delete", "path": "/memories/notes.md"})[1]
    tool.call({"command": "create", "path": "/memories/notes.md", "file_text": "A's own\n"})
    assert [v.version for v in mnemo.evidence_history(a, "memories/notes.md")] == [1]
    hits = mnemo.search(a, "secret okapi code", sources=[SOURCE], limit=50).hits
    assert sum("7731" in h.snippet for h in hits) == 0
    assert rows(mnemo, t.evidence, b.tenant_id, evidence_id="memories/notes.md") == 1
    _, body = mnemo.get_evidence(b, "memories/notes.md", with_content=True)
    assert body == b"B's secret okapi code 7731\n"


def test_memory_files_are_found_by_hybrid_search(mnemo: Mnemo) -> None:
    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))
    tool.call(
        {"command": "create", "path": "/memories/prefs.md", "file_text": "The user drinks oolong tea.\n"}
    )
    (hit,) = mnemo.search(agent, "oolong tea", sources=[SOURCE]).hits
    assert (hit.evidence_id, hit.locator, hit.kind) == (
        "memories/prefs.md",
        "/memories/prefs.md",
        "knowledge",
    )


# ---- the SDK's tool runner ------------------------------------------------------------------------------


def _message(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def test_the_sdk_tool_runner_runs_the_tool_and_marks_refusals_as_errors(mnemo: Mnemo) -> None:
    """No network: the Messages API is two recorded replies served by a MockTransport (httpx2)."""
    replies = [
        _message(
            1,
            [
                {"type": "tool_use", "id": "toolu_1", "name": "memory", "input": SESSION[1]["input"]},
                {"type": "tool_use", "id": "toolu_2", "name": "memory", "input": TRAVERSAL[0]["input"]},
            ],
            "tool_use",
        ),
        _message(2, [{"type": "text", "text": "Noted."}], "end_turn"),
    ]
    sent: list[dict[str, Any]] = []

    def api(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=replies[len(sent) - 1])

    agent = principal()
    tool = MnemoMemoryTool(mnemo.as_(agent))
    client = Anthropic(api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    runner = client.beta.messages.tool_runner(
        model="claude-test", max_tokens=100, tools=[tool], messages=[{"role": "user", "content": "Remember."}]
    )
    assert runner.until_done().content[0].text == "Noted."  # type: ignore[union-attr]
    assert sent[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = sent[1]["messages"][-1]["content"]
    assert [(r["tool_use_id"], r["content"], r.get("is_error", False)) for r in results] == [
        ("toolu_1", SESSION[1]["result"], False),
        ("toolu_2", TRAVERSAL[0]["result"], True),
    ]
    assert rows(mnemo, t.evidence, agent.tenant_id) == 1


def test_the_tools_take_handles_only(mnemo: Mnemo) -> None:
    with pytest.raises(TypeError, match="not a Mnemo"):
        MnemoMemoryTool(mnemo)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="blocking handle"):
        MnemoMemoryTool(AsyncMnemo(mnemo, principal()))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="awaited handle"):
        AsyncMnemoMemoryTool(mnemo.as_(principal()))  # type: ignore[arg-type]


class CountingHandle(MnemoAs):
    """A blocking in-process handle that counts the reads of an original."""

    reads = 0

    def get_evidence(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.reads += 1
        return super().get_evidence(*args, **kwargs)


def test_viewing_a_folder_reads_no_file(mnemo: Mnemo) -> None:
    """Claude views /memories first in every task: the listing says each file's size, so the
    view does not read every file (one call per file through a client)."""
    agent = principal()
    handle = CountingHandle(mnemo, agent)
    tool = MnemoMemoryTool(handle)
    for name in ("a.md", "b.md", "sub/c.md"):
        tool.call({"command": "create", "path": f"/memories/{name}", "file_text": f"{name} ünï\n"})
    handle.reads = 0
    listing = tool.call({"command": "view", "path": "/memories"})
    assert handle.reads == 0
    assert listing.splitlines()[1:] == [
        "37B\t/memories",
        "11B\t/memories/a.md",
        "11B\t/memories/b.md",
        "15B\t/memories/sub/",
        "15B\t/memories/sub/c.md",
    ]
