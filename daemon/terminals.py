"""Terminals an agent runs commands in: processes with bounded output.

A terminal's output keeps at most its byte limit, dropping from the start
(the end of a command's output is what tells what happened). Killing or
releasing a terminal ends its whole process group, so nothing is left behind.
A command's environment is `child_env.child_environment`'s: the daemon's, as
the session's agent's rules filter it, plus what the agent asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from dataclasses import dataclass, field
from typing import Any, cast

from sessiond.daemon.child_env import child_environment

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
_ids = itertools.count(1)


class TerminalNotFound(Exception):
    pass


@dataclass
class Terminal:
    id: str
    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    def append(self, chunk: bytes) -> None:
        self.output += chunk
        if len(self.output) > self.limit:
            del self.output[: len(self.output) - self.limit]
            self.truncated = True

    def text(self) -> str:
        # Dropping from the start may split a character: skip continuation bytes.
        start = 0
        while start < len(self.output) and start < 4 and (self.output[start] & 0xC0) == 0x80:
            start += 1
        return bytes(self.output[start:]).decode("utf-8", errors="replace")


class Terminals:
    """The terminals of one session."""

    def __init__(self) -> None:
        self._terminals: dict[str, Terminal] = {}

    async def create(
        self, command: str, args: list[str], env: dict[str, str], cwd: str, limit: int | None
    ) -> str:
        process = await asyncio.create_subprocess_exec(
            command,
            *args,
            cwd=cwd,
            env=child_environment(env),  # the daemon's, as the session's agent's rules filter it
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        return self._adopt("term", process, limit)

    def _adopt(self, prefix: str, process: Any, limit: int | None) -> str:
        """Keep a started command as a terminal of this session and read its output; its id.
        `process` is an asyncio subprocess, or what reads like one where the command runs
        elsewhere (`pid`, `stdout.read`, `wait`)."""
        terminal = Terminal(
            f"{prefix}-{next(_ids)}",
            cast(asyncio.subprocess.Process, process),
            limit if limit is not None else DEFAULT_OUTPUT_LIMIT,
        )
        terminal.reader = asyncio.create_task(self._read(terminal), name=terminal.id)
        self._terminals[terminal.id] = terminal
        return terminal.id

    async def _read(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(65536):
            terminal.append(chunk)
        code = await terminal.process.wait()
        if code < 0:
            with contextlib.suppress(ValueError):
                terminal.signal = signal.Signals(-code).name
        else:
            terminal.exit_code = code
        terminal.exited.set()

    def get(self, terminal_id: str) -> Terminal:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise TerminalNotFound(
                f"no terminal {terminal_id!r} in this session (released already?)"
            ) from None

    async def wait(self, terminal_id: str) -> Terminal:
        terminal = self.get(terminal_id)
        await terminal.exited.wait()
        return terminal

    async def kill(self, terminal_id: str) -> None:
        terminal = self.get(terminal_id)
        await self._kill(terminal)

    async def release(self, terminal_id: str) -> None:
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            await self._kill(terminal)

    async def close(self) -> None:
        terminals = list(self._terminals.values())
        self._terminals.clear()
        for terminal in terminals:
            await self._kill(terminal)

    @staticmethod
    async def _kill(terminal: Terminal) -> None:
        if not terminal.exited.is_set():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(terminal.process.pid, signal.SIGKILL)
        if terminal.reader is not None:
            await asyncio.gather(terminal.reader, return_exceptions=True)
