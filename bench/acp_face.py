"""One turn through `sessiond acp` (an editor's ACP client → the face → the daemon → the demo
agent) against the same turn straight to the demo agent over ACP, in the same run.

python -m bench.acp_face [--turns 30]

Each side opens a session and runs one turn (`say done`), one after another, as an editor
does; the sides alternate, so that what else the machine does weighs on both alike. The first
turn of each side (process start-up) is left out. The figure is the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
from acp import schema

from bench.harness import daemon, scratch, table
from sessiond.client import aconnect

PROMPT = "say done"
TURNS = 30
TITLE = "A turn through sessiond acp vs straight to the agent"


class _Editor:
    """An ACP client that reads the updates and answers nothing else."""

    def __init__(self) -> None:
        self.chunks = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.chunks += update.session_update == "agent_message_chunk"

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        return None


@asynccontextmanager
async def acp_turns(
    command: list[str], cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[Callable[[], Awaitable[float]]]:
    """An ACP agent spawned by `command`; yields `turn()`: seconds for one new session and one turn."""
    editor = _Editor()
    async with (
        acp.spawn_agent_process(
            editor,  # type: ignore[arg-type]
            command[0],
            *command[1:],
            env=env,
            transport_kwargs={"stderr": subprocess.DEVNULL},
        ) as (conn, _process)
    ):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)

        async def turn() -> float:
            started = time.perf_counter()
            session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
            answer = await conn.prompt(
                session_id=session.session_id, prompt=[schema.TextContentBlock(type="text", text=PROMPT)]
            )
            assert answer.stop_reason == "end_turn"
            return time.perf_counter() - started

        await turn()  # the processes are up on both sides before timing
        yield turn


async def measure(turns: int) -> list[tuple[str, str, str]]:
    work = scratch("sd-bench-acp-", until_exit=True)
    state = scratch("sd-bench-acp-state-", until_exit=True)
    direct_times: list[float] = []
    face_times: list[float] = []
    client_times: list[float] = []
    demo = [sys.executable, "-m", "sessiond.daemon.demo_agent", "--state-dir", str(state)]
    with daemon() as d:
        face = [sys.executable, "-m", "sessiond.client", "acp"]
        async with (
            acp_turns(demo, work) as direct,
            acp_turns(face, work, d.env) as through_face,
            aconnect(d.socket, start=False) as client,
        ):
            agent = await client.agent("demo")

            async def client_turn() -> float:
                started = time.perf_counter()
                await (await agent.session(work)).asend(PROMPT)
                return time.perf_counter() - started

            await client_turn()
            for _ in range(turns):
                direct_times.append(await direct())
                face_times.append(await through_face())
                client_times.append(await client_turn())
    straight, faced = statistics.median(direct_times), statistics.median(face_times)
    clients = statistics.median(client_times)
    return [
        (
            f"new session + one turn, straight to the demo agent (ACP), median of {turns}",
            f"{straight * 1000:.1f} ms",
            "",
        ),
        (f"new session + one turn, through `sessiond acp`, median of {turns}", f"{faced * 1000:.1f} ms", ""),
        (
            f"new session + one turn, the daemon's Python client, median of {turns}",
            f"{clients * 1000:.1f} ms",
            "the daemon's part, without the face",
        ),
        ("the face's cost", f"{faced / straight:.2f}x", f"{(faced - straight) * 1000:.1f} ms more per turn"),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.acp_face", description=__doc__)
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args(argv)
    print(table(TITLE, asyncio.run(measure(args.turns))))


if __name__ == "__main__":
    main()
