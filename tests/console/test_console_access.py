"""Who is looking: signing in (a key in an HttpOnly cookie, or `ui`'s launch link), pages that
name the tenant and principal, and nothing of another tenant reachable by id or URL: it answers
exactly like a record that never existed. Then the same in a real browser."""

from __future__ import annotations

from typing import Any

import pytest
from console_helpers import SCREENSHOTS, Tenant, click_through, screenshot, sign_in
from fastapi.testclient import TestClient

from mnemo_sea.archive import Principal, Role
from mnemo_sea.console.app import standalone_app
from mnemo_sea.console.viewer import COOKIE, LaunchLogin

SESSION_PAGES = ("", "/results/r1", "/results/r1/original", "/results/r2", "/context?budget=4000")


def _visit(tenant: Tenant, session: str = "s1") -> None:
    p = tenant.principal()
    tenant.mnemo.record(p, session, tool_name="order_lookup", arguments={"id": 7}, content="order 7: shipped")
    tenant.mnemo.record(
        p, session, tool_name="price", arguments={}, content=f"price 12.50 for {tenant.tenant_id}"
    )
    tenant.mnemo.archive_results(p, session, [("r1", "order 7 shipped")])


def test_without_a_key_every_page_answers_with_the_sign_in_form(tenant: Tenant) -> None:
    _visit(tenant)
    for path in ("/ui/", "/ui/sessions", *(f"/ui/sessions/s1{p}" for p in SESSION_PAGES)):
        page = tenant.console.client.get(path)
        assert page.status_code == 401, path
        assert 'id="key"' in page.text and tenant.tenant_id not in page.text
    wrong = tenant.get("/ui/sessions", "msk_0000000000000000_not-a-key")
    assert wrong.status_code == 401 and "not valid" in wrong.text


