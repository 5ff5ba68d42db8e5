"""What every real agent's interop tests share, whatever the agent and its model stand-in:
a daemon for the module, and two steps: leave a streaming turn (it must end cancelled soon),
kill the agent mid-turn (only that turn fails). The caller first queues a slow reply."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AgentUnavailable, AsyncAgent, AsyncDaemon, AsyncSession


def module_daemon(agent: Path | None = None) -> Iterator[Daemon]:
    """One daemon for a module's tests (each test its own agent: stopping a daemon costs seconds),
    its stderr printed at the end; fails first when the `agent` npm installs is missing."""
    if agent is not None and (shutil.which("node") is None or not agent.exists()):
        pytest.fail(f"{agent} is missing: `./dev test` installs it (npm install --prefix tests/interop)")
    running = Daemon().start()
    yield running
    code = running.stop()
    print("\n".join(["--- daemon stderr", *running.stderr]))
    assert code == 0, f"the daemon exited with {code}"
    shutil.rmtree(running.home, ignore_errors=True)


async def leave_mid_stream(client: AsyncDaemon, session: AsyncSession, within: float = 15) -> None:
    """Stream a turn, leave it at its first chunk: it ends `cancelled` within `within` seconds."""
    async with client.events(sessions=[session.id], kinds=["turn.ended"]) as events:
        stream = session.astream("talk for a long time")
        async for event in stream:
            if event.kind == "turn.chunk":
                break
        started = time.monotonic()
        await stream.aclose()  # leaving the stream cancels the turn
        ended = await next_matching(events, kind("turn.ended"), timeout=within)
    assert ended.data.get("stopReason") == "cancelled", ended.data
    assert time.monotonic() - started < within


async def kill_mid_turn(client: AsyncDaemon, agent: AsyncAgent, session: AsyncSession) -> None:
    """Kill the agent's process group at the turn's first chunk: that turn fails saying so."""
    async with client.events(sessions=[session.id], kinds=["turn.chunk"]) as chunks:
        turn = asyncio.create_task(session.asend("talk slowly"))
        await next_matching(chunks, kind("turn.chunk"), timeout=30)
        pid = (await agent.aget()).process.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the agent and what it started
        with pytest.raises(AgentUnavailable, match="killed by SIGKILL during session/prompt"):
            await asyncio.wait_for(turn, 15)
