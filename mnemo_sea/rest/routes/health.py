"""Liveness (public: says only that the process answers), readiness and metrics (need a key).

Readiness and metrics run on the app's probe lane (rest/app.py), threads apart from the pool
the tenants' requests share and without waiting for a tenant's turn: an orchestrator's probe
must not read a tenant's flood as a dead process.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from mnemo_sea.archive import Forbidden, Principal
from mnemo_sea.rest.auth import Admin, Caller, System
from mnemo_sea.rest.problems import ApiProblem, responses
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.mnemo import Mnemo

router = APIRouter(tags=["health"], route_class=PooledRoute)
T = TypeVar("T")


async def on_probe_lane(request: Request, check: Callable[[], T]) -> T:
    """`check`, run on the probe lane's threads."""
    return await anyio.to_thread.run_sync(check, limiter=request.app.state.probe_lane)


class Live(BaseModel):
    status: str


class ComponentCheck(BaseModel):
    ok: bool
    ms: float
    error: str | None = None


class Ready(BaseModel):
    status: str
    mode: str
    components: dict[str, ComponentCheck]


@router.get("/v1/health/live", response_model=Live, responses={})
async def live() -> Live:
    """The process is up and serving. Public, for orchestrators' probes; it touches no store."""
    return Live(status="alive")


def _timed(check: Any) -> ComponentCheck:
    started = time.perf_counter()
    try:
        check()
    except Exception as e:  # noqa: BLE001 - any failure of a component makes the service not ready
        return ComponentCheck(ok=False, ms=(time.perf_counter() - started) * 1000, error=type(e).__name__)
    return ComponentCheck(ok=True, ms=(time.perf_counter() - started) * 1000)


@router.get("/v1/health/ready", response_model=Ready, responses=responses())
async def ready(request: Request, principal: Caller, mnemo: System) -> Ready:
    """Really reach every store: a query on the archive database, a count on the index, a
    ping of the cache. 503 (listing each component) when any of them fails."""
    return await on_probe_lane(request, functools.partial(_ready, request, principal, mnemo))


def _ready(request: Request, principal: Principal, mnemo: Mnemo) -> Ready:

    checks = {
        "archive": _timed(mnemo.archive.ping),
        "index": _timed(lambda: mnemo.index.count(principal.tenant_id)),
        "cache": _timed(mnemo.cache.ping),
    }
    mode = "server" if request.app.state.settings.server_mode else "embedded"
    if not all(c.ok for c in checks.values()):
        down = ", ".join(name for name, c in checks.items() if not c.ok)
        raise ApiProblem(
            503,
            "not_ready",
            f"unavailable: {down}",
            components={k: v.model_dump() for k, v in checks.items()},
        )
    return Ready(status="ready", mode=mode, components=checks)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}, **responses(403)},
)
async def metrics(request: Request, principal: Admin) -> Response:
    """Prometheus metrics for operators (an admin key of MNEMO_OPERATOR_TENANT): request latency
    histograms, outbox backlog and lag, cache hits and misses, across every tenant."""
    operator = request.app.state.settings.operator_tenant
    if operator is None or principal.tenant_id != operator:
        raise Forbidden(
            "metrics cover every tenant: they need an admin key of the operator tenant "
            "(MNEMO_OPERATOR_TENANT)",
            needed="operator",
        )
    # The scrape reads the outbox backlog from the database: a blocking call.
    scraped = await on_probe_lane(
        request, functools.partial(generate_latest, request.app.state.metrics.registry)
    )
    return Response(scraped, media_type=CONTENT_TYPE_LATEST)
