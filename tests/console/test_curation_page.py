"""The curation report page: per family, the arms as the report's markdown table has them and a
cost-against-loss chart drawn on the server as SVG, the targets, the safety gate and prompt tokens
per turn of one trace; the page that says how to make a report when there is none, and a clear
error page for a file that is not one; then in a real browser.

The report is tests/console/fixtures/context-report.json, written by `mnemo-sea eval context
--json` on four shipped traces (fixtures/README.md says how; the run takes minutes)."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_helpers import SCREENSHOTS, Console, Tenant, click_through, screenshot, sign_in
from fastapi.testclient import TestClient

from mnemo_sea.console.app import console_app

FIXTURE = Path(__file__).parent / "fixtures" / "context-report.json"
REPORT: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
CODE = re.compile(r'id="error-code">([^<]+)<')


@pytest.fixture
def report(report_file: Path) -> Iterator[dict[str, Any]]:
    """The fixture report where the module's console reads it; gone again after the test."""
    report_file.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    yield REPORT
    report_file.unlink(missing_ok=True)


def _rows(page: str, table_id: str) -> dict[str, list[str]]:
    """A report table's cells by arm, as text."""
    table = page.split(f'id="{table_id}"')[1].split("</table>", maxsplit=1)[0]
    out = {}
    for arm, row in re.findall(r'<tr[^>]*data-arm="([^"]+)">(.*?)</tr>', table, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        out[html.unescape(arm)] = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]
    return out


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{(value - 1) * 100:+.1f}%"


def test_each_family_has_its_arms_table_with_the_reports_figures(
    tenant: Tenant, report: dict[str, Any]
) -> None:
    page = tenant.get("/ui/curation", tenant.key())
    assert page.status_code == 200
    scopes = [("all", report["arms"]), *sorted(report["families"].items())]
    for key, arms in scopes:
        rows = _rows(page.text, f"arms-{key}")
        assert list(rows) == [a for a in report["arm_order"] if a in arms]  # the report's order
        for arm, cells in rows.items():
            a = arms[arm]
            assert cells[0] == arm
            assert cells[1:8] == [
                f"{a['final_prompt_tokens']:,}",
                _ratio(a["vs_full"]["final_prompt_tokens"]),
                f"{a['cumulative_input_tokens']:,}",
                _ratio(a["vs_full"]["cumulative_input_tokens"]),
                f"{a['requests']:,}",
                _ratio(a["vs_full"]["requests"]),
                f"{a['archive_calls']} / {a['recover_calls'] + a['recalled']} / {a['rereads']}",
            ]
            assert cells[8] == f"{_pct(a['missing_rate'])} ({a['needs_missing']}/{a['needs']})"
            assert cells[9] == f"{_pct(a['citation_precision'])} ({a['citations_correct']}/{a['citations']})"
            assert cells[10:] == [
                str(a[k])
                for k in (
                    "protected_violations",
                    "stale_unwarned",
                    "injection_leaks",
                    "unknown_definite",
                    "superseded_cited",
                )
            ]
    assert f"{report['set']}</b> ({len(report['traces'])} traces" in page.text
    verdict = "met" if report["targets"]["met"] else "not met"
    assert f'id="targets-verdict">{verdict}<' in page.text
    assert all(c["reason"] in html.unescape(page.text) for c in report["gate"]["checks"])


def test_the_charts_are_svg_drawn_on_the_server(tenant: Tenant, report: dict[str, Any]) -> None:
    page = tenant.get("/ui/curation", tenant.key()).text
    assert "<script" not in page.split("</head>")[1]  # nothing drawn in the browser
    for key, arms in [("all", report["arms"]), *sorted(report["families"].items())]:
        svg = page.split(f'<svg class="chart" id="tradeoff-{key}"')[1].split("</svg>")[0]
        drawn = re.findall(r'<g class="series" data-arm="([^"]+)">', svg)
        # One point per arm but full history, where there is a cost to compare and a need to miss.
        expected = [
            a
            for a in report["arm_order"]
            if a != "full"
            and a in arms
            and arms[a]["vs_full"]["cumulative_input_tokens"] is not None
            and arms[a]["missing_rate"] is not None
        ]
        assert [html.unescape(a) for a in drawn] == expected and expected
        point = html.unescape(svg.split(f'data-arm="{expected[0]}"')[1].split("</title>")[0])
        a = arms[expected[0]]
        assert f"{100 * a['vs_full']['cumulative_input_tokens']:.1f}% of full history's input" in point
        assert f"{100 * a['missing_rate']:.1f}% of key evidence missing" in point
    # Prompt tokens per turn: the first F1 trace if any, else the first; another on request.
    first = sorted(report["traces"])[0]
    per_turn = page.split('id="per-turn"')[1].split("</svg>")[0]
    assert f"Prompt tokens per turn: {first}" in per_turn
    tokens = report["traces"][first]["arms"]["full"]["prompt_tokens"]
    assert per_turn.count("full, turn ") == len(tokens)
    assert f"full, turn {len(tokens)}: {tokens[-1]:,} prompt tokens" in per_turn
    other = sorted(report["traces"])[-1]
    assert f"Prompt tokens per turn: {other}" in tenant.get(f"/ui/curation?trace={other}", tenant.key()).text
    unknown = tenant.get("/ui/curation?trace=nope", tenant.key())
    assert (unknown.status_code, CODE.findall(unknown.text)) == (422, ["invalid_input"])


