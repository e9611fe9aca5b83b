"""Statements built and rendered once per database dialect: a SELECT run on the driver's own connection,
an INSERT run for many rows at once (an executemany, or on SQLite a few multi-row statements),
and an UPDATE run in the caller's transaction (one statement naming many rows, on SQLite).

Search hydration runs one statement on every search, and SQLAlchemy's per-execution work
(building the execution context, constructing the parameters, wrapping the cursor, the
BEGIN and COMMIT of a transaction) cost three times what the database itself spends on it.
A `PreparedSelect` does that work once: it renders the statement to the dialect's SQL with
its positional order, and keeps the bind and result processors of every parameter and
column, so each run only maps the parameters, executes and applies the processors.
The rows read are what `Connection.execute` would return, as plain tuples, or as the NamedTuple
the caller names (`prepared_select(row=...)`, its fields checked once against the statement's
column names), so that they are read by name: the driver's tuple becomes that NamedTuple in
one C call per row (~0.1 us), and its fields are read as fast as by index.

One statement needs no explicit transaction to be consistent: SQLite (its connections are in
autocommit mode, store._sqlite_on_connect) and PostgreSQL both answer a single SELECT from one
snapshot. Statements that must agree with one another still belong in `ArchiveStore.read()`.

A `PreparedInsert` does the same for the multi-row INSERTs of a batched write (evidence
versions, blobs, outbox rows): SQLAlchemy's executemany builds and processes the parameters of
every row through its compiled statement (a quarter of an ingest's archive write); here each
row only becomes a tuple (or mapping) with its columns' bind processors applied, and the rows
go to the driver through `Connection.exec_driver_sql`, in the caller's transaction, with
SQLAlchemy's events and error wrapping as for any other statement.

On SQLite the rows go as multi-row INSERTs (`VALUES (...), (...)`, a power of two of rows per
statement, at most the library's bound on parameters), not as an executemany: the sqlite3 driver
lets the interpreter's lock go around every step, and an executemany steps once per row. With
another thread of the process running Python meanwhile (the indexer's trail embedding an
original, a request beside it), each row then waited out that thread's switch interval (5 ms)
to take the lock back: 1,000 rows took 2-3 s instead of 4 ms. A statement of many rows is one
step. Alone, both cost the same (`docs/figures.md`, "Issue 31, sixth round"). A `PreparedUpdate`
serves an UPDATE of many rows for the same reason: the caller builds one statement for k rows
(an `UPDATE ... FROM` a VALUES list of them), `multi_row_sizes` cuts the rows into such
statements, and each is one step. Reading many rows has the same cost (a step per row fetched):
`rows_in_one_step` reads a SELECT's rows on SQLite as one row of JSON, built by SQLite in one
step, for the reads a write makes inside its transaction.
"""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from sqlalchemy import Boolean, Connection, DateTime, Insert, Integer, Select, String, Update, func, select
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

_Processor = Callable[[Any], Any]
_T = TypeVar("_T")


@dataclass(frozen=True)
class _Rendered:
    """A statement as a dialect runs it: SQL text, parameter order, bind processors and the values
    it binds itself."""

    sql: str
    # Parameter names in placeholder order for positional paramstyles (SQLite's qmark), or
    # None where the driver takes a mapping (psycopg's pyformat).
    order: tuple[str, ...] | None
    binds: tuple[tuple[str, _Processor], ...]
    # The values the statement binds itself (a constant compared with, SQLite's OFFSET 0 after a
    # LIMIT), by name: a caller gives the others.
    constants: tuple[tuple[str, Any], ...]

    def parameters(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The driver's parameters for `values` (every name of the statement the statement does
        not bind itself, unprocessed)."""
        if self.constants:
            values = {**dict(self.constants), **values}
        if self.binds:
            values = dict(values)
            for name, processor in self.binds:
                values[name] = processor(values[name])
        if self.order is None:
            return values
        return [values[name] for name in self.order]


def _render(
    statement: Select[Any] | Update, dialect: Dialect
) -> tuple[str, tuple[str, ...] | None, tuple[tuple[str, _Processor], ...], tuple[tuple[str, Any], ...]]:
    """`_Rendered`'s fields for `statement` on `dialect`."""
    compiled = statement.compile(dialect=dialect)
    if compiled.post_compile_params or compiled.literal_execute_params:
        # An expanding IN is rendered per execution; such a statement cannot be prepared.
        raise ValueError("a prepared statement cannot hold expanding or literal-execute parameters")
    # `binds` also lists each parameter the statement binds itself under a key of SQLAlchemy's
    # own, besides the name rendered into the SQL: only rendered names are parameters.
    rendered = set(compiled.bind_names.values())
    binds = []
    constants = []
    for name, bind in compiled.binds.items():
        if name not in rendered:
            continue
        if bind.callable is not None:
            raise ValueError(f"a prepared statement cannot hold a value computed per execution ({name})")
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            binds.append((name, processor))
        if not bind.required:
            constants.append((name, bind.value))
    order = tuple(compiled.positiontup) if compiled.positiontup is not None else None
    return str(compiled), order, tuple(binds), tuple(constants)


