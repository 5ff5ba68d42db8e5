"""The ``sessiond`` command: run the daemon, bridge an editor to it, and drive sessions.

Output: compact aligned tables for people; with ``--json``, one JSON object
per line (a listing is several lines, a single thing one line), so every
command's output can be read with the same loop. Errors are one line on
stderr, ``sessiond: <what happened; what to do>``, with exit status 2 for
usage and invalid params, 1 for everything else, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket as socketlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from sessiond.client import launch
from sessiond.client.errors import (
    AgentError,
    AgentNotFound,
    ConnectionLost,
    DaemonNotRunning,
    DaemonStartFailed,
    InvalidParams,
    ProtocolError,
    SessionClosed,
    SessiondError,
    SessionNotFound,
)
from sessiond.client.sync import Daemon, connect
from sessiond.protocol.models import AgentInfo, EventKind, SessionInfo, SessionStatus

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# After the editor closes stdin, wait this long for the daemon to close its side.
STDIO_DRAIN_SECONDS = 10.0

HINTS: dict[type[SessiondError], str] = {
    SessionNotFound: "list sessions with `sessiond ls --all`",
    SessionClosed: "open a new one with `sessiond new`",
    AgentNotFound: "list agents with `sessiond agents`",
}


class UsageError(Exception):
    """A command line that makes no sense; exit status 2."""


# ---------------------------------------------------------------- output


def _line(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")


def _fail(message: str) -> None:
    _line(sys.stderr, f"sessiond: {message}")


def _emit_json(items: Sequence[BaseModel | dict[str, Any]]) -> None:
    for item in items:
        data = (
            item.model_dump(mode="json", by_alias=True, exclude_none=True)
            if isinstance(item, BaseModel)
            else item
        )
        _line(sys.stdout, json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)] + [row[-1]]
        _line(sys.stdout, "  ".join(cells).rstrip())


def _pairs(pairs: Sequence[tuple[str, str]]) -> None:
    width = max(len(key) for key, _ in pairs)
    for key, value in pairs:
        _line(sys.stdout, f"{key.ljust(width)}  {value}")


def _short(text: str | None, limit: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(moment: Any) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _session_rows(sessions: Sequence[SessionInfo]) -> list[list[str]]:
    return [
        [s.id, s.agent, s.status.value, str(s.turns), s.root, _short(s.recap or s.title)] for s in sessions
    ]


SESSION_HEADERS = ["ID", "AGENT", "STATUS", "TURNS", "ROOT", "RECAP"]


def _agent_row(agent: AgentInfo) -> list[str]:
    return [
        agent.name,
        agent.process.state.value,
        str(agent.open_sessions),
        str(agent.process.active_turns),
        _short(" ".join(agent.command)),
    ]


# ---------------------------------------------------------------- commands


def _daemon(args: argparse.Namespace, *, start: bool = False) -> Daemon:
    return connect(args.socket, start=start)


def cmd_serve(args: argparse.Namespace) -> int:
    from sessiond.daemon.serve import run  # the daemon's imports are only paid for by `serve`

    return run(socket=Path(args.socket) if args.socket else None, tcp=args.tcp)


def cmd_stdio(args: argparse.Namespace) -> int:
    sock = launch.connect_socket(args.socket, start=True)
    try:
        return relay(sock, sys.stdin.fileno(), sys.stdout.fileno())
    finally:
        sock.close()


def relay(sock: socketlib.socket, stdin_fd: int, stdout_fd: int) -> int:
    """Copy bytes stdin→socket and socket→stdout until the daemon's side closes.

    When stdin closes, the socket's sending side is shut so the daemon sees
    the end, and the daemon's last answers are still copied out for a while.
    """
    selector = selectors.PollSelector()  # poll, unlike epoll, accepts a regular file as stdin
    selector.register(sock, selectors.EVENT_READ)
    selector.register(stdin_fd, selectors.EVENT_READ)
    deadline: float | None = None
    try:
        while True:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return EXIT_OK
            for key, _ in selector.select(timeout):
                if key.fileobj is sock:
                    data = sock.recv(65536)
                    if not data:
                        return EXIT_OK
                    _write_all(stdout_fd, data)
                else:
                    data = os.read(stdin_fd, 65536)
                    if data:
                        sock.sendall(data)
                    else:
                        selector.unregister(stdin_fd)
                        sock.shutdown(socketlib.SHUT_WR)
                        deadline = time.monotonic() + STDIO_DRAIN_SECONDS
    except (BrokenPipeError, ConnectionResetError):
        return EXIT_OK
    finally:
        selector.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def cmd_status(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        status = daemon.status()
    if args.json:
        _emit_json([status])
        return EXIT_OK
    counts = {SessionStatus(k): v for k, v in status.sessions.items()}
    fleet = " · ".join(f"{n} {k.value.replace('_', ' ')}" for k, n in counts.items() if n) or "none"
    _pairs(
        [
            ("daemon", f"sessiond {status.version} (pid {status.pid}) since {_when(status.started_at)}"),
            ("socket", status.socket),
            ("tcp", status.tcp or "-"),
            ("state", status.state_dir),
            ("agents", str(status.agents)),
            ("sessions", f"{sum(counts.values())} open ({fleet})"),
            ("clients", str(status.clients)),
            ("head", str(status.head)),
        ]
    )
    return EXIT_OK


def cmd_agents(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        agents = [agent.info for agent in daemon.agents()]
    if args.json:
        _emit_json(agents)
    else:
        _table(["NAME", "PROCESS", "SESSIONS", "TURNS", "COMMAND"], [_agent_row(a) for a in agents])
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise UsageError(f"--count must be at least 1, got {args.count}")
    with _daemon(args, start=True) as daemon:
        agent = daemon.agent(args.agent)
        sessions = agent.sessions(args.count, args.root or os.getcwd(), title=args.title)
    if args.json:
        _emit_json([s.info for s in sessions])
    else:
        for session in sessions:
            _line(sys.stdout, session.id)
    return EXIT_OK


def cmd_ls(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        sessions = daemon.sessions(agent=args.agent, status=args.status, include_closed=args.all)
    infos = [s.info for s in sessions]
    if args.json:
        _emit_json(infos)
    elif infos:
        _table(SESSION_HEADERS, _session_rows(infos))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        info = daemon.session(args.session).info
    if args.json:
        _emit_json([info])
        return EXIT_OK
    _pairs(
        [
            ("id", info.id),
            ("agent", info.agent),
            ("root", info.root),
            ("placement", info.placement),
            ("title", info.title or "-"),
            ("status", f"{info.status.value} since {_when(info.status_since)}"),
            ("turns", f"{info.turns} ended, {info.queued_turns} queued"),
            ("last stop", info.last_stop_reason or "-"),
            ("last error", info.last_error or "-"),
            ("recap", info.recap or "-"),
            ("created", _when(info.created_at)),
        ]
    )
    return EXIT_OK


def cmd_send(args: argparse.Namespace) -> int:
    prompt = " ".join(args.prompt)
    shown = ""
    with _daemon(args, start=True) as daemon:
        stream = daemon.session(args.session).stream(prompt)
        try:
            for event in stream:
                if event.kind is EventKind.TURN_CHUNK:
                    text = str(event.data.get("text", ""))
                    shown += text
                    sys.stdout.write(text)
                    sys.stdout.flush()
        except AgentError as e:
            _end_line(shown)
            _fail(f"the agent failed the turn: {e}")
            return EXIT_FAILED
        except KeyboardInterrupt:
            _end_line(shown)
            _fail("interrupted; the turn was cancelled")
            return EXIT_INTERRUPTED
    reply = stream.reply
    assert reply is not None
    if reply.text.startswith(shown):  # chunks the events did not carry (coalesced, or missed)
        sys.stdout.write(reply.text[len(shown) :])
        shown = reply.text
    _end_line(shown)
    _line(sys.stderr, f"stop reason: {reply.stop_reason}")
    return EXIT_OK if reply.stop_reason == "end_turn" else EXIT_FAILED


def _end_line(shown: str) -> None:
    if shown and not shown.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def cmd_cancel(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        cancelled = daemon.session(args.session).cancel()
    if args.json:
        _emit_json([{"session": args.session, "cancelled": cancelled}])
    else:
        _line(sys.stdout, f"told {cancelled} turn{'s' if cancelled != 1 else ''} of {args.session} to stop")
    return EXIT_OK


def cmd_close(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        info = daemon.session(args.session).close()
    if args.json:
        _emit_json([info])
    else:
        _line(sys.stdout, f"closed {info.id}")
    return EXIT_OK


# ---------------------------------------------------------------- parsing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessiond",
        description="A daemon that owns coding agents and their sessions; and its command line.",
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        default=None,
        help="the daemon's unix socket (default: $SESSIOND_SOCKET or the per-user runtime folder)",
    )
    # Also accepted after the subcommand; SUPPRESS keeps it from overwriting the global one.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--socket", metavar="PATH", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="one JSON object per line")

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str, *parents: Any) -> Any:
        sub = commands.add_parser(name, help=help, description=help, parents=[common, *parents])
        sub.set_defaults(handler=handler)
        return sub

    serve = command("serve", cmd_serve, "run the daemon in the foreground")
    serve.add_argument("--tcp", metavar="127.0.0.1:PORT", help="also listen on loopback TCP (with a token)")
    command("stdio", cmd_stdio, "relay stdin/stdout to the daemon (what editors spawn); starts one if needed")
    command("status", cmd_status, "show the daemon's status", as_json)
    command("agents", cmd_agents, "list agents", as_json)

    new = command("new", cmd_new, "open sessions and print their ids", as_json)
    new.add_argument("--agent", default="demo", help="agent name (default: demo)")
    new.add_argument("--root", metavar="DIR", help="the session's directory (default: the current one)")
    new.add_argument("--title", metavar="T")
    new.add_argument("--count", metavar="N", type=int, default=1, help="open N sessions alike")

    ls = command("ls", cmd_ls, "list sessions (open ones, unless --all)", as_json)
    ls.add_argument("--agent", metavar="A")
    ls.add_argument(
        "--status",
        metavar="S",
        nargs="+",
        choices=[s.value for s in SessionStatus],
        help="only in these states",
    )
    ls.add_argument("--all", action="store_true", help="closed sessions too")

    show = command("show", cmd_show, "show one session", as_json)
    show.add_argument("session", metavar="SESSION")

    send = command("send", cmd_send, "run a turn, printing the reply as it arrives")
    send.add_argument("session", metavar="SESSION")
    send.add_argument("prompt", metavar="PROMPT", nargs="+")

    for name, handler, text in [
        ("cancel", cmd_cancel, "stop a session's running and queued turns"),
        ("close", cmd_close, "close a session"),
    ]:
        command(name, handler, text, as_json).add_argument("session", metavar="SESSION")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        _fail("interrupted")
        return EXIT_INTERRUPTED
    except (UsageError, InvalidParams, ValueError) as e:
        _fail(str(e))
        return EXIT_USAGE
    except SessiondError as e:
        hint = HINTS.get(type(e))
        _fail(f"{e}; {hint}" if hint else str(e))
        return EXIT_FAILED
    except (DaemonNotRunning, DaemonStartFailed, ConnectionLost, ProtocolError) as e:
        _fail(str(e))
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not worth a traceback, nor a
        # second one when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as e:  # the socket is there but refuses us (permissions, not a socket, ...)
        _fail(f"cannot reach the daemon: {e}")
        return EXIT_FAILED
