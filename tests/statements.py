"""Every statement an archive store runs, as the tests count and inspect them: those executed
through SQLAlchemy (its `before_cursor_execute` event, BEGIN included on SQLite) and the
prepared SELECTs that `ArchiveStore.select` runs on the driver's connection, which no
SQLAlchemy event sees (archive/storage/statements.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import event

from mnemo_sea.archive.storage.statements import PreparedSelect
from mnemo_sea.archive.storage.store import ArchiveStore


@dataclass(frozen=True)
class Statement:
    sql: str
    parameters: Any


@contextmanager
def statements_of(store: ArchiveStore) -> Iterator[list[Statement]]:
    """The statements `store` runs inside the block, in order."""
    seen: list[Statement] = []
    real_select = ArchiveStore.select

    def on_execute(_conn: object, _cursor: object, sql: str, parameters: Any, *_: object) -> None:
        seen.append(Statement(sql, parameters))

    def select(
        self: ArchiveStore, prepared: PreparedSelect, values: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        if self is store:
            seen.append(Statement(prepared.sql, prepared.parameters(values)))
        return real_select(self, prepared, values)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ArchiveStore, "select", select)
        event.listen(store.engine, "before_cursor_execute", on_execute)
        try:
            yield seen
        finally:
            event.remove(store.engine, "before_cursor_execute", on_execute)
