"""A prepared SELECT (archive/storage/statements.py) reads what SQLAlchemy would, on both backends, and
fails as the store's transactions do; a prepared INSERT stores what SQLAlchemy's would, in the
caller's transaction."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Select, bindparam, event, select

from mnemo_sea.archive import Archive, EvidenceInput, Principal, StoreUnavailable
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage import statements
from mnemo_sea.archive.storage.blobs import put_blobs
from mnemo_sea.archive.storage.statements import PreparedInsert, PreparedSelect, prepared_insert
from mnemo_sea.archive.storage.store import open_store


def _statement() -> Select[Any]:
    return select(
        t.evidence.c.evidence_id,
        t.evidence.c.version,
        t.evidence.c.sensitivity,
        t.evidence.c.recorded_at,  # UTCDateTime: a string on SQLite until processed
        t.evidence.c.ended_at,  # NULL for the active version
        t.blobs.c.content,
    ).where(
        t.evidence.c.tenant_id == bindparam("tenant"),
        t.blobs.c.tenant_id == t.evidence.c.tenant_id,
        t.blobs.c.sha256 == t.evidence.c.blob_sha256,
        t.evidence.c.evidence_id.in_([bindparam("a"), bindparam("b")]),
    )


def test_rows_are_those_sqlalchemy_reads(archive: Archive, agent: Principal) -> None:
    for n, body in enumerate(["first", "second 第二", "second, revised"]):
        archive.put_evidence(agent, EvidenceInput(evidence_id=f"doc:{min(n, 1)}", body=body, source="t"))
    values = {"tenant": agent.tenant_id, "a": "doc:0", "b": "doc:1"}
    prepared = PreparedSelect.of(_statement(), archive.store.engine.dialect)
    with archive.store.read() as conn:
        expected = sorted(tuple(row) for row in conn.execute(_statement(), values))
    rows = sorted(archive.store.select(prepared, values))
    assert len(rows) == 3 and rows == expected
    assert all(row[3].tzinfo is not None for row in rows)  # aware datetimes, as the schema reads them
    assert sorted(row[4] is None for row in rows) == [False, True, True]  # one superseded version
    other = dict(values, tenant="someone-else")
    assert archive.store.select(prepared, other) == []


class _Row(NamedTuple):
    evidence_id: str
    version: int
    sensitivity: int
    recorded_at: datetime
    ended_at: datetime | None
    content: bytes


def test_rows_are_read_by_name_as_the_named_tuple_given(archive: Archive, agent: Principal) -> None:
    """`row=`: each row is that NamedTuple (equal to the plain tuple), processed alike; a
    NamedTuple that does not name the statement's columns in order is refused at preparation."""
    archive.put_evidence(agent, EvidenceInput(evidence_id="doc:0", body="first", source="t"))
    values = {"tenant": agent.tenant_id, "a": "doc:0", "b": "doc:1"}
    dialect = archive.store.engine.dialect
    plain = archive.store.select(PreparedSelect.of(_statement(), dialect), values)
    [row] = archive.store.select(PreparedSelect.of(_statement(), dialect, _Row), values)
    assert type(row) is _Row and [row] == plain
    assert (row.evidence_id, row.version, row.content) == ("doc:0", 1, b"first")
    assert row.recorded_at.tzinfo is not None and row.ended_at is None

    class Shifted(NamedTuple):
        version: int
        evidence_id: str

    with pytest.raises(ValueError, match="does not name the columns"):
        PreparedSelect.of(select(t.evidence.c.evidence_id, t.evidence.c.version), dialect, Shifted)


