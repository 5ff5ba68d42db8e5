"""What a client connection costs the daemon's memory: while it is held, and once it has gone.

Connections of the Python client (`sessiond.client`) over the unix socket, each asking
`daemon/status` once (so the daemon has built all it builds for a connection, and heard what
a real client says); the daemon's RSS is read before, after 1,000 connections opened and
closed one after another, and with HELD connections held.

python -m bench.connections [--held 200] [--churn 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from bench.harness import Daemon, daemon, table
from sessiond.client import aconnect

Row = tuple[str, str, str]


async def _status(d: Daemon) -> int:
    """A connection that asks daemon/status; the clients the daemon counts then."""
    async with aconnect(d.socket, start=False) as client:
        return (await client.status()).clients


async def _churned(d: Daemon, churn: int) -> tuple[int, int]:
    """RSS (KiB) before and after `churn` connections came and went, one after another."""
    await _status(d)  # what the first connection loads is loaded, not counted below
    before = d.rss_kib()
    for _ in range(churn):
        await _status(d)
    assert await _status(d) == 1, "the daemon still counts connections that closed"
    return before, d.rss_kib()


async def _held(d: Daemon, held: int) -> tuple[int, int]:
    """RSS (KiB) before and while `held` connections are held."""
    await _status(d)
    before = d.rss_kib()
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(held):
            client = await stack.enter_async_context(aconnect(d.socket, start=False))
            await client.status()
        return before, d.rss_kib()


async def run(held: int = 200, churn: int = 1000) -> list[Row]:
    """Each on a fresh daemon: memory a closed connection left would be reused by held ones."""
    with daemon() as d:
        before, after = await _churned(d, churn)
    with daemon() as d:
        idle, holding = await _held(d, held)
    return [
        (
            f"daemon RSS after {churn:,} connections opened and closed",
            f"{after - before:+,} KiB",
            f"{after / 1024:.1f} MiB against {before / 1024:.1f} MiB before them",
        ),
        (
            f"daemon RSS growth per held connection ({held} held)",
            f"{(holding - idle) / held:.0f} KiB",
            f"{holding / 1024:.1f} MiB with them held, {idle / 1024:.1f} MiB before",
        ),
    ]


TITLE = "Client connections: daemon memory"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--held", type=int, default=200)
    parser.add_argument("--churn", type=int, default=1000)
    args = parser.parse_args()
    print(table(TITLE, asyncio.run(run(args.held, args.churn))))


if __name__ == "__main__":
    main()
