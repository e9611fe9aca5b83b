"""`/docs` and `/redoc` work offline: every script, style and icon the pages load is served by
the API itself from a package, none from a CDN or any other host."""

from __future__ import annotations

import re

import pytest
from rest_helpers import Api

from mnemo_sea.rest.docs_pages import ASSETS_URL

ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']""")


@pytest.mark.parametrize(("page", "marker"), [("/docs", "SwaggerUIBundle"), ("/redoc", "<redoc")])
def test_the_documentation_pages_load_only_what_the_api_serves(api: Api, page: str, marker: str) -> None:
    html = api.client.get(page)  # public, as /openapi.json is: no key
    assert html.status_code == 200 and marker in html.text
    loaded = ASSET.findall(html.text)
    assert loaded and all(url.startswith(ASSETS_URL) for url in loaded), loaded
    assert "http://" not in html.text and "https://" not in html.text  # no CDN, no fonts from afar
    for url in loaded:
        asset = api.client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 1_000, url
    assert "/openapi.json" in html.text and api.client.get("/openapi.json").status_code == 200