def test_values_the_statement_binds_itself_are_kept(archive: Archive, agent: Principal) -> None:
    """A constant compared with, and the OFFSET 0 that SQLite renders with a LIMIT, are bound by
    the statement itself: the caller gives its own parameters only, and reads SQLAlchemy's rows."""
    for n in range(4):
        archive.put_evidence(agent, EvidenceInput(evidence_id=f"doc:{n}", body=f"body {n}", source="t"))
    statement = (
        select(t.evidence.c.evidence_id)
        .where(t.evidence.c.tenant_id == bindparam("tenant"), t.evidence.c.evidence_id != "doc:1")
        .order_by(t.evidence.c.evidence_id)
        .limit(bindparam("limit"))
    )
    prepared = PreparedSelect.of(statement, archive.store.engine.dialect)
    values = {"tenant": agent.tenant_id, "limit": 2}
    with archive.store.read() as conn:
        expected = [tuple(row) for row in conn.execute(statement, values)]
    assert archive.store.select(prepared, values) == expected == [("doc:0",), ("doc:2",)]
    assert archive.store.select(prepared, {**values, "limit": 9}) == [("doc:0",), ("doc:2",), ("doc:3",)]


def test_an_expanding_in_cannot_be_prepared(archive: Archive) -> None:
    statement = select(t.evidence.c.evidence_id).where(t.evidence.c.evidence_id.in_(["a", "b"]))
    with pytest.raises(ValueError, match="expanding"):
        PreparedSelect.of(statement, archive.store.engine.dialect)


def test_a_store_that_fails_is_store_unavailable(tmp_path: Path, agent: Principal) -> None:
    path = tmp_path / "archive.db"
    archive = Archive.open(str(path))
    try:
        prepared = PreparedSelect.of(_statement(), archive.store.engine.dialect)
        values = {"tenant": agent.tenant_id, "a": "x", "b": "y"}
        assert archive.store.select(prepared, values) == []
        with archive.store.write() as conn:
            conn.exec_driver_sql("DROP TABLE blobs")  # the statement now fails at the driver
        with pytest.raises(StoreUnavailable, match="nothing was changed"):
            archive.store.select(prepared, values)
    finally:
        archive.close()


def test_an_unreachable_postgres_is_store_unavailable(agent: Principal) -> None:
    # The pool hands out the driver's connect error itself, unwrapped: it must still be typed.
    store = open_store("postgresql+psycopg://postgres@127.0.0.1:1/postgres", migrate=False)
    try:
        prepared = PreparedSelect.of(_statement(), store.engine.dialect)
        with pytest.raises(StoreUnavailable, match="unreachable"):
            store.select(prepared, {"tenant": agent.tenant_id, "a": "x", "b": "y"})
    finally:
        store.dispose()


def _outbox_rows(n: int) -> list[dict[str, Any]]:
    stamp = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=ZoneInfo("Europe/Berlin"))
    return [
        {
            "tenant_id": "t-prepared",
            "op": "cache_purge",
            "entity": "tenant",
            "entity_ref": f"ref-{i} 第{i}",
            "payload_json": "{}" if i % 2 else '{"reason": "évidence"}',
            # One shared stamp (processed once) and one of its own per row: both stored as given.
            "created_at": stamp if i % 2 else stamp + timedelta(microseconds=i),
            "attempts": i,
        }
        for i in range(n)
    ]


def test_a_prepared_insert_stores_what_sqlalchemy_stores(archive: Archive) -> None:
    columns = tuple(_outbox_rows(1)[0])
    prepared = PreparedInsert.of(t.outbox.insert(), columns, archive.store.engine.dialect)
    ours, theirs = _outbox_rows(5), [dict(r, tenant_id="t-sqlalchemy") for r in _outbox_rows(5)]
    with archive.store.write() as conn:
        prepared.execute(conn, ours)
        prepared.execute(conn, [])  # nothing to write is no statement
        conn.execute(t.outbox.insert(), theirs)

    def stored(tenant: str) -> list[tuple[Any, ...]]:
        with archive.store.read() as conn:
            stmt = select(*(t.outbox.c[c] for c in columns if c != "tenant_id"), t.outbox.c.done_at)
            return [
                tuple(r)
                for r in conn.execute(stmt.where(t.outbox.c.tenant_id == tenant).order_by(t.outbox.c.id))
            ]

    assert stored("t-prepared") == stored("t-sqlalchemy")
    assert [r[4] for r in stored("t-prepared")] == [r["created_at"] for r in ours]  # aware, same instants
    assert [r[-1] for r in stored("t-prepared")] == [None] * 5


