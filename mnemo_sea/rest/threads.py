"""Blocking endpoints, run in the thread pool with one hop per request, a tenant's turn at a time.

The endpoints are plain functions: the archive and index calls they make block. FastAPI runs
such a function in the thread pool, and then, because the endpoint is not a coroutine, hands
the validation of its answer to the pool again: two hops per request, each a thread wake-up
and a GIL hand-over, which costs about as much CPU as a small request itself. `PooledRoute`
makes each plain endpoint a coroutine that awaits the function in the pool, so the blocking
work takes one hop and the answer is validated and encoded on the event loop.

Before the hop, the request waits for a slot of its caller's tenant (rest/admission.py, the
app's `state.admission`), so one tenant's requests never hold the whole pool, and the CPU time
the endpoint took on its thread is charged to that tenant; the tenant is the one the
authentication dependency left on the request state (rest/auth.py). A request without
an authenticated tenant (no pooled endpoint of this API) goes straight to the pool.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from mnemo_sea.rest.admission import TenantAdmission, charged
from mnemo_sea.rest.auth import authenticate_request, caller
from mnemo_sea.rest.json_bodies import RouteHandler, depth_checked

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import Mnemo

# The parameter `pooled` adds for the request when the endpoint takes none of its own.
_REQUEST = "pooled_request"


def pooled(endpoint: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """`endpoint` as a coroutine running it in the thread pool once its tenant's slot is free.

    FastAPI reads the parameters and dependencies from the wrapper's signature: the endpoint's
    own, with the request added (FastAPI fills one parameter of type Request, so an endpoint
    that takes the request already shares it)."""
    signature = inspect.signature(endpoint, eval_str=True)
    own = next((name for name, p in signature.parameters.items() if p.annotation is Request), None)
    if own is None:
        extra = inspect.Parameter(_REQUEST, inspect.Parameter.KEYWORD_ONLY, annotation=Request)
        signature = signature.replace(parameters=[*signature.parameters.values(), extra])

    @functools.wraps(endpoint)
    async def run(*args: Any, **kwargs: Any) -> Any:
        request: Request = kwargs[own] if own is not None else kwargs.pop(_REQUEST)
        admission: TenantAdmission | None = getattr(request.app.state, "admission", None)
        tenant: str | None = getattr(request.state, "tenant_id", None)
        if admission is None or tenant is None:
            return await run_in_threadpool(endpoint, *args, **kwargs)
        async with admission.slot(tenant) as turn:
            return await run_in_threadpool(charged, turn, endpoint, *args, **kwargs)

    run.__signature__ = signature  # type: ignore[attr-defined]
    return run


class PooledRoute(APIRoute):
    """An API route whose plain-function endpoint runs in the pool in one hop (see module doc)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = pooled(endpoint)
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> RouteHandler:
        # Every body through the one JSON parser and its limits, after the key when the route
        # needs one (rest/json_bodies.py).
        needs_key = _depends_on(self.dependant, caller)
        return depth_checked(super().get_route_handler(), authenticate_request if needs_key else None)


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def pool_lifespan(
    threads: int, mnemo: Mnemo, *, close_on_shutdown: bool
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """An app's lifespan: it sizes the pool every blocking endpoint runs in to `threads` (how
    many requests run at once, the admission's slots; the rest wait their tenant's turn), and
    closes `mnemo` on shutdown when the app owns it. REST's and the console's alike."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        try:
            yield
        finally:
            if close_on_shutdown:
                mnemo.close()

    return lifespan
