"""A small ACP client for driving the real demo agent process in tests.

It carries out fs/* against the real file system, terminal/* with asyncio
subprocesses, answers permission requests as told, and records every session
update in arrival order (appended synchronously, so the order is the order the
SDK dispatched them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.interfaces import Agent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    FileSystemCapabilities,
    InitializeResponse,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TextContentBlock,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from sessiond.client.connection import encode_message, read_message
from sessiond.protocol import methods as names
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError

AGENT_MODULE = "sessiond.daemon.demo_agent"
# Writes to a path containing this marker are refused, to test the failure path.
REFUSED_MARKER = "refused"
TIMEOUT = 15.0

Predicate = Callable[[Any], bool]


@dataclass
class _Terminal:
    process: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    pump: asyncio.Task[None] | None = None

    async def pump_output(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                # ACP: keep the end of the output when it exceeds the limit.
                del self.output[: len(self.output) - self.limit]
                self.truncated = True

    def exit_status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=f"signal {-code}")
        return TerminalExitStatus(exit_code=code)


@dataclass
class PermissionRequest:
    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]


class RecordingClient:
    """An ACP client whose behaviour tests can steer and whose traffic they can inspect."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[PermissionRequest] = []
        # "allow_once", "reject_once", "cancelled", or "wait" (answer only when `permission_answer` is set)
        self.permission_mode = "allow_once"
        self.permission_answer: asyncio.Future[str] | None = None
        self.permission_asked = asyncio.Event()
        self.terminal_requests: list[dict[str, Any]] = []
        self.killed_terminals: list[str] = []
        self.released_terminals: list[str] = []
        self._terminals: dict[str, _Terminal] = {}
        self._terminal_ids = itertools.count(1)
        self._waiters: list[tuple[Predicate, asyncio.Future[Any]]] = []

    # --- what tests look at ---------------------------------------------------

    def updates_of(self, session_id: str) -> list[Any]:
        return [update for sid, update in self.updates if sid == session_id]

    def kinds(self, session_id: str) -> list[str]:
        return [update.session_update for update in self.updates_of(session_id)]

    def reply(self, session_id: str) -> str:
        return "".join(
            update.content.text
            for update in self.updates_of(session_id)
            if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock)
        )

    def clear(self) -> None:
        self.updates.clear()

    async def wait_for_update(self, predicate: Predicate, timeout: float = TIMEOUT) -> Any:
        for _, update in self.updates:
            if predicate(update):
                return update
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiter = (predicate, future)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._waiters.remove(waiter)

    # --- ACP client methods ------------------------------------------------------

    def on_connect(self, conn: Agent) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        for predicate, future in self._waiters:
            if not future.done() and predicate(update):
                future.set_result(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(PermissionRequest(session_id, tool_call, options))
        self.permission_asked.set()
        answer = self.permission_mode
        if answer == "wait":
            self.permission_answer = asyncio.get_running_loop().create_future()
            answer = await self.permission_answer
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        if not Path(path).is_absolute():
            raise RequestError.invalid_params({"details": f"not absolute: {path}"})
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        if not Path(path).is_absolute():
            raise RequestError.invalid_params({"details": f"not absolute: {path}"})
        if REFUSED_MARKER in path:
            raise RequestError(-32000, f"writing {Path(path).name} is not allowed")
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self.terminal_requests.append(
            {"command": command, "args": args, "cwd": cwd, "output_byte_limit": output_byte_limit}
        )
        try:
            process = await asyncio.create_subprocess_exec(
                command,
                *(args or []),
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            raise RequestError(-32000, f"cannot start {command}: {exc.strerror}") from None
        terminal = _Terminal(process, output_byte_limit)
        terminal.pump = asyncio.create_task(terminal.pump_output())
        terminal_id = f"term-{next(self._terminal_ids)}"
        self._terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> _Terminal:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise RequestError.resource_not_found(terminal_id) from None

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        return TerminalOutputResponse(
            output=terminal.output.decode(errors="replace"),
            truncated=terminal.truncated,
            exit_status=terminal.exit_status(),
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self._terminal(terminal_id)
        await terminal.process.wait()
        if terminal.pump is not None:
            await terminal.pump
        status = terminal.exit_status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse | None:
        terminal = self._terminal(terminal_id)
        self.killed_terminals.append(terminal_id)
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is None:
            raise RequestError.resource_not_found(terminal_id)
        self.released_terminals.append(terminal_id)
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()
        await terminal.process.wait()
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def close(self) -> None:
        for terminal in self._terminals.values():
            with contextlib.suppress(ProcessLookupError):
                terminal.process.kill()
            await terminal.process.wait()
        self._terminals.clear()


@dataclass
class RunningAgent:
    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    client: RecordingClient
    initialized: InitializeResponse
    stderr: bytearray


FULL_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


@asynccontextmanager
async def running_agent(
    client: RecordingClient,
    *flags: str,
    env: Mapping[str, str] | None = None,
    capabilities: ClientCapabilities = FULL_CAPABILITIES,
) -> AsyncIterator[RunningAgent]:
    """Spawn `python -m sessiond.daemon.demo_agent FLAGS`, initialise it, and drain its stderr."""
    stderr = bytearray()
    drain: asyncio.Task[None] | None = None
    try:
        async with spawn_agent_process(
            client, sys.executable, "-m", AGENT_MODULE, *flags, env=env, use_unstable_protocol=True
        ) as (conn, process):
            # The SDK pipes stderr but never reads it: a full pipe would stall the agent.
            assert process.stderr is not None
            drain = asyncio.create_task(_drain(process.stderr, stderr))
            try:
                async with asyncio.timeout(TIMEOUT):
                    initialized = await conn.initialize(
                        protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
                    )
                yield RunningAgent(conn, process, client, initialized, stderr)
            finally:
                await client.close()
    finally:
        # The process has exited (the SDK waits for it): read stderr to its end.
        if drain is not None:
            async with asyncio.timeout(TIMEOUT):
                await drain
    # Whatever a test did, the agent must never have logged a traceback.
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")


async def _drain(stream: asyncio.StreamReader, sink: bytearray) -> None:
    while chunk := await stream.read(65536):
        sink += chunk


# --- a stand-in for the daemon, for the MCP bridge -------------------------------------------


class FakeSessiond:
    """Just enough of the daemon for the MCP bridge: initialize with a session token, the task and
    thread methods. Runs in the test's own loop on a unix socket; records what it was sent.

    Threads are made `done` with the reply `report of PROMPT`; a thread whose prompt contains
    "unknown" is refused with SessionNotFound, to test that daemon errors pass through verbatim;
    waiting for one whose prompt contains "hang" lasts until the request is cancelled.
    """

    def __init__(self, socket: Path, *, session: str = "main-1", token: str = "secret-token") -> None:
        self.socket = socket
        self.session = session
        self.token = token
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self.goodbyes = 0  # connections that ended with `exit`
        self.goodbye = asyncio.Event()  # set at each `exit`
        self.cancelled: list[str] = []  # methods whose requests were cancelled ($/cancelRequest)
        self.cancel_seen = asyncio.Event()
        self._arrived: dict[str, asyncio.Event] = {}
        self.tasks: list[Any] = []
        self.threads: dict[str, str] = {}  # id -> prompt
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def env(self) -> dict[str, str]:
        """The bridge's environment, as the daemon would set it."""
        return {
            "SESSIOND_SOCKET": str(self.socket),
            "SESSIOND_SESSION": self.session,
            "SESSIOND_SESSION_TOKEN": self.token,
        }

    async def arrival(self, method: str) -> None:
        """Wait until a message with this method has come (at once if one has)."""
        await self._arrived.setdefault(method, asyncio.Event()).wait()

    def methods(self) -> list[str]:
        return [message["method"] for message in self.received if "method" in message]

    def params_of(self, method: str) -> list[Any]:
        return [message.get("params") for message in self.received if message.get("method") == method]

    async def __aenter__(self) -> FakeSessiond:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def drop_connections(self) -> None:
        """Close every client connection (as a daemon restart would)."""
        for writer in list(self._writers):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        requests: dict[Any, asyncio.Task[None]] = {}
        try:
            while (message := await read_message(reader)) is not None:
                self.received.append(message)
                method = message.get("method")
                self._arrived.setdefault(str(method), asyncio.Event()).set()
                if "id" in message:
                    # Each request in a task of its own, so one that waits holds up no other.
                    task = asyncio.create_task(self._respond(writer, message))
                    requests[message["id"]] = task
                    task.add_done_callback(lambda _, key=message["id"]: requests.pop(key, None))
                elif method == "$/cancelRequest":
                    running = requests.get(message["params"]["id"])
                    if running is not None:
                        running.cancel()
                elif method == "exit":
                    self.goodbyes += 1
                    self.goodbye.set()
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for task in list(requests.values()):
                task.cancel()
            self._writers.discard(writer)
            writer.close()

    async def _respond(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        try:
            answer: dict[str, Any] = {"result": await self._answer(message["method"], message.get("params"))}
        except RpcError as e:
            answer = {"error": {"code": e.code, "message": str(e)}}
        except asyncio.CancelledError:
            self.cancelled.append(message["method"])
            self.cancel_seen.set()
            answer = {"error": {"code": int(ErrorCode.REQUEST_CANCELLED), "message": "cancelled"}}
        if not writer.is_closing():
            writer.write(encode_message({"jsonrpc": "2.0", "id": message["id"], **answer}))

    async def _answer(self, method: str, params: Any) -> Any:
        if method == "initialize":
            options = (params or {}).get("initializationOptions") or {}
            if options.get("sessionToken") != self.token:
                raise RpcError(int(ErrorCode.UNAUTHORIZED), "this session token belongs to no session")
            return {"capabilities": {}, "serverInfo": {"name": "sessiond", "version": "fake"}}
        if method == "shutdown":
            return None
        spec = names.METHODS[method]
        parsed: Any = spec.params.model_validate(params or {})
        now = datetime.now(UTC)
        if method == names.TASK_SUGGEST:
            task = m.TaskInfo(
                id=f"task-{len(self.tasks) + 1}",
                agent="demo",
                title=parsed.title,
                prompt=parsed.prompt,
                why=parsed.why,
                placement=parsed.placement,
                from_session=parsed.from_session,
                status="suggested",
                created_at=now,
            )
            self.tasks.append(task)
            return task.wire()
        if method == names.THREAD_START:
            if "unknown" in parsed.prompt:
                raise RpcError(int(ErrorCode.SESSION_NOT_FOUND), "no session 'nope': it was never opened")
            thread = f"thread-{len(self.threads) + 1}"
            self.threads[thread] = parsed.prompt
            return m.SessionInfo(
                id=thread,
                agent="demo",
                root="/tmp",
                placement=parsed.placement or "here",
                title=parsed.title,
                status=m.SessionStatus.QUEUED,
                status_since=now,
                created_at=now,
                kind="thread",
                parent=parsed.parent,
            ).wire()
        if method in (names.THREAD_STATUS, names.THREAD_WAIT):
            ids = [parsed.thread] if method == names.THREAD_STATUS else parsed.threads
            reports = []
            for thread in ids:
                if thread not in self.threads:
                    raise RpcError(int(ErrorCode.SESSION_NOT_FOUND), f"no thread {thread!r}")
                if method == names.THREAD_WAIT and "hang" in self.threads[thread]:
                    await asyncio.get_running_loop().create_future()  # until the request is cancelled
                reports.append(
                    m.ThreadReport(
                        session=thread,
                        status=m.SessionStatus.IDLE,
                        done=True,
                        reply=f"report of {self.threads[thread]}\nsecond line",
                    )
                )
            if method == names.THREAD_STATUS:
                return reports[0].wire()
            return m.ThreadReports(reports=reports).wire()
        raise RpcError(int(ErrorCode.METHOD_NOT_FOUND), f"the fake daemon has no {method}")
