"""The editor-facing side: the daemon's methods answered for each connection the door admits.

The door (`door.py`) reads each connection, passes every message through the gate and answers
`initialize`; then each initialized connection gets a `Connection` here, all of them sharing
one core (seen through `ServerPort`) and one handler per method of the table in
`sessiond.protocol.methods` (made once, called with the connection that asked), which validates
its params with pydantic and delegates to the core. A request runs as a task of its own,
answered when it ends and cancelled by `$/cancelRequest`. What the daemon says to a client in
LSP's own terms (a turn's work-done progress, a permission asked) goes through pygls, in
`lsp_outbound.py`, loaded on a thread when a client that will need it comes: nothing here
imports it at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import hmac
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from sessiond.daemon import gate, importer, long_lived, wire
from sessiond.daemon.door import Door, Link
from sessiond.daemon.events import Event, EventLog, Filter, Subscriber, SubscriberOverflow
from sessiond.daemon.permissions import as_request
from sessiond.daemon.records import AgentRuntime, PendingPermission, SessionRecord
from sessiond.daemon.runs import RunBook
from sessiond.daemon.session_tools import SessionTools
from sessiond.daemon.wire import Kind
from sessiond.protocol import methods as names
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.methods import METHODS

if TYPE_CHECKING:
    from sessiond.daemon.around import Around
    from sessiond.daemon.insight_feed import InsightFeed
    from sessiond.daemon.lsp_outbound import ClientLsp
    from sessiond.daemon.merging import Merging
    from sessiond.daemon.permissions import Permissions
    from sessiond.daemon.pruning import Pruner
    from sessiond.daemon.session_table import LazyIndex, SessionTable
    from sessiond.daemon.store import Store

log = logging.getLogger("sessiond.server")


class ServerPort(Protocol):
    """What the handlers use of the core: its operations, one per method family, and the
    collaborators whose methods a handler calls as they are (the insight feed, Around, the
    merge queue, permissions). The core satisfies it (mypy checks that where serve hands it over);
    the server imports nothing of core.py."""

    @property
    def store(self) -> Store: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def agents(self) -> dict[str, AgentRuntime]: ...
    @property
    def sessions(self) -> SessionTable: ...
    @property
    def by_run(self) -> LazyIndex: ...
    @property
    def feed(self) -> InsightFeed: ...
    @property
    def around(self) -> Around: ...
    @property
    def merging(self) -> Merging: ...
    @property
    def permissions(self) -> Permissions: ...

    async def create_agent(self, spec: m.AgentSpec) -> m.AgentInfo: ...
    async def update_agent(self, params: m.AgentUpdateParams) -> m.AgentInfo: ...
    async def remove_agent(self, name: str) -> None: ...
    def get_agent(self, name: str) -> AgentRuntime: ...
    def agent_info(self, runtime: AgentRuntime) -> m.AgentInfo: ...
    async def open_sessions(
        self, params: m.SessionOpenParams, run: str | None = None
    ) -> list[SessionRecord]: ...
    def list_sessions(self, params: m.SessionListParams) -> m.SessionPage: ...
    def get_session(self, session_id: str) -> SessionRecord: ...
    def session_info(self, s: SessionRecord, *, brief: bool = False) -> m.SessionInfo: ...
    async def close_session(self, session_id: str) -> SessionRecord: ...
    def reopen_session(self, session_id: str) -> SessionRecord: ...
    def rename(self, params: m.SessionRenameParams) -> SessionRecord: ...
    async def set_mode(self, params: m.SessionSetModeParams) -> m.SessionControls: ...
    async def set_config_option(self, params: m.SessionSetConfigParams) -> m.SessionControls: ...
    async def prompt(
        self, params: m.SessionPromptParams, listener: Callable[[str, dict[str, Any]], None] | None = None
    ) -> m.TurnResult: ...
    async def cancel(self, params: m.SessionCancelParams) -> int: ...
    def cancel_turn(self, turn_id: str) -> bool: ...


# A replay reads and writes at most this many events, or about this many bytes of them, at a time,
# each page drained before the next.
REPLAY_PAGE = 500
REPLAY_BYTES = 1024 * 1024
# A closed connection is a knot of cycles (its streams, its pygls server's ~50 KiB if it had one)
# that has often outlived the young generations by then: a full collection every this many closes
# bounds what they hold (without it, 1,000 connections that came and went left +0.85 MiB).
RECLAIM_EVERY = 20
LSP_OUTBOUND = "sessiond.daemon.lsp_outbound"
# The id of the request a handler's task answers (the task's own copy of the context).
REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id")


def invalid_params(exc: ValidationError) -> RpcError:
    """InvalidParams naming each field at fault, by its wire name."""
    problems = []
    fields = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "params"
        fields.append(where)
        problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return RpcError(ErrorCode.INVALID_PARAMS, "invalid params: " + "; ".join(problems), {"fields": fields})


class Connection:
    """One initialized client, behind its door `link`: its requests being answered, its
    subscriptions, its prompts in flight, and its pygls server once it needs one."""

    def __init__(self, daemon: DaemonServer, link: Link) -> None:
        self.daemon = daemon
        self.link = link
        self.id = link.id
        self.writer = link.writer
        self.run: str | None = None
        self.subscriptions: dict[str, tuple[Subscriber | None, asyncio.Task[None]]] = {}
        self.requests: dict[Any, asyncio.Task[bytes]] = {}  # request id -> its handler
        self.prompts: dict[Any, str] = {}  # request id -> turn id
        self.progress_tokens: dict[Any, str] = {}  # progress token -> turn id
        # Built the first time the connection reports progress or is asked something: until
        # then (most clients, for good) it costs a few objects, not a pygls server.
        self._lsp: ClientLsp | None = None

    @property
    def core(self) -> ServerPort:
        return self.daemon.core

    @property
    def acting_for(self) -> str | None:
        """The session an MCP bridge speaks for; None for a client acting for its user."""
        return self.link.access.acting_for

    @property
    def is_closed(self) -> bool:
        return self.link.closed.is_set()

    async def lsp(self) -> ClientLsp:
        """This connection's pygls server, for what it is told in LSP's terms (loaded if need be)."""
        if self._lsp is None:
            await self.daemon.lsp_loaded()
            from sessiond.daemon.lsp_outbound import ClientLsp  # (loaded by now: no wait here)

            if self._lsp is None:
                self._lsp = ClientLsp(self.link, self.daemon.version)
        return self._lsp

    def dispatch(self, message: wire.Message) -> None:
        """Run a message the door admitted: a request of the table, `shutdown`, a notification
        the gate lets through, or a response to a request of the daemon's."""
        if message.kind is Kind.REQUEST:
            if message.method == gate.SHUTDOWN:  # (the gate takes nothing more but `exit`)
                self.send_raw({"jsonrpc": "2.0", "id": message.id, "result": None})
            else:
                self._answer(message)
        elif message.kind is Kind.NOTIFICATION:
            params = message.params if isinstance(message.params, dict) else {}
            if message.method == gate.CANCEL_REQUEST:
                self.cancel_request(params.get("id"))
            elif message.method == gate.PROGRESS_CANCEL:
                turn_id = self.progress_tokens.get(params.get("token"))
                if turn_id is not None:
                    self.core.cancel_turn(turn_id)
            # `initialized` and `$/setTrace` ask nothing of the daemon.
        elif self._lsp is not None:
            self._lsp.take_response(message.raw)
        else:
            log.info("connection %s answered a request it was never sent (id %r)", self.id, message.id)

    def _answer(self, message: wire.Message) -> None:
        """Run a request's handler as a task of its own, answered when it ends."""
        msg_id = message.id
        task = asyncio.ensure_future(self._handle(RUNNERS[message.method], msg_id, message.params))
        self.requests[msg_id] = task
        self.link.in_flight += 1
        task.add_done_callback(lambda done: self._answered(msg_id, message.method, done))

    async def _handle(self, runner: Runner, msg_id: Any, params: Any) -> bytes:
        REQUEST_ID.set(msg_id)  # (the task's own context)
        return await runner(self, params)

    def _answered(self, msg_id: Any, method: str, task: asyncio.Task[bytes]) -> None:
        if self.requests.get(msg_id) is task:
            del self.requests[msg_id]
        self.link.in_flight -= 1
        if task.cancelled():
            self.link.send_error(
                msg_id, ErrorCode.REQUEST_CANCELLED, f"request {msg_id!r} was cancelled ($/cancelRequest)"
            )
            return
        exc = task.exception()
        if exc is None:
            self.link.send_result(msg_id, task.result())
        elif isinstance(exc, RpcError):
            self.link.send_error(msg_id, exc.code, exc.message, exc.data)
        else:
            log.error("%s (request %r of connection %s) failed", method, msg_id, self.id, exc_info=exc)
            self.link.send_error(
                msg_id,
                ErrorCode.INTERNAL_ERROR,
                f"the daemon failed on this request: {type(exc).__name__}: {exc}; "
                "see the daemon's log, and report it if it happens again",
            )

    def send_raw(self, payload: dict[str, Any]) -> None:
        self.link.send_raw(payload)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.link.notify(method, params)

    def answering(self) -> list[asyncio.Task[bytes]]:
        return list(self.requests.values())

    def closed(self) -> None:
        for subscriber, task in list(self.subscriptions.values()):
            if subscriber is not None:
                self.core.events.unsubscribe(subscriber)
            task.cancel()
        self.subscriptions.clear()
        if self.run is not None:
            self.daemon.runs.end(self.run, "stopped")  # gone without saying how it went
        self.daemon.reclaim()

    # ------------------------------------------------------------ subscriptions

    async def subscribe(self, params: m.EventsSubscribeParams) -> m.Subscription:
        event_filter = Filter(
            sessions=frozenset(params.sessions) if params.sessions is not None else None,
            agents=frozenset(params.agents) if params.agents is not None else None,
            kinds=frozenset(k.value for k in params.kinds) if params.kinds is not None else None,
        )
        events = self.core.events
        # Register before reading the head: everything after it arrives live,
        # everything up to it is replayed from the store: no gap, no duplicate.
        subscriber = events.subscribe(event_filter)
        head = events.committed
        subscription = f"sub-{uuid.uuid4().hex[:10]}"
        task = asyncio.create_task(self._pump(subscription, subscriber, params.since, head, event_filter))
        self.subscriptions[subscription] = (subscriber, task)
        snapshot = self.snapshot(event_filter, head) if params.snapshot else None
        return m.Subscription(subscription=subscription, head=head, snapshot=snapshot)

    def snapshot(self, event_filter: Filter, head: int) -> m.Snapshot:
        core = self.core
        sessions = [
            core.session_info(s)
            for s in core.sessions.where("status != 'closed'")  # the open ones, read if need be
            if not s.closed
            and (event_filter.sessions is None or s.id in event_filter.sessions)
            and (event_filter.agents is None or s.agent in event_filter.agents)
        ]
        return m.Snapshot(head=head, sessions=sessions, fleet=core.feed.fleet())

    async def _pump(
        self, subscription: str, subscriber: Subscriber, since: int | None, head: int, event_filter: Filter
    ) -> None:
        events = self.core.events
        try:
            after = since if since is not None else head
            while after < head:
                page, more = await events.replay_page(
                    after, head, event_filter, most=REPLAY_PAGE, max_bytes=REPLAY_BYTES
                )
                through = page[-1].seq if more else head
                await self._send_events(subscription, page, through)
                after = through
            # Replayed: from here on, events committed while the client keeps up are
            # written as they are committed; the loop below sends the rest.
            subscriber.push = lambda: self._push(subscription, subscriber)
            while True:
                try:
                    batch = await subscriber.next_batch()
                except SubscriberOverflow:
                    # Too far behind: drop the backlog, send the state as of now, carry on from it.
                    now = events.committed
                    subscriber.reset()
                    resync = self.snapshot(event_filter, now)
                    await self._send_events(subscription, [], now, resync)
                    continue
                if not batch:
                    return
                self._write_events(subscription, batch, self._through(subscriber, batch))
                # Back-pressure: a client that reads slowly holds this pump, not the daemon.
                await self.writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("subscription %s failed", subscription)
        finally:
            subscriber.push = None

    def _push(self, subscription: str, subscriber: Subscriber) -> bool:
        """Write what `subscriber` has queued, now, while the socket takes it; False leaves it to the pump."""
        transport = self.writer.transport
        while subscriber.pending:
            if (
                transport.is_closing()
                or transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]
            ):
                return False
            batch = subscriber.take()
            if batch:
                self._write_events(subscription, batch, self._through(subscriber, batch))
        return True

    def _through(self, subscriber: Subscriber, batch: list[Event]) -> int:
        # With nothing left queued the client has seen everything committed that matches it.
        return batch[-1].seq if subscriber.pending else max(self.core.events.committed, batch[-1].seq)

    async def _send_events(
        self, subscription: str, events: list[Event], through: int, resync: m.Snapshot | None = None
    ) -> None:
        if resync is not None:
            payload = m.EventsNotifyParams(
                subscription=subscription, events=[], through=through, resync=resync
            )
            self.notify(names.EVENTS_NOTIFY, payload.wire())
        else:
            self._write_events(subscription, events, through)
        await self.writer.drain()

    def _write_events(self, subscription: str, events: list[Event], through: int) -> None:
        # The hot path: each event's JSON is made once, whatever the number of clients.
        body = (
            f'{{"jsonrpc":"2.0","method":"{names.EVENTS_NOTIFY}","params":{{"subscription":'
            f'{json.dumps(subscription)},"events":[{",".join(e.json() for e in events)}],'
            f'"through":{through}}}}}'
        ).encode()
        self.link.write_body(body)

    def unsubscribe(self, subscription: str) -> None:
        entry = self.subscriptions.pop(subscription, None)
        if entry is None:
            raise RpcError(
                ErrorCode.SUBSCRIPTION_NOT_FOUND,
                f"no subscription {subscription!r} on this connection",
            )
        subscriber, task = entry
        if subscriber is not None:
            self.core.events.unsubscribe(subscriber)
        task.cancel()

    # ------------------------------------------------------------ turns

    async def prompt(self, params: m.SessionPromptParams) -> m.TurnResult:
        msg_id = REQUEST_ID.get()
        turn_id = params.turn_id = params.turn_id or f"t-{uuid.uuid4().hex[:12]}"  # (this request's own)
        token = params.work_done_token
        listener = None
        if token is not None or self.link.progress_supported:
            try:
                lsp = await self.lsp()
                if token is None:
                    token = f"sessiond-{turn_id}"
                    await asyncio.wait_for(lsp.create_progress(token), 5)
                listener = lsp.progress(token, f"sessiond {params.session}")
                self.progress_tokens[token] = turn_id
            except Exception as exc:
                log.info("connection %s: turn %s is not reported as progress: %r", self.id, turn_id, exc)
                token = None
        # Queued from here (core.prompt queues the turn before it first waits): a $/cancelRequest
        # cancels the turn now, where before it cancelled the request with no turn begun.
        self.prompts[msg_id] = turn_id
        try:
            return await self.core.prompt(params, listener)
        finally:
            self.prompts.pop(msg_id, None)
            if token is not None:
                self.progress_tokens.pop(token, None)

    def ask_permission(self, pending: PendingPermission) -> None:
        """Forward an agent's question to this client; the first answer anywhere wins."""
        msg_id = f"permission-{pending.id}-{self.id}"
        params = as_request(pending)
        sent: asyncio.Future[Any] | None = None

        async def ask() -> None:
            nonlocal sent
            try:
                lsp = await self.lsp()
                sent = lsp.request(names.REQUEST_PERMISSION, params.wire(), msg_id)
                chosen = m.PermissionRequestResult.model_validate(await sent)
            except Exception:
                return  # no answer from this client: another may give one
            if self.is_closed:
                return  # the connection went away: what came with it is no answer
            if not pending.future.done():
                try:
                    self.core.permissions.answer(
                        m.PermissionAnswerParams(permission=pending.id, option_id=chosen.option_id)
                    )
                except RpcError as exc:  # the question stays open for the other clients
                    log.warning("client %s answered permission %s: %s", self.id, pending.id, exc.message)

        asking = asyncio.ensure_future(ask())

        def settled(_: Any) -> None:
            if sent is not None and not sent.done():
                self.notify(gate.CANCEL_REQUEST, {"id": msg_id})
                sent.cancel()
            asking.cancel()

        pending.future.add_done_callback(settled)

    def cancel_request(self, msg_id: Any) -> None:
        """$/cancelRequest: a prompt's turn is cancelled (the prompt then answers normally, with its
        turn); any other request still running is stopped, answered RequestCancelled."""
        turn_id = self.prompts.get(msg_id)
        if turn_id is not None:
            self.core.cancel_turn(turn_id)
        elif (task := self.requests.get(msg_id)) is not None:
            task.cancel()


