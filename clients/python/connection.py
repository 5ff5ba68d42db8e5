"""One JSON-RPC 2.0 connection to the daemon, with LSP base-protocol framing.

This is a small hand-written layer on purpose. The chosen dependencies hold
no general JSON-RPC client: pygls's client machinery turns every result into
namedtuples (the client wants plain JSON, to validate with the pydantic
models of ``sessiond.protocol``), and it would bring its own idea of which
task owns the reader. What is needed fits here: ids and pending futures, one
reader task owned by the connection, notifications handed to one handler per
method in arrival order, the daemon's own requests always answered, and
``$/cancelRequest`` sent when the task awaiting a request is cancelled.

Architecture invariant: this module knows JSON-RPC and framing, and nothing
of sessiond's methods beyond the two the base protocol itself defines.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any

from sessiond.client.errors import ConnectionLost, ProtocolError
from sessiond.client.framing import END_OF_HEADER, content_length, decode_body, encode_message, error_of
from sessiond.protocol.errors import ErrorCode, RpcError

log = logging.getLogger(__name__)

CANCEL_REQUEST = "$/cancelRequest"

NotificationHandler = Callable[[Any], None]
RequestHandler = Callable[[Any], Any]

__all__ = ["CANCEL_REQUEST", "Connection", "encode_message", "read_message"]


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at a clean end of stream (between messages)."""
    try:
        head = await reader.readuntil(END_OF_HEADER)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ProtocolError(f"the stream ended inside a header ({e.partial[:80]!r})") from None
    except asyncio.LimitOverrunError:
        raise ProtocolError("a header longer than the stream's limit") from None
    length = content_length(head)
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise ProtocolError(
            f"the stream ended inside a message ({len(e.partial)} of {length} bytes)"
        ) from None
    return decode_body(body)


