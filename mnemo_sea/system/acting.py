"""The facade with the caller bound, so each call names what it does and not again who does it,
the way the REST client reads (its API key is the principal):

    MnemoAs     `mnemo.as_(principal)`, as `MnemoClient` reads
    AsyncMnemo  `AsyncMnemo(mnemo, principal)`, as `AsyncMnemoClient` reads: each call a
                coroutine that runs the facade's method in a worker thread, off the event loop

Every method of `Mnemo` that takes the principal first is on both under its name, with the same
parameters after it and the same types (each is derived from the facade's own method, not
written again), so code moves between the library and the client unchanged. A test checks that
no such method of `Mnemo` is missing from either.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from mnemo_sea.archive import Principal
from mnemo_sea.retrieval import Embedder
from mnemo_sea.system.mnemo import Mnemo  # the facade imports this module only when asked (as_)

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=Callable[..., Any])


def _bound(method: Callable[Concatenate[Mnemo, Principal, P], R]) -> Callable[Concatenate[MnemoAs, P], R]:
    """`MnemoAs.<name>`: `Mnemo.<name>` of the handle's facade, as the handle's principal."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: MnemoAs, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[Concatenate[Principal, P], R] = getattr(self.mnemo, name)
        return run(self.principal, *args, **kwargs)

    return _shown_as(call, method, "MnemoAs")


