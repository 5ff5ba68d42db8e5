"""The async client: ``aconnect`` → ``AsyncDaemon`` → ``AsyncAgent`` → ``AsyncSession``.

This module is the implementation; ``sessiond.client.sync`` drives this very
code on a private event loop, so the two can never drift apart.

Handles are cheap views: an ``AsyncAgent`` or ``AsyncSession`` is a name or
an id plus the last info the daemon sent about it (``.info``); every method
asks the daemon. Cleanup that talks to the daemon (cancelling a turn,
unsubscribing) is shielded from a second cancellation and bounded in time,
and cancellation itself always propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

from pydantic import BaseModel, ValidationError

from sessiond.client import launch
from sessiond.client.connection import Connection
from sessiond.client.errors import (
    AgentExists,
    AgentNotFound,
    ConnectionLost,
    FolderGone,
    InvalidParams,
    ProtocolError,
    current_folder,
)
from sessiond.protocol import methods as m
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.models import (
    AgentInfo,
    AgentList,
    AgentOptions,
    Answered,
    BroadcastResult,
    CancelResult,
    DaemonStatus,
    Event,
    EventKind,
    Fleet,
    MergeEntry,
    MergeList,
    PermissionList,
    PermissionRequestParams,
    PruneResult,
    Removed,
    RunInfo,
    RunList,
    RunOutcome,
    SessionControls,
    SessionInfo,
    SessionOpenResult,
    SessionPage,
    SessionStatus,
    SideResult,
    Snapshot,
    StopResult,
    Subscription,
    TaskInfo,
    TaskList,
    ThreadReport,
    ThreadReports,
    Transcript,
    TreeNode,
    TurnResult,
)
from sessiond.protocol.version import VERSION

log = logging.getLogger(__name__)

Reply = TurnResult
"""The answer to a prompt: the reply text, the stop reason, usage and context fill."""

StrPath = str | os.PathLike[str]
R = TypeVar("R", bound=BaseModel)

CLIENT_NAME = "sessiond-python"
# Cleanup requests (cancel a turn, unsubscribe, shut down) wait this long at most.
CLEANUP_TIMEOUT = 5.0
# A turn's answer may overtake its last events; wait this long for `turn.ended` after it.
ENDED_GRACE = 5.0
PAGE_SIZE = 1000
MERGE_DONE = ("merged", "failed", "cancelled")
# Events of subscriptions not yet claimed (their notification overtook the answer to
# events/subscribe) are kept up to this many.
EARLY_EVENTS_LIMIT = 10_000


def _validation_summary(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "params"
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


def _params(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Params as sent: checked against the method's model first, so a typo names its field.

    A None argument means "not given" (the daemon applies its default), unless
    the field is required, as ``optionId`` is, where null is a value.
    """
    model_type = m.METHODS[method].params
    fields = model_type.model_fields
    given = {k: v for k, v in params.items() if v is not None or (k in fields and fields[k].is_required())}
    try:
        model = model_type.model_validate(given)
    except ValidationError as e:
        raise InvalidParams(ErrorCode.INVALID_PARAMS, f"{method}: {_validation_summary(e)}") from None
    # exclude_unset: an update sends only what was given, so the daemon's merge keeps the rest.
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _run_folder() -> str:
    """Where a run says it ran: the current folder, or, deleted, the path the shell had for it."""
    try:
        return current_folder()
    except FolderGone:
        said = os.environ.get("PWD", "")
        return said if os.path.isabs(said) else "/"


def _absolute(root: StrPath | None) -> str | None:
    # Relative roots mean the caller's directory, not the daemon's.
    if root is None:
        return None
    path = os.fspath(root)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(current_folder(), path))


def _new_turn_id() -> str:
    return uuid.uuid4().hex


def _session_id(session: AsyncSession | str) -> str:
    return session if isinstance(session, str) else session.id


# ---------------------------------------------------------------- connecting


class _Connecting:
    """What ``aconnect`` returns: await it, or use it as ``async with``."""

    def __init__(self, socket: StrPath | None, start: bool, timeout: float, run: str | None) -> None:
        self._args = (socket, start, timeout, run)
        self._daemon: AsyncDaemon | None = None

    def __await__(self) -> Generator[Any, None, AsyncDaemon]:
        return _open_daemon(*self._args).__await__()

    async def __aenter__(self) -> AsyncDaemon:
        self._daemon = await _open_daemon(*self._args)
        return self._daemon

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._daemon is not None:
            await self._daemon.aclose(outcome_of(error))


def aconnect(
    socket: StrPath | None = None,
    *,
    start: bool = True,
    timeout: float = launch.START_TIMEOUT,
    run: str | None = None,
) -> _Connecting:
    """Connect to the daemon at ``socket`` (default: ``sessiond.protocol.paths.socket_path()``).

    When nothing accepts there and ``start`` is true, a daemon is started in
    the background and awaited for up to ``timeout`` seconds. Use it as
    ``async with aconnect() as daemon:`` or ``daemon = await aconnect()``
    (then ``await daemon.aclose()``).

    With ``run="name"`` the connection declares a run (the command line is
    ``sys.argv``, the directory the current one): every session it opens
    carries the run, and closing the client ends it: ``completed`` when the
    ``async with`` block ends normally (or on ``aclose()``), ``failed`` when
    an exception leaves it, ``stopped`` when the task is cancelled (or on
    KeyboardInterrupt). See ``sessiond runs``.
    """
    return _Connecting(socket, start, timeout, run)


def outcome_of(error: BaseException | None) -> RunOutcome:
    """How a run that ended with ``error`` (None: none) went: a run ended by hand reads as stopped."""
    if error is None:
        return "completed"
    if isinstance(error, KeyboardInterrupt | asyncio.CancelledError):
        return "stopped"
    if isinstance(error, SystemExit):
        if error.code in (None, 0):
            return "completed"
        return "stopped" if error.code == 130 else "failed"
    return "failed"


async def _open_daemon(
    socket: StrPath | None, start: bool, timeout: float, run: str | None = None
) -> AsyncDaemon:
    reader, writer, path = await launch.open_streams(socket, start=start, timeout=timeout)
    connection = Connection.open(reader, writer, peer=str(path))
    try:
        result = await connection.request(
            "initialize",
            {
                "processId": os.getpid(),
                "clientInfo": {"name": CLIENT_NAME, "version": VERSION},
                "capabilities": {},
                "initializationOptions": {},
            },
        )
        await connection.notify("initialized", {})
    except BaseException:
        await connection.close()
        raise
    if not isinstance(result, dict):
        await connection.close()
        raise ProtocolError(f"the daemon at {path} answered initialize with {result!r:.200}")
    daemon = AsyncDaemon(connection, path, result)
    if run is not None:
        try:
            await daemon.declare_run(run)
        except BaseException:
            await daemon.aclose()
            raise
    return daemon


