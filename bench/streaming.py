"""200 sessions streaming to three subscribed clients, one of which never reads.

Reports events per second delivered to a reading client, the daemon's memory
while the third client stalls, and the delay from the daemon emitting an
event (its `time`, stamped as the agent's update is handled) to a client
receiving it; beside the same turns run with nobody subscribed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import time
from pathlib import Path

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect

LINES = 40


def _prompt() -> str:
    return "\n".join(f"say streaming line {n} of a reply" for n in range(LINES))


def _stalled_subscriber(path: Path) -> socket.socket:
    """A client that subscribes to everything and then never reads again."""
    sock = socket.socket(socket.AF_UNIX)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(path))
    for msg_id, method, params in ((1, "initialize", {"capabilities": {}}), (2, "events/subscribe", {})):
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
        sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return sock


async def _read_chunks(client: AsyncDaemon, delays: list[float], counted: list[int]) -> None:
    """Count chunk events until all `counted[1]` of them came."""
    async with client.events(kinds=["turn.chunk"]) as events:
        async for event in events:
            delays.append(time.time() - event.time.timestamp())
            counted[0] += 1
            if counted[0] >= counted[1]:
                return


async def _turns(client: AsyncDaemon, root: Path, count: int) -> float:
    agent = await client.agent("demo")
    sessions = await agent.sessions(count, root)
    started = time.perf_counter()
    await asyncio.gather(*(s.asend(_prompt()) for s in sessions))
    return time.perf_counter() - started


async def run(count: int, root: Path) -> list[tuple[str, str, str]]:
    quiet = Daemon().start()
    try:
        async with aconnect(quiet.socket, start=False) as client:
            await _turns(client, root, 1)
            alone = await _turns(client, root, count)
    finally:
        quiet.stop()
    daemon = Daemon().start()
    stalled = _stalled_subscriber(daemon.socket)
    try:
        async with (
            aconnect(daemon.socket, start=False) as driver,
            aconnect(daemon.socket, start=False) as reader_a,
            aconnect(daemon.socket, start=False) as reader_b,
        ):
            await _turns(driver, root, 1)  # the agent process is up before measuring
            idle_kib = daemon.rss_kib()
            expected = count * LINES
            delays: list[float] = []
            counts = [[0, expected], [0, expected]]
            readers = [
                asyncio.create_task(_read_chunks(r, delays, c))
                for r, c in ((reader_a, counts[0]), (reader_b, counts[1]))
            ]
            await asyncio.sleep(0.5)  # both subscriptions are in place
            peak = idle_kib
            sampling = True

            async def sample() -> None:
                nonlocal peak
                while sampling:
                    peak = max(peak, daemon.rss_kib())
                    await asyncio.sleep(0.05)

            sampler = asyncio.create_task(sample())
            streamed = await _turns(driver, root, count)
            # A reader that fell behind is resynced (its backlog dropped): it may never
            # count every chunk, so give the readers a bounded while to catch up.
            _, late = await asyncio.wait(readers, timeout=30)
            for reader in late:
                reader.cancel()
            sampling = False
            await sampler
            head = (await driver.status()).head
    finally:
        stalled.close()
        daemon.stop()
    delays.sort()
    p50 = statistics.median(delays) * 1000
    p99 = delays[int(len(delays) * 0.99) - 1] * 1000
    return [
        (f"{count} sessions x {LINES} chunks, nobody subscribed", f"{alone:.2f} s", "baseline"),
        (
            "the same, 3 subscribers (1 never reads)",
            f"{streamed:.2f} s",
            f"{streamed / alone:.2f}x the baseline",
        ),
        (
            "chunk events delivered per reading client",
            f"{counts[0][0] / streamed:.0f}/s",
            f"{min(c[0] for c in counts)} of {expected} delivered; {head} events in the log",
        ),
        ("emit-to-client delay, median / p99", f"{p50:.1f} / {p99:.1f} ms", "target p99 < 50 ms"),
        (
            "daemon memory, idle -> peak while one client stalls",
            f"{idle_kib / 1024:.0f} -> {peak / 1024:.0f} MiB",
            f"{peak / idle_kib:.2f}x idle",
        ),
    ]
