"""One SELECT rendered once per database dialect and run on the driver's own connection.

Search hydration runs one statement on every search, and SQLAlchemy's per-execution work
(building the execution context, constructing the parameters, wrapping the cursor, the
BEGIN and COMMIT of a transaction) cost three times what the database itself spends on it.
A `PreparedSelect` does that work once: it renders the statement to the dialect's SQL with
its positional order, and keeps the bind and result processors of every parameter and
column, so each run only maps the parameters, executes and applies the processors.
The rows read are what `Connection.execute` would return, as plain tuples.

One statement needs no explicit transaction to be consistent: SQLite (its connections are in
autocommit mode, store._sqlite_on_connect) and PostgreSQL both answer a single SELECT from one
snapshot. Statements that must agree with one another still belong in `ArchiveStore.read()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Dialect

_Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class PreparedSelect:
    """`statement` as `dialect` runs it: SQL text, parameter order, bind and result processors."""

    sql: str
    # Parameter names in placeholder order for positional paramstyles (SQLite's qmark), or
    # None where the driver takes a mapping (psycopg's pyformat).
    order: tuple[str, ...] | None
    binds: tuple[tuple[str, _Processor], ...]
    results: tuple[_Processor | None, ...]

    @classmethod
    def of(cls, statement: Select[Any], dialect: Dialect) -> PreparedSelect:
        compiled = statement.compile(dialect=dialect)
        if compiled.post_compile_params or compiled.literal_execute_params:
            # An expanding IN is rendered per execution; such a statement cannot be prepared.
            raise ValueError("a prepared SELECT cannot hold expanding or literal-execute parameters")
        binds = []
        for name, bind in compiled.binds.items():
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                binds.append((name, processor))
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in statement.selected_columns
        )
        order = tuple(compiled.positiontup) if compiled.positiontup is not None else None
        return cls(str(compiled), order, tuple(binds), results)

    def parameters(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The driver's parameters for `values` (every name of the statement, unprocessed)."""
        if self.binds:
            values = dict(values)
            for name, processor in self.binds:
                values[name] = processor(values[name])
        if self.order is None:
            return values
        return [values[name] for name in self.order]

    def processed(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The driver's rows with each column's result processor applied, as SQLAlchemy would
        (a NULL stays None without a call: SQLAlchemy's processors and schema.UTCDateTime all map
        None to None)."""
        columns = [(i, p) for i, p in enumerate(self.results) if p is not None]
        if not columns:
            return [tuple(row) for row in rows]
        out: list[tuple[Any, ...]] = []
        for row in rows:
            values = list(row)
            for i, processor in columns:
                if values[i] is not None:
                    values[i] = processor(values[i])
            out.append(tuple(values))
        return out