# ---------------------------------------------------------------- events


class _Wake:
    """Put in an inbox to wake its reader without an event."""


_WAKE = _Wake()


class _Control:
    """What a notification says besides its events.

    ``through``: every matching event up to this seq has been sent (or superseded).
    ``resync``: this client fell behind, and events up to ``resync["head"]`` were
    replaced by a snapshot of the state. ``overflow``: this client fell behind, and
    the daemon ended the subscription; subscribe again from the last seq seen.
    """

    def __init__(self, *, through: Any = None, resync: Any = None, overflow: Any = None) -> None:
        self.through = through if isinstance(through, int) else None
        self.resync = resync if isinstance(resync, dict) else None
        self.overflow = str(overflow) if overflow else None


_Item = Event | _Wake | _Control | ConnectionLost


class _Inbox:
    """What arrives for one subscription, in order, for one reader."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()

    def put(self, item: _Item) -> None:
        self._queue.put_nowait(item)

    def wake(self, *_: object) -> None:
        self._queue.put_nowait(_WAKE)

    async def get(self) -> Event | _Wake | _Control:
        """The next item; raises ConnectionLost once the connection has ended."""
        item = await self._queue.get()
        if isinstance(item, ConnectionLost):
            self._queue.put_nowait(item)  # every later get fails the same way
            raise ConnectionLost(str(item)) from item.__cause__
        return item


class _EventRouter:
    """Hands what each ``events/notify`` carries to the inbox of its subscription."""

    def __init__(self, connection: Connection) -> None:
        self._inboxes: dict[str, _Inbox] = {}
        # A notification may overtake the answer to its events/subscribe: keep it until claimed.
        self._early: dict[str, list[_Item]] = {}
        self._early_count = 0
        self._lost: ConnectionLost | None = None
        connection.on_notification(m.EVENTS_NOTIFY, self._notified)
        connection.on_close(self._closed)

    def claim(self, subscription: str, inbox: _Inbox) -> None:
        early = self._early.pop(subscription, [])
        self._early_count -= len(early)
        for item in early:
            inbox.put(item)
        if self._lost is not None:
            inbox.put(self._lost)
        self._inboxes[subscription] = inbox

    def release(self, subscription: str) -> None:
        self._inboxes.pop(subscription, None)

    def _notified(self, params: Any) -> None:
        if not (
            isinstance(params, dict)
            and isinstance(params.get("subscription"), str)
            and isinstance(params.get("events"), list)
        ):
            raise ProtocolError(
                f"{m.EVENTS_NOTIFY} without a subscription and a list of events: {params!r:.200}"
            )
        items: list[_Item] = []
        if params.get("resync") is not None:
            items.append(_Control(resync=params["resync"]))  # the events after it follow
        for raw in params["events"]:
            try:
                items.append(Event.model_validate(raw))
            except ValidationError as e:
                # A newer daemon's event (a kind this client does not know): skip it, keep the rest.
                log.warning(
                    "skipping an event this client cannot read (%s): %.200r", _validation_summary(e), raw
                )
        if params.get("through") is not None or params.get("overflow"):
            items.append(_Control(through=params.get("through"), overflow=params.get("overflow")))
        inbox = self._inboxes.get(params["subscription"])
        if inbox is not None:
            for item in items:
                inbox.put(item)
            return
        self._early.setdefault(params["subscription"], []).extend(items)
        self._early_count += len(items)
        while self._early_count > EARLY_EVENTS_LIMIT:
            dropped = self._early.pop(next(iter(self._early)))
            self._early_count -= len(dropped)
            log.warning("dropped %d events of a subscription nobody claimed", len(dropped))

    def _closed(self, lost: ConnectionLost) -> None:
        self._lost = lost
        for inbox in self._inboxes.values():
            inbox.put(lost)


class _Feed:
    """One subscription that outlives overflow: its events in seq order, each once.

    When the daemon ends the subscription because this client fell behind, the
    feed subscribes again from the last seq it saw, as the protocol asks.
    Use it as ``async with``: it unsubscribes on the way out.
    """

    def __init__(
        self,
        daemon: AsyncDaemon,
        filters: dict[str, Any],
        *,
        until_head: bool = False,
        run: str | None = None,
    ) -> None:
        self._daemon = daemon
        self._filters = filters
        self.inbox = _Inbox()
        self._subscription: str | None = None
        self._start: int | None = filters.get("since")
        self._seen: int | None = None  # the newest seq handed out, or known to be past
        self.gapped = False  # whether the daemon skipped events, replacing them with a snapshot
        self._opened = False
        self._until_head = until_head
        self._until: int | None = None  # with until_head: the head when it subscribed
        self._run = run
        self.head: int | None = None  # the newest seq when it first subscribed
        # The state as of the subscription (when asked for with `snapshot`), replaced by each resync.
        self.snapshot: Snapshot | None = None
        self.closed = False  # closed by its owner: a reader waiting in get() gets None and stops

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Subscribe (once; later calls do nothing)."""
        if self._opened:
            return
        if self._run is not None:
            # The run's sessions (as of now): its events are theirs.
            await self._daemon.get_run(self._run)  # RunNotFound, rather than silence
            of_run = [
                s.id for s in await self._daemon.sessions(run=self._run, include_closed=True, brief=True)
            ]
            wanted = self._filters.get("sessions")
            sessions = [s for s in of_run if wanted is None or s in wanted]
            self._filters = {**self._filters, "sessions": sessions}
            if not sessions:
                self._opened = True
                return  # nothing of it to read (with until_head: ended at once)
        self._opened = True
        await self._subscribe(self._start)

    async def close(self) -> None:
        """Unsubscribe, if subscribed; a reader waiting for the next event is woken, and ends."""
        if not self.closed:
            self.closed = True
            self.inbox.wake()
        await self._unsubscribe()

    @property
    def ended(self) -> bool:
        """Closed; or with ``until_head``, every matching event up to the head handed out."""
        if self.closed:
            return True
        if not self._until_head or not self._opened:
            return False
        if self._until is None:
            return True  # nothing to read (a run without sessions)
        at = self._seen if self._seen is not None else self._start
        return at is not None and at >= self._until

    async def get(self) -> Event | None:
        """The next event, or None when the inbox was woken or (with ``until_head``) the head is reached."""
        while True:
            if self.ended:
                return None
            item = await self.inbox.get()
            if isinstance(item, _Wake):
                return None
            if isinstance(item, _Control):
                await self._follow(item)
                continue
            if self._seen is not None and item.seq <= self._seen:
                continue  # already handed out before a resubscription
            self._seen = item.seq
            return item

    async def _follow(self, control: _Control) -> None:
        if control.resync is not None:
            # Events up to the snapshot's head were superseded: some of them will never come.
            self.gapped = True
            log.info("the daemon resynchronised a subscription this client fell behind on")
            head = control.resync.get("head")
            if isinstance(head, int):
                self._seen = max(self._seen or 0, head)
            try:
                self.snapshot = Snapshot.model_validate(control.resync)
            except ValidationError as e:
                log.warning("a resync snapshot this client cannot read: %s", _validation_summary(e))
        if control.through is not None:
            self._seen = max(self._seen or 0, control.through)
        if control.overflow is not None:
            log.info("resubscribing after the daemon ended a subscription: %s", control.overflow)
            await self._unsubscribe()
            await self._subscribe(self._seen if self._seen is not None else self._start)

    async def _subscribe(self, since: int | None) -> None:
        daemon = self._daemon
        filters = {**self._filters, "since": since}
        if self.head is not None:
            # Resubscribing after an overflow: the replay brings the state forward, no snapshot needed.
            filters.pop("snapshot", None)
        subscribed = await daemon._call(m.EVENTS_SUBSCRIBE, Subscription, **filters)
        daemon._router.claim(subscribed.subscription, self.inbox)
        self._subscription = subscribed.subscription
        if self.head is None:
            self.head = subscribed.head
            if self._until_head:
                self._until = subscribed.head
        if subscribed.snapshot is not None:
            self.snapshot = subscribed.snapshot
        if self._start is None:
            self._start = subscribed.head

    async def _unsubscribe(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is None:
            return
        daemon = self._daemon
        try:
            await daemon._cleanup(daemon._call(m.EVENTS_UNSUBSCRIBE, Removed, subscription=subscription))
        finally:
            daemon._router.release(subscription)


class _AsyncStream:
    """An async iterator over an inner async generator, closable, usable with ``async with``.

    Prefer ``async with`` (or ``contextlib.aclosing``): it closes the stream at
    once when the loop is left early. Otherwise the stream is closed when it
    is garbage-collected. Closed from another task, it ends the read under way
    in the task iterating it.
    """

    def __init__(self) -> None:
        self._items: AsyncGenerator[Event, None] = self._run()
        self._stepping = False  # a task is inside a step (awaiting the next event)

    def _run(self) -> AsyncGenerator[Event, None]:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        self._stepping = True
        try:
            return await self._items.__anext__()
        finally:
            self._stepping = False

    async def _open(self) -> None:
        """Start the stream's work ahead of the first step (``async with`` calls it)."""

    async def aclose(self) -> None:
        if self._stepping:
            # Another task is inside a step (a reader being cancelled, or waiting for the next
            # event): the generator cannot be closed under it; closing the feed ends that step.
            return
        await self._items.aclose()

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncEventStream(_AsyncStream):
    """Every event matching a subscription's filters, in seq order, until closed.

    ``async with`` subscribes on entry, so nothing that happens inside the
    block is missed; a stream iterated without it subscribes at its first step.
    Raises ``ConnectionLost`` when the daemon goes away. A stream from
    ``trace()`` ends by itself once it has given every matching event up to
    the head (the newest event when it subscribed).
    """

    def __init__(
        self,
        daemon: AsyncDaemon,
        filters: dict[str, Any],
        *,
        until_head: bool = False,
        run: str | None = None,
    ) -> None:
        self._feed = _Feed(daemon, filters, until_head=until_head, run=run)
        super().__init__()

    @property
    def head(self) -> int | None:
        """The seq of the newest event when the stream subscribed; None before."""
        return self._feed.head

    @property
    def snapshot(self) -> Snapshot | None:
        """With ``snapshot=True``: the state of the matching sessions and the fleet as of ``head``;
        replaced by a newer one when the daemon resynchronises a client that fell behind."""
        return self._feed.snapshot

    async def _open(self) -> None:
        await self._feed.open()

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self._feed.close()  # when the generator never started, its cleanup never runs

    async def _run(self) -> AsyncGenerator[Event, None]:
        async with self._feed as feed:
            while not feed.ended:
                event = await feed.get()
                if event is not None:
                    yield event


class AsyncTurnStream(_AsyncStream):
    """The events of one turn as they happen, then the turn's ``reply``.

    Yields the turn's events (``turn.queued``, ``turn.started``, ``turn.chunk``
    with ``data["text"]``, ..., ``turn.ended``); once iteration ends, ``reply``
    holds the answer. If the turn failed, the last step raises the error
    (``AgentError``, ...). Closing the stream cancels the turn: leaving an
    ``async with`` block, or ``aclose()``. A ``break`` out of a bare ``async for``
    does not close it (Python closes no async iterator a loop leaves): the turn
    goes on until the stream is garbage-collected. So iterate inside
    ``async with session.astream(p) as stream:`` (the sync twin's ``for`` closes
    it on a ``break``).
    """

    def __init__(self, session: AsyncSession, prompt: str) -> None:
        self._session = session
        self._prompt = prompt
        self._turn_id = _new_turn_id()
        self._reply: Reply | None = None
        self._feed = _Feed(session._daemon, {"sessions": [session.id]})
        super().__init__()

    @property
    def session(self) -> AsyncSession:
        return self._session

    @property
    def turn_id(self) -> str:
        """The turn's id, chosen by this client: the ``turn`` of its events."""
        return self._turn_id

    @property
    def reply(self) -> Reply | None:
        """The turn's answer, once the iteration has ended; None before, or if it failed."""
        return self._reply

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self._feed.close()  # ends a step another task waits in (and cancels the turn)

    async def _run(self) -> AsyncGenerator[Event, None]:
        session, daemon = self._session, self._session._daemon
        # Subscribe before prompting, so no event of the turn can be missed.
        async with self._feed as feed:
            prompt = asyncio.ensure_future(
                daemon._call(
                    m.SESSION_PROMPT,
                    TurnResult,
                    session=session.id,
                    prompt=self._prompt,
                    turn_id=self._turn_id,
                )
            )
            prompt.add_done_callback(feed.inbox.wake)
            daemon._turns[self.turn_id] = session.id
            try:
                loop = asyncio.get_running_loop()
                grace_until: float | None = None
                while True:
                    if feed.closed:
                        return  # closed by another task while a step waited: the turn is cancelled
                    if prompt.done():
                        if prompt.cancelled() or prompt.exception() is not None or feed.gapped:
                            break  # failed; or ended, and its last events may have been superseded
                        grace_until = grace_until or loop.time() + ENDED_GRACE
                    try:
                        async with asyncio.timeout_at(grace_until):
                            event = await feed.get()
                    except TimeoutError:
                        break
                    if event is None or event.turn != self.turn_id:
                        continue
                    yield event
                    if event.kind is EventKind.TURN_ENDED:
                        break
                self._reply = await prompt
            finally:
                daemon._turns.pop(self.turn_id, None)
                if not prompt.done():
                    prompt.cancel()  # sends $/cancelRequest
                    await daemon._cleanup(
                        daemon._call(m.SESSION_CANCEL, CancelResult, session=session.id, turn_id=self.turn_id)
                    )
                    await asyncio.wait([prompt])
                if not prompt.cancelled():
                    prompt.exception()  # retrieved: raised above, or of no interest after a break


# ---------------------------------------------------------------- handles


class AsyncDaemon:
    """A connection to the daemon. Close it with ``aclose()`` (or use ``async with``)."""

    def __init__(self, connection: Connection, socket: Path, initialize_result: dict[str, Any]) -> None:
        self._connection = connection
        self._socket = socket
        self._server_info: dict[str, Any] = dict(initialize_result.get("serverInfo") or {})
        self._router = _EventRouter(connection)
        self._turns: dict[str, str] = {}  # turn id -> session id, for turns awaited now
        self._cleanups: set[asyncio.Task[Any]] = set()
        self._closing: asyncio.Task[None] | None = None
        self._run: RunInfo | None = None  # the run this connection declared, as last heard of

    def __repr__(self) -> str:
        return f"<AsyncDaemon {self._socket}{' closed' if self.closed else ''}>"

    @property
    def socket(self) -> Path:
        return self._socket

    @property
    def server_info(self) -> dict[str, Any]:
        """The daemon's ``serverInfo`` from the handshake: name and version."""
        return self._server_info

    @property
    def closed(self) -> bool:
        return self._connection.closed

    @property
    def run(self) -> RunInfo | None:
        """The run this connection declared (as the daemon last described it), or None."""
        return self._run

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose(outcome_of(error))

    # ------------------------------------------------------------ public

    async def agent(
        self,
        name: str = "demo",
        *,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> AsyncAgent:
        """The agent called ``name``: created if it does not exist and ``command`` is given,
        updated if ``command``, ``env`` or any of ``options`` (fields of ``AgentOptions``)
        differ from its settings. Raises ``AgentNotFound`` if it does not exist and no
        ``command`` is given.
        """
        wanted = self._agent_options(options)
        try:
            info = await self._call(m.AGENT_GET, AgentInfo, name=name)
        except AgentNotFound:
            if command is None:
                raise
            try:
                info = await self._call(
                    m.AGENT_CREATE,
                    AgentInfo,
                    name=name,
                    command=list(command),
                    env=dict(env or {}),
                    options=options,
                )
                return AsyncAgent(self, info)
            except AgentExists:  # another client created it meanwhile
                info = await self._call(m.AGENT_GET, AgentInfo, name=name)
        changes: dict[str, Any] = {}
        if command is not None and list(command) != info.command:
            changes["command"] = list(command)
        if env is not None:
            changes["env"] = dict(env)  # the daemon shows only the keys, so values cannot be compared
        changed = {
            key: options[key]
            for key in wanted.model_fields_set
            if getattr(wanted, key) != getattr(info.options, key)
        }
        if changed:
            changes["options"] = changed
        if changes:
            info = await self._call(m.AGENT_UPDATE, AgentInfo, name=name, **changes)
        return AsyncAgent(self, info)

    async def agents(self) -> list[AsyncAgent]:
        """Every agent, the built-in ``demo`` first."""
        listing = await self._call(m.AGENT_LIST, AgentList)
        return [AsyncAgent(self, info) for info in listing.agents]

    async def status(self) -> DaemonStatus:
        return await self._call(m.DAEMON_STATUS, DaemonStatus)

    async def stop(self) -> StopResult:
        """Stop the daemon as SIGTERM does (its turns are cancelled, its agents stopped); returns
        once it has closed this connection, at the end of its stop. This client is closed then."""
        stopping = await self._call(m.DAEMON_STOP, StopResult)
        await self._connection.wait_closed()
        return stopping

    async def fleet(self) -> Fleet:
        """Every session at a glance: counts by status, attention, cost."""
        return await self._call(m.FLEET_SUMMARY, Fleet)

    async def sessions(
        self,
        *,
        agent: str | None = None,
        status: SessionStatus | str | Iterable[SessionStatus | str] | None = None,
        include_closed: bool = False,
        **filters: Any,
    ) -> list[AsyncSession]:
        """Every session matching the filters (all pages); ``filters`` are further fields
        of ``SessionListParams`` (``sort``, ``attention``, ...)."""
        statuses = [status] if isinstance(status, str) else None if status is None else list(status)
        found: list[AsyncSession] = []
        cursor: str | None = None
        while True:
            page = await self._call(
                m.SESSION_LIST,
                SessionPage,
                agent=agent,
                status=statuses,
                include_closed=include_closed,
                cursor=cursor,
                limit=PAGE_SIZE,
                **filters,
            )
            found.extend(AsyncSession(self, info) for info in page.sessions)
            if not page.next_cursor:
                return found
            cursor = page.next_cursor

    async def session(self, id: str) -> AsyncSession:
        """The session with this id; raises ``SessionNotFound``."""
        return AsyncSession(self, await self._call(m.SESSION_GET, SessionInfo, session=id))

    async def permissions(self, session: str | None = None) -> list[PermissionRequestParams]:
        """The agents' permission requests waiting for an answer (only ``session``'s, if given),
        oldest first: each with its ``permission`` id, tool call and options."""
        waiting = await self._call(m.PERMISSION_LIST, PermissionList, session=session)
        return waiting.permissions

    async def answer_permission(self, permission: str, option_id: str | None) -> bool:
        """Answer an agent's permission request (the id from a ``permission.asked`` event)
        with one of its options' ids, or None for "cancelled". The first answer wins."""
        answer = await self._call(m.PERMISSION_ANSWER, Answered, permission=permission, option_id=option_id)
        return answer.answered

    def events(
        self,
        *,
        since: int | None = None,
        sessions: Sequence[str] | None = None,
        agents: Sequence[str] | None = None,
        kinds: Sequence[EventKind | str] | None = None,
        snapshot: bool = False,
    ) -> AsyncEventStream:
        """Events as they happen (after replaying those after seq ``since``, if given).

        With ``snapshot=True`` the stream's ``snapshot`` holds the state of the matching
        sessions and the fleet as of its ``head``, once it has subscribed (``async with``).
        """
        filters = {"since": since, "sessions": sessions, "agents": agents, "kinds": kinds}
        chosen = {key: value for key, value in filters.items() if value is not None}
        if snapshot:
            chosen["snapshot"] = True
        return AsyncEventStream(self, chosen)

    def trace(
        self,
        *,
        since: int = 0,
        sessions: Sequence[str] | None = None,
        agents: Sequence[str] | None = None,
        kinds: Sequence[EventKind | str] | None = None,
        run: str | None = None,
        follow: bool = False,
    ) -> AsyncEventStream:
        """The stored log: every matching event after seq ``since`` up to the newest one, then
        the stream ends; with ``follow``, it goes on with new events until closed.

        ``run`` keeps the events of the sessions that run opened (as it has them when the
        stream subscribes); an unknown run raises ``RunNotFound``.
        """
        filters = {"since": since, "sessions": sessions, "agents": agents, "kinds": kinds}
        chosen = {key: value for key, value in filters.items() if value is not None}
        return AsyncEventStream(self, chosen, until_head=not follow, run=run)

    # ------------------------------------------------------------ runs

    async def declare_run(
        self, name: str, *, argv: Sequence[str] | None = None, cwd: StrPath | None = None
    ) -> RunInfo:
        """Declare this connection's run (``argv`` defaults to ``sys.argv``, ``cwd`` to the current
        directory): the sessions it opens from now on carry it. ``aconnect(run=name)`` does this."""
        self._run = await self._call(
            m.RUN_DECLARE,
            RunInfo,
            name=name,
            argv=list(sys.argv if argv is None else argv),
            cwd=_absolute(cwd) if cwd is not None else _run_folder(),
        )
        return self._run

    async def end_run(self, outcome: RunOutcome = "completed") -> RunInfo:
        """End this connection's run: ``completed``, ``failed``, or ``stopped`` (by hand)."""
        self._run = await self._call(m.RUN_END, RunInfo, outcome=outcome)
        return self._run

    async def prune(self, closed_before: datetime | timedelta, *, dry_run: bool = False) -> PruneResult:
        """Remove from the store the sessions closed before a time (a datetime; a timedelta: that
        long ago), with their turns, events, settled tasks and the runs left with no session.
        Sessions that something open still needs stay (``kept``); with ``dry_run``, only count."""
        if isinstance(closed_before, timedelta):
            closed_before = datetime.now(UTC) - closed_before
        return await self._call(m.SESSION_PRUNE, PruneResult, closed_before=closed_before, dry_run=dry_run)

    async def runs(self) -> list[RunInfo]:
        """Every run, oldest first, each with its wall time beside its serial time."""
        return (await self._call(m.RUN_LIST, RunList)).runs

    async def get_run(self, id: str) -> RunInfo:
        """One run; raises ``RunNotFound``."""
        return await self._call(m.RUN_GET, RunInfo, run=id)

    # ------------------------------------------------------------ merges, tasks, threads

    async def merges(self) -> list[MergeEntry]:
        """The merge queues: every merge waiting (with its position), running or done."""
        return (await self._call(m.MERGE_LIST, MergeList)).entries

    async def tasks(
        self, *, agent: str | None = None, status: str | Iterable[str] | None = None
    ) -> list[TaskInfo]:
        """Suggested tasks, newest first: of one agent's inbox, in some states (``suggested``, ...)."""
        statuses = [status] if isinstance(status, str) else None if status is None else list(status)
        return (await self._call(m.TASK_LIST, TaskList, agent=agent, status=statuses)).tasks

    async def suggest_task(
        self,
        title: str,
        prompt: str,
        *,
        agent: str | None = None,
        why: str | None = None,
        placement: str | None = None,
        root: StrPath | None = None,
        from_session: AsyncSession | str | None = None,
    ) -> TaskInfo:
        """Put a task in an agent's inbox (default: the agent of ``from_session``)."""
        return await self._call(
            m.TASK_SUGGEST,
            TaskInfo,
            agent=agent,
            title=title,
            prompt=prompt,
            why=why,
            placement=placement,
            root=_absolute(root),
            from_session=_session_id(from_session) if from_session is not None else None,
        )

    async def accept_task(self, task: str) -> TaskInfo:
        """Accept a suggested task: it runs in a session of its own (``TaskInfo.session``),
        once the agent's ``max_running_tasks`` allow. Raises ``TaskNotFound``."""
        return await self._call(m.TASK_ACCEPT, TaskInfo, task=task)

    async def dismiss_task(self, task: str, reason: str) -> TaskInfo:
        """Dismiss a suggested task, saying why."""
        return await self._call(m.TASK_DISMISS, TaskInfo, task=task, reason=reason)

    async def broadcast(
        self,
        prompt: str,
        *,
        sessions: Iterable[AsyncSession | str] | None = None,
        threads_of: AsyncSession | str | None = None,
    ) -> list[str]:
        """Queue ``prompt`` as the next turn of each session (or of every thread of the coordinator
        ``threads_of``), without waiting for the turns; the ids of the sessions it was queued on."""
        result = await self._call(
            m.SESSION_BROADCAST,
            BroadcastResult,
            prompt=prompt,
            sessions=None if sessions is None else [_session_id(s) for s in sessions],
            threads_of=None if threads_of is None else _session_id(threads_of),
        )
        return result.sessions

    async def wait_threads(
        self, threads: Iterable[AsyncSession | str], *, timeout: float | None = None
    ) -> list[ThreadReport]:
        """Wait until every thread is done; their reports, in the order given. With ``timeout``
        (seconds), the reports as they are when it runs out (``done`` says which ended)."""
        ids = [_session_id(t) for t in threads]
        return (await self._call(m.THREAD_WAIT, ThreadReports, threads=ids, timeout=timeout)).reports

    async def aclose(self, outcome: RunOutcome | None = None) -> None:
        """Cancel this client's outstanding turns, end its run (with ``outcome``, default
        ``completed``), say goodbye, close the connection. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(outcome or "completed"))
        await asyncio.shield(self._closing)

    # ------------------------------------------------------------ internal

    async def _close(self, outcome: RunOutcome) -> None:
        connection = self._connection
        try:
            if not connection.closed:
                await asyncio.gather(
                    *(
                        self._cleanup(
                            self._call(m.SESSION_CANCEL, CancelResult, session=session, turn_id=turn)
                        )
                        for turn, session in list(self._turns.items())
                    )
                )
                if self._cleanups:
                    await asyncio.wait(self._cleanups, timeout=CLEANUP_TIMEOUT)
                if self._run is not None and self._run.outcome is None:
                    await self._cleanup(self.end_run(outcome))
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(CLEANUP_TIMEOUT):
                        await connection.request("shutdown")
                        await connection.notify("exit")
        finally:
            await connection.close()

    async def _call(self, method: str, result: type[R], /, **params: Any) -> R:
        """Send ``method`` with ``params`` (by Python field names) and return its result model."""
        assert m.METHODS[method].result is result, f"{method} answers {m.METHODS[method].result.__name__}"
        raw = await self._connection.request(method, _params(method, params))
        try:
            return result.model_validate(raw)
        except ValidationError as e:
            raise ProtocolError(
                f"the daemon's answer to {method} does not fit this client ({_validation_summary(e)}); "
                "are the daemon and the client the same version?"
            ) from None

    async def _cleanup(self, step: Awaitable[Any]) -> None:
        """Await a cleanup step: shielded, bounded in time, its failure logged and not raised.

        A second cancellation still propagates; the step then finishes on its
        own, owned by this daemon handle, which awaits it when closing.
        """
        if self._connection.closed:
            if asyncio.iscoroutine(step):
                step.close()
            return
        task = asyncio.ensure_future(step)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        try:
            await asyncio.wait_for(asyncio.shield(task), CLEANUP_TIMEOUT)
        except (TimeoutError, ConnectionLost) as e:
            log.debug("cleanup step did not finish: %s", e)
        except Exception as e:
            log.debug("cleanup step failed: %r", e)

    @staticmethod
    def _agent_options(options: Mapping[str, Any]) -> AgentOptions:
        try:
            return AgentOptions.model_validate(dict(options))
        except ValidationError as e:
            raise InvalidParams(
                ErrorCode.INVALID_PARAMS, f"agent options: {_validation_summary(e)}"
            ) from None


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands: its prompts counted by status."""

    total: int
    waiting: int = 0  # not sent yet (held back by max_concurrency)
    running: int = 0  # sent: queued in the daemon or working
    done: int = 0  # answered
    failed: int = 0  # failed (AgentError, ...)
    stopped: int = 0  # answered with stop reason `cancelled`
    elapsed: float = 0.0  # seconds since the batch started
    asking: int = 0  # permission requests of its sessions waiting for a person (of the running)

    @property
    def landed(self) -> int:
        """Prompts answered one way or another."""
        return self.done + self.failed + self.stopped


class _BatchCounter:
    def __init__(self, total: int, report: Callable[[BatchProgress], object] | None) -> None:
        self._report = report
        self._started = time.monotonic()
        self._counts = {"waiting": total, "running": 0, "done": 0, "failed": 0, "stopped": 0, "asking": 0}
        self._total = total
        self._emit()

    def sent(self) -> None:
        self._counts["waiting"] -= 1
        self._counts["running"] += 1
        self._emit()

    def answered(self, how: Literal["done", "failed", "stopped"]) -> None:
        self._counts["running"] -= 1
        self._counts[how] += 1
        self._emit()

    def asking(self, count: int) -> None:
        self._counts["asking"] = count
        self._emit()

    def _emit(self) -> None:
        if self._report is not None:
            elapsed = time.monotonic() - self._started
            try:
                self._report(BatchProgress(self._total, **self._counts, elapsed=elapsed))
            except Exception:  # a progress display's bug must not fail the prompts
                log.exception("the on_progress callback of a batch failed")


async def _count_asking(events: AsyncEventStream, progress: _BatchCounter) -> None:
    """Keep a batch's count of permission requests waiting, from its sessions' events."""
    waiting: set[str] = set()
    with contextlib.suppress(ConnectionLost):  # the batch's own calls say so
        async for event in events:
            if event.kind is EventKind.PERMISSION_ASKED:
                waiting.add(str(event.data.get("permission")))
            else:
                waiting.discard(str(event.data.get("permission")))
            progress.asking(len(waiting))


class AsyncAgent:
    """An agent: its ``name`` and the last ``info`` the daemon sent about it."""

    def __init__(self, daemon: AsyncDaemon, info: AgentInfo) -> None:
        self._daemon = daemon
        self._info = info

    def __repr__(self) -> str:
        return f"<AsyncAgent {self._info.name}>"

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def info(self) -> AgentInfo:
        return self._info

    async def session(
        self,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
        repository: str | None = None,
    ) -> AsyncSession:
        """Open a session rooted at ``root`` (default: the agent's ``default_root``); or, with
        ``repository`` (a git URL) and no root, in a worktree of that repository cloned where the
        agent runs (placement ``worktree``).

        Costs nothing: the agent hears of it on its first turn.
        """
        (session,) = await self.sessions(1, root, placement=placement, title=title, repository=repository)
        return session

    async def sessions(
        self,
        count: int,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
        repository: str | None = None,
    ) -> list[AsyncSession]:
        """Open ``count`` sessions alike in one call."""
        opened = await self._daemon._call(
            m.SESSION_OPEN,
            SessionOpenResult,
            agent=self.name,
            root=_absolute(root),
            placement=placement,
            placement_settings={"repository": repository} if repository is not None else None,
            title=title,
            count=count,
        )
        return [AsyncSession(self._daemon, info) for info in opened.sessions]

    @overload
    async def abatch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = ...,
        *,
        placement: str | None = ...,
        max_concurrency: int | None = ...,
        suppress: Literal[False] = ...,
        on_progress: Callable[[BatchProgress], object] | None = ...,
        on_reply: Callable[[int, Reply | Exception], object] | None = ...,
    ) -> list[Reply]: ...

    @overload
    async def abatch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = ...,
        *,
        placement: str | None = ...,
        max_concurrency: int | None = ...,
        suppress: Literal[True],
        on_progress: Callable[[BatchProgress], object] | None = ...,
        on_reply: Callable[[int, Reply | Exception], object] | None = ...,
    ) -> list[Reply | Exception]: ...

    async def abatch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        max_concurrency: int | None = None,
        suppress: bool = False,
        on_progress: Callable[[BatchProgress], object] | None = None,
        on_reply: Callable[[int, Reply | Exception], object] | None = None,
    ) -> list[Reply] | list[Reply | Exception]:
        """Run each prompt in a session of its own (closed after its turn); answers in prompt order.

        Runs as wide as ``max_concurrency`` (default: every prompt at once; the
        agent's own ``max_active_turns`` still applies). Every turn lands before
        anything is raised; then the first failure in prompt order is raised,
        or with ``suppress=True`` failures are returned in place of their
        replies. Cancelling the batch (Ctrl-C in the sync twin) cancels every
        outstanding turn in the daemon and propagates: being stopped is not a
        failure, and ``suppress`` does not catch it.

        ``on_progress`` is called with a ``BatchProgress`` (counts by status)
        whenever a prompt is sent or answered, or one of its sessions' agents asks
        a permission or has it answered; it must not block. ``on_reply`` is called
        with each prompt's index and its reply (or failure) as it lands, in the
        order they land; it must not block.
        """
        prompts = list(prompts)
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if not prompts:
            return []
        sessions = await self.sessions(len(prompts), root, placement=placement)
        outcomes: list[Reply | Exception | None] = [None] * len(prompts)
        width = asyncio.Semaphore(max_concurrency or len(prompts))
        progress = _BatchCounter(len(prompts), on_progress)

        async def run(index: int, session: AsyncSession, prompt: str) -> None:
            try:
                async with width:
                    progress.sent()
                    try:
                        outcome: Reply | Exception = await session.asend(prompt)
                    except Exception as e:  # a failed turn; cancellation is not caught
                        outcome = e
                    outcomes[index] = outcome
                    if isinstance(outcome, Exception):
                        progress.answered("failed")
                    else:
                        progress.answered("stopped" if outcome.stop_reason == "cancelled" else "done")
                    if on_reply is not None:
                        on_reply(index, outcome)
            finally:
                await self._daemon._cleanup(session.aclose())

        async with contextlib.AsyncExitStack() as watching:
            if on_progress is not None:  # what its sessions ask, followed from before the first prompt
                asked = await watching.enter_async_context(
                    self._daemon.events(
                        sessions=[s.id for s in sessions],
                        kinds=[EventKind.PERMISSION_ASKED, EventKind.PERMISSION_ANSWERED],
                    )
                )
                watcher = asyncio.create_task(_count_asking(asked, progress))
                watching.callback(watcher.cancel)
            async with asyncio.TaskGroup() as group:
                for index, (session, prompt) in enumerate(zip(sessions, prompts, strict=True)):
                    group.create_task(run(index, session, prompt))

        results = [outcome for outcome in outcomes if outcome is not None]
        assert len(results) == len(prompts)
        failures = [(index, r) for index, r in enumerate(results) if isinstance(r, Exception)]
        if failures and not suppress:
            index, first = failures[0]
            first.add_note(
                f"sessiond: prompts[{index}] (prompt {index + 1} of {len(prompts)}) failed"
                f" ({len(failures)} of {len(prompts)} prompts failed)"
            )
            raise first
        return results

    async def aget(self) -> AgentInfo:
        """Ask the daemon for the agent's info (and keep it as ``info``)."""
        self._info = await self._daemon._call(m.AGENT_GET, AgentInfo, name=self.name)
        return self._info

    async def aremove(self) -> None:
        """Remove the agent: its sessions are closed and its process stopped."""
        await self._daemon._call(m.AGENT_REMOVE, Removed, name=self.name)