def _runner(params_model: type[BaseModel], handler: Handler) -> Runner:
    """A method's handler as a connection runs it: its params validated with pydantic (an
    RpcError naming the fields at fault), its result as JSON text, made by pydantic in one step
    (the answer to opening 10,000 sessions: 49 ms, where dicts and then json.dumps took 112)."""

    async def run(conn: Connection, raw: Any) -> bytes:
        try:
            params = params_model.model_validate({} if raw is None else raw)
        except ValidationError as exc:
            raise invalid_params(exc) from None
        result = await handler(conn, params)
        return result.model_dump_json(by_alias=True, exclude_none=True).encode()

    return run


# The daemon's methods, each a function of the connection that asked and its params (made once,
# not per connection: a connection's closures over itself were much of what it cost).
Handler = Callable[[Connection, Any], Awaitable[BaseModel]]
Runner = Callable[[Connection, Any], Awaitable[bytes]]


async def agent_create(conn: Connection, p: m.AgentSpec) -> m.AgentInfo:
    return await conn.core.create_agent(p)


async def agent_list(conn: Connection, p: m.Empty) -> m.AgentList:
    return m.AgentList(agents=[conn.core.agent_info(a) for a in conn.core.agents.values()])


async def agent_get(conn: Connection, p: m.AgentRef) -> m.AgentInfo:
    return conn.core.agent_info(conn.core.get_agent(p.name))


