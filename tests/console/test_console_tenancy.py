"""Across the evidence, memory, summary and search pages: a second tenant holding the very same
ids, owners and session is never shown, a link naming what only it has answers exactly as one
that never existed does, and search never returns it; and visiting every page changes nothing,
neither the records nor the audit chain."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote, urlencode

from console_helpers import Tenant
from console_records import DIET, DOSE, REFUND, clinic
from fakes import ManualWallClock

from mnemo_sea.archive import EvidenceInput

MARKER = "zebracorn"  # in every text of the other tenant, in none of ours


def _other(tenant: Tenant) -> tuple[Tenant, str]:
    """Another tenant on the same console with our ids, our owner and key, our session, and
    things only it has; returns it and its summary's id."""
    other = Tenant(tenant.console)
    p = other.principal()
    for n in range(5):  # more versions than ours: a version number only it has
        other.mnemo.ingest(
            p, [EvidenceInput(f"{MARKER} dose {n}", "b.pdf", evidence_id=DOSE, statement=MARKER)]
        )
    other.mnemo.ingest(p, [EvidenceInput(f"{MARKER} refunds", "b.md", evidence_id=REFUND)])
    other.mnemo.ingest(p, [EvidenceInput(f"{MARKER} only here", "b.md", evidence_id="kb/only-b")])
    other.mnemo.record(p, "visit-1", "lab", f"{MARKER} lab", owner="pet-7")
    other.mnemo.remember(p, *DIET, f"{MARKER} diet", "user_claim")
    other.mnemo.remember(p, "pet-9", "diet", f"{MARKER} diet", "user_claim")
    summary = other.mnemo.create_summary(p, f"{MARKER} summary", ["evidence:kb/only-b", "result:visit-1/r1"])
    return other, summary.summary_id


def _error(tenant: Tenant, path: str, key: str) -> tuple[int, str]:
    page = tenant.get(path, key)
    code = re.search(r'id="error-code">([^<]+)<', page.text)
    return page.status_code, code.group(1) if code else ""


def test_another_tenant_with_the_same_ids_is_never_shown(tenant: Tenant, wall_clock: ManualWallClock) -> None:
    made = clinic(tenant, wall_clock)
    other, their_summary = _other(tenant)
    key = tenant.key()
    ours = {
        "/ui/evidence": [e.evidence_id for e in tenant.mnemo.list_evidence(tenant.principal())],
        "/ui/memory": [o.owner for o in tenant.mnemo.list_memory_owners(tenant.principal())],
        "/ui/summaries": [s.summary_id for s in tenant.mnemo.list_summaries(tenant.principal())],
    }
    assert ours == {
        "/ui/evidence": sorted([DOSE, REFUND]),
        "/ui/memory": ["pet-7", "pet-8"],
        "/ui/summaries": [made.summary.summary_id],
    }
    pages = [
        *ours,
        f"/ui/evidence/item?id={quote(DOSE, safe='')}",
        f"/ui/evidence/item?id={quote(DOSE, safe='')}&as_of={quote(made.retracted_at.isoformat())}",
        f"/ui/evidence/version?id={quote(REFUND, safe='')}&version=1",
        "/ui/memory/owner?owner=pet-7",
        f"/ui/memory/fact?{urlencode(dict(zip(('owner', 'key'), DIET, strict=True)))}",
        f"/ui/summaries/item?id={quote(made.summary.summary_id)}",
        "/ui/sessions/visit-1/results/r1",
    ]
    for path in pages:
        page = tenant.get(path, key)
        assert page.status_code == 200, path
        assert MARKER not in page.text and "kb/only-b" not in page.text and "pet-9" not in page.text, path
    item = tenant.get(pages[3], key).text
    assert re.findall(r'<tr id="v(\d+)"', item) == ["1", "2", "3"]  # ours: three, theirs five
    # What only the other tenant has answers as what never existed: the same status and code.
    dose = quote(DOSE, safe="")
    for theirs, none in [
        ("/ui/evidence/item?id=kb%2Fonly-b", "/ui/evidence/item?id=kb%2Fnever"),
        ("/ui/evidence/version?id=kb%2Fonly-b&version=1", "/ui/evidence/version?id=kb%2Fnever&version=1"),
        (
            "/ui/evidence/version/original?id=kb%2Fonly-b&version=1",
            "/ui/evidence/version/original?id=kb%2Fnever&version=1",
        ),
        (f"/ui/evidence/version?id={dose}&version=5", f"/ui/evidence/version?id={dose}&version=99"),
        ("/ui/memory/fact?owner=pet-9&key=diet", "/ui/memory/fact?owner=pet-0&key=diet"),
        (f"/ui/summaries/item?id={quote(their_summary)}", "/ui/summaries/item?id=sum%3A" + "0" * 32),
    ]:
        assert _error(tenant, theirs, key) == _error(tenant, none, key) == (404, "not_found"), theirs
    # An owner only they keep memory about has no facts here, as one nobody does.
    for owner in ("pet-9", "pet-0"):
        page = tenant.get(f"/ui/memory/owner?owner={owner}", key).text
        assert 'class="fact-link"' not in page and 'class="empty"' in page
    # And they see theirs, not ours: the pages are the viewer's tenant's, not the URL's.
    theirs = other.get(f"/ui/evidence/item?id={quote(DOSE, safe='')}", other.key()).text
    assert re.findall(r'<tr id="v(\d+)"', theirs) == ["1", "2", "3", "4", "5"] and MARKER in theirs


