"""The pure parts under the server: envelopes (`wire.parse`), frames, and the gate's table."""

from __future__ import annotations

import asyncio
import json

import pytest

from sessiond.daemon import gate, wire
from sessiond.daemon.gate import Access, Admit, Drop, Phase, Refuse
from sessiond.daemon.wire import Kind, Limits
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.methods import METHODS


def _refusal(body: str | bytes) -> wire.Refusal:
    with pytest.raises(wire.Refusal) as caught:
        wire.parse(body.encode() if isinstance(body, str) else body)
    return caught.value


@pytest.mark.parametrize(
    ("body", "code", "msg_id"),
    [
        ("nope", ErrorCode.PARSE_ERROR, None),
        (b"\xff\xfe", ErrorCode.PARSE_ERROR, None),
        ("[" * 100_000, ErrorCode.PARSE_ERROR, None),
        (
            '{"jsonrpc":"2.0","id":1,"method":"a","params":{"n":' + "1" * 65 + "}}",
            ErrorCode.PARSE_ERROR,
            None,
        ),
        ('{"jsonrpc":"2.0","id":1,"method":"a","params":{"n":NaN}}', ErrorCode.PARSE_ERROR, None),
        ("[]", ErrorCode.INVALID_REQUEST, None),
        ("5", ErrorCode.INVALID_REQUEST, None),
        ('{"jsonrpc":"1.0","id":3,"method":"a"}', ErrorCode.INVALID_REQUEST, 3),
        ('{"id":"x","method":"a"}', ErrorCode.INVALID_REQUEST, "x"),
        ('{"jsonrpc":"2.0","id":{"a":1},"method":"a"}', ErrorCode.INVALID_REQUEST, None),
        ('{"jsonrpc":"2.0","id":true,"method":"a"}', ErrorCode.INVALID_REQUEST, None),
        ('{"jsonrpc":"2.0","id":1.5,"method":"a"}', ErrorCode.INVALID_REQUEST, None),
        ('{"jsonrpc":"2.0","id":null,"method":"a"}', ErrorCode.INVALID_REQUEST, None),
        ('{"jsonrpc":"2.0","id":4,"method":5}', ErrorCode.INVALID_REQUEST, 4),
        ('{"jsonrpc":"2.0","id":4,"method":""}', ErrorCode.INVALID_REQUEST, 4),
        ('{"jsonrpc":"2.0","id":5,"method":"a","params":"x"}', ErrorCode.INVALID_REQUEST, 5),
        ('{"jsonrpc":"2.0","id":6}', ErrorCode.INVALID_REQUEST, 6),
        ('{"jsonrpc":"2.0","id":7,"result":1,"error":{}}', ErrorCode.INVALID_REQUEST, 7),
    ],
)
def test_a_bad_envelope_is_refused_with_its_code_and_usable_id(
    body: str, code: ErrorCode, msg_id: object
) -> None:
    refusal = _refusal(body)
    assert refusal.code == code
    assert refusal.id == msg_id
    assert refusal.message


def test_good_envelopes_are_told_apart() -> None:
    assert wire.parse(b'{"jsonrpc":"2.0","id":1,"method":"a","params":[]}').kind is Kind.REQUEST
    assert wire.parse(b'{"jsonrpc":"2.0","method":"a"}').kind is Kind.NOTIFICATION
    assert wire.parse(b'{"jsonrpc":"2.0","id":"r","result":null}').kind is Kind.RESPONSE
    assert wire.parse(b'{"jsonrpc":"2.0","id":"r","error":{"code":1}}').kind is Kind.RESPONSE
    assert wire.parse(b'{"jsonrpc":"2.0","id":2,"method":"a","params":{"n":' + b"9" * 64 + b"}}").id == 2


def test_leading_id_reads_only_an_id_that_comes_first() -> None:
    assert wire.leading_id(b'{"jsonrpc":"2.0","id":12,"method":"x"') == 12
    assert wire.leading_id(b'{"id":"abc","jsonrpc":"2.0"') == "abc"
    assert wire.leading_id(b'{"method":"x","id":3,') is None
    assert wire.leading_id(b'{"jsonrpc":"2.0","id":{"a":1},') is None


async def _frames(data: bytes, max_body: int = 1024) -> list[bytes | None]:
    limits = Limits()
    reader = asyncio.StreamReader(limit=limits.header_line)
    reader.feed_data(data)
    reader.feed_eof()
    out: list[bytes | None] = []
    while (body := await wire.read_frame(reader, limits, max_body=max_body)) is not None:
        out.append(body)
    return out


