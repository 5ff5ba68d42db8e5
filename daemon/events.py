"""The event log: every change, numbered, stored, then fanned out.

`emit` is synchronous: it numbers the event, queues its row to the store and
returns, so callers that must keep order (an agent's updates arrive in
order and are handled before any await) keep it. Subscribers receive events
only after the store has committed them, in seq order, through a bounded
queue each; a subscriber that falls behind is cut off with a reason rather
than allowed to grow the daemon's memory.

A subscriber whose client keeps up is handed its events in the same turn of
the loop that committed them (its `push`); only one that is backed up, or
still replaying, waits for its pump task to be woken, a turn later.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgpack

from sessiond.daemon.store import Store
from sessiond.protocol import fast_json

log = logging.getLogger("sessiond.events")


# One packer for every row (they are made on the loop's thread): `msgpack.packb` makes a packer,
# and its 256 KiB buffer, per call, which showed in a profile of 200 turns at once.
_PACKER = msgpack.Packer(use_bin_type=True)


# Never changed once emitted: one event is shared by the store, every subscriber and the wire
# cache. Not frozen, as a frozen dataclass makes each of its fields through object.__setattr__:
# 0.85 µs an event against 0.19, ~9 events a turn.
@dataclass(slots=True)
class Event:
    seq: int
    kind: str
    time: float
    agent: str | None = None
    session: str | None = None
    turn: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def row(self) -> tuple[Any, ...]:
        return (
            self.seq,
            self.time,
            self.kind,
            self.agent,
            self.session,
            self.turn,
            _PACKER.pack(self.data),
        )

    def json(self) -> str:
        """The event as it goes on the wire (the protocol's `Event`), made once and shared by every client."""
        cached = _WIRE.get(self.seq)
        if cached is None:
            wire: dict[str, Any] = {
                "seq": self.seq,
                "kind": self.kind,
                "time": datetime.fromtimestamp(self.time, UTC).isoformat().replace("+00:00", "Z"),
            }
            for key in ("agent", "session", "turn"):
                value = getattr(self, key)
                if value is not None:
                    wire[key] = value
            wire["data"] = self.data
            cached = _WIRE[self.seq] = fast_json.dumps(wire).decode()
            global _wire_chars
            _wire_chars += len(cached)
            while len(_WIRE) > WIRE_CACHE or (_wire_chars > WIRE_CACHE_CHARS and len(_WIRE) > 1):
                _wire_chars -= len(_WIRE.popitem(last=False)[1])
        return cached

    @classmethod
    def from_row(cls, row: sqlite3.Row | tuple[Any, ...]) -> Event:
        seq, at, kind, agent, session, turn, data = tuple(row)
        return cls(seq, kind, at, agent, session, turn, msgpack.unpackb(data, raw=False))


WIRE_CACHE = 20_000  # events, and at most this many characters of them:
WIRE_CACHE_CHARS = 32 * 1024 * 1024
_WIRE: OrderedDict[int, str] = OrderedDict()
_wire_chars = 0


@dataclass(frozen=True, slots=True)
class Filter:
    sessions: frozenset[str] | None = None
    agents: frozenset[str] | None = None
    kinds: frozenset[str] | None = None

    def matches(self, event: Event) -> bool:
        if self.sessions is not None and event.session not in self.sessions:
            return False
        if self.agents is not None and event.agent not in self.agents:
            return False
        return self.kinds is None or event.kind in self.kinds

    def sql(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        for column, values in (("session", self.sessions), ("agent", self.agents), ("kind", self.kinds)):
            if values is not None:
                clauses.append(f"{column} IN ({','.join('?' * len(values))})")
                args.extend(sorted(values))
        return (" AND " + " AND ".join(clauses) if clauses else ""), args


BATCH = 500  # events in one notification at most


class SubscriberOverflow(Exception):
    pass


# Events that carry a whole state: an unsent one is dropped when a newer one
# of the same session and kind arrives, so a slow client gets the latest state
# rather than a backlog of stale ones.
SUPERSEDED = frozenset(
    {"session.plan", "session.usage", "session.changes", "session.attention", "fleet.summary"}
)


class Subscriber:
    """One client's view of the log: a queue of committed events, bounded in count and in bytes."""

    def __init__(self, event_filter: Filter, limit: int, byte_limit: int = 8 * 1024 * 1024) -> None:
        self.filter = event_filter
        self.limit = limit
        self.byte_limit = byte_limit
        self._bytes = 0  # the wire size of what is queued
        self._queue: deque[tuple[Event, int]] = deque()  # each with its wire size
        self._latest: dict[tuple[str | None, str], int] = {}
        self._wakeup = asyncio.Event()
        self.overflowed = False
        self.closed = False
        # Set by the consumer: sends what is queued now, without waiting; False when it
        # cannot (backed up, or cut off), and the pump is woken to do it instead.
        self.push: Callable[[], bool] | None = None

    def offer(self, event: Event) -> None:
        """Queue one event; `offered` ends a batch of them."""
        if self.closed or self.overflowed or not self.filter.matches(event):
            return
        size = len(event.json())
        if len(self._queue) >= self.limit or self._bytes + size > self.byte_limit:
            self.overflowed = True
            self._queue.clear()
            self._latest.clear()
            self._bytes = 0
        else:
            self._queue.append((event, size))
            self._bytes += size
            if event.kind in SUPERSEDED:
                self._latest[(event.session, event.kind)] = event.seq

    def offered(self) -> None:
        if not self._queue and not self.overflowed:
            return
        if not self.overflowed and self.push is not None:
            try:
                if self.push():
                    return
            except Exception:  # one client's failure must not stop the others' delivery
                log.exception("pushing events to a subscriber failed; its pump takes over")
        self._wakeup.set()

    def reset(self) -> None:
        """After a resync: take events again, from the next one on."""
        self.overflowed = False

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    def take(self, most: int = BATCH) -> list[Event]:
        """The events queued now, in order, at most `most` (fewer when newer states superseded some)."""
        batch: list[Event] = []
        while self._queue and len(batch) < most:
            event, size = self._queue.popleft()
            self._bytes -= size
            if event.kind in SUPERSEDED:
                key = (event.session, event.kind)
                if self._latest.get(key, event.seq) > event.seq:
                    continue  # a newer state of the same thing is queued behind it
                self._latest.pop(key, None)
            batch.append(event)
        return batch

    async def next_batch(self, most: int = BATCH) -> list[Event]:
        """The next events in order; [] once closed. Raises SubscriberOverflow when it fell behind."""
        batch: list[Event] = []
        while not batch and not self.closed:
            while not self._queue and not self.closed and not self.overflowed:
                self._wakeup.clear()
                await self._wakeup.wait()
            if self.overflowed:
                raise SubscriberOverflow(
                    f"more than {self.limit} events or {self.byte_limit} bytes were waiting unread"
                )
            batch = self.take(most)
        return batch


# The `meta` key that keeps the highest seq given, once a prune removed the event that had it.
EVENTS_HEAD = "events_head"


class EventLog:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        # The highest seq ever given: the newest stored event's, or what a prune that removed it
        # kept in `meta` (a seq is never given out twice).
        rows = store.query(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events), 0), "
            "COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0))",
            (EVENTS_HEAD,),
        )
        self.head = int(rows[0][0])
        self.committed = self.head
        self._subscribers: set[Subscriber] = set()
        self._pending: list[Event] = []
        self._flushing = False
        # Emitted and queued to the store, not yet known to be committed: delivered after the commit
        # that stores them (at once, normally; once the store takes writes again, when it said no).
        self._held: list[Event] = []
        # Who waits for what has been emitted to be stored (`stored`): the seq each waits for.
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        store.on_commit.append(self._release)
        store.on_refused.append(lambda: self._wake(math.inf))  # (an outage holds nobody up)

    def emit(
        self,
        kind: str,
        *,
        agent: str | None = None,
        session: str | None = None,
        turn: str | None = None,
        **data: Any,
    ) -> Event:
        self.head += 1
        event = Event(self.head, kind, self._clock(), agent, session, turn, data)
        self._pending.append(event)
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._flush)
        return event

    def emit_many(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        for kind, fields in events:
            self.emit(kind, **fields)

    def _flush(self) -> None:
        """Store every event emitted in this turn of the loop, then fan them out."""
        batch, self._pending = self._pending, []
        self._flushing = False
        rows = [event.row() for event in batch]

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", rows)

        # Committed here and now, not a turn of the loop later: clients see an
        # event one turn after it happened, and never before it is stored.
        self._store.write(op, wait=False)
        self._held.extend(batch)
        self._store.commit_now()

    def _release(self) -> None:
        if self._held:
            batch, self._held = self._held, []
            self._deliver(batch)
        self._wake(self.committed)

    def _wake(self, upto: float) -> None:
        """Let go of those waiting (`stored`) for events up to `upto`."""
        if not self._waiting:
            return
        still = []
        for seq, future in self._waiting:
            if seq > upto:
                still.append((seq, future))
            elif not future.done():
                future.set_result(None)
        self._waiting = still

    async def stored(self) -> None:
        """Wait until every event emitted so far is stored (a turn's answer waits so: a read of
        the log after it finds the turn). At once when they are; not while the store says no
        (they are kept, and come once it takes them: nobody is held up by an outage)."""
        seq = self.head
        if self.committed >= seq or self._store.trouble is not None or self._store.closed:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((seq, future))
        if self._pending:  # (not handed to the store yet: they are, at the end of this turn of the loop)
            asyncio.get_running_loop().call_soon(self._store.awaited)
        else:
            self._store.awaited()
        await future

    def _deliver(self, batch: list[Event]) -> None:
        # The writer commits in queue order, so batches arrive here in seq order.
        self.committed = batch[-1].seq
        for subscriber in list(self._subscribers):
            for event in batch:
                subscriber.offer(event)
            subscriber.offered()

    def subscribe(self, event_filter: Filter, *, limit: int = 10_000) -> Subscriber:
        subscriber = Subscriber(event_filter, limit)
        self._subscribers.add(subscriber)
        return subscriber

    def watched(self) -> bool:
        """Somebody is subscribed: what is emitted is waited for."""
        return bool(self._subscribers)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        subscriber.close()
        self._subscribers.discard(subscriber)

    async def replay(self, after: int, upto: int, event_filter: Filter, limit: int = 5000) -> list[Event]:
        """Stored events with after < seq <= upto that match, oldest first, at most `limit`."""
        events, _ = await self.replay_page(after, upto, event_filter, most=limit)
        return events

    async def replay_page(
        self, after: int, upto: int, event_filter: Filter, *, most: int, max_bytes: int | None = None
    ) -> tuple[list[Event], bool]:
        """Like `replay`, and stopping too once the events read hold `max_bytes` of data (at least
        one is read); with whether more events of the range may follow."""
        where, args = event_filter.sql()

        def read(conn: sqlite3.Connection) -> tuple[list[Event], bool]:
            rows = conn.execute(
                f"SELECT seq, time, kind, agent, session, turn, data FROM events "
                f"WHERE seq > ? AND seq <= ?{where} ORDER BY seq LIMIT ?",
                [after, upto, *args, most],
            )
            events: list[Event] = []
            size = 0
            for row in rows:
                events.append(Event.from_row(row))
                size += len(row[6])
                if max_bytes is not None and size >= max_bytes:
                    return events, True
            return events, len(events) == most

        return await self._store.read(read)
