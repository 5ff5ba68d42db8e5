"""What one connection may cost the daemon, whoever is on the other end.

Real daemons, raw sockets. Memory is read from the daemon's /proc entry with
bounds far above what the limits allow and far below what the loads cost
without them (the closing figures live in `./dev bench`, not here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator

import pytest

from bench.harness import Daemon, checked
from sessiond.client import AsyncDaemon, aconnect
from sessiond.daemon.wire import Limits
from sessiond.protocol.errors import ErrorCode
from tests.security.wire import Wire, frame

TIMEOUT = 30
MiB = 1024 * 1024
PRE_AUTH = Limits().unauthenticated_message


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(Daemon(extra_args=("--tcp", "127.0.0.1:0", "--max-message", str(MiB)))) as running:
        yield running


@pytest.fixture
async def client(daemon: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(daemon.socket, start=False) as connected:
        yield connected


async def _closed(wire: Wire) -> list[dict]:
    """What the daemon said before it closed the connection."""
    said = []
    while (message := await wire.read(TIMEOUT)) is not None:
        said.append(message)
    return said


async def test_before_initialize_a_big_message_is_refused_unread(daemon: Daemon, client: AsyncDaemon) -> None:
    before = daemon.rss_kib()
    wires = [await Wire.tcp(*daemon.tcp_address()) for _ in range(8)]
    for wire in wires:
        await wire.send(b"Content-Length: 67108864\r\n\r\n" + b"x" * 65536)
    for wire in wires:
        said = await _closed(wire)
        assert said[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
        assert str(PRE_AUTH) in said[0]["error"]["message"]
    assert daemon.rss_kib() - before < 64 * 1024  # it cost +512 MiB when bodies were held
    assert (await client.status()).pid == daemon.pid


async def _send_regardless(wire: Wire, data: bytes, times: int) -> None:
    """Keep sending until done or until the daemon hangs up on us."""
    with contextlib.suppress(ConnectionError, OSError):
        for _ in range(times):
            await wire.send(data)


async def test_a_header_line_without_end_is_cut_off(daemon: Daemon, client: AsyncDaemon) -> None:
    before = daemon.rss_kib()
    wire = await Wire.unix(str(daemon.socket))
    await _send_regardless(wire, b"X" * MiB, 60)
    said = await _closed(wire)
    assert said[0]["error"]["code"] == ErrorCode.PARSE_ERROR
    assert "header line" in said[0]["error"]["message"]
    assert daemon.rss_kib() - before < 32 * 1024  # it cost +60 MiB when the line was held


async def test_half_sent_headers_are_not_held_forever(daemon: Daemon, client: AsyncDaemon) -> None:
    wires = [await Wire.tcp(*daemon.tcp_address()) for _ in range(50)]
    for wire in wires:
        await wire.send(b"Content-Len")
    # Each is closed once the unauthenticated allowance of seconds is spent.
    for wire in wires:
        assert await asyncio.wait_for(_closed(wire), TIMEOUT + Limits().unauthenticated_seconds) == []
    assert (await client.status()).clients == 1


async def test_after_initialize_a_message_over_max_message_is_skipped_with_a_sentence(
    daemon: Daemon, client: AsyncDaemon
) -> None:
    wire = await Wire.unix(str(daemon.socket))
    await wire.initialize()
    huge = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {"agent": "x" * (2 * MiB)}}
    await wire.send(frame(json.dumps(huge)))
    answer = await wire.read(TIMEOUT)
    assert answer is not None
    assert answer["id"] == 1  # answered by its id, read from the first bytes
    assert answer["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert str(MiB) in answer["error"]["message"]
    assert "--max-message" in answer["error"]["message"]
    assert "result" in await wire.request("daemon/status", {}, 2, TIMEOUT)  # the connection lives on
    await wire.close()


async def test_a_client_that_never_reads_its_answers_is_held_back(
    daemon: Daemon, client: AsyncDaemon
) -> None:
    opened = await (await client.agent("demo")).sessions(200, "/tmp")
    assert len(opened) == 200
    before = daemon.rss_kib()
    greedy = await Wire.unix(str(daemon.socket))
    await greedy.initialize()
    ask = b"".join(
        frame({"jsonrpc": "2.0", "id": n, "method": "session/list", "params": {}}) for n in range(20_000)
    )
    sending = asyncio.create_task(greedy.send(ask))  # never read: its answers pile up until it is held back
    # Meanwhile another client is served.
    for _ in range(20):
        assert (await asyncio.wait_for(client.status(), TIMEOUT)).pid == daemon.pid
    grown = daemon.rss_kib() - before
    assert grown < 200 * 1024, f"the daemon grew {grown} KiB holding answers nobody reads"
    sending.cancel()
    greedy.writer.transport.abort()
    assert (await client.status()).pid == daemon.pid
