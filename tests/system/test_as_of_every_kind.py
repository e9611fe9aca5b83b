"""Search `as_of` holds for every kind: evidence, memory facts (current and superseded), summaries
and archived notes answer at a moment only if they existed (and were current) then.

The writes are spread over three instants: `start` (nothing yet), `middle` (evidence v1 and memory
v1 written; no summary, no note) and `end` (evidence v2, memory v2, the summary and the note).
An index built before notes, memory and summaries carried their start of validity is simulated
by writing their points the old way: hydration must still drop them, and fsck must find and
repair the drift.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fakes import ManualWallClock
from typer.testing import CliRunner

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.mcp.inputs import SearchEvidenceInput
from mnemo_sea.mcp.tools import search_evidence
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.system.fsck import _expected, run_fsck
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder as PackageHashingEmbedder

AGENT = Principal("t-asof", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
LONG_AGO = datetime(1971, 1, 1, tzinfo=UTC)
KINDS = ("knowledge", "memory", "summary", "tool_result")


@dataclass(frozen=True)
class Moments:
    start: datetime
    middle: datetime
    end: datetime


def tick() -> datetime:
    """Now, with distinct archive timestamps on either side."""
    time.sleep(0.005)
    moment = datetime.now(UTC)
    time.sleep(0.005)
    return moment


def seed(mnemo: Mnemo) -> Moments:
    start = tick()
    mnemo.ingest(AGENT, [EvidenceInput(body="okapi ferry leaves at noon", source="kb", evidence_id="ferry")])
    mnemo.remember(AGENT, "u-1", "pet", "okapi named Mimi", "user_claim")
    middle = tick()
    mnemo.ingest(AGENT, [EvidenceInput(body="okapi ferry leaves at dawn", source="kb", evidence_id="ferry")])
    mnemo.remember(AGENT, "u-1", "pet", "okapi named Rex", "user_correction")
    mnemo.create_summary(AGENT, "okapi ferry summary", ["evidence:ferry"])
    mnemo.record(AGENT, "s-1", "zoo.lookup", "raw zoo log")
    mnemo.archive_results(AGENT, "s-1", [("r1", "okapi sighting note")])
    mnemo.sync()  # its original's page too, which the trail would index on a thread of its own
    return Moments(start, middle, tick())


def found(mnemo: Mnemo, kind: str, as_of: datetime | None) -> list[tuple[str, int, str]]:
    result = mnemo.search(AGENT, "okapi", mode="bm25", kinds=[kind], as_of=as_of)
    assert result.status in ("results", "no_match"), result
    return [(h.evidence_id, h.version, h.snippet) for h in result.hits]


def test_every_kind_answers_only_for_the_moments_it_existed(mnemo: Mnemo) -> None:
    at = seed(mnemo)
    for when in (LONG_AGO, at.start):
        for kind in KINDS:
            assert found(mnemo, kind, when) == [], (kind, when)
    # Between the versions: the first evidence version and the superseded memory fact.
    assert found(mnemo, "knowledge", at.middle) == [("ferry", 1, "okapi ferry leaves at noon")]
    assert found(mnemo, "memory", at.middle) == [("memory:u-1/pet", 1, "pet: okapi named Mimi")]
    assert found(mnemo, "summary", at.middle) == []
    assert found(mnemo, "tool_result", at.middle) == []
    for when in (at.end, None):
        assert found(mnemo, "knowledge", when) == [("ferry", 2, "okapi ferry leaves at dawn")]
        assert found(mnemo, "memory", when) == [("memory:u-1/pet", 2, "pet: okapi named Rex")]
        assert [h[2] for h in found(mnemo, "summary", when)] == ["okapi ferry summary"]
        assert found(mnemo, "tool_result", when) == [("result:s-1/r1", 1, "okapi sighting note")]
    # The MCP tool goes through the same search.
    before = search_evidence(mnemo, AGENT, SearchEvidenceInput(query="okapi", mode="bm25", as_of=LONG_AGO))
    assert before["status"] == "no_match" and before["hits"] == []
    between = search_evidence(mnemo, AGENT, SearchEvidenceInput(query="okapi", mode="bm25", as_of=at.middle))
    assert sorted((h["evidence_id"], h["version"]) for h in between["hits"]) == [
        ("ferry", 1),
        ("memory:u-1/pet", 1),
    ]
    assert run_fsck(mnemo).ok


def _without_validity(doc: EvidenceDocument) -> EvidenceDocument:
    """The point as the index had it before notes, memory and summaries carried validity."""
    return EvidenceDocument(
        tenant_id=doc.tenant_id,
        evidence_id=doc.evidence_id,
        version=doc.version,
        text=doc.text,
        kind=doc.kind,
        source=doc.source,
        scope=doc.scope,
        owner=doc.owner,
        sensitivity=doc.sensitivity,
    )


def test_an_index_without_validity_is_dropped_at_hydration_and_repaired_by_fsck(mnemo: Mnemo) -> None:
    at = seed(mnemo)
    expected, _, _ = _expected(mnemo, AGENT.tenant_id)
    derived = [d for d in expected.values() if d.kind != "knowledge"]
    assert {(d.kind, d.version) for d in derived} == {
        ("memory", 1),
        ("memory", 2),
        ("summary", 1),
        ("tool_result", 1),  # the note
        ("archived_original", 2),  # the one page of its original
    }
    # The old indexer dropped a superseded fact's points and indexed the rest as always valid.
    mnemo.index.delete(AGENT.tenant_id, "memory:u-1/pet", 1)
    mnemo.index.upsert([_without_validity(d) for d in derived if d.version == 1 and d.kind != "memory"])
    mnemo.index.upsert([_without_validity(d) for d in derived if d.kind == "memory" and d.version == 2])
    mnemo.index.flush()

    # Hydration checks the archive's own times: nothing written later answers.
    for kind in KINDS:
        result = mnemo.search(AGENT, "okapi", mode="bm25", kinds=[kind], as_of=at.start)
        assert result.hits == (), kind
    dropped = mnemo.search(AGENT, "okapi", mode="bm25", as_of=at.start).dropped
    assert dropped == 3  # the note, the summary and memory v2 came back from the index, all dropped

    report = run_fsck(mnemo)
    problems = {(p.kind, p.ref) for p in report.problems}
    assert problems == {
        ("missing_point", "memory:u-1/pet@1"),
        ("stale_point", "memory:u-1/pet@2"),
        ("stale_point", next(d.evidence_id for d in derived if d.kind == "summary") + "@1"),
        ("stale_point", "result:s-1/r1@1"),
    }
    repaired = run_fsck(mnemo, repair=True)
    assert repaired.ok and repaired.repaired == 4
    assert mnemo.search(AGENT, "okapi", mode="bm25", as_of=at.start).dropped == 0
    assert found(mnemo, "memory", at.middle) == [("memory:u-1/pet", 1, "pet: okapi named Mimi")]


def test_a_fact_with_a_ttl_answers_until_its_expiry(mnemo: Mnemo, wall_clock: ManualWallClock) -> None:
    written = mnemo.remember(AGENT, "u-2", "stock", "okapi food: 3 bags", "tool_fact", ttl_seconds=0.4)
    assert written.fact.expires_at is not None
    wall_clock.past(written.fact.expires_at)
    before_expiry = written.fact.expires_at - timedelta(seconds=0.1)
    assert found(mnemo, "memory", before_expiry) == [("memory:u-2/stock", 1, "stock: okapi food: 3 bags")]
    assert found(mnemo, "memory", written.fact.expires_at) == []
    assert found(mnemo, "memory", None) == []
    quote = {"evidence_id": "memory:u-2/stock", "quote": "okapi food: 3 bags"}
    then, now = (mnemo.check_citations(AGENT, [quote], answered_at=at) for at in (before_expiry, None))
    assert (then.checks[0].verdict, now.checks[0].verdict) == ("ok", "invalid_at_time")
    assert run_fsck(mnemo).ok


def test_the_command_line_search_obeys_as_of_for_every_kind(tmp_path: Path) -> None:
    folder = tmp_path / "cli-data"
    with Mnemo.open(folder, embedder=PackageHashingEmbedder()) as mnemo:
        at = seed(mnemo)

    def cli_search(as_of: datetime) -> set[tuple[str, int]]:
        argv = ["search", "okapi", "--mode", "bm25", "--as-of", as_of.isoformat(), "--json"]
        argv += ["--data-dir", str(folder), "--embedder", "hashing"]
        argv += ["--tenant", AGENT.tenant_id, "--subject", AGENT.subject, "--role", "agent"]
        result = CliRunner().invoke(cli_app, argv, env={"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None})
        assert result.exit_code == 0, result.output
        return {(h["evidence_id"], h["version"]) for h in json.loads(result.output)["hits"]}

    assert cli_search(LONG_AGO) == set()
    assert cli_search(at.middle) == {("ferry", 1), ("memory:u-1/pet", 1)}
