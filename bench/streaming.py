"""200 sessions streaming to three subscribed clients, one of which never reads.

Reports events per second delivered to a reading client, the daemon's memory
while the third client stalls, and the delay from the daemon emitting an
event (its `time`, stamped as the agent's update is handled) to a client
receiving it; beside the same turns run with nobody subscribed. The reading
clients run in a process of their own (`python -m bench.streaming SOCKET
COUNT`), apart from the one driving 200 turns: in one process, that process's
own busy loop counted in their delay (p99 27-83 ms from run to run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import statistics
import sys
import time
from pathlib import Path

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, AsyncEventStream, aconnect

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


CATCH_UP = 30.0  # seconds the readers get after the turns to count every chunk


async def _count(
    events: AsyncEventStream, delays: list[float], counts: list[int], which: int, expected: int
) -> None:
    async for event in events:
        delays.append(time.time() - event.time.timestamp())
        counts[which] += 1
        if counts[which] >= expected:
            return


async def _read(socket_path: Path, expected: int) -> None:
    """The reading clients' process: two clients subscribed to chunk events say "subscribed", count
    `expected` chunks each (or as many as came when told "stop" on stdin), then write their delays
    (seconds) and counts as JSON."""
    loop = asyncio.get_running_loop()
    told = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(told), sys.stdin)
    delays: list[float] = []
    counts = [0, 0]
    async with (
        aconnect(socket_path, start=False) as one,
        aconnect(socket_path, start=False) as two,
        one.events(kinds=["turn.chunk"]) as first,
        two.events(kinds=["turn.chunk"]) as second,
    ):
        print("subscribed", flush=True)
        both = asyncio.gather(
            *(_count(s, delays, counts, n, expected) for n, s in enumerate((first, second)))
        )
        stop = asyncio.ensure_future(told.readline())
        await asyncio.wait([both, stop], return_when=asyncio.FIRST_COMPLETED)
        for waited in (both, stop):
            waited.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waited
    print(json.dumps({"delays": delays, "counts": counts}), flush=True)


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
    readers: asyncio.subprocess.Process | None = None
    try:
        async with aconnect(daemon.socket, start=False) as driver:
            await _turns(driver, root, 1)  # the agent process is up before measuring
            idle_kib = daemon.rss_kib()
            expected = count * LINES
            readers = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.streaming",
                str(daemon.socket),
                str(expected),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            assert readers.stdin is not None
            assert readers.stdout is not None
            said = await readers.stdout.readline()
            if said.strip() != b"subscribed":
                raise RuntimeError(f"the reading clients did not subscribe (they said {said!r})")
            report = asyncio.ensure_future(readers.stdout.read())  # (read as it comes: a pipe fills)
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
            _, late = await asyncio.wait([report], timeout=CATCH_UP)
            if late:
                readers.stdin.write(b"stop\n")
            result = json.loads(await report)
            readers.stdin.close()
            await readers.wait()
            delays: list[float] = result["delays"]
            counts: list[int] = result["counts"]
            sampling = False
            await sampler
            head = (await driver.status()).head
    finally:
        if readers is not None and readers.returncode is None:
            readers.kill()
            await readers.wait()
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
            f"{counts[0] / streamed:.0f}/s",
            f"{min(counts)} of {expected} delivered; {head} events in the log",
        ),
        ("emit-to-client delay, median / p99", f"{p50:.1f} / {p99:.1f} ms", "target p99 < 50 ms"),
        (
            "daemon memory, idle -> peak while one client stalls",
            f"{idle_kib / 1024:.0f} -> {peak / 1024:.0f} MiB",
            f"{peak / idle_kib:.2f}x idle",
        ),
    ]


if __name__ == "__main__":
    asyncio.run(_read(Path(sys.argv[1]), int(sys.argv[2])))