async def agent_update(conn: Connection, p: m.AgentUpdateParams) -> m.AgentInfo:
    return await conn.core.update_agent(p)


async def agent_remove(conn: Connection, p: m.AgentRef) -> m.Removed:
    await conn.core.remove_agent(p.name)
    return m.Removed()


async def session_open(conn: Connection, p: m.SessionOpenParams) -> m.SessionOpenResult:
    records = await conn.core.open_sessions(p, run=conn.run)
    return m.SessionOpenResult(sessions=[conn.core.session_info(r) for r in records])


async def session_list(conn: Connection, p: m.SessionListParams) -> m.SessionPage:
    return conn.core.list_sessions(p)


async def session_get(conn: Connection, p: m.SessionRef) -> m.SessionInfo:
    return conn.core.session_info(conn.core.get_session(p.session))


async def session_prompt(conn: Connection, p: m.SessionPromptParams) -> m.TurnResult:
    return await conn.prompt(p)


async def session_cancel(conn: Connection, p: m.SessionCancelParams) -> m.CancelResult:
    return m.CancelResult(cancelled=await conn.core.cancel(p))


async def session_close(conn: Connection, p: m.SessionRef) -> m.SessionInfo:
    return conn.core.session_info(await conn.core.close_session(p.session))


async def session_transcript(conn: Connection, p: m.TranscriptParams) -> m.Transcript:
    return await conn.core.feed.transcript(p)


