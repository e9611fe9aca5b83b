"""The task state page: a session's versions side by side, newest on the right, each with its
facts' evidence as links and what it changed against the version before; the refused writes the
audit chain recorded (admins only); paging, isolation and reading only; then in a real browser.

Refused writes: the archive audits a refusal of a task state write only when it is a denied access
(a missing role or clearance, or evidence cited above the writer's clearance: archive/api.py
`_guard`); a write refused for its content alone is stored nowhere, and the page says so."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from console_helpers import SCREENSHOTS, Console, Tenant, click_through, screenshot, sign_in

from mnemo_sea.archive import EvidenceInput, Forbidden, TaskStateRejected
from mnemo_sea.console.routes.task_state import VERSIONS_PER_PAGE

LAB = "lab/report#1"  # an evidence id with `/` and `#`: links carry it percent-encoded


def _history(tenant: Tenant, session_id: str = "visit-1") -> None:
    """Three versions: a plan with open items; the MDR1 result settles one; then a new goal, a
    fact citing a tool result and one a memory fact, and the order released with a reason."""
    p = tenant.principal(clearance="confidential")
    m = tenant.mnemo
    m.record(p, session_id, tool_name="lab.read", arguments={"pet": "pet-7"}, content="MDR1 mut/mut")
    m.put_evidence(p, EvidenceInput(evidence_id=LAB, body="MDR1 genotype: mut/mut", source="lab"))
    m.remember(p, "pet-7", "diet", "grain free", "user_claim")
    m.update_task_state(
        p,
        session_id,
        goal="plan for pet-7",
        unresolved=["MDR1 status unknown"],
        constraints=["no ivermectin before MDR1 is known"],
        pending_operations=["milbemycin order sent"],
    )
    settled = {"fact": "MDR1 mut/mut", "evidence_id": LAB, "resolves": "MDR1 status unknown"}
    m.update_task_state(
        p,
        session_id,
        goal="plan for pet-7",
        confirmed=[settled],
        constraints=["no ivermectin before MDR1 is known"],
        pending_operations=["milbemycin order sent"],
    )
    m.update_task_state(
        p,
        session_id,
        goal="treatment plan <b>for</b> pet-7",
        confirmed=[
            settled,
            {"fact": "the lab tool read the genotype", "evidence_id": f"result:{session_id}/r1"},
            {"fact": "diet is grain free", "evidence_id": "memory:pet-7/diet"},
        ],
        constraints=["no ivermectin before MDR1 is known"],
        release=[{"item": "milbemycin order sent", "reason": "the vet cancelled the order"}],
    )


def _section(page: str, version: int) -> str:
    return page.split(f'id="v{version}"')[1].split("</section>", maxsplit=1)[0]


def test_versions_stand_side_by_side_with_their_evidence_and_changes(tenant: Tenant) -> None:
    _history(tenant)
    page = tenant.get("/ui/sessions/visit-1/task-state", tenant.key())
    assert page.status_code == 200
    text = page.text
    # Oldest on the left, newest on the right, as the facade has them.
    history = tenant.mnemo.task_state_history(tenant.principal(), "visit-1")
    assert [v.version for v in history] == [1, 2, 3]
    assert [int(v) for v in re.findall(r'<section class="card version" id="v(\d+)"', text)] == [1, 2, 3]
    for state in history:
        section = html.unescape(_section(text, state.version))
        assert state.goal in section and state.status in section
        assert all(f.fact in section for f in state.confirmed)
        assert all(
            item in section for item in (*state.unresolved, *state.constraints, *state.pending_operations)
        )
    assert "treatment plan &lt;b&gt;for&lt;/b&gt; pet-7" in text  # text, never markup
    # Each fact's evidence is a link to the page of what it cites, ids percent-encoded.
    v3 = _section(text, 3)
    assert 'href="/ui/evidence/item?id=lab%2Freport%231"' in v3
    assert 'href="/ui/sessions/visit-1/results/r1"' in v3
    assert 'href="/ui/memory/fact?owner=pet-7&amp;key=diet"' in v3
    # What each version changed against the one before.
    v2 = html.unescape(_section(text, 2))
    assert "Changes since v1" in v2
    assert "+ confirmed facts: MDR1 mut/mut [lab/report#1]" in re.sub(r"\s+", " ", re.sub("<[^>]+>", "", v2))
    assert "settled by “MDR1 mut/mut”" in re.sub(r"<[^>]+>", "", v2)
    v3_text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html.unescape(v3)))
    assert "goal was plan for pet-7" in v3_text
    assert "pending operations: milbemycin order sent released: the vet cancelled the order" in v3_text
    assert "+ confirmed facts: diet is grain free [memory:pet-7/diet]" in v3_text
    assert "the first version" in _section(text, 1)


def test_a_long_history_is_read_a_page_of_versions_at_a_time(tenant: Tenant) -> None:
    p = tenant.principal()
    for n in range(1, 7):
        tenant.mnemo.update_task_state(
            p, "long", goal=f"goal {n}", constraints=[f"rule {k}" for k in range(n)]
        )
    key = tenant.key()
    newest = tenant.get("/ui/sessions/long/task-state", key).text
    shown = [int(v) for v in re.findall(r'class="card version" id="v(\d+)"', newest)]
    assert shown == list(range(6 - VERSIONS_PER_PAGE + 1, 7))  # opens on the newest, rightmost last
    assert 'rel="prev" href="/ui/sessions/long/task-state?offset=0"' in newest
    assert 'rel="next"' not in newest
    oldest = tenant.get("/ui/sessions/long/task-state?offset=0", key).text
    assert [int(v) for v in re.findall(r'class="card version" id="v(\d+)"', oldest)] == [1, 2, 3, 4]
    assert f'rel="next" href="/ui/sessions/long/task-state?offset={VERSIONS_PER_PAGE}"' in oldest
    assert "+ constraints: rule 3" in re.sub(r"<[^>]+>", "", html.unescape(_section(oldest, 4)))


def test_versions_above_the_readers_clearance_are_left_out_and_said_so(tenant: Tenant) -> None:
    """v2 cites confidential evidence (so it is confidential itself); v3 lets that fact go and is
    internal again: an internal reader sees v1 and v3, and v3's changes span the gap."""
    p = tenant.principal(clearance="confidential")
    m = tenant.mnemo
    m.put_evidence(p, EvidenceInput(evidence_id="biopsy", body="x", source="lab", sensitivity="confidential"))
    m.update_task_state(p, "gap", goal="g", unresolved=["biopsy result unknown"])
    fact = {"fact": "biopsy benign", "evidence_id": "biopsy", "resolves": "biopsy result unknown"}
    m.update_task_state(p, "gap", goal="g", confirmed=[fact])
    key = tenant.key()  # internal
    page = tenant.get("/ui/sessions/gap/task-state", key).text
    assert [int(v) for v in re.findall(r'class="card version" id="v(\d+)"', page)] == [1]
    assert 'id="newer-hidden">the versions after v1 are above your clearance' in page
    assert "biopsy benign" not in page
    m.update_task_state(p, "gap", goal="g", release=[{"item": "biopsy benign", "reason": "sent to the vet"}])
    page = tenant.get("/ui/sessions/gap/task-state", key).text
    assert [int(v) for v in re.findall(r'class="card version" id="v(\d+)"', page)] == [1, 3]
    assert "not shown, above your clearance: v2" in page and 'id="newer-hidden"' not in page
    assert "Changes since v1" in _section(page, 3) and "versions between are above your clearance" in page


