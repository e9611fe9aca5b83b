"""The console as an ASGI app: `console_app` builds it, `mount` puts it under `/ui` of the REST
app (`mnemo-sea serve`), `standalone_app` serves it alone (`mnemo-sea ui`).

Mounted, it shares the REST app's cache of verified keys and the lane its key lookups run on,
so a key revoked is refused by both alike. Its pages are plain functions run in the thread pool
(the archive calls block), in REST's pool and a tenant's turn at a time, as REST's are
(rest/threads.py, rest/admission.py).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import anyio
import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from mnemo_sea.archive import VerifiedKeys
from mnemo_sea.console import errors
from mnemo_sea.console.limits import MAX_BODY_BYTES, too_large_page
from mnemo_sea.console.routes import (
    audit,
    curation,
    deletions,
    evidence,
    login,
    memory,
    search,
    sessions,
    summaries,
    task_state,
)
from mnemo_sea.console.same_origin import SameOriginForms
from mnemo_sea.console.viewer import LaunchLogin
from mnemo_sea.rest.admission import TenantAdmission, admission_of
from mnemo_sea.rest.limits import BodyLimit
from mnemo_sea.rest.threads import pool_lifespan
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

PREFIX = "/ui"
STATIC = Path(__file__).parent / "static"
# Threads for key-table lookups when the console runs alone (REST's own lane when mounted).
KEY_THREADS = 2


def console_app(
    mnemo: Mnemo,
    settings: MnemoSettings | None = None,
    *,
    verified_keys: VerifiedKeys | None = None,
    key_lane: anyio.CapacityLimiter | None = None,
    admission: TenantAdmission | None = None,
    launch: LaunchLogin | None = None,
    report: Path | None = None,
) -> FastAPI:
    """The console's pages, to be mounted under a prefix. `report`: the curation report file (or
    a folder, whose newest `*.json` is read) the report page shows. `verified_keys`, `key_lane`
    and `admission` are the REST app's when mounted in it (one cache of keys, one pool shared
    fairly between tenants); a console alone makes its own."""
    cfg = settings or MnemoSettings()
    app = FastAPI(title="mnemo-sea console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.mnemo = mnemo
    app.state.settings = cfg
    app.state.verified_keys = verified_keys or VerifiedKeys(cfg.key_cache_seconds)
    app.state.key_lane = key_lane or anyio.CapacityLimiter(KEY_THREADS)
    app.state.admission = admission or admission_of(cfg)
    app.state.launch = launch
    app.state.report = report
    errors.install(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, refuse=too_large_page)
    app.add_middleware(SameOriginForms)  # outermost: a foreign post is refused before its body is read
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    for module in (
        login,
        sessions,
        task_state,
        evidence,
        memory,
        summaries,
        search,
        audit,
        deletions,
        curation,
    ):
        app.include_router(module.router)
    # The token counter loads its encoding on first use (about 0.25 s): load it now, not on a
    # viewer's first page.
    mnemo.token_counter.count("")
    return app


def mount(app: FastAPI, *, report: Path | None = None) -> None:
    """The console under `/ui` of the REST app, behind the same keys."""
    app.mount(
        PREFIX,
        console_app(
            app.state.mnemo,
            app.state.settings,
            verified_keys=app.state.verified_keys,
            key_lane=app.state.key_lane,
            admission=app.state.admission,
            report=report,
        ),
    )


def standalone_app(
    mnemo: Mnemo,
    settings: MnemoSettings | None = None,
    *,
    host: str = "127.0.0.1",
    launch: LaunchLogin | None = None,
    report: Path | None = None,
    close_on_shutdown: bool = False,
) -> FastAPI:
    """The console alone, under `/ui` (`/` leads there). On a loopback address it answers only
    requests that name a loopback host, so a web page cannot reach it by rebinding a domain's DNS
    to 127.0.0.1."""

    cfg = settings or MnemoSettings()
    # The pool the pages run in, sized as REST's: its admission's slots.
    lifespan = pool_lifespan(cfg.api_threads, mnemo, close_on_shutdown=close_on_shutdown)
    root = FastAPI(
        title="mnemo-sea console", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    if loopback(host):
        root.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "::1", "[::1]"])
    root.mount(PREFIX, console_app(mnemo, cfg, launch=launch, report=report))

    @root.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    return root


def loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
