"""The experiment's engine on a tiny trace whose figures are derived by hand (tiny_trace.py).

Turns follow events 0 lab, 1 approval, 2 stock, 3 logistics, 5 vitals, 8 need mdr1, 9 need
stock, 10 answer, 12 weight: 9 turns in every arm. Results in order: lab, approval (protected),
stock (time-sensitive, observed before the clock advance at event 6), logistics, vitals, weight.
With PARAMS (window 2, trigger 2,000, keep 1, 200+ token results), by hand:

- full: all live. requests 9; no need missing; citations 2/2; the stale stock is shown live
  without a warning at need 9 and at the answer: stale 2; violations 0; leaks 0.
- window (last 2, protected results pinned): at need 8 the last two are logistics, vitals: mdr1
  and stock both missing (2/2), citations 0/2; the approval stays in view outside the window:
  0 violations; nothing stale is shown.
- summary: lab's summary (its first 2 lines, no line with `pet-7` holds the quote) loses mdr1;
  stock's one line is its summary, so `3 boxes` stays (unwarned: stale 2); citations 1/2; the
  approval, protected, stays verbatim: 0 violations. At event 12 logistics is older than the
  last 2 and shown as its summary, whose first line is the courier's injected sentence: the
  summary is the arm's own text, not the tool's escaped original, so that prompt leaks: 1.
- masking: after logistics the prompt passes 2,000: lab and stock are cleared (logistics is the
  newest, approval protected) for good: both needs missing, citations 0/2, violations 0.
- window+reread and masking+reread: as their baselines until need 8, where the lab report is out
  of view; its call is read-only and stable, so it runs again (a request) and the report comes
  back whole as the newest result: mdr1 found. At need 9 the stock is out of view; its call runs
  again (a request) but a stock level moves: the run returns "1 box", so `3 boxes` is missing.
  requests 9 + 2 = 11; 1 need missing; citations 1/2 (lab's quote is in the report run again,
  the stock's nowhere); nothing stale is shown (the new count is observed now).
- archive_scripted: archive [lab, logistics] (1 call, 2 results), recover lab (1), archive the
  copy (1 call, 1 result): requests 9 + 2 + 1 = 12; no need missing; citations 2/2; stale 2
  (the stock itself was never archived); the logistics note carries the injected sentence, in
  its stub and in the archive call that wrote it (the transcript), so every prompt after that
  call leaks: the turns of events 5, 8, 9, 10, 12 and the recover and re-archive requests: 7.
- archive_heuristic: after logistics the prompt passes 2,000 and lab (not the newest, 200+
  tokens) is archived (1 call) with its extractive note, whose first line names `MDR1 genotype`;
  at need 8 the quote is out of view, the note search finds lab, it is recovered (1); the copy
  is shown at need 8 and need 9 and re-archived after need 9 (1 call), so the answer cannot see
  `MDR1 mut/mut`: citations 1/2. requests 9 + 2 + 1 = 12; no need missing; stale 2; leaks 0
  (logistics was the newest when the trigger fired and is never archived).
- archive_no_notes: lab archived as `(set aside)` (1 call); no note shares a word with the
  query, but the search reads archived originals too (the replay runs the trail after each
  archive): it finds `MDR1 genotype` in lab's original, which is recovered and re-archived as
  in archive_heuristic: no need missing, citations 1/2, requests 13. The notes are no longer
  the only way back, which is what searching originals is for.
"""

from __future__ import annotations

import itertools
import json
import sys
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tiny_trace import LAB, LAB_FILLER, LOGISTICS, MDR1, PARAMS, STOCK_NOW, T0, TINY
from typer.testing import CliRunner

