"""The search page: the facade's hybrid search as the viewer, its hits in its order with their
scores, each linking to the page of what it points to; a kind filter; bad input as the typed
error page; then in a browser."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote, urlencode

from console_helpers import SCREENSHOTS, Tenant, click_through, screenshot, sign_in
from console_records import DOSE, REFUND, clinic
from fakes import ManualWallClock

from mnemo_sea.archive import EvidenceInput, limits


def _search(**query: object) -> str:
    return f"/ui/search?{urlencode(query)}"


def _hits(page: str) -> list[tuple[str, str]]:
    """(href, id) of each hit, in the page's order."""
    found = re.findall(r'class="hit-link" href="([^"]+)"><code>([^<]*)</code>', page)
    return [(html.unescape(h), html.unescape(i)) for h, i in found]


def test_the_hits_are_the_facade_s_in_its_order_with_their_scores_and_links(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    p = tenant.principal()
    tenant.mnemo.archive_results(p, "visit-1", [("r1", "ALT lab result, high")])
    tenant.mnemo.ingest(
        p, [EvidenceInput("Refunds of wet food within 14 days.", "policy.md", evidence_id=REFUND)]
    )
    page = tenant.get(_search(q="wet food ALT refunds"), tenant.key())
    assert page.status_code == 200
    expected = tenant.mnemo.search(p, "wet food ALT refunds", limit=20).hits
    assert len(expected) >= 4
    assert [i for _, i in _hits(page.text)] == [h.evidence_id for h in expected]
    scores = re.findall(r'<td class="num score">([^<]+)</td>', page.text)
    assert scores == [f"{h.score:.4f}" for h in expected]
    where = {h.evidence_id: (h.kind, href) for h, (href, _) in zip(expected, _hits(page.text), strict=True)}
    assert where[REFUND] == ("knowledge", f"/ui/evidence/item?id={quote(REFUND, safe='')}")
    assert where[made.summary.summary_id] == (
        "summary",
        f"/ui/summaries/item?id={quote(made.summary.summary_id)}",
    )
    assert where["memory:pet-7/diet/main"] == ("memory", "/ui/memory/fact?owner=pet-7&key=diet%2Fmain")
    assert where["result:visit-1/r1"][1] == "/ui/sessions/visit-1/results/r1"
    for href, _ in _hits(page.text):
        assert tenant.get(href, tenant.key()).status_code == 200, href
    # A document's hit also names the version it was found in.
    version = f"/ui/evidence/version?id={quote(REFUND, safe='')}&amp;version=2"
    assert version in page.text
    assert 'id="q" name="q" value="wet food ALT refunds"' in page.text
    assert DOSE not in [i for _, i in _hits(page.text)]  # retracted: no longer current, never a hit


def test_the_kind_filter_and_the_number_of_hits(tenant: Tenant, wall_clock: ManualWallClock) -> None:
    clinic(tenant, wall_clock)
    p = tenant.principal()
    page = tenant.get(_search(q="wet food refunds", kind="memory", limit=5), tenant.key()).text
    expected = tenant.mnemo.search(p, "wet food refunds", limit=5, kinds=["memory"]).hits
    assert [i for _, i in _hits(page)] == [h.evidence_id for h in expected]
    assert expected and {h.kind for h in expected} == {"memory"}
    assert '<option value="memory" selected>' in page and 'name="limit" min="1" max="100" value="5"' in page


def test_without_a_query_the_page_is_the_form(tenant: Tenant) -> None:
    page = tenant.get("/ui/search", tenant.key())
    assert page.status_code == 200 and 'id="search-form"' in page.text and 'id="hits"' not in page.text


def test_bad_input_is_the_typed_error_page(tenant: Tenant) -> None:
    key = tenant.key()
    for query in (
        {"q": ""},
        {"q": "   "},
        {"q": "x" * (limits.QUERY_CHARS + 1)},
        {"q": "refund", "kind": "gossip"},
        {"q": "refund", "limit": 0},
        {"q": "refund", "limit": 101},
    ):
        refused = tenant.get(_search(**query), key)
        assert refused.status_code == 422, query
        assert 'id="error-code">invalid_input<' in refused.text, query


def test_a_person_searches_and_opens_a_hit(
    tenant: Tenant, wall_clock: ManualWallClock, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    clinic(tenant, wall_clock)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Search")
    browser.find_element(By.ID, "q").send_keys("refunds within 14 days")
    click_through(browser, By.ID, "search-submit")
    first = browser.find_element(By.CSS_SELECTOR, "#hits .hit-link")
    assert first.text == REFUND
    screenshot(browser, SCREENSHOTS, "search")
    click_through(browser, By.CSS_SELECTOR, "#hits .hit-link")
    assert browser.find_element(By.ID, "evidence-id").text == REFUND
