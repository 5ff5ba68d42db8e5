"""`python -m bench.line_relay ARGS...`: the demo agent (run with ARGS) behind a process that only
passes lines between it and whoever runs this: a third process on the path that does no work of
its own. The turns row measures it beside the daemon, so that what the daemon costs is told apart
from what putting a process between a client and its agent costs on this machine."""

from __future__ import annotations

import asyncio
import sys

LIMIT = 64 * 1024 * 1024  # (a line is never split)


async def _pass(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while line := await source.readline():
        sink.write(line)
        await sink.drain()
    sink.close()


async def main(args: list[str]) -> None:
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiond.daemon.demo_agent",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=LIMIT,
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    loop = asyncio.get_running_loop()
    ours = asyncio.StreamReader(limit=LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(ours), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    await asyncio.gather(_pass(ours, agent.stdin), _pass(agent.stdout, out))
    await agent.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
