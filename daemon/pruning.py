"""`session/prune`: the sessions closed before a time leave the store, with what they left.

Nothing else ever removes a session: a daemon that runs a batch a day grows its store without
bound. A prune removes each session closed before the time asked, its turns and its events (its
transcript, plan, usage and changes), the settled tasks of those sessions, and the runs that
ended before the time with no session left. A closed session stays while anything open needs it:
a session of its tree still open (a side chat, a task, a thread), or a task suggested in it still
to run; so no open session ever names a parent that is gone.

The choice is read on a thread of its own (a walk over every session at 100,000 of them); the
deletions go in chunks, newest sessions first (children before their parents), each chunk one
commit on the loop's thread, so turns and pages go on between them. Each chunk's SQL deletes a
session only if it is still closed before the time and no session outside the chunk names it
as its parent: a side chat opened on it meanwhile keeps it. From the moment a chunk is queued
its sessions are gone to every request (`SessionTable.gone`); one reopened before that stays.

Events keep their seq: the highest ever given is kept in `meta` (`events_head`), so a prune that
removes the newest events cannot make the log give a seq out twice after a restart. A worktree
a close kept (it had work in it) is not touched: the result names it, with how to remove it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Protocol

import msgpack

from sessiond.daemon import store as st
from sessiond.daemon.events import EVENTS_HEAD, EventLog
from sessiond.daemon.records import SessionRecord
from sessiond.daemon.session_table import LazyIndex, SessionTable
from sessiond.protocol import models as m
from sessiond.protocol.durations import age_text
from sessiond.protocol.enums import EventKind
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.sizes import KEPT_WORTH_TELLING, size

if TYPE_CHECKING:
    from sessiond.daemon.around import Around
    from sessiond.daemon.insight_feed import InsightFeed
    from sessiond.daemon.merging import Merging
    from sessiond.daemon.runs import RunBook

log = logging.getLogger("sessiond.pruning")

# A chunk holds sessions until about this many of their events: one commit's work, a few ms here
# (`python -m bench.prune`: with 5,000 a request waited 17 ms at the p99 while 100,000 went, with
# 2,000 7 ms, and the prune took no longer).
CHUNK_EVENTS = 2_000
CHUNK_SESSIONS = 500
# `--keep-closed` prunes at most this often and at least this often (seconds).
KEEP_MOST_OFTEN = 60.0
KEEP_LEAST_OFTEN = 3600.0
# Tasks that will still run: the session they were suggested in stays.
UNSETTLED_TASKS = ("suggested", "queued", "running")

CHOOSE = """
WITH RECURSIVE kept(id) AS (
    SELECT id FROM sessions WHERE NOT (status = 'closed' AND status_since < :before)
    UNION SELECT value FROM json_each(:needed)
    UNION SELECT s.parent FROM sessions s JOIN kept k ON s.id = k.id WHERE s.parent IS NOT NULL
)
SELECT s.id, s.agent, s.turns, s.run,
       (SELECT COUNT(*) FROM events e WHERE e.session = s.id) AS events
FROM sessions s
WHERE s.status = 'closed' AND s.status_since < :before AND s.id NOT IN kept
ORDER BY s.ordinal DESC
"""
OLD_CLOSED = "SELECT COUNT(*) FROM sessions WHERE status = 'closed' AND status_since < ?"
# What each close kept, the last close of each session counting.
CLOSES = (
    "SELECT session, data FROM events WHERE kind = 'session.closed' "
    "AND session IN (SELECT value FROM json_each(?)) ORDER BY seq"
)
# (`+status`: found by id, not down the status index, which would walk every closed session.)
DELETE_SESSIONS = """
DELETE FROM sessions
WHERE id IN (SELECT value FROM json_each(:chunk)) AND +status = 'closed' AND status_since < :before
  AND NOT EXISTS (
      SELECT 1 FROM sessions c
      WHERE c.parent = sessions.id AND c.id NOT IN (SELECT value FROM json_each(:chunk))
  )