class AsyncSession:
    """A session: its ``id`` and the last ``info`` the daemon sent about it."""

    def __init__(self, daemon: AsyncDaemon, info: SessionInfo) -> None:
        self._daemon = daemon
        self._info = info

    def __repr__(self) -> str:
        return f"<AsyncSession {self._info.id} {self._info.agent} {self._info.status.value}>"

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def info(self) -> SessionInfo:
        return self._info

    async def asend(self, prompt: str) -> Reply:
        """Run one turn and return its reply. Cancelling the call cancels the turn."""
        turn_id = _new_turn_id()
        daemon = self._daemon
        daemon._turns[turn_id] = self.id
        try:
            return await daemon._call(
                m.SESSION_PROMPT, TurnResult, session=self.id, prompt=prompt, turn_id=turn_id
            )
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            # Cancelled: $/cancelRequest has gone out already; say it the explicit way too.
            # KeyboardInterrupt raised right inside this task (by a program's own SIGINT
            # handler) stops the turn just the same.
            await daemon._cleanup(
                daemon._call(m.SESSION_CANCEL, CancelResult, session=self.id, turn_id=turn_id)
            )
            raise
        finally:
            daemon._turns.pop(turn_id, None)

    def astream(self, prompt: str) -> AsyncTurnStream:
        """Run one turn, yielding its events as they happen; ``stream.reply`` after the loop.

        ``async with session.astream(p) as stream: async for event in stream: ...``
        """
        return AsyncTurnStream(self, prompt)

    async def acancel(self, reason: str | None = None) -> int:
        """Stop the session's running and queued turns; returns how many were told to stop.
        ``reason`` (a few words) is kept in the transcript: "cancelled by a client: REASON"."""
        result = await self._daemon._call(m.SESSION_CANCEL, CancelResult, session=self.id, reason=reason)
        return result.cancelled

    async def aclose(self) -> SessionInfo:
        """Close the session (its turns are cancelled first)."""
        self._info = await self._daemon._call(m.SESSION_CLOSE, SessionInfo, session=self.id)
        return self._info

    async def areopen(self) -> SessionInfo:
        """Open the closed session again, as it was (and keep its info as ``info``): its next turn
        asks its agent to restore the conversation, or starts a new one and says so in the turn's
        notice. A session that is open is left as it is."""
        self._info = await self._daemon._call(m.SESSION_REOPEN, SessionInfo, session=self.id)
        return self._info

    async def arename(self, title: str) -> SessionInfo:
        """Name the session (and keep its info as ``info``): neither the daemon, from a first
        prompt, nor its agent names it after this."""
        self._info = await self._daemon._call(m.SESSION_RENAME, SessionInfo, session=self.id, title=title)
        return self._info

    async def aget(self) -> SessionInfo:
        """Ask the daemon for the session's info (and keep it as ``info``)."""
        self._info = await self._daemon._call(m.SESSION_GET, SessionInfo, session=self.id)
        return self._info

    async def atranscript(self, offset: int | None = None, limit: int | None = None) -> Transcript:
        """Lines of the session's transcript: the last ``limit`` (default: the daemon's),
        or ``limit`` lines from line ``offset`` of the whole of it."""
        return await self._daemon._call(
            m.SESSION_TRANSCRIPT, Transcript, session=self.id, offset=offset, limit=limit
        )

    async def acontrols(self) -> SessionControls:
        """What the session's agent lets you change (modes, config options such as the model),
        its slash commands, and what was chosen for this session."""
        return await self._daemon._call(m.SESSION_CONTROLS, SessionControls, session=self.id)

    async def aset_mode(self, mode: str) -> SessionControls:
        """Choose the session's mode (one of ``controls().modes``): said to the agent now if the
        session is open there, else when it opens; kept with the session either way."""
        return await self._daemon._call(m.SESSION_SET_MODE, SessionControls, session=self.id, mode=mode)

    async def aset_option(self, config_id: str, value: str | bool) -> SessionControls:
        """Set one of the session's config options (``controls().config_options``, e.g. the model):
        now if the session is open at its agent, else when it opens; kept with the session."""
        return await self._daemon._call(
            m.SESSION_SET_CONFIG, SessionControls, session=self.id, config_id=config_id, value=value
        )

    async def aside(self, question: str | None = None, *, writable: bool = False) -> AsyncSideChat:
        """Open a side chat beside this session, asking ``question`` at once when given.

        The side chat is a session of its own that starts from this one's context
        and adds nothing to it; its ``reply`` holds the answer. Ask it more with
        ``asend``, close it with ``aclose``. It may not write files unless ``writable``.
        To bring an answer back, send it to this session yourself.
        """
        daemon = self._daemon
        result = await daemon._call(
            m.SESSION_SIDE, SideResult, session=self.id, question=question, writable=writable
        )
        return AsyncSideChat(daemon, result)

    async def atree(self) -> TreeNode:
        """This session with its side chats, tasks and threads, tokens and cost rolled up."""
        return await self._daemon._call(m.SESSION_TREE, TreeNode, session=self.id)

    async def athread(
        self, prompt: str, *, placement: str | None = None, title: str | None = None
    ) -> AsyncSession:
        """Start a thread of this (coordinator) session: a session of its own (a worktree apiece
        in git, by default) whose first turn, ``prompt``, starts at once. Wait for it with
        ``daemon.wait_threads``; raises ``LimitReached`` past ``max_threads`` or a budget."""
        daemon = self._daemon
        info = await daemon._call(
            m.THREAD_START, SessionInfo, parent=self.id, prompt=prompt, placement=placement, title=title
        )
        return AsyncSession(daemon, info)

    async def areport(self) -> ThreadReport:
        """This thread's report: its status, whether it is done, last reply, plan and changes."""
        return await self._daemon._call(m.THREAD_STATUS, ThreadReport, thread=self.id)

    async def amerge(
        self,
        *,
        strategy: Literal["merge", "rebase"] = "merge",
        gate: str | None = None,
        keep: bool = False,
        base_branch: str | None = None,
        hand_back: bool = False,
        wait: bool = True,
        on_step: Callable[[Event], object] | None = None,
    ) -> MergeEntry:
        """Merge this worktree session's branch into its base, through its repository's merge
        queue (one merge at a time), after ``gate`` (a shell command) passes on the result.

        With ``wait`` (the default) returns once it is done: ``status`` is ``merged``, or
        ``failed`` with ``conflicts`` or ``gate_output`` (the base is left as it was), or
        ``cancelled``; a failure is an outcome here, not an exception. ``on_step`` is called
        with each ``merge.step`` event. Without ``wait`` returns the queued entry at once.
        """
        daemon = self._daemon
        params: dict[str, Any] = {
            "session": self.id,
            "strategy": strategy,
            "gate": gate,
            "keep": keep,
            "base_branch": base_branch,
            "hand_back": hand_back,
        }
        if not wait:
            return await daemon._call(m.MERGE_REQUEST, MergeEntry, **params)
        last: dict[str, Any] = {}
        # Subscribed before asking, so no step can be missed.
        async with _Feed(daemon, {"sessions": [self.id], "kinds": [EventKind.MERGE_STEP]}) as feed:
            entry = await daemon._call(m.MERGE_REQUEST, MergeEntry, **params)
            while entry.status not in MERGE_DONE:
                event = await feed.get()
                if event is None or event.data.get("branch") not in (None, entry.branch):
                    continue
                if on_step is not None:
                    on_step(event)
                last.update(event.data)
                if event.data.get("step") in MERGE_DONE:
                    break
        for listed in await daemon.merges():
            if listed.session == self.id and listed.branch == entry.branch and listed.status in MERGE_DONE:
                return listed
        # Not listed (a daemon that keeps no history): the entry as its steps told it.
        status = str(last.get("step", entry.status))
        return entry.model_copy(
            update={
                "status": status if status in MERGE_DONE else entry.status,
                "reason": last.get("reason", entry.reason),
                "conflicts": last.get("conflicts") or last.get("files") or entry.conflicts,
                "gate_output": last.get("gateOutput", last.get("output", entry.gate_output)),
                "commit": last.get("commit", entry.commit),
                "position": None,
            }
        )


class AsyncSideChat(AsyncSession):
    """A side chat beside a session (``info.parent``): a session of its own, with the answer to
    the question it was opened with (``reply``) and whether the agent forked the main session."""

    def __init__(self, daemon: AsyncDaemon, result: SideResult) -> None:
        super().__init__(daemon, result.session)
        self._reply = result.reply
        self._forked = result.forked

    def __repr__(self) -> str:
        return f"<AsyncSideChat {self.id} of {self.info.parent}>"

    @property
    def reply(self) -> Reply | None:
        """The answer to the question the side chat was opened with (None without one)."""
        return self._reply

    @property
    def forked(self) -> bool:
        """True when the agent forked the main session; else it was given an account of it."""
        return self._forked
