"""A retraction stands when the unchanged source is ingested again (a nightly sync): content
equal to a retracted version is refused per record (all or nothing by default, left out and
listed with --partial), never stored as a new active version; changed content is a new version
as always, and `reactivate` brings the retracted text back on purpose."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mnemo_sea.archive import EvidenceInput, Principal, RetractedContent, Role, Sensitivity
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
ENV = {"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None}


def versions(folder: Path, evidence_id: str) -> list[tuple[int, str]]:
    """(version, status) of every row of the record, read straight from the database file."""
    db = sqlite3.connect(folder / "archive.db")
    try:
        rows = db.execute(
            "SELECT version, status FROM evidence WHERE tenant_id = ? AND evidence_id = ? ORDER BY version",
            (AGENT.tenant_id, evidence_id),
        ).fetchall()
    finally:
        db.close()
    return [(int(v), str(s)) for v, s in rows]


def doc(evidence_id: str, body: str) -> EvidenceInput:
    return EvidenceInput(evidence_id=evidence_id, body=body, source="kb")


def test_ingesting_retracted_content_again_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [doc("kb:dose", "Amoxicillin 50 mg/kg"), doc("kb:other", "kept")])
        m.retract(AGENT, "kb:dose", "wrong dose")
        with pytest.raises(RetractedContent) as refused:
            m.ingest(AGENT, [doc("kb:new", "a new one"), doc("kb:dose", "Amoxicillin 50 mg/kg")])
        assert [(s.result_id, s.status) for s in refused.value.targets] == [
            ("kb:new", "ok"),
            ("kb:dose", "retracted"),
        ]
        assert refused.value.code == "retracted_content"
        with pytest.raises(RetractedContent) as single:  # one record at a time too
            m.put_evidence(AGENT, doc("kb:dose", "Amoxicillin 50 mg/kg"))
        # The way back is named where it exists (put_evidence, REST and MCP have no such field).
        message = single.value.message
        assert "ingest --reactivate" in message and "reactivate=True in Mnemo.ingest" in message
        assert "store it again with reactivate" not in message
        assert "kb:dose" not in {h.evidence_id for h in m.search(AGENT, "amoxicillin").hits}
    assert versions(folder, "kb:dose") == [(1, "retracted")]
    assert versions(folder, "kb:new") == []  # the batch is all or nothing


def test_changed_content_is_a_new_version_and_reactivate_brings_the_text_back(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [doc("kb:dose", "Amoxicillin 50 mg/kg")])
        m.retract(AGENT, "kb:dose", "wrong dose")
        m.ingest(AGENT, [doc("kb:dose", "Amoxicillin 20 mg/kg")])  # corrected: as today
        assert versions(folder, "kb:dose") == [(1, "retracted"), (2, "active")]
        m.retract(AGENT, "kb:dose", "withdrawn")
        report = m.ingest(AGENT, [doc("kb:dose", "Amoxicillin 50 mg/kg")], reactivate=True)
        assert report.new_versions == 1
        assert "kb:dose" in {h.evidence_id for h in m.search(AGENT, "amoxicillin").hits}
        # Once reactivated, the same content again is unchanged, not refused.
        assert m.ingest(AGENT, [doc("kb:dose", "Amoxicillin 50 mg/kg")]).unchanged == 1
    assert versions(folder, "kb:dose") == [(1, "retracted"), (2, "retracted"), (3, "active")]


def test_the_cli_refuses_the_unchanged_folder_and_partial_lists_what_it_left_out(tmp_path: Path) -> None:
    folder, source = tmp_path / "data", tmp_path / "notes"
    source.mkdir()
    (source / "dose.md").write_text("Amoxicillin 50 mg/kg\n", encoding="utf-8")
    (source / "diet.md").write_text("Renal diet for cats\n", encoding="utf-8")
    common = ["--data-dir", str(folder), "--embedder", "hashing", "--tenant", "clinic-a", "--quiet"]
    runner = CliRunner()
    assert runner.invoke(cli_app, ["init", *common[:4]], env=ENV).exit_code == 0
    first = runner.invoke(cli_app, ["ingest", str(source), *common, "--json"], env=ENV)
    assert first.exit_code == 0, first.output
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.retract(AGENT, "doc:dose.md", "wrong dose")
    (source / "diet.md").write_text("Renal diet for cats, low phosphorus\n", encoding="utf-8")

    refused = runner.invoke(cli_app, ["ingest", str(source), *common, "--json"], env=ENV)
    assert refused.exit_code == 5, refused.output
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "retracted_content"
    assert {t["result_id"]: t["status"] for t in error["detail"]["targets"]} == {
        "doc:diet.md": "ok",
        "doc:dose.md": "retracted",
    }
    assert "--partial" in refused.stderr and "--reactivate" in refused.stderr
    assert versions(folder, "doc:dose.md") == [(1, "retracted")]
    assert versions(folder, "doc:diet.md") == [(1, "active")]  # nothing stored

    partial = runner.invoke(cli_app, ["ingest", str(source), *common, "--partial", "--json"], env=ENV)
    assert partial.exit_code == 8, partial.output  # stored the rest, left the retracted one out
    report = json.loads(partial.stdout)
    assert [r["evidence_id"] for r in report["retracted"]] == ["doc:dose.md"]
    assert "retracted" in report["retracted"][0]["message"]
    assert report["new_versions"] == 1 and report["stored"] == 1
    assert versions(folder, "doc:dose.md") == [(1, "retracted")]
    assert versions(folder, "doc:diet.md") == [(1, "superseded"), (2, "active")]
    people = runner.invoke(cli_app, ["ingest", str(source), *common, "--partial"], env=ENV)
    assert people.exit_code == 8 and "retracted:\n" in people.stdout and "doc:dose.md" in people.stdout

    again = runner.invoke(cli_app, ["ingest", str(source), *common, "--reactivate", "--json"], env=ENV)
    assert again.exit_code == 0, again.output
    assert versions(folder, "doc:dose.md") == [(1, "retracted"), (2, "active")]