def test_search_never_returns_another_tenant_s_records(tenant: Tenant, wall_clock: ManualWallClock) -> None:
    clinic(tenant, wall_clock)
    other, _ = _other(tenant)
    key = tenant.key()
    for query in (MARKER, f"{MARKER} dose refunds diet lab summary", "refunds diet", "lab"):
        page = tenant.get(f"/ui/search?{urlencode({'q': query})}", key)
        assert page.status_code == 200, query
        hits = re.findall(r'<tr class="hit">(.*?)</tr>', page.text, re.S)
        assert hits, query  # the dense leg always finds something: ours
        assert [h for h in hits if MARKER in html.unescape(h)] == [], query
        assert "kb/only-b" not in page.text and "pet-9" not in page.text, query
    # They find their own by the same word: the index holds it, the page shows the viewer's.
    assert "kb/only-b" in other.get(f"/ui/search?q={MARKER}", other.key()).text


def test_visiting_every_page_changes_nothing(tenant: Tenant, wall_clock: ManualWallClock) -> None:
    made = clinic(tenant, wall_clock)
    p = tenant.principal()
    key = tenant.key()
    mnemo = tenant.mnemo

    def state() -> tuple[Any, ...]:
        evidence = mnemo.list_evidence(p)
        owners = mnemo.list_memory_owners(p)
        return (
            evidence,
            [mnemo.evidence_history(p, e.evidence_id) for e in evidence],
            owners,
            [mnemo.facts(p, o.owner) for o in owners],
            [mnemo.memory_history(p, o.owner, f.key) for o in owners for f in mnemo.facts(p, o.owner)],
            mnemo.list_summaries(p),
            mnemo.list_sessions(p),
            mnemo.list_results(p, "visit-1"),
            mnemo.archive.audit_events(p, limit=1000),
        )

    before = state()
    tenant.get("/ui/evidence", key)  # the key's first use, before the snapshot of the tables
    rows = tenant.stored()
    dose = quote(DOSE, safe="")
    paths = [
        "/ui/evidence",
        f"/ui/evidence/item?id={dose}",
        f"/ui/evidence/item?id={dose}&as_of={quote(made.dose[1].recorded_at.isoformat())}",
        f"/ui/evidence/item?id={dose}&as_of=2000-01-01",
        f"/ui/evidence/version?id={dose}&version=1",
        f"/ui/evidence/version/original?id={dose}&version=3",
        "/ui/memory",
        "/ui/memory/owner?owner=pet-7",
        f"/ui/memory/fact?{urlencode({'owner': DIET[0], 'key': DIET[1]})}",
        "/ui/summaries",
        f"/ui/summaries/item?id={quote(made.summary.summary_id)}",
        "/ui/search",
        "/ui/search?q=wet+food",
        "/ui/search?q=amoxicillin&kind=knowledge",
        "/ui/sessions/visit-1/task-state",
        "/ui/audit",
        "/ui/deletions",
        "/ui/deletions/verify",
        "/ui/curation",
    ]
    for path in paths:
        page = tenant.get(path, key)
        assert page.status_code == 200, path
        if page.headers["content-type"].startswith("text/html"):  # every page names who is looking
            assert f'id="who-tenant">{tenant.tenant_id}<' in page.text, path
            assert 'id="who-subject">alice<' in page.text, path
    for path in ("/ui/evidence/item?id=kb%2Fnever", "/ui/search?q=", "/ui/memory/fact?owner=x&key=y"):
        assert tenant.get(path, key).status_code in (404, 422), path
    assert state() == before
    assert tenant.stored() == rows  # every table's rows of the tenant, read from the tables
