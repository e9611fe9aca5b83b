"""On SQLite a write's statements about many rows run as few steps (archive/storage/statements.py:
the driver lets the interpreter's lock go at each step, and another thread running Python made
each one wait out its switch interval): the chains a write reads come back as one row of JSON,
the versions it supersedes are updated a few statements of many rows at a time, and an archive
call's entries are inserted as multi-row statements. What they read and store is what the
statements they replace read and store, on both backends (PostgreSQL keeps those)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Engine,
    Float,
    LargeBinary,
    TypeDecorator,
    bindparam,
    cast,
    event,
    literal_column,
    select,
)

from mnemo_sea.archive import Archive, EvidenceInput, Principal, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage import statements
from mnemo_sea.archive.storage.statements import rows_in_one_step


@contextmanager
def _sent(engine: Engine, prefix: str) -> Iterator[list[tuple[str, bool]]]:
    """The (SQL, executemany) of every statement starting with `prefix` run meanwhile."""
    found: list[tuple[str, bool]] = []

    def note(conn: Any, cursor: Any, sql: str, params: Any, context: Any, executemany: bool) -> None:
        if sql.lstrip().startswith(prefix):
            found.append((sql, executemany))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _evidence(tenant: str, archive: Archive) -> list[dict[str, Any]]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.evidence)
            .where(t.evidence.c.tenant_id == tenant)
            .order_by(t.evidence.c.evidence_id, t.evidence.c.version)
        )
        return [dict(r._mapping) for r in rows]


_AWKWARD = [
    "plain",
    'quotes " and \\ backslashes, a tab\t and\nlines',
    "中文 and emoji 🐾, NUL-free but \x01 control",
    "",
    # Text that reads as JSON stays text.
    "[1, 2]",
    '{"a": 1}',
    "123",
    "null",
    "true",
]


def test_rows_read_in_one_step_are_those_sqlalchemy_reads(archive: Archive, agent: Principal) -> None:
    """Every column of evidence versions, with times, NULLs, long and awkward text, read through
    JSON on SQLite (one statement) as `Connection.execute` reads them."""
    valid = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    for i, text in enumerate(_AWKWARD):
        archive.put_evidence(
            agent,
            EvidenceInput(
                evidence_id=f"doc:{i}",
                body=f"body {i}",
                source="src/" + str(i),
                statement=text or None,
                valid_from=valid if i % 2 else None,
                valid_until=valid + timedelta(days=1) if i % 2 else None,
                metadata={"k": text, "n": i} if i != 3 else None,
                sensitivity=Sensitivity.CONFIDENTIAL if i == 2 else Sensitivity.INTERNAL,
            ),
        )
        archive.put_evidence(agent, EvidenceInput(evidence_id=f"doc:{i}", body=f"body {i} again", source="s"))
    statement = select(t.evidence).where(t.evidence.c.tenant_id == bindparam("tenant"))
    with archive.store.read() as conn, _sent(archive.store.engine, "SELECT") as sent:
        ours = rows_in_one_step(conn, "test.evidence", lambda: statement, {"tenant": agent.tenant_id})
        sent_by_us = len(sent)
        theirs = [tuple(r) for r in conn.execute(statement, {"tenant": agent.tenant_id})]
    assert len(theirs) == 2 * len(_AWKWARD)
    assert sorted(ours, key=repr) == sorted(theirs, key=repr)
    for row in ours:
        assert all(type(a) is type(b) for a, b in zip(row, next(r for r in theirs if r == row), strict=True))
    if archive.store.is_sqlite:
        assert sent_by_us == 1 and "json_group_array" in sent[0][0]


class _Stamp(TypeDecorator[bytes]):
    """A decorator over bytes: what it stores is what counts."""

    impl = LargeBinary
    cache_ok = True


class _Ratio(TypeDecorator[float]):
    impl = Float
    cache_ok = True


def test_only_text_integer_time_and_flag_columns_are_read_through_json(tmp_path: Path) -> None:
    """JSON cannot hold a BLOB, and SQLite writes a real to 15 significant digits: a column that
    stores either, bare or under a decorator, is refused, as is a type that says nothing."""
    archive = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'archive.db'}")
    try:
        with archive.store.read() as conn:
            refused = {
                "blob": select(t.blobs.c.content),
                "real": select(cast(t.evidence.c.version, Float)),
                "decorated blob": select(cast(t.blobs.c.content, _Stamp)),
                "decorated real": select(cast(t.evidence.c.version, _Ratio)),
                "untyped": select(literal_column("1")),
            }
            for name, statement in refused.items():
                with pytest.raises(ValueError, match="does not go through JSON"):
                    rows_in_one_step(conn, f"test.refused.{name}", lambda s=statement: s, {})
            # Times are decorated text (schema.UTCDateTime): taken.
            assert rows_in_one_step(conn, "test.taken", lambda: select(t.evidence.c.recorded_at), {}) == []
    finally:
        archive.close()


def test_a_write_superseding_many_versions_reads_and_updates_them_in_few_statements(
    archive: Archive, agent: Principal, other_tenant: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve stored versions superseded by one batch (one of a chain of eleven): on SQLite the
    chains are one read and the versions three UPDATEs of 4 rows (at most 4 a statement here),
    on PostgreSQL one executemany. Each superseded version ends when its successor was
    recorded, and nothing else changes: not another tenant's records of the same ids, not the
    versions before."""
    monkeypatch.setattr(statements, "MAX_ROWS_PER_STATEMENT", 4)
    ids = [f"doc:{i:02d}" for i in range(11)]
    for n in range(11):  # a long chain: its versions sort as numbers (10 after 9), not as text
        archive.put_evidence(agent, EvidenceInput(body=f"long v{n}", source="s", evidence_id="doc:long"))
    for principal in (agent, other_tenant):
        archive.write_evidence_batch(
            principal, [EvidenceInput(body=f"{e} v1", source="s", evidence_id=e) for e in ids]
        )
    archive.write_evidence_batch(
        agent, [EvidenceInput(body=f"{e} v2", source="s", evidence_id=e) for e in ids[:3]]
    )
    others_before = _evidence(other_tenant.tenant_id, archive)
    engine = archive.store.engine
    with (
        _sent(engine, "WITH ended") as updates,
        _sent(engine, "UPDATE evidence") as plain,
        _sent(engine, "SELECT") as reads,
    ):
        archive.write_evidence_batch(
            agent,
            [EvidenceInput(body=f"{e} v3", source="s", evidence_id=e) for e in ids]
            + [EvidenceInput(body="long, last", source="s", evidence_id="doc:long")],
        )
    if archive.store.is_sqlite:
        # Twelve versions superseded: 4 + 4 + 4.
        assert [(sql.count("(?, ?, ?)"), many) for sql, many in updates] == [(4, False)] * 3
        assert plain == []
        assert len([sql for sql, _ in reads if "json_group_array" in sql]) == 1
    else:
        assert updates == [] and [many for _, many in plain] == [True]
    rows = _evidence(agent.tenant_id, archive)
    chains: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        chains.setdefault(row["evidence_id"], []).append(row)
    for eid in [*ids, "doc:long"]:
        versions = chains[eid]
        assert [v["status"] for v in versions] == ["superseded"] * (len(versions) - 1) + ["active"], eid
        for older, newer in itertools.pairwise(versions):
            assert older["ended_at"] == newer["recorded_at"], eid
        assert versions[-1]["ended_at"] is None
    assert [len(chains[e]) for e in ids] == [3] * 3 + [2] * 8
    assert [v["version"] for v in chains["doc:long"]] == list(range(1, 13))
    assert _evidence(other_tenant.tenant_id, archive) == others_before


