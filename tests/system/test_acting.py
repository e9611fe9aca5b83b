"""`Mnemo.as_(principal)` and `AsyncMnemo(mnemo, principal)`: every facade method that takes the
principal first, bound to one, with the facade's parameters after it; calls through either act
as that principal, the async handle's in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest
from fakes import HashingEmbedder

from mnemo_sea.archive import EvidenceInput, Forbidden, Principal, Role, Sensitivity
from mnemo_sea.retrieval import IndexLocked
from mnemo_sea.system.acting import AsyncMnemo, MnemoAs
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
READER = Principal("clinic", "pet-7", frozenset({Role.READER}), Sensitivity.INTERNAL)


def _takes_the_principal_first(name: str) -> bool:
    params = list(inspect.signature(getattr(Mnemo, name)).parameters)
    return len(params) > 1 and params[1] == "principal"


def test_every_method_that_takes_the_principal_is_bound_with_the_same_parameters() -> None:
    facade = {n for n in dir(Mnemo) if not n.startswith("_") and callable(getattr(Mnemo, n))}
    acting = {n for n in facade if _takes_the_principal_first(n)} - {"as_"}  # as_ makes the handle
    assert acting and acting <= set(vars(MnemoAs))  # a new facade method must be bound too
    for name in acting:
        theirs = inspect.signature(getattr(Mnemo, name)).parameters
        ours = inspect.signature(getattr(MnemoAs, name)).parameters
        assert [p for p in theirs if p != "principal"] == list(ours), name


def test_calls_through_the_handle_act_as_its_principal(tmp_path: Path) -> None:
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        agent, reader = mnemo.as_(AGENT), mnemo.as_(READER)
        assert repr(agent) == "MnemoAs('agent-1' in tenant 'clinic')"
        recorded = agent.record("visit-1", "lab", "ALT 112", owner="pet-7")
        agent.ingest([EvidenceInput("Refunds within 14 days.", "policy", "kb:refund")])
        assert [h.evidence_id for h in agent.search("refunds", kinds=["knowledge"]).hits] == ["kb:refund"]
        assert reader.list_results("visit-1") == mnemo.list_results(READER, "visit-1") == [recorded]
        with pytest.raises(Forbidden):  # the reader's own rights, not the agent's
            reader.record("visit-1", "lab", "x")
        admin = Principal("clinic", "admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
        before = len(mnemo.archive.audit_events(admin))
        agent.archive_results("visit-1", [("r1", "lab")])
        (archived,) = mnemo.archive.audit_events(admin)[before:]
        assert (archived.actor, archived.action) == ("agent-1", "archive")  # in the audit trail


# ---- AsyncMnemo: the same handle for asyncio ---------------------------------------------------


def test_the_async_handle_has_every_bound_method_as_a_coroutine_and_the_clients_names() -> None:
    from mnemo_sea.client import AsyncMnemoClient

    bound = {n for n, v in vars(MnemoAs).items() if callable(v) and not n.startswith("_")}
    for name in bound:
        method = getattr(AsyncMnemo, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method).parameters == inspect.signature(getattr(MnemoAs, name)).parameters
    client = {n for n, v in vars(AsyncMnemoClient).items() if inspect.iscoroutinefunction(v) and n[0] != "_"}
    operations = {n for n in vars(AsyncMnemo) if inspect.iscoroutinefunction(getattr(AsyncMnemo, n))}
    assert client - {"aclose", "health"} <= operations, "the client's, too"


def test_the_async_handle_acts_as_its_principal_with_the_facades_results(tmp_path: Path) -> None:
    async def session(mnemo: Mnemo) -> None:
        async with AsyncMnemo(mnemo, AGENT) as agent, AsyncMnemo(mnemo, READER) as reader:
            assert repr(agent) == "AsyncMnemo('agent-1' in tenant 'clinic')"
            recorded = await agent.record("visit-1", "lab", "ALT 112\nALT 98\n", owner="pet-7")
            await agent.ingest([EvidenceInput("Refunds within 14 days.", "policy", "kb:refund")])
            found = await agent.search("refunds", kinds=["knowledge"])
            assert [h.evidence_id for h in found.hits] == ["kb:refund"]
            assert await reader.list_results("visit-1") == mnemo.list_results(READER, "visit-1") == [recorded]
            with pytest.raises(Forbidden):  # the reader's own rights, typed as in the library
                await reader.record("visit-1", "lab", "x")
            await agent.archive_results("visit-1", [("r1", "two ALT values")])
            recovered = await agent.recover("visit-1", "r1")
            assert recovered.content == b"ALT 112\nALT 98\n"

    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        asyncio.run(session(mnemo))
        # A borrowed facade stays open when its handles close.
        assert [h.evidence_id for h in mnemo.search(AGENT, "refunds", kinds=["knowledge"]).hits] == [
            "kb:refund"
        ]


def test_the_async_handle_works_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A facade call that blocks until the loop does something would never end if it ran on
    the loop: here the loop sets the event the call waits for."""
    release = threading.Event()
    seen: dict[str, object] = {}
    real = Mnemo.list_sessions

    def blocking(self: Mnemo, principal: Principal, **kw: object) -> object:
        seen["thread"] = threading.get_ident()
        assert release.wait(timeout=120), "the loop never ran while the call blocked"  # bounds a hang
        return real(self, principal, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Mnemo, "list_sessions", blocking)

    async def main(mnemo: Mnemo) -> list[object]:
        call = asyncio.ensure_future(AsyncMnemo(mnemo, AGENT).list_sessions())
        while "thread" not in seen:  # the call has started in its thread
            await asyncio.sleep(0)
        seen["loop"] = threading.get_ident()
        release.set()
        return list(await call)

    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        assert asyncio.run(main(mnemo)) == []
    assert seen["thread"] != seen["loop"]


