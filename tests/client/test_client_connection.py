"""The JSON-RPC connection, against a scripted peer over a socketpair (it stands in for the daemon).

The peer's framing here is written independently of the client's.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessiond.client.connection import CANCEL_REQUEST, Connection
from sessiond.client.errors import (
    ConnectionLost,
    InvalidParams,
    ProtocolError,
    SessiondError,
    SessionNotFound,
)
from sessiond.protocol.errors import ErrorCode, RpcError

pytestmark = pytest.mark.timeout(30)


class Peer:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def read(self) -> dict[str, Any]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        length = int(head.decode().split(":")[1])
        return json.loads(await self.reader.readexactly(length))

    def write_raw(self, data: bytes) -> None:
        self.writer.write(data)

    def write(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False).encode()
        self.write_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Connection, Peer]]:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    peer = Peer(*await asyncio.open_connection(sock=theirs))
    connection = Connection.open(reader, writer, peer="test-peer")
    yield connection, peer
    await connection.close()
    peer.writer.close()


async def test_requests_resolve_by_id_whatever_the_order_of_answers(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    first = asyncio.create_task(connection.request("a/first", {"n": 1}))
    second = asyncio.create_task(connection.request("a/second"))
    got = [await peer.read(), await peer.read()]
    assert [m["method"] for m in got] == ["a/first", "a/second"]
    assert got[0]["params"] == {"n": 1}
    assert "params" not in got[1]
    assert all(m["jsonrpc"] == "2.0" for m in got)
    peer.write({"id": got[1]["id"], "result": "two"})
    peer.write({"id": got[0]["id"], "result": {"one": [1]}})
    assert await first == {"one": [1]}
    assert await second == "two"


async def test_error_answers_become_the_class_of_their_code_with_the_message_verbatim(
    pair: tuple[Connection, Peer],
) -> None:
    connection, peer = pair
    for code, expected in [
        (ErrorCode.SESSION_NOT_FOUND, SessionNotFound),
        (ErrorCode.INVALID_PARAMS, InvalidParams),
        (-39999, SessiondError),
    ]:
        task = asyncio.create_task(connection.request("x"))
        request = await peer.read()
        peer.write(
            {"id": request["id"], "error": {"code": code, "message": "exactly this", "data": {"k": 1}}}
        )
        with pytest.raises(expected) as raised:
            await task
        assert type(raised.value) is expected
        assert isinstance(raised.value, RpcError)
        assert (str(raised.value), raised.value.code, raised.value.data) == ("exactly this", code, {"k": 1})


async def test_notifications_reach_their_handler_in_order(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    seen: list[Any] = []
    done = asyncio.Event()

    def handler(params: Any) -> None:
        seen.append(params["n"])
        if len(seen) == 50:
            done.set()

    connection.on_notification("x/note", handler)
    peer.write({"method": "x/unknown", "params": {}})  # ignored
    for n in range(50):
        peer.write({"method": "x/note", "params": {"n": n}})
    await asyncio.wait_for(done.wait(), 10)
    assert seen == list(range(50))


async def test_the_daemons_requests_are_always_answered(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair

    def refuse(params: Any) -> Any:
        raise RpcError(ErrorCode.CONFLICT, "not now")

    connection.on_request("x/refused", refuse)
    connection.on_request("x/echo", lambda params: params)
    peer.write({"id": 1, "method": "window/workDoneProgress/create", "params": {"token": "t"}})
    peer.write({"id": 2, "method": "x/unknown", "params": {}})
    peer.write({"id": "three", "method": "x/refused"})
    peer.write({"id": 4, "method": "x/echo", "params": [1, 2]})
    answers = {m["id"]: m for m in [await peer.read() for _ in range(4)]}
    assert answers[1]["result"] is None
    assert "error" not in answers[1]
    assert answers[2]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert "x/unknown" in answers[2]["error"]["message"]
    assert answers["three"]["error"] == {"code": ErrorCode.CONFLICT, "message": "not now"}
    assert answers[4]["result"] == [1, 2]


async def test_cancelling_the_awaiting_task_sends_cancel_request_and_propagates(
    pair: tuple[Connection, Peer],
) -> None:
    connection, peer = pair
    task = asyncio.create_task(connection.request("session/prompt", {"p": 1}))
    request = await peer.read()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancel = await peer.read()
    assert cancel == {"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"id": request["id"]}}
    # The late answer to the cancelled request is dropped; the connection carries on.
    peer.write({"id": request["id"], "result": {"stopReason": "cancelled"}})
    later = asyncio.create_task(connection.request("x/later"))
    peer.write({"id": (await peer.read())["id"], "result": 7})
    assert await later == 7


async def test_the_daemon_going_away_fails_every_pending_request(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    closed_with: list[ConnectionLost] = []
    connection.on_close(closed_with.append)
    tasks = [asyncio.create_task(connection.request(f"x/{n}")) for n in range(3)]
    for _ in tasks:
        await peer.read()
    await peer.close()
    for task in tasks:
        with pytest.raises(ConnectionLost, match="the daemon closed the connection"):
            await task
    assert connection.closed
    assert len(closed_with) == 1
    with pytest.raises(ConnectionLost, match="closed the connection"):
        await connection.request("x/after")
    with pytest.raises(ConnectionLost):
        await connection.notify("x/after")


@pytest.mark.parametrize(
    ("garbage", "what"),
    [
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: lots\r\n\r\n", "not a number"),
        (b"Content-Length: 3\r\n\r\n{x}", "not JSON"),
        (b"Content-Length: 2\r\n\r\n[]", "not a JSON object"),
        (b"Content-Length: 2\r\n\r\n{}", "neither request, response nor notification"),
        (b'Content-Length: 31\r\n\r\n{"id":1,"error":{"code":"bad"}}', "integer code"),
        (b"no colon here\r\n\r\n", "without a colon"),
    ],
)
async def test_a_malformed_message_closes_the_connection_with_a_clear_error(
    pair: tuple[Connection, Peer], garbage: bytes, what: str
) -> None:
    connection, peer = pair
    task = asyncio.create_task(connection.request("x/pending"))
    await peer.read()
    peer.write_raw(garbage)
    with pytest.raises(ConnectionLost, match="malformed") as raised:
        await task
    assert what in str(raised.value)
    assert isinstance(raised.value.__cause__, ProtocolError)
    assert connection.closed
    assert await peer.reader.read() == b""  # the client closed its side


async def test_the_stream_ending_inside_a_message_is_reported(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    task = asyncio.create_task(connection.request("x/pending"))
    await peer.read()
    peer.write_raw(b"Content-Length: 100\r\n\r\n{")
    await peer.close()
    with pytest.raises(ConnectionLost, match="ended inside a message"):
        await task


async def test_frames_split_across_writes_or_sharing_one_read_alike(
    pair: tuple[Connection, Peer],
) -> None:
    connection, peer = pair
    tasks = [asyncio.create_task(connection.request(f"x/{n}")) for n in range(3)]
    ids = [(await peer.read())["id"] for _ in tasks]
    frames = []
    for request_id, text in zip(ids, ["plain", "héllo ✓ 日本", "x" * 70000], strict=True):
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text}, ensure_ascii=False).encode()
        frames.append(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    peer.write_raw(frames[0] + frames[1][:5])
    await asyncio.sleep(0)
    for byte in frames[1][5:]:
        peer.write_raw(bytes([byte]))
        await peer.writer.drain()
    peer.write_raw(frames[2])
    assert [await t for t in tasks] == ["plain", "héllo ✓ 日本", "x" * 70000]


async def test_close_fails_pending_requests_and_is_idempotent(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    task = asyncio.create_task(connection.request("x/pending"))
    await peer.read()
    await connection.close()
    await connection.close()
    with pytest.raises(ConnectionLost, match="closed by this client"):
        await task
    assert (await connection.wait_closed()).args[0].startswith("the connection was closed by this client")