def _off_loop(
    method: Callable[Concatenate[Mnemo, Principal, P], R],
) -> Callable[Concatenate[AsyncMnemo, P], Coroutine[Any, Any, R]]:
    """`AsyncMnemo.<name>`: `Mnemo.<name>` as the handle's principal, in a worker thread.

    The facade blocks (SQLite or PostgreSQL, the index, the model); `asyncio.to_thread` keeps the
    loop serving while it works, and carries the caller's context variables into the thread.
    The facade is safe to call from several threads at once (the REST server does the same).
    """
    name = method.__name__

    @functools.wraps(method)
    async def call(self: AsyncMnemo, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[Concatenate[Principal, P], R] = getattr(self.mnemo, name)
        return await asyncio.to_thread(self._calls.run, run, self.principal, *args, **kwargs)

    return _shown_as(call, method, "AsyncMnemo")


def _shown_as(call: C, method: Callable[..., Any], owner: str) -> C:
    """`call` named `owner.<name>`, with the facade's parameters without the principal: what
    help() and editors show."""
    call.__qualname__ = f"{owner}.{method.__name__}"
    shown = inspect.signature(method)
    call.__signature__ = shown.replace(  # type: ignore[attr-defined]
        parameters=[p for p in shown.parameters.values() if p.name != "principal"]
    )
    return call


class MnemoAs:
    """The facade acting as one principal: `mnemo.as_(agent).record(session, tool, content)`."""

    def __init__(self, mnemo: Mnemo, principal: Principal) -> None:
        _check_handle(mnemo, principal, "MnemoAs")
        self.mnemo = mnemo
        self.principal = principal

    def __repr__(self) -> str:
        return f"MnemoAs({self.principal.subject!r} in tenant {self.principal.tenant_id!r})"

    record = _bound(Mnemo.record)
    archive_results = _bound(Mnemo.archive_results)
    live_view = _bound(Mnemo.live_view)
    recover = _bound(Mnemo.recover)
    get_result = _bound(Mnemo.get_result)
    list_sessions = _bound(Mnemo.list_sessions)
    list_results = _bound(Mnemo.list_results)
    session_info = _bound(Mnemo.session_info)
    curate = _bound(Mnemo.curate)
    recall = _bound(Mnemo.recall)
    context = _bound(Mnemo.context)
    ingest = _bound(Mnemo.ingest)
    put_evidence = _bound(Mnemo.put_evidence)
    get_evidence = _bound(Mnemo.get_evidence)
    evidence_history = _bound(Mnemo.evidence_history)
    retract = _bound(Mnemo.retract)
    search = _bound(Mnemo.search)
    check_citations = _bound(Mnemo.check_citations)
    create_summary = _bound(Mnemo.create_summary)
    get_summary = _bound(Mnemo.get_summary)
    list_evidence = _bound(Mnemo.list_evidence)
    list_summaries = _bound(Mnemo.list_summaries)
    list_memory_owners = _bound(Mnemo.list_memory_owners)
    facts = _bound(Mnemo.facts)
    remember = _bound(Mnemo.remember)
    current = _bound(Mnemo.current)
    memory_history = _bound(Mnemo.memory_history)
    forget = _bound(Mnemo.forget)
    purge_expired = _bound(Mnemo.purge_expired)
    update_task_state = _bound(Mnemo.update_task_state)
    task_state = _bound(Mnemo.task_state)
    task_state_history = _bound(Mnemo.task_state_history)
    delete_session = _bound(Mnemo.delete_session)
    delete_evidence = _bound(Mnemo.delete_evidence)
    delete_owner = _bound(Mnemo.delete_owner)
    verify_deleted = _bound(Mnemo.verify_deleted)


class _Calls:
    """The calls of one async handle running in worker threads, so that closing it waits for
    them: a caller that stopped waiting (a timeout, a cancelled task) does not stop the thread,
    and a facade closed under it would fail it half-way. Counted in the thread itself, so a call
    the executor never started is not waited for, and one that starts after the close is refused."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._running = 0
        self.closed = False

    def run(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        with self._idle:
            if self.closed:
                raise RuntimeError("this AsyncMnemo is closed: make a new handle")
            self._running += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def close_and_wait(self) -> None:
        with self._idle:
            self.closed = True
            self._idle.wait_for(lambda: self._running == 0)


def _check_handle(mnemo: object, principal: object, owner: str) -> None:
    """A handle made of something else fails here, not at its first call with an AttributeError."""
    if not isinstance(mnemo, Mnemo):
        raise TypeError(f"{owner} takes a Mnemo first, got {type(mnemo).__name__}")
    if not isinstance(principal, Principal):
        raise TypeError(f"{owner} acts as a Principal, got {type(principal).__name__}")


class AsyncMnemo:
    """The facade acting as one principal, for asyncio: `await AsyncMnemo(mnemo, agent).search(q)`.

    Borrowing a facade (the constructor) leaves it open on `aclose()`; `AsyncMnemo.open` opens
    one of its own (the embedded default, as `Mnemo.open`) that `aclose()` closes. `aclose()`
    first waits for the handle's calls still running in their threads; a call after it raises
    RuntimeError. A progress callback given to `ingest` is called from the worker thread.
    """

    def __init__(self, mnemo: Mnemo, principal: Principal) -> None:
        _check_handle(mnemo, principal, "AsyncMnemo")
        self.mnemo = mnemo
        self.principal = principal
        self._owned = False
        self._calls = _Calls()

    @classmethod
    async def open(cls, path: str | Path, principal: Principal, *, embedder: Embedder | None = None) -> Self:
        """`Mnemo.open(path)` in a worker thread (it may load the model), acting as `principal`."""
        handle = cls(await asyncio.to_thread(Mnemo.open, path, embedder=embedder), principal)
        handle._owned = True
        return handle

    async def aclose(self) -> None:
        await asyncio.to_thread(self._calls.close_and_wait)
        if self._owned:
            self._owned = False  # closed once, however often aclose is called
            await asyncio.to_thread(self.mnemo.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncMnemo({self.principal.subject!r} in tenant {self.principal.tenant_id!r})"

    record = _off_loop(Mnemo.record)
    archive_results = _off_loop(Mnemo.archive_results)
    live_view = _off_loop(Mnemo.live_view)
    recover = _off_loop(Mnemo.recover)
    get_result = _off_loop(Mnemo.get_result)
    list_sessions = _off_loop(Mnemo.list_sessions)
    list_results = _off_loop(Mnemo.list_results)
    session_info = _off_loop(Mnemo.session_info)
    curate = _off_loop(Mnemo.curate)
    recall = _off_loop(Mnemo.recall)
    context = _off_loop(Mnemo.context)
    ingest = _off_loop(Mnemo.ingest)
    put_evidence = _off_loop(Mnemo.put_evidence)
    get_evidence = _off_loop(Mnemo.get_evidence)
    evidence_history = _off_loop(Mnemo.evidence_history)
    retract = _off_loop(Mnemo.retract)
    search = _off_loop(Mnemo.search)
    check_citations = _off_loop(Mnemo.check_citations)
    create_summary = _off_loop(Mnemo.create_summary)
    get_summary = _off_loop(Mnemo.get_summary)
    list_evidence = _off_loop(Mnemo.list_evidence)
    list_summaries = _off_loop(Mnemo.list_summaries)
    list_memory_owners = _off_loop(Mnemo.list_memory_owners)
    facts = _off_loop(Mnemo.facts)
    remember = _off_loop(Mnemo.remember)
    current = _off_loop(Mnemo.current)
    memory_history = _off_loop(Mnemo.memory_history)
    forget = _off_loop(Mnemo.forget)
    purge_expired = _off_loop(Mnemo.purge_expired)
    update_task_state = _off_loop(Mnemo.update_task_state)
    task_state = _off_loop(Mnemo.task_state)
    task_state_history = _off_loop(Mnemo.task_state_history)
    delete_session = _off_loop(Mnemo.delete_session)
    delete_evidence = _off_loop(Mnemo.delete_evidence)
    delete_owner = _off_loop(Mnemo.delete_owner)
    verify_deleted = _off_loop(Mnemo.verify_deleted)
