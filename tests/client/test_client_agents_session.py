"""`MnemoSession` through the REST client: the Agents SDK session behaviours
(tests/agents_sessions.py) against a real API process, on `MnemoClient` (run in a worker thread)
and on `AsyncMnemoClient` (awaited on the test's loop), each test in a tenant of its own whose
rows are counted in the served archive's tables."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents_sessions import SHARED, Sessions
from client_helpers import FAST_RETRY, Served
from sqlalchemy import Table

from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.openai_agents import MnemoSession


@dataclass
class Remote:
    """One tenant of the served API, its sessions on one kind of client (keys by role)."""

    served: Served
    kind: str
    tenant: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:12]}")
    clients: dict[str, Any] = field(default_factory=dict)
    others: list[Remote] = field(default_factory=list)

    def _client(self, role: str) -> Any:
        if role not in self.clients:
            key = self.served.key(self.tenant, role)
            kind = MnemoClient if self.kind == "sync" else AsyncMnemoClient
            self.clients[role] = kind(self.served.base_url, api_key=key, retry=FAST_RETRY)
        return self.clients[role]

    def session(self, session_id: str, role: str = "agent", **kwargs: Any) -> MnemoSession:
        return MnemoSession(session_id, self._client(role), **kwargs)

    def count(self, table: Table, **where: Any) -> int:
        return self.served.count(table, self.tenant, **where)

    def other_tenant(self) -> Remote:
        other = Remote(self.served, self.kind)
        self.others.append(other)
        return other

    async def aclose(self) -> None:
        for client in self.clients.values():
            if isinstance(client, AsyncMnemoClient):
                await client.aclose()
            else:
                client.close()
        for other in self.others:
            await other.aclose()


@pytest.fixture(params=["sync", "async"])
def remote(request: pytest.FixtureRequest, served: Served) -> Iterator[Remote]:
    yield Remote(served, request.param)


def run(remote: Remote, check: Callable[[Sessions], Coroutine[Any, Any, Any]]) -> None:
    """The check and the clients' closing on one loop: an async client's connections are bound
    to the loop that opened them."""

    async def body() -> None:
        try:
            await check(remote)
        finally:
            await remote.aclose()

    asyncio.run(body())


@pytest.mark.parametrize("check", SHARED, ids=lambda check: check.__name__)
def test_session_behaviour_through_the_client(check: Callable[[Sessions], Any], remote: Remote) -> None:
    run(remote, check)
