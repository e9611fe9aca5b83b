"""`Mnemo.curate` and `Mnemo.recall`: a session curated and recalled without a script.

The tests look at the state: which rows are archived (the raw tables), what the live view
holds, what was appended; never only at what the call answered.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlalchemy import select

from mnemo_sea.archive import ArchiveConflict, Forbidden, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.curation.policy import CurationPolicy, LiveResult, plan
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
READER = Principal("clinic-a", "agent-1", frozenset({Role.READER}), Sensitivity.CONFIDENTIAL)


def states(mnemo: Mnemo, session: str) -> dict[str, str]:
    with mnemo.archive.store.read() as conn:
        rows = conn.execute(
            select(t.tool_results.c.result_no, t.tool_results.c.state).where(
                t.tool_results.c.session_id == session
            )
        ).all()
    return {f"r{n}": state for n, state in rows}


def test_the_policy_sets_aside_large_results_behind_the_newest_and_fits_the_budget() -> None:
    live = [
        LiveResult("r0", 200, False),  # small: set aside for the budget only after the others
        LiveResult("r1", 900, False),
        LiveResult("r2", 5_000, False),  # large
        LiveResult("r3", 700, True),  # protected: never
        LiveResult("r4", 800, False),
        LiveResult("r5", 3_000, False),  # large, but among the newest two
        LiveResult("r6", 100, False),
    ]
    assert [d.result_id for d in plan(live, CurationPolicy(budget_tokens=100_000)).archive] == ["r2"]
    # The budget counts what may be set aside (r0, r1, r4: 1,900): the newest and the protected
    # stay whatever they weigh, so a large new result never pushes out old small ones.
    assert [d.result_id for d in plan(live, CurationPolicy(budget_tokens=4_000)).archive] == ["r2"]
    tight = plan(live, CurationPolicy(budget_tokens=1_000))
    # Large first; then the oldest worth archiving until the rest fits in half (1,900 -> 1,000 -> 200).
    assert [(d.result_id, d.reason) for d in tight.archive] == [
        ("r1", "budget"),
        ("r2", "large"),
        ("r4", "budget"),
    ]
    assert tight.live_tokens_before == 10_700 and tight.live_tokens_after == 4_000
    tighter = plan(live, CurationPolicy(budget_tokens=300))  # the small one too, when needed
    assert [d.result_id for d in tighter.archive] == ["r0", "r1", "r2", "r4"]
    assert plan(live[:2], CurationPolicy(keep_recent=2)).archive == ()
    for bad in ({"budget_tokens": 0}, {"keep_recent": -1}, {"large_result_tokens": True}):
        with pytest.raises(InvalidInput):
            CurationPolicy(**bad)


def test_a_copy_not_yet_cited_stays_through_the_size_trigger_and_goes_last_for_the_budget() -> None:
    live = [
        LiveResult("r0", 1_900, False),
        LiveResult("r1", 3_000, False, awaiting_citation=True),  # a whole recovery, not yet cited
        LiveResult("r2", 1_900, False),
        LiveResult("r3", 100, False),
        LiveResult("r4", 100, False),
    ]
    assert plan(live, CurationPolicy(budget_tokens=100_000)).archive == ()  # large, yet it stays
    # Over the budget (6,800 may be set aside): every other result first (down to 3,000, within
    # half of 6,400), the copy only when they were not enough.
    assert [d.result_id for d in plan(live, CurationPolicy(budget_tokens=6_400)).archive] == ["r0", "r2"]
    assert [d.result_id for d in plan(live, CurationPolicy(budget_tokens=2_000)).archive] == [
        "r0",
        "r1",
        "r2",
    ]
    cited = [dataclasses.replace(r, awaiting_citation=False) for r in live]
    assert [d.reason for d in plan(cited, CurationPolicy(budget_tokens=100_000)).archive] == ["large"]


def test_a_recovered_copy_stays_until_the_task_state_cites_it_then_goes_back(mnemo: Mnemo) -> None:
    log = "\n".join(
        f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}Z INFO ledger batch {n} balanced" for n in range(400)
    )
    source = mnemo.record(AGENT, "s10", "ledger.log", log).result_id
    mnemo.record(AGENT, "s10", "notes", "a")
    mnemo.archive_results(AGENT, "s10", [(source, "ledger log")])
    copy = mnemo.recover(AGENT, "s10", source).appended.result_id  # whole: about 9,000 tokens
    for n in range(3):
        mnemo.record(AGENT, "s10", "notes", f"next {n}")
    first = mnemo.curate(AGENT, "s10")
    assert copy not in [a.result_id for a in first.archived]
    assert states(mnemo, "s10")[copy] == "live"
    # The answer's fact rests on the original: the copy has served and goes back.
    fact = {"fact": "batch 317 balanced", "evidence_id": f"result:s10/{source}"}
    mnemo.update_task_state(AGENT, "s10", goal="reconcile the ledger", confirmed=[fact])
    second = mnemo.curate(AGENT, "s10")
    assert [(a.result_id, a.reason) for a in second.archived] == [(copy, "large")]
    assert states(mnemo, "s10")[copy] == "archived"
    assert mnemo.recover(AGENT, "s10", source).content == log.encode()  # nothing lost


PYTEST = "\n".join(
    [
        "platform linux -- Python 3.11.7",
        "rootdir: /app",
        *[f"tests/test_{n}.py PASSED" for n in range(300)],
        "FAILED tests/test_io.py::test_23 - AssertionError: p99 latency 412 ms > 250 ms",
        "=== 1 failed, 300 passed ===",
    ]
)


def session(mnemo: Mnemo, name: str = "s1") -> dict[str, Any]:
    ids = {}
    ids["run"] = mnemo.record(AGENT, name, "bash", PYTEST, arguments={"command": "pytest tests/"}).result_id
    ids["rx"] = mnemo.record(
        AGENT, name, "vet.rx", "处方依据：体重 31 kg，阿莫西林 12 mg/kg", policy_class="prescription_basis"
    ).result_id
    ids["stock"] = mnemo.record(
        AGENT,
        name,
        "pharmacy.stock",
        "阿莫西林 500mg 库存 3 盒\n下次到货 12 月 9 日",
        arguments={"sku": "AMX"},
    ).result_id
    ids["chat"] = mnemo.record(AGENT, name, "ask_owner", "owner says the dog is eating again").result_id
    ids["last"] = mnemo.record(AGENT, name, "notes", "plan: recheck ALT in two weeks").result_id
    return ids


def test_curate_archives_what_the_policy_picks_with_automatic_notes(mnemo: Mnemo) -> None:
    ids = session(mnemo)
    report = mnemo.curate(AGENT, "s1", budget_tokens=50_000, large_result_tokens=1_000)
    assert [a.result_id for a in report.archived] == [ids["run"]]
    (run,) = report.archived
    assert run.reason == "large" and run.tokens >= 1_000
    assert "1 failed, 300 passed" in run.note and "FAILED tests/test_io.py::test_23" in run.note
    assert report.receipt is not None and report.receipt.archived == (ids["run"],)
    assert report.live_tokens_after < report.live_tokens_before
    assert states(mnemo, "s1") == {
        ids["run"]: "archived",
        **{ids[k]: "live" for k in ("rx", "stock", "chat", "last")},
    }
    stub = mnemo.live_view(AGENT, "s1").items[0].rendered
    assert "note: test run" in stub and "FAILED tests/test_io.py::test_23" in stub

    again = mnemo.curate(AGENT, "s1", budget_tokens=50_000, large_result_tokens=1_000)
    assert again.archived == () and again.receipt is None  # nothing more is due

    # A budget far below the session: everything but the protected and the newest two.
    tight = mnemo.curate(AGENT, "s1", budget_tokens=10)
    assert [a.result_id for a in tight.archived] == [ids["stock"]]
    assert states(mnemo, "s1")[ids["rx"]] == "live"  # the prescription basis is never set aside


def test_recall_finds_the_line_in_an_archived_original_and_recovers_only_its_excerpt(mnemo: Mnemo) -> None:
    ids = session(mnemo)
    mnemo.curate(AGENT, "s1", budget_tokens=10)
    found = mnemo.recall(AGENT, "s1", "p99 latency of test_23", around=1)
    assert found.status == "recovered" and found.result_id == ids["run"]
    assert found.lines == (301, 303)  # three lines (around=1), the last the failure
    assert found.recovered is not None and found.recovered.appended.excerpt is not None
    text = found.recovered.content.decode()
    assert text.endswith("FAILED tests/test_io.py::test_23 - AssertionError: p99 latency 412 ms > 250 ms\n")
    assert text.count("\n") == 3  # not the 300-line run
    # Now it is in view: a second recall of the same need recovers nothing more.
    before = len(states(mnemo, "s1"))
    again = mnemo.recall(AGENT, "s1", "test_23 p99 latency")
    assert again.status == "in_view" and again.result_id == found.recovered.appended.result_id
    assert len(states(mnemo, "s1")) == before

    chinese = mnemo.recall(AGENT, "s1", "阿莫西林库存")
    assert chinese.status == "recovered" and chinese.result_id == ids["stock"]
    # A short original comes back whole: cutting it would save little.
    assert chinese.recovered is not None and chinese.recovered.appended.excerpt is None
    assert "库存 3 盒" in chinese.recovered.content.decode()


def test_recall_never_returns_a_guess(mnemo: Mnemo) -> None:
    ids = session(mnemo)
    mnemo.curate(AGENT, "s1", budget_tokens=10)
    before = states(mnemo, "s1")
    missing = mnemo.recall(AGENT, "s1", "refund approved for order O-9911")
    assert missing.status == "not_found" and missing.recovered is None and missing.result_id is None
    assert set(missing.checked) == set(before)  # every result was read, live and archived
    assert states(mnemo, "s1") == before  # nothing appended
    with pytest.raises(InvalidInput, match="no word to look for"):
        mnemo.recall(AGENT, "s1", "the of and")
    assert ids  # the session was built


def test_curate_and_recall_need_the_agent_role(mnemo: Mnemo) -> None:
    session(mnemo)
    with pytest.raises(Forbidden):
        mnemo.curate(READER, "s1")
    with pytest.raises(Forbidden):
        mnemo.recall(READER, "s1", "p99 latency")


def test_a_concurrent_archive_makes_curate_fail_whole(mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = session(mnemo)
    real = mnemo.archive.archive_results

    def archived_first(*args: Any, **kwargs: Any) -> Any:
        real(AGENT, "s1", [(ids["run"], "another caller's note")])  # another caller wins the race
        return real(*args, **kwargs)

    monkeypatch.setattr(mnemo.archive, "archive_results", archived_first)
    with pytest.raises(ArchiveConflict):
        mnemo.curate(AGENT, "s1", budget_tokens=10)
    monkeypatch.undo()
    assert [s for s in states(mnemo, "s1").values() if s == "archived"] == ["archived"]  # only the other's


# ---- found in review: the cases a first version got wrong ------------------------------------------


def test_recall_counts_lines_as_the_archive_does(mnemo: Mnemo) -> None:
    """A progress bar's `\\r` is not a line end for the archive: recall's lines are recover's."""
    bar = "\r".join(f"downloading {p}%" for p in range(0, 100, 5))
    text = "\n".join([*(bar for _ in range(400)), "checksum mismatch for model.bin (sha 9f3c)"])
    r = mnemo.record(AGENT, "s2", "fetch", text, arguments={"url": "https://x/model.bin"}).result_id
    mnemo.record(AGENT, "s2", "notes", "next: retry")
    mnemo.archive_results(AGENT, "s2", [(r, "download log")])
    found = mnemo.recall(AGENT, "s2", "checksum mismatch model.bin", around=0)
    assert found.status == "recovered" and found.lines == (401, 401)
    assert (
        found.recovered is not None
        and found.recovered.content == b"checksum mismatch for model.bin (sha 9f3c)"
    )


