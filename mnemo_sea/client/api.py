"""`MnemoClient` and `AsyncMnemoClient`: the facade's operations over the REST API.

Both follow the one description of every operation in mnemo_sea.client.calls; all they do
themselves is send a request and wait, each in its own way (httpx.Client and time.sleep,
httpx.AsyncClient and asyncio.sleep), by the one retry decision (mnemo_sea.client.retry).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import httpx

from mnemo_sea import __version__
from mnemo_sea.archive import Unauthenticated
from mnemo_sea.client import calls
from mnemo_sea.client.calls import Plan
from mnemo_sea.client.retry import Attempts, RetryPolicy
from mnemo_sea.client.wire import Reply, Request

P = ParamSpec("P")
T = TypeVar("T")

# Where `mnemo-sea serve` listens unless told otherwise (its --host and --port defaults).
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 60.0


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The API's URL and the headers every request carries; Unauthenticated without a key."""
    url = base_url or os.environ.get("MNEMO_URL") or DEFAULT_URL
    key = api_key or os.environ.get("MNEMO_API_KEY")
    if not key:
        raise Unauthenticated(
            "no API key: pass api_key=... or set MNEMO_API_KEY (an administrator creates one with "
            "`mnemo-sea keys create`)"
        )
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "User-Agent": f"mnemo-sea-client/{__version__}",
    }
    return url.rstrip("/"), headers


def _send_args(request: Request) -> dict[str, Any]:
    return {
        "method": request.method,
        "url": request.path,
        "params": request.params,
        "json": request.body,
        "headers": request.headers(),
    }


def _signature(call: Callable[..., Any], plan: Callable[..., Any], returns: str) -> None:
    """`call` as help() and inspect show it: the plan's parameters after self, returning what the
    plan returns (`returns` names it, `{}` standing for the plan's result type)."""
    signature = inspect.signature(plan)
    result = signature.return_annotation
    if isinstance(result, str) and result.startswith("Plan[") and result.endswith("]"):
        result = returns.format(result[5:-1])
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    vars(call)["__signature__"] = signature.replace(
        parameters=[self, *signature.parameters.values()], return_annotation=result
    )