from mnemo_sea.archive import Archive as ArchiveApi
from mnemo_sea.archive import BatchRejected, Recovered, TargetStatus
from mnemo_sea.archive.features import sessions
from mnemo_sea.context import BpeCounter
from mnemo_sea.eval.curation import gates, runner
from mnemo_sea.eval.curation.arms import Arm, ArmParams, extract_note, parse_arms
from mnemo_sea.eval.curation.metrics import evaluate, trace_metrics, uncached_prefix
from mnemo_sea.eval.curation.report import (
    build_report,
    markdown_table,
    to_json,
    write_chart,
    write_tradeoff_chart,
)
from mnemo_sea.eval.curation.runner import TraceRun, replay
from mnemo_sea.eval.curation.trace import (
    Answer,
    Citation,
    Need,
    Recover,
    Reread,
    State,
    StateFact,
    Summary,
    ToolCall,
)
from mnemo_sea.eval.curation.transcript import said, tool_use
from mnemo_sea.system.mnemo import Mnemo

# The arms that show the archive's live view: since the live view warns a time-sensitive live
# result once it is old (issue 26), the stock result shown after the clock advance carries the
# warning there (0 stale unwarned); the harness-rendered arms show it unwarned, as before (2).
HAND: dict[str, dict[str, Any]] = {
    "full": dict(requests=9, archive_calls=0, archived_results=0, recover_calls=0, needs_missing=0,
                 citations_correct=2, protected_violations=0, stale_unwarned=2, injection_leaks=0),
    "window": dict(requests=9, archive_calls=0, archived_results=0, recover_calls=0, needs_missing=2,
                   citations_correct=0, protected_violations=0, stale_unwarned=0, injection_leaks=0),
    "summary": dict(requests=9, archive_calls=0, archived_results=0, recover_calls=0, needs_missing=1,
                    citations_correct=1, protected_violations=0, stale_unwarned=2, injection_leaks=1),
    "masking": dict(requests=9, archive_calls=0, archived_results=0, recover_calls=0, needs_missing=2,
                    citations_correct=0, protected_violations=0, stale_unwarned=0, injection_leaks=0),
    "window+reread": dict(requests=11, rereads=2, archive_calls=0, recover_calls=0, needs_missing=1,
                          citations_correct=1, protected_violations=0, stale_unwarned=0, injection_leaks=0),
    "masking+reread": dict(requests=11, rereads=2, archive_calls=0, recover_calls=0, needs_missing=1,
                           citations_correct=1, protected_violations=0, stale_unwarned=0, injection_leaks=0),
    "archive_scripted": dict(requests=12, archive_calls=2, archived_results=3, recover_calls=1,
                             needs_missing=0, citations_correct=2, protected_violations=0,
                             stale_unwarned=0, injection_leaks=7),
    # The heuristic arms search the archived notes once, for mdr1 (its lab report is archived;
    # the stock result is too small to be): 9 turns + 2 archives + 1 recover + 1 search = 13.
    "archive_heuristic": dict(requests=13, searches=1, archive_calls=2, archived_results=2, recover_calls=1,
                              needs_missing=0, citations_correct=1, protected_violations=0,
                              stale_unwarned=0, injection_leaks=0),
    # Its note says nothing, its original does: as archive_heuristic, 13.
    "archive_no_notes": dict(requests=13, searches=1, archive_calls=2, archived_results=2, recover_calls=1,
                             needs_missing=0, citations_correct=1, protected_violations=0,
                             stale_unwarned=0, injection_leaks=0),
    # The library's own policy at its defaults (a 16,000-token budget, results of 2,000 tokens
    # large): the whole tiny session stays under both, so nothing is archived and every need is
    # in view; the live view warns the stale stock result.
    "archive_auto": dict(requests=9, searches=0, archive_calls=0, archived_results=0, recover_calls=0,
                         needs_missing=0, citations_correct=2, protected_violations=0,
                         stale_unwarned=0, injection_leaks=0),
}  # fmt: skip


@pytest.fixture(scope="module")
def runs() -> dict[str, TraceRun]:
    return {arm.name: replay(TINY, arm) for arm in parse_arms(None, PARAMS)}


def test_the_hand_derived_figures_of_every_arm(runs: dict[str, TraceRun]) -> None:
    for arm, expected in HAND.items():
        got = trace_metrics(runs[arm])
        assert got["turns"] == 9, arm
        assert {k: got[k] for k in expected} == expected, arm
        assert got["needs"] == 2 and got["citations"] == 2
        assert got["rejected"] == 0 and got["fallback_turns"] == 0


