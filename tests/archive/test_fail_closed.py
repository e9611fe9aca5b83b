"""Fail closed: when the store cannot be reached or fails in the middle of a transaction,
operations raise StoreUnavailable (StoreCorrupt when the file is not a database) and nothing is
half-written.

Mid-transaction failures are real driver failures: on PostgreSQL the server terminates our
backend just before a chosen statement runs; on SQLite the driver raises a disk I/O error at that
point, or another connection holds the write lock past the busy timeout. Afterwards a separate,
healthy store compares every table with a snapshot taken before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, create_engine, event, select

from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    Forbidden,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StoreCorrupt,
    StoreUnavailable,
)
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage import store as store_module

Snapshot = dict[str, list[tuple[Any, ...]]]


def snapshot(db_url: str) -> Snapshot:
    """Every row of every archive table, read through a fresh, healthy store."""
    healthy = Archive.open(db_url)
    try:
        with healthy.store.read() as conn:
            return {
                table.name: [
                    tuple(r) for r in conn.execute(select(table).order_by(*table.primary_key.columns))
                ]
                for table in t.metadata.sorted_tables
            }
    finally:
        healthy.close()


def _kill_backend(conn: Connection) -> None:
    """Have the PostgreSQL server terminate this connection's backend, and wait until it is gone."""
    pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
    dsn = conn.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


@contextmanager
def connection_dies_before(archive: Archive, statement_prefix: str) -> Iterator[list[str]]:
    """The first statement starting with `statement_prefix` fails at the driver, as if the
    connection broke right then. Yields the statements seen, to prove the failure was reached."""
    seen: list[str] = []
    armed = [True]

    def before(conn: Connection, cursor: Any, statement: str, *rest: Any) -> None:
        seen.append(statement)
        if armed[0] and statement.lstrip().upper().startswith(statement_prefix.upper()):
            armed[0] = False
            if conn.dialect.name == "postgresql":
                _kill_backend(conn)
            else:
                raise sqlite3.OperationalError("disk I/O error")

    event.listen(archive.store.engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(archive.store.engine, "before_cursor_execute", before)
    assert not armed[0], f"no statement started with {statement_prefix!r}; saw {seen}"


# ---- opening -------------------------------------------------------------------------------


def test_unreachable_postgres_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable) as err:
        Archive.open("postgresql+psycopg://postgres@127.0.0.1:1/postgres")
    assert err.value.to_dict()["code"] == "store_unavailable"
    assert "unreachable" in err.value.message


def test_a_file_that_is_not_a_database_is_store_corrupt(tmp_path: Path) -> None:
    # StoreCorrupt (an IntegrityFailure), no longer StoreUnavailable: waiting does not mend a file.
    path = tmp_path / "notes.db"
    original = b"these are my notes, not a database\n" * 200
    path.write_bytes(original)
    with pytest.raises(StoreCorrupt) as err:
        Archive.open(str(path))
    assert not isinstance(err.value, StoreUnavailable)
    assert err.value.detail == {"database": str(path), "reason": "file is not a database"}
    assert path.read_bytes() == original  # and the file is left as it was


def test_a_directory_is_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable):
        Archive.open(str(tmp_path))


# ---- the store goes away after opening -----------------------------------------------------


def _dead_url(db_url: str, tmp_path: Path) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite+pysqlite:///{tmp_path / 'missing-dir' / 'archive.db'}"
    return "postgresql+psycopg://postgres@127.0.0.1:1/postgres"


def test_every_operation_fails_closed_when_the_store_is_gone(
    db_url: str, tmp_path: Path, agent: Principal, admin: Principal
) -> None:
    archive = Archive.open(db_url)
    archive.record(agent, "s1", "t", "result")
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v1", source="doc"))
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    before = snapshot(db_url)

    healthy_engine = archive.store.engine
    archive.store.engine = create_engine(_dead_url(db_url, tmp_path))
    operations: list[Callable[[], object]] = [
        lambda: archive.record(agent, "s1", "t", "x"),
        lambda: archive.archive_results(agent, "s1", [("r1", "note")]),
        lambda: archive.live_view(agent, "s1"),
        lambda: archive.recover(agent, "s1", "r1"),
        lambda: archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v2", source="doc")),
        lambda: archive.get_evidence(agent, "kb", with_content=True),
        lambda: archive.retract(agent, "kb", "gone"),
        lambda: archive.remember(agent, "user-7", "timezone", "Asia/Shanghai", "user_correction"),
        lambda: archive.current(agent, "user-7", "timezone"),
        lambda: archive.create_summary(agent, "s", ["evidence:kb"]),
        lambda: archive.delete_evidence(admin, "kb"),
        lambda: archive.delete_owner(admin, "user-7"),
        lambda: archive.verify_audit(admin),
    ]
    try:
        for op in operations:
            with pytest.raises(StoreUnavailable):
                op()
        # A denial is still a denial when the store is down: the caller's error is not replaced.
        reader = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
        with pytest.raises(Forbidden):
            archive.delete_evidence(reader, "kb")
    finally:
        archive.store.engine.dispose()
        archive.store.engine = healthy_engine
        archive.close()
    assert snapshot(db_url) == before