def test_refused_writes_the_audit_chain_recorded_are_listed_for_admins(tenant: Tenant) -> None:
    _history(tenant)
    m = tenant.mnemo
    secret = EvidenceInput(evidence_id="biopsy", body="x", source="lab", sensitivity="confidential")
    m.put_evidence(tenant.principal(clearance="confidential"), secret)
    low = tenant.principal("bob", "agent", "internal")
    with pytest.raises(TaskStateRejected):
        m.update_task_state(low, "visit-1", goal="g", confirmed=[{"fact": "f", "evidence_id": "biopsy"}])
    with pytest.raises(Forbidden):
        m.update_task_state(tenant.principal("carol", "reader"), "visit-1", goal="g")
    unknown = [{"fact": "f", "evidence_id": "nope"}]
    with pytest.raises(TaskStateRejected):  # refused for its content alone: stored nowhere
        m.update_task_state(tenant.principal(), "visit-1", goal="g", confirmed=unknown)
    with pytest.raises(Forbidden):  # a refused read, audited under the same target: not a write
        m.task_state_history(tenant.principal("pet-8", "reader"), "visit-1")
    page = tenant.get("/ui/sessions/visit-1/task-state", tenant.key()).text
    table = page.split('<table id="refusals">')[1].split("</table>")[0]
    refused = tenant.mnemo.archive.find_audit_events(
        tenant.principal(), action="denied", target="task_state:visit-1"
    )
    assert [e.detail["action"] for e in refused] == ["task_state_history", *["update_task_state"] * 2]
    listed = [int(s) for s in re.findall(r'<td class="num"><a [^>]*>(\d+)</a>', table)]
    assert listed == [e.seq for e in refused[1:]]  # the two denied writes; the content refusal left no event
    assert "task_state_history" not in table and ">pet-8<" not in table
    assert "confirmed[0].evidence_id: cites evidence above the writer&#39;s clearance" in table
    assert ">bob<" in table and ">carol<" in table and "needs the agent role" in table
    assert "stored nowhere" in page  # the page says what it cannot show
    # Not an admin: the page says where the refusals are, and asks the audit nothing (which
    # would itself be a denied access, audited).
    agent_key = tenant.key("dave", "agent", "confidential")  # creating a key is audited
    before = m.archive.audit_events(tenant.principal(), limit=1000)
    agent_page = tenant.get("/ui/sessions/visit-1/task-state", agent_key)
    assert agent_page.status_code == 200 and 'id="refusals-admin-only"' in agent_page.text
    assert m.archive.audit_events(tenant.principal(), limit=1000) == before


