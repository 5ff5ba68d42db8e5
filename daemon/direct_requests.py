"""The requests a turn makes of its agent, written and answered without the ACP SDK between.

A turn asks its agent twice (session/new, or load, resume or fork; then session/prompt) and
may tell it session/cancel. Through the SDK each request waits on a queue for the SDK's
sender task to write it and wakes its caller again once written, and each answer is read a
second time by the SDK's reader task: with 200 first turns at once, those hops cost the daemon
about 4% of its CPU per turn. Here a request is written on the agent's stdin as it is made (a
`Corked` writer sends a turn of the loop's writes as one), and its answer is taken off the
agent's stdout by the daemon's reader (`AgentProcess._read_stdout`), which hands the SDK only
what is not these answers or session updates.

Ids start at FIRST_ID, far from the SDK's own (counted from 0 on the same connection), so an
answer goes to whoever asked. Requests the daemon makes outside turns (initialize, set_mode,
authenticate, ...) and the answers to the agent's own requests still go through the SDK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from sessiond.protocol import fast_json

FIRST_ID = 1_000_000_000
# Requests given up on whose late answer is still taken (a session opened late, to close): an
# agent that answers none of them holds no more than these; past them the oldest is let go.
LATE_KEPT = 256


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...


class DirectRequests:
    """Requests and notifications written straight to an agent; answers taken by `take`."""

    def __init__(self, writer: Writer, refused: Callable[[int, str, Any], Exception]) -> None:
        """`refused(code, message, data)`: what an answer's `error` raises."""
        self._writer = writer
        self._refused = refused
        self._next = FIRST_ID
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        # Requests whose caller stopped waiting (a deadline, a cancel): what takes a late result.
        self._late: dict[int, Callable[[Any], None]] = {}
        self._gone: str | None = None

    @property
    def waiting(self) -> bool:
        """Whether an answer is awaited (the reader need look for one only then)."""
        return bool(self._waiting or self._late)

    async def request(
        self, method: str, params: dict[str, Any], *, late: Callable[[Any], None] | None = None
    ) -> Any:
        """The answer's `result`; raises `refused(...)` for an `error`, ConnectionError once the
        agent's output has ended. If the caller stops waiting first, `late` gets the result should
        it come (a session the agent opened after all, to close)."""
        if self._gone is not None:
            raise ConnectionError(self._gone)
        request_id = self._next
        self._next += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            return await future
        finally:
            self._waiting.pop(request_id, None)
            if late is not None and (future.cancelled() or not future.done()) and self._gone is None:
                self._late[request_id] = late
                if len(self._late) > LATE_KEPT:
                    del self._late[next(iter(self._late))]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._gone is not None:
            raise ConnectionError(self._gone)
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        self._writer.write(fast_json.dumps(message) + b"\n")
        await self._writer.drain()  # (waits only while the pipe is full)

    def take(self, message: dict[str, Any]) -> bool:
        """True if `message` answers one of these requests (now settled)."""
        if "method" in message:
            return False  # (a request or notification of the agent's)
        request_id = message.get("id")
        future = self._waiting.get(request_id) if isinstance(request_id, int) else None
        if future is None:
            late = self._late.pop(request_id, None) if isinstance(request_id, int) else None
            if late is not None and message.get("error") is None:
                late(message.get("result"))
            return late is not None
        if future.done():
            return True
        error = message.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"message": str(error)}
            code, said = error.get("code", -32603), str(error.get("message", "Error"))
            future.set_exception(self._refused(code, said, error.get("data")))
        else:
            future.set_result(message.get("result"))
        return True

    def ended(self, why: str) -> None:
        """The agent's output ended: every request waiting fails with ConnectionError, and later ones."""
        self._gone = why
        self._late.clear()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError(why))
