"""The evidence pages: the list (paged, by id), a record's versions on a time axis and in a table,
the version in force at a chosen moment as the facade's own `get_evidence(as_of=...)` answers,
one version's exact original and download; ids with `/ # . : @` round-trip; then the same walk in
a real browser, typing a moment and moving the slider."""

from __future__ import annotations

import hashlib
import html
import json
import re
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from console_helpers import SCREENSHOTS, Tenant, change_through, click_through, screenshot, sign_in
from console_records import CHINESE_BODY, DOSE, REFUND, clinic
from fakes import ManualWallClock

from mnemo_sea.archive import EvidenceInput, NotFound
from mnemo_sea.console.pages import PAGE_SIZE


def _item(record_id: str, as_of: datetime | None = None) -> str:
    path = f"/ui/evidence/item?id={quote(record_id, safe='')}"
    return path if as_of is None else f"{path}&as_of={quote(as_of.isoformat(), safe='')}"


def _in_force(page: str) -> str:
    """The version the page marks as answering at its moment ("" for none)."""
    found = re.search(r'id="in-force" data-version="(\d*)"', page)
    assert found is not None
    return found.group(1)


def _row_of(page: str, marker: str) -> str:
    """The table row that holds `marker`."""
    return next(row for row in re.findall(r"<tr[^>]*>.*?</tr>", page, re.S) if marker in row)


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr id="v(\d+)"', page)


