"""Run every benchmark and print their tables.

python -m bench [--sessions 10000] [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench import streaming
from bench.direct_acp import run_turns
from bench.harness import daemon, table
from sessiond.client import aconnect

TURN_PROMPT = "say done"


async def open_many(count: int) -> list[tuple[str, str, str]]:
    with daemon() as d:
        async with aconnect(d.socket, start=False) as client:
            agent = await client.agent("demo")
            await client.status()
            before = d.rss_kib()
            started = time.perf_counter()
            sessions = await agent.sessions(count, d.home)
            elapsed = time.perf_counter() - started
            after = d.rss_kib()
            info = await agent.aget()
            assert len(sessions) == count
            started_processes = len(d.children())
    per_session = (after - before) * 1024 / count
    return [
        (f"open {count} sessions in one call", f"{elapsed:.3f} s", "target < 0.5 s"),
        ("daemon memory per session", f"{per_session:.0f} B", "target < 2048 B"),
        ("agent processes started", f"{started_processes} (agent state: {info.process.state})", "target 0"),
    ]


async def turns(count: int) -> list[tuple[str, str, str]]:
    work = Path(tempfile.mkdtemp(prefix="sd-bench-work-"))
    direct = await run_turns(count, TURN_PROMPT, work, work / "direct-state")
    with daemon() as d:
        async with aconnect(d.socket, start=False) as client:
            agent = await client.agent("demo")
            warm = await agent.session(work)
            await warm.asend(TURN_PROMPT)
            sessions = await agent.sessions(count, work)
            started = time.perf_counter()
            replies = await asyncio.gather(*(s.asend(TURN_PROMPT) for s in sessions))
            through_daemon = time.perf_counter() - started
    assert all(r.text == "done" for r in replies)
    return [
        (
            f"{count} turns at once, straight to the agent (ACP)",
            f"{direct:.3f} s",
            f"{count / direct:.0f} turns/s",
        ),
        (
            f"{count} turns at once, through the daemon",
            f"{through_daemon:.3f} s",
            f"{count / through_daemon:.0f} turns/s",
        ),
        (
            "daemon overhead",
            f"{through_daemon / direct:.2f}x",
            f"{(through_daemon - direct) / count * 1000:.2f} ms per turn; target < 1.3x",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    print(table("Opening sessions", asyncio.run(open_many(args.sessions))))
    print()
    print(table("Turns", asyncio.run(turns(args.turns))))
    print()
    work = Path(tempfile.mkdtemp(prefix="sd-bench-stream-"))
    print(table("Streaming to subscribers", asyncio.run(streaming.run(args.turns, work))))


if __name__ == "__main__":
    main()