def test_a_need_in_an_excerpt_in_view_is_named_by_the_original_s_lines(mnemo: Mnemo) -> None:
    rows = "\n".join(f"row {n:05d} fine" for n in range(1, 3001)).replace(
        "row 02501 fine", "row 02501 ALT 112 high"
    )
    r = mnemo.record(AGENT, "s3", "export", rows, arguments={"table": "labs"}).result_id
    mnemo.archive_results(AGENT, "s3", [(r, "lab export")])
    copy = mnemo.recover(AGENT, "s3", r, lines=(2000, 2999)).appended
    found = mnemo.recall(AGENT, "s3", "ALT 112 high", around=0)
    assert found.status == "in_view" and found.result_id == copy.result_id and found.lines == (2501, 2501)
    # Archived again, the copy is not a candidate of its own: the original's line comes back.
    mnemo.archive_results(AGENT, "s3", [(copy.result_id, "rows 2000-2999")])
    again = mnemo.recall(AGENT, "s3", "ALT 112 high", around=0)
    assert again.status == "recovered" and again.result_id == r and again.lines == (2501, 2501)
    assert again.recovered is not None and again.recovered.content == b"row 02501 ALT 112 high\n"


def test_recall_never_recovers_a_result_that_lacks_the_id_the_need_is_about(mnemo: Mnemo) -> None:
    orders = "\n".join(f"order {n} billing service p99 latency {n % 500} ms" for n in range(7000, 7200))
    r = mnemo.record(AGENT, "s4", "orders", orders, arguments={"range": "7000-7199"}).result_id
    mnemo.record(AGENT, "s4", "notes", "next")
    mnemo.archive_results(AGENT, "s4", [(r, "orders 7000-7199")])
    found = mnemo.recall(AGENT, "s4", "billing service p99 latency for order 7731")
    assert found.status == "not_found" and found.recovered is None


