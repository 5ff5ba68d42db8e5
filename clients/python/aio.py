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
import importlib.metadata
import logging
import os
import uuid
from collections.abc import AsyncGenerator, Awaitable, Generator, Iterable, Mapping, Sequence
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
    InvalidParams,
    ProtocolError,
)
from sessiond.protocol import methods as m
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.models import (
    AgentInfo,
    AgentList,
    AgentOptions,
    Answered,
    CancelResult,
    DaemonStatus,
    Event,
    EventKind,
    Fleet,
    Removed,
    SessionInfo,
    SessionOpenResult,
    SessionPage,
    SessionStatus,
    Subscription,
    Transcript,
    TurnResult,
)

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
# Events of subscriptions not yet claimed (their notification overtook the answer to
# events/subscribe) are kept up to this many.
EARLY_EVENTS_LIMIT = 10_000


def _client_version() -> str:
    try:
        return importlib.metadata.version("sessiond")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


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


def _absolute(root: StrPath | None) -> str | None:
    # Relative roots mean the caller's directory, not the daemon's.
    return None if root is None else os.path.abspath(os.fspath(root))


def _new_turn_id() -> str:
    return uuid.uuid4().hex


# ---------------------------------------------------------------- connecting


class _Connecting:
    """What ``aconnect`` returns: await it, or use it as ``async with``."""

    def __init__(self, socket: StrPath | None, start: bool, timeout: float) -> None:
        self._args = (socket, start, timeout)
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
            await self._daemon.aclose()


def aconnect(
    socket: StrPath | None = None, *, start: bool = True, timeout: float = launch.START_TIMEOUT
) -> _Connecting:
    """Connect to the daemon at ``socket`` (default: ``sessiond.protocol.paths.socket_path()``).

    When nothing accepts there and ``start`` is true, a daemon is started in
    the background and awaited for up to ``timeout`` seconds. Use it as
    ``async with aconnect() as daemon:`` or ``daemon = await aconnect()``
    (then ``await daemon.aclose()``).
    """
    return _Connecting(socket, start, timeout)


