"""SIGKILL a writer before and after the group commit's deferred flush; every committed write
comes back on the next open, recoverable, hash-verified and searchable.

The writer (`_kill_writer.py`, a child process) ingests evidence and records and archives
results through `Mnemo.open` with synchronous writes: each call returned, so each write is
committed (its SQL transaction and outbox rows) and applied to the index. The flush that marks
its outbox rows done is deferred (group commit); the writer dies by SIGKILL either with the
flush still deferred or right after it ran. Before reopening, the test reads the stored outbox
state the kill left; then it opens the folder as a user would (`Mnemo.open` replays) and checks
everything the writer acknowledged. A third case also throws away what the index wrote after
its last flush (the shard is put back as it was then), as a machine that lost the index's
unflushed tail would come back: the outbox rows, never marked done, rebuild it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fakes import HashingEmbedder
from sqlalchemy import select

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE, INDEX_DIR
from mnemo_sea.system.wiring.settings import MnemoSettings

WRITER = Path(__file__).with_name("_kill_writer.py")
READER = Principal("killco", "checker", frozenset({Role.AGENT, Role.ADMIN}), Sensitivity.RESTRICTED)


def _run_writer(data: Path, point: str, database_url: str | None = None) -> list[dict[str, Any]]:
    journal = data.parent / "journal.jsonl"
    proc = subprocess.run(
        [sys.executable, str(WRITER), str(data), str(journal), point, *filter(None, [database_url])],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, f"the writer must die by SIGKILL, got {proc.returncode}: {proc.stderr}"
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


_OUTBOX = "SELECT id, op, applied_at, done_at, payload_json FROM outbox ORDER BY id"


def _query(data: Path, database_url: str | None, sql: str) -> list[tuple[Any, ...]]:
    """The rows of `sql`, read from the file itself (or the PostgreSQL database, with the
    driver: not through the archive's code)."""
    if database_url is None:
        with closing(sqlite3.connect(data / ARCHIVE_FILE)) as conn:
            return list(conn.execute(sql))
    with psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        return [tuple(row) for row in conn.execute(sql)]


def _outbox_rows(data: Path, database_url: str | None = None) -> list[tuple[Any, ...]]:
    """(id, op, applied_at, done_at, payload_json) of every row."""
    return _query(data, database_url, _OUTBOX)


def _refs_awaiting_flush(data: Path, database_url: str | None = None) -> list[tuple[Any, ...]]:
    """(entity_ref, op) of the rows applied and not done."""
    sql = "SELECT entity_ref, op FROM outbox WHERE applied_at IS NOT NULL AND done_at IS NULL"
    return _query(data, database_url, sql)


def _open(data: Path, database_url: str | None) -> Mnemo:
    if database_url is None:
        return Mnemo.open(data, embedder=HashingEmbedder())
    settings = MnemoSettings(database_url=database_url, index_path=data / INDEX_DIR)
    return Mnemo.from_settings(settings, embedder=HashingEmbedder())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_everything_back(
    data: Path, journal: list[dict[str, Any]], database_url: str | None = None
) -> None:
    evidence = [e for e in journal if e["ev"] == "evidence"]
    results = [e for e in journal if e["ev"] == "result"]
    assert len(evidence) == 7 and len(results) == 2, journal
    assert [e.get("ingested", False) for e in evidence] == [False] * 3 + [True] * 4
    with _open(data, database_url) as m:
        for e in evidence:
            record, content = m.archive.get_evidence(READER, e["id"], version=e["version"], with_content=True)
            assert _sha256(content) == record.content_sha256 == e["sha"]
            found = m.search(READER, e["token"], mode="bm25")
            assert [h.evidence_id for h in found.hits] == [e["id"]], (e, found)
        for r in results:
            got = m.recover(READER, r["session"], r["rid"])
            assert _sha256(got.content) == got.original.content_sha256 == r["sha"]
            found = m.search(READER, r["note_token"], mode="bm25")
            assert len(found.hits) == 1 and found.hits[0].kind == "tool_result", (r, found)
        with m.archive.store.read() as conn:
            blobs = list(conn.execute(select(t.blobs.c.sha256, t.blobs.c.content)))
            assert blobs and all(_sha256(bytes(b.content)) == b.sha256 for b in blobs)
        assert run_fsck(m).ok
    # The open replayed and settled: no row is pending or awaiting a flush any more.
    rows = _outbox_rows(data, database_url)
    assert all(done is not None and payload == "{}" for _, _, _, done, payload in rows), rows


@pytest.fixture(params=["sqlite", pytest.param("postgres+edge", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None: the embedded default; else a PostgreSQL archive with the index embedded (its
    owning process defers flushes the same way)."""
    return None if request.param == "sqlite" else str(request.getfixturevalue("pg_migrated_url"))


def test_a_kill_before_the_deferred_flush_loses_no_committed_write(
    tmp_path: Path, database_url: str | None
) -> None:
    data = tmp_path / "data"
    journal = _run_writer(data, "before_flush", database_url)
    assert journal[-1] == {"ev": "state", "awaiting_flush": journal[-1]["awaiting_flush"]}
    assert journal[-1]["awaiting_flush"] > 0
    rows = _outbox_rows(data, database_url)
    # The kill left the writes' rows applied (emptied: no note or source in them) but not done.
    awaiting = [r for r in rows if r[2] is not None and r[3] is None]
    assert len(awaiting) == journal[-1]["awaiting_flush"]
    assert all(payload == "{}" for *_, payload in awaiting)
    # The ingest batch, the last write, was searchable when its call returned but its flush was
    # deferred too: each of its records' upserts is among the rows awaiting it.
    awaiting_refs = {ref for ref, op in _refs_awaiting_flush(data, database_url) if op == "index_upsert"}
    ingested = {f"{e['id']}@{e['version']}" for e in journal if e.get("ingested")}
    assert len(ingested) == 4 and ingested <= awaiting_refs, (ingested, awaiting_refs)
    _check_everything_back(data, journal, database_url)


def test_a_kill_after_the_flush_leaves_every_row_done(tmp_path: Path) -> None:
    data = tmp_path / "data"
    journal = _run_writer(data, "after_flush")
    assert journal[-1] == {"ev": "state", "awaiting_flush": 0}
    rows = _outbox_rows(data)
    # Every row done but the originals' pages, the trail's (which never ran): 1 per result.
    left = [(op, applied) for _, op, applied, done, _ in rows if done is None]
    assert rows and left == [("index_upsert", None)] * 2
    _check_everything_back(data, journal)


def test_rows_never_flushed_rebuild_an_index_that_lost_its_unflushed_tail(tmp_path: Path) -> None:
    data = tmp_path / "data"
    journal = _run_writer(data, "before_flush")
    assert journal[-1]["awaiting_flush"] > 0
    # Put the shard back as it was at its last flush (before any of the writes): what survives
    # when the index's unflushed writes are lost. Only the outbox can bring the writes back.
    shard = data / INDEX_DIR / "shard"
    shutil.rmtree(shard)
    shutil.copytree(data / "shard-at-flush", shard)
    with closing(sqlite3.connect(data / ARCHIVE_FILE)) as conn:
        before = conn.execute("SELECT count(*) FROM outbox WHERE done_at IS NULL").fetchone()[0]
    assert before == journal[-1]["awaiting_flush"] + 2  # and the two originals' pages, never applied
    _check_everything_back(data, journal)
