"""The demo agent as an MCP client: the servers a session was given, each started on first use.

ACP hands an agent its MCP servers in `session/new` (and load, resume, fork).
The demo agent remembers them per session and, the first time a script calls
a tool of one, connects to it with the official `mcp` SDK's client (starting
a stdio server as a child process; an http server over streamable HTTP, with
the headers it was given) and keeps it for the session's life: closed on
`session/close` and when the agent exits. It advertises http support unless
started with `--no-mcp-http`; sse servers are not taken.

A connection's context managers belong to anyio, whose cancel scopes must be
left by the task that entered them; so each running server is owned by a task
of its own, and turns only send requests through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp.schema import McpServerHttp, McpServerStdio

if TYPE_CHECKING:
    # The MCP SDK costs about a second to import: loaded when a script first calls a tool.
    from mcp import Client, StdioServerParameters
    from mcp.types import CallToolResult

log = logging.getLogger(__name__)

SESSIOND_SERVER = "sessiond"
CLIENT_NAME = "sessiond-demo-agent"
CLIENT_VERSION = "0.1.0"
# Starting a server and its handshake; a tool call itself may take as long as it takes.
START_TIMEOUT = 30.0
CLOSE_TIMEOUT = 10.0


class McpError(Exception):
    """A tool call that did not succeed: the server's own error text, or why it could not be made."""


def no_server_message(name: str) -> str:
    return f"no MCP server named {name} was given to this session"


@dataclass(frozen=True)
class StdioServer:
    """An MCP server to start as a child process, as ACP's `McpServerStdio` describes it."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_acp(cls, server: McpServerStdio) -> StdioServer:
        return cls(
            name=server.name,
            command=server.command,
            args=tuple(server.args),
            env=tuple((variable.name, variable.value) for variable in server.env),
        )

    def transport(self) -> StdioServerParameters:
        from mcp import StdioServerParameters

        # The SDK passes a few safe variables (HOME, PATH, ...) and these on top.
        return StdioServerParameters(command=self.command, args=list(self.args), env=dict(self.env))


@dataclass(frozen=True)
class HttpServer:
    """An MCP server to reach over streamable HTTP, as ACP's `McpServerHttp` describes it."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_acp(cls, server: McpServerHttp) -> HttpServer:
        return cls(name=server.name, url=server.url, headers=tuple((h.name, h.value) for h in server.headers))

    @contextlib.asynccontextmanager
    async def transport(self) -> AsyncIterator[Any]:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        # The SDK leaves an HTTP client it was handed open: this one closes with the connection.
        async with (
            create_mcp_http_client(headers=dict(self.headers)) as http,
            streamable_http_client(self.url, http_client=http) as streams,
        ):
            yield streams


McpServer = StdioServer | HttpServer


def servers_by_name(servers: Sequence[Any] | None, *, http: bool = True) -> dict[str, McpServer | str]:
    """The servers of a session request by name: one to use, or why it cannot be used."""
    found: dict[str, McpServer | str] = {}
    for server in servers or ():
        if isinstance(server, McpServerStdio):
            found[server.name] = StdioServer.from_acp(server)
        elif http and isinstance(server, McpServerHttp):
            found[server.name] = HttpServer.from_acp(server)
        else:
            kind = getattr(server, "type", type(server).__name__)
            name = getattr(server, "name", "?")
            takes = "stdio and http servers" if http else "stdio servers only"
            found[name] = f"the MCP server {name} is {kind}; the demo agent takes {takes}"
    return found


def result_text(result: CallToolResult) -> str:
    """The text of a tool result: its text blocks, joined by line breaks."""
    from mcp.types import TextContent

    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


class ServerConnection:
    """One running MCP server, owned by a task of its own until `aclose`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def usable(self) -> bool:
        return self._client is not None and self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the server and complete the MCP handshake; McpError when it cannot."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"demo-agent mcp {self.server.name}")
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await asyncio.shield(ready)
        except TimeoutError:
            await self.aclose()
            raise McpError(
                f"the MCP server {self.server.name} did not start within {START_TIMEOUT:g} s"
            ) from None
        except asyncio.CancelledError:
            self._stop.set()  # the owner winds the server down on its own
            raise
        except Exception as e:
            await self.aclose()
            raise McpError(
                f"could not start the MCP server {self.server.name}: {_describe(e)} "
                "(its own account, if any, is on the agent's stderr)"
            ) from None

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            from mcp import Client
            from mcp.types import Implementation

            client = Client(
                self.server.transport(),
                mode="legacy",  # the initialize handshake, as agents' MCP clients do it
                client_info=Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
            )
            async with client:
                self._client = client
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except Exception as e:
            if not ready.done():
                ready.set_exception(e)
            else:
                log.warning("the MCP server %s failed: %s", self.server.name, _describe(e))
        finally:
            self._client = None
            if not ready.done():
                ready.cancel()

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        client = self._client
        if client is None:
            raise McpError(f"the MCP server {self.server.name} is not running")
        return await client.call_tool(tool, arguments)

    async def aclose(self) -> None:
        """Stop the server (the SDK closes its stdin, then terminates it if need be)."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return str(error) or type(error).__name__


class SessionMcp:
    """The MCP servers of one session: what the client gave, and the ones started so far."""

    def __init__(self) -> None:
        self._servers: dict[str, McpServer | str] = {}
        self._connections: dict[str, ServerConnection] = {}
        self._starting: dict[str, asyncio.Lock] = {}

    def names(self) -> list[str]:
        return list(self._servers)

    async def configure(self, servers: Sequence[Any] | None, *, http: bool = True) -> None:
        """Take the servers of a session request; a running server whose settings changed is stopped."""
        self._servers = servers_by_name(servers, http=http)
        for name, connection in list(self._connections.items()):
            if self._servers.get(name) != connection.server:
                del self._connections[name]
                await connection.aclose()

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> str:
        """Call `tool` of the server `name`; its text. McpError with the server's text when it fails."""
        connection = await self._connection(name)
        try:
            result = await connection.call_tool(tool, arguments)
        except Exception as e:
            # The server is gone or broke the protocol: start a fresh one next time.
            if self._connections.get(name) is connection:
                del self._connections[name]
            await connection.aclose()
            raise McpError(f"the MCP server {name} failed: {_describe(e)}") from None
        text = result_text(result)
        if result.is_error:
            raise McpError(text or f"{tool} failed without saying why")
        return text

    async def _connection(self, name: str) -> ServerConnection:
        server = self._servers.get(name)
        if server is None:
            raise McpError(no_server_message(name))
        if isinstance(server, str):
            raise McpError(server)
        lock = self._starting.setdefault(name, asyncio.Lock())
        async with lock:
            connection = self._connections.get(name)
            if connection is not None and connection.usable:
                return connection
            if connection is not None:
                await connection.aclose()
            connection = ServerConnection(server)
            await connection.start()
            self._connections[name] = connection
            return connection

    async def aclose(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(connection.aclose() for connection in connections))
