"""The session pages: the list, the timeline (states, tokens in view, paging), a result's exact
original and download, and the context the assembler would build now; then the same walk in a
real browser."""

from __future__ import annotations

import hashlib
import html
from typing import Any

from console_helpers import SCREENSHOTS, Tenant, click_through, screenshot, sign_in

from mnemo_sea.archive import render_stub
from mnemo_sea.console.pages import PAGE_SIZE
from mnemo_sea.system.projection import indexer as indexer_module

# The real starter, read when this module is collected, before the suite's fixture replaces it.
REAL_THREAD_TRAIL = indexer_module.thread_trail


def _session(tenant: Tenant, results: int = 5) -> None:
    """s1: `results` grep outputs; r1 archived with a note, then lines 2-3 of it recovered."""
    p = tenant.principal()
    for i in range(results):
        tenant.mnemo.record(
            p, "s1", tool_name="grep", arguments={"q": i}, content=f"match {i} <b>&amp;\n" * 40
        )
    tenant.mnemo.archive_results(p, "s1", [("r1", "grep found nothing relevant")])
    tenant.mnemo.recover(p, "s1", "r1", lines=(2, 3))


def test_the_timeline_shows_each_result_as_it_is_now_with_its_tokens(tenant: Tenant) -> None:
    _session(tenant)
    key = tenant.key()
    page = tenant.get("/ui/sessions/s1", key)
    assert page.status_code == 200
    assert 'id="who-tenant">' + tenant.tenant_id in page.text
    assert "6</b> results: 5 live, 1 archived" in page.text
    assert page.text.count('class="badge live"') == 4
    assert page.text.count('class="badge archived"') == 1
    assert 'class="badge recovered-excerpt"' in page.text
    assert "lines 2-3" in page.text and "grep found nothing relevant" in page.text
    # The archived result costs its stub, counted with the context's own counter.
    result = tenant.mnemo.list_results(tenant.principal(), "s1", limit=1)[0]
    stub_tokens = tenant.mnemo.token_counter.count(render_stub(result))
    row = page.text.split('href="/ui/sessions/s1/results/r1"')[1].split("</tr>")[0]
    assert f'<td class="num">{stub_tokens}</td>' in row


def test_a_long_session_is_read_a_page_at_a_time(tenant: Tenant) -> None:
    p = tenant.principal()
    for i in range(PAGE_SIZE + 7):
        tenant.mnemo.record(p, "long", tool_name="t", arguments={"i": i}, content=f"out {i}")
    key = tenant.key()
    first = tenant.get("/ui/sessions/long", key).text
    assert first.count('class="result-link"') == PAGE_SIZE
    assert f"offset={PAGE_SIZE}" in first and 'rel="prev"' not in first
    second = tenant.get(f"/ui/sessions/long?offset={PAGE_SIZE}", key).text
    assert second.count('class="result-link"') == 7
    assert f">r{PAGE_SIZE + 7}<" in second and 'rel="next"' not in second


def test_a_result_opens_as_its_exact_original_and_downloads_byte_for_byte(tenant: Tenant) -> None:
    _session(tenant)
    key = tenant.key()
    original = ("match 0 <b>&amp;\n" * 40).encode()
    page = tenant.get("/ui/sessions/s1/results/r1", key)
    assert page.status_code == 200
    shown = page.text.split('id="original">')[1].split("</pre>")[0]
    assert html.unescape(shown) == original.decode()  # escaped once, never interpreted
    assert hashlib.sha256(original).hexdigest() in page.text
    download = tenant.get("/ui/sessions/s1/results/r1/original", key)
    assert download.content == original
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment")
    excerpt = tenant.get("/ui/sessions/s1/results/r6", key).text
    assert 'id="recovered-from" href="/ui/sessions/s1/results/r1"' in excerpt
    assert "lines 2-3" in excerpt


def test_binary_originals_are_offered_as_downloads(tenant: Tenant) -> None:
    blob = bytes(range(256)) * 4
    tenant.mnemo.record(tenant.principal(), "bin", tool_name="dump", arguments={}, content=blob)
    key = tenant.key()
    page = tenant.get("/ui/sessions/bin/results/r1", key)
    assert 'id="binary"' in page.text and 'id="original"' not in page.text
    assert tenant.get("/ui/sessions/bin/results/r1/original", key).content == blob


