"""A prune of many closed sessions, and what the daemon's clients feel while it runs.

A store is seeded with closed sessions (each with a turn row and the events of a first turn,
written straight into SQLite with the daemon's schema) and a few open ones. Through a real daemon
over raw JSON-RPC: `session/get` of an open session, asked again and again, first with nothing
else going on (the baseline) and then while `session/prune` removes the closed ones. Reported:
the prune's wall time against the floor (the same rows deleted by SQLite alone, in one
transaction on a copy of the store, no daemon; the prune also gives the freed space back), the
store's size after it, and the gets' latency during the prune against the baseline, measured in
the same run.

python -m bench.prune [--closed 100000] [--events 13]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import msgpack

from bench.harness import Daemon, table
from bench.scale import project_of
from bench.startup import Raw
from sessiond.daemon import store as st
from sessiond.daemon.records import INSERT_SESSIONS, SessionRecord
from sessiond.protocol.models import SessionStatus

Row = tuple[str, str, str]
OPEN = 10  # open sessions beside the closed ones, one of them asked for again and again
BASELINE = 2000  # gets with nothing else going on
EVENTS = 13  # of each closed session: a demo agent's first turn stores about as many


def seed(home: Path, closed: int, events: int) -> float:
    """`closed` closed sessions (each a turn and `events` events) and OPEN open ones; returns a
    time between the two (the prune's `closedBefore`)."""
    root = str(project_of(home))
    now = time.time()
    started = now - closed - 7200

    def record(n: int, status: SessionStatus, since: float) -> SessionRecord:
        return SessionRecord(f"s{n}", n, "demo", root, "here", None, status, since, since)

    sessions = [record(n, SessionStatus.CLOSED, started + n) for n in range(1, closed + 1)]
    sessions += [record(closed + n, SessionStatus.IDLE, now) for n in range(1, OPEN + 1)]
    data = msgpack.packb({"text": "done"})
    turns = [
        (f"t{n}", f"s{n}", "say done", "completed", "done", "end_turn", None, None, s, s, s + 0.05)
        for n in range(1, closed + 1)
        for s in [started + n]
    ]
    rows = (
        (n * events + k + 1, started + n, "turn.chunk", "demo", f"s{n}", f"t{n}", data)
        for n in range(1, closed + 1)
        for k in range(events)
    )
    store = st.Store(home / "state" / "sessiond.db")
    store.write(st.executemany(INSERT_SESSIONS, (r.row() for r in sessions)))
    store.write(st.executemany("INSERT INTO turns VALUES (?,?,?,?,?,?,?,?,?,?,?)", turns))
    store.write(st.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", rows))
    asyncio.run(store.close())
    return now - 3600


def floor_s(home: Path, before: float) -> float:
    """The same rows deleted by SQLite alone: one transaction on a copy of the store."""
    with tempfile.TemporaryDirectory(prefix="sd-prune-floor-") as folder:
        copy = Path(folder) / "copy.db"
        shutil.copy(home / "state" / "sessiond.db", copy)
        conn = sqlite3.connect(copy, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            started = time.perf_counter()
            conn.execute("BEGIN")
            gone = "(SELECT id FROM sessions WHERE status = 'closed' AND status_since < ?)"
            conn.execute(f"DELETE FROM events WHERE session IN {gone}", (before,))
            conn.execute(f"DELETE FROM turns WHERE session IN {gone}", (before,))
            conn.execute("DELETE FROM sessions WHERE status = 'closed' AND status_since < ?", (before,))
            conn.execute("COMMIT")
            return time.perf_counter() - started
        finally:
            conn.close()


async def gets_ms(raw: Raw, session: str, until: asyncio.Future[object] | None, count: int) -> list[float]:
    """Latencies of `session/get`: `count` of them, or as many as fit until `until` is done."""
    took: list[float] = []
    while (until is None and len(took) < count) or (until is not None and not until.done()):
        started = time.perf_counter()
        await raw.call("session/get", {"session": session})
        took.append((time.perf_counter() - started) * 1000)
    return took


async def measure(daemon: Daemon, before: float) -> tuple[float, dict[str, object], list[float], list[float]]:
    asker, pruner = await Raw.open(daemon.socket), await Raw.open(daemon.socket)
    try:
        page = await asker.call("session/list", {"limit": 1})
        session = page["sessions"][0]["id"]
        baseline = await gets_ms(asker, session, None, BASELINE)
        started = time.perf_counter()
        moment = datetime.fromtimestamp(before, UTC).isoformat()
        pruning = asyncio.ensure_future(pruner.call("session/prune", {"closedBefore": moment}))
        during = await gets_ms(asker, session, pruning, 0)
        result = await pruning
        return time.perf_counter() - started, result, baseline, during
    finally:
        await asker.close()
        await pruner.close()


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def rows(closed: int, events: int) -> list[Row]:
    home = Path(tempfile.mkdtemp(prefix="sd-prune-", dir="/tmp"))
    try:
        before = seed(home, closed, events)
        floor = floor_s(home, before)
        db = home / "state" / "sessiond.db"
        size = db.stat().st_size
        daemon = Daemon(home=home).start()
        try:
            took, result, baseline, during = asyncio.run(measure(daemon, before))
            after = st.size_on_disk(db)  # (its log included, the daemon still on it)
        finally:
            daemon.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert result["sessions"] == closed, result
    return [
        (
            f"prune {closed:,} closed sessions ({closed * events:,} events, a {size / 2**20:.0f} MiB store)",
            f"{took:.2f} s",
            f"{took / floor:.2f}x SQLite deleting the same rows alone ({floor:.2f} s); "
            f"{closed / took:,.0f} sessions/s",
        ),
        (
            "the store on disk after the prune (its file and log)",
            f"{after / 2**20:.1f} MiB",
            f"{after / size:.1%} of before; the prune gave back {int(result['freedBytes']) / 2**20:.0f} MiB "
            "of its file (included in its time above)",
        ),
        (
            "session/get of an open session, nothing else going on",
            f"p50 {p(baseline, 50):.2f} ms",
            f"p99 {p(baseline, 99):.2f} ms, max {max(baseline):.1f} ms ({len(baseline)} gets)",
        ),
        (
            "the same while the prune runs",
            f"p50 {p(during, 50):.2f} ms",
            f"p99 {p(during, 99):.2f} ms ({p(during, 99) / p(baseline, 99):.1f}x), "
            f"max {max(during):.1f} ms ({len(during)} gets)",
        ),
    ]


TITLE = "Pruning closed sessions while the daemon serves (a seeded store, raw JSON-RPC)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--closed", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=EVENTS, help="events of each closed session")
    args = parser.parse_args()
    print(table(TITLE, rows(args.closed, args.events)))


if __name__ == "__main__":
    main()