async def session_controls(conn: Connection, p: m.SessionRef) -> m.SessionControls:
    return conn.core.feed.controls(conn.core.get_session(p.session))


async def session_reopen(conn: Connection, p: m.SessionRef) -> m.SessionInfo:
    return conn.core.session_info(conn.core.reopen_session(p.session))


async def session_prune(conn: Connection, p: m.SessionPruneParams) -> m.PruneResult:
    return await conn.daemon.pruner.prune(p)


async def session_rename(conn: Connection, p: m.SessionRenameParams) -> m.SessionInfo:
    return conn.core.session_info(conn.core.rename(p))


async def session_set_mode(conn: Connection, p: m.SessionSetModeParams) -> m.SessionControls:
    return await conn.core.set_mode(p)


async def session_set_config(conn: Connection, p: m.SessionSetConfigParams) -> m.SessionControls:
    return await conn.core.set_config_option(p)


async def fleet_summary(conn: Connection, p: m.Empty) -> m.Fleet:
    return conn.core.feed.fleet()


async def session_side(conn: Connection, p: m.SideParams) -> m.SideResult:
    return await conn.core.around.side(p)


async def session_tree(conn: Connection, p: m.SessionRef) -> m.TreeNode:
    return conn.core.around.tree(conn.core.get_session(p.session))


