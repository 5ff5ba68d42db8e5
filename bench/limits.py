"""What hostile or careless clients cost the daemon: its memory before, at the worst, and after.

Each case runs against a fresh daemon (loopback TCP and its unix socket) and
reports the daemon's RSS before the load, the highest reading while it ran,
and after the clients left, beside the time an innocent client's
`daemon/status` took during the load against the same call when idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import Awaitable, Callable

from bench.harness import Daemon, daemon
from sessiond.client import AsyncDaemon, aconnect
from tests.security.wire import Wire, frame

MiB = 1024 * 1024


async def _quietly(action: Awaitable[object]) -> None:
    with contextlib.suppress(ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError):
        await action


async def _status_ms(client: AsyncDaemon, rounds: int = 10) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await client.status()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


Load = Callable[[Daemon, AsyncDaemon], Awaitable[None]]


async def _nothing(d: Daemon, client: AsyncDaemon) -> None:
    pass


async def _case(name: str, load: Load, setup: Load = _nothing) -> tuple[str, str, str]:
    with daemon_with_tcp() as d:
        async with aconnect(d.socket, start=False) as client:
            await setup(d, client)
            idle_ms = await _status_ms(client)
            before = d.rss_kib()
            peak = before
            running = asyncio.create_task(load(d, client))
            during: list[float] = []
            while not running.done():
                peak = max(peak, d.rss_kib())
                during.append(await _status_ms(client, 1))
                await asyncio.sleep(0.05)
            await running
            peak = max(peak, d.rss_kib())
            await asyncio.sleep(0.5)  # the clients' closes are taken in
            after = d.rss_kib()
            worst = max(during) if during else 0.0
    return (
        name,
        f"{before / 1024:.0f} → peak {peak / 1024:.0f} → {after / 1024:.0f} MiB",
        f"others: status {worst / max(idle_ms, 0.01):.1f}x idle at worst",
    )


def daemon_with_tcp() -> contextlib.AbstractContextManager[Daemon]:
    return daemon("--tcp", "127.0.0.1:0")


async def huge_bodies_before_auth(d: Daemon, client: AsyncDaemon) -> None:
    async def one() -> None:
        wire = await Wire.tcp(*d.tcp_address())
        await _quietly(wire.send(b"Content-Length: 67108864\r\n\r\n"))
        for _ in range(64):
            await _quietly(wire.send(b"x" * MiB))
        await wire.close()

    await asyncio.gather(*(one() for _ in range(8)))


async def endless_header_line(d: Daemon, client: AsyncDaemon) -> None:
    wire = await Wire.tcp(*d.tcp_address())
    for _ in range(60):
        await _quietly(wire.send(b"X" * MiB))
    await wire.close()


async def half_sent_headers(d: Daemon, client: AsyncDaemon) -> None:
    wires = [await Wire.tcp(*d.tcp_address()) for _ in range(500)]
    for wire in wires:
        await _quietly(wire.send(b"Content-Length: 10"))
    await asyncio.gather(*(_quietly(wire.read(30)) for wire in wires))  # each closed by the daemon


async def two_hundred_sessions(d: Daemon, client: AsyncDaemon) -> None:
    await (await client.agent("demo")).sessions(200, d.home)


async def pipelined_never_read(d: Daemon, client: AsyncDaemon) -> None:
    wire = await Wire.unix(str(d.socket))
    await wire.initialize()
    ask = b"".join(
        frame({"jsonrpc": "2.0", "id": n, "method": "session/list", "params": {}}) for n in range(20_000)
    )
    await _quietly(asyncio.wait_for(wire.send(ask), 5))
    wire.writer.transport.abort()


async def large_prompt(d: Daemon, client: AsyncDaemon) -> None:
    session = await (await client.agent("demo")).session(d.home)
    wire = await Wire.unix(str(d.socket))
    await wire.initialize()
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"session": session.id, "prompt": "x" * 50_000_000},
        }
    )
    await _quietly(wire.send(frame(body)))
    await _quietly(wire.read(30))
    await wire.close()


async def large_replies(d: Daemon, client: AsyncDaemon) -> None:
    session = await (await client.agent("demo")).session(d.home)
    chunk = "say " + "y" * 200_000
    for _ in range(30):
        await session.asend(chunk)  # ~12 MB of prompt and reply events in the log


async def subscriber_never_reading_a_replay(d: Daemon, client: AsyncDaemon) -> None:
    wires = []
    for _ in range(5):
        wire = await Wire.unix(str(d.socket))
        await wire.initialize()
        await wire.send(
            frame({"jsonrpc": "2.0", "id": 1, "method": "events/subscribe", "params": {"since": 0}})
        )
        wires.append(wire)  # never read
    await asyncio.sleep(2)
    for wire in wires:
        wire.writer.transport.abort()


async def many_connections(d: Daemon, client: AsyncDaemon) -> None:
    for _ in range(1000):
        async with aconnect(d.socket, start=False) as other:
            await other.status()


CASES: list[tuple[str, Load, Load]] = [
    ("8 TCP clients announcing 64 MiB before the token", huge_bodies_before_auth, _nothing),
    ("a 60 MiB header line", endless_header_line, _nothing),
    ("500 half-sent headers", half_sent_headers, _nothing),
    ("20,000 session/list (200 sessions) never read", pipelined_never_read, two_hundred_sessions),
    ("a 50 MB prompt", large_prompt, _nothing),
    (
        "5 subscribers replaying 12 MB of events, never reading",
        subscriber_never_reading_a_replay,
        large_replies,
    ),
    ("1,000 connections, one after another", many_connections, _nothing),
]


async def run() -> list[tuple[str, str, str]]:
    return [await _case(name, load, setup) for name, load, setup in CASES]


if __name__ == "__main__":
    from bench.harness import table

    print(table("Hostile and careless clients: daemon memory", asyncio.run(run())))
