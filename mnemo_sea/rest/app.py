"""The REST application: routers, error mapping, authentication, limits and observability.

`create_app(mnemo, settings)` serves an already opened system (tests, embedding in another
ASGI app); `mnemo-sea serve` opens it from settings and closes it on shutdown. Endpoints are
plain functions, run in the thread pool in one hop per request (rest/threads.py): the archive
and index calls they make block. A request waits for a slot of its tenant first, so that no
tenant holds the whole pool (rest/admission.py). Authentication answers keys it verified within
MNEMO_KEY_CACHE_SECONDS on the event loop (rest/auth.py); the keys it reads from the table
(`state.key_lane`) and the readiness probe and metrics (`state.probe_lane`) run on threads of
their own, which no tenant's requests can fill, and a flood of unknown keys fills only the
first: a probe whose key was verified lately never waits behind it.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from mnemo_sea.archive import VerifiedKeys
from mnemo_sea.rest import docs_pages, observability, problems
from mnemo_sea.rest.admission import admission_of
from mnemo_sea.rest.limits import BodyLimit
from mnemo_sea.rest.routes import admin, deletion, evidence, health, memory, search, sessions, summaries
from mnemo_sea.rest.threads import pool_lifespan
from mnemo_sea.retrieval.tokenizer import load_chinese_segmentation
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

API_VERSION = "1.0.0"
DESCRIPTION = """\
The Session Evidence Archive of mnemo-sea over HTTP.

Every endpoint but `/v1/health/live`, `/openapi.json`, `/docs` and `/redoc` needs an API key
(`Authorization: Bearer msk_...` or `X-API-Key`); the key decides the tenant, subject, roles
and clearance. Errors are `application/problem+json` with a stable `code`.

Ids in paths are percent-encoded: evidence ids may contain `/`, `#` and `.`, so send `#` as
`%23` and a `.` or `..` segment as `%2E` / `%2E%2E` (clients otherwise drop or resolve them).
Writes accept an `Idempotency-Key` header; lists page with `offset`/`limit`/`next_offset`.
A tenant with as many requests in the service as it may hold gets 429 `too_many_requests`
with `Retry-After`: nothing was done, send it again then.
"""

# Threads for key-table lookups and the readiness probe, apart from the pool the tenants share.
PROBE_THREADS = 2


def create_app(
    mnemo: Mnemo, settings: MnemoSettings | None = None, *, close_on_shutdown: bool = False
) -> FastAPI:
    cfg = settings or MnemoSettings()
    load_chinese_segmentation()  # now, not at a request's first Han text (see there)
    lifespan = pool_lifespan(cfg.api_threads, mnemo, close_on_shutdown=close_on_shutdown)
    app = FastAPI(
        title="mnemo-sea",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # docs_pages serves /docs and /redoc with packaged assets, not a CDN's
        redoc_url=None,
    )
    app.state.mnemo = mnemo
    app.state.settings = cfg
    app.state.metrics = observability.Metrics(mnemo)
    app.state.verified_keys = VerifiedKeys(cfg.key_cache_seconds)
    app.state.admission = admission_of(cfg)
    app.state.probe_lane = anyio.CapacityLimiter(PROBE_THREADS)
    app.state.key_lane = anyio.CapacityLimiter(PROBE_THREADS)
    problems.install(app)
    # Inside the observing middleware (added after it), so a 413 carries the request id and is logged.
    app.add_middleware(BodyLimit, max_bytes=cfg.max_request_bytes)
    observability.install(app, app.state.metrics)
    for module in (health, evidence, search, sessions, memory, summaries, deletion, admin):
        app.include_router(module.router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    docs_pages.install(app)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The generated schema, with every error answer declared as application/problem+json."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    problem_ref = {"$ref": "#/components/schemas/Problem"}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            for status, response in operation.get("responses", {}).items():
                if status.isdigit() and int(status) >= 400:
                    response["content"] = {problems.PROBLEM_JSON: {"schema": problem_ref}}
    schema.setdefault("components", {}).setdefault("schemas", {}).pop("HTTPValidationError", None)
    schema["components"]["schemas"].pop("ValidationError", None)
    app.openapi_schema = schema
    return schema
