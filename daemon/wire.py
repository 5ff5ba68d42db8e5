"""The wire under JSON-RPC: LSP frames read within limits, and each message's envelope checked.

Bytes in; frames, messages or refusals out. Nothing here knows pygls, the
daemon's methods or who is connected: `gate.py` decides who may call what,
`server.py` wires both to a socket.

A refusal carries the JSON-RPC error to answer with and whether the stream
can still be trusted: a frame whose length is unknown or unbelievable ends
the connection (nothing after it can be found again), while a body that is
not JSON, or JSON that is not a JSON-RPC 2.0 message, is answered and the
connection reads on.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from sessiond.protocol import fast_json
from sessiond.protocol.errors import ErrorCode

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one connection may cost the daemon."""

    max_message: int = 16 * MiB
    """Largest message body once the connection has initialized (`sessiond serve --max-message`)."""
    unauthenticated_message: int = 64 * 1024
    """Largest message body before it has (the `initialize` that carries the TCP token)."""
    unauthenticated_seconds: float = 10.0
    """Before it has initialized, each message must arrive whole within this many seconds."""
    header_line: int = 8 * 1024
    """Longest header line; the stream reader's buffer is bounded by it."""
    header_lines: int = 16
    in_flight: int = 10_000
    """Requests of one connection being answered at once; past it new ones are refused."""


HEADER = re.compile(rb"^([A-Za-z0-9-]+): *(.*?)\r?\n$")
MAX_DIGITS = 64  # integers longer than this are no ids, sizes or counts of ours
MAX_ID_LENGTH = 256
MAX_METHOD_LENGTH = 256


class FrameError(Exception):
    """The stream is not LSP framing any more: answer once, then close the connection."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Oversized(Exception):
    """A whole message over the limit, skipped without being held: the connection reads on."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"{length} > {limit}")
        self.length = length
        self.limit = limit


async def read_frame(reader: asyncio.StreamReader, limits: Limits, *, max_body: int) -> bytes | None:
    """The next message body, or None at a clean end of stream.

    Raises FrameError when the headers cannot be read, Oversized when the body is
    larger than `max_body` (its bytes are still to come: `skip` them, or close).
    """
    length: int | None = None
    lines = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial and lines == 0:
                return None
            raise FrameError(ErrorCode.PARSE_ERROR, "the stream ended inside a message's headers") from None
        except asyncio.LimitOverrunError:
            raise FrameError(
                ErrorCode.PARSE_ERROR,
                f"a header line is longer than {limits.header_line} bytes: this is not LSP framing",
            ) from None
        if line in (b"\r\n", b"\n"):
            if lines == 0:
                continue  # stray blank lines between messages are harmless
            break
        lines += 1
        if lines > limits.header_lines:
            raise FrameError(ErrorCode.PARSE_ERROR, f"a message has more than {limits.header_lines} headers")
        match = HEADER.match(line)
        if match is None:
            raise FrameError(
                ErrorCode.PARSE_ERROR,
                f"a header line is not `Name: value`: {line[:80]!r}; "
                "each message starts `Content-Length: N` and a blank line",
            )
        if match.group(1).lower() == b"content-length":
            value = match.group(2).strip()
            if not value.isdigit() or len(value) > 12:
                raise FrameError(ErrorCode.PARSE_ERROR, f"Content-Length {value[:40]!r} is not a byte count")
            if length is not None and length != int(value):
                raise FrameError(ErrorCode.PARSE_ERROR, "a message has two different Content-Length headers")
            length = int(value)
    if length is None:
        raise FrameError(ErrorCode.PARSE_ERROR, "a message came without a Content-Length header")
    if length > max_body:
        raise Oversized(length, max_body)
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError(
            ErrorCode.PARSE_ERROR, f"the stream ended inside a message body of {length} bytes"
        ) from None


async def skip(reader: asyncio.StreamReader, length: int) -> None:
    """Read and drop `length` bytes in small pieces, holding none of them."""
    left = length
    while left:
        chunk = await reader.read(min(left, 64 * 1024))
        if not chunk:
            raise FrameError(
                ErrorCode.PARSE_ERROR, f"the stream ended inside a message body of {length} bytes"
            )
        left -= len(chunk)