def _stored(archive: Archive, columns: tuple[str, ...], tenant: str) -> list[tuple[Any, ...]]:
    """A tenant's outbox rows in id order, the given columns but the tenant."""
    with archive.store.read() as conn:
        stmt = select(*(t.outbox.c[c] for c in columns if c != "tenant_id"))
        return [
            tuple(r) for r in conn.execute(stmt.where(t.outbox.c.tenant_id == tenant).order_by(t.outbox.c.id))
        ]


def test_rows_given_as_values_store_what_mappings_store(archive: Archive) -> None:
    """`execute_values` takes each row's values in the order the columns were given to `of`,
    which need not be the table's (nor the driver's parameter order): reversed here."""
    columns = tuple(reversed(_outbox_rows(1)[0]))
    prepared = PreparedInsert.of(t.outbox.insert(), columns, archive.store.engine.dialect)
    if not prepared.named:  # a positional driver's order is the table's: the values are reordered
        assert prepared.columns != columns
    as_values = [tuple(row[c] for c in columns) for row in _outbox_rows(4)]
    as_mappings = [dict(r, tenant_id="t-mappings") for r in _outbox_rows(4)]
    with archive.store.write() as conn:
        prepared.execute_values(conn, as_values)
        prepared.execute_values(conn, [])  # nothing to write is no statement
        prepared.execute(conn, as_mappings)

    assert _stored(archive, columns, "t-prepared") == _stored(archive, columns, "t-mappings") != []
    ref_at = [c for c in columns if c != "tenant_id"].index("entity_ref")
    assert [r[ref_at] for r in _stored(archive, columns, "t-prepared")] == [
        f"ref-{i} 第{i}" for i in range(4)
    ]


def test_a_time_shared_by_columns_is_stored_in_each_as_given(archive: Archive) -> None:
    """Columns of one type share the memo of the last time processed: the same object in two
    columns, a new one in the next, another zone, None between: each column holds its own."""
    berlin, tokyo = ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Tokyo")
    stamp = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=berlin)
    times = [
        (stamp, stamp, stamp),  # one object in all three columns
        (stamp, None, stamp + timedelta(seconds=1)),
        (stamp.astimezone(tokyo), stamp + timedelta(days=1), stamp),  # the same instant, other zone
        (stamp + timedelta(microseconds=1), stamp + timedelta(microseconds=1), None),  # equal, not one
    ]
    rows = [
        dict(_outbox_rows(1)[0], created_at=created, done_at=done, applied_at=applied)
        for created, done, applied in times
    ]
    columns = tuple(rows[0])
    prepared = PreparedInsert.of(t.outbox.insert(), columns, archive.store.engine.dialect)
    calls: list[object] = []

    def counted(processor: Any) -> Any:
        return lambda value: calls.append(value) or processor(value)

    counting = dataclasses.replace(prepared, binds=tuple((i, counted(p), s) for i, p, s in prepared.binds))
    with archive.store.write() as conn:
        counting.execute(conn, rows)
        conn.execute(t.outbox.insert(), [dict(r, tenant_id="t-sqlalchemy") for r in rows])
    # Each time object processed once where the one before it in the shared slot was another:
    # the stamp in all three columns once, then the second, then three, then two equal objects.
    assert [value for value in calls if isinstance(value, datetime)] == [
        times[0][0],
        times[1][2],
        *times[2],
        times[3][0],
        times[3][1],
    ]

    def stored(tenant: str) -> list[tuple[Any, ...]]:
        o = t.outbox.c
        with archive.store.read() as conn:
            query = select(o.created_at, o.done_at, o.applied_at).where(o.tenant_id == tenant).order_by(o.id)
            return [tuple(r) for r in conn.execute(query)]

    assert (
        stored("t-prepared")
        == stored("t-sqlalchemy")
        == [tuple(None if x is None else x.astimezone(UTC) for x in row) for row in times]
    )


