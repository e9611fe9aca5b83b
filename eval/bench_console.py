"""Benchmark: the console's pages on a 10,000-result session, as a browser paints them (issue 29).

In a temporary folder, the embedded default (`Mnemo.open`: SQLite archive + Qdrant Edge index;
the hashing embedder, since no page embeds anything: archived notes and originals are indexed
while the session is built, never while a page is shown) holds one tenant with one session of
`results` tool results of realistic mixed sizes: outputs of 200 B to 20 KB (log-uniform, so
most are a few KB), about a fifth archived with notes, one in a hundred a recovered excerpt of
an archived original. They are written through the facade as an agent writes them, in rounds:
`record` one by one, `archive_results` of the round's older results in one batch, `recover` of a
few lines of some of them; then `sync()` indexes what the trail has not yet (so nothing is
indexed behind the pages while they are timed). How long each step took is reported.

The console is then served as `mnemo-sea ui` serves it (`standalone_app` with a LaunchLogin,
uvicorn on a loopback port, in this process) and a headless Chromium signs in by the link `ui`
prints. Each page is loaded `loads` times, the pages interleaved (one round visits each once, as
a person moves between them), and the browser's own Performance API gives, per load:

- `first_contentful_paint`: `performance.getEntriesByName('first-contentful-paint')[0].startTime`,
  from the navigation's start to the first text painted (the page's HTML and its stylesheet);
- `server`: navigation timing's responseStart - requestStart, the request until the first byte
  (the console renders the whole page before it answers, so this is the server's time);
- `dom_content_loaded`: domContentLoadedEventEnd.

The pages: the sessions list, the session's first and last timeline pages (50 results each,
every live one read, hash-verified and its tokens counted), a result page of a 20 KB original,
the context page (the assembler over the whole session), and as the same-run baseline the
sign-in page, which reads nothing from the archive: each page's `ratio_to_baseline` is its
first-paint p50 over the baseline's, so a loaded machine shows in the baseline, not only in
the figures. Target: first-paint p50 <= 300 ms for the list and timeline pages (`meets`); every
page must also have loaded (status 200 and the element it is read for).
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.console.app import standalone_app
from mnemo_sea.console.pages import PAGE_SIZE
from mnemo_sea.console.viewer import LaunchLogin
from mnemo_sea.eval.browser import headless_chromium, served
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder
from mnemo_sea.system.wiring.settings import MnemoSettings

TARGET_MS = 300.0
DEFAULT_RESULTS = 10_000
DEFAULT_LOADS = 10
TENANT = "bench-console"
SESSION = "agent-run-1"
# The principal `mnemo-sea ui` acts as by default: an agent of clearance internal.
VIEWER = Principal(TENANT, "bench-agent", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
SMALLEST, LARGEST = 200, 20_000  # bytes of a tool output
BIG = 20_000  # the original the result page shows
ROUND = 500  # results recorded between two archive batches
ARCHIVED_SHARE = 0.2
RECOVERED_PER = 100  # one recovered excerpt per this many results
# A bound on a hang, never a measure: a page that takes longer fails the run.
PAGE_WAIT_SECONDS = 120
SEED = 29

# What the browser reports of the page it shows (null until its first paint is known).
_TIMING_JS = """
const paint = performance.getEntriesByName('first-contentful-paint')[0];
const nav = performance.getEntriesByType('navigation')[0];
if (!paint || !nav || nav.loadEventEnd === 0) { return null; }
return {
  fcp: paint.startTime,
  request_start: nav.requestStart,
  response_start: nav.responseStart,
  dcl: nav.domContentLoadedEventEnd,
  status: nav.responseStatus === undefined ? null : nav.responseStatus,
  html_bytes: nav.decodedBodySize,
  found: document.querySelectorAll(arguments[0]).length,
  url: location.href,
};
"""


@dataclass(frozen=True)
class Page:
    """A page to time: its path under the served root, and what it must show to count as loaded
    (a CSS selector and at least how many elements match it)."""

    name: str
    path: str
    selector: str
    at_least: int = 1
    targeted: bool = False


# ---- the session ---------------------------------------------------------------------------

_WORDS = (
    *("carrier", "delivery", "timed", "out", "order", "customer", "refund", "warehouse", "stock"),
    *("level", "retry", "queue", "shipment", "invoice", "tracking", "label", "parcel", "courier"),
    *("region", "latency", "error", "warning"),
)


def _line(rng: random.Random, kind: int, i: int, n: int) -> str:
    if kind == 0:  # a service log
        status = rng.choice((200, 200, 200, 404, 500, 503))
        return (
            f"2026-12-06T10:{i % 60:02d}:{n % 60:02d}.{rng.randrange(1000):03d}Z INFO "
            f"worker-{rng.randrange(8)} req={rng.randrange(10**8):08x} {rng.choice(_WORDS)} "
            f"took {rng.randrange(900)} ms status={status}"
        )
    if kind == 1:  # grep over a source tree
        return (
            f"src/{rng.choice(_WORDS)}/module_{rng.randrange(200)}.py:{rng.randrange(1, 900)}:"
            f"    value = compute(item_{rng.randrange(10**5)}, retries={rng.randrange(5)})"
        )
    if kind == 2:  # rows of a JSON API answer
        return json.dumps(
            {
                "id": rng.randrange(10**9),
                "order": f"O-{rng.randrange(10**5)}",
                "status": rng.choice(("paid", "shipped", "late", "refunded")),
                "total": rng.randrange(10**5) / 100,
                "region": rng.choice(("eu-west", "us-east", "ap-south")),
            }
        )
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(6, 16)))  # a page's text


def tool_output(rng: random.Random, i: int, size: int) -> tuple[str, dict[str, Any], str]:
    """A tool's name, arguments and output of about `size` bytes (never more), of one of four
    kinds: a log, grep hits, a JSON answer, a fetched page's text."""
    kind = i % 4
    tool, arguments = (
        ("logs.query", {"service": rng.choice(_WORDS), "since": f"-{rng.randrange(1, 60)}m"}),
        ("grep", {"pattern": rng.choice(_WORDS), "path": "src/"}),
        ("orders.search", {"status": rng.choice(("late", "paid")), "page": i}),
        ("web.fetch", {"url": f"https://docs.example.com/{rng.choice(_WORDS)}/{i}"}),
    )[kind]
    lines: list[str] = []
    length = 0
    while length < size:
        line = _line(rng, kind, i, len(lines))
        lines.append(line)
        length += len(line) + 1
    return tool, arguments, "\n".join(lines)[:size]


