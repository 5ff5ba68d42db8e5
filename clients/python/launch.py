"""Find the daemon's socket, and start a daemon in the background when nothing accepts there.

A started daemon is ``python -m sessiond.client serve --socket PATH`` in a
session of its own (so the terminal's Ctrl-C never reaches it), with its
output appended to ``state_dir()/daemon.log``. Two clients racing to start
one is fine: ``serve`` refuses to run twice, and the loser simply waits for
the winner's socket like everyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket as socketlib
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from sessiond.client.errors import DaemonNotRunning, DaemonStartFailed
from sessiond.protocol import paths

START_TIMEOUT = 15.0
# After the started process has exited (most likely it lost the race to another
# starter), wait this much longer for the winner's socket, not the whole timeout.
GRACE_AFTER_EXIT = 5.0
FIRST_DELAY = 0.01
MAX_DELAY = 0.25

# Connecting fails with these when no daemon is there (no file, or a stale socket file).
NOBODY_THERE = (FileNotFoundError, ConnectionRefusedError)


def resolve_socket(socket: str | os.PathLike[str] | None) -> Path:
    path = Path(socket) if socket is not None else paths.socket_path()
    paths.check_socket_path(path)
    return path


def log_path() -> Path:
    return paths.state_dir() / "daemon.log"


def daemon_command(socket: Path) -> list[str]:
    return [sys.executable, "-m", "sessiond.client", "serve", "--socket", str(socket)]


def start_daemon(socket: Path) -> subprocess.Popen[bytes]:
    """Start a daemon serving ``socket`` in the background; it outlives this process."""
    command = daemon_command(socket)
    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(log, "ab") as out:
        out.write(f"--- {datetime.now().isoformat(timespec='seconds')} {shlex.join(command)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
    # Reap it whenever it exits, so it never lingers as a zombie of a long-lived client.
    threading.Thread(target=process.wait, name="sessiond-daemon-reaper", daemon=True).start()
    return process


def not_running_message(socket: Path) -> str:
    default = socket == paths.socket_path()
    command = "sessiond serve" if default else f"sessiond serve --socket {shlex.quote(str(socket))}"
    return f"no daemon is running at {socket}; start one with `{command}`"


class Attempts:
    """The schedule of connection attempts: what to do after each refusal.

    The first refusal starts a daemon (when asked to); later ones wait with a
    growing delay until the deadline, then raise an error naming the log.
    """

    def __init__(self, socket: Path, *, start: bool, timeout: float) -> None:
        self.socket = socket
        self.start = start
        self.timeout = timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._deadline = 0.0
        self._delay = FIRST_DELAY

    def after_refusal(self) -> float:
        """Seconds to wait before trying again; raises when there is no point."""
        now = time.monotonic()
        if not self.start:
            raise DaemonNotRunning(not_running_message(self.socket))
        if self.process is None:
            self.process = start_daemon(self.socket)
            self._deadline = now + self.timeout
        elif self.process.returncode is not None:
            self._deadline = min(self._deadline, now + GRACE_AFTER_EXIT)
        if now >= self._deadline:
            raise DaemonStartFailed(self._failure())
        delay, self._delay = self._delay, min(self._delay * 1.5, MAX_DELAY)
        return min(delay, self._deadline - now)

    def _failure(self) -> str:
        assert self.process is not None
        log = log_path()
        exited = self.process.returncode
        what = f"it exited with code {exited}" if exited is not None else "it is still running"
        message = (
            f"started a daemon (pid {self.process.pid}) but nothing accepted connections at "
            f"{self.socket} within {self.timeout:g} s ({what}); see {log}"
        )
        tail = _tail(log, lines=5)
        return f"{message}. Its last lines:\n{tail}" if tail else message


def _tail(path: Path, *, lines: int) -> str:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 4096))
        return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    return ""


def connect_socket(
    socket: str | os.PathLike[str] | None = None, *, start: bool = True, timeout: float = START_TIMEOUT
) -> socketlib.socket:
    """A blocking socket connected to the daemon, starting one first if asked and needed."""
    path = resolve_socket(socket)
    attempts = Attempts(path, start=start, timeout=timeout)
    while True:
        sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return sock
        except NOBODY_THERE:
            sock.close()
            delay = attempts.after_refusal()
        except BaseException:
            sock.close()
            raise
        time.sleep(delay)


async def open_streams(
    socket: str | os.PathLike[str] | None = None, *, start: bool = True, timeout: float = START_TIMEOUT
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Path]:
    """The asyncio version of ``connect_socket``: streams connected to the daemon, and its path."""
    path = resolve_socket(socket)
    attempts = Attempts(path, start=start, timeout=timeout)
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            return reader, writer, path
        except NOBODY_THERE:
            delay = attempts.after_refusal()
        await asyncio.sleep(delay)
