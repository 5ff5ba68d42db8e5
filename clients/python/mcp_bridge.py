"""The MCP server the daemon offers each session: suggest tasks, start threads, wait for them.

``python -m sessiond.client.mcp_bridge`` speaks MCP on stdin/stdout (the
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

The tools themselves (their schemas, and the JSON a model reads) are
``sessiond.daemon.mcp_tools``, which the daemon's own http endpoint serves too;
this module is the client side: its configuration, and the link to the daemon.
A daemon error becomes an MCP tool error (``isError``) whose text is the
daemon's message, verbatim.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sessiond.client import launch
from sessiond.client.connection import Connection
from sessiond.client.errors import ConnectionLost, DaemonNotRunning, SessiondError

# The tool table, shared with the daemon's own endpoint: the one daemon module a client imports
# (it imports only sessiond.protocol and the mcp SDK; see docs/architecture.md).
from sessiond.daemon.mcp_tools import BridgeError, R, build_server, checked_params, summary
from sessiond.protocol.version import VERSION

log = logging.getLogger(__name__)

CLIENT_NAME = "sessiond-mcp-bridge"
SOCKET_ENV = "SESSIOND_SOCKET"
SESSION_ENV = "SESSIOND_SESSION"
TOKEN_ENV = "SESSIOND_SESSION_TOKEN"
# initialize and the goodbye are quick; a tool's own request (thread/wait) is as long as it takes.
HANDSHAKE_TIMEOUT = 30.0
GOODBYE_TIMEOUT = 5.0


class ConfigError(Exception):
    """The environment lacks what the bridge needs; the message says what."""


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
                f"the daemon's answer to {method} does not fit this bridge ({summary(e)}); "
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
                        "clientInfo": {"name": CLIENT_NAME, "version": VERSION},
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
            "usage: python -m sessiond.client.mcp_bridge\n"
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
