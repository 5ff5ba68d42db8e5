"""A stand-in for the sessiond daemon, for the client's unit tests.

It speaks the wire of docs/protocol.md (LSP framing, JSON-RPC 2.0, the
methods of ``sessiond.protocol.methods`` with params checked against their
models) on a unix socket, from a thread with its own event loop, so both the
async client (in the test's loop) and the sync client (on its private loop)
can talk to it. Its framing is written independently of the client's on
purpose. Prompts are tiny scripts, like the demo agent's:

    say WORDS    reply WORDS, one turn.chunk per word
    sleep N      wait N seconds, then reply "slept"
    hang         wait until cancelled
    fail MSG     end the turn with AgentError MSG

Knobs (attributes) inject the faults the client must survive; ``received``
records every message a client sent, and ``wait_for`` waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sessiond.protocol import methods as names
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.methods import METHODS


def now() -> datetime:
    return datetime.now(UTC)


class Peer:
    """One accepted connection."""

    def __init__(
        self, daemon: FakeDaemon, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.daemon = daemon
        self.reader = reader
        self.writer = writer
        self.subscriptions: dict[str, m.EventsSubscribeParams] = {}
        self.prompts: dict[Any, str] = {}  # request id -> turn id
        self.tasks: set[asyncio.Task[Any]] = set()
        self.answers: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1000)
        self.sent = 0  # events sent, for the overflow knob
        self.run: str | None = None  # the run this connection declared

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        if not self.writer.is_closing():
            self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def ask(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request to the client and wait for its answer."""
        request_id = next(self.ids)
        self.answers[request_id] = asyncio.get_running_loop().create_future()
        self.send({"id": request_id, "method": method, "params": params})
        return await self.answers[request_id]

    async def serve(self) -> None:
        try:
            while True:
                head = await self.reader.readuntil(b"\r\n\r\n")
                length = int(head.split(b":")[1].split(b"\r\n")[0])
                message = json.loads(await self.reader.readexactly(length))
                self.daemon.record(message)
                self.dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for task in self.tasks:
                task.cancel()
            self.daemon.peers.discard(self)
            if self.run is not None:
                self.daemon.end_run(self.run, "stopped")  # gone without saying how it went
            self.writer.close()

    def dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            future = self.answers.pop(message["id"], None)
            if future is not None:
                future.set_result(message)
            return
        if "id" not in message:
            if method == "$/cancelRequest":
                turn = self.prompts.get(message["params"]["id"])
                if turn is not None:
                    self.daemon.cancel_turn(turn)
            elif method == "exit":
                self.writer.close()
            return
        task = asyncio.get_running_loop().create_task(
            self.answer(message["id"], method, message.get("params"))
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer(self, request_id: Any, method: str, params: Any) -> None:
        daemon = self.daemon
        if method in daemon.close_on:
            self.writer.close()
            return
        if method in daemon.garbage_on:
            self.writer.write(daemon.garbage_on[method])
            return
        try:
            if method == "initialize":
                result: Any = {"capabilities": {}, "serverInfo": {"name": "sessiond", "version": "fake"}}
            elif method == "shutdown":
                result = None
            elif method in METHODS:
                spec = METHODS[method]
                try:
                    parsed = spec.params.model_validate(params or {})
                except ValidationError as e:
                    raise RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {e}") from None
                if method == names.SESSION_PROMPT:
                    self.prompts[request_id] = parsed.turn_id  # type: ignore[attr-defined]
                handler = getattr(daemon, "do_" + method.replace("/", "_"), None)
                if handler is None:  # a method this stand-in does not have: as an older daemon answers
                    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method Not Found: {method}")
                outcome = await handler(self, parsed)
                result = outcome.wire()
            else:
                raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"no method {method}")
        except RpcError as e:
            self.send({"id": request_id, "error": e.to_json()})
        else:
            self.send({"id": request_id, "result": result})
        finally:
            self.prompts.pop(request_id, None)


class Turn:
    def __init__(self, turn_id: str, session: str, prompt: str) -> None:
        self.id = turn_id
        self.session = session
        self.prompt = prompt
        self.cancelled = asyncio.Event()


