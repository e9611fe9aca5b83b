"""Liveness (public: says only that the process answers), readiness and metrics (need a key)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel
from sqlalchemy import text

from mnemo_sea.archive import Forbidden
from mnemo_sea.rest.auth import Admin, Caller, System
from mnemo_sea.rest.problems import ApiProblem, responses
from mnemo_sea.rest.threads import PooledRoute

router = APIRouter(tags=["health"], route_class=PooledRoute)


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
def ready(request: Request, principal: Caller, mnemo: System) -> Ready:
    """Really reach every store: a query on the archive database, a count on the index, a
    ping of the cache. 503 (listing each component) when any of them fails."""

    def archive() -> None:
        with mnemo.archive.store.read() as conn:
            conn.execute(text("SELECT 1"))

    checks = {
        "archive": _timed(archive),
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
def metrics(request: Request, principal: Admin) -> Response:
    """Prometheus metrics for operators (an admin key of MNEMO_OPERATOR_TENANT): request latency
    histograms, outbox backlog and lag, cache hits and misses, across every tenant."""
    operator = request.app.state.settings.operator_tenant
    if operator is None or principal.tenant_id != operator:
        raise Forbidden(
            "metrics cover every tenant: they need an admin key of the operator tenant "
            "(MNEMO_OPERATOR_TENANT)",
            needed="operator",
        )
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
