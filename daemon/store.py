"""The SQLite store: agents, sessions, turns and the event log.

Writes are batched: everything written in one turn of the event loop runs
in one transaction, committed at the end of that turn, so a burst of ten
thousand writes costs one commit. (WAL with synchronous=NORMAL makes a commit
an append, well under a millisecond; a writer thread was tried first, and
handing batches to it under load cost more in waiting for the GIL than the
commits themselves: a client saw events 160 ms late at the median, against
36 ms committing here.) A caller that must not answer before its write is
durable awaits `flush()` (or the future `write` returns); event fan-out waits
for the commit of the events it sends.

Reads at start-up run on the caller's thread before the loop serves anyone;
reads while serving (event replay) go through `read()` on a thread of their
own, with a connection of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
Write = Callable[[sqlite3.Connection], None]

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    ordinal INTEGER NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    root TEXT NOT NULL,
    placement TEXT NOT NULL,
    title TEXT,
    status TEXT NOT NULL,
    status_since REAL NOT NULL,
    created_at REAL NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    agent_session_id TEXT,
    last_stop_reason TEXT,
    last_error TEXT,
    recap TEXT,
    run TEXT,
    placement_options TEXT,
    kind TEXT NOT NULL DEFAULT 'main',
    parent TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    title TEXT NOT NULL,
    prompt TEXT NOT NULL,
    why TEXT,
    placement TEXT,
    root TEXT,
    from_session TEXT,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    session TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS sessions_agent ON sessions (agent);
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    prompt TEXT NOT NULL,
    state TEXT NOT NULL,
    text TEXT,
    stop_reason TEXT,
    error TEXT,
    usage TEXT,
    queued_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL
);
CREATE INDEX IF NOT EXISTS turns_session ON turns (session);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    argv TEXT NOT NULL,
    cwd TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    outcome TEXT
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT,
    session TEXT,
    turn TEXT,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session_kind ON events (session, kind, seq);
"""


class StoreClosed(RuntimeError):
    pass


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives a crash of the process (what "acknowledged"
    # promises); only a power loss can take the last commits.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = connect(path)
        self._conn.executescript(SCHEMA)
        self._add_missing_columns()
        self._conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
        )
        self._pending: list[tuple[Write, asyncio.Future[None] | None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.commits = 0

    def _add_missing_columns(self) -> None:
        """A store made by an older version gains the columns added since."""
        added = {
            "sessions": [
                ("run", "TEXT"),
                ("placement_options", "TEXT"),
                ("kind", "TEXT NOT NULL DEFAULT 'main'"),
                ("parent", "TEXT"),
            ]
        }
        for table, columns in added.items():
            present = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in present:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """From now on writes are batched per turn of the running loop."""
        self._loop = asyncio.get_running_loop()

    async def close(self) -> None:
        """Commit everything written so far, then close."""
        if self._closed:
            return
        self._closed = True
        if self._pending:
            self._commit_pending()
        self._conn.close()

    # ------------------------------------------------------------ writes

    def write(self, op: Write, *, wait: bool = True) -> asyncio.Future[None] | None:
        """Queue a write. With `wait`, the returned future resolves once it is committed.

        Writes made in one turn of the event loop reach the writer thread as
        one batch, so the thread wakes (and takes the GIL) once per turn of
        the loop rather than once per write.
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        if self._loop is None:
            # Before start(): the loop does not serve anyone yet, write in place.
            op(self._conn)
            return None
        future = self._loop.create_future() if wait else None
        if not self._pending:
            self._loop.call_soon(self._commit_pending)
        self._pending.append((op, future))
        return future

    def commit_now(self) -> None:
        """Commit what is pending at once, rather than at the end of this turn of the loop."""
        self._commit_pending()

    def _commit_pending(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self._commit(batch)

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        future = self.write(lambda conn: None)
        if future is not None:
            await future

    def _commit(self, batch: list[tuple[Write, asyncio.Future[None] | None]]) -> None:
        assert self._loop is not None
        failures: list[tuple[asyncio.Future[None] | None, BaseException]] = []
        self._conn.execute("BEGIN")
        try:
            for op, _ in batch:
                op(self._conn)
        except Exception:
            # One bad write must not lose the others: run them again one by one.
            self._conn.execute("ROLLBACK")
            self._conn.execute("BEGIN")
            for op, future in batch:
                try:
                    with _savepoint(self._conn):
                        op(self._conn)
                except Exception as exc:
                    failures.append((future, exc))
        self._conn.execute("COMMIT")
        self.commits += 1
        failed = {id(f): error for f, error in failures if f is not None}
        for _, future in batch:
            if future is not None:
                _settle(future, failed.get(id(future)))
        for orphan, error in failures:
            if orphan is None:
                _report(error)

    # ------------------------------------------------------------ reads

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read on the caller's thread: for start-up, before serving."""
        if self._loop is not None:
            raise RuntimeError("Store.query is for start-up only; while serving, use Store.read")
        self._conn.row_factory = sqlite3.Row
        try:
            return list(self._conn.execute(sql, args))
        finally:
            self._conn.row_factory = None

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read on a thread of its own, with its own connection (WAL lets it run beside writes)."""

        def run() -> T:
            conn = connect(self.path)
            conn.row_factory = sqlite3.Row
            try:
                return fn(conn)
            finally:
                conn.close()

        return await asyncio.to_thread(run)


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


def _report(exc: BaseException) -> None:
    import logging

    logging.getLogger("sessiond.store").error("a write failed and was dropped: %s", exc)


@contextlib.contextmanager
def _savepoint(conn: sqlite3.Connection) -> Any:
    conn.execute("SAVEPOINT op")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO op")
        conn.execute("RELEASE op")
        raise
    conn.execute("RELEASE op")


def executemany(sql: str, rows: Iterable[Sequence[Any]]) -> Write:
    materialised = list(rows)

    def op(conn: sqlite3.Connection) -> None:
        conn.executemany(sql, materialised)

    return op


def execute(sql: str, args: Sequence[Any] = ()) -> Write:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute(sql, args)

    return op