RETURNING id
"""


# A list of ids passed as one JSON parameter, for `IN`.
IDS = "(SELECT value FROM json_each(?))"


@dataclass
class Chosen:
    """What a prune would remove, read from the store."""

    sessions: list[sqlite3.Row]  # newest first: id, agent, turns, run, events
    old_closed: int  # every session closed before the time, those that stay among them
    kept_at_close: dict[str, str]  # by session: what its last close kept, in its words

    def chunks(self) -> Iterator[list[sqlite3.Row]]:
        chunk: list[sqlite3.Row] = []
        events = 0
        for row in self.sessions:
            chunk.append(row)
            events += row["events"]
            if events >= CHUNK_EVENTS or len(chunk) >= CHUNK_SESSIONS:
                yield chunk
                chunk, events = [], 0
        if chunk:
            yield chunk

    def result(self, sessions: set[str], turns: int, events: int, tasks: int, runs: int) -> m.PruneResult:
        return m.PruneResult(
            sessions=len(sessions),
            turns=turns,
            events=events,
            tasks=tasks,
            runs=runs,
            kept=self.old_closed - len(sessions),
            worktrees=[said for session, said in self.kept_at_close.items() if session in sessions],
        )


def _choose(conn: sqlite3.Connection, before: float, needed: list[str]) -> Chosen:
    (old_closed,) = conn.execute(OLD_CLOSED, (before,)).fetchone()
    if not old_closed:  # (an hourly --keep-closed pass, most often: no walk over every session)
        return Chosen([], 0, {})
    rows = list(conn.execute(CHOOSE, {"before": before, "needed": json.dumps(needed)}))
    kept: dict[str, str] = {}
    for session, data in conn.execute(CLOSES, (json.dumps([r["id"] for r in rows]),)):
        said = msgpack.unpackb(data, raw=False).get("kept")
        if said:
            kept[session] = said
        else:
            kept.pop(session, None)
    return Chosen(rows, old_closed, kept)


def _runs_in_use(conn: sqlite3.Connection, leaving: list[str]) -> set[str]:
    """The runs named by a session that stays (all but `leaving`)."""
    rows = conn.execute(
        f"SELECT DISTINCT run FROM sessions WHERE run IS NOT NULL AND id NOT IN {IDS}", (json.dumps(leaving),)
    )
    return {run for (run,) in rows}


def _delete_chunk(
    ids: list[str], before: float, head: int, deleted: list[str], counts: list[int]
) -> st.Write:
    """Deletes the sessions of `ids` still closed before the time and no parent of a session that
    stays, with their turns and events (`deleted` and `counts` say what went); keeps `head`."""

    def op(conn: sqlite3.Connection) -> None:
        found = [
            row[0] for row in conn.execute(DELETE_SESSIONS, {"chunk": json.dumps(ids), "before": before})
        ]
        gone = (json.dumps(found),)
        counts[0] = conn.execute(f"DELETE FROM turns WHERE session IN {IDS}", gone).rowcount
        counts[1] = conn.execute(f"DELETE FROM events WHERE session IN {IDS}", gone).rowcount
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), excluded.value)",
            (EVENTS_HEAD, head),
        )
        deleted.extend(found)

    return op


def _delete_tasks_and_runs(task_ids: list[str], run_ids: list[str]) -> st.Write:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute(f"DELETE FROM tasks WHERE id IN {IDS}", (json.dumps(task_ids),))
        conn.execute(f"DELETE FROM runs WHERE id IN {IDS}", (json.dumps(run_ids),))

    return op


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


async def _committed(future: asyncio.Future[None] | None) -> None:
    if future is not None:
        await future


class PrunePort(Protocol):
    """What a prune reads of the core and takes out of it (the core satisfies it: mypy checks
    that where serve hands it over)."""

    @property
    def store(self) -> st.Store: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def sessions(self) -> SessionTable: ...
    @property
    def children(self) -> LazyIndex: ...
    @property
    def by_run(self) -> LazyIndex: ...
    @property
    def by_agent_session(self) -> dict[tuple[str, str], SessionRecord]: ...
    @property
    def feed(self) -> InsightFeed: ...
    @property
    def around(self) -> Around: ...
    @property
    def merging(self) -> Merging: ...


def _space_text(result: m.PruneResult) -> str:
    """What a keep pass's line says of the store's space: given back, or kept by an older store."""
    if result.freed_bytes:
        return f"; the store's file gave back {size(result.freed_bytes)}"
    if result.kept_bytes >= KEPT_WORTH_TELLING:
        return (
            f"; the store's file keeps {size(result.kept_bytes)} free inside it (made by an older "
            "sessiond): stop the daemon and run `sessiond compact` to give it back"
        )
    return ""


class Pruner:
    def __init__(self, core: PrunePort, runs: RunBook, *, keep_closed: float | None = None) -> None:
        self.core = core
        self.runs = runs
        self.keep_closed = keep_closed  # seconds a closed session is kept (`--keep-closed`), or forever
        self._running = False

    async def keep(self) -> None:
        """`--keep-closed`: what closed longer ago than that goes, at start and every so often after
        (an hour, or a quarter of the age if that is sooner, but not more than once a minute)."""
        assert self.keep_closed is not None
        age = self.keep_closed
        while True:
            try:
                result = None if self._running else await self._prune(time.time() - age)
            except Exception as exc:  # (the store said no, say: the next pass tries again)
                log.warning(
                    "removing the sessions closed over %s ago failed (tried again within the hour): %s",
                    age_text(age),
                    exc.message if isinstance(exc, RpcError) else exc,
                )
            else:
                if result is not None and result.sessions:
                    print(
                        f"sessiond: removed {_n(result.sessions, 'session')} closed over {age_text(age)} "
                        f"ago (--keep-closed), with {_n(result.turns, 'turn')} and "
                        f"{_n(result.events, 'event')}{_space_text(result)}",
                        file=sys.stderr,
                        flush=True,
                    )
            await asyncio.sleep(min(max(age / 4, KEEP_MOST_OFTEN), KEEP_LEAST_OFTEN))

    async def prune(self, params: m.SessionPruneParams) -> m.PruneResult:
        at = params.closed_before
        before = (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()
        return await (self._count(before) if params.dry_run else self._prune(before))

    def _kept(self, result: m.PruneResult) -> m.PruneResult:
        """`result`, saying what a store made before sessiond gave space back keeps free."""
        if not self.core.store.reclaims:
            result.kept_bytes = self.core.store.free_bytes()
        return result

    async def _choose(self, before: float) -> Chosen:
        tasks = self.core.around.tasks.tasks.values()
        needed = sorted({t.from_session for t in tasks if t.status in UNSETTLED_TASKS and t.from_session})
        await self.core.store.flush()  # the rows as memory knows them, before they are read
        return await self.core.store.read(lambda conn: _choose(conn, before, needed))

    async def _count(self, before: float) -> m.PruneResult:
        chosen = await self._choose(before)
        ids = {row["id"] for row in chosen.sessions}
        in_use = await self.core.store.read(lambda conn: _runs_in_use(conn, sorted(ids)))
        result = chosen.result(
            ids,
            turns=sum(row["turns"] for row in chosen.sessions),
            events=sum(row["events"] for row in chosen.sessions),
            tasks=len(self._settled_tasks(before, ids)),
            runs=len(self._ended_runs(before, in_use)),
        )
        result.dry_run = True
        return self._kept(result)

    async def _prune(self, before: float) -> m.PruneResult:
        if self._running:
            raise RpcError(
                ErrorCode.CONFLICT, "a prune is already running; wait for its answer, then ask again"
            )
        self._running = True
        try:
            return self._kept(await self._remove_all(before))
        finally:
            self._running = False

    async def _remove_all(self, before: float) -> m.PruneResult:
        core = self.core
        chosen = await self._choose(before)
        removed: set[str] = set()
        turns = events = 0
        for chunk in chosen.chunks():
            deleted, counts = await self._remove(chunk, before)
            removed.update(deleted)
            turns, events = turns + counts[0], events + counts[1]
        task_ids = self._settled_tasks(before, removed)
        run_ids = self._ended_runs(before, await core.store.read(lambda conn: _runs_in_use(conn, [])))
        if task_ids or run_ids:
            await _committed(core.store.write(_delete_tasks_and_runs(task_ids, run_ids)))
        for task_id in task_ids:
            core.around.tasks.tasks.pop(task_id, None)
        for run_id in run_ids:
            self.runs.runs.pop(run_id, None)
            core.by_run.forget(run_id)
        result = chosen.result(removed, turns, events, len(task_ids), len(run_ids))
        if removed:
            core.events.emit(EventKind.SESSIONS_PRUNED, sessions=len(removed), closedBefore=before)
            core.feed.fleet_soon()
        if removed or task_ids or run_ids:
            # The file gives the freed pages back (in commits of their own) and the log is copied
            # in and emptied, before the answer. The prune is done either way: a failure here
            # leaves the space to be reused.
            try:
                result.freed_bytes = await core.store.reclaim()
            except Exception as exc:
                log.warning(
                    "giving back the space the prune freed in %s failed (%s); it is reused",
                    core.store.path,
                    exc,
                )
        return result

    async def _remove(self, chunk: list[sqlite3.Row], before: float) -> tuple[list[str], list[int]]:
        """One chunk deleted in one commit: what went, and its turns and events. From the moment
        it is queued its sessions are gone to every request; one reopened before then stays."""
        core = self.core
        ids = [row["id"] for row in chunk if not self._open_in_memory(row["id"])]
        deleted: list[str] = []
        counts = [0, 0]
        if not ids:
            return deleted, counts
        core.sessions.gone.update(ids)
        try:
            await _committed(core.store.write(_delete_chunk(ids, before, core.events.head, deleted, counts)))
        finally:
            core.sessions.gone.difference_update(ids)
        turns = {row["id"]: row["turns"] for row in chunk}
        for session_id in deleted:
            self._forget(session_id, turns[session_id])
        return deleted, counts

    def _open_in_memory(self, session_id: str) -> bool:
        record = self.core.sessions.in_memory(session_id)
        return record is not None and not record.closed

    def _forget(self, session_id: str, turns: int) -> None:
        """A deleted session out of every index in memory, and out of the fleet's sums."""
        core = self.core
        record = core.sessions.forget(session_id)
        core.feed.tally.turns -= turns
        core.feed.tally.closed -= 1
        core.children.forget(session_id)
        core.merging.entries.pop(session_id, None)
        for index in (core.feed.watched, core.feed.flagged, core.feed.moving):
            index.pop(session_id, None)
        if record is None:
            return
        if record.insight is not None:
            core.feed.tally.cost -= record.insight.cost()
            core.feed.tally.serial -= record.insight.busy_seconds
        if record.parent is not None:
            core.children.drop(record.parent, record)
        if record.run is not None:
            core.by_run.drop(record.run, record)
        key = (record.agent, record.agent_session_id or "")
        if core.by_agent_session.get(key) is record:
            del core.by_agent_session[key]

    def _settled_tasks(self, before: float, leaving: set[str]) -> list[str]:
        """Settled tasks made before the time whose sessions (where suggested, where run) are
        leaving, or gone, or none."""

        def gone(session: str | None) -> bool:
            return session is None or session in leaving or session not in self.core.sessions

        return [
            t.id
            for t in self.core.around.tasks.tasks.values()
            if t.status not in UNSETTLED_TASKS
            and t.created_at < before
            and gone(t.from_session)
            and gone(t.session)
        ]

    def _ended_runs(self, before: float, in_use: set[str]) -> list[str]:
        """Runs ended before the time that no session left names."""
        return [
            r.id
            for r in self.runs.runs.values()
            if r.ended_at is not None and r.ended_at < before and r.id not in in_use
        ]
