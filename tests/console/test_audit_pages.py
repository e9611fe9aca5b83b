"""The audit and deletion pages (admins only): the tenant's events filtered by kind, subject,
target and time and paged by seq, the chain's live verification (which flips when a row is edited
in the database) and its signed anchor as a download; the deletions with what each removed, and a
receipt verified live (accepted, tampered, malformed, another tenant's); isolation and reading
only; then in a real browser."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from console_helpers import SCREENSHOTS, Console, Tenant, click_through, screenshot, sign_in
from sqlalchemy import update

from mnemo_sea.archive import AuditAnchor, DeletionReceipt, EvidenceInput, Forbidden
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.console.limits import MAX_BODY_BYTES
from mnemo_sea.console.pages import PAGE_SIZE
from mnemo_sea.system.receipt_json import anchor_from_dict, receipt_to_dict

CODE = re.compile(r'id="error-code">([^<]+)<')


def _activity(tenant: Tenant) -> DeletionReceipt:
    """Events of every kind: archive, recover, an evidence write, retract, a denied delete (by
    bob), a delete."""
    admin, bob = tenant.principal(), tenant.principal("bob", "agent")
    m = tenant.mnemo
    m.record(bob, "s1", tool_name="orders.lookup", arguments={}, content="order O-1042: shipped")
    m.archive_results(bob, "s1", [("r1", "order shipped")])
    m.recover(bob, "s1", "r1")
    m.put_evidence(bob, EvidenceInput(evidence_id="KB-rules", body="v1", source="doc"))
    m.retract(bob, "KB-rules", "outdated")
    with pytest.raises(Forbidden):
        m.delete_evidence(bob, "KB-rules")
    return m.delete_evidence(admin, "KB-rules")


def _seqs(page: str) -> list[int]:
    table = (
        page.split('<table id="events">')[1].split("</table>", maxsplit=1)[0] if 'id="events"' in page else ""
    )
    return [int(s) for s in re.findall(r'<td class="num">(\d+)</td>', table)]


def _events(tenant: Tenant) -> list[Any]:
    return tenant.mnemo.archive.audit_events(tenant.principal(), limit=1000)


def test_the_audit_lists_the_tenants_events_newest_first_and_filters_them(tenant: Tenant) -> None:
    _activity(tenant)
    key = tenant.key()
    admin = tenant.principal()
    find = tenant.mnemo.archive.find_audit_events
    page = tenant.get("/ui/audit", key)
    assert page.status_code == 200
    assert (
        _seqs(page.text)
        == [e.seq for e in find(admin)]
        == sorted((e.seq for e in _events(tenant)), reverse=True)
    )
    deleted = _seqs(tenant.get("/ui/audit?kind=delete", key).text)
    assert deleted == [e.seq for e in find(admin, action="delete")] and len(deleted) == 1
    assert _seqs(tenant.get("/ui/audit?subject=bob", key).text) == [e.seq for e in find(admin, actor="bob")]
    by_target = _seqs(tenant.get("/ui/audit?target=kb-RULES", key).text)  # letter case ignored
    assert (
        by_target == [e.seq for e in find(admin, target_contains="evidence:kb-rules")] and len(by_target) == 4
    )  # its write, its retraction, the denied delete and the delete
    written = _seqs(tenant.get("/ui/audit?kind=put_evidence", key).text)
    assert written == [e.seq for e in find(admin, action="put_evidence")] and len(written) == 1
    # A time range, as the form's date-time fields send it (UTC, to the second).
    events = sorted(_events(tenant), key=lambda e: e.seq)
    since, until = events[2].at.replace(microsecond=0), events[-1].at.replace(microsecond=0)
    shown = _seqs(
        tenant.get(f"/ui/audit?from={since:%Y-%m-%dT%H:%M:%S}&to={until:%Y-%m-%dT%H:%M:%S}", key).text
    )
    assert shown == [e.seq for e in find(admin, since=since, until=until)]
    assert _seqs(tenant.get("/ui/audit?kind=delete&subject=bob", key).text) == []
    assert 'id="no-events"' in tenant.get("/ui/audit?kind=nothing-like-this", key).text
    refused = tenant.get("/ui/audit?from=yesterday", key)
    assert refused.status_code == 422 and CODE.findall(refused.text) == ["invalid_input"]


def test_a_long_audit_is_paged_by_seq_and_the_filters_follow(tenant: Tenant) -> None:
    bob = tenant.principal("bob", "agent")
    for n in range(PAGE_SIZE + 5):
        with pytest.raises(Forbidden):
            tenant.mnemo.delete_session(bob, f"s{n}")  # each a denied access, audited
    key = tenant.key()
    first = tenant.get("/ui/audit?kind=denied", key).text
    seqs = _seqs(first)
    assert len(seqs) == PAGE_SIZE and seqs == sorted(seqs, reverse=True)
    assert f'href="/ui/audit?kind=denied&amp;before={seqs[-1]}"' in first
    second = tenant.get(f"/ui/audit?kind=denied&before={seqs[-1]}", key).text
    assert _seqs(second) == list(range(seqs[-1] - 1, 0, -1))[:5] and 'rel="next"' not in second
    assert 'rel="first" href="/ui/audit?kind=denied"' in second


def test_a_time_typed_with_a_zone_is_kept_as_the_same_moment_in_utc(tenant: Tenant) -> None:
    """The page shows times in UTC: a `from` with a zone is that moment in UTC in the form and in
    the pager's links, so the next page filters on the same moment."""
    bob = tenant.principal("bob", "agent")
    for n in range(PAGE_SIZE + 1):
        with pytest.raises(Forbidden):
            tenant.mnemo.delete_session(bob, f"s{n}")
    page = tenant.get("/ui/audit?kind=denied&from=2000-01-01T09:30%2B02:00", tenant.key()).text
    assert 'name="from" step="1" value="2000-01-01T07:30"' in page
    assert "from=2000-01-01T07%3A30&amp;before=" in page and len(_seqs(page)) == PAGE_SIZE


