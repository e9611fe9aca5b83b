"""`mnemo-sea memory ...` in process: precedence conflicts, checked --derived-from, expired
status, purge-expired and forget (exit codes as the CLI documents them)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from mnemo_sea.cli.app import app

AGENT = ["--tenant", "clinic-a", "--subject", "agent-1", "--role", "agent"]
ADMIN = ["--tenant", "clinic-a", "--subject", "admin-1", "--role", "admin", "--clearance", "restricted"]
ENV = {"MNEMO_EMBEDDER": "hashing", "MNEMO_DATA_DIR": "", "MNEMO_DEBUG": ""}


def cli(folder: Path, *args: str, who: list[str] = AGENT) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args, "--data-dir", str(folder), *who], env=ENV)
    return result.exit_code, result.stdout, result.stderr


def ok(folder: Path, *args: str, who: list[str] = AGENT) -> Any:
    code, out, err = cli(folder, *args, "--json", who=who)
    assert code == 0, out + err
    return json.loads(out)


def test_memory_precedence_derived_from_ttl_purge_and_forget(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    ok(folder, "init")
    ok(folder, "memory", "remember", "u-7", "tz", "Asia/Shanghai", "--provenance", "user_correction")

    # A user_claim does not silently replace the user's correction: exit 5, naming the current fact.
    code, out, err = cli(folder, "memory", "remember", "u-7", "tz", "UTC", "--provenance", "user_claim")
    assert code == 5, out + err
    assert "does not supersede the current user_correction (version 1)" in err
    assert ok(folder, "memory", "current", "u-7", "tz")["value"] == "Asia/Shanghai"

    # --derived-from must name a source that exists: exit 3, naming it.
    code, out, err = cli(
        folder,
        "memory",
        "remember",
        "u-7",
        "k",
        "v",
        "--provenance",
        "document",
        "--derived-from",
        "evidence:nope",
    )
    assert code == 3 and "evidence:nope" in err, out + err

    # TTL: expired shows as expired until purge-expired (admin) deletes it.
    ok(
        folder,
        "memory",
        "remember",
        "u-7",
        "code",
        "4417",
        "--provenance",
        "user_claim",
        "--ttl-seconds",
        "1",
    )
    time.sleep(1.1)
    history = ok(folder, "memory", "history", "u-7", "code")
    assert [v["status"] for v in history["versions"]] == ["expired"]
    assert cli(folder, "memory", "current", "u-7", "code")[0] == 3
    assert cli(folder, "memory", "purge-expired")[0] == 4  # agents may not purge
    purged = ok(folder, "memory", "purge-expired", who=ADMIN)
    assert purged["purged"] == 1 and purged["receipt"]["target"] == "memory:expired"
    assert purged["receipt"]["memory_facts"] == [["u-7", "code", 1]]
    assert ok(folder, "memory", "history", "u-7", "code")["versions"] == []
    assert ok(folder, "memory", "purge-expired", who=ADMIN) == {"purged": 0, "receipt": None}
    code, out, _ = cli(folder, "memory", "purge-expired", who=ADMIN)
    assert code == 0 and "purged: 0" in out and "None" not in out

    # forget: every version goes, with a receipt verify-deleted proves; then there is nothing to forget.
    receipt_file = tmp_path / "forget.json"
    code, out, err = cli(folder, "memory", "forget", "u-7", "tz", "--receipt-out", str(receipt_file))
    assert code == 0 and "u-7/tz@1" in out, out + err
    assert ok(folder, "verify-deleted", str(receipt_file), who=ADMIN)["ok"] is True
    assert ok(folder, "memory", "history", "u-7", "tz")["versions"] == []
    code, _, err = cli(folder, "memory", "forget", "u-7", "tz")
    assert code == 3 and "u-7/tz" in err
