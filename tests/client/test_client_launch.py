"""Finding the daemon's socket, and starting a daemon when nothing accepts there.

The started "daemon" here is a small script that behaves like `sessiond serve`
at the socket level (refuses to run twice, binds, listens), so these tests
need no real daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiond.client import launch
from sessiond.client.errors import DaemonNotRunning, DaemonStartFailed
from sessiond.protocol import paths

pytestmark = pytest.mark.timeout(60)

SCRIPT = textwrap.dedent(
    """
    import fcntl, os, socket, sys, time
    path = sys.argv[sys.argv.index("--socket") + 1]
    mode = sys.argv[1]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lock = open(path + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("already running", flush=True)
        sys.exit(1)
    with open(path + ".pids", "a") as pids:
        pids.write(f"{os.getpid()}\\n")
    if mode == "fail":
        print("cannot start: broken on purpose", flush=True)
        sys.exit(3)
    if mode == "mute":
        time.sleep(60)
        sys.exit(0)
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(16)
    print("serving", flush=True)
    server.settimeout(60)
    try:
        while True:
            server.accept()[0].close()
    except TimeoutError:
        pass
    """
)


class Starter:
    mode = "serve"  # or "fail" (exits at once), "mute" (never listens)


@pytest.fixture
def starter(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Starter]:
    """Make launch start the script; kill whatever it started afterwards."""
    script = home / "fake_serve.py"
    script.write_text(SCRIPT)
    started = Starter()

    def command(socket: Path) -> list[str]:
        return [sys.executable, str(script), started.mode, "--socket", str(socket)]

    monkeypatch.setattr(launch, "daemon_command", command)
    monkeypatch.setattr(launch, "GRACE_AFTER_EXIT", 1.0)
    yield started
    # Every process running the script, not only those in its .pids file: a starter that lost a
    # race and was still starting up when the test ended would otherwise take the lock the killed
    # winner left, make the home again after it is removed, and serve there for a minute.
    for pid in running(script):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while running(script) and time.monotonic() < deadline:
        time.sleep(0.01)  # (launch's reaper thread waits for each)
    assert not running(script), "a started script outlived SIGKILL for 30 s"


def running(script: Path) -> list[int]:
    """The processes running `script`, by their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if str(script).encode() in argv:
            found.append(int(entry.name))
    return found


def started_pids() -> list[str]:
    pids = Path(f"{paths.socket_path()}.pids")
    return pids.read_text().split() if pids.exists() else []


def test_without_start_a_missing_daemon_is_an_error_saying_what_to_do(home: Path) -> None:
    with pytest.raises(DaemonNotRunning) as raised:
        launch.connect_socket(start=False)
    assert (
        str(raised.value) == f"no daemon is running at {paths.socket_path()}; start one with `sessiond serve`"
    )
    other = home / "other.sock"
    with pytest.raises(DaemonNotRunning, match=rf"start one with `sessiond serve --socket {other}`"):
        asyncio.run(launch.open_streams(other, start=False))


def test_a_stale_socket_file_counts_as_no_daemon(home: Path) -> None:
    path = home / "stale.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()  # the file stays; nobody listens
    with pytest.raises(DaemonNotRunning):
        launch.connect_socket(path, start=False)


def test_a_socket_path_too_long_is_refused_before_anything_starts(home: Path) -> None:
    with pytest.raises(ValueError, match="unix sockets allow"):
        launch.connect_socket(home / ("x" * 120), start=True)


@pytest.mark.usefixtures("starter")
def test_a_daemon_is_started_in_the_background_and_waited_for() -> None:
    sock = launch.connect_socket(start=True)
    sock.close()
    assert len(started_pids()) == 1
    log = launch.log_path().read_text()
    assert "fake_serve.py serve --socket" in log.splitlines()[0]  # the command, at the top of its run
    assert "serving" in log
    # It runs in a session of its own, so a Ctrl-C at the client's terminal never reaches it.
    pid = int(started_pids()[0])
    assert os.getsid(pid) == pid
    # Once it runs, the next client just connects.
    launch.connect_socket(start=True).close()
    assert len(started_pids()) == 1


@pytest.mark.usefixtures("starter")
async def test_the_async_connect_starts_it_too() -> None:
    _, writer, path = await launch.open_streams(start=True)
    assert path == paths.socket_path()
    writer.close()
    assert len(started_pids()) == 1


@pytest.mark.usefixtures("starter")
def test_racing_starters_all_connect_to_the_one_that_won() -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def client() -> None:
        try:
            barrier.wait()
            launch.connect_socket(start=True).close()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(started_pids()) == 1  # only one passed the lock and served
    assert launch.log_path().read_text().count("serving") == 1


def test_a_daemon_that_never_accepts_is_reported_with_its_log(starter: Starter) -> None:
    starter.mode = "fail"
    with pytest.raises(DaemonStartFailed) as raised:
        launch.connect_socket(start=True, timeout=10)
    message = str(raised.value)
    assert f"see {launch.log_path()}" in message
    assert "it exited with code 3" in message
    assert "cannot start: broken on purpose" in message  # the log's last lines


def test_a_daemon_that_hangs_is_given_up_on_at_the_deadline(starter: Starter) -> None:
    starter.mode = "mute"
    with pytest.raises(DaemonStartFailed, match=r"within 0.5 s \(it is still running\)"):
        launch.connect_socket(start=True, timeout=0.5)