def test_recall_prefers_the_result_whose_call_names_the_need_to_one_in_view_that_mentions_it(
    mnemo: Mnemo,
) -> None:
    # The order's record, archived, and a live retry that mentions the order: both hold the
    # need's words, but the record holds all of them and its call is about the order.
    record = "\n".join(
        ["{", '  "order_id": "O-1042",', '  "status": "shipped",', '  "shipped_at": "2026-11-05"', "}"]
    )
    r = mnemo.record(AGENT, "s6", "orders.get", record, arguments={"order_id": "O-1042"}).result_id
    mnemo.record(AGENT, "s6", "notes", "next")
    mnemo.archive_results(AGENT, "s6", [(r, "order record")])
    live = mnemo.record(
        AGENT,
        "s6",
        "logistics.track",
        "track O-1042: read timeout; status UNKNOWN",
        arguments={"order_id": "O-1042"},
    ).result_id
    found = mnemo.recall(AGENT, "s6", "order O-1042 shipped")
    assert found.status == "recovered" and found.result_id == r
    assert found.recovered is not None and b'"shipped_at": "2026-11-05"' in found.recovered.content
    assert states(mnemo, "s6")[live] == "live"
    # What only the live retry holds is answered in view: nothing appended.
    before = len(states(mnemo, "s6"))
    timeout = mnemo.recall(AGENT, "s6", "O-1042 read timeout")
    assert timeout.status == "in_view" and timeout.result_id == live
    assert len(states(mnemo, "s6")) == before


