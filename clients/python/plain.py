"""A blocking connection to the daemon in plain JSON, for the commands that ask and print.

`sessiond ls`, `status`, `send` and their like are over before an event loop, pydantic, the
protocol's models and the async client would have loaded (most of such a command's time
went there). This speaks the same JSON-RPC as `connection.py` (the frames and answers of
`framing.py`, the errors of `errors.py`) over a blocking socket: results come back as the
daemon's JSON, unchecked (the daemon checks the params it is sent, and a command reads only
what it shows); notifications go to one callback as they come, and the daemon's own requests
are answered (null for `window/workDoneProgress/create`, MethodNotFound for any other).
"""

from __future__ import annotations

import itertools
import os
import socket as socketlib
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from sessiond.client import launch
from sessiond.client.errors import ConnectionLost, ProtocolError
from sessiond.client.framing import MAX_HEADER_BYTES, content_length, decode_body, encode_message, error_of
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.version import VERSION

CLIENT_NAME = "sessiond-cli"
CANCEL_REQUEST = "$/cancelRequest"
PROGRESS_CREATE = "window/workDoneProgress/create"

Notified = Callable[[str, Any], None]


class PlainDaemon:
    """One connection, initialized; `call` a method, or `ask` one and `wait_for` its answer."""

    def __init__(self, sock: socketlib.socket, path: Path) -> None:
        self.path = path
        self._sock = sock
        self._file = sock.makefile("rb")
        self._ids = itertools.count(1)
        self._sending = threading.Lock()  # whole messages: `send` answers a question from a thread
        self.on_notification: Notified | None = None

    @classmethod
    def connect(cls, socket: str | os.PathLike[str] | None = None, *, start: bool = False) -> PlainDaemon:
        """Connected and initialized (a daemon started first when asked and none runs)."""
        path = launch.resolve_socket(socket)
        daemon = cls(launch.connect_socket(path, start=start), path)
        try:
            daemon.call(
                "initialize",
                {
                    "processId": os.getpid(),
                    "clientInfo": {"name": CLIENT_NAME, "version": VERSION},
                    "capabilities": {},
                    "initializationOptions": {},
                },
            )
            daemon.notify("initialized", {})
        except BaseException:
            daemon.close()
            raise
        return daemon

    def __enter__(self) -> PlainDaemon:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    # ------------------------------------------------------------ sending

    def ask(self, method: str, params: Any = None) -> int:
        """Send a request; its id, to `wait_for`."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        return request_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def call(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result (the daemon's JSON); SessiondError for an error."""
        return self.wait_for(self.ask(method, params))

    def cancel(self, request_id: int) -> None:
        """Tell the daemon the caller no longer waits for a request (`$/cancelRequest`)."""
        self.notify(CANCEL_REQUEST, {"id": request_id})

    def _send(self, message: dict[str, Any]) -> None:
        try:
            with self._sending:
                self._sock.sendall(encode_message(message))
        except OSError as e:
            raise ConnectionLost(f"writing to the daemon failed ({e}) [{self.path}]") from e

    # ------------------------------------------------------------ reading

    def wait_for(self, request_id: int) -> Any:
        """Read until the answer to `request_id` comes, handing notifications on on the way."""
        while True:
            message = self._read()
            method = message.get("method")
            if method is None:
                if message.get("id") != request_id:
                    continue  # an answer nobody waits for any more
                error = error_of(message)
                if error is not None:
                    raise error
                return message["result"]
            if not isinstance(method, str):
                raise self._lost(ProtocolError(f"a method name that is not a string: {method!r}"))
            if "id" in message:
                self._answer(message["id"], method)
            elif self.on_notification is not None:
                self.on_notification(method, message.get("params"))

    def _answer(self, request_id: Any, method: str) -> None:
        if method == PROGRESS_CREATE:
            self._send({"jsonrpc": "2.0", "id": request_id, "result": None})
            return
        error = {
            "code": int(ErrorCode.METHOD_NOT_FOUND),
            "message": f"the sessiond command does not handle {method}",
        }
        self._send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _read(self) -> dict[str, Any]:
        try:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self._file.readline(MAX_HEADER_BYTES + 1)
                if not line:
                    if head:
                        raise ProtocolError(f"the stream ended inside a header ({head[:80]!r})")
                    raise ConnectionLost(f"the daemon closed the connection [{self.path}]")
                head += line
                if len(head) > MAX_HEADER_BYTES:
                    raise ProtocolError(f"a header of more than {MAX_HEADER_BYTES} bytes")
            length = content_length(head)
            body = self._file.read(length)
            if len(body) < length:
                raise ProtocolError(f"the stream ended inside a message ({len(body)} of {length} bytes)")
            return decode_body(body)
        except ProtocolError as e:
            raise self._lost(e) from None
        except ConnectionLost:
            raise
        except OSError as e:
            raise ConnectionLost(f"the connection to the daemon broke ({e}) [{self.path}]") from e

    def _lost(self, cause: ProtocolError) -> ConnectionLost:
        lost = ConnectionLost(
            f"the daemon sent a malformed message: {cause}; the connection was closed [{self.path}]"
        )
        lost.__cause__ = cause
        self.close()
        return lost