def test_the_context_page_shows_what_went_in_what_was_left_out_and_the_candidates(tenant: Tenant) -> None:
    p = tenant.principal()
    for i in range(6):
        tenant.mnemo.record(p, "ctx", tool_name="read", arguments={"f": i}, content=f"line {i}\n" * 400)
    key = tenant.key()
    roomy = tenant.get("/ui/sessions/ctx/context?budget=100000", key).text
    assert 'class="empty" id="left-out"' in roomy
    tight = tenant.get("/ui/sessions/ctx/context?budget=3000", key)
    assert tight.status_code == 200
    assert '<table id="left-out">' in tight.text and 'id="candidates"' in tight.text
    assembled = tenant.mnemo.context(p, "ctx", budget_tokens=3000)
    assert f"{assembled.used_tokens} of 3000 tokens used" in tight.text
    assert all(x.reason in html.unescape(tight.text) for x in assembled.left_out)
    refused = tenant.get("/ui/sessions/ctx/context?budget=0", key)
    assert refused.status_code == 422 and "budget" in refused.text


def test_the_console_s_system_runs_the_trail_inline(tenant: Tenant) -> None:
    """The snapshots of the raw tables below rely on it: the system, built once for the module,
    took the suite's inline trail, not the thread that raced them (tests/conftest.py)."""
    assert REAL_THREAD_TRAIL.__name__ == "thread_trail"
    assert tenant.mnemo.indexer._start_trail is not REAL_THREAD_TRAIL


def test_the_console_reads_only(tenant: Tenant) -> None:
    """Every page of a session leaves the archive as it was: the same results, states and audit."""
    _session(tenant)
    key = tenant.key()
    p = tenant.principal()
    before = (tenant.mnemo.list_results(p, "s1"), tenant.mnemo.archive.audit_events(p, limit=1000))
    tenant.get("/ui/sessions", key)  # the key's first use, before the snapshot of the tables
    rows = tenant.stored()
    for path in ("", "/results/r1", "/results/r1/original", "/results/r6", "/context?budget=2000"):
        assert tenant.get(f"/ui/sessions/s1{path}", key).status_code == 200
    after = (tenant.mnemo.list_results(p, "s1"), tenant.mnemo.archive.audit_events(p, limit=1000))
    assert after == before
    assert tenant.stored() == rows  # every table's rows of the tenant, as they were


def test_a_person_walks_from_the_sessions_to_an_original_and_back(
    tenant: Tenant, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    _session(tenant)
    sign_in(browser, live_url, tenant.key())
    assert browser.current_url == f"{live_url}/ui/"
    assert browser.find_element(By.ID, "who-tenant").text == tenant.tenant_id
    screenshot(browser, SCREENSHOTS, "sessions")
    click_through(browser, By.LINK_TEXT, "s1")
    assert browser.find_element(By.ID, "session-id").text == "s1"
    screenshot(browser, SCREENSHOTS, "session-timeline")
    click_through(browser, By.LINK_TEXT, "r1")
    original = browser.find_element(By.ID, "original").text
    assert original.splitlines()[0] == "match 0 <b>&amp;"  # shown as text, not as markup
    screenshot(browser, SCREENSHOTS, "result-original")
    click_through(browser, By.ID, "back-to-session")
    assert browser.find_element(By.ID, "session-id").text == "s1"
    click_through(browser, By.ID, "context-link")
    budget = browser.find_element(By.ID, "budget")
    budget.clear()
    budget.send_keys("2500")
    click_through(browser, By.CSS_SELECTOR, "#budget-form button")
    assert "of 2500 tokens used" in browser.find_element(By.ID, "context-totals").text
    screenshot(browser, SCREENSHOTS, "session-context")


def test_the_context_pages_long_lists_a_page_at_a_time(tenant: Tenant) -> None:
    p = tenant.principal()
    for i in range(PAGE_SIZE + 5):
        tenant.mnemo.record(p, "many", tool_name="read", arguments={"f": i}, content=f"row {i}\n" * 300)
    key = tenant.key()
    assembled = tenant.mnemo.context(p, "many", budget_tokens=3000)
    assert len(assembled.left_out) > PAGE_SIZE  # the session leaves out more than a page
    first = tenant.get("/ui/sessions/many/context?budget=3000", key).text
    table = first.split('<table id="left-out">')[1].split("</table>")[0]
    assert table.count("<tr>") == PAGE_SIZE + 1  # the header and one page
    assert f"({len(assembled.left_out)})" in first
    assert f"budget=3000&amp;candidates_offset=0&amp;left_offset={PAGE_SIZE}" in first
    rest = tenant.get(f"/ui/sessions/many/context?budget=3000&left_offset={PAGE_SIZE}", key).text
    shown = rest.split('<table id="left-out">')[1].split("</table>")[0].count("<tr>") - 1
    assert shown == len(assembled.left_out) - PAGE_SIZE