class FakeDaemon:
    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-sessiond", daemon=True)
        self.peers: set[Peer] = set()
        self.changed = threading.Condition()
        self.received: list[dict[str, Any]] = []
        self.agents: dict[str, m.AgentInfo] = {
            "demo": self._agent_info(m.AgentSpec(name="demo", command=["demo"]))
        }
        self.agents["demo"].builtin = True
        self.sessions: dict[str, m.SessionInfo] = {}
        self.transcripts: dict[str, list[m.TranscriptLine]] = {}
        self.session_locks: dict[str, asyncio.Lock] = {}
        self.turns: dict[str, Turn] = {}
        self.seq = 0
        self.log: list[m.Event] = []
        self.active = 0
        self.most_active = 0
        # knobs
        self.page_size = 200
        self.close_on: set[str] = set()  # close the connection instead of answering these methods
        self.garbage_on: dict[str, bytes] = {}  # write these bytes instead of answering
        self.early_events = False  # send an event before answering events/subscribe
        self.reply_before_ended = False  # answer session/prompt before sending turn.ended
        self.overflow_after: int | None = None  # end subscriptions with `overflow` after this many events
        self.supersede: set[m.EventKind] = set()  # send a `resync` snapshot in place of these events
        self.ask_client = False  # before a turn, send the client requests and record the answers
        self.client_answers: list[dict[str, Any]] = []
        self.runs: dict[str, m.RunInfo] = {}
        self.merges: list[m.MergeEntry] = []
        self.merge_release = asyncio.Event()  # merges wait for it when hold_merges is set
        self.hold_merges = False
        self.tasks: dict[str, m.TaskInfo] = {}
        self.background: set[asyncio.Task[Any]] = set()
        self.turn_ended = asyncio.Condition()  # notified on the fake's loop whenever a turn ends

    # ------------------------------------------------------------ running

    def start(self) -> FakeDaemon:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)
        return self

    async def _listen(self) -> None:
        self.server = await asyncio.start_unix_server(self._accept, path=str(self.socket_path))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(self, reader, writer)
        self.peers.add(peer)
        await peer.serve()

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            for peer in list(self.peers):
                peer.writer.close()
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the fake's loop and return its result (from the test's thread)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    # ------------------------------------------------------------ observing

    def record(self, message: dict[str, Any]) -> None:
        with self.changed:
            self.received.append(message)
            self.changed.notify_all()

    def touch(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not (result := predicate()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {predicate}")
                self.changed.wait(remaining)
        return result

    async def await_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """``wait_for`` for async tests, without blocking their loop."""
        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    def requests(self, method: str) -> list[dict[str, Any]]:
        with self.changed:
            return [msg for msg in self.received if msg.get("method") == method]

    def params_of(self, method: str) -> list[Any]:
        return [msg.get("params") for msg in self.requests(method)]

    def running(self, prefix: str = "") -> list[Turn]:
        return [t for t in list(self.turns.values()) if t.prompt.startswith(prefix)]

    # ------------------------------------------------------------ events

    def emit(
        self, kind: m.EventKind, *, session: str | None = None, turn: str | None = None, **data: Any
    ) -> None:
        self.seq += 1
        agent = self.sessions[session].agent if session in self.sessions else None
        event = m.Event(
            seq=self.seq, kind=kind, time=now(), agent=agent, session=session, turn=turn, data=data
        )
        self.log.append(event)
        for peer in list(self.peers):
            for subscription, params in list(peer.subscriptions.items()):
                if not self.matches(params, event):
                    continue
                if kind in self.supersede:
                    snapshot = {"head": event.seq, "sessions": [], "fleet": {"open": len(self.sessions)}}
                    self.notify(peer, subscription, [], resync=snapshot, through=event.seq)
                else:
                    self.send_events(peer, subscription, [event])

    @staticmethod
    def matches(params: m.EventsSubscribeParams, event: m.Event) -> bool:
        return (
            (params.sessions is None or event.session in params.sessions)
            and (params.agents is None or event.agent in params.agents)
            and (params.kinds is None or event.kind in params.kinds)
        )

    @staticmethod
    def notify(peer: Peer, subscription: str, events: list[m.Event], **extra: Any) -> None:
        params = {"subscription": subscription, "events": [e.wire() for e in events], **extra}
        if events:
            params.setdefault("through", events[-1].seq)
        peer.send({"method": names.EVENTS_NOTIFY, "params": params})

    def send_events(self, peer: Peer, subscription: str, events: list[m.Event]) -> None:
        self.notify(peer, subscription, events)
        if self.overflow_after is not None:
            peer.sent += len(events)
            if peer.sent >= self.overflow_after:
                peer.sent = 0
                peer.subscriptions.pop(subscription, None)
                self.notify(peer, subscription, [], overflow="too slow")

    async def do_events_subscribe(self, peer: Peer, p: m.EventsSubscribeParams) -> m.Subscription:
        subscription = f"sub-{uuid.uuid4().hex[:8]}"
        if self.early_events:
            self.seq += 1
            early = m.Event(seq=self.seq, kind=m.EventKind.SESSION_STATUS, time=now(), data={"early": True})
            self.notify(peer, subscription, [early])
            head = self.seq - 1
        else:
            head = self.seq
        peer.subscriptions[subscription] = p
        if p.since is not None and p.since < head:
            replay = [e for e in self.log if p.since < e.seq <= head and self.matches(p, e)]
            # After the answer, as the daemon does; ending with `through` the head, as it does.
            send = lambda: self.notify(peer, subscription, replay, through=head)  # noqa: E731
            asyncio.get_running_loop().call_soon(send)
        snapshot = None
        if p.snapshot:
            open_sessions = [
                s
                for s in self.sessions.values()
                if s.status is not m.SessionStatus.CLOSED and (p.sessions is None or s.id in p.sessions)
            ]
            snapshot = m.Snapshot(head=head, sessions=open_sessions, fleet=m.Fleet(open=len(open_sessions)))
        return m.Subscription(subscription=subscription, head=head, snapshot=snapshot)

    async def do_events_unsubscribe(self, peer: Peer, p: m.SubscriptionRef) -> m.Removed:
        peer.subscriptions.pop(p.subscription, None)
        return m.Removed()

    # ------------------------------------------------------------ agents

    def _agent_info(self, spec: m.AgentSpec) -> m.AgentInfo:
        return m.AgentInfo(
            name=spec.name,
            command=spec.command,
            env_keys=sorted(spec.env),
            options=spec.options,
            process=m.AgentProcessInfo(state=m.AgentProcessState.STOPPED),
        )

    def _agent(self, name: str) -> m.AgentInfo:
        if name not in self.agents:
            raise RpcError(ErrorCode.AGENT_NOT_FOUND, f"no agent named {name!r}")
        return self.agents[name]

    async def do_agent_get(self, peer: Peer, p: m.AgentRef) -> m.AgentInfo:
        return self._agent(p.name)

    async def do_agent_list(self, peer: Peer, p: m.Empty) -> m.AgentList:
        return m.AgentList(agents=list(self.agents.values()))

    async def do_agent_create(self, peer: Peer, p: m.AgentSpec) -> m.AgentInfo:
        if p.name in self.agents:
            raise RpcError(ErrorCode.AGENT_EXISTS, f"an agent named {p.name!r} exists")
        self.agents[p.name] = self._agent_info(p)
        return self.agents[p.name]

    async def do_agent_update(self, peer: Peer, p: m.AgentUpdateParams) -> m.AgentInfo:
        info = self._agent(p.name)
        if p.command is not None:
            info.command = p.command
        if p.env is not None:
            info.env_keys = sorted(p.env)
        if p.options is not None:
            merged = {**info.options.model_dump(), **p.options.model_dump(exclude_unset=True)}
            info.options = m.AgentOptions.model_validate(merged)
        return info

    async def do_agent_remove(self, peer: Peer, p: m.AgentRef) -> m.Removed:
        self._agent(p.name)
        del self.agents[p.name]
        return m.Removed()

    async def do_daemon_status(self, peer: Peer, p: m.Empty) -> m.DaemonStatus:
        counts: dict[m.SessionStatus, int] = {}
        for s in self.sessions.values():
            if s.status is not m.SessionStatus.CLOSED:
                counts[s.status] = counts.get(s.status, 0) + 1
        return m.DaemonStatus(
            version="fake",
            pid=0,
            started_at=now(),
            socket=str(self.socket_path),
            state_dir="/nowhere",
            agents=len(self.agents),
            sessions=counts,
            head=self.seq,
            clients=len(self.peers),
        )

    async def do_fleet_summary(self, peer: Peer, p: m.Empty) -> m.Fleet:
        open_sessions = [s for s in self.sessions.values() if s.status is not m.SessionStatus.CLOSED]
        return m.Fleet(
            open=len(open_sessions),
            working=sum(s.status is m.SessionStatus.WORKING for s in open_sessions),
            turns=sum(s.turns for s in self.sessions.values()),
        )

    async def do_session_transcript(self, peer: Peer, p: m.TranscriptParams) -> m.Transcript:
        lines = self.transcripts.get(self._session(p.session).id, [])
        start = p.offset if p.offset is not None else max(0, len(lines) - p.limit)
        return m.Transcript(lines=lines[start : start + p.limit], total=len(lines))

    def _transcribe(self, session: str, turn: str, role: str, text: str) -> None:
        lines = self.transcripts.setdefault(session, [])
        lines.append(m.TranscriptLine(n=len(lines), role=role, turn=turn, text=text))  # type: ignore[arg-type]

    async def do_permission_answer(self, peer: Peer, p: m.PermissionAnswerParams) -> m.Answered:
        return m.Answered(answered=p.permission == "p-1")

    # ------------------------------------------------------------ sessions

    def _session(self, session: str) -> m.SessionInfo:
        if session not in self.sessions:
            raise RpcError(ErrorCode.SESSION_NOT_FOUND, f"no session {session!r}")
        return self.sessions[session]

    def _set_status(self, info: m.SessionInfo, status: m.SessionStatus) -> None:
        info.status = status
        info.status_since = now()
        self.emit(m.EventKind.SESSION_STATUS, session=info.id, status=status.value)

    def _new_session(
        self, agent: str, root: str | None, placement: str | None, **fields: Any
    ) -> m.SessionInfo:
        info = m.SessionInfo(
            id=f"s-{uuid.uuid4().hex[:8]}",
            agent=agent,
            root=root or "/",
            placement=placement or "here",  # type: ignore[arg-type]
            status=m.SessionStatus.IDLE,
            status_since=now(),
            created_at=now(),
            **fields,
        )
        self.sessions[info.id] = info
        self.session_locks[info.id] = asyncio.Lock()
        return info

    async def do_session_open(self, peer: Peer, p: m.SessionOpenParams) -> m.SessionOpenResult:
        self._agent(p.agent)
        opened = [
            self._new_session(p.agent, p.root, p.placement, title=p.title, run=peer.run)
            for _ in range(p.count)
        ]
        return m.SessionOpenResult(sessions=opened)

    async def do_session_list(self, peer: Peer, p: m.SessionListParams) -> m.SessionPage:
        matching = [
            s
            for s in self.sessions.values()
            if (p.agent is None or s.agent == p.agent)
            and (p.status is None or s.status in p.status)
            and (p.include_closed or s.status is not m.SessionStatus.CLOSED)
            and (p.run is None or s.run == p.run)
            and (p.kind is None or s.kind in p.kind)
        ]
        start = int(p.cursor or 0)
        size = min(p.limit, self.page_size)
        page = matching[start : start + size]
        more = start + size < len(matching)
        return m.SessionPage(
            sessions=page, total=len(matching), next_cursor=str(start + size) if more else None
        )

    async def do_session_get(self, peer: Peer, p: m.SessionRef) -> m.SessionInfo:
        return self._session(p.session)

    async def do_session_close(self, peer: Peer, p: m.SessionRef) -> m.SessionInfo:
        info = self._session(p.session)
        for turn in list(self.turns.values()):
            if turn.session == info.id:
                turn.cancelled.set()
        self._set_status(info, m.SessionStatus.CLOSED)
        self.touch()
        return info

    async def do_session_cancel(self, peer: Peer, p: m.SessionCancelParams) -> m.CancelResult:
        self._session(p.session)
        hit = [
            t
            for t in self.turns.values()
            if t.session == p.session
            and (p.turn_id is None or t.id == p.turn_id)
            and not t.cancelled.is_set()
        ]
        for turn in hit:
            turn.cancelled.set()
        return m.CancelResult(cancelled=len(hit))

    def release(self, prefix: str) -> int:
        """End the running turns whose prompt starts with ``prefix`` (as cancelled); how many."""

        def end() -> int:
            turns = [
                t for t in self.turns.values() if t.prompt.startswith(prefix) and not t.cancelled.is_set()
            ]
            for turn in turns:
                turn.cancelled.set()
            return len(turns)

        return int(self.call(end))

    def cancel_turn(self, turn_id: str) -> None:
        if turn_id in self.turns:
            self.turns[turn_id].cancelled.set()

    async def do_session_prompt(self, peer: Peer, p: m.SessionPromptParams) -> m.TurnResult:
        info = self._session(p.session)
        if info.status is m.SessionStatus.CLOSED:
            raise RpcError(ErrorCode.SESSION_CLOSED, f"session {p.session} is closed")
        turn = Turn(p.turn_id or uuid.uuid4().hex, info.id, p.prompt)
        self.turns[turn.id] = turn
        try:
            self.emit(m.EventKind.TURN_QUEUED, session=info.id, turn=turn.id, prompt=p.prompt)
            async with self.session_locks[info.id]:
                return await self._run_turn(peer, info, turn)
        finally:
            del self.turns[turn.id]
            self.touch()
            async with self.turn_ended:
                self.turn_ended.notify_all()

    async def _run_turn(self, peer: Peer, info: m.SessionInfo, turn: Turn) -> m.TurnResult:
        started = now()
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        info.queued_turns = 0
        self._set_status(info, m.SessionStatus.WORKING)
        self.emit(m.EventKind.TURN_STARTED, session=info.id, turn=turn.id)
        self.touch()
        if self.ask_client:
            self.client_answers.append(await peer.ask("window/workDoneProgress/create", {"token": turn.id}))
            self.client_answers.append(await peer.ask("bogus/method", {}))
        verb, _, rest = turn.prompt.partition(" ")
        text, error, stop = "", None, "end_turn"
        try:
            if verb == "say":
                for i, word in enumerate(rest.split(" ")):
                    piece = word if i == 0 else " " + word
                    text += piece
                    self.emit(m.EventKind.TURN_CHUNK, session=info.id, turn=turn.id, text=piece)
            elif verb in ("sleep", "hang"):
                wait = float(rest) if verb == "sleep" else None
                try:
                    await asyncio.wait_for(turn.cancelled.wait(), wait)
                    stop = "cancelled"
                except TimeoutError:
                    text = "slept"
            elif verb == "fail":
                error = rest
            else:
                text = turn.prompt
        finally:
            self.active -= 1
        if error is not None:
            self._set_status(info, m.SessionStatus.FAILED)
            self.emit(m.EventKind.TURN_ENDED, session=info.id, turn=turn.id, error=error)
            raise RpcError(ErrorCode.AGENT_ERROR, error, {"agentCode": -1})
        info.turns += 1
        busy = (info.usage.busy_seconds if info.usage else 0.0) + (now() - started).total_seconds()
        info.usage = m.SessionUsage(turns=info.turns, total_tokens=10 * info.turns, busy_seconds=busy)
        self._transcribe(info.id, turn.id, "user", turn.prompt)
        self._transcribe(info.id, turn.id, "agent", text)
        info.recap = text.splitlines()[0] if text else None
        self._set_status(info, m.SessionStatus.STOPPED if stop == "cancelled" else m.SessionStatus.IDLE)
        result = m.TurnResult(
            turn_id=turn.id, session=info.id, text=text, stop_reason=stop, started_at=started, ended_at=now()
        )
        if self.reply_before_ended:
            # Runs after this step of the task, which writes the answer first.
            ended = lambda: self.emit(m.EventKind.TURN_ENDED, session=info.id, turn=turn.id)  # noqa: E731
            asyncio.get_running_loop().call_soon(ended)
        else:
            self.emit(m.EventKind.TURN_ENDED, session=info.id, turn=turn.id, stopReason=stop)
        return result

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def prompt_in_background(self, peer: Peer, session: str, prompt: str) -> None:
        params = m.SessionPromptParams(session=session, prompt=prompt, turn_id=uuid.uuid4().hex)
        with contextlib.suppress(RpcError):
            await self.do_session_prompt(peer, params)

    # ------------------------------------------------------------ runs

    async def do_run_declare(self, peer: Peer, p: m.RunDeclareParams) -> m.RunInfo:
        if peer.run is not None and self.runs[peer.run].outcome is None:
            raise RpcError(ErrorCode.CONFLICT, f"this connection's run {peer.run!r} has not ended")
        run = m.RunInfo(id=f"r-{uuid.uuid4().hex[:8]}", name=p.name, argv=p.argv, cwd=p.cwd, started_at=now())
        self.runs[run.id] = run
        peer.run = run.id
        return self.run_info(run.id)

    def end_run(self, run_id: str, outcome: str) -> None:
        run = self.runs[run_id]
        if run.outcome is None:
            run.outcome = outcome  # type: ignore[assignment]
            run.ended_at = now()
        self.touch()

    def run_info(self, run_id: str) -> m.RunInfo:
        run = self.runs[run_id]
        mine = [s for s in self.sessions.values() if s.run == run_id]
        end = run.ended_at or now()
        return run.model_copy(
            update={
                "sessions": len(mine),
                "turns": sum(s.turns for s in mine),
                "serial_seconds": sum(s.usage.busy_seconds for s in mine if s.usage),
                "wall_seconds": (end - run.started_at).total_seconds(),
            }
        )

    async def do_run_end(self, peer: Peer, p: m.RunEndParams) -> m.RunInfo:
        if peer.run is None:
            raise RpcError(ErrorCode.CONFLICT, "this connection declared no run")
        run_id, peer.run = peer.run, None
        self.end_run(run_id, p.outcome)
        return self.run_info(run_id)

    async def do_run_list(self, peer: Peer, p: m.Empty) -> m.RunList:
        return m.RunList(runs=[self.run_info(r) for r in self.runs])

    async def do_run_get(self, peer: Peer, p: m.RunRef) -> m.RunInfo:
        if p.run not in self.runs:
            raise RpcError(ErrorCode.RUN_NOT_FOUND, f"no run {p.run!r}")
        return self.run_info(p.run)

    # ------------------------------------------------------------ merges

    async def do_merge_request(self, peer: Peer, p: m.MergeParams) -> m.MergeEntry:
        info = self._session(p.session)
        if info.placement != "worktree":
            raise RpcError(
                ErrorCode.CONFLICT, f"session {info.id!r} works {info.placement}, not in a worktree"
            )
        entry = m.MergeEntry(
            session=info.id,
            branch=f"sessiond/{info.id}-1",
            base="main",
            strategy=p.strategy,
            gate=p.gate,
            status="queued",
            position=1,
        )
        self.merges.append(entry)
        self.emit(m.EventKind.MERGE_STEP, session=info.id, step="queued", branch=entry.branch, position=1)
        self.spawn(self._merge(entry, p))
        return entry.model_copy()

    async def _merge(self, entry: m.MergeEntry, p: m.MergeParams) -> None:
        def step(name: str, **data: Any) -> None:
            self.emit(m.EventKind.MERGE_STEP, session=entry.session, step=name, branch=entry.branch, **data)

        if self.hold_merges:
            await self.merge_release.wait()
        entry.status, entry.position = "running", 0
        step("started", base="main", strategy=p.strategy, gate=p.gate)
        title = self.sessions[entry.session].title or ""
        if "conflict" in title:
            entry.conflicts = ["app.py"]
            step("conflict", files=entry.conflicts, base="main")
            entry.status, entry.reason = "failed", "app.py conflicts with main"
        else:
            step("integrated", commit="c0ffee", strategy=p.strategy)
            if p.gate:
                step("gate-started", command=p.gate)
                if "false" in p.gate:
                    entry.gate_output = "the gate said no"
                    step("gate-failed", command=p.gate, exitCode=1, output=entry.gate_output)
                    entry.status, entry.reason = "failed", f"the gate `{p.gate}` failed (exit code 1)"
                else:
                    step("gate-passed", command=p.gate)
        entry.position = None
        if entry.status == "failed":
            step("failed", reason=entry.reason, conflicts=entry.conflicts, gateOutput=entry.gate_output)
            return
        entry.commit = "c0ffee"
        step("landed", base="main", commit="c0ffee")
        entry.kept = None if not p.keep else True
        step("kept" if p.keep else "cleaned", reason=None)
        entry.status = "merged"
        step("merged", base="main", commit="c0ffee")

    async def do_merge_list(self, peer: Peer, p: m.Empty) -> m.MergeList:
        return m.MergeList(entries=list(self.merges))

    # ------------------------------------------------------------ side chats, tasks, threads

    async def do_session_side(self, peer: Peer, p: m.SideParams) -> m.SideResult:
        main = self._session(p.session)
        side = self._new_session(main.agent, main.root, "here", kind="side", parent=main.id, title="side")
        reply = None
        if p.question is not None:
            params = m.SessionPromptParams(session=side.id, prompt=p.question, turn_id=uuid.uuid4().hex)
            reply = await self.do_session_prompt(peer, params)
        return m.SideResult(session=side, forked=True, reply=reply)

    def _tree(self, info: m.SessionInfo) -> m.TreeNode:
        children = [self._tree(s) for s in self.sessions.values() if s.parent == info.id]
        tokens = (info.usage.total_tokens if info.usage else 0) + sum(c.tokens for c in children)
        return m.TreeNode(session=info, children=children, tokens=tokens, cost=sum(c.cost for c in children))

    async def do_session_tree(self, peer: Peer, p: m.SessionRef) -> m.TreeNode:
        return self._tree(self._session(p.session))

    async def do_session_broadcast(self, peer: Peer, p: m.BroadcastParams) -> m.BroadcastResult:
        if p.threads_of is not None:
            targets = [
                s.id for s in self.sessions.values() if s.parent == p.threads_of and s.kind == "thread"
            ]
        else:
            targets = [self._session(s).id for s in p.sessions or []]
        for session in targets:
            self.spawn(self.prompt_in_background(peer, session, p.prompt))
        return m.BroadcastResult(sessions=targets)

    async def do_task_suggest(self, peer: Peer, p: m.TaskSuggestParams) -> m.TaskInfo:
        agent = p.agent or (self._session(p.from_session).agent if p.from_session else "demo")
        task = m.TaskInfo(
            id=f"k-{uuid.uuid4().hex[:8]}",
            agent=agent,
            title=p.title,
            prompt=p.prompt,
            why=p.why,
            placement=p.placement,
            root=p.root,
            from_session=p.from_session,
            status="suggested",
            created_at=now(),
        )
        self.tasks[task.id] = task
        return task

    def _task(self, task_id: str) -> m.TaskInfo:
        if task_id not in self.tasks:
            raise RpcError(ErrorCode.TASK_NOT_FOUND, f"no task {task_id!r}")
        return self.tasks[task_id]

    async def do_task_list(self, peer: Peer, p: m.TaskListParams) -> m.TaskList:
        found = [
            t
            for t in reversed(self.tasks.values())
            if (p.agent is None or t.agent == p.agent) and (p.status is None or t.status in p.status)
        ]
        return m.TaskList(tasks=found)

    async def do_task_accept(self, peer: Peer, p: m.TaskRef) -> m.TaskInfo:
        task = self._task(p.task)
        session = self._new_session(
            task.agent, task.root, task.placement, kind="task", parent=task.from_session
        )
        task.status, task.session = "running", session.id

        async def run() -> None:
            await self.prompt_in_background(peer, session.id, task.prompt)
            task.status = "done"

        self.spawn(run())
        return task

    async def do_task_dismiss(self, peer: Peer, p: m.TaskDismissParams) -> m.TaskInfo:
        task = self._task(p.task)
        task.status, task.reason = "dismissed", p.reason
        return task

    async def do_thread_start(self, peer: Peer, p: m.ThreadStartParams) -> m.SessionInfo:
        parent = self._session(p.parent)
        thread = self._new_session(
            parent.agent, parent.root, p.placement or "here", kind="thread", parent=parent.id, title=p.title
        )
        thread.queued_turns = 1
        self.spawn(self.prompt_in_background(peer, thread.id, p.prompt))
        return thread

    def _report(self, session: str) -> m.ThreadReport:
        info = self._session(session)
        busy = any(t.session == info.id for t in self.turns.values()) or info.queued_turns > 0
        return m.ThreadReport(session=info.id, status=info.status, done=not busy, reply=info.recap)

    async def do_thread_status(self, peer: Peer, p: m.ThreadRef) -> m.ThreadReport:
        return self._report(p.thread)

    async def do_thread_wait(self, peer: Peer, p: m.ThreadWaitParams) -> m.ThreadReports:
        async def done() -> None:
            async with self.turn_ended:
                await self.turn_ended.wait_for(lambda: all(self._report(t).done for t in p.threads))

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done(), p.timeout)
        return m.ThreadReports(reports=[self._report(t) for t in p.threads])