async def session_broadcast(conn: Connection, p: m.BroadcastParams) -> m.BroadcastResult:
    return m.BroadcastResult(sessions=conn.core.around.broadcast(p))


async def task_suggest(conn: Connection, p: m.TaskSuggestParams) -> m.TaskInfo:
    return conn.daemon.tools.suggest(p, conn.acting_for)


async def task_list(conn: Connection, p: m.TaskListParams) -> m.TaskList:
    tasks = [
        t.info()
        for t in reversed(conn.core.around.tasks.tasks.values())
        if (p.agent is None or t.agent == p.agent) and (p.status is None or t.status in p.status)
    ]
    return m.TaskList(tasks=tasks)


async def task_accept(conn: Connection, p: m.TaskRef) -> m.TaskInfo:
    return (await conn.core.around.accept(p.task)).info()


async def task_dismiss(conn: Connection, p: m.TaskDismissParams) -> m.TaskInfo:
    return conn.core.around.dismiss(p.task, p.reason).info()


async def thread_start(conn: Connection, p: m.ThreadStartParams) -> m.SessionInfo:
    return await conn.daemon.tools.start_thread(p, conn.acting_for)


async def thread_status(conn: Connection, p: m.ThreadRef) -> m.ThreadReport:
    return conn.daemon.tools.status(p, conn.acting_for)