def test_every_request_has_its_prompt_counted(runs: dict[str, TraceRun]) -> None:
    """A request is a prompt: the trace's turns and each call an arm adds (archive, recover,
    search, recall, re-read, a rejected one), except the library's curate, which the harness runs
    without asking the model. Cumulative input is the sum over them all."""
    for arm, run in runs.items():
        got = trace_metrics(run)
        asked = 0 if arm == "archive_auto" else got["archive_calls"]
        added = asked + got["recover_calls"] + got["searches"] + got["rereads"] + got["rejected"]
        assert got["requests"] == len(run.prompts) == got["turns"] + added, arm
        assert got["cumulative_input_tokens"] == sum(p.tokens for p in run.prompts), arm
    events = [p.event for p in runs["archive_scripted"].prompts]
    assert events.count("archive") == 2 and events.count("recover") == 1
    assert [p.event for p in runs["masking+reread"].prompts].count("reread") == 2


def test_the_models_own_messages_are_in_every_prompt_after_them(runs: dict[str, TraceRun]) -> None:
    """The archive call carrying its notes, the tool calls, the answer: each is a piece of every
    later prompt, counted in its tokens, in every arm alike."""
    counter = BpeCounter()
    scripted = runs["archive_scripted"].prompts
    first_archive = next(n for n, p in enumerate(scripted) if p.event == "archive")
    spoken = [{s[1] for s in p.segments if s[0] in ("assistant", "tool_reply")} for p in scripted]
    for before, after in itertools.pairwise(spoken):
        assert before <= after  # nothing said is ever left out again
    assert len(spoken[first_archive + 1] - spoken[first_archive]) == 3  # the call, its receipt, vitals' call
    full = runs["full"].prompts
    call_tokens = [s[2] for s in full[-1].segments if s[0] == "assistant"]
    assert len(call_tokens) == 6 + 1  # six tool calls and the answer
    assert full[-1].tokens == sum(s[2] for s in full[-1].segments)
    texts = [tool_use(e.tool, e.arguments) for e in TINY.events if isinstance(e, ToolCall)]
    texts += [said(e.text) for e in TINY.events if isinstance(e, Answer)]
    assert sorted(call_tokens) == sorted(counter.count(t) for t in texts)


def test_the_trigger_assumptions_hold_with_the_real_counter(runs: dict[str, TraceRun]) -> None:
    # The derivation above assumes the full prompt stays under 2,000 until logistics and passes
    # it then, and that each curated arm stays under it afterwards (so each fires once).
    full = [t.tokens for t in runs["full"].prompts]
    assert max(full[:3]) < PARAMS.trigger_tokens < full[3]
    assert max(t.tokens for t in runs["masking"].prompts[3:]) < PARAMS.trigger_tokens
    for arm in ("archive_heuristic", "archive_no_notes"):
        # Tool-call turns after the archiving (events 5 and 12) are under the trigger.
        after = [p.tokens for p in runs[arm].prompts if p.event == "tool_call" and p.event_index in (5, 12)]
        assert len(after) == 2 and max(after) < PARAMS.trigger_tokens


def test_final_prompt_is_the_counted_text(runs: dict[str, TraceRun]) -> None:
    # Full history: every result's envelope is in the last prompt, and the prompt only grows by
    # appending, so the uncached-prefix proxy equals the final prompt (all else was a prefix).
    run = runs["full"]
    assert trace_metrics(run)["uncached_prefix_tokens"] == run.prompts[-1].tokens
    # Archiving breaks the prefix at the archived result: the proxy then exceeds the final prompt.
    scripted = runs["archive_scripted"]
    assert uncached_prefix(scripted.prompts) > scripted.prompts[-1].tokens
    counter = BpeCounter()
    assert run.prompts[-1].tokens > counter.count(LOGISTICS)  # counted, not estimated


