"""Request ids, structured JSON logs and Prometheus metrics.

Logs carry the request id, route template, status, duration, tenant and subject, never an
API key, a body or an original: what a tool result held must not leak into log storage.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemo_sea.system.mnemo import Mnemo

access_log = logging.getLogger("mnemo_sea.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_LOG_FIELDS = (
    "request_id",
    "method",
    "route",
    "status",
    "duration_ms",
    "tenant_id",
    "subject",
    "code",
    "error",
    "error_type",
)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and the known structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _LOG_FIELDS:
            if name in record.__dict__:
                entry[name] = record.__dict__[name]
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    for name in ("mnemo_sea", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False


class ServiceCollector(Collector):
    """Read at scrape time: outbox backlog and lag, cache hits and misses."""

    def __init__(self, mnemo: Mnemo) -> None:
        self.mnemo = mnemo

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("mnemo_outbox_pending", "outbox rows not yet applied to index and caches")
        lag = GaugeMetricFamily("mnemo_outbox_lag_seconds", "age of the oldest pending outbox row")
        awaiting = GaugeMetricFamily(
            "mnemo_outbox_awaiting_flush",
            "outbox rows applied to the index (searchable) whose flush, the group commit, is still to come",
        )
        try:
            outbox = self.mnemo.archive.outbox_backlog()
            count, oldest, unflushed = outbox.pending, outbox.oldest, outbox.awaiting_flush
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database is down
            count, oldest, unflushed = -1, None, -1
        pending.add_metric([], count)
        lag.add_metric([], 0.0 if oldest is None else max(0.0, time.time() - oldest.timestamp()))
        awaiting.add_metric([], unflushed)
        yield pending
        yield lag
        yield awaiting
        stats = self.mnemo.cache.stats()
        hits = CounterMetricFamily("mnemo_cache_hits", "cache hits of this process", labels=["cache"])
        misses = CounterMetricFamily("mnemo_cache_misses", "cache misses of this process", labels=["cache"])
        hits.add_metric(["search"], stats.search_hits)
        misses.add_metric(["search"], stats.search_misses)
        yield hits
        yield misses


class Metrics:
    def __init__(self, mnemo: Mnemo) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "mnemo_http_request_duration_seconds",
            "request latency by route template and status",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.requests = Counter(
            "mnemo_http_requests",
            "requests by route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.registry.register(ServiceCollector(mnemo))


def assign_request_id(scope: Scope) -> str:
    """The request's id, set on its state (where problem answers read it): the client's
    X-Request-ID when well-formed, else a new one."""
    given = Headers(scope=scope).get("x-request-id", "")
    request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    scope.setdefault("state", {})["request_id"] = request_id
    return request_id


class RequestIds:
    """ASGI middleware: every answer of the app carries the request id, in the X-Request-ID
    header and in problem bodies, as the REST API's do. For apps served beside it without its
    metrics and access log (the MCP streamable-HTTP transport); `Observe` does this for REST."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = assign_request_id(scope)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        await self.app(scope, receive, send_with_id)


class Observe:
    """ASGI middleware: the request id (echoed when well-formed, else generated) on the request
    state and the answer, a latency observation and an access-log line per request.

    Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware runs the
    rest of the app in a task of its own and streams the answer through a memory channel,
    which costs every request more than all of this.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = assign_request_id(scope)
        # The dict behind `request.state`: problem answers read the id from it, and the
        # authentication dependency leaves the tenant and subject there for the log.
        state: dict[str, Any] = scope["state"]
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # The outermost error middleware answers it (a 500 problem); it is still a request.
            self._observed(scope, state, 500, started)
            raise
        self._observed(scope, state, status, started)

    def _observed(self, scope: Scope, state: dict[str, Any], status: int, started: float) -> None:
        elapsed = time.perf_counter() - started
        # The template, not the path: ids in paths would explode label cardinality (and are data).
        route = str(getattr(scope.get("route"), "path", "unmatched"))
        method = str(scope["method"])
        self.metrics.latency.labels(method, route, str(status)).observe(elapsed)
        self.metrics.requests.labels(method, route, str(status)).inc()
        access_log.info(
            "request",
            extra={
                "request_id": state["request_id"],
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 2),
                "tenant_id": state.get("tenant_id"),
                "subject": state.get("subject"),
            },
        )


def install(app: FastAPI, metrics: Metrics) -> None:
    app.add_middleware(Observe, metrics=metrics)