@dataclass(frozen=True)
class PreparedSelect(_Rendered):
    """`statement` as `dialect` runs it: SQL text, parameter order, bind and result processors."""

    results: tuple[_Processor | None, ...]
    # What each row becomes: a plain tuple, or `_as_row(RowType)` (see `of`).
    row: Callable[[Iterable[Any]], tuple[Any, ...]] = tuple

    @classmethod
    def of(
        cls, statement: Select[Any], dialect: Dialect, row: type[tuple[Any, ...]] = tuple
    ) -> PreparedSelect:
        """`statement` prepared for `dialect`; its rows as `row`, a NamedTuple whose fields are
        the statement's column names in order (ValueError otherwise), or plain tuples."""
        make: Callable[[Iterable[Any]], tuple[Any, ...]] = tuple
        if row is not tuple:
            names = tuple(column.key for column in statement.selected_columns)
            if getattr(row, "_fields", None) != names:
                raise ValueError(f"{row.__name__} does not name the columns {names}")
            make = _as_row(row)
        return cls(*_render(statement, dialect), _result_processors(statement, dialect), make)

    def processed(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The driver's rows with each column's result processor applied (`_processed`)."""
        return _processed(self.results, self.row, rows)


def _result_processors(statement: Select[Any], dialect: Dialect) -> tuple[_Processor | None, ...]:
    return tuple(
        column.type.dialect_impl(dialect).result_processor(dialect, None)
        for column in statement.selected_columns
    )


def _processed(
    results: tuple[_Processor | None, ...],
    make: Callable[[Iterable[Any]], tuple[Any, ...]],
    rows: Sequence[Sequence[Any]],
) -> list[tuple[Any, ...]]:
    """`rows` with each column's result processor applied, as SQLAlchemy would (a NULL stays
    None without a call: SQLAlchemy's processors and schema.UTCDateTime all map None to None),
    each made a row by `make`."""
    columns = [(i, p) for i, p in enumerate(results) if p is not None]
    if not columns:
        return [make(row) for row in rows]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        # Most processed columns are NULL (an evidence version's validity bounds usually
        # are): such a row is taken as the driver gave it, without a list of its values.
        for i, _ in columns:
            if row[i] is not None:
                break
        else:
            out.append(make(row))
            continue
        values = list(row)
        for i, processor in columns:
            if values[i] is not None:
                values[i] = processor(values[i])
        out.append(make(values))
    return out


def _as_row(row: type[tuple[Any, ...]]) -> Callable[[Iterable[Any]], tuple[Any, ...]]:
    """A NamedTuple made of a row's values without its Python-level `__new__` (a third of the
    time): `tuple.__new__` in C. The length needs no check per row: `of` matched the fields to
    the statement's columns, and the driver returns one value per column."""
    return functools.partial(tuple.__new__, row)


@dataclass(frozen=True)
class PreparedUpdate(_Rendered):
    """An UPDATE with named parameters, run in the caller's transaction (see the module
    docstring: what one statement naming many rows is for)."""

    @classmethod
    def of(cls, statement: Update, dialect: Dialect) -> PreparedUpdate:
        return cls(*_render(statement, dialect))

    def execute(self, conn: Connection, values: Mapping[str, Any]) -> None:
        """Run the statement with `values` (every name of the statement but those it binds
        itself, unprocessed)."""
        parameters = self.parameters(values)
        # A sequence of values is one row of parameters, not many (exec_driver_sql's reading of
        # a list of them): a tuple.
        conn.exec_driver_sql(self.sql, parameters if self.order is None else tuple(parameters))