async def thread_wait(conn: Connection, p: m.ThreadWaitParams) -> m.ThreadReports:
    return await conn.daemon.tools.wait(p, conn.acting_for)


async def merge_request(conn: Connection, p: m.MergeParams) -> m.MergeEntry:
    return await conn.core.merging.merge(p)


async def merge_list(conn: Connection, p: m.Empty) -> m.MergeList:
    return conn.core.merging.listing()


async def run_declare(conn: Connection, p: m.RunDeclareParams) -> m.RunInfo:
    if conn.run is not None and conn.daemon.runs.get(conn.run).outcome is None:
        raise RpcError(
            ErrorCode.CONFLICT,
            f"this connection's run {conn.run!r} has not ended; end it with run/end first",
        )
    run = conn.daemon.runs.declare(p)
    conn.run = run.id
    return conn.daemon.runs.info(run, conn.core.by_run.get(run.id, ()))


async def run_end(conn: Connection, p: m.RunEndParams) -> m.RunInfo:
    if conn.run is None:
        raise RpcError(ErrorCode.CONFLICT, "this connection declared no run; declare one with run/declare")
    run = conn.daemon.runs.end(conn.run, p.outcome)
    conn.run = None
    await conn.core.store.flush()
    return conn.daemon.runs.info(run, conn.core.by_run.get(run.id, ()))


async def run_list(conn: Connection, p: m.Empty) -> m.RunList:
    return m.RunList(
        runs=[
            conn.daemon.runs.info(r, conn.core.by_run.get(r.id, ())) for r in conn.daemon.runs.runs.values()
        ]
    )


async def run_get(conn: Connection, p: m.RunRef) -> m.RunInfo:
    return conn.daemon.runs.info(conn.daemon.runs.get(p.run), conn.core.by_run.get(p.run, ()))


async def permission_list(conn: Connection, p: m.PermissionListParams) -> m.PermissionList:
    if p.session is not None:
        conn.core.get_session(p.session)  # an unknown session is SessionNotFound, not an empty list
    return m.PermissionList(permissions=conn.core.permissions.waiting(p.session))


async def permission_answer(conn: Connection, p: m.PermissionAnswerParams) -> m.Answered:
    conn.core.permissions.answer(p)
    return m.Answered()


async def events_subscribe(conn: Connection, p: m.EventsSubscribeParams) -> m.Subscription:
    return await conn.subscribe(p)


async def events_unsubscribe(conn: Connection, p: m.SubscriptionRef) -> m.Removed:
    conn.unsubscribe(p.subscription)
    return m.Removed()


