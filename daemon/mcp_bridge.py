"""The MCP server the daemon offers each session: suggest tasks, start threads, wait for them.

``python -m sessiond.daemon.mcp_bridge`` speaks MCP on stdin/stdout (the
official ``mcp`` SDK's ``MCPServer``) and acts for ONE session. The daemon
names it in the ``mcpServers`` of ``session/new`` (and of load, resume, fork),
so the agent starts it as a child process and calls its tools like any other
MCP server's. Each tool is one request to the daemon over its unix socket:

- ``suggest_task(title, prompt, why, placement)`` → ``task/suggest`` from this session;
- ``start_thread(prompt, placement, title)`` → ``thread/start`` with this session as parent;
- ``thread_status(id)`` → ``thread/status``;
- ``wait_threads(ids, timeout)`` → ``thread/wait``.

Its configuration is its environment, which the daemon sets: ``SESSIOND_SOCKET``
(the daemon's socket), ``SESSIOND_SESSION`` (the session it acts for) and
``SESSIOND_SESSION_TOKEN`` (a secret the daemon made for that session). The
token goes to the daemon as ``initializationOptions.sessionToken`` of
``initialize``; the daemon lets the connection act for that session only.

The connection to the daemon is opened on the first tool call (so the agent can
start the server even while the daemon is busy, and listing tools needs no
daemon), and opened again on the next call after it was lost. It uses the
Python client's own JSON-RPC layer (``sessiond.client.connection``), and the
params and results are the wire models of ``sessiond.protocol``.

Results are short JSON texts for a model to read. A daemon error becomes an MCP
tool error (``isError``) whose text is the daemon's message, verbatim.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from sessiond.client import launch
from sessiond.client.connection import Connection
from sessiond.client.errors import ConnectionLost, DaemonNotRunning, SessiondError
from sessiond.protocol import methods as m
from sessiond.protocol import models as pm

log = logging.getLogger(__name__)

SERVER_NAME = "sessiond"
CLIENT_NAME = "sessiond-mcp-bridge"
SOCKET_ENV = "SESSIOND_SOCKET"
SESSION_ENV = "SESSIOND_SESSION"
TOKEN_ENV = "SESSIOND_SESSION_TOKEN"
# initialize and the goodbye are quick; a tool's own request (thread/wait) is as long as it takes.
HANDSHAKE_TIMEOUT = 30.0
GOODBYE_TIMEOUT = 5.0

INSTRUCTIONS = (
    "Tools of sessiond, the daemon that runs this session. suggest_task proposes work for later: "
    "it waits in the user's inbox until accepted, then runs in a session of its own. start_thread "
    "starts a helper session (a thread) on part of this job, in its own worktree; it reports back "
    "through thread_status and wait_threads (its last reply, plan and changed files)."
)

R = TypeVar("R", bound=BaseModel)


class ConfigError(Exception):
    """The environment lacks what the bridge needs; the message says what."""


class BridgeError(Exception):
    """A tool call that failed; its message is what the model reads (the daemon's own, when it answered)."""


@dataclass(frozen=True)
class BridgeConfig:
    socket: Path
    session: str
    token: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BridgeConfig:
        missing = [name for name in (SOCKET_ENV, SESSION_ENV, TOKEN_ENV) if not env.get(name)]
        if missing:
            raise ConfigError(
                f"sessiond's MCP bridge needs {', '.join(missing)} in its environment "
                "(the daemon sets them when it offers the bridge to a session)"
            )
        return cls(socket=Path(env[SOCKET_ENV]), session=env[SESSION_ENV], token=env[TOKEN_ENV])


def _version() -> str:
    try:
        return importlib.metadata.version("sessiond")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _summary(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


class Link(Protocol):
    """Where the tools' requests go, on behalf of one session."""

    @property
    def session(self) -> str: ...

    async def call(self, method: str, params: Mapping[str, Any], result: type[R]) -> R:
        """``method``'s result as ``result``. Every failure is a BridgeError saying why."""
        ...


def checked_params(method: str, params: Mapping[str, Any], result: type[BaseModel]) -> BaseModel:
    """``params`` as ``method``'s params model; BridgeError naming each field at fault."""
    spec = m.METHODS[method]
    assert spec.result is result, f"{method} answers {spec.result.__name__}"
    try:
        return spec.params.model_validate(dict(params))
    except ValidationError as e:
        raise BridgeError(_summary(e)) from None


class DaemonLink:
    """One connection to the daemon on behalf of one session: opened on first use, again after a loss."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self._connection: Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def session(self) -> str:
        return self.config.session

    async def call(self, method: str, params: Mapping[str, Any], result: type[R]) -> R:
        """Send ``method``; its result as ``result``. Every failure is a BridgeError saying why."""
        checked = checked_params(method, params, result)
        connection = await self._connected()
        try:
            raw = await connection.request(
                method, checked.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
        except SessiondError as e:
            raise BridgeError(str(e)) from None  # the daemon's own words
        except ConnectionLost as e:
            raise BridgeError(f"lost the connection to the sessiond daemon: {e}") from None
        try:
            return result.model_validate(raw)
        except ValidationError as e:
            raise BridgeError(
                f"the daemon's answer to {method} does not fit this bridge ({_summary(e)}); "
                "are the daemon and the bridge the same version?"
            ) from None

    async def _connected(self) -> Connection:
        async with self._lock:
            if self._connection is not None and not self._connection.closed:
                return self._connection
            self._connection = None
            self._connection = await self._open()
            return self._connection

    async def _open(self) -> Connection:
        socket = self.config.socket
        try:
            reader, writer, path = await launch.open_streams(socket, start=False)
        except DaemonNotRunning:
            raise BridgeError(
                f"cannot reach the sessiond daemon at {socket}: nothing accepts connections there"
            ) from None
        except (OSError, ValueError) as e:  # ValueError: a socket path too long for a unix socket
            raise BridgeError(f"cannot reach the sessiond daemon at {socket}: {e}") from None
        connection = Connection.open(reader, writer, peer=str(path))
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                await connection.request(
                    "initialize",
                    {
                        "processId": os.getpid(),
                        "clientInfo": {"name": CLIENT_NAME, "version": _version()},
                        "capabilities": {},
                        "initializationOptions": {
                            "sessionToken": self.config.token,
                            "clientName": f"{CLIENT_NAME} for {self.config.session}",
                        },
                    },
                )
                await connection.notify("initialized", {})
        except BaseException as e:
            await connection.close()
            if isinstance(e, SessiondError):
                raise BridgeError(str(e)) from None
            if isinstance(e, TimeoutError):
                raise BridgeError(
                    f"the sessiond daemon at {socket} did not answer initialize within "
                    f"{HANDSHAKE_TIMEOUT:g} s"
                ) from None
            if isinstance(e, ConnectionLost):
                raise BridgeError(f"lost the connection to the sessiond daemon: {e}") from None
            raise
        return connection

    async def aclose(self) -> None:
        """Say goodbye (bounded) and close. Idempotent."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            if not connection.closed:
                async with asyncio.timeout(GOODBYE_TIMEOUT):
                    await connection.request("shutdown")
                    await connection.notify("exit")
        except (Exception, TimeoutError) as e:
            log.debug("goodbye to the daemon failed: %r", e)
        finally:
            await connection.close()


# ---------------------------------------------------------------- what the tools answer


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _plan(plan: pm.Plan | None) -> dict[str, Any] | None:
    if plan is None or not plan.entries:
        return None
    return {
        "done": plan.done,
        "total": plan.total,
        "entries": [{"content": entry.content, "status": entry.status} for entry in plan.entries],
    }


def _changes(changes: pm.Changes | None) -> dict[str, Any] | None:
    if changes is None or not changes.files:
        return None
    return {
        "added": changes.added,
        "removed": changes.removed,
        "files": [
            {"path": item.path, "kind": str(item.kind), "added": item.added, "removed": item.removed}
            for item in changes.files
        ],
    }


def report_json(report: pm.ThreadReport) -> dict[str, Any]:
    """A thread's report as a model reads it: what it said, its plan and changed files."""
    shown: dict[str, Any] = {
        "thread": report.session,
        "status": str(report.status),
        "done": report.done,
        "reply": report.reply,
        "error": report.error,
        "plan": _plan(report.plan),
        "changes": _changes(report.changes),
    }
    return {key: value for key, value in shown.items() if value is not None}


def task_json(task: pm.TaskInfo) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "task": task.id,
        "status": task.status,
        "title": task.title,
        "agent": task.agent,
        "placement": task.placement,
    }
    return {key: value for key, value in shown.items() if value is not None}


def thread_json(session: pm.SessionInfo) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "thread": session.id,
        "status": str(session.status),
        "title": session.title,
        "placement": session.placement,
        "root": session.root,
    }
    return {key: value for key, value in shown.items() if value is not None}


