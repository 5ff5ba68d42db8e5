"""`sessiond serve`: the daemon process, from start to a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import fcntl
import ipaddress
import logging
import os
import secrets
import signal
import sys
import time
from importlib import metadata
from pathlib import Path

from sessiond.daemon import long_lived
from sessiond.daemon.agents_config import ConfigError, demo_spec, load_agents_toml
from sessiond.daemon.around import Around
from sessiond.daemon.core import Core
from sessiond.daemon.events import EventLog
from sessiond.daemon.runs import RunBook
from sessiond.daemon.server import DaemonServer
from sessiond.daemon.store import Store
from sessiond.daemon.tasks import TaskBook
from sessiond.protocol import paths

log = logging.getLogger("sessiond")
STOP_DEADLINE = 45.0


def version() -> str:
    try:
        return metadata.version("sessiond")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class StartError(Exception):
    pass


def parse_tcp(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StartError(f"--tcp {address!r}: expected HOST:PORT, e.g. 127.0.0.1:7700")
    host = host.strip("[]") or "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise StartError(
            f"--tcp {address!r}: only loopback addresses are served (127.0.0.1, ::1, localhost); "
            "reach the daemon from elsewhere through ssh forwarding"
        )
    return host, int(port)


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def _token(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _lock(socket_path: Path) -> int:
    """Hold a lock beside the socket for the daemon's life: a second `serve` finds it taken."""
    fd = os.open(f"{socket_path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StartError(
            f"a daemon is already running on {socket_path} (pid {other}); "
            "stop it first, or pass another --socket"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


async def _serve(socket_path: Path, tcp: str | None, state_rate: float) -> int:
    paths.check_socket_path(socket_path)
    tcp_address = parse_tcp(tcp) if tcp else None
    _private_dir(socket_path.parent)
    state_dir = paths.state_dir()
    _private_dir(state_dir)
    lock_fd = _lock(socket_path)
    try:
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()  # stale: its daemon is gone, or we would not hold the lock
        store = Store(state_dir / "sessiond.db")
        events = EventLog(store)
        core = Core(store, events, state_dir=state_dir, version=version(), state_rate=state_rate)
        try:
            configured = load_agents_toml(paths.config_dir() / "agents.toml")
        except ConfigError as exc:
            raise StartError(str(exc)) from None
        core.load([demo_spec(state_dir)], configured)
        core.around = Around(core, TaskBook(store), state_dir)
        core.socket_path = str(socket_path)
        runs = RunBook(store)
        store.start()
        server = DaemonServer(core, runs, version=version(), socket_path=str(socket_path))
        server.started_at = time.time()
        await server.listen_unix(str(socket_path))
        os.chmod(socket_path, 0o600)
        if tcp_address is not None:
            server.token = _token(paths.token_path())
            host, port = await server.listen_tcp(*tcp_address)
            paths.tcp_address_path().write_text(f"{host}:{port}\n")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server.on_stop = stop.set  # daemon/stop
        long_lived.settle()  # modules, schemas and loaded sessions: kept out of full GC passes
        where = str(socket_path) + (f" and tcp {server.tcp_address}" if server.tcp_address else "")
        print(f"sessiond: serving on {where}", file=sys.stderr, flush=True)
        attention = asyncio.create_task(core.feed.watch(), name="attention")
        await stop.wait()
        # Stopping: another SIGTERM changes nothing (it would kill the process once the loop
        # is gone, mid-exit); another Ctrl-C means "now", and ends the process at once.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        attention.cancel()
        print("sessiond: stopping: cancelling running turns", file=sys.stderr, flush=True)
        # A stop must never hang: past the grace turns get, say where it was stuck and exit.
        faulthandler.dump_traceback_later(STOP_DEADLINE, exit=True)
        server.close_listeners()
        await core.shutdown()
        server.end_runs("stopped")
        await store.close()
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        if tcp_address is not None:
            with contextlib.suppress(FileNotFoundError):
                paths.tcp_address_path().unlink()
        # Done with the store and the socket: a successor may start from here. Clients learn the
        # stop is over when their connection closes, and may start one at once.
        os.close(lock_fd)
        lock_fd = -1
        await server.stop_accepting()
        return 0
    finally:
        if lock_fd >= 0:
            os.close(lock_fd)


def run(socket: Path | None = None, tcp: str | None = None, state_rate: float = 10.0) -> int:
    """Serve until SIGTERM or SIGINT; the exit code."""
    logging.basicConfig(
        level=os.environ.get("SESSIOND_LOG", "WARNING").upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # pygls logs every error answer as an exception; the daemon logs its own failures.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    try:
        if state_rate <= 0:
            raise StartError(f"--state-rate {state_rate}: must be above 0 (updates per second)")
        return asyncio.run(_serve(socket or paths.socket_path(), tcp, state_rate))
    except (StartError, ValueError) as exc:
        print(f"sessiond: {exc}", file=sys.stderr)
        return 1