def test_a_word_no_result_holds_is_the_asker_s_own_and_not_needed(mnemo: Mnemo) -> None:
    orders = "\n".join(f'{{"order_id": "O-{n}", "status": "shipped"}}' for n in range(5000, 5020))
    r = mnemo.record(AGENT, "s7", "orders.recent", orders, arguments={"limit": 20}).result_id
    mnemo.record(AGENT, "s7", "kubectl.logs", "cart pod ok\nrequest handled", arguments={"pod": "cart-0"})
    mnemo.record(AGENT, "s7", "notes", "next")
    mnemo.archive_results(AGENT, "s7", [(r, "recent orders")])
    # "last" is in no result: the need is "shipped orders", which only orders.recent holds.
    found = mnemo.recall(AGENT, "s7", "last shipped orders")
    assert found.status == "recovered" and found.result_id == r
    assert found.score == pytest.approx(2 / 3)  # the share of the need as asked
    # Never a single word alone, and never without the id a need is about; nothing appended.
    before = states(mnemo, "s7")
    assert mnemo.recall(AGENT, "s7", "refunded orders yesterday").status == "not_found"
    assert mnemo.recall(AGENT, "s7", "the last 20 orders of O-9999").status == "not_found"
    assert states(mnemo, "s7") == before


def test_a_need_whose_words_the_session_mostly_lacks_is_not_found(mnemo: Mnemo) -> None:
    """One word the session lacks is the asker's; more say the need is about something it does
    not hold, even where its other words and its id match the only result (a review's case)."""
    record = '{"order_id": "O-1042", "status": "shipped", "carrier": "SF"}'
    r = mnemo.record(AGENT, "s8", "orders.get", record, arguments={"order_id": "O-1042"}).result_id
    mnemo.record(AGENT, "s8", "notes", "next")
    mnemo.archive_results(AGENT, "s8", [(r, "order record")])
    before = states(mnemo, "s8")
    for query in ("customer complaint about shipped order", "cancellation refund amount order O-1042"):
        assert mnemo.recall(AGENT, "s8", query).status == "not_found", query
    assert states(mnemo, "s8") == before  # nothing recovered
    assert mnemo.recall(AGENT, "s8", "carrier of order O-1042").status == "recovered"


def test_curate_survives_hostile_json_and_keeps_what_its_need_brought(mnemo: Mnemo) -> None:
    mnemo.record(AGENT, "s5", "api.get", "[" * 100_000 + "]" * 100_000, arguments={"id": "x-1"})
    r = mnemo.record(AGENT, "s5", "orders", "order O-77 shipped 2026-11-05\n" * 400, arguments={"o": "O-77"})
    mnemo.record(AGENT, "s5", "notes", "next")
    first = mnemo.curate(AGENT, "s5", large_result_tokens=500, keep_recent=0, idempotency_key="turn-1")
    assert r.result_id in [a.result_id for a in first.archived]  # no RecursionError from the JSON
    second = mnemo.curate(AGENT, "s5", keep_recent=0, need="O-77 shipped", around=0, idempotency_key="turn-2")
    assert second.recall is not None and second.recall.recovered is not None
    brought = second.recall.recovered.appended.result_id
    assert brought not in [a.result_id for a in second.archived]
    assert states(mnemo, "s5")[brought] == "live"
    retried = mnemo.curate(
        AGENT, "s5", keep_recent=0, need="O-77 shipped", around=0, idempotency_key="turn-2"
    )
    assert retried.recall is not None and retried.recall.status == "in_view"  # no key meets another request


