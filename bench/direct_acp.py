"""The baseline: the same turns sent straight to the demo agent through the ACP SDK, no daemon."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import acp
from acp import schema

from sessiond.daemon.session_mcp import own_http_server

# What the daemon offers the demo agent (which takes http MCP servers): its endpoint on loopback and
# a session's token, of the length the daemon's are (never connected to here).
_OFFER = own_http_server("http://127.0.0.1:9/mcp", "s1." + "0" * 64)


class _QuietClient:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        return None


class Rounds:
    """`await rounds(count)`: seconds for `count` sessions to each open and run one turn at once;
    `pid`: the agent's process."""

    def __init__(self, run: Callable[[int], Awaitable[float]], pid: int) -> None:
        self._run = run
        self.pid = pid

    async def __call__(self, count: int) -> float:
        return await self._run(count)


@contextlib.asynccontextmanager
async def direct_agent(
    prompt: str, cwd: Path, state_dir: Path, *, relayed: bool = False, offered: bool = False
) -> AsyncIterator[Rounds]:
    """The demo agent spoken to straight through the ACP SDK (or, `relayed`, through a process
    that only passes lines: bench/line_relay.py); yields its `Rounds` (after one warm-up turn),
    whose `pid` is the agent's (or the relay's). `offered`: each session is offered an MCP server
    as the daemon offers its own to every session (the agent checks and keeps it; it starts none
    unless a tool of it is called, which these prompts do not)."""
    mcp_servers = [schema.HttpMcpServer.model_validate(_OFFER)] if offered else []
    async with acp.spawn_agent_process(
        _QuietClient(),  # type: ignore[arg-type]
        sys.executable,
        "-m",
        "bench.line_relay" if relayed else "sessiond.daemon.demo_agent",
        "--state-dir",
        str(state_dir),
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)

        async def one() -> None:
            session = await conn.new_session(cwd=str(cwd), mcp_servers=mcp_servers)
            await conn.prompt(
                session_id=session.session_id, prompt=[schema.TextContentBlock(type="text", text=prompt)]
            )

        async def round_(count: int) -> float:
            started = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(count)))
            return time.perf_counter() - started

        await one()
        yield Rounds(round_, process.pid)
