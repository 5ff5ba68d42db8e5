"""`sessiond serve`: the daemon process, from start to a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import faulthandler
import fcntl
import logging
import os
import re
import signal
import socket as socketlib
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

# Only what answers a client's `initialize` is imported here: the rest (the core, the protocol's
# models) loads on a thread once the socket is bound and the door answers; pygls and lsprotocol
# when the first client that takes progress or answers permissions comes; the ACP SDK, the MCP
# SDK and asyncssh on the first turn, MCP session or ssh placement.
from sessiond.daemon import importer, long_lived
from sessiond.daemon.door import Door
from sessiond.daemon.store import (
    BUSY_TIMEOUT,
    Compacted,
    Store,
    StoreUnavailable,
    session_counts,
    trouble_of,
    unavailable,
)
from sessiond.daemon.store import compact as compact_store
from sessiond.daemon.wire import Limits
from sessiond.protocol import paths
from sessiond.protocol.durations import EXAMPLES as AGE_EXAMPLES
from sessiond.protocol.durations import age_seconds
from sessiond.protocol.version import VERSION

if TYPE_CHECKING:
    from sessiond.daemon.around import MakeEndpoint
    from sessiond.daemon.mcp_http import McpEndpoint
    from sessiond.daemon.session_tools import SessionTools

log = logging.getLogger("sessiond")
STOP_DEADLINE = 45.0
# Loaded on first need only (a client told progress or asked permissions, a turn, an http MCP
# session, an ssh placement, a Ray-run agent, the first session of a placement other than `here`);
# at SESSIOND_LOG=debug the daemon says which it is serving without, and when each one loads.
ON_FIRST_NEED = (
    "pygls",
    "lsprotocol",
    "acp",
    "mcp",
    "asyncssh",
    "uvicorn",
    "ray",
    "sessiond.daemon.placements.worktree",
    "sessiond.daemon.placements.sandbox",
    "sessiond.daemon.placements.container",
)
# What the door answers `initialize` without: they load on a thread while it does (at
# SESSIOND_LOG=debug the daemon says which were not loaded when it began to answer).
AFTER_THE_FIRST_ANSWER = (
    "pygls",
    "lsprotocol",
    "pydantic",
    "sessiond.protocol.models",
    "sessiond.daemon.core",
)
# The daemon behind the door, imported on a thread while the door answers `initialize`.
BEHIND_THE_DOOR = (
    "sessiond.daemon.around",
    "sessiond.daemon.core",
    "sessiond.daemon.events",
    "sessiond.daemon.pruning",
    "sessiond.daemon.runs",
    "sessiond.daemon.server",
    "sessiond.daemon.session_tools",
    "sessiond.daemon.tasks",
)


def _endpoint_maker(tools: Callable[[], SessionTools]) -> MakeEndpoint:
    """How Around makes the daemon's MCP endpoint on first need (its SDK loads as it starts);
    the tools are made over Around, so they are asked for only then."""

    def make(session_of_token: Callable[[str], str | None]) -> McpEndpoint:
        from sessiond.daemon.mcp_http import McpEndpoint

        return McpEndpoint(tools(), session_of_token)

    return make


def _say_when_loaded(names: tuple[str, ...]) -> None:
    pending = set(names)

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event != "import" or not pending:
            return
        module = str(args[0])
        for name in (module.partition(".")[0], module):
            if name in pending:
                pending.discard(name)
                log.debug("loading %s (first needed now, on %s)", name, threading.current_thread().name)

    sys.addaudithook(hook)


class StartError(Exception):
    pass


def parse_tcp(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StartError(f"--tcp {address!r}: expected HOST:PORT, e.g. 127.0.0.1:7700")
    host = host.strip("[]") or "127.0.0.1"
    import ipaddress

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


def _private_dir(path: Path, what: str, instead: str) -> None:
    """Make `path` (private to the user) and check it can be written, or say which folder cannot."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.stat().st_mode & 0o777 != 0o700:
            os.chmod(path, 0o700)
        # Modes do not tell (root ignores them; a read-only mount does not show in them): try.
        probe = path / f".sessiond-write-test-{os.getpid()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        probe.unlink()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StartError(
                f"the disk holding {what} {path} is full; free some space on it and start again"
            ) from None
        raise StartError(
            f"cannot write {what} {path} ({exc.strerror or exc}); make it writable, or {instead}"
        ) from None


STATE_DIR_INSTEAD = "choose another with SESSIOND_STATE_DIR (or SESSIOND_HOME)"
SOCKET_DIR_INSTEAD = "choose another socket with --socket or SESSIOND_SOCKET"


