"""Every client connection's front: read from the moment the socket is bound, `initialize`
answered at once, and the rest handed to the server behind once the daemon is built.

A daemon binds its socket, opens its store and starts the door; the protocol's models and the
core load after, on a thread, while clients connect. Each connection's read loop is
here: frames (`wire.py`) read within the limits, every message through the gate (`gate.py`),
back-pressure on a client that does not read, a request limit, `exit`, and `initialize`
answered from `handshake.py` (its options read by the server's model when they are not the
plain ones, once the server is there). Any other message waits, unread past it, until the
daemon is built (`Door.open`): by then the turns a stop cut off have been announced, so no
client reads the event log before they are in it. Then `Behind.attach` gives the connection
its server (`server.Connection`), which takes each admitted message from here on.

Nothing here knows pygls, pydantic or the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any, Protocol

from sessiond.daemon import gate, handshake, wire
from sessiond.daemon.corked import Corked
from sessiond.daemon.gate import Access, Drop, Phase, Refuse
from sessiond.daemon.wire import Kind, Limits
from sessiond.protocol import fast_json
from sessiond.protocol.errors import ErrorCode, RpcError

log = logging.getLogger("sessiond.server")

# After a framing error: how long, and how much, the client's rest is read and dropped before closing.
LINGER_SECONDS = 2.0
LINGER_IDLE = 0.2  # ...and no longer than this once the client has gone quiet
LINGER_BYTES = 64 * 1024 * 1024
# At a stop, how long the requests being answered get to send their answers before connections close.
ANSWER_GRACE = 2.0
# Messages read from one connection before the others get a turn of the loop: at most BURST, and
# fewer while what they set going keeps the others waiting longer than TURN_BUDGET seconds. Each
# taken sets its work going before the agents hear of any: 200 prompts at once, taken 16 at a time,
# left the agent waiting on the daemon 21 ms a round against 17 ms at 8 (rounds 0.97x, 60 rounds
# side by side; 64 at a time, 1.13x slower).
BURST = 8
TURN_BUDGET = 0.005
# A message over the size limit is skipped, and the connection reads on, when it is at most this many
# times the limit; a larger one ends the connection.
SKIP_AT_MOST = 4


class Served(Protocol):
    """What serves one initialized connection behind the door: `server.Connection`."""

    def dispatch(self, message: wire.Message) -> None:
        """Run an admitted message (never `initialize` or `exit`, which the door takes)."""

    def closed(self) -> None:
        """The connection has closed: let go of what it holds."""

    def answering(self) -> list[asyncio.Task[Any]]:
        """The requests it is answering now."""


class Behind(Protocol):
    """What the door hands connections to once the daemon is built: `server.DaemonServer`."""

    def read_options(self, link: Link, options: Any) -> bool:
        """Read `initialize`'s options with the model (the TCP token, a session token, ...):
        whether the client answers permissions. Raises RpcError to refuse the connection."""

    def attach(self, link: Link) -> Served:
        """Serve a connection that has initialized."""


class Door:
    """The listening sockets and the connections read through them."""

    def __init__(self, version: str, limits: Limits) -> None:
        self.version = version
        self.limits = limits
        self.links: set[Link] = set()
        self.tcp_address: str | None = None
        self.behind: Behind | None = None
        self._opened = asyncio.Event()
        self._servers: list[asyncio.Server] = []

    def open(self, behind: Behind) -> None:
        """The daemon is built: what waited goes on to `behind`, and so does all that comes."""
        self.behind = behind
        for link in list(self.links):
            if link.initialized and link.served is None:
                link.served = behind.attach(link)
        self._opened.set()

    async def opened(self) -> Behind:
        await self._opened.wait()
        assert self.behind is not None
        return self.behind

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, needs_token: bool
    ) -> None:
        link = Link(self, Corked(writer), needs_token=needs_token)
        self.links.add(link)
        await link.serve(reader)

    async def listen_unix(self, sock: Any) -> None:
        """Serve `sock`, a unix socket already bound and listening."""
        server = await asyncio.start_unix_server(
            lambda r, w: self._accept(r, w, needs_token=False), sock=sock, limit=self.limits.header_line
        )
        self._servers.append(server)

    async def listen_tcp(self, host: str, port: int) -> tuple[str, int]:
        server = await asyncio.start_server(
            lambda r, w: self._accept(r, w, needs_token=True),
            host=host,
            port=port,
            limit=self.limits.header_line,
        )
        self._servers.append(server)
        address = server.sockets[0].getsockname()
        self.tcp_address = f"{address[0]}:{address[1]}"
        return address[0], address[1]

    def close_listeners(self) -> None:
        """Accept no new connections; those attached stay until stop_accepting."""
        for server in self._servers:
            server.close()

    async def stop_accepting(self) -> None:
        self.close_listeners()
        # The daemon is stopping, its turns cancelled: the requests still being answered (a
        # prompt's answer says it was cancelled) get a moment to send their answers first.
        answering = [task for link in self.links if link.served for task in link.served.answering()]
        if answering:
            await asyncio.wait(answering, timeout=ANSWER_GRACE)
        for link in list(self.links):
            await link.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)


class Link:
    """One client's connection: its standing at the gate, its read loop, its writes."""

    def __init__(self, door: Door, writer: asyncio.StreamWriter, *, needs_token: bool) -> None:
        self.door = door
        self.id = os.urandom(4).hex()
        self.writer = writer
        self.access = Access(needs_token=needs_token)
        self.progress_supported = False
        self.answers_permissions = False
        self.in_flight = 0  # requests being answered
        self.served: Served | None = None  # its server, once initialized and the daemon built
        self.closed = asyncio.Event()
        self.writable = True  # False from `exit` on: nothing more is written to it
        self.closing: asyncio.Future[None] | None = None

    @property
    def initialized(self) -> bool:
        return self.access.phase is not Phase.NEW

    async def serve(self, reader: asyncio.StreamReader) -> None:
        try:
            await self._read_loop(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("connection %s failed; it is closed, the daemon carries on", self.id)
        finally:
            await self.close()

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        limits = self.door.limits
        loop = asyncio.get_running_loop()
        burst = BURST  # messages to take before the others run, as their work allows (below)
        taken = 0  # messages taken since this loop last let the others run
        while not self.closed.is_set():
            # Back-pressure: a client that does not read its answers stops being read.
            await self.writer.drain()
            trusted = self.initialized
            max_body = limits.max_message if trusted else limits.unauthenticated_message
            try:
                if trusted:
                    body = await wire.read_frame(reader, limits, max_body=max_body)
                else:
                    async with asyncio.timeout(limits.unauthenticated_seconds):
                        body = await wire.read_frame(reader, limits, max_body=max_body)
            except TimeoutError:
                log.info("connection %s sent no whole message in time before initialize; closed", self.id)
                return
            except wire.FrameError as exc:
                await self._hang_up(reader, exc.code, exc.message)
                return
            except wire.Oversized as exc:
                if await self._skipped(reader, exc, trusted=trusted):
                    continue
                return
            if body is None:
                return
            waiting = self.receive(body)
            if waiting is not None:
                await waiting  # the daemon is being built: the next message waits in the socket
            # One client's burst must not hold the loop: others (and its own answers) run after a
            # few of its messages (a message not yet read in whole lets them run too). Not after
            # each one: what a burst asks of an agent then goes to it in a few writes, read in a
            # few wake-ups, not one a message. The more what they set going keeps the others
            # waiting (a flood of large pages), the fewer are taken at once.
            taken += 1
            if taken >= burst:
                taken = 0
                paused = loop.time()
                await asyncio.sleep(0)
                held_up = loop.time() - paused  # the others' turn, this burst's first steps in it
                burst = max(1, burst // 2) if held_up > TURN_BUDGET else min(BURST, burst * 2)

    async def _skipped(self, reader: asyncio.StreamReader, exc: wire.Oversized, *, trusted: bool) -> bool:
        """Answer a message over the size limit; True when it was skipped and the connection reads on."""
        if not trusted:
            await self._hang_up(
                reader,
                ErrorCode.INVALID_REQUEST,
                f"a message of {exc.length} bytes before initialize: at most {exc.limit} are taken "
                "until the connection has initialized",
            )
            return False
        too_much = f"a message of {exc.length} bytes is over this daemon's limit of {exc.limit} bytes"
        if exc.length > SKIP_AT_MOST * exc.limit:
            # No client means to send this much: the stream is not to be trusted further.
            await self._hang_up(reader, ErrorCode.INVALID_REQUEST, too_much + "; the connection is closed")
            return False
        # Answered by its id when it starts with one, then dropped unread.
        try:
            head = await reader.readexactly(min(exc.length, 1024))
            self.send_error(
                wire.leading_id(head),
                ErrorCode.INVALID_REQUEST,
                too_much + " and was skipped (`sessiond serve --max-message` raises it)",
            )
            await wire.skip(reader, exc.length - len(head))
        except (asyncio.IncompleteReadError, wire.FrameError):
            return False
        return True

    async def _hang_up(self, reader: asyncio.StreamReader, code: int, message: str) -> None:
        """Say why, then close; what the client is still sending is read and dropped for a moment,
        so that the closing does not reset the connection and lose the sentence."""
        self.send_error(None, code, message)
        with contextlib.suppress(Exception):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(LINGER_SECONDS):
                dropped = 0
                while dropped < LINGER_BYTES:
                    chunk = await asyncio.wait_for(reader.read(64 * 1024), LINGER_IDLE)
                    if not chunk:
                        break
                    dropped += len(chunk)

    def receive(self, body: bytes) -> asyncio.Future[None] | None:
        """Take one message body: check its envelope, pass the gate, then answer or dispatch it.
        A future when it has to wait for the daemon to be built (the read loop awaits it)."""
        try:
            message = wire.parse(body)
        except wire.Refusal as refusal:
            self.send_error(refusal.id, refusal.code, refusal.message)
            return None
        verdict = gate.admit(self.access, message)
        if isinstance(verdict, Drop):
            log.warning("connection %s: %s", self.id, verdict.reason)
            return None
        if isinstance(verdict, Refuse):
            self.send_error(message.id, verdict.code, verdict.message)
            return None
        if message.kind is Kind.REQUEST and self.in_flight >= self.door.limits.in_flight:
            self.send_error(
                message.id,
                ErrorCode.LIMIT_REACHED,
                f"this connection has {self.in_flight} requests being answered already: "
                "wait for some answers before sending more",
            )
            return None
        if message.method == gate.INITIALIZE:
            return self._initialize(message)
        if message.method == gate.EXIT:
            # One editor quitting must not stop the daemon for all: only its connection closes,
            # and nothing more is written to it (requests still running go on, unanswered).
            self.writable = False
            self.closing = asyncio.ensure_future(self.close())
            return None
        if message.method == gate.SHUTDOWN:
            self.access.phase = Phase.SHUT_DOWN
        if self.served is not None:
            self.served.dispatch(message)
            return None
        return asyncio.ensure_future(self._dispatch_when_open(message))

    async def _dispatch_when_open(self, message: wire.Message) -> None:
        await self.door.opened()
        if self.served is not None and not self.closed.is_set():
            self.served.dispatch(message)

    def _initialize(self, message: wire.Message) -> asyncio.Future[None] | None:
        params = message.params
        problem = handshake.problem(params)
        if problem is not None:
            self.send_error(message.id, ErrorCode.INVALID_PARAMS, problem)
            return None
        options = params.get("initializationOptions")
        answers = None if self.access.needs_token else handshake.plain_options(options)
        if answers is not None:
            self._welcome(message, answers)
            return None
        return asyncio.ensure_future(self._initialize_when_open(message, options))

    async def _initialize_when_open(self, message: wire.Message, options: Any) -> None:
        behind = await self.door.opened()
        try:
            answers = behind.read_options(self, options)
        except RpcError as exc:
            self.send_error(message.id, exc.code, exc.message, exc.data)
            return
        self._welcome(message, answers)

    def _welcome(self, message: wire.Message, answers_permissions: bool) -> None:
        self.progress_supported = handshake.work_done_progress(message.params)
        self.answers_permissions = answers_permissions
        self.access.phase = Phase.READY
        result = handshake.result(message.params, self.door.version)
        self.send_raw({"jsonrpc": "2.0", "id": message.id, "result": result})
        if self.door.behind is not None:
            self.served = self.door.behind.attach(self)

    # ------------------------------------------------------------ writing

    def send_error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": int(code), "message": message}
        if data is not None:
            error["data"] = data
        self.send_raw({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def send_result(self, msg_id: Any, result: bytes) -> None:
        """Answer a request with its result, already JSON text."""
        self.write_body(b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (fast_json.dumps(msg_id), result))

    def send_raw(self, payload: dict[str, Any]) -> None:
        self.write_body(fast_json.dumps(payload))

    def write_body(self, body: bytes) -> None:
        if self.writable and not self.writer.is_closing():
            self.writer.write(wire.frame(body))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send_raw({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        served, self.served = self.served, None
        with contextlib.suppress(Exception):
            self.writer.close()
        self.door.links.discard(self)
        if served is not None:
            served.closed()
