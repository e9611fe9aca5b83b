"""The facade commands of `mnemo-sea` as a user runs them: real processes, exit codes, JSON on stdout.

Every process uses the hashing embedder (MNEMO_EMBEDDER=hashing): the real model is not the
subject here and costs seconds per process to load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()"]
AGENT = ["--tenant", "clinic-a", "--subject", "agent-1", "--role", "agent"]
ADMIN = ["--tenant", "clinic-a", "--subject", "admin-1", "--role", "admin", "--clearance", "restricted"]

DOCS = [
    {
        "evidence_id": "policy:delivery:2026-10",
        "source": "shop-policies",
        "scope": "policy",
        "locator": "section 2",
        "body": "Cross-border orders ship within 10 business days; domestic orders within 2 days.",
    },
    {
        "evidence_id": "drug:carprofen:label",
        "source": "clinic-formulary",
        "scope": "drug_label",
        "locator": "page 1",
        "body": "Carprofen is not for use in cats. Dogs: 4.4 mg per kg once daily.",
    },
    {
        "evidence_id": "note:to-delete",
        "source": "scratch",
        "scope": "notes",
        "locator": "line 1",
        "body": "Zanzibar warehouse inventory count is seventeen crates.",
    },
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_EMBEDDER"] = "hashing"
    env.update(extra)
    return env


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, check=False, env=env or _env()
    )


def run_many(*commands: list[str | Path]) -> list[subprocess.CompletedProcess[str]]:
    """Independent commands, run concurrently (each process spends most of its time importing)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: run(*args), commands))