def test_another_tenants_task_state_reads_like_a_missing_one(tenant: Tenant, console: Console) -> None:
    _history(tenant, "shared-name")
    other = Tenant(console)
    other.mnemo.record(other.principal(), "own", tool_name="t", arguments={}, content="x")
    key = other.key()
    theirs = other.get("/ui/sessions/shared-name/task-state", key)
    missing = other.get("/ui/sessions/never-was/task-state", key)
    assert theirs.status_code == missing.status_code == 404
    code = re.compile(r'id="error-code">([^<]+)<')
    assert code.findall(theirs.text) == code.findall(missing.text) == ["not_found"]
    assert theirs.text.replace("shared-name", "X") == missing.text.replace("never-was", "X")
    assert "plan for pet-7" not in theirs.text


def test_the_task_state_page_reads_only(tenant: Tenant) -> None:
    _history(tenant)
    p = tenant.principal()
    key = tenant.key()
    before = (tenant.mnemo.task_state_history(p, "visit-1"), tenant.mnemo.archive.audit_events(p, limit=1000))
    for path in ("", "?offset=0", "?offset=2"):
        assert tenant.get(f"/ui/sessions/visit-1/task-state{path}", key).status_code == 200
    after = (tenant.mnemo.task_state_history(p, "visit-1"), tenant.mnemo.archive.audit_events(p, limit=1000))
    assert after == before


def test_a_person_opens_a_sessions_task_state(tenant: Tenant, browser: Any, live_url: str) -> None:
    from selenium.webdriver.common.by import By

    _history(tenant)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "visit-1")
    click_through(browser, By.LINK_TEXT, "Task state →")
    columns = browser.find_elements(By.CSS_SELECTOR, "#versions > section")
    assert [c.get_attribute("id") for c in columns] == ["v1", "v2", "v3"]
    # Side by side: each column starts to the right of the one before, on one row.
    lefts = [c.rect["x"] for c in columns]
    assert lefts == sorted(lefts) and len({round(c.rect["y"]) for c in columns}) == 1
    assert "treatment plan <b>for</b> pet-7" in columns[2].text
    screenshot(browser, SCREENSHOTS, "task-state")
    click_through(browser, By.CSS_SELECTOR, "#v3 a.evidence-link[href*='results']")
    assert browser.find_element(By.ID, "result-id").text == "r1"