def busy_timeout() -> float:
    """How long a write waits for another process's lock on the store: SESSIOND_BUSY_TIMEOUT seconds."""
    raw = os.environ.get("SESSIOND_BUSY_TIMEOUT")
    if not raw:
        return BUSY_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise StartError(
            f"SESSIOND_BUSY_TIMEOUT={raw!r}: expected seconds, 0 or more (default {BUSY_TIMEOUT:g})"
        )
    return value


def store_trouble(exc: BaseException, path: Path, state_dir: Path, waited: float) -> StartError:
    """The sentence for a store that cannot be used at start-up: which file, and what to do."""
    reason = trouble_of(exc) or "io"
    cause = exc.cause if isinstance(exc, StoreUnavailable) else str(exc)
    where = "the state dir" if path.parent == state_dir else "the store's folder"
    if reason == "damaged":
        return StartError(
            f"the store {path} is damaged or is not a sessiond store ({cause}); move it aside "
            f"(`mv {path} {path}.broken`) and start again to begin a new one, or start on another "
            "store with `sessiond serve --store PATH`"
        )
    if reason in ("readonly", "cantopen"):
        return StartError(
            f"cannot write {where} {path.parent} (the store {path.name} there: {cause}); make it "
            f"writable, or {STATE_DIR_INSTEAD}, or start on another store with `sessiond serve --store PATH`"
        )
    if reason == "full":
        return StartError(f"the disk holding the store {path} is full; free some space on it and start again")
    if reason == "locked":
        return StartError(
            f"the store {path} is locked by another process (waited {waited:g} s); close whatever "
            "holds it (a sqlite3 shell, a backup, another sessiond on this state dir) and start again"
        )
    return StartError(
        f"cannot use the store {path} ({cause}); check that disk, or start on another store with "
        "`sessiond serve --store PATH`"
    )