def test_an_archive_calls_entries_go_as_multi_row_statements_on_sqlite(
    archive: Archive, agent: Principal
) -> None:
    """Three results archived in one call: multi-row INSERTs on SQLite (2 + 1 rows: powers of
    two), an executemany on PostgreSQL, storing each result's note, batch and time."""
    for n in range(3):
        archive.record(agent, "s1", "orders.lookup", f"order O-{n} " * 20)
    with _sent(archive.store.engine, "INSERT INTO archive_entries") as sent:
        receipt = archive.archive_results(agent, "s1", [(f"r{n + 1}", f"note {n}") for n in range(3)])
    if archive.store.is_sqlite:
        assert [(sql.count("?") // 7, many) for sql, many in sent] == [(2, False), (1, False)]
    else:
        assert [many for _, many in sent] == [True]
    with archive.store.read() as conn:
        entries = conn.execute(
            select(t.archive_entries).where(t.archive_entries.c.tenant_id == agent.tenant_id)
        ).all()
    assert sorted((e.result_no, e.note) for e in entries) == [(n + 1, f"note {n}") for n in range(3)]
    assert len({(e.batch_id, e.archived_at, e.archived_by) for e in entries}) == 1
    assert entries[0].archived_by == agent.subject and receipt is not None


def test_rows_a_statement_keep_within_the_bound_with_the_parameters_besides(tmp_path: Path) -> None:
    """A statement of rows of 3 parameters, with 2 more besides (a supersede's tenant and status),
    stays within the library's bound: under 20, 13 rows go as 4 + 4 + 4 + 1; under 13, rows of
    4 would bind 14, so they go as 2 + 2 (without the 2 besides, one statement of 4)."""
    archive = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'archive.db'}")
    try:
        with archive.store.write() as conn:
            driver = conn.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
            assert statements.multi_row_sizes(conn, 13, 3, besides=2) == [4, 4, 4, 1]
            driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 13)
            assert statements.multi_row_sizes(conn, 4, 3, besides=2) == [2, 2]  # (13 - 2) // 3 = 3
            assert statements.multi_row_sizes(conn, 4, 3) == [4]  # 13 // 3 = 4
    finally:
        archive.close()
