"""Terminals whose processes run on an ssh target.

The bookkeeping (ids, bounded output, waiting, releasing) is `Terminals`'
own: this subclass changes only how a process starts and how it is killed,
and hands `Terminals` an adapter that reads like a local process.

How a remote command is run: `exec /bin/sh -c SCRIPT` (whatever the login
shell is), where SCRIPT merges stderr into stdout, prints its pid on the
first line, changes to the directory and execs the command through `env`.
sshd starts each command as a session leader, so that pid is also the
process group, and killing is `kill -KILL -- -PID` over a second channel:
closing a channel alone leaves the process running on the target.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import signal
from typing import cast

import asyncssh

from sessiond.daemon.placements.base import PlacementError
from sessiond.daemon.terminals import Terminal, Terminals

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KILL_TIMEOUT = 10.0


def remote_script(command: str, args: list[str], env: dict[str, str], cwd: str) -> str:
    """The remote command line: pid first, then the command in `cwd` with `env`, stderr merged."""
    for name in env:
        if not _ENV_NAME.match(name):
            raise PlacementError(f"environment variable name {name!r} is not valid for a remote command")
    # `env --` so neither an assignment nor the command can be taken for one of env's options.
    assignments = [shlex.quote(f"{k}={v}") for k, v in env.items()]
    run = f"env -- {' '.join(assignments)} " if assignments else ""
    script = (
        "exec 2>&1; echo $$; "
        f"cd -- {shlex.quote(cwd)} || exit 127; "
        f"exec {run}{' '.join(shlex.quote(part) for part in [command, *args])}"
    )
    return f"exec /bin/sh -c {shlex.quote(script)}"


class _RemoteOutput:
    """The process's stdout, for `Terminals`: a lost connection reads as a last line, then EOF."""

    def __init__(self, process: asyncssh.SSHClientProcess[bytes], host: str) -> None:
        self._process = process
        self._host = host
        self._ended = False
        self.lost = False

    async def read(self, n: int) -> bytes:
        if self._ended:
            return b""
        try:
            return await self._process.stdout.read(n)
        except (asyncssh.Error, OSError) as exc:
            self._ended = self.lost = True
            return f"\n[sessiond: the connection to {self._host} was lost: {exc}]\n".encode()


class _RemoteProcess:
    """Looks to `Terminals` like an asyncio subprocess: `stdout.read`, `wait`, `pid`."""

    def __init__(self, process: asyncssh.SSHClientProcess[bytes], pid: int | None, host: str) -> None:
        self.channel = process
        self.pid = pid or 0
        self.stdout = _RemoteOutput(process, host)

    @property
    def lost(self) -> bool:
        """The connection went before the command was seen to end: it may still run on the target."""
        return self.stdout.lost

    async def wait(self) -> int:
        try:
            result = await self.channel.wait(check=False)
        except (asyncssh.Error, OSError):
            self.stdout.lost = True
            return 255  # what ssh itself answers when the connection fails
        if result.returncode is None:
            # The channel closed with no exit status: the connection went, the command may not have.
            self.stdout.lost = True
            return 255
        return result.returncode


def signal_number(name: str | None) -> int | None:
    if not name:
        return None
    with contextlib.suppress(KeyError):
        return int(signal.Signals["SIG" + name])
    return None


class RemoteTerminals(Terminals):
    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host
        self.connection: asyncssh.SSHClientConnection | None = None

    def orphaned(self) -> bool:
        """Whether a command may still run on the target after its connection was lost."""
        return any(cast(_RemoteProcess, t.process).lost for t in self._terminals.values())

    async def create(
        self, command: str, args: list[str], env: dict[str, str], cwd: str, limit: int | None
    ) -> str:
        connection = self.connection
        if connection is None:
            raise PlacementError(f"not connected to {self.host}: the session's next turn connects again")
        script = remote_script(command, args, env, cwd)
        try:
            channel = await connection.create_process(script, encoding=None)
            first = await channel.stdout.readline()
        except (asyncssh.Error, OSError) as exc:
            raise PlacementError(f"cannot run {command!r} on {self.host}: {exc}") from None
        pid = int(first) if first.strip().isdigit() else None
        return self._adopt("ssh-term", _RemoteProcess(channel, pid, self.host), limit)

    # `Terminals._kill` is a staticmethod (a local kill needs nothing else); this one needs the connection.
    async def _kill(self, terminal: Terminal) -> None:  # type: ignore[override]
        process = cast(_RemoteProcess, terminal.process)
        if not terminal.exited.is_set() or process.lost:
            connection = self.connection
            if process.pid and connection is not None:
                # The whole group, then the pid alone in case the shell was not its own group's leader.
                kill = f"kill -KILL -- -{process.pid} 2>/dev/null || kill -KILL {process.pid} 2>/dev/null"
                with contextlib.suppress(asyncssh.Error, OSError, asyncio.TimeoutError):
                    await asyncio.wait_for(connection.run(kill, check=False), KILL_TIMEOUT)
            process.channel.close()
        if terminal.reader is not None:
            await asyncio.gather(terminal.reader, return_exceptions=True)
