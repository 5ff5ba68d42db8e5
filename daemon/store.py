"""The SQLite store: agents, sessions, turns and the event log.

Writes are batched: everything written in one turn of the event loop runs
in one transaction, committed at the end of that turn, so a burst of ten
thousand writes costs one commit. (WAL with synchronous=NORMAL makes a commit
an append, well under a millisecond; a writer thread was tried first, and
handing batches to it under load cost more in waiting for the GIL than the
commits themselves: a client saw events 160 ms late at the median, against
36 ms committing here.) A caller that must not answer before its write is
durable awaits `flush()` (or the future `write` returns); event fan-out waits
for the commit of the events it sends. Checkpoints (copying the WAL back into
the database file, with its syncs) run on a thread of their own, never in a
commit on the loop's thread.

Reads at start-up run on the caller's thread before the loop serves anyone;
reads while serving (event replay) go through `read()` on a thread of their
own, with a connection of its own, except short ones by an index (`lookup`:
a session read on first need, a page of sessions), on the loop's thread.

When the store itself says no (locked past the busy timeout, the disk full,
the file read-only or damaged) the whole batch is rolled back: every write a
request waits on fails with `StoreUnavailable` (an `RpcError` whose sentence
names the file and what to do), so the request is refused and its caller
puts memory back as it was; writes nobody waits on (events, status rows) are
kept, in order, and committed with the next batch once the store takes them.
A write that fails on its own (a constraint, a bug) still fails alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from sessiond.protocol.errors import ErrorCode, RpcError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
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
    parent TEXT,
    choices TEXT,
    mcp_servers TEXT,
    activity REAL,
    title_from TEXT,
    cost_copied REAL
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
-- Start-up counts sessions by status and agent, and reads the busy ones, without the table.
CREATE INDEX IF NOT EXISTS sessions_status ON sessions (status, agent, turns);
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
-- The turns a stop cut off, read at start: found without a walk over every turn ever run.
CREATE INDEX IF NOT EXISTS turns_unfinished ON turns (queued_at) WHERE state IN ('queued', 'running');
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


# Commits come at most this often (seconds), so a write or an event waits at most this long (a
# quiet daemon commits at the end of the loop's turn): SPACING after a commit of a few rows (2 ms
# ran 200 turns at once ~15% faster than a commit per turn of the loop), LOADED_SPACING after one
# that changed LOADED_ROWS rows or more. Each commit writes its dirty pages anew, and under load 10 ms
# cost the daemon ~12% less CPU than 2 ms for 200 first turns at once. Load is told by rows, not by
# writes: one write may carry many rows (an event flush, `RowsAtCommit`), and 200 turns at once
# made commits of 1-5 writes, hundreds of rows, taken for quiet. A turn's answer waits for its
# events to be stored (`awaited`): that commit comes at the end of the loop's turn, loaded or not
# (200 first turns at once ran 3-5% faster than with the spacing, a batch of 2,000 prompts 3%, for
# 0-3% more of the daemon's CPU). Both spacings are under a frame of an editor's redraw.
SPACING = 0.002
LOADED_SPACING = 0.01
LOADED_ROWS = 64
BUSY_TIMEOUT = 5.0  # seconds a write waits for another process's lock before the store says no
# The loop's connection never checkpoints the WAL itself: SQLite would, on the commit that takes the
# WAL past 1,000 pages, syncing both files on the loop's thread (26 ms held the loop in a burst of 200
# turns). A thread of its own copies the WAL back into the database (a passive checkpoint takes no
# lock a writer needs), after a commit once CHECKPOINT_ROWS rows changed since the last one (about
# SQLite's own 1,000 pages), or CHECKPOINT_EVERY seconds passed with anything changed.
CHECKPOINT_ROWS = 2000
CHECKPOINT_EVERY = 5.0
# The write-ahead log's size kept once a checkpoint has copied it (bytes): after a big removal (a
# prune) it held every page touched. SQLite's own default keeps all of it.
WAL_KEPT_BYTES = 4 * 1024 * 1024
# Free pages given back to the filesystem per commit (`reclaim`): ~20 us each here.
RECLAIM_PAGES = 256
# Checkpoints tried after a reclaim for one that copies the whole log (a read holding part of it
# back), the first at once, each next after RECLAIM_BACKOFF seconds more than the last.
RECLAIM_CHECKPOINTS = 5
RECLAIM_BACKOFF = 0.05
# The log's size past which commits are held while one more checkpoint copies what the last left:
# under steady writes SQLite never starts the log over (a commit always lands while a checkpoint
# copies), so it grew without end (137 MiB over a batch of 2,000 turns, for a 7 MiB store). Once a
# checkpoint has copied all of it with no commit since, the next commit starts it over, and trims
# it to WAL_KEPT_BYTES.
WAL_HOLD_BYTES = 16 * 1024 * 1024
# Seconds with no commit before the store is at rest: the whole log is then copied into the file
# and taken back to nothing, so a daemon at rest holds one file (a burst of turns leaves a log of
# several MiB, which SQLite starts over, and trims to WAL_KEPT_BYTES, only at a write after a
# checkpoint that copied all of it: under steady writes, never).
REST_SECONDS = 10.0
INCREMENTAL = 2  # PRAGMA auto_vacuum: the file gives back its free pages when told (`reclaim`)
# Seconds before the writes kept through an outage are tried again on their own, doubling to the
# most while the store still says no (a locked store holds the loop for the busy timeout each time).
RETRY_KEPT = 1.0
RETRY_KEPT_MOST = 30.0

# SQLite's primary result codes that are the store's trouble, not one write's.
_TROUBLE = {
    5: "locked",  # SQLITE_BUSY
    6: "locked",  # SQLITE_LOCKED
    7: "io",  # SQLITE_NOMEM
    8: "readonly",  # SQLITE_READONLY
    10: "io",  # SQLITE_IOERR
    11: "damaged",  # SQLITE_CORRUPT
    13: "full",  # SQLITE_FULL
    14: "cantopen",  # SQLITE_CANTOPEN
    15: "io",  # SQLITE_PROTOCOL
    26: "damaged",  # SQLITE_NOTADB
}
_BY_MESSAGE = (
    ("database is locked", "locked"),
    ("disk is full", "full"),
    ("readonly database", "readonly"),
    ("read-only", "readonly"),
    ("not a database", "damaged"),
    ("malformed", "damaged"),
    ("unable to open", "cantopen"),
    ("disk i/o error", "io"),
)


def trouble_of(exc: BaseException) -> str | None:
    """What is wrong with the store when `exc` says the store (not one write) failed; else None."""
    if isinstance(exc, StoreUnavailable):
        return exc.reason
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _TROUBLE.get(code & 0xFF)
    text = str(exc).lower()
    return next((reason for needle, reason in _BY_MESSAGE if needle in text), None)


def explain(reason: str, path: Path, cause: BaseException, *, busy_timeout: float = BUSY_TIMEOUT) -> str:
    """One sentence: what is wrong with the store at `path`, and what to do about it."""
    if reason == "full":
        return (
            f"the disk holding the store {path} is full, so nothing was changed; "
            "free some space on it and try again"
        )
    if reason == "locked":
        return (
            f"the store {path} is locked by another process (waited {busy_timeout:g} s), so nothing "
            "was changed; close whatever holds it (a sqlite3 shell, a backup, another sessiond on "
            "this state dir) and try again"
        )
    if reason in ("readonly", "cantopen"):
        return (
            f"cannot write the state dir {path.parent} (the store {path.name} there cannot be "
            f"written: {cause}), so nothing was changed; make it writable and try again"
        )
    if reason == "damaged":
        return (
            f"the store {path} is damaged ({cause}), so nothing was changed; stop the daemon, move "
            f"the file aside and start it again, or start it on another store with "
            f"`sessiond serve --store PATH`"
        )
    return f"writing the store {path} failed ({cause}), so nothing was changed; check that disk and try again"


class StoreClosed(RuntimeError):
    pass


class StoreUnavailable(RpcError):
    """The store said no to a whole batch: locked, full, read-only, damaged. Nothing of it was written."""

    def __init__(self, message: str, *, reason: str, path: Path, cause: str) -> None:
        super().__init__(ErrorCode.INTERNAL_ERROR, message, {"store": str(path), "reason": reason})
        self.reason = reason
        self.path = path
        self.cause = cause  # SQLite's own words

    def again(self) -> StoreUnavailable:
        """The same error, for one more waiting caller (an exception is raised in one place only)."""
        return StoreUnavailable(self.message, reason=self.reason, path=self.path, cause=self.cause)


def unavailable(
    exc: BaseException, path: Path, busy_timeout: float = BUSY_TIMEOUT, reason: str | None = None
) -> StoreUnavailable:
    """`exc` (SQLite's) as the store at `path` saying no, with the sentence for it."""
    if isinstance(exc, StoreUnavailable):
        return exc
    reason = reason or trouble_of(exc) or "io"
    return StoreUnavailable(
        explain(reason, path, exc, busy_timeout=busy_timeout), reason=reason, path=path, cause=str(exc)
    )


def connect(path: Path, *, busy_timeout: float = BUSY_TIMEOUT, making: bool = False) -> sqlite3.Connection:
    """A connection to the store at `path`; `making`: the one that may make the file."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        if making and int(conn.execute("PRAGMA page_count").fetchone()[0]) == 0:
            # A new store gives back the pages a prune frees (`Store.reclaim`); one made before keeps
            # its size. SQLite takes this only before the file's first page (journal mode WAL writes
            # it), and writes that page again when told on a store made so: only for a new one.
            conn.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a crash of the process (what "acknowledged"
        # promises); only a power loss can take the last commits.
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


class Store:
    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> None:
        """Open (or make) the store; raises `StoreUnavailable` with a sentence when it cannot."""
        self.path = path
        self.busy_timeout = busy_timeout
        self._pending: list[tuple[Write, asyncio.Future[None] | None]] = []
        # Writes nobody waits on, kept through an outage of the store until it takes them.
        self._kept: list[tuple[Write, asyncio.Future[None] | None]] = []
        self._retry: asyncio.TimerHandle | None = None
        self._retry_delay = RETRY_KEPT
        self._timer: asyncio.Handle | None = None  # the commit to come for what is pending
        self._last_rows = 0  # how many rows the last commit changed
        self._last_commit = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.commits = 0
        self.checkpoints = 0  # passive checkpoints run (on their thread) since the store opened
        self._checkpointing: asyncio.Future[bool] | None = None
        self._holding = False  # commits wait for the running checkpoint (the log is past WAL_HOLD_BYTES)
        self.holds = 0  # checkpoints that held commits (see WAL_HOLD_BYTES)
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._checkpointed_at = (0, 0.0)  # total_changes and loop time when the last one started
        self._rest: asyncio.TimerHandle | None = None  # when to look whether the store is at rest
        self._resting: asyncio.Task[bool] | None = None  # the log going back to nothing at rest
        self.rests = 0  # times the log went back to nothing at rest
        self.on_rest: list[Callable[[bool], None]] = []  # told after each try at rest: whether it went
        self.trouble: StoreUnavailable | None = None  # set while the store says no
        # Called after each commit that went through: what was queued before it is stored now.
        self.on_commit: list[Callable[[], None]] = []
        # Called when the store said no to a batch (`trouble` says why).
        self.on_refused: list[Callable[[], None]] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.unavailable(
                sqlite3.OperationalError(f"unable to open database file: {exc.strerror}")
            ) from None
        try:
            self._conn = connect(path, busy_timeout=busy_timeout, making=True)
            try:
                self._conn.execute("PRAGMA wal_autocheckpoint=0")
                self._conn.execute(f"PRAGMA journal_size_limit={WAL_KEPT_BYTES}")
                self._conn.executescript(SCHEMA)
                self._add_missing_columns()
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
            except BaseException:
                self._conn.close()
                raise
        except sqlite3.Error as exc:
            raise self.unavailable(exc) from None

    def unavailable(self, exc: BaseException, reason: str | None = None) -> StoreUnavailable:
        """The error a request gets when the store says no, with the sentence for it."""
        return unavailable(exc, self.path, self.busy_timeout, reason)

    def _add_missing_columns(self) -> None:
        """A store made by an older version gains the columns added since."""
        added = {
            "sessions": [
                ("run", "TEXT"),
                ("placement_options", "TEXT"),
                ("kind", "TEXT NOT NULL DEFAULT 'main'"),
                ("parent", "TEXT"),
                ("choices", "TEXT"),
                ("mcp_servers", "TEXT"),
                ("activity", "REAL"),
                ("title_from", "TEXT"),
                ("cost_copied", "REAL"),
            ]
        }
        for table, columns in added.items():
            present = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in present:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
                    if (table, name) == ("sessions", "activity"):
                        # What the sessions of an older store did last, as far as it kept: their
                        # status's last change (what a restart showed for them before).
                        self._conn.execute("UPDATE sessions SET activity = status_since")
        # On columns added since: a session's children and a run's sessions, read on first need.
        self._conn.execute("CREATE INDEX IF NOT EXISTS sessions_parent ON sessions (parent)")
        self._conn.execute("CREATE INDEX IF NOT EXISTS sessions_run ON sessions (run)")
        # sort=activity: a page is a walk down this index from the cursor, whatever the number of sessions.
        self._conn.execute(
            "CREATE INDEX IF NOT EXISTS sessions_activity ON sessions (activity DESC, ordinal)"
        )

    # ------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """From now on writes are batched per turn of the running loop."""
        self._loop = asyncio.get_running_loop()
        self._checkpointed_at = (self._conn.total_changes, self._loop.time())

    async def close(self) -> int:
        """Commit everything written so far, then close; the number of writes the store refused."""
        if self._closed:
            return 0
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        if self._rest is not None:
            self._rest.cancel()
        if self._resting is not None:
            self._resting.cancel()  # (the checkpoint it waits on is awaited below)
        if self._holding and self._checkpointing is not None:
            with contextlib.suppress(Exception):  # (logged by _checkpointed)
                await self._checkpointing  # the commits it holds go in below
        if self._pending or self._kept:
            self._commit_pending()
        lost = len(self._kept)
        if lost and self.trouble is not None:
            logging.getLogger("sessiond.store").error(
                "%d writes could not be stored before closing: %s", lost, self.trouble.message
            )
        if self._checkpointing is not None:
            with contextlib.suppress(Exception):  # (logged by _checkpointed)
                await self._checkpointing
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
        self._conn.close()  # the last connection to close checkpoints what is left
        return lost

    # ------------------------------------------------------------ writes

    def write(self, op: Write, *, wait: bool = True) -> asyncio.Future[None] | None:
        """Queue a write. With `wait`, the returned future resolves once it is committed.

        Writes made in one turn of the event loop (or within the spacing under load) are committed
        as one transaction.
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        if self._loop is None:
            # Before start(): the loop does not serve anyone yet, write in place.
            try:
                op(self._conn)
            except sqlite3.Error as exc:
                if trouble_of(exc) is None:
                    raise
                raise self.unavailable(exc) from None
            return None
        future = self._loop.create_future() if wait else None
        self._pending.append((op, future))
        self._commit_soon()
        if future is not None:
            self.awaited()  # (someone waits on it: a quiet daemon commits it without the spacing)
        return future

    def commit_now(self) -> None:
        """Commit what is pending at once, rather than at the end of this turn of the loop (unless
        the last commit was under the spacing ago: then when that has passed)."""
        assert self._loop is not None
        if self._loop.time() - self._last_commit >= self._spacing():
            self._commit_pending()
        else:
            self._commit_soon()

    def awaited(self) -> None:
        """An answer waits on the next commit (a turn's on its events, a session opened or closed on
        its row): it comes at the end of this turn of the loop, without waiting out the spacing. A
        lone request is answered as soon as what it did is stored; under load, a turn of the loop
        already gathers many writes, and the last answers of a burst waited up to LOADED_SPACING
        for a commit with nothing left to gather. The spacing stands for writes nobody waits on."""
        if self._loop is None or not (self._pending or self._timer):
            return
        if isinstance(self._timer, asyncio.TimerHandle):
            self._timer.cancel()
            self._timer = None
        if self._timer is None:
            self._timer = self._loop.call_soon(self._commit_pending)

    def _spacing(self) -> float:
        return LOADED_SPACING if self._last_rows >= LOADED_ROWS else SPACING

    def _commit_soon(self) -> None:
        """Commit at the end of this turn of the loop, or once the spacing has passed since the
        last commit: under load one commit takes the writes of several turns of the loop."""
        if self._timer is not None:
            return
        assert self._loop is not None
        wait = self._last_commit + self._spacing() - self._loop.time()
        if wait > 0:
            self._timer = self._loop.call_later(wait, self._commit_pending)
        else:
            self._timer = self._loop.call_soon(self._commit_pending)

    def _commit_pending(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._holding:
            return  # (committed once the checkpoint holding them is done: `_checkpointed`)
        batch: list[tuple[Write, asyncio.Future[None] | None]] = [*self._kept, *self._pending]
        self._kept, self._pending = [], []
        if batch:
            if self._loop is not None:
                self._last_commit = self._loop.time()
            self._commit(batch)

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        future = self.write(lambda conn: None)
        if future is not None:
            await future

    def _commit(self, batch: list[tuple[Write, asyncio.Future[None] | None]]) -> None:
        before = self._conn.total_changes
        try:
            failures = self._apply(batch)
            self._conn.execute("COMMIT")
        except Exception as exc:
            if trouble_of(exc) is None:
                raise
            self._refused(batch, self.unavailable(exc))
            return
        self.commits += 1
        self._last_rows = self._conn.total_changes - before
        self._checkpoint_soon()
        if self._rest is None and self._loop is not None:
            self._rest = self._loop.call_later(REST_SECONDS, self._at_rest)
        for hook in self.on_commit:
            hook()
        self._retry_delay = RETRY_KEPT
        if self.trouble is not None:
            logging.getLogger("sessiond.store").warning("the store %s takes writes again", self.path)
            self.trouble = None
        failed = {id(f): error for f, error in failures if f is not None}
        for _, future in batch:
            if future is not None:
                _settle(future, failed.get(id(future)))
        for orphan, error in failures:
            if orphan is None:
                _report(error)

    @property
    def checkpointing(self) -> asyncio.Future[bool] | None:
        """The checkpoint running now on its thread, if any."""
        return self._checkpointing

    async def checkpoint(self, mode: str = "PASSIVE") -> bool:
        """A checkpoint of its own now, on its thread (after any running): whether it copied the
        whole log. TRUNCATE also takes the log back to nothing: it holds writes off while it copies
        what is left, and gives up at once (False) if a read still needs part of the log. A failure
        is logged as any checkpoint's is (later commits try again)."""
        while (running := self._checkpointing) is not None:
            if running.done():
                # Ended, its end not heard yet (`_checkpointed` runs next turn of the loop): awaiting
                # a done future does not yield, so this would spin with the loop held.
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(Exception):
                await asyncio.shield(running)
        if self._loop is None or self._closed:
            return False
        try:
            return await asyncio.shield(self._start_checkpoint(mode))
        except Exception:
            return False

    def _start_checkpoint(self, mode: str = "PASSIVE") -> asyncio.Future[bool]:
        assert self._loop is not None
        self._checkpointed_at = (self._conn.total_changes, self._loop.time())
        running = self._checkpointing = self._loop.run_in_executor(None, self._checkpoint, mode)
        running.add_done_callback(self._checkpointed)
        return running

    def _checkpoint_soon(self) -> None:
        """Start a passive checkpoint on its thread when enough was written since the last one."""
        if self._loop is None or self._checkpointing is not None or self._closed:
            return
        rows, at = self._checkpointed_at
        changed, now = self._conn.total_changes, self._loop.time()
        if changed - rows < CHECKPOINT_ROWS and (changed == rows or now - at < CHECKPOINT_EVERY):
            return
        self._start_checkpoint()

    def _at_rest(self) -> None:
        """REST_SECONDS after a commit: with none since, take the log back to nothing."""
        assert self._loop is not None
        self._rest = None
        quiet = self._loop.time() - self._last_commit
        if self._closed or (self._resting is not None and not self._resting.done()):
            return
        if quiet < REST_SECONDS:
            self._rest = self._loop.call_later(REST_SECONDS - quiet, self._at_rest)
            return
        self._resting = self._loop.create_task(self._log_back(), name="store at rest")
        self._resting.add_done_callback(self._rested)

    def _rested(self, done: asyncio.Task[bool]) -> None:
        if done.cancelled():
            return
        self.rests += done.result()
        for hook in self.on_rest:
            hook(done.result())

    async def _log_back(self) -> bool:
        """Copy the whole log into the file while writes go on, then take it back to nothing in one
        truncating checkpoint, which has little left to copy: whether it went. A read holding part
        of the log back makes it give up (the next rest, or a later checkpoint, gets it)."""
        return await self.checkpoint() and await self.checkpoint("TRUNCATE")

    def _checkpoint(self, mode: str = "PASSIVE") -> bool:
        """On the checkpoint's thread, with a connection of its own: whether it copied the whole log
        (no reader held it back)."""
        if self._checkpoint_conn is None:
            self._checkpoint_conn = connect(self.path, busy_timeout=self.busy_timeout)
        conn = self._checkpoint_conn
        # A passive one waits for nobody; any other, which holds writes off, must not wait for reads.
        conn.execute(f"PRAGMA busy_timeout={0 if mode != 'PASSIVE' else int(self.busy_timeout * 1000)}")
        busy, logged, copied = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()[0]
        return not busy and logged == copied

    def _checkpointed(self, done: asyncio.Future[bool]) -> None:
        self._checkpointing = None
        held, self._holding = self._holding, False
        if held and not self._closed and (self._pending or self._kept):
            self._commit_soon()
        if done.cancelled():
            return
        if (exc := done.exception()) is not None:
            # The WAL keeps every commit: nothing is lost, a later commit tries again.
            logging.getLogger("sessiond.store").warning(
                "copying the store's write-ahead log into %s failed (%s); tried again after later commits",
                self.path,
                exc,
            )
            return
        self.checkpoints += 1
        if not held and not self._closed and _log_bytes(self.path) > WAL_HOLD_BYTES:
            # What this one left is copied by one more, with commits held meanwhile: it has only
            # what was committed while this one ran to copy.
            self._holding = True
            self.holds += 1
            self._start_checkpoint()

    def _apply(
        self, batch: list[tuple[Write, asyncio.Future[None] | None]]
    ) -> list[tuple[asyncio.Future[None] | None, BaseException]]:
        """Run the batch in one open transaction; the writes that failed on their own.

        Raises (with the transaction still to be rolled back) when the store itself says no.
        """
        failures: list[tuple[asyncio.Future[None] | None, BaseException]] = []
        self._rollback()  # a transaction left open by an earlier failure
        self._conn.execute("BEGIN")
        try:
            for op, _ in batch:
                op(self._conn)
        except Exception as exc:
            if trouble_of(exc) is not None:
                raise
            # One bad write must not lose the others: run them again one by one.
            self._conn.execute("ROLLBACK")
            self._conn.execute("BEGIN")
            for op, future in batch:
                try:
                    with _savepoint(self._conn):
                        op(self._conn)
                except Exception as one:
                    if trouble_of(one) is not None:
                        raise
                    failures.append((future, one))
        return failures

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def _refused(
        self, batch: list[tuple[Write, asyncio.Future[None] | None]], error: StoreUnavailable
    ) -> None:
        """The store said no to the whole batch: nothing of it is written.

        Those waiting are told (their requests are refused); the writes nobody waits
        on are kept, in order, for the next commit, and retried until the store takes them.
        """
        self._rollback()
        if self.trouble is None or self.trouble.message != error.message:
            logging.getLogger("sessiond.store").error("%s", error.message)
        self.trouble = error
        self._kept = [(op, None) for op, future in batch if future is None]
        for _, future in batch:
            if future is not None:
                _settle(future, error.again())
        for hook in self.on_refused:
            hook()
        if self._kept and self._loop is not None and self._retry is None and not self._closed:
            self._retry = self._loop.call_later(self._retry_delay, self._retry_kept)
            self._retry_delay = min(self._retry_delay * 2, RETRY_KEPT_MOST)

    def _retry_kept(self) -> None:
        self._retry = None
        if self._kept and not self._closed and not self._pending:
            self._commit_pending()

    # ------------------------------------------------------------ reads

    @property
    def reclaims(self) -> bool:
        """Whether the file gives back what is freed (a store made since it could: `reclaim`)."""
        return _reclaims(self._conn)

    def free_bytes(self) -> int:
        """Bytes free inside the file, kept for what comes next (`reclaim` gives them back)."""
        free = int(self._conn.execute("PRAGMA freelist_count").fetchone()[0])
        return free * int(self._conn.execute("PRAGMA page_size").fetchone()[0])

    async def reclaim(self) -> int:
        """Give the free pages back to the filesystem, RECLAIM_PAGES in each commit (the daemon
        serves between them), and copy the log into the file: the bytes given back. 0 for a store
        that does not reclaim."""
        if not self.reclaims:
            return 0
        pages = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
        freed = True

        def some(conn: sqlite3.Connection) -> None:
            nonlocal freed
            freed = _free_pages(conn, RECLAIM_PAGES) > 0

        while freed:
            freed = False  # (set again only by a run of `some`)
            done = self.write(some)
            if done is not None:
                await done
        # (Counted by the file's pages: a batch run again after another write failed frees twice.)
        gone = pages - int(self._conn.execute("PRAGMA page_count").fetchone()[0])
        # The file shrinks when the whole log is copied into it, passively while the daemon writes
        # on (a read holding part of it back: tried again a little later); the log then goes back
        # to nothing in one truncating checkpoint, which has little left to copy.
        for attempt in range(RECLAIM_CHECKPOINTS if gone > 0 else 0):
            if attempt:
                await asyncio.sleep(RECLAIM_BACKOFF * attempt)
            if await self._log_back():
                break
        return max(gone, 0) * int(self._conn.execute("PRAGMA page_size").fetchone()[0])

    def size(self) -> int:
        """Bytes on disk: the database file and its write-ahead log."""
        return size_on_disk(self.path)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read on the caller's thread: for start-up, before serving."""
        if self._loop is not None:
            raise RuntimeError("Store.query is for start-up only; while serving, use Store.read")
        self._conn.row_factory = sqlite3.Row
        try:
            return list(self._conn.execute(sql, args))
        finally:
            self._conn.row_factory = None

    def lookup(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A short read on the loop's thread, at start-up or while serving: a row by its key, a
        page by an index (sessions read on first need). Between two turns of the loop no
        transaction is open here, so it sees every committed write and blocks for no commit."""
        self._conn.row_factory = sqlite3.Row
        try:
            return list(self._conn.execute(sql, args))
        finally:
            self._conn.row_factory = None

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read on a thread of its own, with its own connection (WAL lets it run beside writes)."""

        def run() -> T:
            conn = connect(self.path, busy_timeout=self.busy_timeout)
            conn.row_factory = sqlite3.Row
            try:
                return fn(conn)
            finally:
                conn.close()

        return await asyncio.to_thread(run)


def _log_bytes(path: Path) -> int:
    """The size of the store's write-ahead log."""
    with contextlib.suppress(OSError):
        return path.with_name(path.name + "-wal").stat().st_size
    return 0


def size_on_disk(path: Path) -> int:
    """Bytes on disk of the store at `path`: the database file and its write-ahead log."""
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += part.stat().st_size
    return total


def _reclaims(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL


def _free_pages(conn: sqlite3.Connection, most: int) -> int:
    """Give up to `most` free pages back to the filesystem (a store made with auto_vacuum
    INCREMENTAL): how many went."""
    pages = min(most, int(conn.execute("PRAGMA freelist_count").fetchone()[0]))
    for _ in range(pages):  # one a statement: Python's sqlite3 steps one without columns once
        conn.execute("PRAGMA incremental_vacuum")
    return pages


@dataclass(frozen=True, slots=True)
class Compacted:
    """What `compact` did to the store at `path`: bytes on disk before and after, and whether it
    was rewritten (made before sessiond gave space back, it now does after each prune)."""

    path: Path
    before: int
    after: int
    rewritten: bool


def compact(path: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Compacted:
    """Give the free space of the store at `path` back to the filesystem, nobody else using it. A
    store made before sessiond gave space back is rewritten once (VACUUM, needing about its size
    free on the disk for a while); one made since gives back its free pages. Raises
    StoreUnavailable, its sentence saying what is wrong and what to do."""
    before = size_on_disk(path)
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(path, busy_timeout=busy_timeout)
        rewritten = not _reclaims(conn)
        if rewritten:
            conn.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
            conn.execute("VACUUM")  # (what makes a store made without it take it)
        else:
            freed = True
            while freed:  # (a transaction of RECLAIM_PAGES at a time, not one a page)
                conn.execute("BEGIN")
                freed = _free_pages(conn, RECLAIM_PAGES) > 0
                conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error as exc:
        raise unavailable(exc, path, busy_timeout) from None
    finally:
        if conn is not None:
            conn.close()
    return Compacted(path, before, size_on_disk(path), rewritten)


def session_counts(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Sessions counted by status and agent, with their turns: one pass over the `sessions_status`
    index, the one read at start-up that grows with the store (about 25 ms at 100,000 sessions)."""
    return list(
        conn.execute(
            "SELECT status, agent, COUNT(*) AS n, COALESCE(SUM(turns), 0) AS turns FROM sessions "
            "GROUP BY status, agent"
        )
    )


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


def _report(exc: BaseException) -> None:
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


class RowsAtCommit(Generic[K, T]):
    """Rows of one statement written as their items stand when the next batch commits: an item saved
    again before then is written once, and every item saved before it in one `executemany`, at the
    place in the batch of the first. A batch run again (after an outage) keeps its items and writes
    them as they are then. `stored` hears of the items once their rows are written in the batch."""

    def __init__(
        self,
        store: Store,
        sql: str,
        values: Callable[[T], Sequence[Any]],
        stored: Callable[[list[T]], None] | None = None,
    ) -> None:
        self._store, self._sql, self._values, self._stored = store, sql, values, stored
        self.waiting: dict[K, T] = {}  # by the caller's key: what the next commit writes

    def save(self, key: K, item: T) -> None:
        if key in self.waiting:
            return
        self.waiting[key] = item
        if len(self.waiting) > 1:
            return  # the write queued for the first of them takes this one too
        taken: list[T] = []

        def write(conn: sqlite3.Connection) -> None:
            if not taken:
                taken.extend(self.waiting.values())
                self.waiting.clear()
            conn.executemany(self._sql, [self._values(item) for item in taken])
            if self._stored is not None:
                self._stored(taken)

        self._store.write(write, wait=False)


def executemany(sql: str, rows: Iterable[Sequence[Any]]) -> Write:
    materialised = list(rows)

    def op(conn: sqlite3.Connection) -> None:
        conn.executemany(sql, materialised)

    return op


def execute(sql: str, args: Sequence[Any] = ()) -> Write:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute(sql, args)

    return op
