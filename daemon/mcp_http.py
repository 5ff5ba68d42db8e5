"""The daemon's own MCP endpoint: the `sessiond` tools over streamable HTTP on loopback.

Offered to agents that take http MCP servers (ACP `mcpCapabilities.http`)
instead of the stdio bridge (`sessiond.client.mcp_bridge`), which is a process
of its own for every session an agent starts it for (~65 MB and ~0.6 s each):
here one server in the daemon serves every session (`mcp_app`: the tools, each
request acting for the session whose token it carries).

Its address costs nothing: the port (127.0.0.1, one the system picks) is bound
and listening at once, so a session can be offered it straight away; the server
behind it starts in the background (its SDK, the `mcp` SDK and uvicorn, ~1 s to
import, loads then, as the agent starts up), and an agent that connects
meanwhile waits in the listening socket's backlog. It stops with the daemon, and starts again (on a
new port) for the next session if it stops on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sessiond.daemon import importer, long_lived

if TYPE_CHECKING:
    from sessiond.daemon.session_tools import SessionTools

log = logging.getLogger("sessiond.mcp")

PATH = "/mcp"
START_TIMEOUT = 30.0
STOP_GRACE = 2  # seconds a request still in flight (a long wait_threads) gets when the daemon stops
BACKLOG = 128


class McpEndpoint:
    def __init__(self, tools: SessionTools, session_of_token: Callable[[str], str | None]) -> None:
        self._tools = tools
        self._session_of_token = session_of_token  # the session a bearer token acts for, or None
        self._listener: socket.socket | None = None
        self._address: str | None = None
        self._starting: asyncio.Task[None] | None = None
        self._server: Any = None  # mcp_app's uvicorn server, once built
        self._task: asyncio.Task[None] | None = None

    @property
    def started_url(self) -> str | None:
        """Its address while it serves or starts; None before the first session, and once it stopped."""
        self._forget_if_stopped()
        return self._address

    def address(self) -> str:
        """Where agents reach it, at once: bound and listening now, served once it has started."""
        self._forget_if_stopped()
        if self._address is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(BACKLOG)
            listener.setblocking(False)
            self._listener = listener
            self._address = f"http://127.0.0.1:{listener.getsockname()[1]}{PATH}"
            self._starting = asyncio.create_task(self._start(listener), name="mcp-endpoint-start")
            self._starting.add_done_callback(self._start_ended)
        return self._address

    async def url(self) -> str:
        """Its address once the server behind it serves; raises what stopped it from starting."""
        address = self.address()
        assert self._starting is not None
        await asyncio.shield(self._starting)
        return address

    async def _start(self, listener: socket.socket) -> None:
        # Loaded while the agent starts up, on the importer's thread (after the ACP SDK, which
        # the agent's first session needs sooner).
        app: Any = await importer.load("sessiond.daemon.mcp_app")
        server = app.build(self._tools, self._session_of_token, PATH, STOP_GRACE)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[listener]), name="mcp-endpoint")
        async with asyncio.timeout(START_TIMEOUT):
            while not server.started:  # uvicorn offers a flag, not an event
                if self._task.done():
                    self._task.result()  # raises what stopped it
                    raise RuntimeError("the MCP endpoint stopped as it started")
                await asyncio.sleep(0.01)
        long_lived.settle()  # the SDK and the server stay as long as the daemon
        self._task.add_done_callback(self._ended)

    def _start_ended(self, task: asyncio.Task[None]) -> None:
        if task is not self._starting or task.cancelled() or task.exception() is None:
            return  # it started (or a newer start is under way)
        log.error(
            "the MCP endpoint at %s did not start (%r); the next session starts it again",
            self._address,
            task.exception(),
        )
        self._forget()

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The server stopped: asked to (close), or it failed; then the next session starts a new one."""
        if task is not self._task or (self._server is not None and self._server.should_exit):
            return  # closed as asked, or forgotten already (a new one may be serving)
        error = None if task.cancelled() else task.exception()
        log.error(
            "the MCP endpoint at %s stopped (%r); the next session starts it again", self._address, error
        )
        self._forget()

    def _forget_if_stopped(self) -> None:
        # Its server ended (its done callback may not have run yet): a new one for the next session.
        if self._task is not None and self._task.done() and not self._server.should_exit:
            self._forget()

    def _forget(self) -> None:
        # Through the loop's servers when it served: they unregister the socket before closing it
        # (closed behind the loop's back, its descriptor, reused by the next one, would stay mute).
        servers = getattr(self._server, "servers", None) or []
        for server in servers:
            server.close()
        if not servers and self._listener is not None:
            self._listener.close()
        self._listener = self._address = self._starting = self._server = self._task = None

    async def close(self) -> None:
        starting = self._starting
        if starting is not None and not starting.done():
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
        if self._server is None or self._task is None:
            if self._listener is not None:
                self._listener.close()
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            await self._task