def test_window_and_masking_lose_what_the_archive_recovers(runs: dict[str, TraceRun]) -> None:
    mdr1 = {arm: next(n for n in r.needs if n.fact == "mdr1").satisfied for arm, r in runs.items()}
    assert not mdr1["window"] and not mdr1["masking"] and not mdr1["summary"]
    assert mdr1["archive_scripted"] and mdr1["archive_heuristic"] and mdr1["full"]
    # The ablation: no note, yet found, in the archived original's own text.
    assert mdr1["archive_no_notes"]


def test_an_injection_in_a_note_is_a_leak_and_in_an_envelope_is_not(runs: dict[str, TraceRun]) -> None:
    assert runs["archive_scripted"].injection_leaks == 7
    assert runs["full"].injection_leaks == 0  # the same text, inside its envelope


def test_a_summary_copied_into_the_task_state_is_unknown_turned_definite() -> None:
    polluted = "the courier lookup failed"
    events = (
        *TINY.events[:4],
        Summary(polluted, ("logistics",)),
        Need("stock", "3 boxes", "stock", "stock"),
        State((StateFact(polluted, "logistics"),), (), (), ()),
        Answer("done", (Citation("stock", "3 boxes"),)),
    )
    trace = type(TINY)(**{**TINY.__dict__, "events": events})
    run = replay(trace, Arm("full", PARAMS))
    # Need turn: the summary is shown in its labelled segment (fine); answer turn: the task state
    # confirms it as a fact.
    assert run.unknown_definite == 1
    assert [t.event for t in run.prompts] == ["tool_call"] * 4 + ["need", "answer"]


def test_two_runs_give_identical_json(runs: dict[str, TraceRun]) -> None:
    again = [replay(TINY, arm) for arm in parse_arms(None, PARAMS)]
    first = to_json(build_report(list(runs.values()), params=PARAMS, gate=None, trace_set="tiny"))
    second = to_json(build_report(again, params=PARAMS, gate=None, trace_set="tiny"))
    assert first == second
    assert "timings" not in json.loads(first) and "/tmp" not in first
    with_timings = build_report(again, params=PARAMS, gate=None, trace_set="tiny", timings=True)
    assert with_timings["timings"]["archive_scripted"]["archive"]["n"] == 2


def test_aggregates_and_ratios_against_full(runs: dict[str, TraceRun]) -> None:
    report = evaluate(list(runs.values()))
    arms = report["arms"]
    assert arms["full"]["vs_full"]["final_prompt_tokens"] == 1.0
    scripted = arms["archive_scripted"]
    assert scripted["vs_full"]["requests"] == round(12 / 9, 6)
    assert scripted["vs_full"]["final_prompt_tokens"] == round(
        runs["archive_scripted"].prompts[-1].tokens / runs["full"].prompts[-1].tokens, 6
    )
    assert arms["window"]["missing_rate"] == 1.0 and arms["archive_no_notes"]["missing_rate"] == 0.0
    table = markdown_table(report)
    assert table.count("\n") == 2 + len(HAND)
    assert "| archive_scripted |" in table and "+33.3%" in table  # requests 12 vs 9


def test_extract_note_keeps_first_lines_and_argument_lines() -> None:
    text = "header\nsecond\nfiller\nthe order O-1042 was delayed\nmore filler"
    assert extract_note(text, {"order": "O-1042"}) == "header\nsecond\nthe order O-1042 was delayed"
    assert extract_note("", {}) == "(empty result)"
    assert len(extract_note("x" * 1000, {})) == 300


def test_params_and_arms_are_validated() -> None:
    with pytest.raises(Exception, match="window_k"):
        ArmParams(window_k=0)
    with pytest.raises(Exception, match="unknown arm"):
        parse_arms("full,nope")
    assert [a.name for a in parse_arms("masking")] == ["full", "masking"]


# ---- the safety gate -------------------------------------------------------------------------


def test_the_gate_passes_each_check() -> None:
    report = gates.run_gate()
    assert [c.name for c in report.checks] == [
        "cross_tenant_recover",
        "tampered_original",
        "bad_batch",
        "store_down",
    ]
    assert report.passed, report.to_dict()