def ok_json(*args: str | Path) -> Any:
    proc = run(*args, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The process failed with `code` and said so in exactly one `error:` line, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def write_jsonl(path: Path, rows: list[dict[str, Any]] | list[str]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8"
    )
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder, created by `init`, holding DOCS for tenant clinic-a."""
    root = tmp_path_factory.mktemp("cli")
    folder = root / "data"
    created = ok_json("init", "--data-dir", folder)
    assert created["created"] is True and created["embedder"] == "mnemo-sea/hashing-bow-64"
    assert (folder / "archive.db").is_file() and (folder / "index").is_dir()
    docs = write_jsonl(root / "docs.jsonl", DOCS)
    report = ok_json("ingest", docs, "--data-dir", folder, *AGENT)
    assert report["stored"] == 3 and report["new_versions"] == 3 and report["unchanged"] == 0
    assert report["indexed"] == 3 and report["problems"] == []
    assert report["batches"] == [
        {"batch": 1, "documents": [1, 3], "stored": 3, "new_versions": 3, "unchanged": 0,
         "indexed": 3, "index_pending": 0}
    ]  # fmt: skip
    assert report["records"] == [[d["evidence_id"], 1] for d in DOCS]
    return folder


# ---- happy paths -----------------------------------------------------------------------------------


def test_reingest_is_unchanged_and_search_returns_the_exact_original(data: Path, tmp_path: Path) -> None:
    again = ok_json("ingest", write_jsonl(tmp_path / "d.jsonl", DOCS[:2]), "--data-dir", data, *AGENT)
    assert again["stored"] == 2 and again["unchanged"] == 2 and again["new_versions"] == 0

    found = ok_json("search", "cross-border orders ship", "--data-dir", data, *AGENT, "--mode", "bm25")
    assert found["status"] == "results"
    top = found["hits"][0]
    assert top["evidence_id"] == "policy:delivery:2026-10" and top["version"] == 1
    assert top["snippet"] == DOCS[0]["body"] and top["locator"] == "section 2" and top["bm25_rank"] == 1

    scoped = ok_json(
        "search",
        "cats dogs orders",
        "--scope",
        "drug_label",
        "--kind",
        "knowledge",
        "--data-dir",
        data,
        *AGENT,
    )
    assert {h["evidence_id"] for h in scoped["hits"]} == {"drug:carprofen:label"}

    other_tenant = ok_json("search", "cross-border orders", "--data-dir", data, "--tenant", "shop-b")
    assert other_tenant["status"] == "no_match" and other_tenant["hits"] == []


def test_session_record_archive_live_recover(data: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"GET /orders/O-1042 -> timeout after 30 s\n" * 50)
    first = ok_json("session", "record", "s-1", "logistics.query", "--file", log, "--data-dir", data, *AGENT)
    assert first["result_id"] == "r1" and first["state"] == "live" and first["size"] == log.stat().st_size
    assert first["media_type"] == "text/plain; charset=utf-8"  # a text file is text, not octet-stream
    second = ok_json(
        "session", "record", "s-1", "inventory.check", "--content", "stock: 3 units",
        "--policy-class", "inventory", "--data-dir", data, *AGENT,
    )  # fmt: skip
    assert second["result_id"] == "r2"

    receipt = ok_json(
        "session", "archive", "s-1", "r1=logistics timed out, nothing useful", "r2=stock was 3",
        "--idempotency-key", "k-1", "--data-dir", data, *AGENT,
    )  # fmt: skip
    assert receipt["archived"] == ["r1", "r2"] and receipt["replayed"] is False

    live = ok_json("session", "live", "s-1", "--data-dir", data, *AGENT)
    assert [(i["result_id"], i["state"]) for i in live["items"]] == [("r1", "archived"), ("r2", "archived")]
    assert live["items"][0]["note"] == "logistics timed out, nothing useful"
    assert "GET /orders" not in live["text"]  # stubs, not the archived originals

    recovered_log = ok_json("session", "recover", "s-1", "r1", "--data-dir", data, *AGENT)
    assert recovered_log["content"] == log.read_text() and recovered_log["appended"] == "r3"
    assert "[binary original" not in recovered_log["rendered"] and "GET /orders" in recovered_log["rendered"]
    assert recovered_log["staleness_warning"] is None  # a logistics log is not time-sensitive

    line = b"GET /orders/O-1042 -> timeout after 30 s\n"
    excerpt = ok_json("session", "recover", "s-1", "r1", "--lines", "3", "4", "--data-dir", data, *AGENT)
    assert excerpt["content"] == (line * 2).decode() and excerpt["appended"] == "r4"
    assert excerpt["excerpt"] == {
        "start": 2 * len(line),
        "end": 4 * len(line),
        "first_line": 3,
        "last_line": 4,
    }
    assert excerpt["size"] == log.stat().st_size  # the whole original's, which the excerpt is cut from
    outside = run("session", "recover", "s-1", "r1", "--byte-range", "0", "99999", "--data-dir", data, *AGENT)
    one_line_error(outside, 2, "byte_range", f"r1 has 50 lines ({50 * len(line)} bytes)")


def test_session_curate_and_recall(data: Path, tmp_path: Path) -> None:
    log = tmp_path / "deploy.log"
    lines = [f"2026-12-01T10:00:{n % 60:02d}Z INFO step {n} ok" for n in range(300)]
    log.write_text(
        "\n".join([*lines, "2026-12-01T10:05:00Z ERROR disk full on /var/lib/pg"]), encoding="utf-8"
    )
    common = ["--data-dir", data, *AGENT]
    ok_json("session", "record", "s-9", "deploy.logs", "--file", log, *common)
    ok_json("session", "record", "s-9", "ask_owner", "--content", "ok", *common)
    ok_json("session", "record", "s-9", "notes", "--content", "next: check disk", *common)
    curated = ok_json("session", "curate", "s-9", "--large-result-tokens", "500", *common)
    assert [a["result_id"] for a in curated["archived"]] == ["r1"]
    assert "ERROR disk full on /var/lib/pg" in curated["archived"][0]["note"]
    found = ok_json("session", "recall", "s-9", "disk full /var/lib/pg", "--around", "0", *common)
    assert found["status"] == "recovered" and found["recovered"]["content"].endswith(
        "disk full on /var/lib/pg"
    )
    missing = ok_json("session", "recall", "s-9", "vet approval carprofen", *common)
    assert missing["status"] == "not_found" and missing["checked"]
    text = run("session", "curate", "s-9", "--need", "disk full", *common)
    assert text.returncode == 0 and "in view: r4 lines 301-301" in text.stdout  # the original's line
    wide = tmp_path / "wide.log"  # every line holds "step ok": more than 32 KiB of equals
    wide.write_text("\n".join(f"2026-12-01T10:00:{n % 60:02d}Z INFO step {n} ok" for n in range(2_000)))
    ok_json("session", "record", "s-8", "deploy.logs", "--file", wide, *common)
    ok_json("session", "archive", "s-8", "r1=deploy log", *common)
    alike = run("session", "recall", "s-8", "step ok", "--around", "0", *common)
    assert alike.returncode == 0, alike.stderr
    assert alike.stdout.startswith("ambiguous: r1 lines 1-2000 hold 'step ok' alike")


def test_memory_remember_current_history(data: Path) -> None:
    common = ["--data-dir", data, *AGENT]
    ok_json("memory", "remember", "u-7", "pet_name", "Dodo", "--provenance", "user_claim", *common)
    corrected = ok_json(
        "memory", "remember", "u-7", "pet_name", "Doudou", "--provenance", "user_correction", *common
    )
    assert corrected["persisted"] is True and corrected["fact"]["version"] == 2
    current = ok_json("memory", "current", "u-7", "pet_name", *common)
    assert current["value"] == "Doudou" and current["provenance"] == "user_correction"
    history = ok_json("memory", "history", "u-7", "pet_name", *common)
    assert [(f["value"], f["status"]) for f in history["versions"]] == [
        ("Dodo", "superseded"),
        ("Doudou", "active"),
    ]


def test_delete_writes_a_receipt_that_verify_deleted_proves(data: Path, tmp_path: Path) -> None:
    receipt_file = tmp_path / "receipt.json"
    receipt = ok_json(
        "delete", "evidence", "note:to-delete", "--receipt-out", receipt_file, "--data-dir", data, *ADMIN
    )
    assert receipt["target"].endswith("note:to-delete") and receipt["evidence_versions"] == [
        ["note:to-delete", 1]
    ]
    assert json.loads(receipt_file.read_text()) == receipt

    assert receipt["erasure"] == "done"  # no other process held the log: its bytes are gone too
    check = ok_json("verify-deleted", receipt_file, "--data-dir", data, *ADMIN)
    assert check == {
        "ok": True,
        "status": "ok",
        "target": receipt["target"],
        "archive_leftovers": [],
        "index_leftovers": [],
        "pending_outbox": 0,
        "erasure": "done",
        "erasure_detail": "",
    }
    after = ok_json("search", "Zanzibar warehouse crates", "--data-dir", data, *AGENT)
    assert "note:to-delete" not in {h["evidence_id"] for h in after["hits"]}


def test_forged_receipts_exit_2_like_rests_422_and_an_anchor_catches_a_rewound_audit_chain(
    tmp_path: Path,
) -> None:
    """The receipt file `delete --receipt-out` writes, edited, is refused as invalid input (exit 2,
    `receipt_invalid`, as REST's 422); `audit anchor --out` lets `audit verify --anchor` see a
    truncation that `audit verify` alone passes (exit 7: the chain is broken)."""
    import sqlite3

    from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
    from mnemo_sea.system.mnemo import Mnemo
    from mnemo_sea.system.receipt_json import receipt_to_dict
    from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

    folder = tmp_path / "data"
    admin = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:  # in-process set-up: no CLI start-ups
        m.ingest(admin, [EvidenceInput(evidence_id="n:1", body="to delete", source="s")])
        receipt = m.delete_evidence(admin, "n:1")
    key_file = folder / "receipt.key"
    assert key_file.is_file() and (key_file.stat().st_mode & 0o777) == 0o600
    good = receipt_to_dict(receipt)
    (tmp_path / "good.json").write_text(json.dumps(good), encoding="utf-8")
    # (An untouched receipt file verifies: test_delete_writes_a_receipt_that_verify_deleted_proves;
    # foreign and unsigned ones: tests/archive/test_receipts.py, the same code path.)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**good, "evidence_versions": [["never-existed", 1]]}), encoding="utf-8")
    refused = run("verify-deleted", forged, "--data-dir", folder, *ADMIN, "--json")
    one_line_error(refused, 2, "altered after it was signed")
    err = json.loads(refused.stdout)["error"]
    assert (err["code"], err["exit_code"], err["detail"]["check"]) == ("receipt_invalid", 2, "signature")

    anchored = ok_json("audit", "anchor", "--out", tmp_path / "anchor.json", "--data-dir", folder, *ADMIN)
    # The head: the deletion, then the refusal above (audited as an integrity failure).
    assert anchored["seq"] == receipt.audit_seq + 1 and anchored["signature"]
    # The attack, straight on the database file: the deletion's event goes, and the head goes back
    # to the event before it (the ingest's, event 1).
    assert receipt.audit_seq == 2
    db = sqlite3.connect(folder / "archive.db")
    with db:
        db.execute("DELETE FROM audit_events WHERE tenant_id = 'clinic-a' AND seq >= ?", (receipt.audit_seq,))
        db.execute(
            "UPDATE audit_heads SET last_seq = seq, last_hash = hash FROM audit_events "
            "WHERE audit_heads.tenant_id = 'clinic-a' AND audit_events.tenant_id = 'clinic-a' "
            "AND audit_events.seq = ?",
            (receipt.audit_seq - 1,),
        )
    db.close()
    forged_anchor = tmp_path / "forged-anchor.json"
    forged_anchor.write_text(
        (tmp_path / "anchor.json").read_text(encoding="utf-8").replace('"signature": "', '"signature": "0'),
        encoding="utf-8",
    )
    alone, with_anchor, with_receipt = run_many(
        ["audit", "verify", "--data-dir", str(folder), *ADMIN, "--json"],
        [
            "audit",
            "verify",
            "--anchor",
            str(tmp_path / "anchor.json"),
            "--data-dir",
            str(folder),
            *ADMIN,
            "--json",
        ],
        [
            "audit",
            "verify",
            "--anchor",
            str(tmp_path / "good.json"),
            "--data-dir",
            str(folder),
            *ADMIN,
            "--json",
        ],
    )
    assert alone.returncode == 0 and json.loads(alone.stdout)["ok"] is True, alone.stderr
    for proc in (with_anchor, with_receipt):
        assert proc.returncode == 7, proc.stderr
        report = json.loads(proc.stdout)
        assert report["ok"] is False and "rewound" in report["problems"][0]
    # An anchor this deployment did not sign, and a receipt whose audit event is gone, are
    # documents the deployment cannot accept (REST's 422): invalid input, not a broken store.
    # One after the other, after the reports above: each rejection appends an audit event (here
    # event 2 again, which the rewound receipt would then find rewritten rather than gone).
    rewound_receipt = run("verify-deleted", tmp_path / "good.json", "--data-dir", folder, *ADMIN, "--json")
    one_line_error(rewound_receipt, 2, "the chain was rewound")
    assert json.loads(rewound_receipt.stdout)["error"]["detail"]["check"] == "unknown_audit_event"
    with_forged_anchor = run("audit", "verify", "--anchor", forged_anchor, "--data-dir", folder, *ADMIN)
    one_line_error(with_forged_anchor, 2, "audit anchor was altered")


def test_fsck_audit_and_citation_eval(data: Path, tmp_path: Path) -> None:
    fsck = ok_json("fsck", "--data-dir", data, *ADMIN)
    assert fsck["ok"] is True and fsck["problems"] == [] and fsck["checked"]["tenants"] >= 1
    repaired = ok_json("fsck", "--repair", "--data-dir", data, *ADMIN)
    assert repaired["ok"] is True
    # --compact rewrites the embedded index with its live points first; fsck then finds it whole.
    compacted = ok_json("fsck", "--compact", "--data-dir", data, *ADMIN)
    assert compacted["ok"] is True and compacted["compacted_points_kept"] > 0
    assert sorted(p.name for p in (data / "index").iterdir() if p.name.startswith("shard")) == ["shard"]

    audit = ok_json("audit", "verify", "--data-dir", data, *ADMIN)
    assert audit["ok"] is True and audit["tenant_id"] == "clinic-a" and audit["events"] > 0

    answers = write_jsonl(
        tmp_path / "answers.jsonl",
        [
            {
                "id": "a1",
                "citations": [{"evidence_id": "policy:delivery:2026-10", "quote": "domestic orders"}],
            },
            {
                "id": "a2",
                "citations": [{"evidence_id": "policy:delivery:2026-10", "quote": "ships overnight"}],
            },
        ],
    )
    report = ok_json("eval", "citations", answers, "--data-dir", data, *AGENT)
    assert report["answers"] == 2 and report["precision"] == 0.5
    assert [r["id"] for r in report["results"]] == ["a1", "a2"]


# ---- errors: one line, a defined exit code, never a traceback -----------------------------------


def test_usage_mistakes_exit_2(data: Path) -> None:
    missing_arg, bad_role, bad_mode, naive_time, bad_target, bad_command = run_many(
        ["search", "--data-dir", data],
        ["search", "x", "--data-dir", data, "--role", "boss"],
        ["search", "x", "--data-dir", data, "--mode", "fuzzy"],
        ["search", "x", "--data-dir", data, "--as-of", "2026-01-01T00:00"],
        ["session", "archive", "s-1", "r1-no-note", "--data-dir", data],
        ["session", "teleport"],
    )
    one_line_error(missing_arg, 2, "Missing argument")
    one_line_error(bad_role, 2, "--role", "boss")
    one_line_error(bad_mode, 2, "--mode")
    one_line_error(naive_time, 2, "time zone")
    one_line_error(bad_target, 2, "rN=note")
    one_line_error(bad_command, 2, "No such command")


def test_missing_data_folder_exit_2(tmp_path: Path) -> None:
    no_option, no_folder = run_many(["search", "x"], ["fsck", "--data-dir", tmp_path / "nowhere"])
    one_line_error(no_option, 2, "--data-dir")
    one_line_error(no_folder, 2, "no mnemo data folder", "mnemo-sea init")
    assert not (tmp_path / "nowhere").exists()  # a read command never creates a folder


def test_corrupt_archive_file_exit_7(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "archive.db").write_bytes(b"this is not sqlite" * 100)
    one_line_error(run("search", "x", "--data-dir", folder), 7, "corrupt", "archive.db")
    one_line_error(run("init", "--data-dir", folder), 7, "corrupt")


def test_locked_data_folder_names_the_holder_exit_6(data: Path) -> None:
    holder_code = (
        "import sys, time\n"
        "from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder\n"
        "from mnemo_sea.system.mnemo import Mnemo\n"
        f"m = Mnemo.open({str(data)!r}, embedder=HashingEmbedder())\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "m.close()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        line = one_line_error(run("search", "x", "--data-dir", data, *AGENT), 6, f"pid {holder.pid}")
        assert "one opener per path" in line
    finally:
        holder.communicate("", timeout=60)
    assert ok_json("search", "orders", "--data-dir", data, *AGENT)["status"] == "results"  # released


def test_bad_files_exit_2_and_store_nothing_unless_partial(data: Path, tmp_path: Path) -> None:
    rows = [
        json.dumps({"evidence_id": "bad:one", "body": "first good line about llamas"}),
        "{not json",
        json.dumps({"evidence_id": "bad:two", "body": "second good line", "valid_untill": "x"}),
        json.dumps({"evidence_id": "bad:three", "body": "third good line about llamas"}),
    ]
    mixed = write_jsonl(tmp_path / "mixed.jsonl", rows)
    line = one_line_error(run("ingest", mixed, "--data-dir", data, *AGENT), 2, "line 2", "line 3")
    assert "nothing loaded" in line
    # --partial stores the good lines and exits 8: the run left something out.
    left_out = run("ingest", mixed, "--partial", "--data-dir", data, *AGENT, "--json")
    one_line_error(left_out, 8, "--partial left out 2")
    partial = json.loads(left_out.stdout)  # the report, one JSON document
    # new_versions == 2: the refused run above stored nothing
    assert partial["stored"] == 2 and partial["new_versions"] == 2
    assert [p["line"] for p in partial["problems"]] == [2, 3]
    # A folder's files of other types are skipped, not left out: a complete load exits 0.
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.md").write_text("a note about llamas", encoding="utf-8")
    (folder / "logo.png").write_bytes(b"\x89PNG")
    assert ok_json("ingest", folder, "--data-dir", data, *AGENT)["skipped_files"] == ["logo.png"]
    assert ok_json("ingest", folder, "--partial", "--data-dir", data, *AGENT)["problems"] == []
    clean = write_jsonl(tmp_path / "clean.jsonl", [rows[0]])
    nothing_left_out = ok_json("ingest", clean, "--partial", "--data-dir", data, *AGENT)  # exit 0
    assert nothing_left_out["problems"] == [] and nothing_left_out["documents"] == 1

    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02binary\x00")
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"a" * (16 * 1024 * 1024 + 1))
    citations = write_jsonl(tmp_path / "c.jsonl", ["[]", "{}"])
    is_binary, too_big, absent, bad_citations = run_many(
        ["ingest", binary, "--data-dir", data, *AGENT],
        ["ingest", huge, "--data-dir", data, *AGENT],
        ["ingest", tmp_path / "absent.md", "--data-dir", data, *AGENT],
        ["eval", "citations", citations, "--data-dir", data],
    )
    one_line_error(is_binary, 2, "blob.txt")
    one_line_error(too_big, 2, "huge.txt", "exceeds")
    one_line_error(absent, 2, "absent.md")
    one_line_error(bad_citations, 2, "line 1", "line 2")


def test_typed_errors_map_to_exit_codes(data: Path) -> None:
    ok_json("session", "record", "s-conflict", "t", "--content", "x", "--data-dir", data, *AGENT)
    # One at a time: each of these opens the data folder, which takes one opener at a time.
    commands: list[list[str | Path]] = [
        ["session", "recover", "no-such-session", "r1", "--data-dir", data, *AGENT],
        ["memory", "current", "u-404", "pet_name", "--data-dir", data, *AGENT],
        ["delete", "evidence", "drug:carprofen:label", "--data-dir", data, *AGENT],
        ["session", "archive", "s-conflict", "r1=fine", "r9=unknown", "--data-dir", data, *AGENT, "--json"],
        ["search", "x", "--data-dir", data, "--embedder", "default"],
    ]
    not_found, no_fact, forbidden, rejected, other_embedder = [run(*args) for args in commands]
    one_line_error(not_found, 3)
    one_line_error(no_fact, 3, "u-404")
    one_line_error(forbidden, 4, "admin")
    one_line_error(rejected, 2, "r9: unknown", "nothing was archived")  # invalid input, as REST's 422
    error = json.loads(rejected.stdout)["error"]  # with --json the error is JSON on stdout too
    assert (error["code"], error["exit_code"]) == ("batch_rejected", 2)
    assert {t["result_id"]: t["status"] for t in error["detail"]["targets"]} == {"r1": "ok", "r9": "unknown"}
    line = one_line_error(other_embedder, 2)
    assert "--embedder hashing" in line and "model_id" in line


def test_context_and_task_state_exit_codes(data: Path, tmp_path: Path) -> None:
    ok_json(
        "session",
        "record",
        "s-ctx",
        "lab.note",
        "--content",
        "ALT 112 U/L (high)",
        "--data-dir",
        data,
        *AGENT,
    )
    state = {"goal": "dose carprofen safely", "constraints": ["no NSAID while ALT is high"]}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    written = ok_json("session", "task-state", "set", "s-ctx", "--file", path, "--data-dir", data, *AGENT)
    assert (written["version"], written["constraints"]) == (1, state["constraints"])
    dropped = tmp_path / "dropped.json"
    dropped.write_text(json.dumps({"goal": "dose carprofen"}), encoding="utf-8")
    # Task state commands open the archive alone (no index lock), so these may run side by side.
    rejected, stale, stranger = run_many(
        ["session", "task-state", "set", "s-ctx", "--file", dropped, "--data-dir", data, *AGENT, "--json"],
        ["session", "task-state", "set", "s-ctx", "--file", path, "--expected-version", "0",
         "--data-dir", data, *AGENT],
        ["session", "task-state", "show", "s-ctx", "--data-dir", data, "--tenant", "shop-b"],
    )  # fmt: skip
    one_line_error(rejected, 2, "constraint_dropped", "nothing was stored")  # invalid input, REST's 422
    error = json.loads(rejected.stdout)["error"]
    assert error["code"] == "task_state_rejected"
    assert [(p["field"], p["item"]) for p in error["detail"]["problems"]] == [
        ("constraints", "no NSAID while ALT is high")
    ]
    one_line_error(stale, 5, "version 1, not 0")  # a conflict, REST's 409
    one_line_error(stranger, 3, "s-ctx")  # another tenant's session is not found
    history = ok_json("session", "task-state", "history", "s-ctx", "--data-dir", data, *AGENT)
    assert [v["version"] for v in history["versions"]] == [1]  # neither refused write stored anything

    over = run(
        "session",
        "context",
        "s-ctx",
        "--budget",
        "30",
        "--reserve",
        "10",
        "--data-dir",
        data,
        *AGENT,
        "--json",
    )
    one_line_error(over, 2, "pinned segments need")
    assert json.loads(over.stdout)["error"]["code"] == "context_over_budget"
    ctx = ok_json("session", "context", "s-ctx", "--budget", "4000", "--data-dir", data, *AGENT)
    assert ctx["task_state_version"] == 1
    assert [s["kind"] for s in ctx["segments"]] == ["constraints", "task_state", "live_result"]
    assert ctx["text"] == "".join(s["text"] for s in ctx["segments"]) and "ALT 112 U/L" in ctx["text"]


def test_search_shows_each_legs_score_and_min_score_is_a_floor(data: Path) -> None:
    query = ("search", "cross-border orders ship", "--data-dir", data, *AGENT)
    # One at a time: each opens the data folder, which admits one opener.
    everything, human, refused_range, refused_nan, refused_bm25 = (
        run(*args)
        for args in (
            [*query, "--json"],
            [*query],
            [*query, "--min-score", "1.5"],
            [*query, "--min-score", "nan"],
            [*query, "--min-score", "0.5", "--mode", "bm25"],
        )
    )
    assert everything.returncode == 0, everything.stderr
    hits = json.loads(everything.stdout)["hits"]
    top = hits[0]
    assert top["evidence_id"] == "policy:delivery:2026-10" and top["bm25_score"] > 0
    assert -1 <= top["dense_score"] <= 1 and top["relevance"] >= top["dense_score"]
    shown = human.stdout
    assert f"bm25 #1 {top['bm25_score']:.2f}" in shown and f"relevance {top['relevance']:.3f}" in shown
    kept = ok_json(*query, "--min-score", str(top["relevance"]))
    assert [h["evidence_id"] for h in kept["hits"]] == [
        h["evidence_id"] for h in hits if h["relevance"] >= top["relevance"]
    ]
    assert len(kept["hits"]) < len(hits)
    for proc in (refused_range, refused_nan, refused_bm25):
        one_line_error(proc, 2, "min_score")
