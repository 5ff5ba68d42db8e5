"""Corked writes: what one turn of the loop writes goes out as one write, in order, and nothing is
held back past that turn, a close or an end of file. Over a real socket pair."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessiond.daemon.corked import Corked


class _Pair:
    def __init__(self, corked: Corked, peer: asyncio.StreamReader, writes: list[bytes]) -> None:
        self.corked = corked
        self.peer = peer
        self.writes = writes  # what reached the transport, write by write


@pytest.fixture
async def pair() -> AsyncIterator[_Pair]:
    ours, theirs = socket.socketpair()
    _, writer = await asyncio.open_connection(sock=ours)
    peer, peer_writer = await asyncio.open_connection(sock=theirs)
    writes: list[bytes] = []
    transport: Any = writer.transport
    real_write = transport.write

    def counted(data: bytes) -> None:
        writes.append(bytes(data))
        real_write(data)

    transport.write = counted
    corked = Corked(writer, most=1024)
    yield _Pair(corked, peer, writes)
    corked.close()
    peer_writer.close()


async def test_what_one_turn_of_the_loop_writes_goes_out_as_one_write(pair: _Pair) -> None:
    messages = [b"message %d\n" % n for n in range(20)]
    for message in messages:
        pair.corked.write(message)
        await pair.corked.drain()  # (as the ACP SDK does after each message: it does not wait)
    assert pair.writes == []  # held until this turn of the loop ends
    received = await pair.peer.readexactly(sum(map(len, messages)))
    assert received == b"".join(messages)
    assert pair.writes == [b"".join(messages)]


async def test_a_burst_past_the_limit_goes_out_at_once(pair: _Pair) -> None:
    big = b"x" * 1500
    pair.corked.write(b"small\n")
    pair.corked.write(big)
    assert pair.writes == [b"small\n" + big]  # not held: over `most` bytes
    assert await pair.peer.readexactly(6 + len(big)) == b"small\n" + big


async def test_close_and_end_of_file_send_what_is_held_first(pair: _Pair) -> None:
    pair.corked.write(b"last words\n")
    pair.corked.write_eof()
    assert await pair.peer.read() == b"last words\n"  # then the end of the stream


async def test_a_write_that_failed_is_told_to_the_next_writer() -> None:
    ours, theirs = socket.socketpair()
    _, writer = await asyncio.open_connection(sock=ours)
    transport: Any = writer.transport

    def broken(data: bytes) -> None:
        raise ConnectionResetError("the agent's stdin is closed")

    transport.write = broken
    corked = Corked(writer)
    corked.write(b"lost\n")
    corked.flush()  # the loop's turn ends: the write fails, and nobody is there to hear it
    with pytest.raises(ConnectionResetError, match="stdin is closed"):
        await corked.drain()
    writer.transport.abort()
    theirs.close()
