"""The archive's connection to its SQL database: engine set-up, migrations, transactions.

Two transaction shapes, both failing closed:

- `write()` opens a transaction that takes the write lock up front on SQLite
  (`BEGIN IMMEDIATE`), so validation and the change it validates see the same state; on
  PostgreSQL, code takes row locks (`SELECT ... FOR UPDATE`) on what it changes.
- `read()` opens a plain transaction.
- `select()` runs one prepared statement (archive/storage/statements.py) without one: a single
  statement reads one snapshot, and search hydration runs one on every search.

After a deletion, `reclaim` makes the removed rows unreadable below SQL too; on SQLite that is
a checkpoint that empties the write-ahead log (`empty_log`), which a reader holding a snapshot
of the log can hold off: the store then owes it and tries again after each write it commits
and when it is closed (see docs/architecture.md, Deletion).

Any driver-level failure (server down, file unreadable, lock timeout) becomes
`StoreUnavailable`, a file SQLite reports as not a database or as damaged `StoreCorrupt`; the
transaction is rolled back, so nothing is half-written.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from ..rules.errors import (
    ArchiveError,
    InvalidInput,
    ReceiptKeyMissing,
    StoreCorrupt,
    StoreUnavailable,
)
from ..rules.policy import DEFAULT_POLICY, ArchivePolicy
from .readers import ThreadReaders
from .signing import ReceiptKey
from .statements import PreparedSelect

T = TypeVar("T")

log = logging.getLogger(__name__)

RECEIPT_KEY_FILE = "receipt.key"  # beside a SQLite archive file, unless a key is passed
SQLITE_BUSY_TIMEOUT_MS = 15_000
SQLITE_MMAP_BYTES = 1 << 30  # the part of a SQLite file read through a memory map (_sqlite_on_connect)
# How long a deletion's checkpoint (and verify_deleted's) waits for the connections using the
# write-ahead log to leave it. Writes and single statements take milliseconds; a snapshot held
# longer than this is held for a reason of its own, and waiting out the whole busy timeout (15 s)
# would only delay the deletion's answer: the checkpoint is owed instead (`empty_log`).
CHECKPOINT_WAIT_MS = 1_000
_WAL_HEADER_BYTES, _WAL_FRAME_HEADER_BYTES = 32, 24
PG_CONNECT_TIMEOUT_S = 5
_MIGRATION_LOCK = 7_310_244_101  # pg_advisory_xact_lock key: one migrator at a time
# SQLite's result codes for a file that is not a database, and for damaged pages.
_SQLITE_CORRUPT = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})


def sqlite_url(path: str | Path) -> str:
    return f"sqlite+pysqlite:///{Path(path)}"


def key_file_of(url: str) -> Path | None:
    """Where the key of the archive at `url` lives when none is given: beside a SQLite file;
    None for an in-memory or a server database."""
    database = sqlite_file_of(url)
    return None if database is None else database.parent / RECEIPT_KEY_FILE


def sqlite_file_of(url: str) -> Path | None:
    """The database file of a SQLite `url` (None for memory or a server)."""
    if "://" not in url:
        url = sqlite_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    database = parsed.database
    if database.startswith("file:"):
        # A URI filename (`?uri=true`): its path is between `file:` and the query, and a
        # `mode=memory` or `:memory:` one has no file.
        path, _, query = database[len("file:") :].partition("?")
        if not path or path == ":memory:" or "mode=memory" in query:
            return None
        return Path(path)
    return Path(database)


@dataclass
class ArchiveStore:
    """An open archive database. Cheap to share between threads (the engine pools connections)."""

    engine: Engine
    policy: ArchivePolicy = DEFAULT_POLICY
    # The deployment key that signs deletion receipts and audit anchors (see signing.py): given,
    # or read from `receipt_key_path` on first use (never created here: deployment_key.py).
    receipt_key_path: Path | None = None
    given_receipt_key: ReceiptKey | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._key_lock = threading.Lock()
        self._readers = ThreadReaders.of(self.engine)
        # One checkpoint at a time, so that the outcome recorded in `_log_owed` is the newest.
        self._checkpoint_lock = threading.Lock()
        self._log_owed = False
        if self.given_receipt_key is None and self.receipt_key_path is None:
            self.given_receipt_key = ReceiptKey.ephemeral()

    @property
    def receipt_key(self) -> ReceiptKey:
        """The key. Raises ReceiptKeyMissing when its file is gone (it is never made up again,
        see deployment_key.py), StoreUnavailable when it cannot be read."""
        with self._key_lock:
            if self.given_receipt_key is None:
                assert self.receipt_key_path is not None
                if not self.receipt_key_path.exists():
                    raise ReceiptKeyMissing(str(self.receipt_key_path))
                self.given_receipt_key = ReceiptKey.load(self.receipt_key_path)
            return self.given_receipt_key

    def use_receipt_key(self, key: ReceiptKey) -> None:
        """Sign with `key` from now on (it replaced the old one: deployment_key.rotate_key)."""
        with self._key_lock:
            self.given_receipt_key = key

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def write(self) -> Iterator[Connection]:
        with self._transaction(immediate=True) as conn:
            yield conn
        if self._log_owed:
            self._settle_log()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._transaction(immediate=False) as conn:
            yield conn

    def select(
        self, prepared: PreparedSelect, values: Mapping[str, Any], *, pooled: bool = False
    ) -> list[tuple[Any, ...]]:
        """The rows of one prepared SELECT (archive/storage/statements.py), with no transaction of its own
        (one statement reads one snapshot): on this thread's reader connection
        (archive/storage/readers.py) where it has one, else on a pooled driver connection. A reader
        kept from before that turns out lost (the server restarted since) is replaced and the
        statement run once more. Fails as the transactions do: StoreUnavailable, StoreCorrupt.
        `pooled`: on a pooled connection even where this thread could keep a reader, for a
        thread that reads a few times and ends (the indexer's trail, a thread a round): opening
        a connection for it would cost more than the reads it saves (on PostgreSQL a server
        connection a round)."""
        parameters = prepared.parameters(values)
        readers = None if pooled else self._readers
        while readers is not None:
            reader = self._connected(readers.connection)
            if reader is None:
                break  # this store keeps as many readers as it may: read through the pool
            try:
                return prepared.processed(_rows(reader.conn, prepared.sql, parameters))
            except self.engine.dialect.loaded_dbapi.Error as e:
                readers.discard()  # the next read opens a fresh connection
                if reader.fresh or not self.engine.dialect.is_disconnect(e, reader.conn, None):
                    raise self._select_failed(prepared, parameters, e) from e
        conn = self._connected(self.engine.raw_connection)
        # A pooled PostgreSQL connection runs the statement in autocommit: in a transaction the
        # driver would send a BEGIN first and the pool a ROLLBACK on return, two more round
        # trips than the statement's own. (SQLite connections are in autocommit already.)
        driver = None if self.is_sqlite else conn.driver_connection
        try:
            if driver is not None:
                driver.autocommit = True
            try:
                return prepared.processed(_rows(conn, prepared.sql, parameters))
            finally:
                if driver is not None:
                    _leave_autocommit(conn, driver)
        except self.engine.dialect.loaded_dbapi.Error as e:
            raise self._select_failed(prepared, parameters, e) from e
        finally:
            conn.close()  # back to the pool, which rolls back whatever the driver began

    def _connected(self, connect: Callable[[], T]) -> T:
        """`connect()`, its failure typed: the pool hands out the driver's own connect error
        unwrapped (Engine.connect wraps it)."""
        dbapi = self.engine.dialect.loaded_dbapi
        try:
            return connect()
        except (sa_exc.SQLAlchemyError, dbapi.Error) as e:
            error = (
                e
                if isinstance(e, sa_exc.SQLAlchemyError)
                else sa_exc.DBAPIError.instance(None, None, e, dbapi.Error)
            )
            raise self._corrupt(error) or StoreUnavailable(
                f"archive store unreachable: {_reason(error)}"
            ) from e

    def _select_failed(self, prepared: PreparedSelect, parameters: Any, e: Exception) -> Exception:
        """The driver's error of a SELECT, wrapped as SQLAlchemy wraps one, so that one mapping
        (`_typed`) decides what it is."""
        dbapi_error = self.engine.dialect.loaded_dbapi.Error
        wrapped = sa_exc.DBAPIError.instance(prepared.sql, parameters, e, dbapi_error)
        return self._typed(wrapped) or wrapped

    @contextmanager
    def _transaction(self, *, immediate: bool) -> Iterator[Connection]:
        try:
            conn = self.engine.connect()
        except sa_exc.SQLAlchemyError as e:
            # Connecting to SQLite already reads the file (the WAL pragma): a foreign file fails here.
            raise self._corrupt(e) or StoreUnavailable(f"archive store unreachable: {_reason(e)}") from e
        try:
            if immediate:
                conn = conn.execution_options(sqlite_immediate=True)
            with conn.begin():
                yield conn
        except sa_exc.SQLAlchemyError as e:
            typed = self._typed(e)
            if typed is None:
                raise
            raise typed from e
        finally:
            conn.close()

    def _typed(self, e: sa_exc.SQLAlchemyError) -> ArchiveError | None:
        """The typed error a driver-level failure in a transaction is; None: a bug, raised as is."""
        corrupt = self._corrupt(e)
        if corrupt is not None:
            return corrupt
        if isinstance(e, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.DisconnectionError):
            return StoreUnavailable(f"archive store failed, nothing was changed: {_reason(e)}")
        if isinstance(e, sa_exc.DataError) and "NUL" in str(e.orig):
            # PostgreSQL text cannot hold NUL. Most fields refuse it when validated; this keeps
            # any value that reaches the driver unchecked a caller's error, not a server error.
            return InvalidInput("value", "text must not contain NUL (0x00) characters")
        if (
            isinstance(e, sa_exc.DatabaseError)
            and isinstance(e.orig, sqlite3.DatabaseError)
            and not isinstance(e.orig, sqlite3.IntegrityError)
        ):
            # Any other refusal of the SQLite engine itself (the disk full, say): unusable, not a bug.
            return StoreUnavailable(f"archive store unusable: {_reason(e)}")
        return None

    def _corrupt(self, e: sa_exc.SQLAlchemyError) -> StoreCorrupt | None:
        """StoreCorrupt if the database engine says the file is not a database or is damaged.

        Decided by SQLite's result code (its primary code is the low byte of an extended one,
        such as SQLITE_CORRUPT_INDEX), never by the wording of its message.
        """
        orig = getattr(e, "orig", None)
        code = getattr(orig, "sqlite_errorcode", None)
        if not isinstance(orig, sqlite3.DatabaseError) or not isinstance(code, int):
            return None
        if code & 0xFF not in _SQLITE_CORRUPT:
            return None
        return StoreCorrupt(self.engine.url.database or "(unnamed)", _reason(e))

    def reclaim(self, tables: tuple[str, ...]) -> bool:
        """Make removed rows unreadable below SQL too, after a deletion committed; True if done.

        SQLite zeroes deleted content in the file itself (`secure_delete`, set per connection),
        but the write-ahead log still holds page images written before, and the file the pages
        a reader's snapshot still reads: `empty_log` (False while a reader holds the log; the
        store then owes the checkpoint and retries it).
        PostgreSQL keeps deleted rows as dead tuples until VACUUM removes them; VACUUM cannot
        run in a transaction and skips (SKIP_LOCKED) a table another VACUUM holds right now.
        Raises StoreUnavailable when the database cannot be reached.
        """
        if self.is_sqlite:
            return self.empty_log()
        try:
            with self.engine.connect() as conn:
                auto = conn.execution_options(isolation_level="AUTOCOMMIT")
                names = ", ".join(self.engine.dialect.identifier_preparer.quote(n) for n in tables)
                auto.exec_driver_sql(f"VACUUM (SKIP_LOCKED) {names}")
                return True
        except sa_exc.SQLAlchemyError as e:
            raise StoreUnavailable(f"archive store failed while reclaiming space: {_reason(e)}") from e

    @property
    def log_owed(self) -> bool:
        """True while a checkpoint of this store found the write-ahead log held and none has
        emptied it since (SQLite)."""
        return self._log_owed

    @property
    def log_path(self) -> Path | None:
        """The SQLite write-ahead log file beside the database file; None for other databases."""
        database = sqlite_file_of(self.engine.url.render_as_string(hide_password=False))
        return None if database is None else Path(f"{database}-wal")

    def empty_log(self, wait_ms: int = CHECKPOINT_WAIT_MS) -> bool:
        """Copy SQLite's write-ahead log into the database file and truncate it to no bytes
        (`wal_checkpoint(TRUNCATE)`), waiting up to `wait_ms` for the connections using it; True
        when the log holds no byte afterwards (always True for other databases).

        A reader whose snapshot began before the last commit needs both the old page images in
        the log and the old pages in the file, so while it holds its transaction the checkpoint
        can neither finish copying nor empty the log (False). The store then owes it: each write
        this store commits tries again without waiting (`_settle_log`), `dispose` tries before
        closing, and `verify_deleted` checks in any process. Raises StoreUnavailable when the
        file cannot be reached.
        """
        if not self.is_sqlite:
            return True
        with self._checkpoint_lock:
            self._log_owed = True  # until a checkpoint says otherwise (one that fails owes it too)
            done = self._checkpoint(wait_ms)
            self._log_owed = not done
        return done

    def _checkpoint(self, wait_ms: int) -> bool:
        conn = self._connected(self.engine.raw_connection)
        try:
            cur = conn.cursor()
            try:
                # On a connection of its own, outside any transaction (SQLite refuses a checkpoint
                # in one), with a wait of its own: the busy timeout is what it waits for readers.
                cur.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
                try:
                    # (busy, log frames, checkpointed frames): the driver's plain tuple
                    busy, _log, _checkpointed = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            finally:
                cur.close()
        except sqlite3.Error as e:
            wrapped = sa_exc.DBAPIError.instance("PRAGMA wal_checkpoint", None, e, sqlite3.Error)
            raise self._corrupt(wrapped) or StoreUnavailable(
                f"archive store failed while checkpointing its log: {_reason(wrapped)}"
            ) from e
        finally:
            conn.close()
        # Busy with an empty log (a writer that has written nothing yet): nothing is left in it.
        # Where the log's file is unknown, only SQLite's own answer counts.
        return int(busy) == 0 or (self.log_path is not None and self.log_bytes() == 0)

    def log_bytes(self) -> int:
        """The size of the write-ahead log file as it is on disk (0 when there is none)."""
        path = self.log_path
        try:
            return path.stat().st_size if path is not None else 0
        except FileNotFoundError:
            return 0

    def log_frames(self) -> int:
        """The page images the write-ahead log file holds, read from its raw bytes: each frame
        after the 32-byte header is a 24-byte header and one page (the page size is in the log's
        header). Frames of an earlier round of the log that a restart did not overwrite count
        too: they are bytes on disk all the same."""
        path = self.log_path
        if path is None:
            return 0
        try:
            with path.open("rb") as f:
                header = f.read(_WAL_HEADER_BYTES)
        except FileNotFoundError:
            return 0
        if len(header) < _WAL_HEADER_BYTES:
            return 0
        page_size = int.from_bytes(header[8:12], "big") or 65_536
        return (self.log_bytes() - _WAL_HEADER_BYTES) // (page_size + _WAL_FRAME_HEADER_BYTES)

    def _settle_log(self) -> None:
        """The checkpoint owed, tried again after a committed write, without waiting: skipped
        when another thread is checkpointing, and a failure is left for the next write, since
        the write itself stands."""
        if not self._checkpoint_lock.acquire(blocking=False):
            return
        try:
            self._log_owed = not self._checkpoint(0)
        except ArchiveError as e:
            log.warning("write-ahead log still to be emptied after a deletion: %s", e)
        finally:
            self._checkpoint_lock.release()

    def dispose(self) -> None:
        """Close every connection, first emptying the write-ahead log if the store owes that (a
        connection of another process left open keeps SQLite from doing it at the last close)."""
        if self._readers is not None:
            self._readers.close_all()
        if self._log_owed:
            try:
                if not self.empty_log():
                    log.warning(
                        "closing %s with deleted rows' page images still in its write-ahead log: "
                        "a reader holds it; verify_deleted or the next deletion empties it",
                        self.engine.url.database,
                    )
            except ArchiveError as e:
                log.warning("write-ahead log not emptied at close: %s", e)
        self.engine.dispose()


def _leave_autocommit(conn: Any, driver: Any) -> None:
    """Out of autocommit, as SQLAlchemy's transactions expect a pooled connection. A connection
    that broke cannot be switched (psycopg refuses it when the state is unknown): it is
    invalidated, so the pool discards it, and the statement's own error is the one raised."""
    with suppress(Exception):  # any refusal: the connection is not reused
        if not driver.closed:
            driver.autocommit = False
            return
    conn.invalidate()


