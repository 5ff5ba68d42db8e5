"""The client's side of the wire, without I/O: LSP frames made and read, answers told apart.

The async connection (`connection.py`) and the blocking one the quick commands use
(`plain.py`) read and write through these, so both hold the daemon to the same rules.
"""

from __future__ import annotations

import json
from typing import Any

from sessiond.client.errors import ProtocolError, SessiondError, error_from_code

# Headers are a few dozen bytes; a body this large is a broken peer, not a big event.
MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024
END_OF_HEADER = b"\r\n\r\n"


def encode_message(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def content_length(head: bytes) -> int:
    """The body's length a header (ending in a blank line) gives; ProtocolError when it does not."""
    if len(head) > MAX_HEADER_BYTES:
        raise ProtocolError(f"a header of {len(head)} bytes")
    length: int | None = None
    for line in head.removesuffix(END_OF_HEADER).split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProtocolError(f"a header line without a colon: {line[:80]!r}")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise ProtocolError(f"Content-Length is not a number: {value[:40]!r}") from None
    if length is None:
        raise ProtocolError(f"a header without Content-Length: {head[:80]!r}")
    if not 0 <= length <= MAX_BODY_BYTES:
        raise ProtocolError(f"Content-Length {length} is out of range")
    return length


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"a body that is not JSON ({e})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a body that is not a JSON object: {body[:80]!r}")
    return message


def error_of(response: dict[str, Any]) -> SessiondError | None:
    """The error a response carries, None for a result; ProtocolError when it is neither."""
    if "error" in response:
        error = response["error"]
        readable = isinstance(error, dict) and isinstance(error.get("code"), int)
        if not (readable and isinstance(error.get("message"), str)):
            raise ProtocolError(f"an error object without an integer code and a message: {error!r:.200}")
        return error_from_code(error["code"], error["message"], error.get("data"))
    if "result" not in response:
        raise ProtocolError(f"a response with neither result nor error: {response!r:.200}")
    return None