def _token(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    import secrets  # only a daemon that listens on TCP makes a token

    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _lock(socket_path: Path, *, taken: str = "stop it first, or pass another --socket") -> int:
    """Hold a lock beside the socket for the daemon's life: a second `serve` finds it taken, and
    says which daemon has it, then `taken`. The lock holds the daemon's pid."""
    fd = os.open(f"{socket_path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StartError(f"a daemon is already running on {socket_path} (pid {other}); {taken}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


COMPACTING, SERVING = "compact", "serve"  # who holds a store's lock


def _lock_store(db: Path, socket_path: Path, role: str) -> int:
    """Hold a lock beside the store for as long as it is used: one daemon per store (two on one
    store, on two sockets, each numbered sessions and events of its own into the same tables), and
    no `compact` under a daemon on another socket. The lock holds the holder's pid, its role and
    its socket, so that one finding it taken can say who has it."""
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:  # (said as the store's own trouble: a folder it cannot write)
        raise unavailable(
            sqlite3.OperationalError(f"unable to open database file: {exc.strerror}"), db
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held = os.pread(fd, 4096, 0).decode(errors="replace").split("\n")
        os.close(fd)
        pid, other_role, other_socket = [*held, "?", "", "?"][:3]
        if other_role == COMPACTING:
            raise StartError(
                f"`sessiond compact` (pid {pid}) is compacting the store {db}: wait for it to end, "
                "then try again"
            ) from None
        stop = (
            "sessiond stop"
            if other_socket == str(paths.socket_path())
            else f"sessiond --socket {other_socket} stop"
        )
        if role == COMPACTING:
            raise StartError(
                f"a daemon has the store {db} open (pid {pid}, serving on {other_socket}): stop it "
                f"(`{stop}`), then compact"
            ) from None
        raise StartError(
            f"the store {db} is in use by the daemon serving on {other_socket} (pid {pid}): one daemon "
            f"to a store; use that one (`sessiond --socket {other_socket} ...`), or serve another store "
            "(`sessiond serve --store PATH`)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n{role}\n{socket_path}".encode(), 0)
    return fd


def _bind(socket_path: Path) -> socketlib.socket:
    """The unix socket, bound (the user's alone) and listening: clients may connect from here on,
    and what they send waits until the daemon is ready to read it."""
    sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    try:
        sock.bind(str(socket_path))
        os.chmod(socket_path, 0o600)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


BACKLOG = 128


def store_of(store_path: Path | None, state_dir: Path) -> Path:
    """The SQLite store a daemon uses: `--store`, else sessiond.db in the state dir."""
    return store_path.absolute() if store_path is not None else state_dir / "sessiond.db"


def compact(socket: Path | None = None, store: Path | None = None) -> Compacted:
    """`sessiond compact`: give the free space of the store back to the filesystem, with no daemon
    on it. The store's lock is held meanwhile, so no daemon starts on it, whatever its socket; the
    socket (the default: the command line's) is named in the lock, and refused if a daemon holds
    it (one from before the store's lock). Raises StartError with the sentence."""
    socket_path = socket or paths.socket_path()
    path = store_of(store, paths.state_dir())
    if not path.is_file():
        raise StartError(
            f"there is no store at {path}: nothing to compact (`sessiond serve` makes one there)"
        )
    try:
        store_fd = _lock_store(path, socket_path, COMPACTING)
    except StoreUnavailable as exc:
        raise StartError(exc.message) from None
    try:
        if socket_path.parent.is_dir():
            # A daemon from before the store's lock holds only its socket's: none is compacted
            # under, either. (Only looked at: a daemon starting now meets the store's lock.)
            os.close(
                _lock(socket_path, taken="it has the store open: stop it (`sessiond stop`), then compact")
            )
        return compact_store(path, busy_timeout=busy_timeout())
    except StoreUnavailable as exc:
        raise StartError(exc.message) from None
    finally:
        os.close(store_fd)


async def _serve(
    socket_path: Path,
    tcp: str | None,
    state_rate: float,
    store_path: Path | None,
    limits: Limits,
    keep_closed: float | None = None,
) -> int:
    paths.check_socket_path(socket_path)
    tcp_address = parse_tcp(tcp) if tcp else None
    waited = busy_timeout()
    _private_dir(socket_path.parent, "the socket's folder", SOCKET_DIR_INSTEAD)
    state_dir = paths.state_dir()
    _private_dir(state_dir, "the state dir", STATE_DIR_INSTEAD)
    lock_fd = _lock(socket_path)
    store_fd = -1
    listening: socketlib.socket | None = None
    door: Door | None = None
    started = False
    try:
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()  # stale: its daemon is gone, or we would not hold the lock
        db = store_of(store_path, state_dir)
        # A store that cannot be used says so in a sentence (which file, what to do), not a traceback.
        try:
            store_fd = _lock_store(db, socket_path, SERVING)
            store = Store(db, busy_timeout=waited)
        except (StoreUnavailable, sqlite3.Error) as exc:
            raise store_trouble(exc, db, state_dir, waited) from None
        # The store and agents.toml are known good: failing past here is rare (a store that
        # refuses a write), so clients may connect now (and be answered while the rest loads).
        from sessiond.daemon.agents_config import ConfigError, demo_spec, load_agents_toml

        try:
            configured = load_agents_toml(paths.config_dir() / "agents.toml")
        except ConfigError as exc:
            raise StartError(str(exc)) from None
        listening = _bind(socket_path)
        # From here clients are answered `initialize` while the rest loads; what else they send
        # waits until the daemon is built, and its interrupted turns are announced.
        door = Door(VERSION, limits)
        await door.listen_unix(listening)
        listening = None  # the door's now
        if log.isEnabledFor(logging.DEBUG):
            absent = [name for name in AFTER_THE_FIRST_ANSWER if name not in sys.modules]
            log.debug("answering initialize without %s", ", ".join(absent) or "-")
        # Counting the stored sessions is SQLite's work, done with the GIL let go: on a thread of
        # its own it runs beside the imports (on another core) rather than after them.
        counting = asyncio.ensure_future(store.read(session_counts))
        for name in BEHIND_THE_DOOR:
            await importer.load(name)
        from sessiond.daemon.around import Around
        from sessiond.daemon.core import Core
        from sessiond.daemon.events import EventLog
        from sessiond.daemon.pruning import Pruner
        from sessiond.daemon.runs import RunBook
        from sessiond.daemon.server import DaemonServer
        from sessiond.daemon.session_tools import SessionTools
        from sessiond.daemon.tasks import TaskBook

        try:
            counts = await counting
            events = EventLog(store)
            core = Core(store, events, state_dir=state_dir, version=door.version, state_rate=state_rate)
            core.load([demo_spec(state_dir)], configured, counts)
            # The edges over the core: a session's own tools (the server's handlers and the MCP
            # endpoint both call them), and the endpoint, made by Around on first need.
            core.around = Around(
                core,
                TaskBook(store),
                state_dir,
                ask_person=core.permissions.ask,
                make_endpoint=_endpoint_maker(lambda: tools),
            )
            tools = SessionTools(core.around, get_session=core.get_session, describe=core.session_info)
            core.socket_path = str(socket_path)
            core.daemon_dirs = (str(socket_path.parent), str(state_dir), str(paths.config_dir()))
            runs = RunBook(store)
            store.start()
            # Turns cut off by the last stop end, stored and told, before any client is served.
            await core.announce_interrupted()
        except (StoreUnavailable, sqlite3.Error) as exc:
            raise store_trouble(exc, db, state_dir, waited) from None
        pruner = Pruner(core, runs, keep_closed=keep_closed)
        server = DaemonServer(core, runs, tools, door, pruner, socket_path=str(socket_path))
        server.started_at = time.time()
        if tcp_address is not None:
            server.token = _token(paths.token_path())
            host, port = await door.listen_tcp(*tcp_address)
            paths.tcp_address_path().write_text(f"{host}:{port}\n")
        if log.isEnabledFor(logging.DEBUG):
            absent = [name for name in ON_FIRST_NEED if name not in sys.modules]
            log.debug("serving without %s", ", ".join(absent) or "-")
        door.open(server)
        started = True  # the door serves: the normal stop below lets go of the socket
        long_lived.settle()  # modules, schemas and loaded sessions: kept out of full GC passes
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server.on_stop = stop.set  # daemon/stop
        where = str(socket_path) + (f" and tcp {door.tcp_address}" if door.tcp_address else "")
        print(f"sessiond: serving on {where}", file=sys.stderr, flush=True)
        attention = asyncio.create_task(core.feed.watch(), name="attention")
        keeping = asyncio.create_task(pruner.keep(), name="keep-closed") if keep_closed is not None else None
        await stop.wait()
        # Stopping: another SIGTERM changes nothing (it would kill the process once the loop
        # is gone, mid-exit); another Ctrl-C means "now", and ends the process at once.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        attention.cancel()
        if keeping is not None:
            keeping.cancel()
        print("sessiond: stopping: cancelling running turns", file=sys.stderr, flush=True)
        # A stop must never hang: past the grace turns get, say where it was stuck and exit.
        faulthandler.dump_traceback_later(STOP_DEADLINE, exit=True)
        door.close_listeners()
        with contextlib.suppress(StoreUnavailable):  # what it kept is tried once more by close()
            await core.shutdown()
        server.end_runs("stopped")
        lost = await store.close()
        if lost:
            why = store.trouble.message if store.trouble else "the store refused them"
            print(
                f"sessiond: stopped, but {lost} changes could not be stored: {why}",
                file=sys.stderr,
                flush=True,
            )
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        if tcp_address is not None:
            with contextlib.suppress(FileNotFoundError):
                paths.tcp_address_path().unlink()
        # Done with the store and the socket: a successor may start from here. Clients learn the
        # stop is over when their connection closes, and may start one at once.
        os.close(store_fd)
        os.close(lock_fd)
        store_fd = lock_fd = -1
        await door.stop_accepting()
        return 1 if lost else 0
    finally:
        if not started:  # it did not start: whoever connected is let go
            if listening is not None:
                listening.close()
            if door is not None:
                await door.stop_accepting()
            with contextlib.suppress(FileNotFoundError):
                socket_path.unlink()
        if store_fd >= 0:
            os.close(store_fd)
        if lock_fd >= 0:
            os.close(lock_fd)


def parse_size(text: str) -> int:
    """`--max-message`: bytes, or with K, M or G (binary: 16M is 16 MiB)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmg]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None or int(match.group(1)) <= 0:
        raise StartError(f"--max-message {text!r}: expected a size such as 16M, 1048576 or 512K")
    return int(match.group(1)) * 1024 ** " kmg".index(match.group(2).lower() or " ")


KEEP_CLOSED_ENV = "SESSIOND_KEEP_CLOSED"


def parse_keep_closed(text: str | None) -> float | None:
    """`--keep-closed` (or $SESSIOND_KEEP_CLOSED): seconds, or None to keep every closed session."""
    if text is None or not text.strip():
        return None
    seconds = age_seconds(text)
    if seconds is None:
        raise StartError(f"--keep-closed {text!r}: expected an age such as {AGE_EXAMPLES} (0s keeps none)")
    return seconds


def run(
    socket: Path | None = None,
    tcp: str | None = None,
    state_rate: float = 10.0,
    store: Path | None = None,
    max_message: str | None = None,
    keep_closed: str | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; the exit code. `store`: the SQLite file (default: in the state dir);
    `max_message`: the largest message a client may send once initialized (default 16M); `keep_closed`
    (else $SESSIOND_KEEP_CLOSED): an age (30d) past which closed sessions are removed, now and hourly."""
    logging.basicConfig(
        level=os.environ.get("SESSIOND_LOG", "WARNING").upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # pygls logs every error answer as an exception; the daemon logs its own failures.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    if log.isEnabledFor(logging.DEBUG):
        _say_when_loaded(ON_FIRST_NEED)
    try:
        if state_rate <= 0:
            raise StartError(f"--state-rate {state_rate}: must be above 0 (updates per second)")
        limits = Limits() if max_message is None else Limits(max_message=parse_size(max_message))
        keep = parse_keep_closed(keep_closed or os.environ.get(KEEP_CLOSED_ENV))
        return asyncio.run(_serve(socket or paths.socket_path(), tcp, state_rate, store, limits, keep))
    except (StartError, ValueError) as exc:
        print(f"sessiond: {exc}", file=sys.stderr)
        return 1