def test_the_chain_status_is_checked_live_and_flips_when_a_row_is_edited(tenant: Tenant) -> None:
    _activity(tenant)
    key = tenant.key()
    admin = tenant.principal()
    page = tenant.get("/ui/audit", key).text
    assert "The chain verifies" in page
    head = max(e.seq for e in _events(tenant))
    assert f'id="anchor-seq">{head}<' in page
    assert tenant.mnemo.archive.receipt_key_id in page
    # The anchor downloads as the CLI writes it, and verifies the chain it was made of.
    download = tenant.get("/ui/audit/anchor.json", key)
    assert download.headers["content-disposition"].startswith("attachment")
    anchor = anchor_from_dict(json.loads(download.text))
    assert isinstance(anchor, AuditAnchor)
    assert anchor.tenant_id == tenant.tenant_id and anchor.seq == head
    assert tenant.mnemo.archive.verify_audit(admin, [anchor]).ok
    # An event edited in the database: the next view says so, and offers no anchor.
    with tenant.mnemo.archive.store.write() as conn:
        c = t.audit_events.c
        conn.execute(
            update(t.audit_events)
            .where(c.tenant_id == tenant.tenant_id, c.seq == 3)
            .values(detail_json='{"reason":"routine"}')
        )
    broken = tenant.get("/ui/audit", key).text
    assert "The chain does not verify" in broken
    problems = tenant.mnemo.archive.verify_audit(admin).problems
    assert problems == ("event 3 was altered (its content no longer matches its hash)",)
    assert html.escape(problems[0], quote=True) in broken
    assert 'id="anchor-seq"' not in broken and 'id="anchor-download"' not in broken


def test_the_audit_and_deletions_are_for_admins(tenant: Tenant) -> None:
    _activity(tenant)
    receipt = json.dumps(receipt_to_dict(_activity_receipt(tenant)))
    assert 'href="/ui/audit"' in tenant.get("/ui/sessions", tenant.key()).text
    for role in ("agent", "reader"):
        key = tenant.key("eve", role)
        menu = tenant.get("/ui/sessions", key).text  # offered to admins only
        assert 'href="/ui/audit"' not in menu and 'href="/ui/deletions"' not in menu
        for path in ("/ui/audit", "/ui/audit/anchor.json", "/ui/deletions", "/ui/deletions/verify?seq=1"):
            page = tenant.get(path, key)
            assert (page.status_code, CODE.findall(page.text)) == (403, ["forbidden"]), path
        posted = tenant.console.client.post(
            "/ui/deletions/verify", headers={"X-API-Key": key}, data={"receipt": receipt}
        )
        assert (posted.status_code, CODE.findall(posted.text)) == (403, ["forbidden"])


def _activity_receipt(tenant: Tenant) -> DeletionReceipt:
    tenant.mnemo.put_evidence(tenant.principal(), EvidenceInput(evidence_id="note-9", body="b", source="doc"))
    return tenant.mnemo.delete_evidence(tenant.principal(), "note-9")