def _note(rng: random.Random, tool: str) -> str:
    return (
        f"{tool}: nothing about the {rng.choice(_WORDS)} {rng.choice(_WORDS)} here; "
        f"{rng.randrange(2, 40)} lines mention {rng.choice(_WORDS)}"
    )


def build_session(mnemo: Mnemo, results: int, say: Callable[[str], None]) -> dict[str, Any]:
    """The session of `results` results (see the module docstring); what it holds and how long
    each step took. The result recorded halfway is a live 20 KB original (the result page's)."""
    rng = random.Random(SEED)
    recoveries = results // RECOVERED_PER
    to_record = results - recoveries
    big_at = to_record // 2
    seconds = {"record": 0.0, "archive": 0.0, "recover": 0.0, "sync": 0.0}
    recorded: list[tuple[str, str]] = []  # (result id, tool) in order
    lines: dict[str, int] = {}  # result id -> lines of its output
    archived: list[str] = []
    recovered = 0
    total_bytes = 0
    big_id = ""
    started = time.perf_counter()
    say(f"recording {results} results in rounds of {ROUND}")
    while len(recorded) < to_record:
        start = len(recorded)
        t = time.perf_counter()
        for i in range(start, min(start + ROUND, to_record)):
            size = BIG if i == big_at else int(SMALLEST * (LARGEST / SMALLEST) ** rng.random())
            tool, arguments, text = tool_output(rng, i, size)
            made = mnemo.record(VIEWER, SESSION, tool_name=tool, arguments=arguments, content=text)
            recorded.append((made.result_id, tool))
            lines[made.result_id] = text.count("\n") + 1
            total_bytes += made.size
            if i == big_at:
                big_id = made.result_id
        seconds["record"] += time.perf_counter() - t
        # Archive a share of this round's results, never the big one nor the round's ten newest
        # (an agent sets aside what it has read, keeping the latest in view).
        picked = [
            r
            for r in recorded[start : len(recorded) - 10]
            if r[0] != big_id and rng.random() < ARCHIVED_SHARE
        ]
        if picked:
            t = time.perf_counter()
            mnemo.archive_results(VIEWER, SESSION, [(rid, _note(rng, tool)) for rid, tool in picked])
            seconds["archive"] += time.perf_counter() - t
            archived.extend(rid for rid, _ in picked)
        t = time.perf_counter()
        due = min(recoveries * len(recorded) // to_record, recoveries) - recovered
        for rid in rng.sample(archived, min(due, len(archived))):
            first = rng.randrange(1, lines[rid] + 1)
            last = min(lines[rid], first + rng.randrange(0, 8))
            mnemo.recover(VIEWER, SESSION, rid, lines=(first, last))
            recovered += 1
        seconds["recover"] += time.perf_counter() - t
    t = time.perf_counter()
    while recovered < recoveries and archived:  # a session too short for a round's share
        mnemo.recover(VIEWER, SESSION, rng.choice(archived), lines=(1, 2))
        recovered += 1
    seconds["recover"] += time.perf_counter() - t
    say("indexing what the trail has not yet (sync)")
    t = time.perf_counter()
    mnemo.sync()
    seconds["sync"] = time.perf_counter() - t
    info = mnemo.session_info(VIEWER, SESSION)
    return {
        "session": {
            "results": info.results,
            "live": info.live,
            "archived": info.archived,
            "recovered_excerpts": recovered,
            "original_bytes": total_bytes,
        },
        "big_result": big_id,
        "setup_seconds": {k: round(v, 2) for k, v in seconds.items()}
        | {"total": round(time.perf_counter() - started, 2)},
    }


# ---- the browser ---------------------------------------------------------------------------


def pages(results: int, big_result: str) -> list[Page]:
    session = f"/ui/sessions/{quote(SESSION, safe='')}"
    last = max(results - 1, 0) // PAGE_SIZE * PAGE_SIZE
    on_last = results - last
    return [
        Page("baseline: sign-in page", "/ui/login", "#key"),
        Page("sessions list", "/ui/sessions", "#sessions a", targeted=True),
        Page("timeline, first page", session, "#timeline a.result-link", min(PAGE_SIZE, results), True),
        Page(
            f"timeline, last page (offset {last})",
            f"{session}?offset={last}",
            "#timeline a.result-link",
            on_last,
            True,
        ),
        Page(f"result {big_result} (20 KB original)", f"{session}/results/{big_result}", "#original"),
        Page("context now", f"{session}/context", "#context-totals"),
    ]


def _load(driver: Any, url: str, page: Page) -> dict[str, Any]:
    from selenium.webdriver.support.ui import WebDriverWait

    # From an empty page, so that leaving the previous page (the context page holds megabytes)
    # is not counted in this one's navigation.
    driver.get("about:blank")
    driver.get(url)
    seen: dict[str, Any] = WebDriverWait(driver, PAGE_WAIT_SECONDS, poll_frequency=0.02).until(
        lambda d: d.execute_script(_TIMING_JS, page.selector)
    )
    return seen


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 1), "max": round(max(values), 1)}


