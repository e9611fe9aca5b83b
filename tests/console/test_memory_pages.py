"""The memory pages: the owners (paged), an owner's current facts (paged), a fact's supersede chain
in the facade's order with each version's provenance, status and times, the version that answers
now, and `derived_from` as a link to the evidence or result it came from; then in a browser."""

from __future__ import annotations

import html
import re
from itertools import pairwise
from typing import Any
from urllib.parse import quote, urlencode

from console_helpers import SCREENSHOTS, Tenant, click_through, screenshot, sign_in
from console_records import DIET, DOSE, clinic
from fakes import ManualWallClock

from mnemo_sea.console.pages import PAGE_SIZE


def _fact(owner: str, key: str) -> str:
    return f"/ui/memory/fact?{urlencode({'owner': owner, 'key': key})}"


def _row_of(page: str, marker: str) -> str:
    return next(row for row in re.findall(r"<tr[^>]*>.*?</tr>", page, re.S) if marker in row)


def test_the_owners_and_their_current_facts(tenant: Tenant, wall_clock: ManualWallClock) -> None:
    clinic(tenant, wall_clock)
    key = tenant.key()
    page = tenant.get("/ui/memory", key)
    assert page.status_code == 200
    owners = tenant.mnemo.list_memory_owners(tenant.principal())
    assert re.findall(r'class="owner-link" href="/ui/memory/owner\?owner=([^"]+)"', page.text) == [
        o.owner for o in owners
    ]
    pet7 = _row_of(page.text, "owner=pet-7")
    assert '<td class="num">2</td>' in pet7  # diet/main and weight
    facts = tenant.get("/ui/memory/owner?owner=pet-7", key).text
    shown = re.findall(r'class="fact-link" href="([^"]+)"', facts)
    current = tenant.mnemo.facts(tenant.principal(), "pet-7")
    assert [html.unescape(s) for s in shown] == [_fact(f.owner, f.key) for f in current]
    diet = _row_of(facts, "diet%2Fmain")
    assert "wet food, no chicken" in diet and "user_correction" in diet and "v3" in diet
    weight = _row_of(facts, "key=weight")
    assert 'href="/ui/sessions/visit-1/results/r1">result:visit-1/r1</a>' in weight


def test_owners_and_facts_are_read_a_page_at_a_time(tenant: Tenant) -> None:
    p = tenant.principal()
    for i in range(PAGE_SIZE + 3):
        tenant.mnemo.remember(p, f"owner-{i:03d}", "k", "v", "user_claim")
    for i in range(PAGE_SIZE + 5):
        tenant.mnemo.remember(p, "owner-000", f"key/{i:03d}", f"value {i}", "user_claim")
    key = tenant.key()
    first = tenant.get("/ui/memory", key).text
    assert first.count('class="owner-link"') == PAGE_SIZE and f"offset={PAGE_SIZE}" in first
    second = tenant.get(f"/ui/memory?offset={PAGE_SIZE}", key).text
    assert second.count('class="owner-link"') == 3 and 'rel="next"' not in second
    facts = tenant.get("/ui/memory/owner?owner=owner-000", key).text
    assert facts.count('class="fact-link"') == PAGE_SIZE
    assert f'rel="next" href="/ui/memory/owner?owner=owner-000&amp;offset={PAGE_SIZE}"' in facts
    rest = tenant.get(f"/ui/memory/owner?owner=owner-000&offset={PAGE_SIZE}", key).text
    assert rest.count('class="fact-link"') == 6  # of 56: `k` and the 55 keys `key/NNN`


def test_a_fact_shows_its_supersede_chain_in_order_with_provenance_and_sources(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    owner, fact_key = DIET
    page = tenant.get(_fact(owner, fact_key), tenant.key())
    assert page.status_code == 200
    chain = tenant.mnemo.memory_history(tenant.principal(), owner, fact_key)
    assert chain == made.diet
    assert re.findall(r'<tr id="v(\d+)"', page.text) == [str(f.version) for f in chain] == ["1", "2", "3"]
    for older, newer in pairwise(chain):
        row = _row_of(page.text, f'<tr id="v{older.version}"')
        assert f'by <a href="#v{newer.version}">v{newer.version}</a>' in row
    for f in chain:
        row = _row_of(page.text, f'<tr id="v{f.version}"')
        assert html.escape(f.value) in row and f.provenance in row
        assert f'class="badge {f.status}"' in row and f.created_at.strftime("%Y-%m-%d %H:%M:%S") in row
    assert [f.status for f in chain] == ["superseded", "superseded", "active"]
    assert 'id="current-now" data-version="3"' in page.text
    assert re.findall(r'<tr id="v(\d+)" class="in-force"', page.text) == ["3"]
    links = re.findall(r'class="derived-link" href="([^"]+)">([^<]+)<', page.text)
    assert [(html.unescape(h), html.unescape(t)) for h, t in links] == [
        (f"/ui/evidence/item?id={quote(DOSE, safe='')}", f"evidence:{DOSE}"),
        ("/ui/sessions/visit-1/results/r1", "result:visit-1/r1"),
    ]
    for href, _ in links:
        assert tenant.get(html.unescape(href), tenant.key()).status_code == 200


def test_an_expired_fact_keeps_its_chain_and_answers_nothing_now(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    p = tenant.principal()
    made = tenant.mnemo.remember(p, "pet-7", "mood", "calm", "tool_fact", ttl_seconds=60).fact
    wall_clock.past(made.expires_at)
    page = tenant.get(_fact("pet-7", "mood"), tenant.key()).text
    assert 'id="current-now" data-version=""' in page and 'class="badge expired"' in page
    assert made.expires_at is not None and made.expires_at.strftime("%Y-%m-%d %H:%M:%S") in page
    assert 'class="fact-link"' not in tenant.get("/ui/memory/owner?owner=pet-7", tenant.key()).text


def test_a_fact_never_written_is_not_found_and_an_owner_that_is_no_identifier_is_invalid(
    tenant: Tenant,
) -> None:
    key = tenant.key()
    missing = tenant.get(_fact("pet-7", "never"), key)
    assert missing.status_code == 404 and 'id="error-code">not_found<' in missing.text
    for bad in (_fact("pet 7", "diet"), "/ui/memory/owner?owner=%E4%B8%AD"):
        refused = tenant.get(bad, key)
        assert refused.status_code == 422 and 'id="error-code">invalid_input<' in refused.text, bad


def test_a_person_opens_a_fact_and_follows_what_it_was_derived_from(
    tenant: Tenant, wall_clock: ManualWallClock, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    clinic(tenant, wall_clock)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Memory")
    click_through(browser, By.LINK_TEXT, "pet-7")
    click_through(browser, By.LINK_TEXT, DIET[1])
    assert browser.find_element(By.ID, "fact-key").text == DIET[1]
    assert browser.find_element(By.ID, "current-now").get_attribute("data-version") == "3"
    screenshot(browser, SCREENSHOTS, "memory-fact")
    click_through(browser, By.LINK_TEXT, f"evidence:{DOSE}")
    assert browser.find_element(By.ID, "evidence-id").text == DOSE
    browser.back()
    click_through(browser, By.LINK_TEXT, "result:visit-1/r1")
    assert browser.find_element(By.ID, "original").text.startswith("ALT 112 U/L (high)")