class Connection:
    """A JSON-RPC connection over an asyncio stream pair; ``open`` it, ``close`` it.

    Requests and notifications can be sent from any task of the loop. Incoming
    notifications are handed, one at a time and in arrival order, to the
    handler registered for their method (handlers are plain callables: they
    must not block). The daemon's requests are answered at once: by a handler
    registered with ``on_request``, with null for ``window/workDoneProgress/create``,
    and with MethodNotFound otherwise.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, peer: str) -> None:
        self.peer = peer
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._notification_handlers: dict[str, NotificationHandler] = {}
        self._request_handlers: dict[str, RequestHandler] = {
            "window/workDoneProgress/create": lambda params: None,
        }
        self._close_callbacks: list[Callable[[ConnectionLost], None]] = []
        self._lost: ConnectionLost | None = None
        self._reader_task: asyncio.Task[None] | None = None

    @classmethod
    def open(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, peer: str) -> Connection:
        connection = cls(reader, writer, peer=peer)
        connection._reader_task = asyncio.get_running_loop().create_task(
            connection._read_loop(), name=f"sessiond-client-reader {peer}"
        )
        return connection

    # ------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        return self._lost is not None

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        self._notification_handlers[method] = handler

    def on_request(self, method: str, handler: RequestHandler) -> None:
        self._request_handlers[method] = handler

    def on_close(self, callback: Callable[[ConnectionLost], None]) -> None:
        """Call ``callback`` once with the reason when the connection ends (at once if it has)."""
        if self._lost is not None:
            callback(self._lost)
        else:
            self._close_callbacks.append(callback)

    # ------------------------------------------------------------ sending

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result; raise ``SessiondError`` for an error answer.

        If the awaiting task is cancelled, ``$/cancelRequest`` goes to the
        peer and the cancellation propagates; the late answer is dropped.
        """
        if self._lost is not None:
            raise self._lost_error()
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._write(message)
            await self._drain()
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(request_id, None) is not None and self._lost is None:
                self._write({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"id": request_id}})
            raise
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Any = None) -> None:
        if self._lost is not None:
            raise self._lost_error()
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        await self._drain()

    def _write(self, message: dict[str, Any]) -> None:
        # One write per whole frame: frames of concurrent senders never interleave.
        self._writer.write(encode_message(message))

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except ConnectionError as e:
            self._lose(f"writing to the daemon failed ({e})")
            raise self._lost_error() from e

    # ------------------------------------------------------------ closing

    async def close(self) -> None:
        """Stop reading, fail what is pending with ConnectionLost, close the stream."""
        self._lose("the connection was closed by this client")
        task = self._reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait([task])
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def wait_closed(self) -> ConnectionLost:
        """Wait until the connection ends, and return why."""
        if self._reader_task is not None:
            await asyncio.wait([self._reader_task])
        assert self._lost is not None
        return self._lost

    def _lost_error(self) -> ConnectionLost:
        # A fresh exception per raise: one instance raised in many tasks piles up tracebacks.
        assert self._lost is not None
        error = ConnectionLost(str(self._lost))
        error.__cause__ = self._lost.__cause__
        return error

    def _lose(self, reason: str, cause: BaseException | None = None) -> None:
        if self._lost is not None:
            return
        self._lost = ConnectionLost(f"{reason} [{self.peer}]")
        self._lost.__cause__ = cause
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self._lost_error())
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(self._lost)
            except Exception:
                log.exception("a close callback of the connection to %s failed", self.peer)
        self._writer.close()

    # ------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        # Whatever else stops the loop (KeyboardInterrupt raised inside it) leaves this reason.
        reason = "the client stopped reading from the daemon"
        cause: BaseException | None = None
        try:
            while (message := await read_message(self._reader)) is not None:
                self._dispatch(message)
            reason = "the daemon closed the connection"
        except ProtocolError as e:
            reason, cause = f"the daemon sent a malformed message: {e}; the connection was closed", e
        except ConnectionError as e:
            reason, cause = f"the connection to the daemon broke ({e})", e
        except Exception as e:
            log.exception("the reader of the connection to %s failed", self.peer)
            reason, cause = f"the client failed reading from the daemon ({e!r})", e
        finally:
            # On cancellation (close()) the reason was already set by close().
            self._lose(reason, cause)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is not None:
            if not isinstance(method, str):
                raise ProtocolError(f"a method name that is not a string: {method!r}")
            if "id" in message:
                self._answer(message["id"], method, message.get("params"))
            else:
                self._notified(method, message.get("params"))
        elif "id" in message:
            self._resolve(message)
        else:
            raise ProtocolError(
                f"a message that is neither request, response nor notification: {message!r:.200}"
            )

    def _resolve(self, message: dict[str, Any]) -> None:
        outcome = error_of(message)
        request_id = message["id"]
        future = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if future is None or future.done():
            # The answer to a request whose caller went away (cancelled): nobody waits for it.
            log.debug("dropping an answer to request %r, which nobody awaits", request_id)
        elif outcome is not None:
            future.set_exception(outcome)
        else:
            future.set_result(message["result"])

    def _notified(self, method: str, params: Any) -> None:
        handler = self._notification_handlers.get(method)
        if handler is None:
            log.debug("ignoring notification %s", method)
            return
        try:
            handler(params)
        except ProtocolError:
            raise
        except Exception:
            log.exception("the handler of notification %s failed", method)

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        handler = self._request_handlers.get(method)
        if handler is None:
            response["error"] = {
                "code": int(ErrorCode.METHOD_NOT_FOUND),
                "message": f"the sessiond Python client does not handle {method}",
            }
        else:
            try:
                response["result"] = handler(params)
            except RpcError as e:
                response["error"] = e.to_json()
            except Exception as e:
                log.exception("the handler of request %s failed", method)
                response["error"] = {
                    "code": int(ErrorCode.INTERNAL_ERROR),
                    "message": f"{method} failed: {e}",
                }
        self._write(response)