def _rows(conn: Any, sql: str, parameters: Any) -> list[Any]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql, parameters)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _reason(e: BaseException) -> str:
    orig = getattr(e, "orig", None)
    return str(orig if orig is not None else e).strip().splitlines()[0][:300]


def open_store(
    url: str,
    policy: ArchivePolicy = DEFAULT_POLICY,
    *,
    migrate: bool = True,
    receipt_key: ReceiptKey | None = None,
) -> ArchiveStore:
    """Open (and by default migrate to the newest schema) the archive database at `url`.

    A plain filesystem path is taken as a SQLite file. Raises StoreUnavailable when the
    database cannot be reached, StoreCorrupt when the file is not a database.

    Without `receipt_key`, a SQLite file's key is the file `receipt.key` beside it (created with
    a new archive by `Archive.open`, see deployment_key.py), so every process opening that
    archive signs and verifies with the same key; any other database gets a key of this process
    only (`ReceiptKey.ephemeral`): server deployments pass theirs (MNEMO_RECEIPT_KEY).
    """
    if "://" not in url:
        url = sqlite_url(url)
    engine = _make_engine(url)
    key_path = key_file_of(url) if receipt_key is None else None
    store = ArchiveStore(
        engine=engine, policy=policy, receipt_key_path=key_path, given_receipt_key=receipt_key
    )
    if migrate:
        try:
            upgrade(store)
        except BaseException:
            store.dispose()  # no connection outlives a store that was never handed out
            raise
    return store


