"""What a client connection costs the daemon's memory: while it is held, and once it has gone.

Raw JSON-RPC connections over the unix socket, each initialized and asking `daemon/status`
once (so the daemon has built all it builds for a connection); the daemon's RSS is read
before, with HELD connections held, and after 1,000 connections opened and closed one after
another.

python -m bench.connections [--held 200] [--churn 1000]
"""

from __future__ import annotations

import argparse
import asyncio

from bench.harness import Daemon, daemon, table
from bench.startup import Raw

Row = tuple[str, str, str]


async def _status(d: Daemon) -> int:
    """A connection that asks daemon/status; the clients the daemon counts then."""
    raw = await Raw.open(d.socket)
    try:
        return int((await raw.call("daemon/status", {}))["clients"])
    finally:
        await raw.close()


async def _measure(d: Daemon, held: int, churn: int) -> tuple[int, int, int]:
    """RSS (KiB): before, after `churn` connections came and went, then with `held` held."""
    await _status(d)  # what the first connection loads is loaded, not counted below
    before = d.rss_kib()
    for _ in range(churn):
        await _status(d)
    after_churn = d.rss_kib()
    assert await _status(d) == 1, "the daemon still counts connections that closed"
    conns = [await Raw.open(d.socket) for _ in range(held)]
    for conn in conns:
        await conn.call("daemon/status", {})
    holding = d.rss_kib()
    for conn in conns:
        await conn.close()
    return before, after_churn, holding


async def run(held: int = 200, churn: int = 1000) -> list[Row]:
    with daemon() as d:
        before, after_churn, holding = await _measure(d, held, churn)
    return [
        (
            f"daemon RSS after {churn:,} connections opened and closed",
            f"{after_churn - before:+,} KiB",
            f"{after_churn / 1024:.1f} MiB against {before / 1024:.1f} MiB before them",
        ),
        (
            f"daemon RSS growth per held connection ({held} held)",
            f"{(holding - after_churn) / held:.0f} KiB",
            f"{holding / 1024:.1f} MiB with them held",
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
