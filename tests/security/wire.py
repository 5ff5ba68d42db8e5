"""A tiny raw client for the fuzz tests: LSP framing over asyncio streams, nothing checked for us.

It sends whatever bytes it is given (broken framing included) and reads the
daemon's frames strictly, so a malformed answer is caught, not papered over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from dataclasses import dataclass
from typing import Any

# Python refuses to turn more than 4,300 digits into an int; ids may be longer.
INT_DIGITS = 4000


@dataclass(frozen=True)
class RawJson:
    """JSON text put into a message as it is: 5,000-digit numbers, NaN, nesting Python cannot build."""

    text: str

    def __repr__(self) -> str:
        text = (
            self.text if len(self.text) <= 60 else f"{self.text[:30]}...{self.text[-20:]} ({len(self.text)})"
        )
        return f"RawJson({text!r})"


@dataclass(frozen=True)
class BigNumber:
    """A number read back that Python would not parse: kept as its text."""

    digits: str


class BadFrame(Exception):
    """The daemon wrote something that is not an LSP frame of JSON."""


def dump(value: Any) -> str:
    """JSON text of `value`, with RawJson parts spliced in verbatim."""
    if isinstance(value, RawJson):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dump(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # NaN / Infinity: not JSON, which is the point
    return json.dumps(value)


def frame(body: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(body, dict):
        body = dump(body)
    if isinstance(body, str):
        body = body.encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _parse_int(text: str) -> Any:
    return int(text) if len(text.lstrip("-")) <= INT_DIGITS else BigNumber(text)


def _no_constant(text: str) -> Any:
    raise BadFrame(f"the daemon wrote {text}, which is not JSON")


def loads(body: bytes) -> Any:
    return json.loads(body, parse_int=_parse_int, parse_constant=_no_constant)


class Wire:
    """One connection to the daemon."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.seen: list[dict[str, Any]] = []  # every message read, in order

    @classmethod
    async def unix(cls, path: str, timeout: float = 10) -> Wire:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(path, limit=256 * 1024 * 1024), timeout
        )
        return cls(reader, writer)

    @classmethod
    async def tcp(cls, host: str, port: int, timeout: float = 10) -> Wire:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=256 * 1024 * 1024), timeout
        )
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_eof(self) -> None:
        if self.writer.can_write_eof():
            self.writer.write_eof()

    async def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when the daemon closed the connection; TimeoutError if neither."""
        message = await asyncio.wait_for(self._read(), timeout)
        if message is not None:
            self.seen.append(message)
        return message

    async def next_request(self, method: str, timeout: float) -> dict[str, Any]:
        """The next message of `method` the daemon sends (others are skipped); it must come."""
        while True:
            message = await self.read(timeout)
            assert message is not None, f"the connection closed while waiting for {method}"
            if message.get("method") == method:
                return message

    async def _read(self) -> dict[str, Any] | None:
        length: int | None = None
        while True:
            try:
                line = await self.reader.readline()
            except (ConnectionError, OSError):
                return None
            if not line:
                return None
            if line == b"\r\n":
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if not line.endswith(b"\r\n") or not _:
                raise BadFrame(f"the daemon wrote a bad header line {line[:80]!r}")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None:
            raise BadFrame("the daemon wrote a frame without Content-Length")
        try:
            body = await self.reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return None
        message = loads(body)
        if not isinstance(message, dict):
            raise BadFrame(f"the daemon wrote a frame that is not an object: {body[:80]!r}")
        return message

    async def wait_for_id(self, msg_id: Any, timeout: float) -> dict[str, Any] | None:
        """Read until the response with `msg_id` (None: the connection closed first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            message = await self.read(max(0.001, deadline - loop.time()))
            if message is None:
                return None
            if "method" not in message and same_id(message.get("id"), msg_id):
                return message

    async def request(self, method: str, params: Any, msg_id: Any, timeout: float = 10) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(frame(message))
        answer = await self.wait_for_id(msg_id, timeout)
        if answer is None:
            raise ConnectionError(f"the daemon closed the connection instead of answering {method}")
        return answer

    async def initialize(self, options: dict[str, Any] | None = None, timeout: float = 10) -> dict[str, Any]:
        params = {"processId": None, "capabilities": {}, "initializationOptions": options or {}}
        answer = await self.request("initialize", params, "init", timeout)
        if "result" in answer:
            await self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        return answer

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            await asyncio.wait_for(self.writer.wait_closed(), 2)


def same_id(a: Any, b: Any) -> bool:
    """Ids compared as JSON values: 1 is not true, 1 is not "1"."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, RawJson | BigNumber) or isinstance(b, RawJson | BigNumber):
        return _digits(a) is not None and _digits(a) == _digits(b)
    return type(a) is type(b) and a == b


def _digits(value: Any) -> str | None:
    """A number's JSON text, however it was held."""
    if isinstance(value, BigNumber):
        return value.digits
    if isinstance(value, RawJson):
        return value.text
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None
