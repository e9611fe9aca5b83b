"""The audit's repro, as a user meets it: another process holds a read snapshot of `archive.db`
while `mnemo-sea delete` runs. The deleted text stays in `archive.db-wal`; the receipt says
`erasure: pending_reader` and `verify-deleted` exits 1 with `status: pending_reader` instead of
saying ok. Once the reader ends its transaction (its connection still open), `verify-deleted`
empties the log and says ok, and no file of the data folder holds a byte of the text.

Processes are sequenced through pipes (tests/snapshots.py), never by time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from leftovers import files_holding, new_marker
from snapshots import SnapshotReader

CLI = [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()"]
ADMIN = ["--tenant", "clinic-a", "--subject", "admin-1", "--role", "admin", "--clearance", "restricted"]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_EMBEDDER"] = "hashing"
    return subprocess.run(
        [*CLI, *map(str, args), "--json"], capture_output=True, text=True, timeout=300, check=False, env=env
    )


def answer(proc: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def test_verify_deleted_says_pending_reader_until_the_reader_lets_go_then_ok(tmp_path: Path) -> None:
    folder, marker = tmp_path / "data", new_marker()
    answer(run("init", "--data-dir", folder))
    docs = tmp_path / "docs.jsonl"
    doc = {"evidence_id": "note:private", "source": "scratch", "body": f"private note {marker}"}
    docs.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    receipt_file = tmp_path / "receipt.json"
    with SnapshotReader(folder / "archive.db") as reader:
        # The snapshot began before the note was stored: no checkpoint can take it off the log.
        assert answer(run("ingest", docs, "--data-dir", folder, *ADMIN))["stored"] == 1
        assert files_holding(folder, marker) == ["archive.db-wal"]

        receipt = answer(
            run(
                "delete",
                "evidence",
                "note:private",
                "--receipt-out",
                receipt_file,
                "--data-dir",
                folder,
                *ADMIN,
            )
        )
        assert receipt["erasure"] == "pending_reader"
        assert files_holding(folder, marker) == ["archive.db-wal"]
        pending = answer(run("verify-deleted", receipt_file, "--data-dir", folder, *ADMIN), code=1)
        assert (pending["ok"], pending["status"], pending["erasure"]) == (
            False,
            "pending_reader",
            "pending_reader",
        )
        assert pending["archive_leftovers"] == [] and "archive.db-wal" in pending["erasure_detail"]
        assert files_holding(folder, marker) == ["archive.db-wal"]

        reader.release()
        done = answer(run("verify-deleted", receipt_file, "--data-dir", folder, *ADMIN))
        assert (done["ok"], done["status"], done["erasure"], done["erasure_detail"]) == (
            True,
            "ok",
            "done",
            "",
        )
        assert files_holding(folder, marker) == []