def test_deletions_list_what_each_removed_with_a_link_to_verify_its_receipt(tenant: Tenant) -> None:
    receipt = _activity(tenant)
    tenant.mnemo.record(tenant.principal(), "visit", tool_name="t", arguments={}, content="x")
    session_receipt = tenant.mnemo.delete_session(tenant.principal(), "visit")
    key = tenant.key()
    page = tenant.get("/ui/deletions", key).text
    rows = page.split('<table id="deletions">')[1].split("<tbody>")[1].split("</table>")[0].split("<tr>")[1:]
    events = tenant.mnemo.archive.find_audit_events(tenant.principal(), action="delete")
    assert [int(re.findall(r'<td class="num">(\d+)</td>', r)[0]) for r in rows] == [e.seq for e in events]
    assert [e.seq for e in events] == [session_receipt.audit_seq, receipt.audit_seq]
    assert "sessions: 1, tool results: 1" in rows[0] and "evidence versions: 1" in rows[1]
    assert f'href="/ui/deletions/verify?seq={receipt.audit_seq}"' in rows[1]
    form = tenant.get(f"/ui/deletions/verify?seq={receipt.audit_seq}", key).text
    assert "evidence:KB-rules" in form and f'name="seq" value="{receipt.audit_seq}"' in form


def _verify(tenant: Tenant, key: str, **kwargs: Any) -> Any:
    return tenant.console.client.post("/ui/deletions/verify", headers={"X-API-Key": key}, **kwargs)


def _checks(page: str) -> dict[str, str]:
    rows = re.findall(
        r'id="check-([a-z-]+)"><td>[^<]*</td><td><span class="badge [^"]*">([^<]+)</span>', page
    )
    return dict(rows)


def test_a_receipt_is_verified_live_and_a_tampered_one_refused(tenant: Tenant) -> None:
    receipt = _activity(tenant)
    key = tenant.key()
    printed = receipt_to_dict(receipt)
    before = _events(tenant)
    pasted = _verify(tenant, key, data={"receipt": json.dumps(printed)})
    assert pasted.status_code == 200
    assert 'id="verdict"><b>Verified</b>' in pasted.text
    assert _checks(pasted.text) == {
        "signature": "ok",
        "audit-event": "ok",
        "removed-items": "ok",
        "outbox": "ok",
        "erasure": "ok",
    }
    check = tenant.mnemo.verify_deleted(tenant.principal(), receipt)  # the facade's own answer
    assert check.ok and f"event {receipt.audit_seq} of the chain is this deletion" in pasted.text
    items = pasted.text.split('<table id="items"')[1].split("</table>")[0]
    assert "<code>KB-rules@1</code>" in items and items.count(">present<") == 0
    uploaded = _verify(tenant, key, files={"receipt_file": ("receipt.json", json.dumps(printed).encode())})
    assert uploaded.status_code == 200 and "<b>Verified</b>" in uploaded.text
    assert _events(tenant) == before  # verifying reads

    tampered = _verify(tenant, key, data={"receipt": json.dumps({**printed, "target": "evidence:other"})})
    assert tampered.status_code == 422
    assert 'id="failed-check">signature<' in tampered.text
    assert _checks(tampered.text)["audit-event"] == "not run"
    assert "altered after it was signed" in tampered.text
    # The archive audits a receipt it did not issue, on every surface alike: one event, no more.
    added = _events(tenant)[len(before) :]
    assert [(e.action, e.detail["check"]) for e in added] == [("integrity_failure", "signature")]


def test_each_removed_item_is_shown_with_where_it_is_still_held(tenant: Tenant) -> None:
    """A deletion of evidence a task state cites: the evidence version is gone from the archive and
    the index, and the task state versions are rewritten without the fact."""
    admin = tenant.principal()
    m = tenant.mnemo
    m.put_evidence(admin, EvidenceInput(evidence_id="lab-7", body="MDR1 mut/mut", source="lab"))
    m.update_task_state(
        admin, "visit", goal="g", confirmed=[{"fact": "MDR1 mut/mut", "evidence_id": "lab-7"}]
    )
    receipt = m.delete_evidence(admin, "lab-7")
    assert receipt.task_states == (("visit", 1),)
    page = _verify(tenant, tenant.key(), data={"receipt": json.dumps(receipt_to_dict(receipt))}).text
    table = page.split('<table id="items"')[1].split("</table>")[0]
    rows = [
        (state, *(re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)))
        for state, row in re.findall(r'<tr class="(gone|held)">(.*?)</tr>', table, re.S)
    ]
    assert rows == [
        ("gone", "evidence version", "lab-7@1", "absent", "absent"),  # the archive, the index
        ("gone", "task state version", "visit v1", "rewritten", "—"),
        ("gone", "original", receipt.blobs[0], "absent", "—"),
    ]
    assert "MDR1 mut/mut" not in page  # a receipt holds ids and hashes, never deleted content