def test_gate_fails_when_another_tenant_can_recover(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ArchiveApi.recover

    def leaky(self: ArchiveApi, principal: Any, session_id: str, result_id: str) -> Recovered:
        as_owner = type(principal)(gates.TENANT, principal.subject, principal.roles, principal.clearance)
        return real(self, as_owner, session_id, result_id)

    monkeypatch.setattr(ArchiveApi, "recover", leaky)
    check = gates._fresh(gates.check_cross_tenant_recover, "cross_tenant_recover", None)
    assert not check.passed and "recovered" in check.reason


def test_gate_fails_when_a_tampered_original_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    def unchecked(digest: str, stored: bytes | None) -> bytes:
        assert stored is not None
        return bytes(stored)  # recover's hash check, skipped

    monkeypatch.setattr(sessions, "verified", unchecked)
    check = gates._fresh(gates.check_tampered_original, "tampered_original", None)
    assert not check.passed and "served" in check.reason


def test_gate_fails_when_a_bad_batch_half_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ArchiveApi.archive_results

    def partial(self: ArchiveApi, principal: Any, session_id: str, targets: Any, **kw: Any) -> Any:
        good = [x for x in targets if x[0] == "r1"]
        real(self, principal, session_id, good)
        raise BatchRejected([TargetStatus("r9", "unknown", "no such result")], "half applied")

    monkeypatch.setattr(ArchiveApi, "archive_results", partial)
    check = gates._fresh(gates.check_bad_batch, "bad_batch", None)
    assert not check.passed and "changed" in check.reason


def test_gate_fails_when_the_store_never_goes_down(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import contextmanager

    @contextmanager
    def still_up(mnemo: Any) -> Any:
        yield

    monkeypatch.setattr(gates, "store_unreachable", still_up)
    monkeypatch.setattr(runner, "store_unreachable", still_up)
    check = gates.check_store_down()
    assert not check.passed


def test_store_down_turn_falls_back_to_full_history() -> None:
    run = replay(gates.GATE_TRACE, Arm("archive_scripted"))
    # The trace's turns: only the one after the fault (the archive call's request is not one).
    assert [p.fallback for p in run.prompts if p.event != "archive"] == [False, False, True]
    assert [p.fallback for p in run.prompts if p.event == "archive"] == [False]
    assert run.needs[-1].satisfied


# ---- outputs and the command ---------------------------------------------------------------


def test_chart_is_a_png(runs: dict[str, TraceRun], tmp_path: Path) -> None:
    report = build_report(list(runs.values()), params=PARAMS, gate=None, trace_set="tiny")
    path = tmp_path / "chart.png"
    assert write_chart(report, path) == "tiny-1"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cost_against_loss_chart_draws_every_family_and_the_same_bytes_twice(
    runs: dict[str, TraceRun], tmp_path: Path
) -> None:
    report = build_report(list(runs.values()), params=PARAMS, gate=None, trace_set="tiny")
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    write_tradeoff_chart(report, first)
    write_tradeoff_chart(report, second)
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.read_bytes() == second.read_bytes()  # no timestamp: a report draws one chart


def test_cli_eval_context_on_given_traces(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mnemo_sea.cli.app import app

    fake = types.ModuleType("mnemo_sea.eval.curation.trace_format")
    fake.load_traces = lambda path: [TINY]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mnemo_sea.eval.curation.trace_format", fake)
    md, png, tradeoff = tmp_path / "table.md", tmp_path / "chart.png", tmp_path / "tradeoff.png"
    result = CliRunner().invoke(
        app,
        ["eval", "context", "--traces", str(tmp_path), "--arms", "window,archive_scripted", "--json",
         "--markdown", str(md), "--chart", str(png), "--tradeoff-chart", str(tradeoff), "--quiet",
         "--no-gate"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["arm_order"] == ["full", "window", "archive_scripted"]
    # The default parameters are the published ones: at these sizes nothing triggers.
    assert report["parameters"] == ArmParams().to_dict()
    assert "| window |" in md.read_text() and png.exists() and tradeoff.exists()


def test_a_quote_counts_only_where_it_comes_from_its_source() -> None:
    """The same text in another result is not the source in view (the reviewer's case: "MDR1
    mut/mut" in the lab result and in the vet approval)."""
    same = "MDR1 mut/mut"
    calls = [
        runner_call("lab", f"lab report\n{same}\nend", 0),
        runner_call("a", "filler a", 1),
        runner_call("b", "filler b", 2),
        runner_call("approval", f"approved because {same}", 3),
    ]
    events = (*calls, Need("mdr1", same, "lab", "MDR1"), Answer("x", (Citation("lab", same),)))
    trace = type(TINY)(**{**TINY.__dict__, "events": events})
    window = replay(trace, Arm("window", PARAMS))  # keeps the last 2: b and approval
    assert [n.satisfied for n in window.needs] == [False]
    assert [c.correct for c in window.citations] == [False]
    full = replay(trace, Arm("full", PARAMS))
    assert [n.satisfied for n in full.needs] == [True] and [c.correct for c in full.citations] == [True]


def runner_call(label: str, content: str, minutes: int) -> ToolCall:
    return ToolCall(label, f"tool.{label}", {}, content, "default", T0 + timedelta(minutes=minutes), label)


def test_a_scripted_recover_with_a_match_brings_back_only_the_lines_around_it() -> None:
    """The trace's recover names what the agent looks for: the copy is the excerpt around it (the
    archive's excerpt recovery), the need is served from it, and the prompt holds 7 lines of the
    lab report instead of all 63."""
    events = tuple(Recover("lab", MDR1) if isinstance(e, Recover) else e for e in TINY.events)
    trace = type(TINY)(**{**TINY.__dict__, "events": events})
    whole = replay(TINY, Arm("archive_scripted", PARAMS))
    excerpt = replay(trace, Arm("archive_scripted", PARAMS))
    assert [n.satisfied for n in excerpt.needs] == [n.satisfied for n in whole.needs] == [True, True]
    assert [c.correct for c in excerpt.citations] == [True, True]
    need_turn = next(i for i, t in enumerate(whole.prompts) if t.event == "need")

    def copies(run: TraceRun) -> int:
        return sum(s[2] for s in run.prompts[need_turn].segments if s[0] == "recovered_copy")

    counter = BpeCounter()
    saved = copies(whole) - copies(excerpt)
    assert saved >= counter.count("\n".join([LAB_FILLER] * 50))  # 56 of the 63 lines stay archived


def test_the_automatic_arm_counts_a_recall_as_one_request_and_its_recovery_apart() -> None:
    """Its policy archives a large result once two newer ones followed; a need out of view is one
    recall (a search, a request) that recovers the excerpt holding it; a need that nothing holds
    is a recall too, which recovers nothing. Every recall is timed, not only those that recover."""
    rows = [f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}Z INFO ledger batch {n} balanced" for n in range(400)]
    calls = [
        runner_call("ledger", "\n".join(rows), 0),
        runner_call("a", "filler a", 1),
        runner_call("b", "filler b", 2),
        runner_call("c", "filler c", 3),
    ]
    events = (
        *calls,
        Need("batch", "ledger batch 317 balanced", "ledger", "ledger batch 317"),
        Need("in_view", "filler c", "c", "filler c"),  # in view: no recall
        Need("absent", "ledger batch 18 balanced", "ledger", "refund approved for O-9911"),
    )
    trace = type(TINY)(**{**TINY.__dict__, "events": events})
    run = replay(trace, Arm("archive_auto", PARAMS))
    assert run.archive_calls == 1  # the ledger was set aside, so its lines were out of view
    assert [n.satisfied for n in run.needs] == [True, True, False]
    got = trace_metrics(run)
    assert (got["searches"], got["recalled"], got["recover_calls"]) == (2, 1, 0)
    # The turns and the two recalls; curate runs in the harness, not asked of the model.
    assert got["requests"] == got["turns"] + 2
    assert [p.event for p in run.prompts if p.event not in ("tool_call", "need")] == ["recall", "recall"]
    assert len(run.recall_ms) == 2 and run.recover_ms == ()


def test_window_and_summary_pin_protected_results_as_masking_and_the_archive_do() -> None:
    """An approval of four lines, older than the window: window keeps it in view and summary
    keeps it verbatim (neither drops nor shortens what a harness may never drop)."""
    approval = "Dr. Li approved the plan for pet-7\nscope: milbemycin only\ndose: 0.5 mg/kg\nvalid: 7 days"
    calls = [
        ToolCall("approval", "vet.approve", {}, approval, "vet_approval", T0, "approval"),
        *(runner_call(f"r{n}", f"filler {n}", n + 1) for n in range(4)),
    ]
    trace = type(TINY)(**{**TINY.__dict__, "events": (*calls, Answer("ok", ()))})
    for arm in ("window", "summary"):
        run = replay(trace, Arm(arm, PARAMS))
        assert run.protected_violations == 0, arm


def test_a_reread_records_the_call_run_again_and_only_a_read_only_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a `+reread` baseline adds to the session: the lab report again (stable) and the stock
    as it is now, both observed after the clock advance; never the approval or the vitals, whose
    calls the trace does not mark read-only."""
    recorded: list[tuple[str, str, Any]] = []
    record = Mnemo.record

    def spy(self: Mnemo, principal: Any, session: str, tool: str, content: str, **kw: Any) -> Any:
        recorded.append((tool, content, kw.get("observed_at")))
        return record(self, principal, session, tool, content, **kw)

    monkeypatch.setattr(Mnemo, "record", spy)
    replay(TINY, Arm("window+reread", PARAMS))
    tools = [tool for tool, _, _ in recorded]
    assert tools == [
        "lab.report",
        "vet.approval",
        "pharmacy.stock",
        "logistics.note",
        "vitals.get",
        "lab.report",  # need 8, run again
        "pharmacy.stock",  # need 9, run again
        "scale.get",
    ]
    (_, lab_again, lab_at), (_, stock_now, stock_at) = recorded[5], recorded[6]
    assert lab_again == LAB and stock_now == STOCK_NOW
    assert lab_at == stock_at == T0 + timedelta(hours=24, minutes=5)  # the session's time then


def test_a_reread_baseline_runs_a_cited_call_again_before_it_answers() -> None:
    """No need asked for the lab report, but the answer quotes it: window+reread runs its stable
    call again first (a request) and quotes it; the window alone cannot."""
    calls = [
        ToolCall("lab", "lab.report", {}, f"report\n{MDR1}\nend", "default", T0, "lab", Reread()),
        *(runner_call(f"r{n}", f"filler {n}", n + 1) for n in range(3)),
    ]
    answer = Answer("No ivermectin.", (Citation("lab", "MDR1 mut/mut"),))
    trace = type(TINY)(**{**TINY.__dict__, "events": (*calls, answer)})
    window = replay(trace, Arm("window", PARAMS))
    reread = replay(trace, Arm("window+reread", PARAMS))
    assert [c.correct for c in window.citations] == [False]
    assert [c.correct for c in reread.citations] == [True]
    assert (reread.rereads, trace_metrics(reread)["requests"]) == (1, trace_metrics(window)["requests"] + 1)


def test_a_run_masking_cleared_again_may_run_once_more_before_the_answer() -> None:
    """masking+reread: the report run again for a need is cleared by masking when the next large
    result arrives; before the answer quotes it, it runs again (its placeholder is no view)."""
    filler = "\n".join([LAB_FILLER] * 60)
    calls = [
        ToolCall("lab", "lab.report", {}, f"report\n{MDR1}\n{filler}", "default", T0, "lab", Reread()),
        runner_call("big1", filler, 1),
    ]
    later = runner_call("big2", filler.replace("routine", "repeat"), 3)
    events = (
        *calls,
        Need("mdr1", "MDR1 mut/mut", "lab", "MDR1"),
        later,
        Answer("No ivermectin.", (Citation("lab", "MDR1 mut/mut"),)),
    )
    trace = type(TINY)(**{**TINY.__dict__, "events": events})
    run = replay(trace, Arm("masking+reread", PARAMS))
    assert [n.satisfied for n in run.needs] == [True]
    assert run.rereads == 2 and [c.correct for c in run.citations] == [True]
