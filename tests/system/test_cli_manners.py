"""The command line behaves as the tools beside it do: `--version`, a closed pipe ends the run
quietly, a mistyped command or flag gets a suggestion. Real processes (the hashing embedder)."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

from test_cli_commands import AGENT, CLI, _env, ok_json, one_line_error, run, write_jsonl


def test_version_prints_the_installed_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout == f"mnemo-sea {version('mnemo-sea')}\n"


def test_a_mistyped_command_or_flag_is_answered_with_what_was_meant() -> None:
    one_line_error(run("serch", "refund"), 2, "No such command 'serch'", "Did you mean 'search'")
    one_line_error(run("search", "--limt", "3", "refund"), 2, "--limt", "Possible options: --limit")


def test_a_reader_that_stops_reading_ends_the_run_quietly(tmp_path: Path) -> None:
    """`mnemo-sea search … | head -1`: the output is larger than a pipe holds, the reader takes
    one line and closes; the command stops with no `error:` line, as `grep` does (0 or 141)."""
    folder = tmp_path / "data"
    ok_json("init", "--data-dir", folder)
    rows = [
        json.dumps(
            {"evidence_id": f"kb:long{n}", "body": "refund policy text " * 300 + str(n), "source": "kb"}
        )
        for n in range(60)
    ]
    ok_json("ingest", write_jsonl(tmp_path / "long.jsonl", rows), "--data-dir", folder, *AGENT)
    for as_json in ([], ["--json"]):
        args = [*CLI, "search", "refund", "--limit", "60", "--data-dir", str(folder), *AGENT, *as_json]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away with most of the output unread
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) in (0, 141), err
        assert first.strip() and "error" not in err and "Traceback" not in err, err


def test_audit_events_are_read_in_pages_by_an_admin_only(tmp_path: Path) -> None:
    """`audit events`: the tenant's events oldest first, what REST's GET /v1/admin/audit/events
    answers; `--after-seq` reads on; an agent is refused (exit 4); another tenant's events never
    show (counted in the raw table)."""
    import sqlite3

    from test_cli_commands import ADMIN

    folder = tmp_path / "data"
    ok_json("init", "--data-dir", folder)
    other = ["--tenant", "clinic-b", "--subject", "agent-9", "--role", "agent"]
    for session, who in (("s-0", AGENT), ("s-1", AGENT), ("s-b", other)):
        ok_json("session", "record", session, "lab", "--content", "x", "--data-dir", folder, *who)
        ok_json("session", "archive", session, "r1=lab", "--data-dir", folder, *who)  # audited
        ok_json("session", "recover", session, "r1", "--data-dir", folder, *who)  # audited

    first = ok_json("audit", "events", "--limit", "2", "--data-dir", folder, *ADMIN)
    assert [e["seq"] for e in first["events"]] == [1, 2] and first["next_after_seq"] == 2
    rest = ok_json("audit", "events", "--after-seq", "2", "--data-dir", folder, *ADMIN)
    seen = first["events"] + rest["events"]
    assert rest["next_after_seq"] is None and [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    with sqlite3.connect(folder / "archive.db") as db:
        (ours,) = db.execute("SELECT count(*) FROM audit_events WHERE tenant_id = 'clinic-a'").fetchone()
    assert len(seen) == ours and all("s-b" not in e["target"] for e in seen)
    human = run("audit", "events", "--data-dir", folder, *ADMIN)
    assert human.returncode == 0 and "audit event(s) of tenant clinic-a, read by admin-1" in human.stdout
    one_line_error(run("audit", "events", "--data-dir", folder, *AGENT), 4)


def test_session_show_looks_without_appending_and_raw_gives_the_exact_bytes(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    ok_json("init", "--data-dir", folder)
    original = tmp_path / "report.txt"
    original.write_bytes(b"line 1\nif depth > 0: <b>&amp;\nno newline at the end")
    ok_json("session", "record", "s-1", "lab", "--file", original, "--data-dir", folder, *AGENT)
    ok_json("session", "archive", "s-1", "r1=lab report", "--data-dir", folder, *AGENT)
    raw = subprocess.run(
        [*CLI, "session", "show", "s-1", "r1", "--raw", "--data-dir", str(folder), *AGENT],
        capture_output=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert raw.returncode == 0 and raw.stdout == original.read_bytes()  # `> file` gives them back
    human = run("session", "show", "s-1", "r1", "--data-dir", folder, *AGENT)
    assert human.returncode == 0 and "if depth > 0: <b>&amp;" in human.stdout  # not escaped again
    assert "r1 of s-1: lab, archived" in human.stdout and "note: lab report" in human.stdout
    shown = ok_json("session", "show", "s-1", "r1", "--data-dir", folder, *AGENT)
    assert shown["content"] == original.read_text() and shown["result"]["state"] == "archived"
    listed = ok_json("session", "live", "s-1", "--data-dir", folder, *AGENT)
    assert len(listed["items"]) == 1  # looking three times appended nothing


def test_human_reports_say_who_acts_and_show_records_as_tables(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    ok_json("init", "--data-dir", folder)
    rows = [
        json.dumps(
            {
                "evidence_id": "kb:refund",
                "body": "Refunds within 14 days.",
                "source": "policy",
                "locator": "s2",
            }
        ),
        json.dumps({"evidence_id": "kb:ship", "body": "Ships in 2 days.", "source": "policy"}),
    ]
    docs = write_jsonl(tmp_path / "docs.jsonl", rows)
    who = "as agent-1 (agent, clearance internal) in tenant clinic-a"

    ingest = run("ingest", docs, "--quiet", "--data-dir", folder, *AGENT).stdout.splitlines()
    assert ingest[0] == who and "batches:" in ingest
    header = ingest[ingest.index("batches:") + 1].split()
    assert header[:3] == ["batch", "documents", "stored"]  # a table, not a JSON line

    search = run("search", "refund", "--data-dir", folder, *AGENT).stdout.splitlines()
    assert search[0] == who and "source policy · scope default · locator s2" in search[2]

    ok_json("session", "record", "s-1", "lab", "--content", "x", "--data-dir", folder, *AGENT)
    listed = run("session", "list", "--data-dir", folder, *AGENT).stdout.splitlines()
    assert listed[0] == who and listed[2].split()[:3] == ["session_id", "owner", "created_at"]
    assert listed[3].split()[0] == "s-1"

    answer = {
        "id": "a1",
        "citations": [
            {"evidence_id": "kb:refund", "quote": "within 14 days"},
            {"evidence_id": "kb:ship", "quote": "overnight"},
        ],
    }
    cites = write_jsonl(tmp_path / "answers.jsonl", [json.dumps(answer)])
    checked = run("eval", "citations", cites, "--data-dir", folder, *AGENT).stdout.splitlines()
    assert checked[0] == who
    verdicts = [line.split()[4] for line in checked if line.startswith("1 ")]
    assert verdicts == ["ok", "quote_not_found"]  # one row per citation