@pytest.mark.parametrize("around", ["3", -1, True, 2.5, 10**6])
def test_recall_s_around_is_checked_before_anything_is_read(mnemo: Mnemo, around: Any) -> None:
    session(mnemo)
    with pytest.raises(InvalidInput) as e:
        mnemo.recall(AGENT, "s1", "p99 latency", around=around)
    assert e.value.field == "around"


def test_a_corrupt_original_is_passed_over_and_never_quoted(mnemo: Mnemo) -> None:
    """One original failing its hash does not break every recall of the session: the others are
    read, the corrupt one is never quoted, and its failure is in the audit trail."""
    log = "\n".join(f"2026-12-01T10:00:{n:02d}Z INFO request {n} served" for n in range(40))
    broken = mnemo.record(AGENT, "s9", "logs.search", log + "\nERROR ledger drift L-42").result_id
    mnemo.record(AGENT, "s9", "notes", "next")
    mnemo.archive_results(AGENT, "s9", [(broken, "search logs")])
    live = mnemo.record(AGENT, "s9", "orders.get", "order O-77 shipped 2026-11-05").result_id
    with mnemo.archive.store.write() as conn:
        sha = conn.execute(
            select(t.tool_results.c.blob_sha256).where(
                t.tool_results.c.session_id == "s9", t.tool_results.c.result_no == int(broken[1:])
            )
        ).scalar_one()
        conn.execute(
            t.blobs.update().where(t.blobs.c.sha256 == sha).values(content=b"ERROR ledger drift L-42")
        )
    before = states(mnemo, "s9")
    shipped = mnemo.recall(AGENT, "s9", "O-77 shipped")
    assert shipped.status == "in_view" and shipped.result_id == live
    drift = mnemo.recall(AGENT, "s9", "ledger drift L-42")
    assert drift.status == "not_found" and broken in drift.checked
    assert states(mnemo, "s9") == before  # nothing recovered
    with mnemo.archive.store.read() as conn:
        actions = conn.execute(select(t.audit_events.c.action)).scalars().all()
    assert "integrity_failure" in actions


def test_lines_far_apart_holding_a_need_alike_come_back_together_or_are_ambiguous(mnemo: Mnemo) -> None:
    """Never one window picked among equals: all of them when they fit in a page of the search
    (32 KiB), else `ambiguous`, with where they are and nothing appended."""

    def snapshot(count: int, lots: dict[int, str]) -> str:
        rows = [
            f'{{"sku": "AMX-{n}", "name": "amoxicillin 250mg", "on_hand": {n % 90}}}' for n in range(count)
        ]
        for at, lot in lots.items():
            rows[at - 1] = f'{{"sku": "MTR-{at}", "name": "metronidazole 250mg", "lot": "{lot}"}}'
        return "\n".join(rows)

    small = mnemo.record(AGENT, "s11", "pharmacy.stock", snapshot(300, {40: "L1", 260: "L2"})).result_id
    large = mnemo.record(AGENT, "s12", "pharmacy.stock", snapshot(3_000, {40: "L1", 2_900: "L2"})).result_id
    for session, rid in (("s11", small), ("s12", large)):
        mnemo.record(AGENT, session, "notes", "next")
        mnemo.archive_results(AGENT, session, [(rid, "stock snapshot")])
    both = mnemo.recall(AGENT, "s11", "metronidazole stock", around=1)
    assert both.status == "recovered" and both.lines == (40, 262)
    assert both.recovered is not None
    assert b'"lot": "L1"' in both.recovered.content and b'"lot": "L2"' in both.recovered.content
    before = states(mnemo, "s12")
    wide = mnemo.recall(AGENT, "s12", "metronidazole stock", around=1)
    assert (wide.status, wide.result_id, wide.lines, wide.recovered) == (
        "ambiguous",
        large,
        (40, 2_902),
        None,
    )
    assert states(mnemo, "s12") == before  # nothing appended
    named = mnemo.recall(AGENT, "s12", "metronidazole stock lot L2", around=1)
    assert named.status == "recovered" and named.lines == (2_900, 2_902)
