"""The baseline: the same turns sent straight to the demo agent through the ACP SDK, no daemon."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import acp
from acp import schema


class _QuietClient:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        return None


async def run_turns(count: int, prompt: str, cwd: Path, state_dir: Path, rounds: int = 1) -> float:
    """Seconds for `count` sessions to each open and run one turn at once (after one warm-up turn);
    with several rounds, the median round."""
    async with acp.spawn_agent_process(
        _QuietClient(),  # type: ignore[arg-type]
        sys.executable,
        "-m",
        "sessiond.daemon.demo_agent",
        "--state-dir",
        str(state_dir),
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)

        async def one() -> None:
            session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
            await conn.prompt(
                session_id=session.session_id, prompt=[schema.TextContentBlock(type="text", text=prompt)]
            )

        await one()
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(count)))
            times.append(time.perf_counter() - started)
        return statistics.median(times)
