"""The Alembic migrations create exactly the schema the code declares, and opening is safe to race.

- After `open_store` migrates a fresh database, Alembic's autogenerate comparison between the
  database and `archive/storage/schema.py` finds nothing (types, nullability, keys, indexes, server
  defaults), on SQLite and PostgreSQL. A deliberately drifted copy of the metadata shows the
  comparison is not blind.
- There is one migration head, and a migrated database is stamped with it.
- Opening the same store again, or from several threads or processes at once on a database
  that was never migrated, migrates exactly once and loses nothing.
"""

from __future__ import annotations

import multiprocessing
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from _workers import AGENT, TENANT, open_and_record
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, MetaData, String, create_engine, inspect, select, text

from mnemo_sea.archive import Archive, ReceiptKey
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.store import SCHEMA_HEAD, open_store, upgrade

SPAWN = multiprocessing.get_context("spawn")
MIGRATIONS = Path(t.__file__).parents[1] / "migrations"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Unlike the suite-wide fixture, an EMPTY database on both backends: these tests migrate it."""
    if request.param == "sqlite":
        yield f"sqlite+pysqlite:///{tmp_path / 'archive.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def head_revision() -> str:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    heads = ScriptDirectory.from_config(cfg).get_heads()
    assert len(heads) == 1, f"the migrations must have exactly one head, found {heads}"
    return heads[0]


def schema_diff(url: str, metadata: MetaData = t.metadata) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


def stamped_revisions(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
    finally:
        engine.dispose()


def test_migrated_database_matches_schema_py(db_url: str) -> None:
    open_store(db_url).dispose()
    assert schema_diff(db_url) == []
    engine = create_engine(db_url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert tables == set(t.metadata.tables) | {"alembic_version"}
    assert stamped_revisions(db_url) == [head_revision()]


def upgrade_to(url: str, revision: str) -> None:
    """Run the migrations up to `revision` on the database at `url`, as `upgrade` does."""
    from alembic import command

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()


def test_upgrading_a_0003_database_adds_the_task_state_tables_and_keeps_its_rows(db_url: str) -> None:
    upgrade_to(db_url, "0003")
    engine = create_engine(db_url)
    try:
        assert not {"task_states", "task_state_refs"} & set(inspect(engine).get_table_names())
        with engine.begin() as conn:
            conn.execute(
                t.sessions.insert().values(
                    tenant_id=TENANT,
                    session_id="old",
                    owner="o",
                    created_at=datetime.now(UTC),
                    next_result_no=1,
                )
            )
    finally:
        engine.dispose()
    assert stamped_revisions(db_url) == ["0003"]
    # A file made outside Archive.open has no key file beside it (that is refused): given one.
    a = Archive.open(db_url, receipt_key=ReceiptKey.ephemeral())  # migrates to the head
    try:
        assert a.update_task_state(AGENT, "old", goal="carry on").version == 1
    finally:
        a.close()
    engine = create_engine(db_url)
    try:
        assert {"task_states", "task_state_refs"} <= set(inspect(engine).get_table_names())
        indexes = {i["name"] for i in inspect(engine).get_indexes("task_state_refs")}
        assert "ix_task_state_refs_ref" in indexes
    finally:
        engine.dispose()
    assert stamped_revisions(db_url) == [head_revision()]
    assert schema_diff(db_url) == []


def test_schema_head_names_the_newest_migration() -> None:
    assert head_revision() == SCHEMA_HEAD


def test_a_database_at_the_head_opens_without_alembic(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    Archive.open(str(path)).close()  # created and migrated
    check = (
        "import sys\n"
        "from mnemo_sea.archive import Archive\n"
        f"Archive.open({str(path)!r}).close()\n"
        "print('alembic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    assert stamped_revisions(f"sqlite:///{path}") == [head_revision()]


def test_the_comparison_sees_drift(db_url: str) -> None:
    """If schema.py gained a column the migration lacks, the check above would fail."""
    open_store(db_url).dispose()
    drifted = MetaData(naming_convention=t.metadata.naming_convention)
    for table in t.metadata.tables.values():
        table.to_metadata(drifted)
    drifted.tables["tool_results"].append_column(Column("new_field", String(10), nullable=True))
    diff = schema_diff(db_url, drifted)
    assert [(d[0], d[3].name) for d in diff if d[0] == "add_column"] == [("add_column", "new_field")]


def test_opening_twice_is_idempotent(db_url: str) -> None:
    first = Archive.open(db_url)
    try:
        first.record(AGENT, "s1", "t", "kept across reopen")
        second = Archive.open(db_url)  # migrates again while the first is open
        try:
            upgrade(second.store)  # and once more, explicitly
            assert [r.result_id for r in second.list_results(AGENT, "s1")] == ["r1"]
            assert second.record(AGENT, "s1", "t", "second").result_id == "r2"
        finally:
            second.close()
        assert [r.result_id for r in first.list_results(AGENT, "s1")] == ["r1", "r2"]
    finally:
        first.close()
    assert stamped_revisions(db_url) == [head_revision()]
    assert schema_diff(db_url) == []


def test_concurrent_first_open_from_threads(db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    n = 6
    barrier = Barrier(n)

    def open_once(worker: int) -> str:
        barrier.wait(60)
        a = Archive.open(db_url)
        try:
            return a.record(AGENT, f"opener-{worker}", "t", "x").result_id
        finally:
            a.close()

    with ThreadPoolExecutor(n) as pool:
        assert list(pool.map(open_once, range(n))) == ["r1"] * n
    assert stamped_revisions(db_url) == [head_revision()]
    assert schema_diff(db_url) == []


def test_concurrent_first_open_from_processes(db_url: str, tmp_path: Path) -> None:
    """Several services start at once against a database nobody has migrated yet.

    On SQLite the file does not even exist; the race is repeated on fresh files, since
    switching a new file to WAL mode is itself a race between the openers.
    """
    n = 4
    if db_url.startswith("sqlite"):
        urls = [f"sqlite+pysqlite:///{tmp_path / f'fresh-{i}.db'}" for i in range(8)]
    else:
        urls = [db_url]
    barrier = SPAWN.Barrier(n)
    reports: Any = SPAWN.Queue()
    procs = [SPAWN.Process(target=open_and_record, args=(urls, w, barrier, reports)) for w in range(n)]
    for p in procs:
        p.start()
    try:
        got = {}
        for _ in range(n):
            try:
                worker, status, payload = reports.get(timeout=120)
            except queue.Empty:
                pytest.fail(f"an opener did not report: exit codes {[p.exitcode for p in procs]}")
            assert status == "ok", f"opener {worker} failed:\n{payload}"
            got[worker] = payload
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    assert got == {w: ["r1"] * len(urls) for w in range(n)}
    for url in urls:
        assert stamped_revisions(url) == [head_revision()]
        assert schema_diff(url) == []
        a = Archive.open(url)
        try:
            with a.store.read() as conn:
                sessions = conn.execute(
                    select(t.sessions.c.session_id).where(t.sessions.c.tenant_id == TENANT)
                )
                assert sorted(r.session_id for r in sessions) == [f"opener-{w}" for w in range(n)]
        finally:
            a.close()


def test_first_open_of_a_sqlite_file_waits_for_a_busy_writer(tmp_path: Path) -> None:
    """Switching a new file to WAL needs an exclusive lock; SQLite refuses it at once (no busy
    wait) while another connection writes. Opening must wait for that writer, not fail."""
    path = tmp_path / "fresh.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        writer.execute("CREATE TABLE early (a INTEGER)")  # a rollback-journal file ...
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO early VALUES (1)")  # ... with a write in progress
        committed = threading.Event()

        def commit() -> None:
            writer.execute("COMMIT")
            committed.set()

        release = threading.Timer(0.5, commit)
        release.start()
        # The file exists without a key file (made above, not by Archive.open): given a key.
        a = Archive.open(str(path), receipt_key=ReceiptKey.ephemeral())
        try:
            # It waited for the writer rather than racing past it: the commit came first (an
            # order, not a duration, so a slow machine cannot fail it).
            returned_after_commit = committed.is_set()
            assert a.record(AGENT, "s1", "t", "x").result_id == "r1"
            with a.store.read() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        finally:
            a.close()
        release.join()
        assert returned_after_commit
    finally:
        writer.close()