# ---- failures in the middle of a transaction -----------------------------------------------


def _setup(archive: Archive, agent: Principal) -> None:
    archive.record(agent, "s1", "orders.lookup", "order O-1042: shipped")
    archive.record(agent, "s1", "kb.read", "refund window: 30 days")
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v1", source="doc"))
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim", derived_from="evidence:kb")
    archive.create_summary(agent, "summary", ["evidence:kb", "result:s1/r1"])


Case = tuple[str, Callable[[Archive, Principal, Principal], object]]

MID_TRANSACTION: dict[str, Case] = {
    # The failing statement comes after the operation has already changed rows in its transaction.
    "put_evidence": (
        "INSERT INTO outbox",
        lambda a, ag, ad: a.put_evidence(ag, EvidenceInput(evidence_id="kb", body="v2", source="doc")),
    ),
    "retract": ("INSERT INTO audit_events", lambda a, ag, ad: a.retract(ag, "kb", "withdrawn")),
    "remember": (
        "INSERT INTO outbox",
        lambda a, ag, ad: a.remember(ag, "user-7", "timezone", "Asia/Shanghai", "user_correction"),
    ),
    "remember_new_key": (
        "INSERT INTO outbox",
        lambda a, ag, ad: a.remember(ag, "user-7", "mood", "ok", "user_claim", ttl_seconds=3600),
    ),
    "create_summary": ("INSERT INTO outbox", lambda a, ag, ad: a.create_summary(ag, "s2", ["evidence:kb"])),
    "record": ("INSERT INTO tool_results", lambda a, ag, ad: a.record(ag, "s1", "t", "a new original")),
    "archive": (
        "INSERT INTO audit_events",
        lambda a, ag, ad: a.archive_results(ag, "s1", [("r1", "n1"), ("r2", "n2")]),
    ),
    "delete_evidence": ("INSERT INTO audit_events", lambda a, ag, ad: a.delete_evidence(ad, "kb")),
    "delete_session": ("INSERT INTO audit_events", lambda a, ag, ad: a.delete_session(ad, "s1")),
    "delete_owner": ("INSERT INTO outbox", lambda a, ag, ad: a.delete_owner(ad, "user-7")),
}


def test_a_connection_failure_mid_transaction_changes_nothing(
    db_url: str, agent: Principal, admin: Principal
) -> None:
    archive = Archive.open(db_url)
    try:
        _setup(archive, agent)
        before = snapshot(db_url)
        for name, (prefix, operation) in MID_TRANSACTION.items():
            with connection_dies_before(archive, prefix) as seen, pytest.raises(StoreUnavailable) as err:
                operation(archive, agent, admin)
            # The operation had changed rows before the failure: a half-write was possible.
            writes = [s for s in seen[:-1] if s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]
            assert writes, (name, seen)
            assert "nothing was changed" in err.value.message, name
            assert snapshot(db_url) == before, name

        # The same archive object carries on once the store is healthy again, and the version
        # chain continues without a gap where the failed write was.
        rec = archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v2", source="doc"))
        assert rec.version == 2
        history = archive.evidence_history(agent, "kb")
        assert [(h.version, h.status) for h in history] == [(1, "superseded"), (2, "active")]
        assert archive.get_evidence(agent, "kb", with_content=True)[1] == b"v2"
        assert archive.archive_results(agent, "s1", [("r1", "n1")]).archived == ("r1",)
        assert archive.verify_audit(admin).ok
    finally:
        archive.close()


# ---- SQLite: another process holds the write lock ------------------------------------------


def test_sqlite_write_lock_held_elsewhere_is_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: Principal, admin: Principal
) -> None:
    path = tmp_path / "archive.db"
    monkeypatch.setattr(store_module, "SQLITE_BUSY_TIMEOUT_MS", 50)
    archive = Archive.open(str(path))
    try:
        _setup(archive, agent)
        before = snapshot(str(path))
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("DELETE FROM outbox")  # an uncommitted change of its own
            for _, operation in MID_TRANSACTION.values():
                with pytest.raises(StoreUnavailable) as err:
                    operation(archive, agent, admin)
                assert "locked" in err.value.message
            # WAL readers are not blocked by a writer: reads keep working.
            assert archive.get_evidence(agent, "kb")[0].version == 1
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert snapshot(str(path)) == before
        # Once the lock is released, writes go through again.
        assert (
            archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="v2", source="doc")).version == 2
        )
        with pytest.raises(NotFound):
            archive.get_evidence(agent, "kb", version=3)
    finally:
        archive.close()
