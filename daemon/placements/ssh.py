"""`ssh`: the agent stays here; its commands and file reads and writes land on a target.

One asyncssh connection per session, opened on its first turn with the user's
ssh config, keys and known_hosts (or the files the options name). Files go
through SFTP and are confined on the target itself: the path is resolved
there (SFTP realpath follows symlinks) and refused if it leaves the session's
directory. A dropped connection is opened again on the next prepare().
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

import asyncssh

from sessiond.daemon.placements.base import (
    PathOutsideRoot,
    PlacementError,
    PlacementOptions,
)
from sessiond.daemon.placements.ssh_terminals import RemoteTerminals
from sessiond.daemon.placements.terminal_calls import TerminalCalls
from sessiond.daemon.terminals import Terminals

_TARGET = re.compile(
    r"\A(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:@\s\[\]]+))(?::(?P<port>\d+))?\Z"
)
# How deep a chain of dangling symlinks may go before the path is refused.
MAX_LINKS = 40


@dataclass(frozen=True)
class Target:
    user: str | None
    host: str
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}{':' + str(self.port) if self.port else ''}"


def parse_target(text: str) -> Target:
    """`user@host[:port]`, `host`, `user@[::1]:2222`."""
    match = _TARGET.match(text.strip())
    if match is None or not 0 < int(match["port"] or 1) < 65536:
        raise PlacementError(f"ssh target {text!r} is not of the form user@host[:port]")
    port = int(match["port"]) if match["port"] else None
    return Target(match["user"], match["v6"] or match["host"], port)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)  # "Connection refused", not "[Errno 111] Connect call failed (...)"
    return str(exc) or type(exc).__name__


def is_inside(real_root: str, real: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


class SshPlacement(TerminalCalls):
    kind = "ssh"

    def __init__(self, *, root: str, session_id: str, options: PlacementOptions) -> None:
        if not options.ssh_target:
            raise PlacementError("placement ssh needs a target (user@host[:port])")
        self.target = parse_target(options.ssh_target)
        self.host: str | None = str(self.target)
        self.root = options.ssh_dir or root
        self.session_id = session_id
        self.options = options
        self.remote = RemoteTerminals(str(self.target))
        self.terminals = self.remote
        self._connection: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._real_root: str | None = None
        self._lock = asyncio.Lock()

    async def run_commands_with(self, terminals: Terminals) -> bool:
        return False  # its commands run on its target, wherever the agent runs

    def describe(self) -> str:
        return f"ssh {self.target}, in {self.root}"

    # ------------------------------------------------------------ connecting

    def _connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"connect_timeout": self.options.ssh_connect_timeout}
        if self.target.port is not None:
            options["port"] = self.target.port
        if self.target.user is not None:
            options["username"] = self.target.user
        if self.options.ssh_key_file:
            options["client_keys"] = [self.options.ssh_key_file]
        if not self.options.ssh_verify_host_key:
            options["known_hosts"] = None
        elif self.options.ssh_known_hosts:
            options["known_hosts"] = self.options.ssh_known_hosts
        # Otherwise asyncssh reads ~/.ssh/config and the known_hosts and keys it names, as ssh does.
        return options

    async def prepare(self) -> None:
        async with self._lock:
            if self._connection is not None and not self._connection.is_closed() and self._sftp is not None:
                return
            await self._disconnect()
            where = str(self.target)
            try:
                connection = await asyncssh.connect(self.target.host, **self._connect_options())
            except (TimeoutError, OSError, asyncssh.Error, ValueError) as exc:
                reason = _reason(exc)
                raise PlacementError(f"cannot connect to ssh target {where}: {reason}") from None
            try:
                sftp = await connection.start_sftp_client()
                real_root = await sftp.realpath(self.root)
                if not await sftp.isdir(real_root):
                    raise PlacementError(
                        f"the session's directory {self.root} does not exist on {where}; "
                        "create it there, or open the session with a directory that exists"
                    )
            except BaseException as exc:
                connection.close()
                if isinstance(exc, (OSError, asyncssh.Error)):
                    raise PlacementError(f"cannot use {self.root} on {where}: {exc}") from None
                raise
            self._connection, self._sftp, self._real_root = connection, sftp, real_root
            self.remote.connection = connection

    async def _disconnect(self) -> None:
        connection, self._connection, self._sftp = self._connection, None, None
        self.remote.connection = None
        if connection is not None:
            connection.close()
            with contextlib.suppress(Exception):
                await connection.wait_closed()

    def _ready(self) -> tuple[asyncssh.SFTPClient, str]:
        if self._sftp is None or self._real_root is None or self._connection is None:
            raise PlacementError(f"not connected to {self.target}: the session's next turn connects again")
        return self._sftp, self._real_root

    # ------------------------------------------------------------ files

    async def resolve(self, path: str) -> str:
        """The real path of `path` on the target, if it stays under the session's directory."""
        sftp, real_root = self._ready()
        candidate = path if posixpath.isabs(path) else posixpath.join(real_root, path)
        try:
            real = await self._realpath(sftp, candidate, MAX_LINKS)
        except (OSError, asyncssh.Error) as exc:
            raise PlacementError(f"cannot resolve {path!r} on {self.target}: {exc}") from None
        if not is_inside(real_root, real):
            raise PathOutsideRoot(
                f"path {path!r} is outside the session's root {self.root!r} on {self.target}; "
                "only files under the root can be read or written"
            )
        return real

    async def _realpath(self, sftp: asyncssh.SFTPClient, path: str, links: int) -> str:
        """SFTP realpath, extended to paths whose parents do not exist yet.

        OpenSSH resolves symlinks (a dangling one to its target) and allows a missing last
        component. When it cannot resolve a path (a missing parent, say) the parent is resolved
        and the name joined on; a name that is itself a dangling symlink is followed, so it
        cannot point out either.
        """
        try:
            return await sftp.realpath(path)
        except asyncssh.SFTPError:
            pass  # OpenSSH answers "no such file" or "bad message" for a missing parent
        parent, name = posixpath.split(path.rstrip("/") or "/")
        if parent == path or links <= 0:
            raise PlacementError(f"cannot resolve {path!r} on {self.target}")
        real_parent = await self._realpath(sftp, parent, links - 1)
        if name in ("", "."):
            return real_parent
        if name == "..":
            return posixpath.dirname(real_parent)
        joined = posixpath.join(real_parent, name)
        with contextlib.suppress(asyncssh.SFTPError):
            target = await sftp.readlink(joined)
            return await self._realpath(sftp, posixpath.join(real_parent, target), links - 1)
        return joined

    async def read_text(self, path: str) -> str:
        real = await self.resolve(path)
        sftp, _ = self._ready()
        try:
            if await sftp.isdir(real):
                raise PlacementError(f"{real} is a directory, not a file (on {self.target})")
            async with sftp.open(real, "rb") as f:
                data = await f.read()
        except asyncssh.SFTPNoSuchFile:
            raise PlacementError(f"no such file: {real} (on {self.target})") from None
        except (OSError, asyncssh.Error) as exc:
            raise PlacementError(f"cannot read {real} on {self.target}: {exc}") from None
        if isinstance(data, str):
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise PlacementError(f"{real} is not UTF-8 text (on {self.target})") from None

    async def write_text(self, path: str, content: str) -> str:
        real = await self.resolve(path)
        sftp, _ = self._ready()
        try:
            if await sftp.isdir(real):
                raise PlacementError(f"{real} is a directory, not a file (on {self.target})")
            await sftp.makedirs(posixpath.dirname(real), exist_ok=True)
            async with sftp.open(real, "wb") as f:
                await f.write(content.encode("utf-8"))
        except (OSError, asyncssh.Error) as exc:
            raise PlacementError(f"cannot write {real} on {self.target}: {exc}") from None
        return real

    # ------------------------------------------------------------ terminals

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        _, real_root = self._ready()
        directory = await self.resolve(cwd) if cwd else real_root
        return await self.terminals.create(command, args, env, directory, output_byte_limit)

    async def stop(self) -> None:
        await self.close()

    async def close(self) -> str | None:
        kept = None
        if self.remote.orphaned():
            # Commands cut off from a lost connection run on: connect again to kill them.
            try:
                await self.prepare()
            except PlacementError as exc:
                kept = f"commands may still be running on {self.target}: {exc}"
        await self.terminals.close()
        await self._disconnect()
        return kept