def test_the_list_shows_each_record_once_with_its_newest_version(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    clinic(tenant, wall_clock)
    page = tenant.get("/ui/evidence", tenant.key())
    assert page.status_code == 200
    listed = tenant.mnemo.list_evidence(tenant.principal())
    links = re.findall(r'class="evidence-link" href="([^"]+)"', page.text)
    assert links == [f"/ui/evidence/item?id={quote(e.evidence_id, safe='')}" for e in listed]
    row = _row_of(page.text, f"?id={quote(DOSE, safe='')}")
    assert 'class="badge retracted"' in row and ">v3</a>" in row and '<td class="num">3</td>' in row
    refund = _row_of(page.text, f"?id={quote(REFUND, safe='')}")
    assert 'class="badge active"' in refund and ">v1</a>" in refund


def test_the_list_is_read_a_page_at_a_time(tenant: Tenant) -> None:
    items = [EvidenceInput(f"note {i}", "notes", evidence_id=f"note/{i:03d}") for i in range(PAGE_SIZE + 7)]
    tenant.mnemo.ingest(tenant.principal(), items)
    key = tenant.key()
    first = tenant.get("/ui/evidence", key).text
    assert first.count('class="evidence-link"') == PAGE_SIZE
    assert f'rel="next" href="/ui/evidence?offset={PAGE_SIZE}"' in first and 'rel="prev"' not in first
    second = tenant.get(f"/ui/evidence?offset={PAGE_SIZE}", key).text
    assert second.count('class="evidence-link"') == 7 and 'rel="next"' not in second
    assert f"note/{PAGE_SIZE + 6:03d}" in second and "note/000" not in second


def test_a_record_shows_every_version_on_the_axis_and_in_the_table(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    page = tenant.get(_item(DOSE), tenant.key())
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert f'id="evidence-id">{DOSE}<' in text
    assert _rows(page.text) == ["1", "2", "3"]  # oldest first, as the facade's history
    bars = re.findall(
        r'<g class="version[^"]*" id="bar-v(\d+)" data-version="\d+" data-status="(\w+)"', page.text
    )
    assert (
        bars
        == [(str(v.version), v.status) for v in made.dose]
        == [
            ("1", "superseded"),
            ("2", "superseded"),
            ("3", "retracted"),
        ]
    )
    for v in made.dose:
        row = _row_of(page.text, f'<tr id="v{v.version}"')
        assert f'class="badge {v.status}"' in row and html.escape(v.statement or "") in row
        assert f'title="{v.content_sha256}"' in row and v.provenance in row
        assert v.recorded_at.strftime("%Y-%m-%d %H:%M:%S") in row
    # The third version's valid window is drawn (a thin bar) and written out; the others are valid always.
    assert page.text.count('class="valid"') == 1
    assert made.dose[2].valid_until is not None
    assert made.dose[2].valid_until.strftime("%Y-%m-%d %H:%M:%S") in page.text
    # Without a moment asked, nothing is marked and no line is drawn.
    assert _in_force(page.text) == "" and 'id="as-of-line"' not in page.text


def test_as_of_marks_the_version_the_facade_answers_with_at_each_moment(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    key, p = tenant.key(), tenant.principal()
    v1, v2, v3 = made.dose
    moments = {
        "before the first": made.started - timedelta(hours=1),
        "the first's first day": v1.recorded_at + timedelta(days=1),
        "the instant v2 was recorded": v2.recorded_at,
        "just before that": v2.recorded_at - timedelta(microseconds=1),
        "while v3 stood": v3.recorded_at + timedelta(hours=5),
        "after the retraction": made.retracted_at + timedelta(seconds=1),
        "at the retraction": made.retracted_at,
    }
    expected = {
        "before the first": "",
        "the first's first day": "1",
        "the instant v2 was recorded": "2",
        "just before that": "1",
        "while v3 stood": "3",
        "after the retraction": "",
        "at the retraction": "",
    }
    for name, moment in moments.items():
        try:
            answered = str(tenant.mnemo.get_evidence(p, DOSE, as_of=moment)[0].version)
        except NotFound:
            answered = ""
        assert answered == expected[name], name  # the facade's own answer, which the page shows
        page = tenant.get(_item(DOSE, moment), key)
        assert page.status_code == 200, name
        assert _in_force(page.text) == answered, name
        assert 'id="as-of-line"' in page.text, name
        marked = re.findall(r'<tr id="v(\d+)" class="in-force"', page.text)
        assert marked == ([answered] if answered else []), name
        drawn = re.findall(r'<g class="version in-force" id="bar-v(\d+)"', page.text)
        assert drawn == marked, name


def test_as_of_is_typed_as_a_person_types_it_and_a_bad_one_is_the_typed_error(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    key = tenant.key()
    day = (made.dose[0].recorded_at + timedelta(days=1)).replace(microsecond=0)
    base = f"/ui/evidence/item?id={quote(DOSE, safe='')}"
    # What a datetime-local field sends (no zone: UTC, as every page shows times), a space, a zone.
    for typed in (
        day.strftime("%Y-%m-%dT%H:%M:%S"),
        day.strftime("%Y-%m-%d %H:%M"),
        day.astimezone().isoformat(),
    ):
        page = tenant.get(f"{base}&as_of={quote(typed)}", key)
        assert _in_force(page.text) == "1", typed
    assert (
        f'value="{day.strftime("%Y-%m-%dT%H:%M:%S")}"'
        in tenant.get(f"{base}&as_of={quote(str(day))}", key).text
    )
    assert _in_force(tenant.get(f"{base}&as_of=", key).text) == ""  # blank: now, nothing asked
    for bad in ("yesterday", "2026-13-01", "9999-12-31T23:59:59-14:00"):
        refused = tenant.get(f"{base}&as_of={quote(bad)}", key)
        assert refused.status_code == 422, bad
        assert 'id="error-code">invalid_input<' in refused.text and "as_of" in refused.text


def test_the_slider_steps_through_the_moments_the_record_changed(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    page = tenant.get(_item(DOSE, made.dose[1].recorded_at), tenant.key()).text
    slider = re.search(r'<input type="range" id="as-of-slider"[^>]*>', page, re.S)
    assert slider is not None
    values = re.search(r'data-values="([^"]*)"', slider.group(0))
    assert values is not None
    points = [datetime.fromisoformat(v) for v in _json_list(html.unescape(values.group(1)))]
    times = {t for v in made.dose for t in (v.recorded_at, v.ended_at, v.valid_from, v.valid_until) if t}
    assert points == sorted(times)
    position = re.search(r'value="(\d+)"', slider.group(0))
    assert position is not None and points[int(position.group(1))] == made.dose[1].recorded_at
    assert 'name="as_of" id="slider-as-of"' in page and 'data-sets="slider-as-of"' in slider.group(0)


def test_a_version_opens_as_its_exact_original_and_downloads_byte_for_byte(
    tenant: Tenant, wall_clock: ManualWallClock
) -> None:
    made = clinic(tenant, wall_clock)
    key = tenant.key()
    page = tenant.get(f"/ui/evidence/version?id={quote(DOSE, safe='')}&version=1", key)
    assert page.status_code == 200
    shown = page.text.split('id="original">')[1].split("</pre>")[0]
    assert html.unescape(shown) == CHINESE_BODY  # escaped once, never interpreted
    assert made.dose[0].content_sha256 == hashlib.sha256(CHINESE_BODY.encode()).hexdigest()
    assert made.dose[0].content_sha256 in page.text and "p. 12" in page.text
    assert f'href="/ui/evidence/item?id={quote(DOSE, safe="")}"' in page.text
    download = tenant.get(f"/ui/evidence/version/original?id={quote(DOSE, safe='')}&version=1", key)
    assert download.content == CHINESE_BODY.encode()
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment")
    assert download.headers["x-content-sha256"] == made.dose[0].content_sha256
    blob = bytes(range(256))
    tenant.mnemo.ingest(
        tenant.principal(),
        [EvidenceInput(blob, "scanner", evidence_id="scan/1", media_type="application/octet-stream")],
    )
    binary = tenant.get("/ui/evidence/version?id=scan%2F1&version=1", key).text
    assert 'id="binary"' in binary and 'id="original"' not in binary
    assert tenant.get("/ui/evidence/version/original?id=scan%2F1&version=1", key).content == blob


def test_ids_with_reserved_characters_round_trip_and_others_are_the_typed_error(tenant: Tenant) -> None:
    odd = ["a/b#c.d", "x:y@z/..#", "kb.v1/2#3", "e/../f#g"]
    tenant.mnemo.ingest(tenant.principal(), [EvidenceInput(f"body of {i}", "s", evidence_id=i) for i in odd])
    key = tenant.key()
    listing = tenant.get("/ui/evidence", key).text
    for link in re.findall(r'class="evidence-link" href="([^"]+)"', listing):
        page = tenant.get(html.unescape(link), key)
        assert page.status_code == 200, link
        shown = re.search(r'id="evidence-id">([^<]*)<', page.text)
        assert shown is not None and html.unescape(shown.group(1)) in odd
        version = re.search(r'class="version-link" href="([^"]+)"', page.text)
        assert version is not None
        opened = tenant.get(html.unescape(version.group(1)), key).text
        assert f"body of {html.unescape(shown.group(1))}" in html.unescape(opened)
    # The archive's ids take letters, digits and . _ : / @ # -: a space or Chinese is no id at
    # all, refused as invalid input (422), never looked up.
    for never in ("a b", "中文", "kb/中文#1"):
        refused = tenant.get(f"/ui/evidence/item?id={quote(never, safe='')}", key)
        assert refused.status_code == 422 and 'id="error-code">invalid_input<' in refused.text


def test_a_person_steps_through_a_record_s_versions_in_time(
    tenant: Tenant, wall_clock: ManualWallClock, browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    made = clinic(tenant, wall_clock)
    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Evidence")
    click_through(browser, By.LINK_TEXT, DOSE)
    assert browser.find_element(By.ID, "evidence-id").text == DOSE
    # Type a moment on the first version's first day, as a person types into the field (en-US
    # Chromium: month, day, year, then the time) and send it.
    day = made.dose[0].recorded_at + timedelta(days=1)
    field = browser.find_element(By.ID, "as-of")
    field.send_keys(day.strftime("%m%d%Y") + Keys.TAB + day.strftime("%I%M%S%p"))
    # Chromium drops the seconds of a value when they are 0: compare the moments, not the text.
    typed = datetime.fromisoformat(field.get_attribute("value") or "")
    assert typed == day.replace(microsecond=0, tzinfo=None)
    click_through(browser, By.ID, "as-of-submit")
    marker = browser.find_element(By.ID, "in-force")
    assert marker.get_attribute("data-version") == "1"
    assert "in-force" in (browser.find_element(By.ID, "bar-v1").get_attribute("class") or "")
    # Then move the slider to the moment the second version was recorded: the page follows.
    slider = browser.find_element(By.ID, "as-of-slider")
    points = [datetime.fromisoformat(v) for v in _json_list(slider.get_attribute("data-values"))]
    change_through(browser, slider, points.index(made.dose[1].recorded_at))
    assert browser.find_element(By.ID, "in-force").get_attribute("data-version") == "2"
    assert "in-force" in (browser.find_element(By.ID, "bar-v2").get_attribute("class") or "")
    assert "in-force" not in (browser.find_element(By.ID, "bar-v1").get_attribute("class") or "")
    assert len(browser.find_elements(By.ID, "as-of-line")) == 1  # the moment, drawn on the axis
    # And past the retraction: no version answers.
    change_through(browser, browser.find_element(By.ID, "as-of-slider"), len(points) - 1)
    assert browser.find_element(By.ID, "in-force").get_attribute("data-version") == ""
    change_through(
        browser, browser.find_element(By.ID, "as-of-slider"), points.index(made.dose[2].recorded_at)
    )
    assert browser.find_element(By.ID, "in-force").get_attribute("data-version") == "3"
    screenshot(browser, SCREENSHOTS, "evidence-versions")
    click_through(browser, By.CSS_SELECTOR, "#v1 .version-link")
    assert browser.find_element(By.ID, "original").text == CHINESE_BODY


def _json_list(value: str | None) -> list[str]:
    assert value is not None
    found = json.loads(value)
    assert isinstance(found, list)
    return [str(v) for v in found]