def _sync(plan: Callable[P, Plan[T]]) -> Callable[Concatenate[MnemoClient, P], T]:
    @functools.wraps(plan)
    def call(self: MnemoClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(plan(*args, **kwargs))

    call.__qualname__ = f"MnemoClient.{plan.__name__}"
    _signature(call, plan, "{}")
    return call


def _async(plan: Callable[P, Plan[T]]) -> Callable[Concatenate[AsyncMnemoClient, P], Coroutine[Any, Any, T]]:
    @functools.wraps(plan)
    async def call(self: AsyncMnemoClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(plan(*args, **kwargs))

    call.__qualname__ = f"AsyncMnemoClient.{plan.__name__}"
    _signature(call, plan, "Coroutine[Any, Any, {}]")
    return call


class MnemoClient:
    """The facade over HTTP: `Mnemo`'s operations, with the same names, keyword parameters and
    result types, without the principal (the API key says who calls).

    `base_url` defaults to MNEMO_URL, then http://127.0.0.1:8000 (`mnemo-sea serve`); `api_key`
    to MNEMO_API_KEY (Unauthenticated when neither is set). Errors are the library's typed
    errors, with `request_id` set; an API that does not answer is `ApiUnreachable`. Reads and
    writes under an idempotency key (one is made per call unless you pass `idempotency_key`)
    are retried by `retry` after a 503 with Retry-After or a lost connection. `transport` is
    httpx's (tests, proxies). Use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url, headers = _settings(base_url, api_key)
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, plan: Plan[T]) -> T:
        try:
            request = next(plan)
            while True:
                request = plan.send(self._exchange(request))
        except StopIteration as done:
            result: T = done.value
            return result

    def _exchange(self, request: Request) -> Reply:
        attempts = Attempts(self.retry, request, self.base_url)
        while True:
            try:
                step = attempts.answered(self._http.request(**_send_args(request)))
            except httpx.TransportError as e:
                step = attempts.failed(e)
            if isinstance(step, Reply):
                return step
            time.sleep(step)

    # The operations, in the facade's order (mnemo_sea.client.calls describes each).
    search = _sync(calls.search)
    put_evidence = _sync(calls.put_evidence)
    ingest = _sync(calls.ingest)
    retract = _sync(calls.retract)
    get_evidence = _sync(calls.get_evidence)
    evidence_history = _sync(calls.evidence_history)
    list_evidence = _sync(calls.list_evidence)
    record = _sync(calls.record)
    list_sessions = _sync(calls.list_sessions)
    session_info = _sync(calls.session_info)
    get_result = _sync(calls.get_result)
    list_results = _sync(calls.list_results)
    live_view = _sync(calls.live_view)
    archive_results = _sync(calls.archive_results)
    recover = _sync(calls.recover)
    curate = _sync(calls.curate)
    recall = _sync(calls.recall)
    context = _sync(calls.context)
    remember = _sync(calls.remember)
    current = _sync(calls.current)
    memory_history = _sync(calls.memory_history)
    list_memory_owners = _sync(calls.list_memory_owners)
    facts = _sync(calls.facts)
    forget = _sync(calls.forget)
    purge_expired = _sync(calls.purge_expired)
    create_summary = _sync(calls.create_summary)
    get_summary = _sync(calls.get_summary)
    update_task_state = _sync(calls.update_task_state)
    task_state = _sync(calls.task_state)
    task_state_history = _sync(calls.task_state_history)
    delete_evidence = _sync(calls.delete_evidence)
    delete_session = _sync(calls.delete_session)
    delete_owner = _sync(calls.delete_owner)
    verify_deleted = _sync(calls.verify_deleted)
    check_citations = _sync(calls.check_citations)
    health = _sync(calls.health)


class AsyncMnemoClient:
    """`MnemoClient` for asyncio: the same operations, parameters, results and errors, each a
    coroutine. Use it as an async context manager, or await `aclose()`."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url, headers = _settings(base_url, api_key)
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self, plan: Plan[T]) -> T:
        try:
            request = next(plan)
            while True:
                request = plan.send(await self._exchange(request))
        except StopIteration as done:
            result: T = done.value
            return result

    async def _exchange(self, request: Request) -> Reply:
        attempts = Attempts(self.retry, request, self.base_url)
        while True:
            try:
                step = attempts.answered(await self._http.request(**_send_args(request)))
            except httpx.TransportError as e:
                step = attempts.failed(e)
            if isinstance(step, Reply):
                return step
            await asyncio.sleep(step)

    search = _async(calls.search)
    put_evidence = _async(calls.put_evidence)
    ingest = _async(calls.ingest)
    retract = _async(calls.retract)
    get_evidence = _async(calls.get_evidence)
    evidence_history = _async(calls.evidence_history)
    list_evidence = _async(calls.list_evidence)
    record = _async(calls.record)
    list_sessions = _async(calls.list_sessions)
    session_info = _async(calls.session_info)
    get_result = _async(calls.get_result)
    list_results = _async(calls.list_results)
    live_view = _async(calls.live_view)
    archive_results = _async(calls.archive_results)
    recover = _async(calls.recover)
    curate = _async(calls.curate)
    recall = _async(calls.recall)
    context = _async(calls.context)
    remember = _async(calls.remember)
    current = _async(calls.current)
    memory_history = _async(calls.memory_history)
    list_memory_owners = _async(calls.list_memory_owners)
    facts = _async(calls.facts)
    forget = _async(calls.forget)
    purge_expired = _async(calls.purge_expired)
    create_summary = _async(calls.create_summary)
    get_summary = _async(calls.get_summary)
    update_task_state = _async(calls.update_task_state)
    task_state = _async(calls.task_state)
    task_state_history = _async(calls.task_state_history)
    delete_evidence = _async(calls.delete_evidence)
    delete_session = _async(calls.delete_session)
    delete_owner = _async(calls.delete_owner)
    verify_deleted = _async(calls.verify_deleted)
    check_citations = _async(calls.check_citations)
    health = _async(calls.health)


__all__ = ["DEFAULT_URL", "AsyncMnemoClient", "MnemoClient"]