def test_one_name_prepares_one_column_order(archive: Archive) -> None:
    """`execute_values` reads a row by the column order the INSERT was prepared with: asking for
    the same prepared INSERT with the columns in another order is a mistake, refused."""
    dialect = archive.store.engine.dialect
    columns = tuple(_outbox_rows(1)[0])
    prepared_insert("test one order", t.outbox.insert, columns, dialect)
    assert prepared_insert("test one order", t.outbox.insert, columns, dialect).given == columns
    with pytest.raises(ValueError, match="was prepared for"):
        prepared_insert("test one order", t.outbox.insert, tuple(reversed(columns)), dialect)


def test_a_prepared_insert_in_a_failed_transaction_stores_nothing(archive: Archive) -> None:
    rows = _outbox_rows(3)
    prepared = PreparedInsert.of(t.outbox.insert(), tuple(rows[0]), archive.store.engine.dialect)
    with pytest.raises(RuntimeError, match="after the insert"), archive.store.write() as conn:
        prepared.execute(conn, rows)
        raise RuntimeError("after the insert")
    with archive.store.read() as conn:
        assert conn.execute(select(t.outbox.c.id).where(t.outbox.c.tenant_id == "t-prepared")).first() is None


def test_an_insert_the_rows_do_not_fill_is_refused(archive: Archive) -> None:
    dialect = archive.store.engine.dialect
    with_default = t.outbox.insert().values(attempts=bindparam("tries"))  # a parameter no row gives
    with pytest.raises(ValueError, match="the rows give"):
        PreparedInsert.of(with_default, tuple(_outbox_rows(1)[0]), dialect)