def test_a_receipt_that_is_no_receipt_is_a_clear_422(tenant: Tenant) -> None:
    key = tenant.key()
    for data in (
        {"receipt": "{not json"},
        {"receipt": "[1, 2]"},
        {"receipt": '{"target": "x"}'},
        {"receipt": ""},
    ):
        page = _verify(tenant, key, data=data)
        assert (page.status_code, CODE.findall(page.text)) == (422, ["invalid_input"]), data
    assert "not JSON" in _verify(tenant, key, data={"receipt": "{not json"}).text
    too_big = _verify(tenant, key, content=b"x" * (MAX_BODY_BYTES + 1))
    assert (too_big.status_code, CODE.findall(too_big.text)) == (413, ["request_too_large"])


def test_another_tenants_receipt_reads_like_an_unknown_one(tenant: Tenant, console: Console) -> None:
    _activity(tenant)
    other = Tenant(console)
    other.mnemo.put_evidence(
        other.principal(), EvidenceInput(evidence_id="KB-rules", body="theirs", source="doc")
    )
    theirs = receipt_to_dict(other.mnemo.delete_evidence(other.principal(), "KB-rules"))
    key = tenant.key()
    before = _events(tenant)
    foreign = _verify(tenant, key, data={"receipt": json.dumps(theirs)})
    unknown = _verify(tenant, key, data={"receipt": json.dumps({**theirs, "tenant_id": "t-never-was"})})
    assert foreign.status_code == unknown.status_code == 404
    assert CODE.findall(foreign.text) == CODE.findall(unknown.text) == ["not_found"]
    assert foreign.text == unknown.text
    assert other.tenant_id not in foreign.text and "theirs" not in foreign.text
    assert _events(tenant) == before


def test_another_tenants_events_are_never_shown(tenant: Tenant, console: Console) -> None:
    _activity(tenant)
    other = Tenant(console)
    m = other.mnemo
    for n in range(3):
        m.put_evidence(other.principal(), EvidenceInput(evidence_id=f"theirs-{n}", body="x", source="doc"))
        m.delete_evidence(other.principal(), f"theirs-{n}")
    their_deletions = m.archive.find_audit_events(other.principal(), action="delete")
    key = tenant.key()
    for path in ("/ui/audit", "/ui/audit?target=theirs", "/ui/deletions"):
        assert "theirs-" not in tenant.get(path, key).text
    ours = {e.seq for e in tenant.mnemo.archive.find_audit_events(tenant.principal(), action="delete")}
    seq = next(e.seq for e in their_deletions if e.seq not in ours)
    theirs = tenant.get(f"/ui/deletions/verify?seq={seq}", key)
    missing = tenant.get("/ui/deletions/verify?seq=999999", key)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.text.replace(f"event {seq}", "event N") == missing.text.replace("event 999999", "event N")


def test_the_audit_and_deletion_pages_read_only(tenant: Tenant) -> None:
    receipt = _activity(tenant)
    key = tenant.key()
    before = _events(tenant)
    for path in (
        "/ui/audit",
        "/ui/audit?kind=delete&target=kb",
        "/ui/audit/anchor.json",
        "/ui/deletions",
        f"/ui/deletions/verify?seq={receipt.audit_seq}",
    ):
        assert tenant.get(path, key).status_code == 200, path
    assert _verify(tenant, key, data={"receipt": json.dumps(receipt_to_dict(receipt))}).status_code == 200
    assert _events(tenant) == before
    assert tenant.mnemo.archive.verify_audit(tenant.principal()).ok


def test_a_person_filters_the_audit_and_verifies_a_receipt(
    tenant: Tenant, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    receipt = _activity(tenant)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Audit")
    assert "The chain verifies" in browser.find_element(By.ID, "chain-status").text
    browser.find_element(By.ID, "kind").send_keys("delete")
    click_through(browser, By.ID, "filter")
    kinds = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#events a.kind")]
    assert kinds == ["delete"]
    screenshot(browser, SCREENSHOTS, "audit")
    click_through(browser, By.LINK_TEXT, "Deletions")
    click_through(browser, By.CSS_SELECTOR, "#deletions a.verify-link")
    assert "evidence:KB-rules" in browser.find_element(By.ID, "deletion").text
    browser.find_element(By.ID, "receipt").send_keys(json.dumps(receipt_to_dict(receipt), indent=1))
    click_through(browser, By.ID, "verify")
    assert browser.find_element(By.ID, "verdict").text.startswith("Verified")
    screenshot(browser, SCREENSHOTS, "deletion-verified")