async def _open_daemon(socket: StrPath | None, start: bool, timeout: float) -> AsyncDaemon:
    reader, writer, path = await launch.open_streams(socket, start=start, timeout=timeout)
    connection = Connection.open(reader, writer, peer=str(path))
    try:
        result = await connection.request(
            "initialize",
            {
                "processId": os.getpid(),
                "clientInfo": {"name": CLIENT_NAME, "version": _client_version()},
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
    return AsyncDaemon(connection, path, result)


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

    def __init__(self, daemon: AsyncDaemon, filters: dict[str, Any]) -> None:
        self._daemon = daemon
        self._filters = filters
        self.inbox = _Inbox()
        self._subscription: str | None = None
        self._start: int | None = filters.get("since")
        self._seen: int | None = None  # the newest seq handed out, or known to be past
        self.gapped = False  # whether the daemon skipped events, replacing them with a snapshot
        self._opened = False

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Subscribe (once; later calls do nothing)."""
        if not self._opened:
            self._opened = True
            await self._subscribe(self._start)

    async def close(self) -> None:
        """Unsubscribe, if subscribed."""
        await self._unsubscribe()

    async def get(self) -> Event | None:
        """The next event, or None when the inbox was woken."""
        while True:
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
        if control.through is not None:
            self._seen = max(self._seen or 0, control.through)
        if control.overflow is not None:
            log.info("resubscribing after the daemon ended a subscription: %s", control.overflow)
            await self._unsubscribe()
            await self._subscribe(self._seen if self._seen is not None else self._start)

    async def _subscribe(self, since: int | None) -> None:
        daemon = self._daemon
        subscribed = await daemon._call(m.EVENTS_SUBSCRIBE, Subscription, **{**self._filters, "since": since})
        daemon._router.claim(subscribed.subscription, self.inbox)
        self._subscription = subscribed.subscription
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
    is garbage-collected.
    """

    def __init__(self) -> None:
        self._items: AsyncGenerator[Event, None] = self._run()

    def _run(self) -> AsyncGenerator[Event, None]:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        return await self._items.__anext__()

    async def _open(self) -> None:
        """Start the stream's work ahead of the first step (``async with`` calls it)."""

    async def aclose(self) -> None:
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
    Raises ``ConnectionLost`` when the daemon goes away.
    """

    def __init__(self, daemon: AsyncDaemon, filters: dict[str, Any]) -> None:
        self._feed = _Feed(daemon, filters)
        super().__init__()

    async def _open(self) -> None:
        await self._feed.open()

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self._feed.close()  # when the generator never started, its cleanup never runs

    async def _run(self) -> AsyncGenerator[Event, None]:
        async with self._feed as feed:
            while True:
                event = await feed.get()
                if event is not None:
                    yield event


class AsyncTurnStream(_AsyncStream):
    """The events of one turn as they happen, then the turn's ``reply``.

    Yields the turn's events (``turn.queued``, ``turn.started``, ``turn.chunk``
    with ``data["text"]``, ..., ``turn.ended``); once iteration ends, ``reply``
    holds the answer. If the turn failed, the last step raises the error
    (``AgentError``, ...). Leaving the loop early (``break``, an exception,
    cancellation) closes the stream, and closing it cancels the turn.
    """

    def __init__(self, session: AsyncSession, prompt: str) -> None:
        self._session = session
        self._prompt = prompt
        self._turn_id = _new_turn_id()
        self._reply: Reply | None = None
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

    async def _run(self) -> AsyncGenerator[Event, None]:
        session, daemon = self._session, self._session._daemon
        # Subscribe before prompting, so no event of the turn can be missed.
        async with _Feed(daemon, {"sessions": [session.id]}) as feed:
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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

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
    ) -> AsyncEventStream:
        """Events as they happen (after replaying those after seq ``since``, if given)."""
        filters = {"since": since, "sessions": sessions, "agents": agents, "kinds": kinds}
        return AsyncEventStream(self, {key: value for key, value in filters.items() if value is not None})

    async def aclose(self) -> None:
        """Cancel this client's outstanding turns, say goodbye, close the connection. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    # ------------------------------------------------------------ internal

    async def _close(self) -> None:
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
        self, root: StrPath | None = None, *, placement: str | None = None, title: str | None = None
    ) -> AsyncSession:
        """Open a session rooted at ``root`` (default: the agent's ``default_root``).

        Costs nothing: the agent hears of it on its first turn.
        """
        (session,) = await self.sessions(1, root, placement=placement, title=title)
        return session

    async def sessions(
        self,
        count: int,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
    ) -> list[AsyncSession]:
        """Open ``count`` sessions alike in one call."""
        opened = await self._daemon._call(
            m.SESSION_OPEN,
            SessionOpenResult,
            agent=self.name,
            root=_absolute(root),
            placement=placement,
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
    ) -> list[Reply | Exception]: ...

    async def abatch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        max_concurrency: int | None = None,
        suppress: bool = False,
    ) -> list[Reply] | list[Reply | Exception]:
        """Run each prompt in a session of its own (closed after its turn); answers in prompt order.

        Runs as wide as ``max_concurrency`` (default: every prompt at once; the
        agent's own ``max_active_turns`` still applies). Every turn lands before
        anything is raised; then the first failure in prompt order is raised,
        or with ``suppress=True`` failures are returned in place of their
        replies. Cancelling the batch (Ctrl-C in the sync twin) cancels every
        outstanding turn in the daemon and propagates: being stopped is not a
        failure, and ``suppress`` does not catch it.
        """
        prompts = list(prompts)
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if not prompts:
            return []
        sessions = await self.sessions(len(prompts), root, placement=placement)
        outcomes: list[Reply | Exception | None] = [None] * len(prompts)
        width = asyncio.Semaphore(max_concurrency or len(prompts))

        async def run(index: int, session: AsyncSession, prompt: str) -> None:
            try:
                async with width:
                    outcomes[index] = await session.asend(prompt)
            except Exception as e:  # a failed turn; cancellation is not caught
                outcomes[index] = e
            finally:
                await self._daemon._cleanup(session.aclose())

        async with asyncio.TaskGroup() as group:
            for index, (session, prompt) in enumerate(zip(sessions, prompts, strict=True)):
                group.create_task(run(index, session, prompt))

        results = [outcome for outcome in outcomes if outcome is not None]
        assert len(results) == len(prompts)
        failures = [(index, r) for index, r in enumerate(results) if isinstance(r, Exception)]
        if failures and not suppress:
            index, first = failures[0]
            first.add_note(
                f"sessiond: prompt {index} of the batch failed"
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

    async def acancel(self) -> int:
        """Stop the session's running and queued turns; returns how many were told to stop."""
        result = await self._daemon._call(m.SESSION_CANCEL, CancelResult, session=self.id)
        return result.cancelled

    async def aclose(self) -> SessionInfo:
        """Close the session (its turns are cancelled first)."""
        self._info = await self._daemon._call(m.SESSION_CLOSE, SessionInfo, session=self.id)
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
