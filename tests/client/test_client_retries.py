"""Retries: a 503 with Retry-After, or a lost connection, sends a read or a keyed write again, a
bounded number of times, honouring Retry-After up to a cap; a write the server cannot make
idempotent is sent once. A retried write writes once: checked in the archive's tables.

A small ASGI stub (served by uvicorn on loopback) answers 503 on demand; the lost answers are
a transport that lets the real server write, then drops its answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from client_helpers import Tenant

from mnemo_sea.archive import StoreUnavailable
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import ApiUnreachable, AsyncMnemoClient, MnemoClient, RetryPolicy
from mnemo_sea.eval.api_stack import LOOPBACK, free_port, wait_until
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.errors import TooManyRequests

SEARCH_OK = {"status": "no_match", "hits": [], "reason": "", "dropped": 0, "cached": False}
UNAVAILABLE = {
    "type": "https://mnemo-sea.dev/problems/index_unavailable",
    "title": "Service unavailable",
    "status": 503,
    "detail": "index unavailable: qdrant restarting",
    "code": "index_unavailable",
    "component": "index",
    "reason": "qdrant restarting",
}


# ---- a stub that answers 503 as told -------------------------------------------------------------


@dataclass
class Stub:
    """Answers each path from its script (status, headers, body), in order, then 200 `SEARCH_OK`;
    remembers every request's method, path and headers."""

    base_url: str
    script: dict[str, list[tuple[int, dict[str, str], Any]]] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["method"], scope["path"], headers))
        queue = self.script.get(scope["path"], [])
        status, extra, body = queue.pop(0) if queue else (200, {}, SEARCH_OK)
        kind = "application/problem+json" if status >= 400 else "application/json"
        raw = [(b"content-type", kind.encode())] + [(k.encode(), v.encode()) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    def unavailable(self, path: str, times: int, retry_after: str | None = "1") -> None:
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        self.script[path] = [(503, headers, UNAVAILABLE)] * times


@pytest.fixture(scope="module")
def stub_server() -> Iterator[Stub]:
    port = free_port()
    stub = Stub(f"http://{LOOPBACK}:{port}")
    server = uvicorn.Server(
        uvicorn.Config(stub, host=LOOPBACK, port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 120, "the stub server")
        yield stub
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def stub(stub_server: Stub) -> Stub:
    stub_server.script.clear()
    stub_server.seen.clear()
    return stub_server


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits both clients make, recorded instead of slept (only the clients' own sleep)."""
    made: list[float] = []

    async def async_sleep(seconds: float) -> None:
        made.append(seconds)

    monkeypatch.setattr("mnemo_sea.client.api.time", SimpleNamespace(sleep=made.append))
    monkeypatch.setattr("mnemo_sea.client.api.asyncio", SimpleNamespace(sleep=async_sleep))
    return made


@pytest.fixture(params=["sync", "async"])
def flavour(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def call(stub: Stub, flavour: str, policy: RetryPolicy, name: str, *args: Any, **kwargs: Any) -> Any:
    """`name` through MnemoClient or AsyncMnemoClient: its answer, or the error it raised."""
    if flavour == "sync":
        with MnemoClient(stub.base_url, api_key="msk_stub", retry=policy) as client:
            try:
                return getattr(client, name)(*args, **kwargs)
            except Exception as e:
                return e

    async def run() -> Any:
        async with AsyncMnemoClient(stub.base_url, api_key="msk_stub", retry=policy) as client:
            try:
                return await getattr(client, name)(*args, **kwargs)
            except Exception as e:
                return e

    return asyncio.run(run())


@pytest.mark.parametrize(("retry_after", "waited"), [("1", 1.0), ("120", 5.0)])  # 120 s: cut to the cap
def test_a_503_with_retry_after_is_retried_honouring_it_up_to_the_cap(
    stub: Stub, waits: list[float], flavour: str, retry_after: str, waited: float
) -> None:
    stub.unavailable("/v1/search", 2, retry_after)
    found = call(stub, flavour, RetryPolicy(retries=2, max_delay=5.0), "search", "q")
    assert found.status == "no_match" and waits == [waited, waited]
    assert len(stub.seen) == 3
    assert len({h["x-request-id"] for _, _, h in stub.seen}) == 1  # one request id for one call's attempts


def test_the_client_gives_up_after_its_retries_with_the_servers_typed_error(
    stub: Stub, waits: list[float], flavour: str
) -> None:
    stub.unavailable("/v1/search", 10)
    error = call(stub, flavour, RetryPolicy(retries=2, max_delay=0.5), "search", "q")
    assert isinstance(error, IndexUnavailable) and error.component == "index"
    assert error.reason == "qdrant restarting" and error.request_id == stub.seen[-1][2]["x-request-id"]
    assert len(stub.seen) == 3 and waits == [0.5, 0.5]


def test_a_503_without_retry_after_and_an_unkeyed_write_are_not_retried(
    stub: Stub, waits: list[float], flavour: str
) -> None:
    stub.unavailable("/v1/search", 2, retry_after=None)
    assert isinstance(call(stub, flavour, RetryPolicy(), "search", "q"), IndexUnavailable)
    stub.unavailable("/v1/memory/purge-expired", 2)
    assert isinstance(call(stub, flavour, RetryPolicy(), "purge_expired"), IndexUnavailable)
    assert len(stub.seen) == 2 and waits == []


def test_a_keyed_write_is_retried_under_one_idempotency_key(
    stub: Stub, waits: list[float], flavour: str
) -> None:
    path = "/v1/sessions/s1/results"
    stub.unavailable(path, 1)
    call(stub, flavour, RetryPolicy(retries=2, max_delay=0.01), "record", "s1", "tool", "text")
    call(stub, flavour, RetryPolicy(), "record", "s1", "tool", "text")
    keys = [h.get("idempotency-key") for _, p, h in stub.seen if p == path]
    assert len(keys) == 3 and keys[0] == keys[1] and keys[0] is not None and len(keys[0]) == 32
    assert keys[2] != keys[0]  # the next call: a key of its own
    stub.seen.clear()
    stub.unavailable(path, 1)
    call(stub, flavour, RetryPolicy(max_delay=0.01), "record", "s1", "tool", "text", idempotency_key="mine-1")
    assert [h.get("idempotency-key") for _, _, h in stub.seen] == ["mine-1", "mine-1"]


def test_a_not_ready_api_is_a_health_that_says_so(stub: Stub, waits: list[float], flavour: str) -> None:
    components = {"cache": {"ok": False, "ms": 1.0, "error": "ConnectionError"}}
    stub.script["/v1/health/ready"] = [
        (503, {"Retry-After": "1"}, {**UNAVAILABLE, "code": "not_ready", "components": components})
    ]
    health = call(stub, flavour, RetryPolicy(), "health")
    assert not health.ok and health.mode is None and health.components["cache"].error == "ConnectionError"
    assert len(stub.seen) == 1 and waits == []  # a probe is never retried


def test_retry_after_as_seconds_an_http_date_or_garbage() -> None:
    policy = RetryPolicy(max_delay=5.0)
    assert policy.retry_after("2") == 2.0 and policy.retry_after("600") == 5.0
    assert policy.retry_after("Thu, 01 Jan 1970 00:00:00 GMT") == 0.0  # in the past: at once
    assert policy.retry_after("soon") is None
    assert [policy.after_failure(n) for n in (1, 2, 3)] == [0.2, 0.4, 0.8]
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)


# ---- a lost answer, against the real server --------------------------------------------------------


def first_try(request: httpx.Request, sent: list[httpx.Request]) -> bool:
    """Whether `request` is a write not sent before (its retries carry the same Idempotency-Key)."""
    key = request.headers.get("idempotency-key")
    return request.method != "GET" and all(r.headers.get("idempotency-key") != key for r in sent)


class LosingTransport(httpx.HTTPTransport):
    """Sends every request; drops the answer to the first try of the first `lose` writes (the
    server did write), as a connection lost before the answer would."""

    def __init__(self, lose: int = 1) -> None:
        super().__init__()
        self.lose = lose
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        lost = first_try(request, self.sent) and self.lose > 0
        self.sent.append(request)
        response = super().handle_request(request)
        if lost:
            self.lose -= 1
            response.read()
            response.close()
            raise httpx.ReadError("the connection dropped before the answer", request=request)
        return response


class AsyncLosingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, lose: int = 1) -> None:
        super().__init__()
        self.lose = lose
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        lost = first_try(request, self.sent) and self.lose > 0
        self.sent.append(request)
        response = await super().handle_async_request(request)
        if lost:
            self.lose -= 1
            await response.aread()
            await response.aclose()
            raise httpx.ReadError("the connection dropped before the answer", request=request)
        return response


def losing(tenant: Tenant, role: str = "agent", lose: int = 1) -> tuple[Any, list[httpx.Request]]:
    transport: LosingTransport | AsyncLosingTransport
    transport = LosingTransport(lose) if tenant.flavour == "sync" else AsyncLosingTransport(lose)
    return tenant.client(role, transport=transport), transport.sent


def test_a_write_whose_answer_was_lost_is_sent_again_and_written_once(tenant: Tenant) -> None:
    mnemo, sent = losing(tenant, lose=3)
    session, owner = f"s-{uuid.uuid4().hex[:8]}", f"pat-{uuid.uuid4().hex[:8]}"
    recorded = mnemo.record(session, "lab_results", "potassium 5.9")
    mnemo.archive_results(session, [("r1", "potassium high")])
    recovered = mnemo.recover(session, "r1")
    assert recorded.result_id == "r1" and recovered.appended.result_id == "r2"
    assert tenant.count(t.tool_results, session_id=session) == 2  # r1 and one recovered copy
    assert tenant.count(t.archive_entries, session_id=session) == 1
    writes = [r for r in sent if r.method == "POST"]
    assert len(writes) == 6  # each write twice: the lost answer, then the replay
    for first, again in zip(writes[::2], writes[1::2], strict=True):
        key = first.headers["idempotency-key"]
        assert again.headers["idempotency-key"] == key and first.url == again.url
        assert tenant.served.keys_stored(tenant.id, key) == 1

    mnemo, _ = losing(tenant)
    outcome = mnemo.remember(owner, "allergy", "latex", "user_claim")
    assert outcome.fact.version == 1 and tenant.count(t.memory_facts, owner=owner) == 1


def test_the_same_key_twice_answers_the_first_write(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    session, key = f"s-{uuid.uuid4().hex[:8]}", f"turn-{uuid.uuid4().hex[:8]}"
    first = mnemo.record(session, "lab_results", "sodium 139", idempotency_key=key)
    again = mnemo.record(session, "lab_results", "sodium 139", idempotency_key=key)
    assert again == first and tenant.count(t.tool_results, session_id=session) == 1


def test_a_write_the_server_cannot_make_idempotent_is_not_sent_again(tenant: Tenant) -> None:
    mnemo, sent = losing(tenant, role="admin")
    with pytest.raises(ApiUnreachable) as err:
        mnemo.purge_expired()
    assert len(sent) == 1 and err.value.detail["sent"] is True
    assert isinstance(err.value, StoreUnavailable) and "ReadError" in err.value.detail["reason"]


BUSY = {
    "type": "https://mnemo-sea.dev/problems/too_many_requests",
    "title": "Too many requests",
    "status": 429,
    "detail": "this tenant already has 2 requests running and 64 waiting; nothing was done",
    "code": "too_many_requests",
    "retry_after": 3,
    "running": 2,
    "waiting": 64,
}


def test_a_429_with_retry_after_is_retried_even_for_an_unkeyed_write(
    stub: Stub, waits: list[float], flavour: str
) -> None:
    """The server refused it before any work (its tenant was over its share), so sending an
    unkeyed write again cannot make it twice; after the retries it is the typed error."""
    stub.script["/v1/memory/purge-expired"] = [(429, {"Retry-After": "3"}, BUSY)]
    call(stub, flavour, RetryPolicy(retries=2, max_delay=5.0), "purge_expired")
    assert [p for _, p, _ in stub.seen] == ["/v1/memory/purge-expired"] * 2 and waits == [3.0]

    stub.seen.clear()
    waits.clear()
    stub.script["/v1/search"] = [(429, {"Retry-After": "3"}, BUSY)] * 10
    error = call(stub, flavour, RetryPolicy(retries=2, max_delay=5.0), "search", "q")
    assert isinstance(error, TooManyRequests) and isinstance(error, StoreUnavailable)
    assert error.retry_after == 3 and error.request_id == stub.seen[-1][2]["x-request-id"]
    assert len(stub.seen) == 3 and waits == [3.0, 3.0]
