"""`MnemoSession` in process: the Agents SDK session behaviours (tests/agents_sessions.py) on a
blocking handle (`mnemo.as_`, run in a worker thread) and an awaited one (`AsyncMnemo`), and
what only an in-process test can do: make the archive fail in the middle of a batch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from agents_sessions import SHARED, Sessions, contents, msg, new_id
from sqlalchemy import Table, func, select

from mnemo_sea.archive import Principal, Role, Sensitivity, StoreUnavailable
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.integrations.openai_agents import MnemoSession
from mnemo_sea.system.acting import AsyncMnemo
from mnemo_sea.system.mnemo import Mnemo

ROLES = {"agent": ({Role.AGENT}, Sensitivity.INTERNAL), "admin": ({Role.ADMIN}, Sensitivity.RESTRICTED)}


@dataclass
class InProcess:
    """One tenant of the test's Mnemo, its sessions on one kind of handle."""

    mnemo: Mnemo
    kind: str
    tenant: str

    def session(self, session_id: str, role: str = "agent", **kwargs: Any) -> MnemoSession:
        roles, clearance = ROLES[role]
        principal = Principal(self.tenant, f"{role}-1", frozenset(roles), clearance)
        handle = self.mnemo.as_(principal) if self.kind == "blocking" else AsyncMnemo(self.mnemo, principal)
        return MnemoSession(session_id, handle, **kwargs)

    def count(self, table: Table, **where: Any) -> int:
        stmt = select(func.count()).select_from(table).where(table.c.tenant_id == self.tenant)
        for column, value in where.items():
            stmt = stmt.where(table.c[column] == value)
        with self.mnemo.archive.store.read() as conn:
            return int(conn.execute(stmt).scalar_one())

    def other_tenant(self) -> InProcess:
        return InProcess(self.mnemo, self.kind, f"{self.tenant}-other")


@pytest.fixture(params=["blocking", "async"])
def tenant(request: pytest.FixtureRequest, mnemo: Mnemo) -> InProcess:
    return InProcess(mnemo, request.param, f"t-{uuid.uuid4().hex[:10]}")


@pytest.mark.parametrize("check", SHARED, ids=lambda check: check.__name__)
def test_session_behaviour(check: Callable[[Sessions], Any], tenant: InProcess) -> None:
    asyncio.run(check(tenant))


def test_a_batch_that_fails_half_way_is_never_shown(
    tenant: InProcess, mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tenant.session(new_id())
    asyncio.run(session.add_items([msg("user", "before")]))
    real = mnemo.record
    calls = {"n": 0}

    def failing_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StoreUnavailable("test: the store went away mid-batch")
        return real(*args, **kwargs)

    monkeypatch.setattr(mnemo, "record", failing_second)
    with pytest.raises(StoreUnavailable):
        asyncio.run(session.add_items([msg("user", "half 1"), msg("user", "half 2"), msg("user", "half 3")]))
    monkeypatch.setattr(mnemo, "record", real)
    # The first item of the batch is in the archive (append-only), but no commit names it.
    assert tenant.count(t.tool_results, session_id=f"{session.session_id}@0") == 3
    assert contents(asyncio.run(session.get_items())) == ["before"]
    asyncio.run(session.add_items([msg("user", "after")]))
    assert contents(asyncio.run(session.get_items())) == ["before", "after"]
    assert asyncio.run(session.pop_item()) == msg("user", "after")


def test_a_clear_whose_line_was_not_written_is_repaired_by_the_next_write(
    tenant: InProcess, mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = new_id()
    agent, admin = tenant.session(sid), tenant.session(sid, role="admin")
    asyncio.run(agent.add_items([msg("user", "old")]))
    real = mnemo.record

    def refuse_the_clears_line(principal: Principal, session_id: str, *args: Any, **kwargs: Any) -> Any:
        if session_id.endswith("@clears"):
            raise StoreUnavailable("test: down right after the deletion")
        return real(principal, session_id, *args, **kwargs)

    monkeypatch.setattr(mnemo, "record", refuse_the_clears_line)
    with pytest.raises(StoreUnavailable):
        asyncio.run(admin.clear_session())
    monkeypatch.setattr(mnemo, "record", real)
    assert tenant.count(t.tool_results, session_id=f"{sid}@0") == 0  # deleted all the same
    assert asyncio.run(agent.get_items()) == []
    asyncio.run(agent.add_items([msg("user", "new")]))
    assert contents(asyncio.run(agent.get_items())) == ["new"]
    assert asyncio.run(agent.archive_session()) == f"{sid}@1"
    assert tenant.count(t.tool_results, session_id=f"{sid}@clears") == 1


def test_a_mnemo_itself_is_refused_with_what_to_pass(mnemo: Mnemo) -> None:
    with pytest.raises(TypeError, match="as_"):
        MnemoSession("chat-1", mnemo)


def test_the_runner_s_reads_of_the_history_read_each_item_once(
    tenant: InProcess, mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Runner reads the whole history on every turn: a result is never rewritten, so an
    item's original is read from the archive once per session object, not once per turn."""
    session = tenant.session(new_id())
    asyncio.run(session.add_items([msg("user", "one"), msg("assistant", "two")]))
    real = mnemo.get_result
    reads: list[str] = []

    def counted(principal: Principal, session_id: str, result_id: str, **kwargs: Any) -> Any:
        reads.append(result_id)
        return real(principal, session_id, result_id, **kwargs)

    monkeypatch.setattr(mnemo, "get_result", counted)
    first = asyncio.run(session.get_items())
    asyncio.run(session.add_items([msg("user", "three")]))
    second = asyncio.run(session.get_items())
    assert contents(first) == ["one", "two"] and contents(second) == ["one", "two", "three"]
    assert sorted(reads) == ["r1", "r2", "r4"]  # r3 is the first batch's commit mark
    second[0]["content"] = "changed by the caller"
    assert contents(asyncio.run(session.get_items())) == ["one", "two", "three"]