def _make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    # Fail closed rather than hang: a silent host fails the connect after PG_CONNECT_TIMEOUT_S,
    # and a lock held elsewhere fails the statement after the same wait SQLite allows.
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        connect_args={
            "connect_timeout": PG_CONNECT_TIMEOUT_S,
            "options": f"-c lock_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        },
    )


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is unusable).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys = ON")
        # Deleted rows are overwritten with zeros in the file, not only unlinked: a deletion
        # must leave no byte of its content in free pages or free space of a page.
        cur.execute("PRAGMA secure_delete = ON")
        _enable_wal(cur)
        # NORMAL in WAL mode: a commit survives a process crash (the crash tests kill writers);
        # an OS crash may lose the newest commits but never corrupts the file or splits one.
        cur.execute("PRAGMA synchronous = NORMAL")
        # Reads map the file instead of copying each page through read() into a per-connection
        # cache of 2 MB: a search's hydration looks up ten versions and their blobs, and at
        # 100,000 documents those pages were mostly outside that cache (hydration 0.35 -> 0.26
        # ms, `bench search-path`). Writes still go through write(): secure_delete and the WAL
        # are unchanged. Address space only; the pages are the OS's file cache, shared by every
        # connection (a thread's reader among them) rather than copied into each.
        cur.execute(f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}")
    finally:
        cur.close()


def _enable_wal(cur: sqlite3.Cursor) -> None:
    """Switch the file to WAL, waiting out other connections that are doing the same.

    The switch needs an exclusive lock, and SQLite reports "database is locked" at once,
    without consulting the busy timeout, when another process holds the file at that moment
    (several services opening one brand-new archive together). Once the file is in WAL
    mode the pragma is a no-op that succeeds at once, so only a first open ever retries.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _sqlite_on_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get("sqlite_immediate", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


# The newest migration in archive/migrations/versions (tests/archive/test_migrations.py checks
# that it is alembic's head). A database stamped with it is opened without loading alembic,
# whose import alone costs most of a second in every CLI process.
SCHEMA_HEAD = "0007"


def _at_head(store: ArchiveStore) -> bool:
    try:
        with store.read() as conn:
            stamped = [r.version_num for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
    except (StoreUnavailable, sa_exc.ProgrammingError):
        return False  # no version table yet (a new database), or unreachable: alembic decides
    return stamped == [SCHEMA_HEAD]


def upgrade(store: ArchiveStore) -> None:
    """Bring the schema to the newest migration (safe to call from many processes at once)."""
    if _at_head(store):
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parents[1] / "migrations"))
    with store.write() as conn:
        if not store.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