def measure(base_url: str, token: str, to_time: list[Page], loads: int) -> list[dict[str, Any]]:
    """Each page `loads` times, interleaved, in one headless Chromium signed in by `token`."""
    seen: dict[str, list[dict[str, Any]]] = {p.name: [] for p in to_time}
    with headless_chromium() as driver:
        driver.get(f"{base_url}/ui/login?token={token}")  # as the link `mnemo-sea ui` prints
        for _ in range(loads):
            for page in to_time:
                seen[page.name].append(_load(driver, base_url + page.path, page))
    rows = []
    for page in to_time:
        got = seen[page.name]
        loaded = all(g["status"] in (200, None) and g["found"] >= page.at_least for g in got)
        loaded = loaded and all(g["url"] == base_url + page.path for g in got)  # no redirect to sign-in
        fcp = _ms([g["fcp"] for g in got])
        rows.append(
            {
                "page": page.name,
                "path": page.path,
                "first_paint_p50_ms": fcp["p50"],
                "first_paint_max_ms": fcp["max"],
                "first_paint_first_load_ms": round(got[0]["fcp"], 1),
                "server_p50_ms": _ms([g["response_start"] - g["request_start"] for g in got])["p50"],
                "server_max_ms": _ms([g["response_start"] - g["request_start"] for g in got])["max"],
                "dom_content_loaded_p50_ms": _ms([g["dcl"] for g in got])["p50"],
                "html_kb": round(got[-1]["html_bytes"] / 1024, 1),
                "loads": len(got),
                "loaded": loaded,
                "targeted": page.targeted,
            }
        )
    return rows


def run(
    results: int = DEFAULT_RESULTS,
    *,
    loads: int = DEFAULT_LOADS,
    folder: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-console-", dir=folder) as tmp:
        data = Path(tmp) / "data"
        mnemo = Mnemo.open(data, embedder=HashingEmbedder())
        try:
            built = build_session(mnemo, results, say)
            launch = LaunchLogin(VIEWER)
            settings = MnemoSettings(data_dir=data, database_url=None)
            app = standalone_app(mnemo, settings, launch=launch)
            to_time = pages(built["session"]["results"], built["big_result"])
            say(f"loading {len(to_time)} pages {loads} times each in headless Chromium")
            with served(app) as url:
                rows = measure(url, launch.token, to_time, loads)
        finally:
            mnemo.close()
    baseline = rows[0]["first_paint_p50_ms"]
    for row in rows:
        row["ratio_to_baseline"] = round(row["first_paint_p50_ms"] / baseline, 2) if baseline else None
        row["meets"] = row["first_paint_p50_ms"] <= TARGET_MS if row["targeted"] else None
    return {
        "benchmark": "console",
        "target": {"first_paint_p50_ms_max": TARGET_MS, "pages": [r["page"] for r in rows if r["targeted"]]},
        **built,
        "loads": loads,
        "pages": rows,
        "baseline_first_paint_p50_ms": baseline,
        "all_loaded": all(r["loaded"] for r in rows),
        "meets": all(r["meets"] for r in rows if r["targeted"]),
        "ok": all(r["loaded"] for r in rows) and all(r["meets"] for r in rows if r["targeted"]),
    }
