"""A prepared SELECT (archive/prepared.py) reads what SQLAlchemy would, on both backends, and
fails as the store's transactions do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Select, bindparam, select

from mnemo_sea.archive import Archive, EvidenceInput, Principal, StoreUnavailable
from mnemo_sea.archive import schema as t
from mnemo_sea.archive.prepared import PreparedSelect
from mnemo_sea.archive.store import open_store


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
