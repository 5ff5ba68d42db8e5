"""The daemon's own MCP endpoint: the `sessiond` tools over streamable HTTP on loopback.

Offered to agents that take http MCP servers (ACP `mcpCapabilities.http`)
instead of the stdio bridge (`sessiond.client.mcp_bridge`), which is a process
of its own for every session an agent starts it for (~65 MB and ~0.6 s each):
here one server in the daemon serves every session. A request acts for the
session whose token it carries as `Authorization: Bearer <token>` (known by
`session_of_token`, `Around`'s); the tools are the bridge's own
(`mcp_tools.build_server`), their requests go to `SessionTools` in this process
rather than over the daemon's socket.

It starts on first need (the `mcp` SDK and uvicorn are imported then), on
127.0.0.1 and a port the system picks, and stops with the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import uvicorn
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from sessiond.daemon import long_lived
from sessiond.daemon.mcp_tools import BridgeError, Link, build_server, checked_params
from sessiond.daemon.session_tools import SessionTools
from sessiond.protocol import methods as names
from sessiond.protocol.errors import RpcError

log = logging.getLogger("sessiond.mcp")

PATH = "/mcp"
START_TIMEOUT = 30.0
STOP_GRACE = 2  # seconds a request still in flight (a long wait_threads) gets when the daemon stops

R = TypeVar("R", bound=BaseModel)


class InProcessLink:
    """The tools' requests for one session, carried out in the daemon."""

    def __init__(self, tools: SessionTools, session: str) -> None:
        self._tools = tools
        self._session = session

    @property
    def session(self) -> str:
        return self._session

    async def call(self, method: str, params: Mapping[str, Any], result: type[R]) -> R:
        checked: Any = checked_params(method, params, result)
        tools, session = self._tools, self._session
        answer: BaseModel
        try:
            match method:
                case names.TASK_SUGGEST:
                    answer = tools.suggest(checked, session)
                case names.THREAD_START:
                    answer = await tools.start_thread(checked, session)
                case names.THREAD_STATUS:
                    answer = tools.status(checked, session)
                case names.THREAD_WAIT:
                    answer = await tools.wait(checked, session)
                case _:
                    raise BridgeError(f"{method} is not one of the MCP tools' requests")
        except RpcError as e:
            raise BridgeError(e.message) from None
        except BridgeError:
            raise
        except Exception as e:
            log.exception("the MCP tool behind %s failed", method)
            raise BridgeError(f"the daemon failed on this request: {type(e).__name__}: {e}") from None
        assert isinstance(answer, result)
        return answer


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon handles its own signals and stops this server itself


class McpEndpoint:
    def __init__(self, tools: SessionTools, session_of_token: Callable[[str], str | None]) -> None:
        self._tools = tools
        self._session_of_token = session_of_token  # the session a bearer token acts for, or None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._url: str | None = None
        self._lock = asyncio.Lock()

    @property
    def started_url(self) -> str | None:
        return self._url

    async def url(self) -> str:
        """Where agents reach it; started on the first call."""
        async with self._lock:
            if self._url is None:
                self._url = await self._start()
            return self._url

    async def _start(self) -> str:
        # Answers come as SSE streams, not bare JSON: a long wait_threads gets a ping every 15 s,
        # so an agent's HTTP client does not give up on it for a read timeout.
        app = build_server(self._link_for).streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=False, host="127.0.0.1"
        )
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_level="warning",
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=STOP_GRACE,
        )
        server = _Server(config)
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
        return f"http://127.0.0.1:{port}{PATH}"

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The server stopped: asked to (close), or it failed; then the next session starts a new one."""
        if self._server is not None and self._server.should_exit:
            return
        error = None if task.cancelled() else task.exception()
        log.error("the MCP endpoint at %s stopped (%r); the next session starts it again", self._url, error)
        self._url = self._server = self._task = None

    def _link_for(self, ctx: Context) -> Link:
        headers = ctx.headers or {}
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        session = self._session_of_token(token.strip()) if scheme.lower() == "bearer" else None
        if session is None:
            raise BridgeError(
                "this request carries no valid sessiond session token (Authorization: Bearer ...); "
                "use the MCP server exactly as the daemon offered it to the session"
            )
        return InProcessLink(self._tools, session)

    async def close(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            await self._task
