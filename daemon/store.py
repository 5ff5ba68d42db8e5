"""The SQLite store: agents, sessions, turns and the event log.

Writes never run on the event loop. They are queued to one writer thread,
which takes everything queued so far, runs it in one transaction and commits,
so a burst of ten thousand writes costs one commit. A caller that must not
answer before its write is durable awaits `flush()` (or the future `write`
returns); event fan-out waits for the commit of the events it sends.

Reads at start-up run on the caller's thread before the loop serves anyone;
reads while serving (event replay) go through `read()` on a thread of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
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
        self._queue: queue.SimpleQueue[list[tuple[Write, asyncio.Future[None] | None]] | None] = (
            queue.SimpleQueue()
        )
        self._pending: list[tuple[Write, asyncio.Future[None] | None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
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
        """Start the writer thread; writes queued from now on are committed by it."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._writer, name="sessiond-store", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Commit everything queued, then stop the writer."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            if self._pending:
                self._hand_over()
            self._queue.put(None)
            await asyncio.to_thread(self._thread.join)
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
        if self._thread is None or self._loop is None:
            # Before start(): the loop does not serve anyone yet, write in place.
            op(self._conn)
            return None
        future = self._loop.create_future() if wait else None
        if not self._pending:
            self._loop.call_soon(self._hand_over)
        self._pending.append((op, future))
        return future

    def _hand_over(self) -> None:
        batch, self._pending = self._pending, []
        self._queue.put(batch)

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        future = self.write(lambda conn: None)
        if future is not None:
            await future

    def _writer(self) -> None:
        assert self._loop is not None
        stop = False
        while not stop:
            item = self._queue.get()
            batch: list[tuple[Write, asyncio.Future[None] | None]] = []
            if item is None:
                stop = True
            else:
                batch += item
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                else:
                    batch += more
            if batch:
                self._commit(batch)

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
                self._loop.call_soon_threadsafe(_settle, future, failed.get(id(future)))
        for orphan, error in failures:
            if orphan is None:
                self._loop.call_soon_threadsafe(_report, error)

    # ------------------------------------------------------------ reads

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read on the caller's thread: for start-up, before serving."""
        if self._thread is not None:
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
