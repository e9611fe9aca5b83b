"""Blocking endpoints, run in the thread pool with one hop per request.

The endpoints are plain functions: the archive and index calls they make block. FastAPI runs
such a function in the thread pool, and then, because the endpoint is not a coroutine, hands
the validation of its answer to the pool again: two hops per request, each a thread wake-up
and a GIL hand-over, which costs about as much CPU as a small request itself. `PooledRoute`
makes each plain endpoint a coroutine that awaits the function in the pool, so the blocking
work takes one hop and the answer is validated and encoded on the event loop.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from mnemo_sea.rest.json_bodies import RouteHandler, depth_checked


def pooled(endpoint: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """`endpoint` as a coroutine running it in the thread pool; its signature (which FastAPI
    reads for parameters and dependencies) is the endpoint's own, through `__wrapped__`."""

    @functools.wraps(endpoint)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(endpoint, *args, **kwargs)

    return run


class PooledRoute(APIRoute):
    """An API route whose plain-function endpoint runs in the pool in one hop (see module doc)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = pooled(endpoint)
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> RouteHandler:
        # Every body through the one JSON parser and its depth limit (rest/json_bodies.py).
        return depth_checked(super().get_route_handler())