async def daemon_status(conn: Connection, p: m.Empty) -> m.DaemonStatus:
    return conn.daemon.status()


async def daemon_stop(conn: Connection, p: m.Empty) -> m.StopResult:
    return conn.daemon.stop()


HANDLERS: dict[str, Handler] = {
    names.AGENT_CREATE: agent_create,
    names.AGENT_LIST: agent_list,
    names.AGENT_GET: agent_get,
    names.AGENT_UPDATE: agent_update,
    names.AGENT_REMOVE: agent_remove,
    names.SESSION_OPEN: session_open,
    names.SESSION_LIST: session_list,
    names.SESSION_GET: session_get,
    names.SESSION_PROMPT: session_prompt,
    names.SESSION_CANCEL: session_cancel,
    names.SESSION_CLOSE: session_close,
    names.SESSION_REOPEN: session_reopen,
    names.SESSION_PRUNE: session_prune,
    names.SESSION_TRANSCRIPT: session_transcript,
    names.SESSION_CONTROLS: session_controls,
    names.SESSION_RENAME: session_rename,
    names.SESSION_SET_MODE: session_set_mode,
    names.SESSION_SET_CONFIG: session_set_config,
    names.FLEET_SUMMARY: fleet_summary,
    names.PERMISSION_LIST: permission_list,
    names.PERMISSION_ANSWER: permission_answer,
    names.SESSION_SIDE: session_side,
    names.SESSION_TREE: session_tree,
    names.SESSION_BROADCAST: session_broadcast,
    names.TASK_SUGGEST: task_suggest,
    names.TASK_LIST: task_list,
    names.TASK_ACCEPT: task_accept,
    names.TASK_DISMISS: task_dismiss,
    names.THREAD_START: thread_start,
    names.THREAD_STATUS: thread_status,
    names.THREAD_WAIT: thread_wait,
    names.MERGE_REQUEST: merge_request,
    names.MERGE_LIST: merge_list,
    names.RUN_DECLARE: run_declare,
    names.RUN_END: run_end,
    names.RUN_LIST: run_list,
    names.RUN_GET: run_get,
    names.EVENTS_SUBSCRIBE: events_subscribe,
    names.EVENTS_UNSUBSCRIBE: events_unsubscribe,
    names.DAEMON_STATUS: daemon_status,
    names.DAEMON_STOP: daemon_stop,
}
_missing = set(METHODS) - set(HANDLERS)
assert not _missing, f"methods without a handler: {_missing}"


RUNNERS = {method: _runner(METHODS[method].params, handler) for method, handler in HANDLERS.items()}


def _settle_once_loaded(loading: asyncio.Future[Any]) -> None:
    if not loading.cancelled() and (exc := loading.exception()) is not None:
        log.error(
            "pygls did not load (%s): turns are not reported as progress and no permission is "
            "asked of clients; reinstall sessiond (pip install --force-reinstall sessiond)",
            exc,
        )
    long_lived.settle()  # what pygls keeps for good, kept out of full GC passes as the rest is