def test_signing_in_sets_a_cookie_no_script_or_other_site_can_use(tenant: Tenant) -> None:
    key = tenant.key()
    client = TestClient(tenant.console.app)
    answer = client.post("/ui/login", data={"key": key, "next": "/ui/sessions"}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/sessions"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={key};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui/" in cookie
    page = client.get("/ui/sessions")
    assert page.status_code == 200 and f'id="who-tenant">{tenant.tenant_id}<' in page.text
    out = client.post("/ui/logout", follow_redirects=False)
    assert out.status_code == 303 and f'{COOKIE}="";' in out.headers["set-cookie"]
    assert client.get("/ui/sessions").status_code == 401
    refused = client.post("/ui/login", data={"key": "msk_nope"}, follow_redirects=False)
    assert refused.status_code == 401 and "set-cookie" not in refused.headers


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/ui/", "/elsewhere", "/ui\\@evil.example", ""]
)
def test_signing_in_never_leads_off_the_console(tenant: Tenant, target: str) -> None:
    answer = TestClient(tenant.console.app).post(
        "/ui/login", data={"key": tenant.key(), "next": target}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/"


def test_every_page_names_who_is_looking_and_is_never_cached_or_framed(tenant: Tenant) -> None:
    _visit(tenant)
    key = tenant.key(subject="bob", role="agent", clearance="confidential")
    for path in SESSION_PAGES[:2] + SESSION_PAGES[3:]:
        page = tenant.get(f"/ui/sessions/s1{path}", key)
        assert page.status_code == 200, path
        assert f'id="who-tenant">{tenant.tenant_id}<' in page.text and 'id="who-subject">bob<' in page.text
        assert "(agent; clearance confidential)" in page.text
        assert page.headers["cache-control"] == "no-store" and page.headers["x-frame-options"] == "DENY"
        assert "script-src 'self'" in page.headers["content-security-policy"]


def _answer(tenant: Tenant, path: str, key: str) -> tuple[int, str, str]:
    """A page's status and error code, and the page with the id in the path blanked out."""
    page = tenant.get(path, key)
    code = page.text.split('id="error-code">')[1].split("<")[0] if "error-code" in page.text else ""
    return page.status_code, code, page.text


def test_another_tenants_session_answers_exactly_like_one_that_never_existed(
    tenant: Tenant, console: Any
) -> None:
    _visit(tenant, "visit-a")
    other = Tenant(console)
    _visit(other, "visit-b")
    key = other.key()
    for page in SESSION_PAGES:
        theirs = _answer(other, f"/ui/sessions/visit-a{page}", key)
        never = _answer(other, f"/ui/sessions/visit-z{page}", key)
        assert theirs[:2] == never[:2] == (404, "not_found"), page
        assert theirs[2].replace("visit-a", "X") == never[2].replace("visit-z", "X"), page
        assert "order 7" not in theirs[2] and tenant.tenant_id not in theirs[2]
    listed = other.get("/ui/sessions", key).text
    assert "visit-b" in listed and "visit-a" not in listed
    # The same session id in both tenants: each sees its own.
    _visit(other, "visit-a")
    seen = other.get("/ui/sessions/visit-a/results/r2", key).text
    assert other.tenant_id in seen and tenant.tenant_id not in seen


def test_a_reader_sees_what_its_role_allows_and_a_typed_refusal_otherwise(tenant: Tenant) -> None:
    p = tenant.principal()
    tenant.mnemo.record(p, "own", tool_name="t", arguments={}, content="about pet-7", owner="pet-7")
    tenant.mnemo.archive_results(p, "own", [("r1", "lab")])
    tenant.mnemo.record(p, "other", tool_name="t", arguments={}, content="about pet-8", owner="pet-8")
    reader = tenant.key(subject="pet-7", role="reader")
    listed = tenant.get("/ui/sessions", reader).text
    assert ">own<" in listed and ">other<" not in listed
    refused = tenant.get("/ui/sessions/own/results/r1", reader)  # an archived original: agents only
    assert refused.status_code == 403 and 'id="error-code">forbidden<' in refused.text
    timeline = tenant.get("/ui/sessions/own", reader)
    assert timeline.status_code == 200 and "lab" in timeline.text  # the note and stub are readable
    assert tenant.get("/ui/sessions/other", reader).status_code == 403


def test_ui_signs_in_with_its_launch_link_only_and_answers_only_loopback_hosts(tenant: Tenant) -> None:
    _visit(tenant)
    launch = LaunchLogin(Principal(tenant.tenant_id, "operator", frozenset({Role.ADMIN})))
    app = standalone_app(tenant.mnemo, host="127.0.0.1", launch=launch)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"
        assert client.get("/ui/login?token=wrong").status_code == 401
        signed = client.get(f"/ui/login?token={launch.token}&next=/ui/sessions/s1", follow_redirects=False)
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/sessions/s1"
        page = client.get("/ui/sessions/s1")
        assert page.status_code == 200 and 'id="who-subject">operator<' in page.text
        rebound = client.get("/ui/sessions/s1", headers={"host": "evil.example"})
        assert rebound.status_code == 400 and "order 7" not in rebound.text
    # Keys work there too: the launch link is one more way in, not the only one.
    with TestClient(standalone_app(tenant.mnemo, launch=launch), base_url="http://localhost") as client:
        assert client.get("/ui/sessions", headers={"X-API-Key": tenant.key()}).status_code == 200
        # But never in a link: a key in a URL stays in histories and logs (the form takes it).
        by_link = client.get(f"/ui/login?token={tenant.key()}", follow_redirects=False)
        assert by_link.status_code == 401 and "set-cookie" not in by_link.headers


def test_an_api_key_in_a_sign_in_link_signs_nobody_in(tenant: Tenant) -> None:
    """Under `serve` there is no launch token: `?token=` takes nothing."""
    answer = TestClient(tenant.console.app).get(f"/ui/login?token={tenant.key()}", follow_redirects=False)
    assert answer.status_code == 401 and "set-cookie" not in answer.headers


def test_in_a_browser_another_tenants_url_reads_like_a_missing_one(
    tenant: Tenant, console: Any, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    _visit(tenant, "visit-a")
    other = Tenant(console)
    _visit(other, "visit-b")
    sign_in(browser, live_url, other.key())
    shown = []
    for session in ("visit-a", "visit-z"):
        browser.get(f"{live_url}/ui/sessions/{session}/results/r2")
        shown.append(
            (
                browser.find_element(By.ID, "error-code").text,
                browser.find_element(By.ID, "error-detail").text.replace(session, "X"),
                browser.find_element(By.ID, "who-tenant").text,
            )
        )
    assert shown[0] == shown[1] and shown[0][0] == "not_found" and shown[0][2] == other.tenant_id
    screenshot(browser, SCREENSHOTS, "cross-tenant-not-found")
    click_through(browser, By.CSS_SELECTOR, "button.link")  # sign out
    assert browser.find_element(By.ID, "key") is not None


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-site"},  # another port of 127.0.0.1, a sibling subdomain
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://127.0.0.1:9999"},
    ],
)
def test_a_form_posted_from_another_origin_is_refused_unread(tenant: Tenant, headers: dict[str, str]) -> None:
    client = TestClient(tenant.console.app)
    answer = client.post("/ui/login", data={"key": tenant.key()}, headers=headers, follow_redirects=False)
    assert answer.status_code == 403 and 'id="error-code">cross_origin<' in answer.text
    assert "set-cookie" not in answer.headers
    own = {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}
    signed = client.post("/ui/login", data={"key": tenant.key()}, headers=own, follow_redirects=False)
    assert signed.status_code == 303