def test_on_sqlite_rows_go_as_few_multi_row_statements(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a prepared INSERT writes its rows as statements of many rows (powers of two, at
    most MAX_ROWS_PER_STATEMENT each), not an executemany stepping once per row (see the module
    docstring: each step let the interpreter's lock go). What they store is what SQLAlchemy's
    own executemany stores, row for row, also for the INSERT ... ON CONFLICT of a blob upsert."""
    dialect = archive.store.engine.dialect
    monkeypatch.setattr(statements, "MAX_ROWS_PER_STATEMENT", 4)
    columns = tuple(_outbox_rows(1)[0])
    prepared = PreparedInsert.of(t.outbox.insert(), columns, dialect)
    sent: list[tuple[str, bool]] = []

    def count(conn: Any, cursor: Any, sql: str, params: Any, context: Any, executemany: bool) -> None:
        if sql.startswith("INSERT INTO outbox"):
            sent.append((sql, executemany))

    event.listen(archive.store.engine, "before_cursor_execute", count)
    try:
        with archive.store.write() as conn:
            prepared.execute(conn, _outbox_rows(11))
            conn.execute(t.outbox.insert(), [dict(r, tenant_id="t-sqlalchemy") for r in _outbox_rows(11)])
    finally:
        event.remove(archive.store.engine, "before_cursor_execute", count)
    ours = sent[:-1]
    if dialect.name == "sqlite":
        # 11 rows: 4 + 4 + 2 + 1, each one statement (its rows' placeholders repeated).
        assert [(s.count("?") // len(columns), many) for s, many in ours] == [
            (4, False),
            (4, False),
            (2, False),
            (1, False),
        ]
    else:
        assert [many for _, many in ours] == [True]  # psycopg: one executemany, as before

    ours_stored = _stored(archive, columns, "t-prepared")
    assert ours_stored == _stored(archive, columns, "t-sqlalchemy") and len(ours_stored) == 11
    # An upsert of blobs: new ones inserted and existing ones touched (each keeps its first media
    # type), in statements of many rows.
    with archive.store.write() as conn:
        put_blobs(conn, "t-blobs", [(f"blob {i}".encode(), "text/plain") for i in range(3)])
    with archive.store.write() as conn:
        put_blobs(conn, "t-blobs", [(f"blob {i}".encode(), "text/csv") for i in range(7)])
    upsert = next(
        p
        for key, p in statements._INSERTS.items()
        if key[0].startswith("insert_or_touch blobs") and key[1] == dialect.name
    )
    assert (upsert.multi_row is not None) == (dialect.name == "sqlite")
    with archive.store.read() as conn:
        blobs = conn.execute(
            select(t.blobs.c.content, t.blobs.c.media_type, t.blobs.c.size)
            .where(t.blobs.c.tenant_id == "t-blobs")
            .order_by(t.blobs.c.content)
        ).all()
    expected = [(f"blob {i}".encode(), "text/plain" if i < 3 else "text/csv") for i in range(7)]
    assert [tuple(b) for b in blobs] == [(c, m, len(c)) for c, m in expected]


def test_rows_per_statement_keep_within_the_librarys_bound_on_parameters(tmp_path: Path) -> None:
    """A SQLite built with a lower bound on a statement's parameters gets statements of fewer
    rows: 7 columns under a bound of 20 parameters are 2 rows a statement. SQLite only: the
    bound is its library's, and only its statements are multi-row."""
    archive = Archive.open(f"sqlite+pysqlite:///{tmp_path / 'archive.db'}")
    try:
        _check_rows_per_statement(archive)
    finally:
        archive.close()


def _check_rows_per_statement(archive: Archive) -> None:
    columns = tuple(_outbox_rows(1)[0])
    prepared = PreparedInsert.of(t.outbox.insert(), columns, archive.store.engine.dialect)
    sent: list[int] = []

    def count(conn: Any, cursor: Any, sql: str, params: Any, context: Any, executemany: bool) -> None:
        if sql.startswith("INSERT INTO outbox"):
            sent.append(sql.count("?") // len(columns))

    event.listen(archive.store.engine, "before_cursor_execute", count)
    try:
        with archive.store.write() as conn:
            driver = conn.connection.driver_connection
            before = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
            try:
                prepared.execute(conn, _outbox_rows(5))
            finally:
                driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)
    finally:
        event.remove(archive.store.engine, "before_cursor_execute", count)
    assert sent == [2, 2, 1]
    assert len(_stored(archive, columns, "t-prepared")) == 5


def test_sql_not_of_one_plain_row_of_placeholders_goes_as_an_executemany() -> None:
    assert statements._values_row("INSERT INTO t (a, b) VALUES (?, ?)", 2) == (
        "INSERT INTO t (a, b) VALUES ",
        "(?, ?)",
        "",
    )
    assert statements._values_row("INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO NOTHING", 2) == (
        "INSERT INTO t (a, b) VALUES ",
        "(?, ?)",
        " ON CONFLICT (a) DO NOTHING",
    )
    assert statements._values_row("INSERT INTO t (a, b) VALUES (?, 'x?')", 1) is None  # a literal holds '?'
    assert statements._values_row("INSERT INTO t (a, b) VALUES (?, ?) RETURNING (?)", 2) is None
    assert statements._values_row("INSERT INTO t (a, b) VALUES (%(a)s, %(b)s)", 2) is None


def test_a_batch_is_cut_into_powers_of_two_within_the_bound() -> None:
    assert statements._powers_of_two(1000, 1024) == [512, 256, 128, 64, 32, 8]
    assert statements._powers_of_two(2001, 1024) == [1024, 512, 256, 128, 64, 16, 1]
    assert statements._powers_of_two(7, 3) == [2, 2, 2, 1]  # the bound need not be a power of two
    assert statements._powers_of_two(3, 1) == [1, 1, 1]
    assert statements._powers_of_two(0, 8) == []