class DaemonServer:
    """Serves the connections of the door (`door.py`) over the shared core: the `Behind` the door
    hands them to once the daemon is built."""

    def __init__(
        self,
        core: ServerPort,
        runs: RunBook,
        tools: SessionTools,
        door: Door,
        pruner: Pruner,
        *,
        socket_path: str,
        token: str = "",
    ) -> None:
        self.core = core
        self.door = door
        self.runs = runs
        self.tools = tools  # what a session's own turn may ask (task/suggest, thread/*)
        self.pruner = pruner
        self.version = door.version
        self.socket_path = socket_path
        self.token = token
        self.started_at = 0.0
        self.on_stop: Callable[[], None] | None = None  # begins the daemon's orderly stop (serve.py)
        self._closed_since_collection = 0
        self._lsp_loading: asyncio.Future[Any] | None = None
        core.permissions.listeners.append(self._forward_permission)

    @property
    def connections(self) -> list[Connection]:
        """The connections that have initialized (and been attached), in no order."""
        return [link.served for link in self.door.links if isinstance(link.served, Connection)]

    # ------------------------------------------------------------ what the door asks

    def read_options(self, link: Link, options: Any) -> bool:
        """`initialize`'s options read with the model: the TCP token checked, a session token
        turned into the session the connection acts for; whether it answers permissions."""
        raw = options if isinstance(options, dict) else {}
        try:
            read = m.ClientOptions.model_validate(raw)
        except ValidationError as exc:
            raise invalid_params(exc) from None
        if link.access.needs_token:
            token = read.token or ""
            if not hmac.compare_digest(token.encode(), self.token.encode()):
                raise RpcError(ErrorCode.UNAUTHORIZED, gate.NO_TOKEN)
        if read.session_token is not None:
            acting_for = self.core.around.session_of_token(read.session_token)
            if acting_for is None:
                raise RpcError(
                    ErrorCode.UNAUTHORIZED, "this session token belongs to no session of this daemon"
                )
            link.access.acting_for = acting_for
        return read.answers_permissions

    def attach(self, link: Link) -> Connection:
        conn = Connection(self, link)
        if link.progress_supported or link.answers_permissions:
            self.load_lsp()  # it will be told progress or asked: pygls loads meanwhile
        if link.answers_permissions:
            # Questions already waiting go to the newcomer too.
            loop = asyncio.get_running_loop()
            for pending in list(self.core.permissions.pending.values()):
                loop.call_soon(conn.ask_permission, pending)
        return conn

    def load_lsp(self) -> asyncio.Future[Any]:
        """Import pygls and lsprotocol (`lsp_outbound.py`) on the importer's thread, once: as the
        first client that will need them initializes (an editor, before its first turn), or on
        first need. A script's or the command line's turns never wait for them, nor share the GIL
        with them."""
        if self._lsp_loading is None:
            self._lsp_loading = asyncio.ensure_future(importer.load(LSP_OUTBOUND))
            self._lsp_loading.add_done_callback(_settle_once_loaded)
        return self._lsp_loading

    async def lsp_loaded(self) -> None:
        """Wait until `lsp_outbound.py` has loaded (on its thread: never imported on the loop)."""
        await asyncio.shield(self.load_lsp())

    def reclaim(self) -> None:
        """A connection closed: its cycles (its streams', its pygls server's if it had one) are
        reclaimed now if young (cheap), and by a full collection once RECLAIM_EVERY have closed,
        not when Python's own thresholds get to them (a quarter of the heap again, 100 MB beside
        many sessions)."""
        self._closed_since_collection += 1
        if self._closed_since_collection >= RECLAIM_EVERY:
            self._closed_since_collection = 0
            gc.collect()
        else:
            gc.collect(1)

    # ------------------------------------------------------------

    def _forward_permission(self, pending: PendingPermission) -> None:
        for conn in self.connections:
            if conn.link.answers_permissions:
                conn.ask_permission(pending)

    def stop(self) -> m.StopResult:
        """Begin the orderly stop (after this answer goes out) and say what it will cancel."""
        if self.on_stop is None:
            raise RpcError(ErrorCode.CONFLICT, "this daemon cannot be stopped over its socket; signal it")
        asyncio.get_running_loop().call_soon(self.on_stop)
        turns = sum(
            (s.runtime.running is not None) + len(s.runtime.queue)
            for s in self.core.sessions.loaded()
            if s.runtime is not None
        )
        return m.StopResult(pid=os.getpid(), cancelled_turns=turns)

    def status(self) -> m.DaemonStatus:
        from datetime import UTC, datetime

        return m.DaemonStatus(
            version=self.version,
            pid=os.getpid(),
            started_at=datetime.fromtimestamp(self.started_at, UTC),
            socket=self.socket_path,
            tcp=self.door.tcp_address,
            state_dir=str(self.core.state_dir),
            agents=len(self.core.agents),
            sessions=self.core.feed.tally.open_by_status(),
            closed=self.core.feed.tally.closed,
            keep_closed=self.pruner.keep_closed,
            store=str(self.core.store.path),
            store_bytes=self.core.store.size(),
            head=self.core.events.head,
            clients=len(self.door.links),
            mcp_url=self.core.around.mcp_url,
        )

    def end_runs(self, outcome: str) -> None:
        """The runs of the clients attached now end with `outcome` (stored with what the stop stores)."""
        for conn in self.connections:
            if conn.run is not None:
                self.runs.end(conn.run, outcome)