# The id of a message, when the message starts with it (as JSON-RPC clients write them):
# enough to answer a message too large to read by its id.
LEADING_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,256}")\s*,'
)


def leading_id(head: bytes) -> int | str | None:
    """The id a message body begins with, from its first bytes; None when it does not begin so."""
    match = LEADING_ID.match(head)
    if match is None:
        return None
    value = json.loads(match.group(1))
    return value if isinstance(value, int | str) else None


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# ---------------------------------------------------------------- envelopes


class Kind(Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"


@dataclass(frozen=True)
class Message:
    """One JSON-RPC 2.0 message whose envelope is sound; its params are not checked here."""

    kind: Kind
    raw: dict[str, Any]

    @property
    def id(self) -> int | str | None:
        value = self.raw.get("id")
        return value if isinstance(value, int | str) else None

    @property
    def method(self) -> str:
        return self.raw.get("method") or ""

    @property
    def params(self) -> Any:
        return self.raw.get("params")


class Refusal(Exception):
    """A message that cannot be taken: the error to answer, to `id` when it had a usable one."""

    def __init__(self, code: ErrorCode, message: str, msg_id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = msg_id


class _TooLong(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _TooLong(f"a number of {len(text)} digits")
    return int(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _strict_loads(body: bytes) -> Any:
    return json.loads(body, parse_int=_bounded_int, parse_constant=_no_constant)


def parse(body: bytes) -> Message:
    """The message in `body`, or a Refusal saying what is wrong with it."""
    try:
        data = fast_json.loads(body, _strict_loads)
    except _TooLong as exc:
        raise Refusal(
            ErrorCode.PARSE_ERROR, f"the message holds {exc}: numbers are at most {MAX_DIGITS}"
        ) from None
    except RecursionError:
        raise Refusal(ErrorCode.PARSE_ERROR, "the message is nested too deeply to read") from None
    except UnicodeDecodeError as exc:
        raise Refusal(
            ErrorCode.PARSE_ERROR, f"the message is not UTF-8: {exc.reason} at byte {exc.start}"
        ) from None
    except ValueError as exc:
        raise Refusal(ErrorCode.PARSE_ERROR, f"the message is not valid JSON: {exc}") from None
    if isinstance(data, list):
        raise Refusal(
            ErrorCode.INVALID_REQUEST, "batches (JSON arrays) are not served: send one message a frame"
        )
    if not isinstance(data, dict):
        raise Refusal(ErrorCode.INVALID_REQUEST, "a JSON-RPC message is a JSON object")
    msg_id = data.get("id")
    usable_id = _usable_id(msg_id)
    if "id" in data and usable_id is None and msg_id is not None:
        raise Refusal(
            ErrorCode.INVALID_REQUEST,
            f"`id` must be an integer or a string of at most {MAX_ID_LENGTH} characters",
        )
    if data.get("jsonrpc") != "2.0":
        raise Refusal(
            ErrorCode.INVALID_REQUEST, 'not a JSON-RPC 2.0 message: it needs "jsonrpc": "2.0"', usable_id
        )
    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method or len(method) > MAX_METHOD_LENGTH:
            raise Refusal(ErrorCode.INVALID_REQUEST, "`method` must be a non-empty string", usable_id)
        params = data.get("params")
        if params is not None and not isinstance(params, dict | list):
            raise Refusal(ErrorCode.INVALID_REQUEST, "`params` must be an object or an array", usable_id)
        if "id" not in data:
            return Message(Kind.NOTIFICATION, data)
        if msg_id is None:
            raise Refusal(ErrorCode.INVALID_REQUEST, "a request's `id` must not be null")
        return Message(Kind.REQUEST, data)
    if usable_id is not None and ("result" in data) != ("error" in data):
        return Message(Kind.RESPONSE, data)
    raise Refusal(
        ErrorCode.INVALID_REQUEST,
        "a message is a request (method and id), a notification (method) or a response (id and result "
        "or error)",
        usable_id,
    )


def _usable_id(value: Any) -> int | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and len(value) <= MAX_ID_LENGTH:
        return value
    return None