def test_without_a_report_the_page_says_how_to_make_one(tenant: Tenant, console: Console) -> None:
    key = tenant.key()
    missing = tenant.get("/ui/curation", key)  # configured, but nothing written there yet
    assert missing.status_code == 200 and "there is no report at report.json yet" in missing.text
    assert "mnemo-sea eval context --json &gt; report.json" in missing.text
    assert "mnemo-sea ui --report report.json" in missing.text
    with TestClient(console_app(console.mnemo)) as alone:  # none configured at all
        page = alone.get("/curation", headers={"X-API-Key": key})
    assert page.status_code == 200 and "no report is configured" in page.text


def test_a_folder_shows_its_newest_report(tenant: Tenant, console: Console, tmp_path: Path) -> None:
    older = {**REPORT, "set": "older-set"}
    (tmp_path / "a.json").write_text(json.dumps(REPORT), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps(older), encoding="utf-8")
    os.utime(tmp_path / "a.json", (2_000_000_000, 2_000_000_000))
    os.utime(tmp_path / "b.json", (1_000_000_000, 1_000_000_000))
    (tmp_path / "notes.txt").write_text("not a report", encoding="utf-8")
    with TestClient(console_app(console.mnemo, report=tmp_path)) as app:
        page = app.get("/curation", headers={"X-API-Key": tenant.key()}).text
    assert "<code>a.json</code>" in page and f"{REPORT['set']}</b>" in page and "older-set" not in page


def test_a_report_rewritten_is_read_again(tenant: Tenant, console: Console, tmp_path: Path) -> None:
    """The page keeps a report it read while the file stays the same, and reads a new version."""
    path = tmp_path / "report.json"
    path.write_text(json.dumps({**REPORT, "set": "first-set"}), encoding="utf-8")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    with TestClient(console_app(console.mnemo, report=path)) as app:
        key = {"X-API-Key": tenant.key()}
        assert "first-set</b>" in app.get("/curation", headers=key).text
        path.write_text(json.dumps({**REPORT, "set": "second-set"}), encoding="utf-8")
        os.utime(path, (1_000_000_100, 1_000_000_100))  # a later version of the same size
        assert "second-set</b>" in app.get("/curation", headers=key).text


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{", "it is not JSON"),
        ('{"format": "mnemo-sea/other/1"}', "its format is 'mnemo-sea/other/1'"),
        (json.dumps({**REPORT, "arms": {"full": {"requests": "many"}}}), "arms.full"),
        ("[]", "it is not a JSON object"),
    ],
)
def test_a_file_that_is_no_report_is_a_clear_error_page(
    tenant: Tenant, report_file: Path, content: str, says: str
) -> None:
    report_file.write_text(content, encoding="utf-8")
    try:
        page = tenant.get("/ui/curation", tenant.key())
    finally:
        report_file.unlink()
    assert (page.status_code, CODE.findall(page.text)) == (500, ["report_unreadable"])
    detail = html.unescape(page.text.split('id="error-detail">')[1].split("</p>")[0])
    assert detail.startswith("the curation report report.json cannot be shown: ") and says in detail
    assert "Traceback" not in page.text


def test_a_person_reads_the_curation_report(
    tenant: Tenant, report: dict[str, Any], browser: Any, live_url: str
) -> None:
    from selenium.webdriver.common.by import By

    sign_in(browser, live_url, tenant.key())
    click_through(browser, By.LINK_TEXT, "Curation report")
    charts = browser.find_elements(By.CSS_SELECTOR, "#tradeoff svg.chart")
    assert len(charts) == 1 + len(report["families"])
    assert all(c.size["width"] > 200 and c.size["height"] > 150 for c in charts)  # drawn, not empty
    assert browser.find_element(By.ID, "arms-all").is_displayed()
    screenshot(browser, SCREENSHOTS, "curation-report")