def test_an_async_handle_that_opened_its_facade_closes_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncMnemo.open(tmp_path / "data", AGENT, embedder=HashingEmbedder()) as agent:
            await agent.record("s", "tool", "kept")
            with pytest.raises(IndexLocked):  # open: it holds the folder's index
                Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())

    asyncio.run(main())
    with Mnemo.open(tmp_path / "data", embedder=HashingEmbedder()) as reopened:  # closed: free again
        assert [r.result_id for r in reopened.list_results(AGENT, "s")] == ["r1"]


def test_a_handle_of_something_else_is_refused_when_made(tmp_path: Path) -> None:
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        for make in (AsyncMnemo, MnemoAs):
            with pytest.raises(TypeError, match="acts as a Principal, got str"):
                make(mnemo, "agent-1")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="takes a Mnemo first, got NoneType"):
                make(None, AGENT)  # type: ignore[arg-type]


def test_closing_waits_for_a_call_its_caller_stopped_waiting_for_and_refuses_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, started = threading.Event(), threading.Event()
    finished: list[str] = []
    real = Mnemo.list_sessions

    def slow(self: Mnemo, principal: Principal, **kw: object) -> object:
        started.set()
        assert release.wait(timeout=120), "never released"  # bounds a hang
        finished.append("list_sessions")
        return real(self, principal, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Mnemo, "list_sessions", slow)

    async def main(mnemo: Mnemo) -> None:
        handle = AsyncMnemo(mnemo, AGENT)
        call = asyncio.ensure_future(handle.list_sessions())
        while not started.is_set():
            await asyncio.sleep(0)
        call.cancel()  # the caller gives up; the thread goes on
        with pytest.raises(asyncio.CancelledError):
            await call
        closing = asyncio.ensure_future(handle.aclose())
        for _ in range(50):  # the loop runs on while the close waits for the thread
            await asyncio.sleep(0)
        assert not closing.done() and finished == []
        release.set()
        await closing
        assert finished == ["list_sessions"]  # the close came after the call, not under it
        with pytest.raises(RuntimeError, match="closed"):
            await handle.list_sessions()

    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        asyncio.run(main(mnemo))
