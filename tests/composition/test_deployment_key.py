"""The deployment key (receipt.key) is made once with its archive, audited, rotated only on
purpose with the old key kept for verification, and never made up again when it is lost: an
existing folder without it is refused (Python and CLI) with nothing written."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    Principal,
    ReceiptInvalid,
    ReceiptKeyMissing,
    Role,
    Sensitivity,
)
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.system.hashing_embedder import HashingEmbedder
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
ADMIN = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


def key_events(folder: Path) -> list[tuple[str, str, str, str, dict[str, object]]]:
    """The deployment chain's rows, read straight from the database file."""
    db = sqlite3.connect(folder / "archive.db")
    try:
        rows = db.execute(
            "SELECT tenant_id, actor, action, target, detail_json FROM audit_events "
            "WHERE action LIKE 'receipt_key%' ORDER BY tenant_id, seq"
        ).fetchall()
    finally:
        db.close()
    return [(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]


def audit_rows(folder: Path) -> int:
    db = sqlite3.connect(folder / "archive.db")
    try:
        return int(db.execute("SELECT count(*) FROM audit_events").fetchone()[0])
    finally:
        db.close()


def key_id_of(secret: str) -> str:
    from mnemo_sea.archive import ReceiptKey

    return ReceiptKey.from_text(secret).key_id


def test_a_new_folder_gets_its_key_with_an_audit_event(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        key_id = m.archive.store.receipt_key.key_id
    key_file = folder / "receipt.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_id_of(key_file.read_text()) == key_id
    assert key_events(folder) == [
        ("_deployment", "operator", "receipt_key_create", f"receipt_key:{key_id}", {"file": "receipt.key"})
    ]
    # Opening it again reads the same key and records nothing more.
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        assert m.archive.store.receipt_key.key_id == key_id
    assert len(key_events(folder)) == 1


def test_a_lost_key_is_refused_on_an_existing_folder_and_nothing_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [EvidenceInput(evidence_id="kb:1", body="to delete", source="doc")])
        m.delete_evidence(ADMIN, "kb:1")
    (folder / "receipt.key").unlink()
    before = audit_rows(folder)

    with pytest.raises(ReceiptKeyMissing) as lost:
        Mnemo.open(folder, embedder=HashingEmbedder())
    assert lost.value.code == "receipt_key_missing"
    assert lost.value.detail["key_file"] == str(folder / "receipt.key")
    assert "backup" in lost.value.message and "rotate-receipt-key" in lost.value.message
    assert not (folder / "receipt.key").exists()  # never made up again
    assert audit_rows(folder) == before

    # The archive alone opens (key management needs it) but signs and verifies nothing.
    archive = Archive.open(str(folder / "archive.db"))
    try:
        archive.put_evidence(AGENT, EvidenceInput(evidence_id="kb:2", body="kept", source="doc"))
        with pytest.raises(ReceiptKeyMissing):
            archive.delete_evidence(ADMIN, "kb:2")
        with pytest.raises(ReceiptKeyMissing):
            archive.audit_anchor(ADMIN)
        assert archive.get_evidence(AGENT, "kb:2")[0].evidence_id == "kb:2"  # the deletion rolled back
    finally:
        archive.close()
    assert not (folder / "receipt.key").exists()


def test_the_cli_refuses_a_folder_whose_key_is_lost(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()):
        pass
    (folder / "receipt.key").unlink()
    before = audit_rows(folder)
    env = {"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None}
    runner = CliRunner()
    for argv in (["init"], ["search", "anything"]):
        refused = runner.invoke(cli_app, [*argv, "--data-dir", str(folder), "--embedder", "hashing"], env=env)
        assert refused.exit_code == 7, (argv, refused.output)
        assert refused.stderr.startswith("error: the deployment key") and "Traceback" not in refused.output
        assert "is missing" in refused.stderr
    as_json = runner.invoke(
        cli_app, ["init", "--data-dir", str(folder), "--embedder", "hashing", "--json"], env=env
    )
    error = json.loads(as_json.stdout)["error"]
    assert (error["code"], error["exit_code"]) == ("receipt_key_missing", 7)
    assert error["detail"]["key_file"] == str(folder / "receipt.key")
    assert not (folder / "receipt.key").exists() and audit_rows(folder) == before


def test_rotation_keeps_the_old_key_for_what_it_signed(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [EvidenceInput(evidence_id="kb:1", body="to delete", source="doc")])
        old_receipt = m.delete_evidence(ADMIN, "kb:1")
        old_anchor = m.archive.audit_anchor(ADMIN)
    old_secret = (folder / "receipt.key").read_text().strip()

    rotated = CliRunner().invoke(
        cli_app,
        ["keys", "rotate-receipt-key", "--data-dir", str(folder), "--json"],
        env={"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None},
    )
    assert rotated.exit_code == 0, rotated.output
    report = json.loads(rotated.stdout)
    new_secret = (folder / "receipt.key").read_text().strip()
    assert new_secret != old_secret and report["key_id"] == key_id_of(new_secret)
    assert (report["previous_key_id"], report["previous_key_kept"]) == (old_receipt.key_id, True)
    # Raw state: the old secret is kept (private) beside the new one, and the rotation audited.
    retired = folder / "receipt.key.retired"
    assert retired.read_text().split() == [old_secret]
    assert stat.S_IMODE(retired.stat().st_mode) == 0o600
    assert key_events(folder)[-1] == (
        "_deployment",
        "operator",
        "receipt_key_rotate",
        f"receipt_key:{report['key_id']}",
        {"file": "receipt.key", "previous_key_id": old_receipt.key_id, "previous_key_kept": True},
    )

    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        assert m.verify_deleted(ADMIN, old_receipt).ok
        assert m.archive.verify_audit(ADMIN, [old_anchor, old_receipt]).ok
        m.ingest(AGENT, [EvidenceInput(evidence_id="kb:2", body="later", source="doc")])
        new_receipt = m.delete_evidence(ADMIN, "kb:2")
        assert new_receipt.key_id == report["key_id"] != old_receipt.key_id
        # The retired key verifies only: a receipt it did not sign is still refused.
        from dataclasses import replace

        with pytest.raises(ReceiptInvalid) as forged:
            m.verify_deleted(ADMIN, replace(new_receipt, key_id=old_receipt.key_id))
        assert forged.value.check == "signature"


def test_rotation_after_a_loss_starts_a_new_key_and_says_the_old_one_is_gone(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [EvidenceInput(evidence_id="kb:1", body="to delete", source="doc")])
        old_receipt = m.delete_evidence(ADMIN, "kb:1")
    (folder / "receipt.key").unlink()
    from mnemo_sea.system.opening import rotate_receipt_key
    from mnemo_sea.system.settings import MnemoSettings

    rotation = rotate_receipt_key(MnemoSettings(data_dir=folder, database_url=None))
    assert (rotation.previous_key_id, rotation.retired_key_ids) == (None, ())
    assert key_events(folder)[-1][2:] == (
        "receipt_key_rotate",
        f"receipt_key:{rotation.key_id}",
        {"file": "receipt.key", "previous_key_id": None, "previous_key_kept": False},
    )
    assert not (folder / "receipt.key.retired").exists()
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        with pytest.raises(ReceiptInvalid) as foreign:
            m.verify_deleted(ADMIN, old_receipt)
        assert foreign.value.check == "foreign_key"


def test_rotating_a_folder_without_an_archive_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli_app,
        ["keys", "rotate-receipt-key", "--data-dir", str(tmp_path / "none")],
        env={"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None},
    )
    assert result.exit_code == 2 and "mnemo-sea init" in result.stderr
    assert not (tmp_path / "none").exists()
