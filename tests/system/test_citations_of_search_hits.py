"""Every id a search returns can be cited and checked, with the verdicts evidence ids get.

A real search returns an evidence record, an archived result's note (`result:<session>/<rN>`), a
memory fact (`memory:<owner>/<key>`) and a summary (`sum:…`); citing each hit with its snippet is
`ok`, with a quote it does not hold `quote_not_found`. Missing ids and other tenants' ids are
`unresolved` alike; ids in the tenant the principal may not read (clearance, another owner's
session, memory or summary for a reader) are `forbidden`. The JSONL eval uses the same checks.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from mnemo_sea.archive import EvidenceInput, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.archive.rules.refs import DERIVED_ID_PREFIXES, MEMORY_PREFIX, RESULT_PREFIX, SUMMARY_PREFIX
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.system.citations import CitationCheck, check_answers, load_citations_jsonl
from mnemo_sea.system.mnemo import Mnemo, SearchHit

TENANT = "clinic-cite"
AGENT = Principal(TENANT, "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ADMIN = Principal(TENANT, "root", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
ALICE = Principal(TENANT, "alice", frozenset({Role.READER}), Sensitivity.INTERNAL)
BOB = Principal(TENANT, "bob", frozenset({Role.READER}), Sensitivity.INTERNAL)
STRANGER = Principal("elsewhere", "assistant", frozenset({Role.AGENT}), Sensitivity.RESTRICTED)
LONG_AGO = datetime(1971, 1, 1, tzinfo=UTC)


def tick() -> datetime:
    time.sleep(0.005)
    moment = datetime.now(UTC)
    time.sleep(0.005)
    return moment


def seed(mnemo: Mnemo) -> dict[str, Any]:
    ferry = EvidenceInput(body="okapi ferry leaves at noon", source="kb", evidence_id="ferry", locator="p. 1")
    mnemo.ingest(AGENT, [ferry])
    mnemo.remember(AGENT, "alice", "pet", "okapi named Mimi", "user_claim")
    mnemo.record(AGENT, "s-alice", "zoo.lookup", "raw zoo log: okapi enclosure 7", owner="alice")
    mnemo.record(AGENT, "s-alice", "zoo.live", "live okapi reading 42", owner="alice")
    before_archiving = tick()
    mnemo.archive_results(AGENT, "s-alice", [("r1", "okapi sighting note")])
    between = tick()
    mnemo.remember(AGENT, "alice", "pet", "okapi named Rex", "user_correction")
    summary = mnemo.create_summary(AGENT, "okapi case summary", ["result:s-alice/r1"], trace_ref="trace-1")
    mnemo.record(ADMIN, "s-secret", "vault", "restricted okapi file", sensitivity=Sensitivity.RESTRICTED)
    mnemo.archive_results(ADMIN, "s-secret", [("r1", "okapi restricted note")])
    secret = mnemo.create_summary(ADMIN, "okapi restricted summary", ["result:s-secret/r1"])
    return {
        "summary": summary.summary_id,
        "secret_summary": secret.summary_id,
        "before_archiving": before_archiving,
        "between": between,
    }


def cite(hit: SearchHit, quote: str | None = None) -> dict[str, Any]:
    return {
        "evidence_id": hit.evidence_id,
        "version": hit.version,
        "quote": hit.snippet if quote is None else quote,
        "locator": hit.locator,
    }


def checks(
    mnemo: Mnemo, principal: Principal, citations: list[dict[str, Any]], at: datetime | None = None
) -> list[CitationCheck]:
    return list(mnemo.check_citations(principal, citations, answered_at=at).checks)


def verdicts(mnemo: Mnemo, principal: Principal, citations: list[dict[str, Any]], **kw: Any) -> list[str]:
    return [c.verdict for c in checks(mnemo, principal, citations, **kw)]


def test_every_hit_of_a_real_search_cites_ok_and_a_wrong_quote_does_not(mnemo: Mnemo) -> None:
    ids = seed(mnemo)
    hits = mnemo.search(AGENT, "okapi", mode="bm25", limit=20).hits
    assert {h.kind for h in hits} == {"knowledge", "tool_result", "archived_original", "memory", "summary"}
    assert {h.evidence_id for h in hits} == {
        "ferry",
        "result:s-alice/r1",
        "memory:alice/pet",
        ids["summary"],
    }  # the restricted note and summary are above the agent's clearance
    found = checks(mnemo, AGENT, [cite(h) for h in hits])
    assert [(c.verdict, c.quote_found, c.locator_matches) for c in found] == [("ok", True, True)] * len(hits)
    # Without version and locator too: the version in force now is checked.
    bare = [{"evidence_id": h.evidence_id, "quote": h.snippet} for h in hits]
    assert [(c.verdict, c.version_source) for c in checks(mnemo, AGENT, bare)] == [("ok", "in_force")] * len(
        hits
    )
    wrong = verdicts(mnemo, AGENT, [cite(h, "okapi named Zed") for h in hits])
    assert wrong == ["quote_not_found"] * len(hits)
    wrong_locator = verdicts(mnemo, AGENT, [{**cite(h), "locator": "elsewhere/r9"} for h in hits])
    assert wrong_locator == ["locator_mismatch"] * len(hits)

    # A reader cites the hits of its own search: its note, memory and summary.
    alice_hits = mnemo.search(ALICE, "okapi", mode="bm25", limit=20).hits
    assert {h.kind for h in alice_hits} == {"knowledge", "tool_result", "memory", "summary"}
    assert verdicts(mnemo, ALICE, [cite(h) for h in alice_hits]) == ["ok"] * len(alice_hits)


def test_results_memory_and_summaries_follow_time_like_evidence(mnemo: Mnemo) -> None:
    ids = seed(mnemo)
    mimi = {"evidence_id": "memory:alice/pet", "quote": "okapi named Mimi"}
    rex = {"evidence_id": "memory:alice/pet", "quote": "pet: okapi named Rex"}
    note = {"evidence_id": "result:s-alice/r1", "quote": "okapi sighting note"}
    summary = {"evidence_id": ids["summary"], "quote": "okapi case summary"}
    # Memory: version 1 held between the writes and was replaced since; cited after, it is stale.
    (held,) = checks(mnemo, AGENT, [mimi], at=ids["between"])
    assert (held.verdict, held.version_checked, held.superseded_by) == ("superseded", 1, 2)
    assert held.ended_at is not None and held.ended_at > ids["between"]
    assert verdicts(mnemo, AGENT, [{**mimi, "version": 1}]) == ["stale_version"]
    assert verdicts(mnemo, AGENT, [mimi]) == ["quote_not_found"]  # version 2 says Rex
    assert verdicts(mnemo, AGENT, [rex], at=ids["between"]) == ["quote_not_found"]  # Mimi then
    # Before anything existed, or (the note) before it was written.
    assert verdicts(mnemo, AGENT, [mimi, note, summary], at=LONG_AGO) == ["invalid_at_time"] * 3
    assert verdicts(mnemo, AGENT, [note, summary], at=ids["before_archiving"]) == ["invalid_at_time"] * 2
    # An agent may cite an archived result's original (it may recover it); a reader may not,
    # but a live result's original is in every reader's live view.
    original = {"evidence_id": "result:s-alice/r1", "quote": "okapi enclosure 7"}
    live = {"evidence_id": "result:s-alice/r2", "quote": "live okapi reading 42", "locator": "s-alice/r2"}
    assert verdicts(mnemo, AGENT, [original, live]) == ["ok", "ok"]
    assert verdicts(mnemo, ALICE, [original, live]) == ["quote_not_found", "ok"]
    (after,) = checks(mnemo, AGENT, [original], at=ids["before_archiving"])
    assert after.verdict == "ok"  # the original was recorded before the archiving


def test_an_excerpt_copy_is_cited_by_the_original_s_text_it_shows(mnemo: Mnemo) -> None:
    report = "".join(f"row {n}: fine\n" for n in range(1, 20)) + "row 20: okapi weighs 230 kg\n"
    r = mnemo.record(AGENT, "s-ex", "zoo.report", report)
    mnemo.archive_results(AGENT, "s-ex", [(r.result_id, "zoo report")])
    copy = mnemo.recover(AGENT, "s-ex", r.result_id, match="okapi weighs", around=0).appended
    cited = {"evidence_id": f"result:s-ex/{copy.result_id}", "quote": "okapi weighs 230 kg"}
    (shown,) = checks(mnemo, AGENT, [cited])
    start = report.encode().index(b"row 20")
    assert shown.verdict == "ok"
    assert shown.record_locator == f"s-ex/r1 line 20 (bytes {start}-{len(report.encode())})"
    # The original holds row 3, but the copy never showed it: an agent citing it saw it elsewhere.
    assert verdicts(mnemo, AGENT, [{**cited, "quote": "row 3: fine"}]) == ["quote_not_found"]
    assert verdicts(mnemo, AGENT, [{**cited, "evidence_id": "result:s-ex/r1", "quote": "row 3: fine"}]) == [
        "ok"
    ]


def test_missing_forbidden_and_foreign_ids(mnemo: Mnemo) -> None:
    ids = seed(mnemo)
    quote = "okapi"
    missing = [
        "result:s-alice/r99",
        "result:no-such-session/r1",
        "memory:alice/no-such-key",
        "sum:" + "0" * 32,
        "memory:/pet",
        "result:s-alice/x1",
    ]
    assert verdicts(mnemo, AGENT, [{"evidence_id": i, "quote": quote} for i in missing]) == ["unresolved"] * 6
    # Versions that do not exist: a result has its note (1) and a page per 32 KiB of its original
    # (2, ...: this one has one page), a summary one; the fact has two.
    wrong_versions = [
        {"evidence_id": "result:s-alice/r1", "quote": quote, "version": 3},
        {"evidence_id": ids["summary"], "quote": quote, "version": 2},
        {"evidence_id": "memory:alice/pet", "quote": quote, "version": 3},
    ]
    assert verdicts(mnemo, AGENT, wrong_versions) == ["unresolved"] * 3

    # Above the agent's clearance.
    restricted = [
        {"evidence_id": "result:s-secret/r1", "quote": "okapi restricted note"},
        {"evidence_id": ids["secret_summary"], "quote": "okapi restricted summary"},
    ]
    assert verdicts(mnemo, AGENT, restricted) == ["forbidden"] * 2
    assert verdicts(mnemo, ADMIN, restricted) == ["ok"] * 2
    # Another owner's session, memory and summary, for a reader.
    alices = [
        {"evidence_id": "result:s-alice/r1", "quote": "okapi sighting note"},
        {"evidence_id": "memory:alice/pet", "quote": "okapi named Rex"},
        {"evidence_id": ids["summary"], "quote": "okapi case summary"},
    ]
    assert verdicts(mnemo, ALICE, alices) == ["ok"] * 3
    assert verdicts(mnemo, BOB, alices) == ["forbidden"] * 3
    unknown_fact = {"evidence_id": "memory:alice/no-such-key", "quote": quote}
    assert verdicts(mnemo, BOB, [unknown_fact]) == ["forbidden"]  # the id names alice: no oracle

    # Another tenant's ids look exactly like missing ones, whatever its clearance.
    foreign = checks(mnemo, STRANGER, [*alices, *restricted])
    assert [c.verdict for c in foreign] == ["unresolved"] * 5
    nothing = checks(mnemo, STRANGER, [{"evidence_id": i, "quote": quote} for i in missing[:4]])
    assert {c.reason.replace(c.citation.evidence_id, "ID") for c in [*foreign, *nothing] if c.citation} == {
        "no evidence 'ID' is visible to this principal"
    }


def test_the_jsonl_eval_checks_search_ids(mnemo: Mnemo, tmp_path: Path) -> None:
    seed(mnemo)
    hits = mnemo.search(AGENT, "okapi", mode="bm25", limit=20).hits
    answers = tmp_path / "answers.jsonl"
    lines = [
        {"id": "good", "citations": [cite(h) for h in hits]},
        {"id": "bad", "citations": [cite(h, "okapi named Zed") for h in hits]},
    ]
    answers.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    report = check_answers(mnemo.archive, AGENT, load_citations_jsonl(answers))
    assert report.precision == 0.5
    # The command line reads the same file with the same checks.
    data_dir = tmp_path / "data"  # the `mnemo` fixture's folder; the archive takes several openers
    argv = ["eval", "citations", str(answers), "--data-dir", str(data_dir), "--json"]
    argv += ["--tenant", TENANT, "--subject", "assistant", "--role", "agent"]
    result = CliRunner().invoke(cli_app, argv, env={"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None})
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["precision"] == 0.5 and out["counts"]["ok"] == len(hits)
    assert out["counts"]["quote_not_found"] == len(hits)


def test_no_evidence_record_can_take_an_id_search_gives_to_other_kinds(mnemo: Mnemo) -> None:
    """Otherwise a planted record `result:s-alice/r1` would share the note's index points and
    answer citations of the note."""
    assert (RESULT_PREFIX, MEMORY_PREFIX, SUMMARY_PREFIX) == DERIVED_ID_PREFIXES
    for taken in ("result:s-alice/r1", "memory:alice/pet", "sum:" + "0" * 32):
        with pytest.raises(InvalidInput) as err:
            mnemo.put_evidence(AGENT, EvidenceInput(body="planted okapi", source="kb", evidence_id=taken))
        assert err.value.field == "evidence_id"
    with mnemo.archive.store.read() as conn:
        assert conn.execute(select(func.count()).select_from(t.evidence)).scalar_one() == 0
