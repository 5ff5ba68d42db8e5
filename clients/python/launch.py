"""Find the daemon's socket, and start a daemon in the background when nothing accepts there.

A started daemon is ``python -m sessiond.client serve --socket PATH`` in a
session of its own (so the terminal's Ctrl-C never reaches it), with its
output appended to ``state_dir()/daemon.log`` (beside the socket when the state
dir cannot be written: the daemon's own sentence saying so must land somewhere).
Two clients racing to start one is fine: ``serve`` refuses to run twice, and
the loser simply waits for the winner's socket like everyone else. A daemon
that cannot start says why in one line (``sessiond: ...``); that sentence is
what the client raises, at once.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket as socketlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from sessiond.client.errors import DaemonNotRunning, DaemonStartFailed
from sessiond.protocol import paths

# asyncio loads with the async client (the editor's relay and the quick commands are sync), and
# what starts a daemon (subprocess, threading) only when one is started.
if TYPE_CHECKING:
    import asyncio
    import subprocess

START_TIMEOUT = 15.0
# After the started process has exited (most likely it lost the race to another
# starter), wait this much longer for the winner's socket, not the whole timeout.
GRACE_AFTER_EXIT = 5.0
# Between connection attempts while a daemon starts: a refused connect costs microseconds, and a
# daemon answers `initialize` within a few tens of milliseconds of binding, so the wait stays short.
FIRST_DELAY = 0.01
MAX_DELAY = 0.05

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


def _open_log(socket: Path) -> tuple[BinaryIO, Path]:
    """The daemon's log, appended to: in the state dir, else beside the socket."""
    first = log_path()
    for log in (first, socket.parent / "daemon.log"):
        try:
            log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            return open(log, "ab"), log
        except OSError:
            continue
    raise DaemonStartFailed(
        f"cannot start a daemon: neither {first} nor {socket.parent / 'daemon.log'} can be written "
        "for its log; make the state dir writable (or choose another with SESSIOND_STATE_DIR)"
    )


SAID_LINES = 30  # of a daemon's reason for not starting, at most


class Started:
    """A daemon started in the background, and where its output goes."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path, offset: int) -> None:
        self.process = process
        self.log = log
        self.offset = offset  # where its own lines start in the log

    def own_sentence(self) -> str | None:
        """The reason it gave for not starting (its last ``sessiond: `` line, with the lines after
        it: each problem of a broken agents.toml has one), if any."""
        with contextlib.suppress(OSError), open(self.log, "rb") as f:
            f.seek(self.offset)
            lines = f.read(64 * 1024).decode(errors="replace").splitlines()
            starts = [n for n, line in enumerate(lines) if line.startswith("sessiond: ")]
            if not starts:
                return None
            said = [lines[starts[-1]].removeprefix("sessiond: "), *lines[starts[-1] + 1 :]]
            return "\n".join(line for line in said[:SAID_LINES] if line.strip())
        return None


def start_daemon(socket: Path) -> Started:
    """Start a daemon serving ``socket`` in the background; it outlives this process."""
    import subprocess
    import threading
    from datetime import datetime

    command = daemon_command(socket)
    out, log = _open_log(socket)
    with out:
        out.write(f"--- {datetime.now().isoformat(timespec='seconds')} {shlex.join(command)}\n".encode())
        out.flush()
        offset = out.tell()
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
    return Started(process, log, offset)


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
        self.started: Started | None = None
        self._deadline = 0.0
        self._delay = FIRST_DELAY

    def after_refusal(self) -> float:
        """Seconds to wait before trying again; raises when there is no point."""
        now = time.monotonic()
        if not self.start:
            raise DaemonNotRunning(not_running_message(self.socket))
        if self.started is None:
            self.started = start_daemon(self.socket)
            self._deadline = now + self.timeout
        elif (code := self.started.process.returncode) is not None:
            said = self.started.own_sentence() if code != 0 else None
            if said is not None and "already running" not in said:
                # It said why it cannot start: no point waiting (a lost race says "already running").
                log = self.started.log
                raise DaemonStartFailed(
                    f"{said} (the daemon started for this exited with code {code}; see {log})"
                )
            self._deadline = min(self._deadline, now + GRACE_AFTER_EXIT)
        if now >= self._deadline:
            raise DaemonStartFailed(self._failure())
        delay, self._delay = self._delay, min(self._delay * 1.5, MAX_DELAY)
        return min(delay, self._deadline - now)

    def _failure(self) -> str:
        assert self.started is not None
        log = self.started.log
        exited = self.started.process.returncode
        what = f"it exited with code {exited}" if exited is not None else "it is still running"
        message = (
            f"started a daemon (pid {self.started.process.pid}) but nothing accepted connections at "
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
    import asyncio

    path = resolve_socket(socket)
    attempts = Attempts(path, start=start, timeout=timeout)
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            return reader, writer, path
        except NOBODY_THERE:
            delay = attempts.after_refusal()
        await asyncio.sleep(delay)
