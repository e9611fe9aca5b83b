"""The command line under real loads, in-process: batched ingest with true progress, a failed
batch that says what stayed stored, media types of recorded files, JSON errors, `serve`'s
embedder, and the commands for sessions, evidence and summaries.

In-process (the same functions and Typer app the `mnemo-sea` process runs) because each CLI
subprocess pays ~2 s of imports; tests/system/test_cli_commands.py runs the real processes.
What these tests are about is imported inside them, so each fails on its own where it is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import HashingEmbedder
from typer.testing import CliRunner

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    EvidenceInput,
    InvalidInput,
    NotFound,
    Principal,
    StoreUnavailable,
)
from mnemo_sea.cli.app import app
from mnemo_sea.retrieval import HybridIndex
from mnemo_sea.system.caches import MemoryCache
from mnemo_sea.system.mnemo import Mnemo

AGENT = ["--tenant", "clinic-a", "--subject", "agent-1", "--role", "agent"]
ENV = {"MNEMO_EMBEDDER": "hashing", "MNEMO_DATA_DIR": None, "MNEMO_DATABASE_URL": None}


def docs(n: int, prefix: str = "d") -> list[EvidenceInput]:
    return [
        EvidenceInput(body=f"llama note {i}: the herd eats hay", source=prefix, evidence_id=f"{prefix}:{i}")
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def small_batches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mnemo]:
    """The embedded system with batches of at most 4 records (the default is 1,000); the tests
    share it (opening one costs seconds) and use record ids of their own."""
    root = tmp_path_factory.mktemp("batches")
    archive = Archive.open(str(root / "archive.db"), ArchivePolicy(max_batch_size=4))
    index = HybridIndex.open(root / "index", embedder=HashingEmbedder())
    with Mnemo(archive, index, MemoryCache()) as mnemo:
        yield mnemo


# ---- item 8/9: batches and progress ---------------------------------------------------------------


def test_a_load_larger_than_a_batch_is_stored_in_batches_with_true_progress(
    small_batches: Mnemo, agent: Principal
) -> None:
    from mnemo_sea.cli.bulk_ingest import ingest_in_batches
    from mnemo_sea.system.mnemo import IngestProgress

    seen: list[IngestProgress] = []
    report = ingest_in_batches(small_batches, agent, docs(10), progress=seen.append)

    assert report.failure is None
    assert [(b.number, b.first, b.count) for b in report.batches] == [(1, 0, 4), (2, 4, 4), (3, 8, 2)]
    assert (report.stored, report.new_versions, report.unchanged, report.indexed) == (10, 10, 0, 10)
    assert report.records == [(f"d:{i}", 1) for i in range(10)]
    # State, not only the report: every record is in the archive and found by search.
    for i in range(10):
        assert small_batches.archive.get_evidence(agent, f"d:{i}")[0].version == 1
    hits = small_batches.search(agent, "llama herd hay", limit=20, mode="bm25", sources=["d"]).hits
    assert {h.evidence_id for h in hits} == {f"d:{i}" for i in range(10)}

    # The callback sees every step of the whole load: counts never go back and reach the totals.
    assert all(p.documents == 10 for p in seen)
    for field in ("stored", "indexed", "chunks_embedded"):
        values = [getattr(p, field) for p in seen]
        assert values == sorted(values), field
    assert (seen[-1].stored, seen[-1].indexed) == (10, 10) and seen[-1].chunks_embedded >= 10
    # Each batch's chunk total is added before its chunks are embedded: the load's never trails.
    assert all(p.chunks is not None and p.chunks >= p.chunks_embedded for p in seen if p.chunks_embedded)
    assert seen[-1].chunks == seen[-1].chunks_embedded
    assert len({p.indexed for p in seen}) == 11  # 0..10: one step per indexed document
    assert all(p.indexed <= p.stored for p in seen)

    # Loading again stores nothing new; unchanged records count as indexed at once.
    again: list[IngestProgress] = []
    report = ingest_in_batches(small_batches, agent, docs(10), progress=again.append)
    assert (report.stored, report.new_versions, report.unchanged, report.indexed) == (10, 0, 10, 10)
    assert (again[-1].stored, again[-1].indexed, again[-1].chunks_embedded) == (10, 10, 0)


def test_a_batch_the_store_refuses_stops_the_load_and_says_what_stayed_stored(
    small_batches: Mnemo, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo_sea.cli.bulk_ingest import ingest_in_batches

    calls = {"n": 0}
    real = Mnemo.ingest

    def ingest(self: Mnemo, *args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StoreUnavailable("archive store unreachable (disk full)")
        return real(self, *args, **kw)

    monkeypatch.setattr(Mnemo, "ingest", ingest)
    report = ingest_in_batches(small_batches, agent, docs(10, "f"))

    assert report.failure is not None and report.failure.number == 2
    assert isinstance(report.failure.error, StoreUnavailable)
    assert report.records == [(f"f:{i}", 1) for i in range(4)]
    assert calls["n"] == 2  # no batch after the failed one was tried
    for i in range(4):
        small_batches.archive.get_evidence(agent, f"f:{i}")
    for i in range(4, 10):
        with pytest.raises(NotFound):
            small_batches.archive.get_evidence(agent, f"f:{i}")
    said = report.describe_failure()
    assert "batch 2 of 3 (documents 5-8)" in said and "disk full" in said
    assert "batches 1-1 (documents 1-4) stay stored" in said and "documents 5-10 were not stored" in said
    for bad in (0, 5, True):  # at most the archive's batch size
        with pytest.raises(InvalidInput, match="batch_size"):
            ingest_in_batches(small_batches, agent, docs(1, "f"), batch_size=bad)


# ---- the CLI in-process ----------------------------------------------------------------------------


def cli(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


def ok(*args: str | Path) -> Any:
    result = cli(*args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data folder for the CLI tests (each uses its own sessions and record ids)."""
    data = tmp_path_factory.mktemp("cli") / "data"
    ok("init", "--data-dir", data)
    return data


