"""The summary pages: the list (paged, oldest first, what the viewer may read), a summary's exact
text labelled derived, and each source it derives from as a link to that source's page; then
in a browser, following one."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

from console_helpers import SCREENSHOTS, Tenant, click_through, screenshot, sign_in
from console_records import DOSE, clinic
from fakes import ManualWallClock

from mnemo_sea.archive import EvidenceInput
from mnemo_sea.console.pages import PAGE_SIZE


def test_a_summary_shows_its_text_labelled_derived_and_links_to_its_sources(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    key = tenant.key()
    page = tenant.get(f"/ui/summaries/item?id={quote(made.summary.summary_id, safe='')}", key)
    assert page.status_code == 200
    read = tenant.mnemo.get_summary(tenant.principal(), made.summary.summary_id)
    shown = page.text.split('id="summary-text">')[1].split("</pre>")[0]
    assert html.unescape(shown) == read.text
    assert f'id="derived-label">{read.label}<' in page.text and "not original evidence" in read.label
    assert 'id="trace-ref">trace://visit-1/step-4<' in page.text  # shown, never a link
    links = re.findall(r'class="derived-link" href="([^"]+)">([^<]+)<', page.text)
    assert [html.unescape(t) for _, t in links] == list(read.derived_from)
    assert [html.unescape(h) for h, _ in links] == [
        f"/ui/evidence/item?id={quote(DOSE, safe='')}",
        "/ui/sessions/visit-1/results/r1",
    ]
    for href, _ in links:
        assert tenant.get(html.unescape(href), key).status_code == 200


def test_the_list_pages_over_the_summaries_oldest_first(tenant: Tenant) -> None:
    p = tenant.principal()
    tenant.mnemo.ingest(p, [EvidenceInput("the source", "doc", evidence_id="src/1")])
    made = [
        tenant.mnemo.create_summary(p, f"summary number {i}", ["evidence:src/1"]).summary_id
        for i in range(PAGE_SIZE + 4)
    ]
    key = tenant.key()
    first = tenant.get("/ui/summaries", key).text
    listed = re.findall(r'class="summary-link" href="/ui/summaries/item\?id=([^"]+)"', first)
    assert [html.unescape(x) for x in listed] == [quote(s, safe="") for s in made[:PAGE_SIZE]]
    assert f'rel="next" href="/ui/summaries?offset={PAGE_SIZE}"' in first
    second = tenant.get(f"/ui/summaries?offset={PAGE_SIZE}", key).text
    rest = re.findall(r'class="summary-link" href="/ui/summaries/item\?id=([^"]+)"', second)
    assert [html.unescape(x) for x in rest] == [quote(s, safe="") for s in made[PAGE_SIZE:]]
    assert "summary number 0" in first and 'rel="next"' not in second


def test_a_summary_never_made_is_not_found(tenant: Tenant) -> None:
    missing = tenant.get("/ui/summaries/item?id=sum:0123456789abcdef0123456789abcdef", tenant.key())
    assert missing.status_code == 404 and 'id="error-code">not_found<' in missing.text


def test_a_person_opens_a_summary_and_follows_a_source(
    tenant: Tenant, wall_clock: ManualWallClock, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    made = clinic(tenant, wall_clock)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Summaries")
    click_through(browser, By.LINK_TEXT, made.summary.summary_id)
    assert browser.find_element(By.ID, "summary-text").text == made.summary.text
    assert "derived" in browser.find_element(By.ID, "derived-label").text
    screenshot(browser, SCREENSHOTS, "summary")
    click_through(browser, By.LINK_TEXT, "result:visit-1/r1")
    assert browser.find_element(By.ID, "result-id").text == "r1"
    browser.back()
    click_through(browser, By.LINK_TEXT, f"evidence:{DOSE}")
    assert browser.find_element(By.ID, "evidence-id").text == DOSE
