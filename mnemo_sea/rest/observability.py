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
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mnemo_sea.archive.outbox import backlog
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
        try:
            with self.mnemo.archive.store.read() as conn:
                count, oldest = backlog(conn)
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database is down
            count, oldest = -1, None
        pending.add_metric([], count)
        lag.add_metric([], 0.0 if oldest is None else max(0.0, time.time() - oldest.timestamp()))
        yield pending
        yield lag
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


def _route_template(request: Request) -> str:
    # The template, not the path: ids in paths would explode label cardinality (and are data).
    route = request.scope.get("route")
    return str(getattr(route, "path", "unmatched"))


def install(app: FastAPI, metrics: Metrics) -> None:
    @app.middleware("http")
    async def observe(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        request.state.request_id = request_id
        started = time.perf_counter()

        def observed(status: int) -> None:
            elapsed = time.perf_counter() - started
            route = _route_template(request)
            metrics.latency.labels(request.method, route, str(status)).observe(elapsed)
            metrics.requests.labels(request.method, route, str(status)).inc()
            access_log.info(
                "request",
                extra={
                    "request_id": request_id,
                    "method": request.method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    "tenant_id": getattr(request.state, "tenant_id", None),
                    "subject": getattr(request.state, "subject", None),
                },
            )

        try:
            response = await call_next(request)
        except Exception:
            # The outermost error middleware answers it (a 500 problem); it is still a request.
            observed(500)
            raise
        observed(response.status_code)
        response.headers["X-Request-ID"] = request_id
        return response
