"""What the daemon's MCP endpoint serves: the `sessiond` tools (`mcp_tools.build_server`) as a
streamable-HTTP app under uvicorn, each request acting for the session whose bearer token it
carries, carried out by `SessionTools` in this process. Imported (the mcp SDK and uvicorn with
it) by `mcp_http` when the endpoint first starts."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import uvicorn
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from sessiond.daemon.mcp_tools import BridgeError, Link, build_server, checked_params
from sessiond.daemon.session_tools import SessionTools
from sessiond.protocol import methods as names
from sessiond.protocol.errors import RpcError

log = logging.getLogger("sessiond.mcp")

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


def build(
    tools: SessionTools,
    session_of_token: Callable[[str], str | None],
    path: str,
    stop_grace: int,
) -> uvicorn.Server:
    """The endpoint's server, ready to serve on a socket it is given."""

    def link_for(ctx: Context) -> Link:
        headers = ctx.headers or {}
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        try:
            session = session_of_token(token.strip()) if scheme.lower() == "bearer" else None
        except ValueError as exc:  # (its agent shares the server: which session asks cannot be told)
            raise BridgeError(str(exc)) from None
        if session is None:
            raise BridgeError(
                "this request carries no valid sessiond session token (Authorization: Bearer ...); "
                "use the MCP server exactly as the daemon offered it to the session"
            )
        return InProcessLink(tools, session)

    # Answers come as SSE streams, not bare JSON: a long wait_threads gets a ping every 15 s,
    # so an agent's HTTP client does not give up on it for a read timeout.
    app = build_server(link_for).streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=False, host="127.0.0.1"
    )
    config = uvicorn.Config(
        app,
        log_level="warning",
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=stop_grace,
    )
    return _Server(config)
