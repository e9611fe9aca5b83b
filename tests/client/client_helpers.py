"""Helpers of the REST client tests: the served API and what a test reads of it, one test's
tenant with clients by role, and the async client driven like the sync one (see conftest.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Table, func, select

from mnemo_sea.archive import Archive
from mnemo_sea.archive.features.api_keys import create_key
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import AsyncMnemoClient, MnemoClient, RetryPolicy
from mnemo_sea.eval.api_stack import ApiServer

# The API's body limit here: small, so a test can send a body over it.
MAX_REQUEST_BYTES = 256 * 1024
# Tests wait for nothing long: a retry, where one happens, waits at most this much.
FAST_RETRY = RetryPolicy(retries=2, max_delay=0.05, backoff=0.01)

ROLES = {
    "agent": (("agent",), "internal"),
    "reader": (("reader",), "internal"),
    "admin": (("admin",), "restricted"),
    "public": (("agent",), "public"),  # an agent cleared for public records only
}


@dataclass
class Served:
    """One API process and the archive it serves, open in this process too for keys and checks."""

    mode: str
    server: ApiServer
    archive: Archive

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def key(self, tenant: str, role: str, subject: str | None = None) -> str:
        roles, clearance = ROLES[role]
        secret, _ = create_key(
            self.archive.store,
            tenant_id=tenant,
            subject=subject or f"{role}-1",
            roles=roles,
            clearance=clearance,
        )
        return secret

    def count(self, table: Table, tenant: str, **where: Any) -> int:
        """Rows of `table` in `tenant` (where column == value): what the API wrote, read raw."""
        stmt = select(func.count()).select_from(table).where(table.c.tenant_id == tenant)
        for column, value in where.items():
            stmt = stmt.where(table.c[column] == value)
        with self.archive.store.read() as conn:
            return int(conn.execute(stmt).scalar_one())

    def keys_stored(self, tenant: str, key: str) -> int:
        """Idempotency replies stored under the caller's `key` (the stored key ends with it)."""
        table = t.idempotency_keys
        stmt = select(func.count()).where(table.c.tenant_id == tenant, table.c.key.like(f"%:{key}"))
        with self.archive.store.read() as conn:
            return int(conn.execute(stmt).scalar_one())

    def logged(self, request_id: str) -> list[int]:
        """The statuses the server logged for `request_id`."""
        statuses = []
        for line in self.server.log_path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("request_id") == request_id and "status" in entry:
                statuses.append(entry["status"])
        return statuses


@dataclass
class Tenant:
    """One test's tenant on the shared server, and clients for it by role."""

    served: Served
    flavour: str
    id: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:12]}")
    opened: list[Any] = field(default_factory=list)

    def client(self, role: str = "agent", **kwargs: Any) -> Any:
        """A client of this tenant as `role`: MnemoClient, or AsyncMnemoClient behind SyncOfAsync."""
        key = self.served.key(self.id, role)
        kwargs.setdefault("retry", FAST_RETRY)
        if self.flavour == "sync":
            made: Any = MnemoClient(self.served.base_url, api_key=key, **kwargs)
        else:
            made = SyncOfAsync(AsyncMnemoClient(self.served.base_url, api_key=key, **kwargs))
        self.opened.append(made)
        return made

    def count(self, table: Table, **where: Any) -> int:
        return self.served.count(table, self.id, **where)

    def close(self) -> None:
        for client in self.opened:
            client.close()


class SyncOfAsync:
    """An AsyncMnemoClient called like a MnemoClient: each method's coroutine runs to its end on
    a loop of this object's own, so one test body covers both clients."""

    def __init__(self, client: AsyncMnemoClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)
        assert asyncio.iscoroutinefunction(method), name

        def run(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(method(*args, **kwargs))

        return run

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


Alteration = Callable[[httpx.Request, httpx.Response], httpx.Response]


def unaltered(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    return response


class Tampering:
    """A man in the middle between a client and the served API, as a buggy proxy or an attacker
    would stand: every request reaches the real API, and every answer comes back as `alter`
    makes it of the real one (unaltered until a test sets it). `transport()` is httpx's
    MockTransport, which the sync and the async client both take."""

    def __init__(self) -> None:
        self.real = httpx.HTTPTransport()
        self.alter: Alteration = unaltered
        self.sent = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        real = self.real.handle_request(request)
        real.read()
        # Served again from memory, as either client reads it (the real one streams for a sync
        # client only); the body is decoded already, so its encoding and length go.
        dropped = {"content-encoding", "content-length", "transfer-encoding"}
        headers = {k: v for k, v in real.headers.items() if k.lower() not in dropped}
        return self.alter(request, httpx.Response(real.status_code, headers=headers, content=real.content))

    def close(self) -> None:
        self.real.close()


def json_altered(change: Callable[[Any], Any]) -> Alteration:
    """An alteration of the answer's JSON body (`change` edits it in place or returns another),
    keeping its status and request id."""

    def alter(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        body = response.json()
        changed = change(body)
        return httpx.Response(
            response.status_code,
            json=body if changed is None else changed,
            headers={"x-request-id": response.headers.get("x-request-id", "")},
        )

    return alter