def test_a_failed_batch_exits_with_the_stores_code_and_reports_the_stored_batches(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo_sea.cli import bulk_ingest

    real_batches, real_ingest = bulk_ingest.ingest_in_batches, Mnemo.ingest
    monkeypatch.setattr(
        bulk_ingest, "ingest_in_batches", lambda *a, **kw: real_batches(*a, **kw, batch_size=2)
    )
    calls = {"n": 0}

    def ingest(self: Mnemo, *args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StoreUnavailable("archive store unreachable")
        return real_ingest(self, *args, **kw)

    monkeypatch.setattr(Mnemo, "ingest", ingest)
    rows = [{"evidence_id": f"x:{i}", "body": f"alpaca {i}"} for i in range(5)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    result = cli("ingest", path, "--data-dir", folder, *AGENT, "--json")
    assert result.exit_code == 6, result.stdout
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "store_unavailable" and error["exit_code"] == 6
    assert "batch 2 of 3 (documents 3-4) was not stored" in error["message"]
    assert error["detail"]["records"] == [["x:0", 1], ["x:1", 1]]
    assert error["detail"]["failed_batch"]["batch"] == 2 and error["detail"]["stored"] == 2
    assert result.stderr.startswith("error: batch 2 of 3")


def test_json_errors_and_exit_codes_are_one_policy(folder: Path) -> None:
    ok("session", "record", "s-1", "t", "--content", "x", "--data-dir", folder, *AGENT)
    rejected = cli("session", "archive", "s-1", "r1=fine", "r9=gone", "--data-dir", folder, *AGENT, "--json")
    # Invalid input, as REST answers 422 for it (it was 5, "conflict").
    assert rejected.exit_code == 2
    error = json.loads(rejected.stdout)["error"]
    assert error["code"] == "batch_rejected" and error["exit_code"] == 2
    assert [t["status"] for t in error["detail"]["targets"]] == ["ok", "unknown"]

    ok("session", "archive", "s-1", "r1=fine", "--data-dir", folder, *AGENT)
    again = cli("session", "archive", "s-1", "r1=fine", "--data-dir", folder, *AGENT, "--json")
    assert again.exit_code == 5  # every target already archived: a state conflict (REST 409)
    assert json.loads(again.stdout)["error"]["code"] == "archive_conflict"

    usage = cli("search", "x", "--mode", "fuzzy", "--data-dir", folder, "--json")
    assert usage.exit_code == 2 and json.loads(usage.stdout)["error"]["code"] == "invalid_input"
    missing = cli("memory", "current", "u-1", "k", "--data-dir", folder, "--json")
    assert missing.exit_code == 3 and json.loads(missing.stdout)["error"]["code"] == "not_found"
    bad_option = cli("session", "list", "--limit", "x", "--json")
    assert bad_option.exit_code == 2 and json.loads(bad_option.stdout)["error"]["code"] == "usage"


def test_serve_detects_the_folders_embedder_or_takes_the_option(folder: Path, tmp_path: Path) -> None:
    from mnemo_sea.cli.output import CliError
    from mnemo_sea.cli.service import serve_settings

    assert serve_settings(folder, None).embedder == "hashing"  # built with hashing: detected
    assert serve_settings(tmp_path / "new", None).embedder == "default"
    assert serve_settings(tmp_path / "new", "hashing").embedder == "hashing"
    with pytest.raises(CliError, match="--embedder"):
        serve_settings(folder, "word2vec")
    assert "--embedder" in CliRunner().invoke(app, ["serve", "--help"]).stdout


# ---- item 10: media types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("log.txt", b"GET /orders -> timeout\n", "text/plain; charset=utf-8"),
        ("run.log", "naïve 日本語\n".encode(), "text/plain; charset=utf-8"),
        ("NOEXT", b"plain words", "text/plain; charset=utf-8"),
        ("reply.json", b'{"ok": true}', "application/json; charset=utf-8"),
        ("notes.md", b"# title", "text/markdown; charset=utf-8"),
        ("latin1.txt", "caf\u00e9".encode("latin-1"), "text/plain"),  # its extension's type, no charset
        ("latin1.csv", "caf\u00e9;1".encode("latin-1"), "text/csv"),
        ("NOEXT-latin1", "caf\u00e9".encode("latin-1"), "application/octet-stream"),
        ("nul.txt", b"a\x00b", "application/octet-stream"),
        ("photo.png", b"\x89PNG\r\n\x1a\n\x00", "image/png"),
        ("dump.bin", b"\xff\xfe\xfd", "application/octet-stream"),
    ],
)
def test_the_media_type_of_a_recorded_file(name: str, data: bytes, expected: str) -> None:
    from mnemo_sea.system.documents import media_type_of

    assert media_type_of(name, data) == expected


def test_session_record_of_a_text_file_is_text_everywhere(folder: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("GET /orders/O-1042 -> timeout after 30 s\n", encoding="utf-8")
    common = ["--data-dir", folder, *AGENT]
    recorded = ok("session", "record", "s-2", "logistics.query", "--file", log, *common)
    assert recorded["media_type"] == "text/plain; charset=utf-8"
    given = ok(
        "session", "record", "s-2", "api.call", "--file", log, "--media-type", "application/x-ndjson", *common
    )
    assert given["media_type"] == "application/x-ndjson"
    live = ok("session", "live", "s-2", *common)
    assert "GET /orders/O-1042" in live["text"] and "[binary original" not in live["text"]
    ok("session", "archive", "s-2", "r1=a timeout", *common)
    recovered = ok("session", "recover", "s-2", "r1", *common)
    assert recovered["content"] == log.read_text() and "[binary original" not in recovered["rendered"]


def test_a_text_file_in_another_encoding_keeps_its_type_and_its_exact_bytes(
    folder: Path, tmp_path: Path
) -> None:
    import base64
    import hashlib
    import sqlite3

    latin1 = tmp_path / "notes.txt"
    raw = "Caf\u00e9 cr\u00e8me: 3 \u00e0 5 jours\n".encode("latin-1")
    latin1.write_bytes(raw)
    common = ["--data-dir", folder, *AGENT]
    recorded = ok("session", "record", "s-latin1", "fs.read", "--file", latin1, *common)
    assert recorded["media_type"] == "text/plain"  # the README's promise; not octet-stream

    # What is stored, read from the archive file: the label, and the bytes exactly, by their hash.
    with sqlite3.connect(folder / "archive.db") as conn:
        media_type, size, sha = conn.execute(
            "SELECT media_type, size, blob_sha256 FROM tool_results WHERE tenant_id = ? AND session_id = ?",
            ("clinic-a", "s-latin1"),
        ).fetchone()
        (content,) = conn.execute(
            "SELECT content FROM blobs WHERE tenant_id = ? AND sha256 = ?", ("clinic-a", sha)
        ).fetchone()
    assert (media_type, size) == ("text/plain", len(raw))
    assert bytes(content) == raw and sha == hashlib.sha256(raw).hexdigest()

    # No surface decodes it as UTF-8: the live view shows it as binary, recovery gives base64.
    live = ok("session", "live", "s-latin1", *common)
    assert "[binary original" in live["text"] and "text/plain" in live["text"]
    ok("session", "archive", "s-latin1", "r1=a French note", *common)
    recovered = ok("session", "recover", "s-latin1", "r1", *common)
    assert recovered["content"] is None and base64.b64decode(recovered["content_base64"]) == raw


# ---- item 11/12: human output and the new commands ---------------------------------------------------


def test_sessions_evidence_and_summaries_from_the_command_line(folder: Path, tmp_path: Path) -> None:
    common = ["--data-dir", folder, *AGENT]
    rows = [
        {"evidence_id": "kb:hay", "body": "Llamas eat hay twice a day."},
        {"evidence_id": "kb:hay", "body": "Llamas eat hay three times a day."},
        {"evidence_id": "kb:water", "body": "Llamas drink 10 litres of water."},
    ]
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ok("ingest", path, *common)
    ok("session", "record", "s-3", "t", "--content", "one", *common)
    ok("session", "record", "s-3", "t", "--content", "two", *common)
    ok("session", "archive", "s-3", "r1=first", *common)

    sessions = {s["session_id"]: s for s in ok("session", "list", *common)["sessions"]}
    assert (sessions["s-3"]["results"], sessions["s-3"]["live"], sessions["s-3"]["archived"]) == (2, 1, 1)
    reader = ["--data-dir", folder, "--tenant", "clinic-a", "--subject", "someone-else", "--role", "reader"]
    assert ok("session", "list", *reader)["sessions"] == []  # a reader sees sessions about itself
    assert ok("session", "list", "--data-dir", folder, "--tenant", "shop-b")["sessions"] == []

    current = ok("evidence", "get", "kb:hay", *common)
    assert current["version"] == 2 and current["content"] == rows[1]["body"]
    first = ok("evidence", "get", "kb:hay", "--version", "1", *common)
    assert first["status"] == "superseded" and first["content"] == rows[0]["body"]
    before = ok("evidence", "get", "kb:hay", "--as-of", first["recorded_at"], *common)
    assert before["version"] == 1
    human = cli("evidence", "get", "kb:water", *common)
    assert human.exit_code == 0 and "None" not in human.stdout and rows[2]["body"] in human.stdout

    retracted = ok("evidence", "retract", "kb:water", "--reason", "wrong figure", *common)
    assert retracted["status"] == "retracted"
    assert ok("search", "drink water litres", "--mode", "bm25", *common)["hits"] == []
    assert [v["status"] for v in ok("evidence", "history", "kb:water", *common)["versions"]] == ["retracted"]
    assert cli("evidence", "get", "kb:nope", *common).exit_code == 3

    made = ok(
        "summary", "create", "Llama feeding: hay three times a day.", "--from", "evidence:kb:hay", *common
    )
    assert made["derived_from"] == ["evidence:kb:hay"] and made["label"].startswith("derived")
    listed = ok("summary", "list", *common)["summaries"]
    assert [s["summary_id"] for s in listed] == [made["summary_id"]]
    assert ok("summary", "list", "--data-dir", folder, "--tenant", "shop-b")["summaries"] == []
    assert ok("summary", "get", made["summary_id"], *common)["text"] == made["text"]

    # A leg that did not find a hit is shown as `—`, never `None`.
    dense = cli("search", "feeding llamas", "--mode", "dense", *common)
    assert dense.exit_code == 0 and "None" not in dense.stdout and "bm25 —" in dense.stdout