# ---------------------------------------------------------------- the server

Title = Annotated[str, Field(min_length=1, max_length=300, description="A short title for the inbox.")]
Placement = Annotated[
    pm.Placement | None,
    Field(description="Where it would run: here, worktree, sandbox, container or ssh. "
          "Default: a worktree in a git repository, else here."),
]  # fmt: skip
ThreadId = Annotated[str, Field(min_length=1, description="A thread's id, as start_thread gave it.")]


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


LinkFor = Callable[[Context], Link]


async def _answer(
    link_for: LinkFor, ctx: Context, work: Callable[[Link], Awaitable[dict[str, Any]]]
) -> CallToolResult:
    """The tool's result: its JSON, or an error result whose text is the failure's message, verbatim."""
    try:
        value = await work(link_for(ctx))
    except BridgeError as e:
        return _text(str(e), error=True)
    return _text(_dumps(value))


def build_server(link_for: LinkFor) -> MCPServer:
    """The MCP server with its four tools, each a request through the link of the session asking
    (one fixed link for the stdio bridge; found by the request's credentials where one server
    serves many sessions)."""

    async def suggest(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return task_json(
            await link.call(m.TASK_SUGGEST, {**params, "from_session": link.session}, pm.TaskInfo)
        )

    async def start(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return thread_json(
            await link.call(m.THREAD_START, {**params, "parent": link.session}, pm.SessionInfo)
        )

    async def status(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return report_json(await link.call(m.THREAD_STATUS, params, pm.ThreadReport))

    async def wait(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        reports = await link.call(m.THREAD_WAIT, params, pm.ThreadReports)
        return {"threads": [report_json(report) for report in reports.reports]}

    async def suggest_task(
        ctx: Context,
        title: Title,
        prompt: Annotated[str, Field(min_length=1, description="What the task's session is to do.")],
        why: Annotated[str | None, Field(description="Why this is worth doing.")] = None,
        placement: Placement = None,
    ) -> CallToolResult:
        """Suggest a task: it waits in the user's inbox; once accepted it runs in a session of its own,
        handed this session's context. Answers the task's id and status."""
        params = {"title": title, "prompt": prompt, "why": why, "placement": placement}
        return await _answer(link_for, ctx, lambda link: suggest(link, params))

    async def start_thread(
        ctx: Context,
        prompt: Annotated[str, Field(min_length=1, description="What the thread is to do.")],
        placement: Placement = None,
        title: Annotated[str | None, Field(description="A short title for the thread.")] = None,
    ) -> CallToolResult:
        """Start a thread: a helper session of its own (its own worktree by default) that works on
        the prompt and reports back. Answers its id; follow it with thread_status or wait_threads."""
        params = {"prompt": prompt, "placement": placement, "title": title}
        return await _answer(link_for, ctx, lambda link: start(link, params))

    async def thread_status(ctx: Context, id: ThreadId) -> CallToolResult:
        """A thread's report now: its status, whether it is done, its last reply, plan and changed
        files."""
        return await _answer(link_for, ctx, lambda link: status(link, {"thread": id}))

    async def wait_threads(
        ctx: Context,
        ids: Annotated[list[str], Field(min_length=1, description="The threads' ids.")],
        timeout: Annotated[
            float | None, Field(gt=0, description="Seconds to wait at most; then the reports as they are.")
        ] = None,
    ) -> CallToolResult:
        """Wait until the threads are done (or the timeout runs out); answers their reports."""
        return await _answer(
            link_for, ctx, lambda link: wait(link, {"threads": list(ids), "timeout": timeout})
        )

    server: MCPServer = MCPServer(
        SERVER_NAME, version=_version(), instructions=INSTRUCTIONS, log_level="WARNING"
    )
    for tool in (suggest_task, start_thread, thread_status, wait_threads):
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""))
    return server


async def serve(config: BridgeConfig) -> None:
    """Serve MCP on stdin/stdout until the agent closes stdin."""
    link = DaemonLink(config)
    try:
        await build_server(lambda ctx: link).run_stdio_async()
    finally:
        await link.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print(
            "usage: python -m sessiond.daemon.mcp_bridge\n"
            "An MCP server on stdio for one sessiond session; configured by "
            f"{SOCKET_ENV}, {SESSION_ENV} and {TOKEN_ENV}.",
            file=sys.stderr,
        )
        return 2
    try:
        config = BridgeConfig.from_env(os.environ)
    except ConfigError as e:
        print(f"sessiond-mcp-bridge: {e}", file=sys.stderr)
        return 2
    # stdout carries the protocol: anything logged goes to stderr.
    logging.basicConfig(
        level=logging.WARNING, format="sessiond-mcp-bridge %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
