"""The API's documentation pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), served with their
scripts and styles from a package instead of a CDN, so they work on a machine without internet.

FastAPI's own pages load their assets from jsDelivr and stay blank offline. The assets come
from fastapi-offline (MIT), which packages Swagger UI and ReDoc; only its files are used, not
its FastAPI subclass. The pages are public, as `/openapi.json` is.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"


def _assets() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def install(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """Serve `/docs` and `/redoc` on `app` with the packaged assets (the app is made with
    `docs_url=None, redoc_url=None`, so FastAPI's CDN pages are not served)."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
