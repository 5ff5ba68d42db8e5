"""A real agent (claude-agent-acp, npm) against the Anthropic stand-in: the daemon's cost on a turn
and the agent's memory with and without `maxLiveSessions`.

Skipped, with the reason printed, when node or the npm agents are not installed
(`npm ci --prefix tests/interop`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import acp
from acp import schema

from bench.harness import children, daemon, rss_kib
from sessiond.client import aconnect
from tests.standins.anthropic import serving

AGENT = (
    Path(__file__).resolve().parents[1] / "tests" / "interop" / "node_modules" / ".bin" / "claude-agent-acp"
)
ROUNDS = 5


def skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not AGENT.exists():
        return f"{AGENT} is missing (npm ci --prefix tests/interop)"
    return None


def _tree_kib(pid: int) -> int:
    total = 0
    for child in children(pid):
        total += _tree_kib(child)
    try:
        return total + rss_kib(pid)
    except (OSError, RuntimeError):
        return total


class _Quiet:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        return None


async def _direct(env: dict[str, str], work: Path) -> list[float]:
    async with acp.spawn_agent_process(
        _Quiet(),  # type: ignore[arg-type]
        str(AGENT),
        env={**os.environ, **env},
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        times = []
        for index in range(ROUNDS + 1):
            started = time.perf_counter()
            await conn.prompt(
                session_id=session.session_id,
                prompt=[schema.TextContentBlock(type="text", text=f"say done {index}")],
            )
            times.append(time.perf_counter() - started)
        return times[1:]  # the first warms up


async def run(sessions: int = 10) -> list[tuple[str, str, str]]:
    reason = skip_reason()
    if reason:
        print(f"real agents skipped: {reason}")
        return [("claude-agent-acp against its stand-in", "skipped", reason)]
    work = Path(tempfile.mkdtemp(prefix="sd-bench-real-"))
    homes = Path(tempfile.mkdtemp(prefix="sd-bench-claude-"))
    rows: list[tuple[str, str, str]] = []
    with serving() as standin:
        env = {**standin.env(), "CLAUDE_CONFIG_DIR": str(homes / "direct")}
        direct = statistics.median(await _direct(env, work))
        memory: dict[int | None, int] = {}
        with daemon() as d:
            async with aconnect(d.socket, start=False) as client:
                agent = await client.agent(
                    "claude",
                    command=[str(AGENT)],
                    env={**standin.env(), "CLAUDE_CONFIG_DIR": str(homes / "d")},
                )
                session = await agent.session(work)
                times = []
                for index in range(ROUNDS + 1):
                    started = time.perf_counter()
                    await session.asend(f"say done {index}")
                    times.append(time.perf_counter() - started)
                through = statistics.median(times[1:])
                await agent.aremove()
                for limit in (2, None):
                    options = {"max_live_sessions": limit} if limit else {}
                    name = f"claude-{limit or 'all'}"
                    home = {"CLAUDE_CONFIG_DIR": str(homes / name)}
                    agent = await client.agent(
                        name, command=[str(AGENT)], env={**standin.env(), **home}, **options
                    )
                    for each in await agent.sessions(sessions, work):
                        await each.asend("say done")
                    pid = (await agent.aget()).process.pid
                    assert pid is not None
                    memory[limit] = _tree_kib(pid)
                    await agent.aremove()
    rows.append(
        (
            "one turn, claude-agent-acp straight over ACP (median)",
            f"{direct * 1000:.0f} ms",
            "baseline (stand-in model API on loopback)",
        )
    )
    rows.append(
        (
            "one turn, the same through the daemon (median)",
            f"{through * 1000:.0f} ms",
            f"{through / direct:.2f}x the baseline",
        )
    )
    rows.append(
        (
            f"agent tree memory, {sessions} sessions, maxLiveSessions 2",
            f"{memory[2] / 1024:.0f} MiB",
            f"against {memory[None] / 1024:.0f} MiB with all {sessions} live "
            f"({memory[2] / memory[None]:.2f}x)",
        )
    )
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(homes, ignore_errors=True)
    return rows