@dataclass(frozen=True)
class PreparedInsert:
    """`statement` (an INSERT, or INSERT ... ON CONFLICT) of `columns` as `dialect` runs it."""

    sql: str
    columns: tuple[str, ...]  # the row keys, in the driver's parameter order
    # (position in `columns`, bind processor, memo slot): the columns of a type that declares
    # `bind_memo_shared` (a type without settings, schema.UTCDateTime) share one slot
    binds: tuple[tuple[int, _Processor, int], ...]
    named: bool  # the driver takes a mapping per row (psycopg's pyformat), not a sequence
    given: tuple[str, ...]  # the row keys as `of` was given them (`execute_values`' order)
    value_keys: tuple[int, ...]  # for each of `columns`, its position in `given`
    # On SQLite (see the module docstring): `sql` cut around its one row of placeholders, so a
    # statement of k rows repeats that row k times; None where rows go as an executemany.
    multi_row: tuple[str, str, str] | None
    # The SQL of `_rows_sql(k)` by k, built once each (a batch uses a few powers of two).
    rows_sql: dict[int, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, statement: Insert, columns: Sequence[str], dialect: Dialect) -> PreparedInsert:
        # for_executemany: no implicit RETURNING of the new primary key (PostgreSQL's default
        # for a single-row INSERT), which an executemany would only throw away.
        compiled = statement.compile(dialect=dialect, column_keys=list(columns), for_executemany=True)
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("a prepared INSERT cannot hold expanding or literal-execute parameters")
        named = compiled.positiontup is None
        order = tuple(columns) if named else tuple(compiled.positiontup or ())
        taken = sorted(compiled.bind_names.values())
        if taken != sorted(columns) or sorted(order) != taken:
            # Defaults or extra parameters the rows do not give would be filled in per execution.
            raise ValueError(f"the INSERT takes {taken}, the rows give {sorted(columns)}")
        binds = []
        shared: dict[type, int] = {}  # a type that declares `bind_memo_shared` -> its slot
        for i, name in enumerate(order):
            column_type = compiled.binds[name].type
            processor = column_type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                slot = i  # a column's own, or past every column's, its type's
                if getattr(column_type, "bind_memo_shared", False):
                    slot = len(order) + shared.setdefault(type(column_type), len(shared))
                binds.append((i, processor, slot))
        given = tuple(columns)
        value_keys = tuple(given.index(name) for name in order)
        sql = str(compiled)
        multi_row = _values_row(sql, len(order)) if dialect.name == "sqlite" and not named else None
        return cls(sql, order, tuple(binds), named, given, value_keys, multi_row)

    def execute(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert `rows` (mappings holding every column, unprocessed): see `_execute`."""
        self._execute(conn, rows, self.columns)

    def execute_values(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> None:
        """`execute` of rows given as their values in the order of the columns `of` was given
        (a tuple a row where the caller builds one anyway: no mapping per row, an object for
        the garbage collector to trace while the batch is written)."""
        self._execute(conn, rows, self.value_keys)

    def _execute(self, conn: Connection, rows: Sequence[Any], keys: tuple[Any, ...]) -> None:
        """Insert `rows`, each read by `keys` (in the driver's parameter order): in one
        executemany, or on SQLite in multi-row statements (see the module docstring)."""
        if not rows:
            return
        columns, binds = self.columns, self.binds
        # A row's values in column order in one C call: half the time of a list comprehension.
        values_of = operator.itemgetter(*keys)
        # Rows and columns often share a time stamp (every outbox row of a write one `now`; a
        # version's `recorded_at` and, unless the caller gave one, `observed_at`): per slot (a
        # column, or every column of a type that declares `bind_memo_shared`), the last object
        # processed is kept with its result, and the same object (by identity) in the slot's
        # next column or row is not processed again. No memo of every value: the versions of a
        # batch each have their own stamps, and a memo entry per row cost more than it saved.
        slots = 1 + max((slot for _, _, slot in binds), default=0)  # a column's, or its type's
        last_in: list[Any] = [None] * slots
        last_out: list[Any] = [None] * slots

        def processed(row: Any) -> list[Any]:
            values = list(values_of(row)) if len(keys) > 1 else [row[keys[0]]]
            for i, processor, slot in binds:
                value = values[i]
                if value is not None:  # processors map None to None (see `processed`)
                    if value is not last_in[slot]:
                        last_in[slot], last_out[slot] = value, processor(value)
                    values[i] = last_out[slot]
            return values

        if self.multi_row is not None:
            # One flat list of parameters a statement: no tuple a row.
            for part in multi_row_parts(conn, rows, len(columns)):
                flat: list[Any] = []
                for row in part:
                    flat += processed(row)
                conn.exec_driver_sql(self._rows_sql(len(part)), tuple(flat))
            return
        parameters = [
            dict(zip(columns, processed(row), strict=True)) if self.named else tuple(processed(row))
            for row in rows
        ]
        conn.exec_driver_sql(self.sql, parameters)

    def _rows_sql(self, k: int) -> str:
        """The statement for `k` rows at once, its parameters row after row in `columns` order."""
        sql = self.rows_sql.get(k)
        if sql is None:
            assert self.multi_row is not None
            head, row, tail = self.multi_row
            sql = self.rows_sql[k] = head + ", ".join([row] * k) + tail
        return sql


def _values_row(sql: str, parameters: int) -> tuple[str, str, str] | None:
    """`sql` as (what precedes its VALUES row, the row, what follows) when it holds exactly one
    row of `parameters` plain placeholders (SQLite's qmark style), else None."""
    row = "(" + ", ".join(["?"] * parameters) + ")"
    head, found, tail = sql.partition(" VALUES " + row)
    if not found or sql.count("?") != parameters:
        return None
    return head + " VALUES ", row, tail


def _powers_of_two(n: int, most: int) -> list[int]:
    """`n` rows as statements of powers of two rows, at most `most` each, largest first: a few
    statements a batch, each rendered once (1,000 rows: 512, 256, 128, 64, 32, 8)."""
    sizes = []
    size = 1 << max(0, most.bit_length() - 1)  # the largest power of two within `most`
    while n:
        while size > n:
            size >>= 1
        sizes.append(size)
        n -= size
    return sizes


# Rows per multi-row statement: SQLite takes at most SQLITE_LIMIT_VARIABLE_NUMBER parameters
# (32,766 by default since 3.32, 999 before; a build may set it otherwise), read from the
# connection, and never more than this many rows (a statement compiled for each power of two).
MAX_ROWS_PER_STATEMENT = 1_024


def multi_row_sizes(conn: Connection, rows: int, parameters_per_row: int, *, besides: int = 0) -> list[int]:
    """`rows` cut into statements of powers of two rows (`_powers_of_two`), each within the
    library's bound on parameters with `besides` parameters more (`_rows_per_statement`)."""
    return _powers_of_two(rows, _rows_per_statement(conn, parameters_per_row, besides))


def multi_row_parts(
    conn: Connection, rows: Sequence[_T], parameters_per_row: int, *, besides: int = 0
) -> Iterator[Sequence[_T]]:
    """`rows` in the consecutive parts `multi_row_sizes` cuts them into, one a statement."""
    start = 0
    for k in multi_row_sizes(conn, len(rows), parameters_per_row, besides=besides):
        yield rows[start : start + k]
        start += k


def _rows_per_statement(conn: Connection, columns: int, besides: int = 0) -> int:
    driver = conn.connection.driver_connection
    limit = (
        driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        if isinstance(driver, sqlite3.Connection)
        else 999
    )
    return max(1, min(MAX_ROWS_PER_STATEMENT, (limit - besides) // columns))


# Rendered statements by (name, dialect name, driver, paramstyle): a dialect's SQL depends on
# those only, so every store of one kind of database shares them. A race renders one twice.
_SELECTS: dict[tuple[str, str, str, str], PreparedSelect] = {}
_INSERTS: dict[tuple[str, str, str, str], PreparedInsert] = {}
_UPDATES: dict[tuple[str, str, str, str], PreparedUpdate] = {}


def _key(name: str, dialect: Dialect) -> tuple[str, str, str, str]:
    return (name, dialect.name, dialect.driver, dialect.paramstyle)


def prepared_select(
    name: str, build: Callable[[], Select[Any]], dialect: Dialect, row: type[tuple[Any, ...]] = tuple
) -> PreparedSelect:
    """The SELECT `build()` makes, rendered once per `name` and kind of database, its rows as
    `row` (a NamedTuple of its columns: see `PreparedSelect.of`)."""
    key = _key(name, dialect)
    prepared = _SELECTS.get(key)
    if prepared is None:
        prepared = _SELECTS[key] = PreparedSelect.of(build(), dialect, row)
    return prepared


def prepared_insert(
    name: str, build: Callable[[], Insert], columns: Sequence[str], dialect: Dialect
) -> PreparedInsert:
    """The INSERT `build()` makes, rendered once per `name` and kind of database."""
    key = _key(name, dialect)
    prepared = _INSERTS.get(key)
    if prepared is None:
        prepared = _INSERTS[key] = PreparedInsert.of(build(), columns, dialect)
    elif prepared.given != tuple(columns):
        # `execute_values` reads a row's values in the order given: one name, one order.
        raise ValueError(f"the INSERT {name!r} was prepared for {prepared.given}, not {tuple(columns)}")
    return prepared


def prepared_update(name: str, build: Callable[[], Update], dialect: Dialect) -> PreparedUpdate:
    """The UPDATE `build()` makes, rendered once per `name` and kind of database."""
    key = _key(name, dialect)
    prepared = _UPDATES.get(key)
    if prepared is None:
        prepared = _UPDATES[key] = PreparedUpdate.of(build(), dialect)
    return prepared


def rows_in_one_step(
    conn: Connection, name: str, build: Callable[[], Select[Any]], parameters: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """The rows of the SELECT `build()` makes (built once per `name` and kind of database) as
    plain tuples of what `Connection.execute` would return, each column's result processor
    applied, in an order of their own: sort them if order matters.

    On SQLite the rows come as one value, `json_group_array` of each row's `json_array`, which
    SQLite builds in one step (see the module docstring: fetching steps once per row, and each
    step lets the interpreter's lock go). JSON holds the values of text, integer, time (text in
    SQLite) and flag columns as they are; any other column is refused (ValueError): a BLOB, which
    it cannot hold, a real, which SQLite writes to 15 significant digits, and so on. Elsewhere
    the rows are fetched."""
    key = _key(name, conn.dialect)
    one_step = _ONE_STEP.get(key)
    if one_step is None:
        one_step = _ONE_STEP[key] = _OneStep.of(build(), conn.dialect)
    if conn.dialect.name != "sqlite":
        return [tuple(row) for row in conn.execute(one_step.statement, parameters)]
    [(text,)] = conn.execute(one_step.wrapped, parameters).all()
    return _processed(one_step.results, tuple, orjson.loads(text))


@dataclass(frozen=True)
class _OneStep:
    statement: Select[Any]
    wrapped: Select[Any]  # its rows as one JSON value
    results: tuple[_Processor | None, ...]

    @classmethod
    def of(cls, statement: Select[Any], dialect: Dialect) -> _OneStep:
        for column in statement.selected_columns:
            if not _json_keeps(column.type):
                raise ValueError(
                    f"column {column.key!r} ({column.type}) does not go through JSON as it is: "
                    "only text, integer, time and flag columns do"
                )
        inner = statement.subquery()
        wrapped = select(func.json_group_array(func.json_array(*inner.c)))
        return cls(statement, wrapped, _result_processors(statement, dialect))


_ONE_STEP: dict[tuple[str, str, str, str], _OneStep] = {}


def _json_keeps(column_type: TypeEngine[Any]) -> bool:
    """Whether SQLite's JSON holds this type's values as they are (see `rows_in_one_step`): the
    type a decorator stores, checked against the types that do."""
    while isinstance(column_type, TypeDecorator):
        column_type = column_type.impl_instance
    return isinstance(column_type, String | Integer | DateTime | Boolean)
