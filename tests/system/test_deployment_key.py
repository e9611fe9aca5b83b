"""The deployment key (receipt.key) is made once with its archive, audited, rotated only on
purpose with the old key kept for verification, and never made up again when it is lost: an
existing folder without it is refused (Python and CLI) with nothing written, not even an audit
event; a first open that fails leaves the folder new again."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Callable
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
    StoreUnavailable,
)
from mnemo_sea.archive.storage import deployment_key
from mnemo_sea.archive.storage import store as store_module
from mnemo_sea.archive.storage.store import ArchiveStore
from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

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


def folder_state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the folder: its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def test_the_archive_alone_refuses_a_lost_key_before_opening_the_database(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()):
        pass
    (folder / "receipt.key").unlink()
    before = folder_state(folder)

    with pytest.raises(ReceiptKeyMissing) as lost:
        Archive.open(str(folder / "archive.db"))
    assert lost.value.detail["key_file"] == str(folder / "receipt.key")
    # Raw state: not a byte of the folder changed (no migration ran, no -wal was made).
    assert folder_state(folder) == before


def test_cli_commands_on_the_archive_alone_refuse_a_lost_key_and_write_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()):
        pass
    (folder / "receipt.key").unlink()
    before = folder_state(folder)
    env = {"MNEMO_DATABASE_URL": None, "MNEMO_DATA_DIR": None}
    admin = ["--tenant", "clinic-a", "--subject", "admin-1", "--role", "admin", "--clearance", "restricted"]
    runner = CliRunner()
    for argv in (
        ["keys", "create", "--tenant", "clinic-a", "--subject", "bot", "--role", "agent"],
        ["audit", "anchor", "--out", str(tmp_path / "anchor.json"), *admin],
        ["audit", "verify", *admin],
    ):
        refused = runner.invoke(cli_app, [*argv, "--data-dir", str(folder)], env=env)
        assert refused.exit_code == 7, (argv, refused.output)
        assert "is missing" in refused.stderr and "Traceback" not in refused.output
    assert folder_state(folder) == before
    assert not (tmp_path / "anchor.json").exists()


def test_a_key_lost_while_open_writes_nothing_to_the_tenants_audit_chain(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        m.ingest(AGENT, [EvidenceInput(evidence_id=f"kb:{i}", body=f"doc {i}", source="doc") for i in (1, 2)])
        m.record(AGENT, "s1", "search", "a result", owner="person-1")
        receipt = m.delete_evidence(ADMIN, "kb:1")
    archive = Archive.open(str(folder / "archive.db"))  # reads its key at the first signature
    try:
        (folder / "receipt.key").unlink()
        before = audit_rows(folder)
        refusals: dict[str, Callable[[], object]] = {
            "delete_evidence": lambda: archive.delete_evidence(ADMIN, "kb:2"),
            "delete_session": lambda: archive.delete_session(ADMIN, "s1"),
            "delete_owner": lambda: archive.delete_owner(ADMIN, "person-1"),
            "audit_anchor": lambda: archive.audit_anchor(ADMIN),
            "verify_deleted": lambda: archive.verify_deleted(ADMIN, receipt),
        }
        for name, call in refusals.items():
            with pytest.raises(ReceiptKeyMissing):
                call()
            # Raw state: the refusal ("Nothing was changed") adds no event to the tenant's chain.
            assert audit_rows(folder) == before, name
        assert archive.get_evidence(AGENT, "kb:2")[0].evidence_id == "kb:2"  # the deletion rolled back
    finally:
        archive.close()
    assert not (folder / "receipt.key").exists()


@pytest.mark.parametrize("failing", ["migration", "audit"])
def test_a_failed_first_open_leaves_a_folder_that_opens_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    seen: list[str] = []

    def migration_fails(store: ArchiveStore) -> None:
        with store.engine.begin() as conn:  # SQLite has made the file (and its -wal) by now
            conn.exec_driver_sql("CREATE TABLE half_made (x INTEGER)")
        seen.extend(p.name for p in folder.iterdir())
        raise StoreUnavailable("the disk is full")

    def audit_fails(*_args: object) -> int:
        seen.extend(p.name for p in folder.iterdir())
        raise StoreUnavailable("the disk is full")

    if failing == "migration":
        monkeypatch.setattr(store_module, "upgrade", migration_fails)
    else:
        monkeypatch.setattr(deployment_key, "record_created", audit_fails)
    with pytest.raises(StoreUnavailable):
        Mnemo.open(folder, embedder=HashingEmbedder())
    assert {"archive.db", "receipt.key"} <= set(seen)  # the failure came after both were made
    # Raw state: the files that first open made are gone, so the folder is new again.
    assert list(folder.iterdir()) == []

    monkeypatch.undo()
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        key_id = m.archive.store.receipt_key.key_id
    assert [e[2:4] for e in key_events(folder)] == [("receipt_key_create", f"receipt_key:{key_id}")]


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
    from mnemo_sea.system.wiring.settings import MnemoSettings

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
