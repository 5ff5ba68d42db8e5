"""Messages written in one turn of the event loop, sent as one write.

Each message written on its own costs a syscall, and on the other end a wakeup and
a read. Under load the daemon writes an agent many messages in one turn of its loop
(200 sessions opening, their prompts), and a client many answers; corked, they go
out as one write at the end of that turn and are read in one go. A message waits at
most until the loop's turn ends, and a burst past `most` bytes goes out at once. A
write that fails is told to the next write, drain or close.

The ACP SDK takes only an asyncio StreamWriter, so this is one, over the same
transport and protocol as the writer it corks.
"""

from __future__ import annotations

import asyncio

MOST = 256 * 1024  # bytes held before they go out without waiting for the loop's turn to end


class Corked(asyncio.StreamWriter):
    """A StreamWriter over another's transport that holds what is written until the loop's turn ends."""

    def __init__(self, inner: asyncio.StreamWriter, *, most: int = MOST) -> None:
        super().__init__(inner.transport, inner._protocol, None, inner._loop)  # type: ignore[attr-defined]
        self._most = most
        self._held: list[bytes] = []
        self._size = 0
        self._soon: asyncio.Handle | None = None
        self._error: BaseException | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._raise_error()
        self._held.append(bytes(data))
        self._size += len(data)
        if self._size >= self._most:
            self.flush()
        elif self._soon is None:
            self._soon = self._loop.call_soon(self.flush)  # type: ignore[attr-defined]

    def flush(self) -> None:
        """Send what is held now."""
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held.clear()
        self._size = 0
        try:
            super().write(data)
        except Exception as exc:  # (told to whoever writes, drains or closes next)
            self._error = exc

    async def drain(self) -> None:
        self._raise_error()
        await super().drain()

    def write_eof(self) -> None:
        self.flush()
        super().write_eof()

    def close(self) -> None:
        self.flush()
        super().close()
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