async def test_frames_are_read_and_a_clean_end_is_none() -> None:
    body = json.dumps({"a": 1}).encode()
    data = wire.frame(body) + b"\r\n" + b"Content-Type: x\r\ncontent-length: 2\r\n\r\n{}"
    assert await _frames(data) == [body, b"{}"]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"Content-Length: x\r\n\r\n", "not a byte count"),
        (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "two different"),
        (b"Content-Type: a\r\n\r\n{}", "without a Content-Length"),
        (b"garbage\r\n\r\n", "not `Name: value`"),
        (b"X" * 10_000, "longer than"),
        (b"Content-Length: 10\r\n\r\n{}", "ended inside a message body"),
        (b"Content-Length: 2\r\n", "ended inside a message's headers"),
        (b"".join(b"A: b\r\n" for _ in range(20)) + b"\r\n", "more than 16 headers"),
    ],
)
async def test_framing_the_reader_cannot_follow_is_a_frame_error(data: bytes, words: str) -> None:
    with pytest.raises(wire.FrameError) as caught:
        await _frames(data)
    assert words in caught.value.message


async def test_an_oversized_message_is_reported_before_its_body_is_read() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"Content-Length: 4096\r\n\r\n")  # no body yet: nothing must wait for it
    with pytest.raises(wire.Oversized) as caught:
        await wire.read_frame(reader, Limits(), max_body=1024)
    assert (caught.value.length, caught.value.limit) == (4096, 1024)


def _message(kind: Kind, method: str = "") -> wire.Message:
    raw: dict[str, object] = {"jsonrpc": "2.0"}
    if method:
        raw["method"] = method
    if kind is not Kind.NOTIFICATION:
        raw["id"] = 1
    if kind is Kind.RESPONSE:
        raw["result"] = None
    return wire.Message(kind, raw)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_sent_as_a_notification_is_dropped_in_every_phase(method: str) -> None:
    for access in (
        Access(),
        Access(needs_token=True),
        Access(phase=Phase.READY),
        Access(phase=Phase.READY, acting_for="s1"),
        Access(phase=Phase.SHUT_DOWN),
    ):
        assert isinstance(gate.admit(access, _message(Kind.NOTIFICATION, method)), Drop), access


def test_requests_by_phase_token_and_acting_for() -> None:
    new, tcp = Access(), Access(needs_token=True)
    ready, bridge = Access(phase=Phase.READY), Access(phase=Phase.READY, acting_for="s1")
    done = Access(phase=Phase.SHUT_DOWN)
    request = lambda method: _message(Kind.REQUEST, method)  # noqa: E731
    assert gate.admit(new, request("initialize")) == Admit()
    assert gate.admit(new, request("session/list")) == Refuse(
        ErrorCode.SERVER_NOT_INITIALIZED, "the connection is not initialized: send `initialize` first"
    )
    assert gate.admit(tcp, request("session/list")).code == ErrorCode.UNAUTHORIZED  # type: ignore[union-attr]
    assert gate.admit(ready, request("initialize")).code == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]
    assert gate.admit(ready, request("session/list")) == Admit()
    assert gate.admit(ready, request("no/such")).code == ErrorCode.METHOD_NOT_FOUND  # type: ignore[union-attr]
    assert gate.admit(bridge, request("task/suggest")) == Admit()
    assert gate.admit(bridge, request("session/open")).code == ErrorCode.UNAUTHORIZED  # type: ignore[union-attr]
    assert gate.admit(done, request("session/list")).code == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]
    assert gate.admit(ready, request("shutdown")) == Admit()


def test_notifications_and_responses_by_phase() -> None:
    new, ready = Access(), Access(phase=Phase.READY)
    assert gate.admit(new, _message(Kind.NOTIFICATION, "exit")) == Admit()
    assert isinstance(gate.admit(new, _message(Kind.NOTIFICATION, "$/cancelRequest")), Drop)
    assert gate.admit(ready, _message(Kind.NOTIFICATION, "$/cancelRequest")) == Admit()
    assert isinstance(gate.admit(ready, _message(Kind.NOTIFICATION, "textDocument/didOpen")), Drop)
    assert isinstance(gate.admit(new, _message(Kind.RESPONSE)), Drop)
    assert gate.admit(ready, _message(Kind.RESPONSE)) == Admit()
