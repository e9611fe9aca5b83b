"""The library reads what its REST client reads, by the same names and parameters: sessions,
results, evidence (one version, its history), summaries. None of them changes anything."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from fakes import HashingEmbedder
from sqlalchemy import func, select

from mnemo_sea.archive import (
    EvidenceInput,
    Forbidden,
    IntegrityFailure,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import MnemoClient
from mnemo_sea.system.mnemo import Mnemo

READS = (
    "list_sessions",
    "session_info",
    "list_results",
    "get_result",
    "get_evidence",
    "evidence_history",
    "get_summary",
)
# What only the client has: it checks the bytes it received against the hash it expected.
CLIENT_ONLY = {"get_evidence": {"expected_sha256"}, "get_result": {"expected_sha256"}}
AGENT = Principal("clinic", "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def test_the_library_has_the_clients_reads_with_the_same_parameters() -> None:
    for name in READS:
        library = inspect.signature(getattr(Mnemo, name)).parameters
        client = inspect.signature(getattr(MnemoClient, name)).parameters
        ours = [p for p in library if p not in ("self", "principal")]
        theirs = [p for p in client if p != "self" and p not in CLIENT_ONLY.get(name, set())]
        assert ours == theirs, name
        for p in ours:
            assert library[p].default == client[p].default, (name, p)


def test_the_reads_answer_what_was_written_and_write_nothing(tmp_path: Path) -> None:
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        mnemo.record(AGENT, "visit-1", "lab", "ALT 112", owner="pet-7")
        mnemo.record(AGENT, "visit-1", "xray", "clear")
        mnemo.record(AGENT, "visit-2", "lab", "ALT 40", owner="pet-8")
        mnemo.ingest(AGENT, [EvidenceInput("dose 10 mg/kg", "formulary", "drug:amox")])
        mnemo.ingest(AGENT, [EvidenceInput("dose 12 mg/kg", "formulary", "drug:amox")])
        made = mnemo.create_summary(AGENT, "ALT high at the first visit", ["result:visit-1/r1"])

        def rows() -> list[int]:
            with mnemo.archive.store.read() as conn:
                tables = (t.sessions, t.tool_results, t.evidence, t.audit_events)
                return [conn.execute(select(func.count()).select_from(x)).scalar_one() for x in tables]

        before = rows()
        sessions = mnemo.list_sessions(AGENT)
        assert [(s.session_id, s.owner, s.results) for s in sessions] == [
            ("visit-1", "pet-7", 2),
            ("visit-2", "pet-8", 1),
        ]
        assert [s.session_id for s in mnemo.list_sessions(AGENT, limit=1, offset=1)] == ["visit-2"]
        assert [r.result_id for r in mnemo.list_results(AGENT, "visit-1")] == ["r1", "r2"]
        assert [r.result_id for r in mnemo.list_results(AGENT, "visit-1", offset=1, limit=1)] == ["r2"]
        assert mnemo.session_info(AGENT, "visit-1") == sessions[0]
        with pytest.raises(NotFound):  # another tenant's session is missing, like one never made
            mnemo.session_info(Principal("zoo", "agent-1", frozenset({Role.AGENT})), "visit-1")
        record, body = mnemo.get_evidence(AGENT, "drug:amox", version=1, with_content=True)
        assert (record.version, record.status, body) == (1, "superseded", b"dose 10 mg/kg")
        assert [r.version for r in mnemo.evidence_history(AGENT, "drug:amox")] == [1, 2]
        assert mnemo.get_summary(AGENT, made.summary_id).text == made.text
        assert rows() == before  # reads leave no row behind (sessions, results, evidence, audit events)


def test_get_result_looks_without_appending_and_checks_the_hash(tmp_path: Path) -> None:
    reader = Principal("clinic", "pet-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    with Mnemo.open(tmp_path, embedder=HashingEmbedder()) as mnemo:
        report = "line 1\nif depth > 0: <b>&\nline 3\n"
        mnemo.record(AGENT, "visit-1", "lab", report, owner="pet-7")
        mnemo.archive_results(AGENT, "visit-1", [("r1", "lab report")])
        result, content = mnemo.get_result(AGENT, "visit-1", "r1", with_content=True)
        assert (result.state, content) == ("archived", report.encode())  # exact bytes, unescaped
        assert mnemo.get_result(AGENT, "visit-1", "r1") == (result, None)
        with pytest.raises(Forbidden):  # an archived original comes back to whoever may recover it
            mnemo.get_result(reader, "visit-1", "r1", with_content=True)
        admin = Principal("clinic", "admin", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
        denied = [(e.actor, e.action, e.target) for e in mnemo.archive.audit_events(admin)]
        assert ("pet-7", "denied", "session:visit-1/r1") in denied  # refused, and audited
        assert mnemo.get_result(reader, "visit-1", "r1")[0].note == "lab report"
        copy = mnemo.recover(AGENT, "visit-1", "r1", lines=(2, 2)).appended
        assert (
            mnemo.get_result(AGENT, "visit-1", copy.result_id, with_content=True)[1]
            == b"if depth > 0: <b>&\n"
        )
        assert [r.result_id for r in mnemo.list_results(AGENT, "visit-1")] == ["r1", "r2"]  # no new copy
        with pytest.raises(NotFound):
            mnemo.get_result(AGENT, "visit-1", "r9")
        with mnemo.archive.store.write() as conn:  # the original rots on disk
            conn.execute(
                t.blobs.update().where(t.blobs.c.sha256 == result.content_sha256).values(content=b"x")
            )
        with pytest.raises(IntegrityFailure):
            mnemo.get_result(AGENT, "visit-1", "r1", with_content=True)
        assert mnemo.get_result(AGENT, "visit-1", "r1")[1] is None  # the record alone reads no blob
