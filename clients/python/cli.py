"""The ``sessiond`` command: run the daemon, bridge an editor to it, and drive sessions.

Output: compact aligned tables for people; with ``--json``, one JSON object
per line (a listing is several lines, a single thing one line), so every
command's output can be read with the same loop. Errors are one line on
stderr, ``sessiond: <what happened; what to do>``, with exit status 2 for
usage and invalid params, 1 for everything else, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import shlex
import socket as socketlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sessiond.client import launch
from sessiond.client.errors import (
    AgentError,
    ConnectionLost,
    DaemonNotRunning,
    DaemonStartFailed,
    FolderGone,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    SessiondError,
    current_folder,
    sentence,
)
from sessiond.client.wording import (
    LAST_LEAST,
    NO_COST,
    TITLE_LEAST,
    asked_text,
    cells,
    columns_that_fit,
    context_cell,
    controls_source,
    cost_text,
    count,
    cut,
    duration,
    files_cell,
    fleet_line,
    id_spans,
    merge_outcome,
    mode_lines,
    money,
    names_text,
    option_lines,
    option_of,
    options_text,
    pad,
    plan_cell,
    resting_line,
    serial_sentence,
    short,
    show_lines,
    title_cells,
    title_text,
    turn_ending,
    turns_cell,
    when,
)
from sessiond.protocol import names
from sessiond.protocol.durations import EXAMPLES as AGE_EXAMPLES
from sessiond.protocol.durations import age_seconds, age_text
from sessiond.protocol.sizes import KEPT_WORTH_TELLING, size

# The client and the protocol's models load when a command needs them: `sessiond stdio` (what
# editors spawn) and `sessiond serve` import neither (`main` builds only their part of the
# parser), and the commands that ask once and print (`status`, `ls`, `agents`, `send`,
# `cancel`, `close`) talk through `plain.py`, in the daemon's JSON, without them.
if TYPE_CHECKING:
    from pydantic import BaseModel

    from sessiond.client.aio import BatchProgress, Reply
    from sessiond.client.plain import PlainDaemon
    from sessiond.client.sync import Daemon
    from sessiond.protocol.models import (
        Event,
        RunInfo,
        SessionControls,
        SessionInfo,
        TaskInfo,
        TreeNode,
    )

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PLACEMENTS = ["here", "worktree", "sandbox", "container", "ssh"]
# After the editor closes stdin, wait this long for the daemon to close its side.
STDIO_DRAIN_SECONDS = 10.0


class UsageError(Exception):
    """A command line that makes no sense; exit status 2."""


# ---------------------------------------------------------------- output


def _line(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")


def _say(message: str) -> None:
    """A sentence of sessiond's own, on stderr: an error's, or why nothing was printed."""
    _line(sys.stderr, f"sessiond: {message}")


# Where a line that would run on (a transcript's, a whole file pasted into a prompt) is cut when
# stdout is not a terminal; at one, at its width.
LONGEST_LINE = 200


def _terminal_width() -> int | None:
    """The width of the terminal stdout is, or None when it is not one (a pipe, a file)."""
    if not sys.stdout.isatty():
        return None
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return None


def _emit_json(items: Sequence[BaseModel | dict[str, Any]]) -> None:
    for item in items:
        data = (
            item if isinstance(item, dict) else item.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        _line(sys.stdout, json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> None:
    """Aligned columns (the last one left as it is); with a terminal's `width`, each line cut to it."""
    widths = [max([cells(h)] + [cells(row[i]) for row in rows]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        padded = [pad(cell, cells_of) for cell, cells_of in zip(row[:-1], widths, strict=False)] + [row[-1]]
        line = "  ".join(padded).rstrip()
        _line(sys.stdout, line if width is None else cut(line, width))


def _pairs(pairs: Sequence[tuple[str, str]]) -> None:
    width = max(len(key) for key, _ in pairs)
    for key, value in pairs:
        _line(sys.stdout, f"{key.ljust(width)}  {value}")


def _session_rows(
    sessions: Sequence[dict[str, Any]], title: int | None = 40, recap: int | None = 60
) -> list[list[str]]:
    """Rows of sessions as the daemon sends them (`sessiond ls`): with each one's plan, context
    fill and changed files, as `sessiond watch` shows them; titles and recaps cut to `title` and
    `recap` cells (None: whole)."""
    rows = []
    for s in sessions:
        plan, fill, changes = s.get("plan"), s.get("context"), s.get("changes")
        rows.append(
            [
                s["id"],
                s["agent"],
                s["status"],
                turns_cell(s["turns"], s["status"], s.get("queuedTurns", 0)),
                plan_cell(plan["done"], plan["total"]) if plan else "-",
                context_cell(fill["used"], fill["size"], fill.get("percent"), estimated=fill["estimated"])
                if fill
                else "-",
                files_cell(len(changes["files"]), changes["added"], changes["removed"]) if changes else "-",
                s["root"],
                short(title_text(s.get("title"), s.get("kind"), s.get("parent")), title) or "-",
                short(resting_line(s["status"], s.get("lastError"), s.get("recap")), recap),
            ]
        )
    return rows


SESSION_HEADERS = ["ID", "AGENT", "STATUS", "TURNS", "PLAN", "CTX", "FILES", "ROOT", "TITLE", "RECAP"]
# What `ls` at a narrow terminal does without first, in this order; the id, status, title and
# recap stay.
LS_DROPPED_FIRST = ("FILES", "CTX", "PLAN", "TURNS", "ROOT", "AGENT")
GAP = 2  # cells between a table's columns


def _session_table(sessions: Sequence[dict[str, Any]], width: int | None) -> None:
    """`ls`'s table. At a terminal it fits its width: the title and recap take the room there is
    (the title what the recap leaves, or a third), the least important columns go when there is
    too little, and a line that is still too long is cut, never wrapped. Elsewhere, as it was."""
    if width is None:
        _table(SESSION_HEADERS, _session_rows(sessions))
        return
    rows = _session_rows(sessions, None, None)
    fixed = SESSION_HEADERS[:-2]  # (then TITLE and RECAP)
    spaced = {h: max(cells(h), *(cells(row[i]) for row in rows)) + GAP for i, h in enumerate(fixed)}
    kept = columns_that_fit(spaced, width - TITLE_LEAST - GAP - LAST_LEAST, LS_DROPPED_FIRST)
    room = width - sum(spaced[h] for h in kept) - GAP
    title = title_cells(room, max(cells(row[-2]) for row in rows), max(cells(row[-1]) for row in rows))
    keep = [SESSION_HEADERS.index(h) for h in kept]
    _table(
        [*kept, "TITLE", "RECAP"],
        [[*(row[i] for i in keep), cut(row[-2], title), row[-1]] for row in rows],
        width,
    )


def _process_text(process: dict[str, Any], *, live: bool = False) -> str:
    """ "running (pid 4242 on Ray node 6f47a253bcfe (10.0.0.7), 3 of 48 open, 212 MiB)": sessions
    open at the process, of at most (liveCap), for one of several processes or under a cap."""
    details = []
    if pid := process.get("pid"):
        details.append(f"pid {pid}" + (f" on {process['node']}" if process.get("node") else ""))
    cap = process.get("liveCap")
    if (live or cap) and pid:  # (SESSIONS counts those open at the daemon, some closed at the agent)
        details.append(f"{process.get('liveSessions', 0)}{f' of {cap}' if cap else ''} open")
    if process.get("memory") is not None:
        details.append(f"{process['memory'] / 2**20:.0f} MiB")
    return str(process["state"]) + (f" ({', '.join(details)})" if details else "")


def _auth_text(process: dict[str, Any]) -> str:
    """ "gemini-api-key": the method the daemon authenticated with (ACP authenticate); else "-":
    the agent signs in by itself (its own login, a key in its env) or needs what its turn's error
    says (the daemon cannot tell which until a turn fails). The methods it offers are in
    `agents --json` (process.authMethods)."""
    return str(process["authenticated"]) if process.get("authenticated") else "-"


def _agent_rows(agent: dict[str, Any]) -> list[list[str]]:
    """The agent's row (as the daemon sends it); with several processes, the processes taken
    together, then one row each."""
    processes = agent.get("processes", [])
    head = [
        agent["name"],
        "",
        str(agent.get("openSessions", 0)),
        str(agent.get("turns", 0)),
        _auth_text(agent["process"]),
        " ".join(agent["command"]),
    ]
    if len(processes) <= 1:
        head[1] = _process_text(agent["process"])
        return [head]
    running = sum(p["state"] == "running" for p in processes)
    head[1] = f"{running} of {len(processes)} processes running"
    return [head] + [[f"  #{p.get('index')}", _process_text(p, live=True), "", "", "", ""] for p in processes]


AGENT_HEADERS = ["NAME", "PROCESS", "SESSIONS", "TURNS", "AUTH", "COMMAND"]
# What `agents` at a narrow terminal does without first; the name, process and command stay.
AGENTS_DROPPED_FIRST = ("TURNS", "SESSIONS", "AUTH")


def _agent_table(agents: Sequence[dict[str, Any]], width: int | None) -> None:
    """`agents`' table. At a terminal it fits its width as `ls` does: the least important columns
    go while the command would have too little room, and its line is cut at the edge. Elsewhere
    each command is cut to 60 cells."""
    rows = [row for agent in agents for row in _agent_rows(agent)]
    if width is None:
        _table(AGENT_HEADERS, [[*row[:-1], short(row[-1])] for row in rows])
        return
    fixed = AGENT_HEADERS[:-1]
    spaced = {h: max(cells(h), *(cells(row[i]) for row in rows)) + GAP for i, h in enumerate(fixed)}
    kept = [
        AGENT_HEADERS.index(h) for h in columns_that_fit(spaced, width - LAST_LEAST, AGENTS_DROPPED_FIRST)
    ]
    _table(
        [*(AGENT_HEADERS[i] for i in kept), "COMMAND"],
        [[*(row[i] for i in kept), row[-1]] for row in rows],
        width,
    )


# ---------------------------------------------------------------- commands


def connect(*args: Any, **kwargs: Any) -> Daemon:
    from sessiond.client.sync import connect

    return connect(*args, **kwargs)


def _daemon(args: argparse.Namespace, *, start: bool = False) -> Daemon:
    return connect(args.socket, start=start)


def _plain(args: argparse.Namespace, *, start: bool = False) -> PlainDaemon:
    """A connection for a command that asks and prints: the daemon's JSON, no models."""
    from sessiond.client.plain import PlainDaemon

    return PlainDaemon.connect(args.socket, start=start)


def cmd_serve(args: argparse.Namespace) -> int:
    from sessiond.daemon.serve import run  # the daemon's imports are only paid for by `serve`

    return run(
        socket=Path(args.socket) if args.socket else None,
        tcp=args.tcp,
        store=Path(args.store) if args.store else None,
        max_message=args.max_message,
        keep_closed=args.keep_closed,
    )


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
    import selectors

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


def _store_text(status: Mapping[str, Any]) -> str:
    """`/…/sessiond.db, 148 MiB`, and how to make room where closed sessions fill it."""
    text = f"{status.get('store') or '-'}, {size(status.get('storeBytes', 0))}"
    if (keep := status.get("keepClosed")) is not None:
        text += f"; a closed session goes {age_text(keep)} after its close (--keep-closed)"
    elif status.get("closed"):
        text += "; `sessiond prune 30d` removes the sessions closed over 30 days ago"
    return text


def cmd_status(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        status = daemon.call(names.DAEMON_STATUS, {})
    if args.json:
        _emit_json([status])
        return EXIT_OK
    counts: dict[str, int] = status["sessions"]
    fleet = " · ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items() if n) or "none"
    mcp = status.get("mcpUrl") or "- (not started: no agent that takes http MCP servers has run)"
    since = when(status["startedAt"])
    _pairs(
        [
            ("daemon", f"sessiond {status['version']} (pid {status['pid']}) since {since}"),
            ("socket", status["socket"]),
            ("tcp", status.get("tcp") or "-"),
            ("mcp", mcp),
            ("state", status["stateDir"]),
            ("agents", str(status["agents"])),
            ("sessions", f"{sum(counts.values())} open ({fleet}); {status.get('closed', 0):,} closed"),
            ("store", _store_text(status)),
            ("clients", str(status["clients"])),
            ("head", str(status["head"])),
        ]
    )
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    try:
        daemon = _daemon(args)
    except DaemonNotRunning:
        print(f"no daemon is running at {launch.resolve_socket(args.socket)}")
        return EXIT_OK
    with daemon:
        try:
            stopping = daemon.stop()
        except MethodNotFound:
            status = daemon.status()
            print(
                f"sessiond: the daemon at {status.socket} (sessiond {status.version}, pid {status.pid}) "
                f"is older than this command and cannot be stopped over its socket; stop it with: "
                f"kill {status.pid}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    cancelled = stopping.cancelled_turns
    turns = (
        f"; {count(cancelled, 'turn')} {'was' if cancelled == 1 else 'were'} cancelled" if cancelled else ""
    )
    print(f"stopped the daemon (pid {stopping.pid}){turns}")
    return EXIT_OK


def cmd_agents(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        agents: list[dict[str, Any]] = daemon.call(names.AGENT_LIST, {})["agents"]
    if args.json:
        _emit_json(agents)
    else:
        _agent_table(agents, _terminal_width())
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise UsageError(f"--count must be at least 1, got {args.count}")
    with _daemon(args, start=True) as daemon:
        agent = daemon.agent(args.agent)
        # A session with a repository works in a clone of it, not in a directory here.
        root = args.root or (current_folder() if args.repository is None else None)
        sessions = agent.sessions(
            args.count, root, placement=args.placement, title=args.title, repository=args.repository
        )
    if args.json:
        _emit_json([s.info for s in sessions])
    else:
        for session in sessions:
            _line(sys.stdout, session.id)
    return EXIT_OK


# Sessions asked for a page at a time (as the Python client's `sessions()` does).
PAGE = 1000


def cmd_ls(args: argparse.Namespace) -> int:
    asked = {"agent": args.agent, "status": args.status, "kind": args.kind, "run": args.run}
    params = {k: v for k, v in asked.items() if v is not None} | {"includeClosed": args.all, "limit": PAGE}
    infos: list[dict[str, Any]] = []
    with _plain(args) as daemon:
        while True:
            page = daemon.call(names.SESSION_LIST, params)
            infos += page["sessions"]
            if not page.get("nextCursor"):
                break
            params["cursor"] = page["nextCursor"]
    if args.json:
        _emit_json(infos)
    elif infos:
        _session_table(infos, _terminal_width())
    else:  # (said on stderr: a script reading stdout gets no lines, as it would get no rows)
        filtered = any(v is not None for v in asked.values())
        _say(_none_listed(args, filtered=filtered))
    return EXIT_OK


def _none_listed(args: argparse.Namespace, *, filtered: bool) -> str:
    """Why `ls` printed no row, and what to do instead."""
    if filtered:
        also = "" if args.all else " (closed ones are left out: add --all)"
        return f"no session matches{also}; `sessiond ls` alone lists every open one"
    if not args.all:
        return "no open sessions; `sessiond ls --all` lists closed ones too, `sessiond new` opens one"
    return "no sessions yet; `sessiond new` opens one"


def cmd_show(args: argparse.Namespace) -> int:
    if args.lines < 0:
        raise UsageError(f"--lines must be 0 or more, got {args.lines}")
    with _daemon(args) as daemon:
        session = daemon.session(args.session)
        info = session.info
        transcript = session.transcript(limit=args.lines) if args.lines else None
        asks = daemon.permissions(info.id) if info.status == "needs_you" else []
    if args.json:
        shown = info.model_dump(mode="json", by_alias=True, exclude_none=True)
        if transcript is not None:
            shown["transcript"] = transcript.model_dump(mode="json", by_alias=True, exclude_none=True)
        if asks:
            shown["asks"] = [a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in asks]
        _emit_json([shown])
        return EXIT_OK
    for line in show_lines(info, transcript, asks, width=_terminal_width() or LONGEST_LINE):
        _line(sys.stdout, line)
    return EXIT_OK


def _show_controls(controls: SessionControls, info: SessionInfo, lines: list[str], empty: str) -> None:
    for line in lines or ([empty] if controls.source != "none" else []):
        _line(sys.stdout, line)
    source = controls_source(controls, info.id, info.agent)
    if source is not None:
        _line(sys.stdout, f"({source})")


def _applied(info: SessionInfo) -> str:
    return "said to the agent now" if info.live else "said to the agent when the session opens there"


def cmd_rename(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        info = daemon.session(args.session).rename(" ".join(args.title))
    if args.json:
        _emit_json([info])
    else:
        _line(sys.stdout, f"{info.id}: {info.title}")
    return EXIT_OK


def cmd_mode(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        session = daemon.session(args.session)
        controls = session.set_mode(args.mode) if args.mode else session.controls()
        info = session.info
    if args.json:
        _emit_json([controls])
    elif args.mode:
        _line(sys.stdout, f"{info.id}: mode {args.mode} ({_applied(info)})")
    else:
        _show_controls(controls, info, mode_lines(controls), f"agent {info.agent} offers no modes")
    return EXIT_OK


def cmd_option(args: argparse.Namespace) -> int:
    if (args.config_id is None) != (args.value is None):
        raise UsageError(
            "give an option and its value (sessiond option SESSION ID VALUE), or neither to list them"
        )
    with _daemon(args) as daemon:
        session = daemon.session(args.session)
        controls = session.controls()
        if args.config_id is not None:
            option = next((o for o in controls.config_options if o.get("id") == args.config_id), None)
            value: str | bool = args.value
            if option is not None and option.get("type") == "boolean":
                if args.value not in ("true", "false"):
                    raise UsageError(f"option {args.config_id} takes true or false, not {args.value!r}")
                value = args.value == "true"
            controls = session.set_option(args.config_id, value)
        info = session.info
    if args.json:
        _emit_json([controls])
    elif args.config_id is not None:
        _line(sys.stdout, f"{info.id}: {args.config_id} = {args.value} ({_applied(info)})")
    else:
        _show_controls(controls, info, option_lines(controls), f"agent {info.agent} offers no config options")
    return EXIT_OK


def cmd_send(args: argparse.Namespace) -> int:
    from sessiond.protocol.enums import EventKind

    from_stdin = args.prompt == ["-"]
    prompt = _prompt_of(args.prompt)
    turn = os.urandom(16).hex()
    shown = ""
    # (a prompt read from stdin leaves none to answer questions with)
    interactive = sys.stdin.isatty() and sys.stderr.isatty() and not from_stdin
    broken = False  # a question broke the reply's line: its next line break is not shown again
    ended: dict[str, Any] = {}  # the turn's turn.ended: how it ended, by whom it was cancelled
    started = False  # this turn has started: the session's status details are of it
    last_detail = ""
    # At a terminal, each tool call the turn made, once done, on stderr between the reply's lines
    # (stdout stays the reply alone): what it ran and wrote, and what failed or was refused.
    tools_shown: set[str] | None = set() if sys.stderr.isatty() and not args.json else None

    def tool_done(data: dict[str, Any]) -> None:
        nonlocal broken
        call = str(data.get("toolCallId", ""))
        if (
            tools_shown is None
            or call in tools_shown
            or data.get("status") not in ("completed", "failed", "refused")
        ):
            return
        tools_shown.add(call)
        if shown and not shown.endswith("\n") and not broken:
            sys.stdout.write("\n")
            broken = True
        sys.stdout.flush()
        from sessiond.protocol.models import tool_line  # (pydantic: only once a turn runs a tool)

        _line(
            sys.stderr,
            "· " + tool_line(data.get("toolKind"), str(data.get("title") or ""), data.get("status")),
        )

    def status_said(detail: str) -> None:
        """What the session's status says while this turn runs (its agent silent since when, say),
        on stderr, once each: a person at `send` sees it as `show` and `watch` do."""
        nonlocal broken, last_detail
        if detail == last_detail:
            return
        last_detail = detail
        if shown and not shown.endswith("\n") and not broken:
            sys.stdout.write("\n")
            broken = True
        sys.stdout.flush()
        _say(detail)

    def notified(method: str, params: Any) -> None:
        nonlocal shown, broken, started
        if method != names.EVENTS_NOTIFY:
            return
        for event in params.get("events", []):
            kind, data = event.get("kind"), event.get("data", {})
            if kind == EventKind.SESSION_STATUS and started and data.get("detail"):
                status_said(str(data["detail"]))
            if event.get("turn") != turn:
                continue
            if kind == EventKind.TURN_STARTED:
                started = True
            elif kind == EventKind.TURN_ENDED:
                ended.update(data)
            elif kind == EventKind.TURN_CHUNK and not args.json:
                text = str(data.get("text", ""))
                shown += text
                sys.stdout.write(text[1:] if broken and text.startswith("\n") else text)
                sys.stdout.flush()
                broken = False
            elif kind == EventKind.TURN_TOOL:
                tool_done(data)
            elif kind == EventKind.PERMISSION_ASKED:
                if shown and not shown.endswith("\n"):
                    sys.stdout.write("\n")  # the question on a line of its own
                    broken = True
                sys.stdout.flush()
                questions.asked(data)
            elif kind == EventKind.PERMISSION_ANSWERED:
                questions.answered(data)

    with _plain(args, start=True) as daemon:
        questions = _Questions(daemon, args.session, interactive=interactive)
        daemon.on_notification = notified
        # Subscribed before prompting, so that no chunk of the turn can be missed; with the session
        # as it stands, to say so when this prompt waits behind its other turns.
        subscribed = daemon.call(names.EVENTS_SUBSCRIBE, {"sessions": [args.session], "snapshot": True})
        if (busy := _busy_note(args.session, subscribed)) is not None:
            _say(busy)
        asked: int | None = None
        try:
            # (Inside: a Ctrl-C while the prompt is being sent may come once the daemon has it.)
            asked = daemon.ask(
                names.SESSION_PROMPT, {"session": args.session, "prompt": prompt, "turnId": turn}
            )
            reply = daemon.wait_for(asked)
        except AgentError as e:
            _end_line(shown)
            _say(f"the agent failed the turn: {e}")
            return EXIT_FAILED
        except KeyboardInterrupt:
            _end_line(shown)
            _cancel_turn(args, daemon, asked, turn)
            _say("interrupted; the turn was cancelled")
            return EXIT_INTERRUPTED
        except ConnectionLost as e:
            _end_line(shown)  # (the reply so far stays, the sentence on a line of its own)
            if ending := turn_ending(ended.get("stopReason"), ended.get("cancelledBy")):
                _say(f"{ending}; {e}")
            else:
                _say(
                    f"{e}; the turn's answer went with it: `sessiond show {args.session}` says how it "
                    "ended once a daemon runs again (`sessiond serve`)"
                )
            return EXIT_FAILED
        except Exception:
            _end_line(shown)  # whatever it was, `main` says it on a line of its own
            raise
    stop_reason = reply["stopReason"]
    if args.json:  # the whole reply: text, stop reason, usage, plan, changed files
        _emit_json([reply])
        return EXIT_OK if stop_reason == "end_turn" else EXIT_FAILED
    if reply["text"].startswith(shown):  # chunks the events did not carry (coalesced, or missed)
        sys.stdout.write(reply["text"][len(shown) :])
        shown = reply["text"]
    _end_line(shown)
    if notice := reply.get("notice"):  # (the earlier conversation lost, say: the answer may not fit it)
        _say(notice)
    if ending := turn_ending(stop_reason, ended.get("cancelledBy")):  # (a turn that ended well: nothing)
        _say(ending)
    return EXIT_OK if stop_reason == "end_turn" else EXIT_FAILED


def _prompt_of(words: list[str]) -> str:
    """The prompt on the command line (its words joined), or all of stdin for `-` (as a file too
    large for the command line is given); UsageError for an empty one."""
    from_stdin = words == ["-"]
    prompt = utf8_text(sys.stdin.buffer.read(), "stdin").rstrip("\r\n") if from_stdin else " ".join(words)
    if not prompt.strip():
        raise UsageError("the prompt is empty: nothing sent")
    return prompt


def _busy_note(session: str, subscribed: Mapping[str, Any]) -> str | None:
    """What `send` says when its prompt is to wait behind the session's own turns, from the state
    its subscription answered with; None when the session is free."""
    shown = (subscribed.get("snapshot") or {}).get("sessions", [])
    info = next((s for s in shown if s.get("id") == session), None)
    if info is None:
        return None
    queued = int(info.get("queuedTurns") or 0)
    status = info.get("status")
    doing = []
    if status == "needs_you":
        doing.append("a turn waits for a permission answer: `sessiond permissions`")
    elif status == "working":
        doing.append(f"a turn running since {when(info['statusSince'])}")
    if queued:
        doing.append(f"{count(queued, 'turn')} queued")
    if not doing:
        return None
    return (
        f"{session} is busy ({'; '.join(doing)}): this prompt waits its turn; "
        f"`sessiond cancel {session}` stops every turn of it"
    )


class _Questions:
    """What the agent asks permission for during `send`. On stderr, each on a line of its own;
    at a terminal the person answers it there, by number (Enter leaves it to another client),
    read on a thread of its own so that the turn's messages keep coming meanwhile: an answer
    given elsewhere closes the question at once. Elsewhere, how to answer it is said instead."""

    def __init__(self, daemon: PlainDaemon, session: str, *, interactive: bool) -> None:
        self.daemon = daemon
        self.session = session
        self.interactive = interactive
        self.open: dict[str, tuple[dict[str, Any], str | None]] = {}  # by permission: asked, our answer
        self.current: dict[str, Any] | None = None  # the question the person is asked now
        self.lock = threading.Lock()
        self.reader: threading.Thread | None = None

    def asked(self, asked: dict[str, Any]) -> None:
        options = list(asked.get("options") or [])
        with self.lock:
            self.open[str(asked.get("permission"))] = (asked, None)
            _line(
                sys.stderr, f"sessiond: {asked_text(asked.get('toolCall') or {})}: the agent asks permission"
            )
            if not self.interactive or not options:
                self._elsewhere()
                return
            self.current = asked
            self._prompt()
        if self.reader is None:
            self.reader = threading.Thread(target=self._read, name="sessiond-send-answers", daemon=True)
            self.reader.start()

    def answered(self, answered: dict[str, Any]) -> None:
        """Who answered a question shown, and how."""
        with self.lock:
            entry = self.open.pop(str(answered.get("permission")), None)
            if entry is None:
                return
            asked, ours = entry
            if self.current is asked:  # answered elsewhere while the person was being asked
                self.current = None
                sys.stderr.write("\n")
            chosen = answered.get("optionId")
            names_by_id = {str(o.get("optionId")): o.get("name") for o in asked.get("options") or []}
            how = "cancelled" if chosen is None else str(names_by_id.get(str(chosen)) or chosen)
            where = "" if ours is not None and chosen == ours else " elsewhere"
            _line(sys.stderr, f"sessiond: answered{where}: {how}")

    def _read(self) -> None:
        for typed in sys.stdin:
            with self.lock:
                asked = self.current
                if asked is None:
                    continue  # typed with no question asked: nothing to answer
                options = list(asked.get("options") or [])
                choice = typed.strip()
                if not choice:
                    self.current = None
                    self._elsewhere()
                elif choice.isdigit() and 1 <= int(choice) <= len(options):
                    option_id = str(options[int(choice) - 1].get("optionId"))
                    permission = str(asked.get("permission"))
                    self.open[permission] = (asked, option_id)
                    self.current = None
                    self.daemon.ask(
                        names.PERMISSION_ANSWER, {"permission": permission, "optionId": option_id}
                    )
                else:
                    _line(sys.stderr, f"sessiond: type a number from 1 to {len(options)}, or just Enter")
                    self._prompt()
        with self.lock:  # stdin closed: what is asked is left to another client
            if self.current is not None:
                self.current = None
                sys.stderr.write("\n")
                self._elsewhere()

    def _prompt(self) -> None:
        options = list((self.current or {}).get("options") or [])
        choices = "  ".join(f"{n}) {o.get('name') or o.get('optionId')}" for n, o in enumerate(options, 1))
        sys.stderr.write(f"  {choices}  (Enter: answer elsewhere) > ")
        sys.stderr.flush()

    def _elsewhere(self) -> None:
        _line(
            sys.stderr,
            f"sessiond: the turn waits for an answer: sessiond allow {self.session} (or reject), "
            "from `sessiond watch` or an editor",
        )
        sys.stderr.flush()


def _cancel_turn(args: argparse.Namespace, daemon: PlainDaemon, asked: int | None, turn: str) -> None:
    """Ctrl-C during `send`: the prompt is withdrawn and its turn cancelled, as the Python client
    does it. The cancel goes over a connection of its own: the interrupted read (or send) may have
    left this one mid-message."""
    if asked is not None:
        with contextlib.suppress(OSError):
            daemon.cancel(asked)
    with contextlib.suppress(SessiondError, OSError), _plain(args) as again:
        again.call(names.SESSION_CANCEL, {"session": args.session, "turnId": turn})


def _end_line(shown: str) -> None:
    if shown and not shown.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def cmd_permissions(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        waiting = daemon.call(names.PERMISSION_LIST, {"session": args.session})["permissions"]
    if args.json:
        _emit_json(waiting)
    elif waiting:
        _table(
            ["PERMISSION", "SESSION", "AGENT", "ASKS", "OPTIONS"],
            [
                [
                    w["permission"],
                    w["session"],
                    w["agent"],
                    short(asked_text(w["toolCall"]), 60),
                    options_text(w["options"]),
                ]
                for w in waiting
            ],
        )
    else:
        _line(sys.stderr, "no agent waits for a permission" + (f" in {args.session}" if args.session else ""))
    return EXIT_OK


def cmd_answer(args: argparse.Namespace) -> int:
    """`allow` and `reject`: answer the request waiting under a permission id or a session id."""
    kind = f"{args.command}_{'always' if args.always else 'once'}"
    with _plain(args) as daemon:
        waiting: list[dict[str, Any]] = daemon.call(names.PERMISSION_LIST, {})["permissions"]
        try:
            asked, option = _answer_to(waiting, args.target, kind)
        except LookupError as e:
            _say(str(e))
            return EXIT_FAILED
        answer = {"permission": asked["permission"], "optionId": option["optionId"]}
        daemon.call(names.PERMISSION_ANSWER, answer)
    if args.json:
        _emit_json([{**answer, "session": asked["session"]}])
    else:
        what = option.get("name") or option["optionId"]
        _line(
            sys.stdout, f"{asked['session']}: {what}: {asked_text(asked['toolCall'])} ({asked['permission']})"
        )
    return EXIT_OK


def _answer_to(
    waiting: list[dict[str, Any]], target: str, kind: str
) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """The request a person named (by its permission id, or as the only one its session waits
    on) and its option of `kind`; LookupError saying why there is none."""
    asked = next((a for a in waiting if a["permission"] == target), None)
    if asked is None:
        mine = [a for a in waiting if a["session"] == target]
        if not mine:
            raise LookupError(
                f"no permission request waits under {target!r} (answered already, or its turn ended?); "
                "`sessiond permissions` lists the waiting ones, by permission and session id"
            )
        if len(mine) > 1:
            listed = "; ".join(f"{a['permission']}: {asked_text(a['toolCall'])}" for a in mine)
            raise LookupError(
                f"{target} waits on {len(mine)} permission requests ({listed}): name one by its id"
            )
        asked = mine[0]
    option = option_of(asked["options"], kind)
    if option is None:
        raise LookupError(
            f"the agent offers no {kind} answer to {asked['permission']} ({asked_text(asked['toolCall'])}): "
            f"it offers {options_text(asked['options'])}"
        )
    return asked, option


def cmd_cancel(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        cancelled = daemon.call(names.SESSION_CANCEL, {"session": args.session})["cancelled"]
    if args.json:
        _emit_json([{"session": args.session, "cancelled": cancelled}])
    else:
        if cancelled:
            _line(sys.stdout, f"told {count(cancelled, 'turn')} of {args.session} to stop")
        else:
            _line(sys.stdout, f"{args.session} had no turn running or queued: nothing to stop")
    return EXIT_OK


def cmd_close(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        # Its open side chats close with it (the daemon closes them): said, by their ids.
        tree = daemon.call(names.SESSION_TREE, {"session": args.session})
        sides = [
            child["session"]["id"]
            for child in tree["children"]
            if child["session"]["kind"] == "side" and child["session"]["status"] != "closed"
        ]
        info = daemon.call(names.SESSION_CLOSE, {"session": args.session})
    if args.json:
        _emit_json([info])
    else:
        which = f" and its side chat{'s' if len(sides) > 1 else ''} {id_spans(sides)}" if sides else ""
        _line(sys.stdout, f"closed {info['id']}{which}")
    return EXIT_OK


def cmd_reopen(args: argparse.Namespace) -> int:
    with _plain(args) as daemon:
        info = daemon.call(names.SESSION_REOPEN, {"session": args.session})
    if args.json:
        _emit_json([info])
    else:
        sid = info["id"]
        _line(
            sys.stdout,
            f"{sid} is open ({info['status']}); `sessiond send {sid} ...` goes on where it left off",
        )
    return EXIT_OK


def moment_of(text: str) -> datetime:
    """`prune`'s time: an age (30d, 12h, 2w, 90m: that long ago) or a date or time (2026-11-01,
    2026-11-01T09:30; local unless it names its zone)."""
    if (seconds := age_seconds(text)) is not None:
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{text!r} is neither an age nor a date; give an age such as {AGE_EXAMPLES}, "
            "or a date such as 2026-11-01"
        ) from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def _pruned_text(result: dict[str, Any], before: datetime, *, would: bool) -> list[str]:
    lines = []
    if result["sessions"]:
        what = [
            f"{count(result['sessions'], 'session')} closed before {when(before)} "
            f"({count(result['turns'], 'turn')}, {count(result['events'], 'event')})"
        ]
        what += [
            count(result[key], noun)
            for key, noun in (("tasks", "settled task"), ("runs", "run"))
            if result[key]
        ]
        lines.append(f"{'would remove' if would else 'removed'} {' and '.join(what)}")
    else:
        lines.append(f"no session closed before {when(before)} to remove")
    if kept := result["kept"]:
        them = "them" if kept != 1 else "it"
        lines.append(
            f"{count(kept, 'session')} closed before then {'stay' if kept != 1 else 'stays'}: a session "
            f"started from {them} is still open, or a task suggested in {them} is still to run"
        )
    if result.get("worktrees"):
        lines.append("what their closes kept stays where it is:")
        lines += [f"  {said}" for said in result["worktrees"]]
    if freed := result.get("freedBytes"):
        lines.append(f"the store's file gave back {size(freed)}")
    if (kept := result.get("keptBytes", 0)) >= KEPT_WORTH_TELLING:
        lines.append(
            f"the store's file keeps {size(kept)} free inside it (made by an older sessiond, it does not "
            "give space back): `sessiond stop`, then `sessiond compact`, gives it back"
        )
    return lines


def cmd_prune(args: argparse.Namespace) -> int:
    before = moment_of(args.before)
    params = {"closedBefore": before.isoformat()}
    dry = bool(args.dry_run)
    result: dict[str, Any] | None = None
    with _plain(args) as daemon:
        if not dry and not args.yes:  # what would go, first: asked about, or refused without --yes
            counted = daemon.call(names.SESSION_PRUNE, {**params, "dryRun": True})
            if not counted["sessions"]:
                result, dry = counted, True  # nothing to ask about: said as a dry run says it
            elif not (sys.stdin.isatty() and sys.stderr.isatty()):
                what = count(counted["sessions"], "closed session")
                raise UsageError(
                    f"this would remove {what} and their transcripts; add --yes to remove them "
                    "without being asked, or --dry-run to see what would go"
                )
            else:
                for text in _pruned_text(counted, before, would=True):
                    _line(sys.stderr, text)
                if input("remove them? [y/N] ").strip().lower() not in ("y", "yes"):
                    _say("nothing removed")
                    return EXIT_OK
        if result is None:
            result = daemon.call(names.SESSION_PRUNE, {**params, "dryRun": dry})
    if args.json:
        _emit_json([result])
    else:
        for text in _pruned_text(result, before, would=dry):
            _line(sys.stdout, text)
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    from sessiond.daemon.serve import StartError, compact  # (what `serve` imports first, no more)

    try:
        done = compact(Path(args.socket) if args.socket else None, Path(args.store) if args.store else None)
    except StartError as exc:
        _say(str(exc))
        return EXIT_FAILED
    print(f"compacted the store {done.path}: from {size(done.before)} to {size(done.after)}")
    if done.rewritten:
        print("it was made before sessiond gave space back; from now on a prune gives back what it frees")
    return EXIT_OK


# ---------------------------------------------------------------- the log and runs


def cmd_trace(args: argparse.Namespace) -> int:
    if args.since < 0:
        raise UsageError(f"--since must be 0 or more, got {args.since}")
    picture = args.html is not None or args.open or args.format == "perfetto"
    if picture and args.follow:
        raise UsageError(
            "--follow prints the log as it grows; a picture (--html, --format perfetto) is of the log so far"
        )
    if (args.chunks or args.output) and not picture:
        raise UsageError("--chunks and --output go with --html or --format perfetto")
    since_time = time.time() - _seconds_of(args.last) if args.last else None
    with _daemon(args) as daemon:
        for session in args.session or []:
            daemon.session(session)  # SessionNotFound: said as every other command says it
        stream = daemon.trace(
            since=args.since,
            sessions=args.session,
            agents=args.agent,
            kinds=args.kind,
            run=args.run,
            follow=args.follow,
        )
        with stream:
            if picture:
                events = list(stream)
                run = daemon.get_run(args.run) if args.run else None
            else:
                for event in stream:
                    if since_time is not None and event.time.timestamp() < since_time:
                        continue
                    _line(sys.stdout, json.dumps(event.wire(), ensure_ascii=False, separators=(",", ":")))
                    if args.follow:
                        sys.stdout.flush()
                return EXIT_OK
    from sessiond.client import timeline

    picture_of = timeline.build(events, run=run, chunks=args.chunks, since_time=since_time)
    if args.format == "perfetto":
        from sessiond.client.timeline_perfetto import trace_events

        text = json.dumps(
            trace_events(picture_of, chunks=args.chunks), ensure_ascii=False, separators=(",", ":")
        )
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
            _line(sys.stderr, f"wrote {args.output}: {_picture_counts(picture_of)}")
        else:
            _line(sys.stdout, text)
    if args.html is not None or args.open:
        _write_picture(picture_of, args.html, args.open, "selection")
    return EXIT_OK


def _seconds_of(text: str) -> float:
    """ "90s", "15m", "1h", "2d" (or plain seconds) in seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise UsageError(f"--last takes a duration such as 90s, 15m, 1h or 2d, not {text!r}") from None
    if seconds <= 0:
        raise UsageError(f"--last must be more than nothing, got {text!r}")
    return seconds


def _picture_counts(picture: Any) -> str:
    counts = ", ".join(f"{n} {outcome}" for outcome, n in picture.counts().items() if n)
    return f"{count(len(picture.sessions), 'session')}, {count(len(picture.turns), 'turn')}" + (
        f" ({counts})" if counts else ""
    )


def _write_picture(picture: Any, path: str | None, open_it: bool, name: str) -> None:
    """Write the timeline page (to `path`, or a temporary file when only --open is given) and say where."""
    from sessiond.client import timeline_html

    if path is None:
        import tempfile

        path = str(Path(tempfile.gettempdir()) / f"sessiond-timeline-{name}.html")
    size = timeline_html.write(path, picture)
    _line(sys.stdout, str(Path(path).resolve()))
    _line(sys.stderr, f"wrote {path} ({size / 1024:.0f} KiB): {_picture_counts(picture)}")
    if open_it and not timeline_html.open_page(path):
        _line(sys.stderr, "no browser to open it with; open the file above yourself")


def _run_row(run: RunInfo) -> list[str]:
    return [
        run.id,
        run.outcome or "running",
        str(run.sessions),
        str(run.turns),
        duration(run.wall_seconds),
        duration(run.serial_seconds),
        when(run.started_at),
        short(run.name, 40),
    ]


def cmd_runs(args: argparse.Namespace) -> int:
    if args.html is not None or args.open:
        return _run_picture(args)
    with _daemon(args) as daemon:
        runs = [daemon.get_run(args.run)] if args.run else daemon.runs()
        # (its cost is a sum: 0 both when its agents reported none and when they reported 0)
        reported = (
            bool(args.run)
            and not args.json
            and any(_cost_reported(s.info) for s in daemon.sessions(run=args.run, include_closed=True))
        )
    if args.json:
        _emit_json(runs)
    elif args.run:
        (run,) = runs
        _pairs(
            [
                ("id", run.id),
                ("name", run.name),
                ("command", shlex.join(run.argv) or "-"),
                ("directory", run.cwd),
                ("outcome", run.outcome or "running"),
                ("started", when(run.started_at)),
                ("ended", when(run.ended_at) if run.ended_at else "-"),
                ("sessions", str(run.sessions)),
                ("turns", str(run.turns)),
                ("time", serial_sentence(run.serial_seconds, run.wall_seconds)),
                ("cost", cost_text(run.cost if reported else None)),
            ]
        )
    elif runs:
        headers = ["ID", "OUTCOME", "SESSIONS", "TURNS", "WALL", "SERIAL", "STARTED", "NAME"]
        _table(headers, [_run_row(r) for r in runs])
    else:  # (on stderr, as `ls` says it)
        _say("no runs yet; `sessiond batch` makes one, as does a script that connects with run=NAME")
    return EXIT_OK


def _run_picture(args: argparse.Namespace) -> int:
    """`runs [ID] --html FILE [--open]`: the run's timeline (the latest run's without an ID)."""
    with _daemon(args) as daemon:
        if args.run:
            run = daemon.get_run(args.run)
        else:
            runs = daemon.runs()
            if not runs:
                raise UsageError("there are no runs yet; a client declares one (`sessiond batch` does)")
            run = runs[-1]
        with daemon.trace(run=run.id) as stream:
            events = list(stream)
        run = daemon.get_run(run.id)  # as of the events read
    from sessiond.client import timeline

    _write_picture(timeline.build(events, run=run), args.html, args.open, run.id)
    return EXIT_OK


def cmd_fleet(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        fleet = daemon.fleet()
    if args.json:
        _emit_json([fleet])
        return EXIT_OK
    _pairs(
        [
            ("fleet", fleet_line(fleet)),
            ("by status", " · ".join(f"{n} {k.value}" for k, n in fleet.by_status.items() if n) or "-"),
            ("attention", " · ".join(f"{n} {k.value}" for k, n in fleet.attention.items() if n) or "-"),
            # (turns and their time count the ended ones: with 20 working and none ended, "0" alone
            # read as if nothing ran)
            ("turns", f"{fleet.turns} ended" + (f", {fleet.working} working" if fleet.working else "")),
            ("time", serial_sentence(fleet.serial_seconds, fleet.wall_seconds) if fleet.turns else "-"),
            # (a sum of what the agents reported: 0 when none reported any, which it cannot tell
            # from a cost of 0; codex reports none)
            ("cost", money(fleet.cost) if fleet.cost else NO_COST),
        ]
    )
    return EXIT_OK


# ---------------------------------------------------------------- batches


def utf8_text(data: bytes, name: str) -> str:
    """`data` read as UTF-8; UsageError naming the line (of `name`, a file or stdin) that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UsageError(
            f"{name} line {line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save it as UTF-8"
        ) from None


def read_prompts(text: str, name: str) -> list[str]:
    """One prompt per line, or JSON lines ``{"prompt": ...}``; blank lines are skipped. A bad line
    is named by its number in `name` (a file, or stdin)."""
    prompts = []
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                item = json.loads(line)
            except ValueError as e:
                raise UsageError(f"{name} line {number}: not JSON ({e}); write one prompt per line") from None
            if not isinstance(item, dict) or not isinstance(item.get("prompt"), str) or not item["prompt"]:
                raise UsageError(
                    f'{name} line {number}: a JSON line must be an object with a "prompt" string'
                )
            prompts.append(item["prompt"])
        else:
            prompts.append(line)
    return prompts


def prompt_numbers(text: str, total: int) -> list[int]:
    """The indices of the prompts `--only` names by number, counting from 1 as the CLI does
    ("2-5,9"; "2…5" as its notes write spans), in file order."""
    chosen: set[int] = set()
    for part in text.replace("…", "-").replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if not (first.isdigit() and (not last or last.isdigit())):
            raise UsageError(f"--only {text}: not prompt numbers; name them as 2-5,9 (counting from 1)")
        low, high = int(first), int(last or first)
        if not 1 <= low <= high <= total:
            raise UsageError(f"--only {text}: {part} is not among the {total} prompts (1 to {total})")
        chosen.update(range(low - 1, high))
    return sorted(chosen)


def number_spans(indices: Sequence[int]) -> str:
    """Prompt indices as `--only` takes them: [1, 2, 3, 4, 8] → "2-5,9"."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and spans[-1][-1] + 1 == index:
            spans[-1].append(index)
        else:
            spans.append([index])
    return ",".join(str(s[0] + 1) if len(s) == 1 else f"{s[0] + 1}-{s[-1] + 1}" for s in spans)


def _again(args: argparse.Namespace, indices: Sequence[int]) -> str:
    """The command that runs these prompts of the batch again, as it was run."""
    words = ["sessiond"] + (["--socket", args.socket] if args.socket else []) + ["batch", args.file]
    if args.agent != "demo":
        words += ["--agent", args.agent]
    for flag, value in (("--root", args.root), ("--placement", args.placement)):
        if value is not None:
            words += [flag, value]
    if args.max_concurrency is not None:
        words += ["--max-concurrency", str(args.max_concurrency)]
    words += ["--json"] * args.json + ["--suppress"] * args.suppress + ["--only", number_spans(indices)]
    return shlex.join(words) + (" (the same prompts on stdin)" if args.file == "-" else "")


def _read_all(path: str) -> str:
    """The whole of a file named on the command line, or of stdin for `-`, as UTF-8 text: a file
    that cannot be read, or is not UTF-8, is said before anything is sent."""
    if path == "-":
        return utf8_text(sys.stdin.buffer.read(), "stdin")
    try:
        with open(path, "rb") as source:
            return utf8_text(source.read(), path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


ASKING_HINT = (
    "sessiond: an agent asks permission and its turn waits: see `sessiond permissions`, "
    "answer with `sessiond allow SESSION` (or reject)"
)


class ProgressBar:
    """Counts by status on stderr: redrawn in place on a terminal, a last line otherwise.

    On a terminal it is redrawn at most every `interval` as counts change, and every `tick` by a
    thread of its own, so that counts a burst left undrawn show and the clock moves while nothing
    lands (a batch of slow turns sat at "0/100 ... 0.0 s" for two minutes)."""

    WIDTH = 24

    def __init__(self, stream: TextIO, *, interval: float = 0.1, tick: float = 0.5) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._interval = interval
        self._tick = tick
        self._shown_at = 0.0
        self._last: BatchProgress | None = None
        self._last_at = 0.0  # when _last came (the clock shown moves on from its elapsed)
        self._told_asking = False
        self._lock = threading.RLock()  # (the bar, and the answers written above it)
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()

    def update(self, progress: BatchProgress) -> None:
        with self._lock:
            self._last, self._last_at = progress, time.monotonic()
            if progress.asking and not self._told_asking:  # said once: a batch's turns may wait on a person
                self._told_asking = True
                self._stream.write(("\r\033[K" if self._live else "") + ASKING_HINT + "\n")
                self._stream.flush()
                self._shown_at = 0.0  # the bar again, at once
            if not self._live:
                return
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._ticking, name="progress-bar", daemon=True)
                self._ticker.start()
            if self._last_at - self._shown_at >= self._interval or progress.landed == progress.total:
                self._draw()

    def _ticking(self) -> None:
        while not self._stopped.wait(self._tick):
            with self._lock:
                if not self._stopped.is_set():
                    self._draw()

    def _draw(self) -> None:
        if self._last is None:
            return
        self._shown_at = time.monotonic()
        self._stream.write("\r\033[K" + self.text(self._now(self._last)))
        self._stream.flush()

    def _now(self, progress: BatchProgress) -> BatchProgress:
        """The counts last told, their clock moved on to now (until every prompt has landed)."""
        if progress.landed == progress.total:
            return progress
        return dataclasses.replace(progress, elapsed=progress.elapsed + time.monotonic() - self._last_at)

    @contextlib.contextmanager
    def above(self) -> Iterator[None]:
        """Lines written to the terminal meanwhile (the answers) go above the bar, not through it."""
        with self._lock:
            if self._live and self._last is not None:
                self._stream.write("\r\033[K")
                self._stream.flush()
            yield
            if self._live and self._last is not None:
                self._stream.write(self.text(self._now(self._last)))
                self._stream.flush()

    def stop(self) -> None:
        """No more redraws (the batch is over, or went wrong)."""
        self._stopped.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    def finish(self, note: str = "") -> bool:
        """Show the last counts for good, with a note; False when there were none to show."""
        self.stop()
        with self._lock:
            if self._last is None:
                return False
            text = self.text(self._now(self._last)) + (f"  {note}" if note else "")
            self._stream.write(("\r\033[K" if self._live else "") + text + "\n")
            self._stream.flush()
            return True

    @classmethod
    def text(cls, p: BatchProgress) -> str:
        filled = cls.WIDTH * p.landed // max(p.total, 1)
        bar = "#" * filled + "-" * (cls.WIDTH - filled)
        counts = f"done {p.done} · failed {p.failed} · stopped {p.stopped} · running {p.running}"
        counts += f" · waiting {p.waiting}"
        if p.asking:
            counts += f" · asking {p.asking}"
        return f"[{bar}] {p.landed}/{p.total}  {counts}  {duration(p.elapsed)}"


class _Answers:
    """A batch's answers, printed in prompt order, each as soon as it and every one before it are
    in (flushed, for a reader at the other end of a pipe); `outcomes` holds the ones in."""

    def __init__(self, prompts: list[str], numbers: list[int], bar: ProgressBar, *, as_json: bool) -> None:
        self.prompts = prompts
        self.numbers = numbers  # each prompt's index in the file (--only runs some)
        self.outcomes: list[Reply | Exception | None] = [None] * len(prompts)
        self.printed = 0
        self.run_id = "?"
        self._bar = bar
        self._as_json = as_json

    def landed(self, index: int, outcome: Reply | Exception) -> None:
        self.outcomes[index] = outcome
        ready = []
        while self.printed < len(self.outcomes) and (next_one := self.outcomes[self.printed]) is not None:
            ready.append(self._line(self.printed, next_one))
            self.printed += 1
        if ready:
            with self._bar.above():
                for line in ready:
                    _line(sys.stdout, line)
                sys.stdout.flush()

    def _line(self, index: int, outcome: Reply | Exception) -> str:
        if not self._as_json:
            return f"error: {outcome}" if isinstance(outcome, Exception) else outcome.text
        item: dict[str, Any] = {"index": self.numbers[index], "prompt": self.prompts[index]}
        if isinstance(outcome, Exception):
            item["error"] = str(outcome)
            if (code := getattr(outcome, "code", None)) is not None:
                item["code"] = int(code)
        else:
            item |= outcome.wire()
        return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def cmd_batch(args: argparse.Namespace) -> int:
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise UsageError(f"--max-concurrency must be at least 1, got {args.max_concurrency}")
    source = "stdin" if args.file == "-" else args.file
    in_file = read_prompts(_read_all(args.file), source)
    if not in_file:
        raise UsageError(f"no prompts in {source}")
    numbers = prompt_numbers(args.only, len(in_file)) if args.only else list(range(len(in_file)))
    prompts = [in_file[n] for n in numbers]
    bar = ProgressBar(sys.stderr)
    answers = _Answers(prompts, numbers, bar, as_json=args.json)
    name = f"batch {'stdin' if args.file == '-' else os.path.basename(args.file)}"
    try:
        with connect(args.socket, start=True, run=name) as daemon, _stopping(bar):
            answers.run_id = daemon.run.id if daemon.run else "?"
            daemon.agent(args.agent).batch(
                prompts,
                args.root or current_folder(),
                placement=args.placement,
                max_concurrency=args.max_concurrency,
                suppress=True,
                on_progress=bar.update,
                on_reply=answers.landed,
            )
            some_failed = any(isinstance(o, Exception) for o in answers.outcomes)
            # (the sessions of the prompts that failed: only then is the run's list read)
            ran = _run_sessions(daemon, answers.run_id) if some_failed else []
            failed = not args.suppress and some_failed
            if failed:
                daemon.close("failed")
    except KeyboardInterrupt:  # (the answers in order so far are printed already)
        unanswered = [
            numbers[n]
            for n, outcome in enumerate(answers.outcomes)
            if outcome is None or (not isinstance(outcome, Exception) and outcome.stop_reason == "cancelled")
        ]
        spans = id_spans([str(n + 1) for n in unanswered])
        which = f"prompt{'s' if len(unanswered) > 1 else ''} {spans} unanswered; "
        note = (
            f"stopped: every outstanding turn was cancelled; {which if unanswered else ''}"
            f"run {answers.run_id} recorded as stopped"
        )
        if not bar.finish(note):
            _say(f"interrupted; {note}")
        if unanswered:
            _say(f"to run {'them' if len(unanswered) > 1 else 'it'} again: {_again(args, unanswered)}")
        return EXIT_INTERRUPTED
    run_id = answers.run_id
    bar.finish(f"run {run_id} failed" if failed else f"run {run_id}")
    results = [outcome for outcome in answers.outcomes if outcome is not None]
    if not args.json:  # (JSON lines name each answer's session)
        _say(_batch_summary(results, numbers, ran, run_id))
    failures = [(numbers[i], r) for i, r in enumerate(results) if isinstance(r, Exception)]
    if failed:  # every answer is printed all the same, each failure in its place
        index, first = failures[0]
        _say(
            f"prompt {index + 1} of {len(in_file)} failed: {first} ({len(failures)} of {len(prompts)} "
            "failed, each in its place above); --suppress exits 0 when prompts fail"
        )
        if any(isinstance(r, ConnectionLost) for _, r in failures):
            _say(
                "the daemon went away during the batch; once one runs again (`sessiond serve`), "
                f"`sessiond ls --all --run {run_id}` shows how each of its sessions ended"
            )
    stopped = [
        numbers[i]
        for i, r in enumerate(results)
        if not isinstance(r, Exception) and r.stop_reason == "cancelled"
    ]
    if again := sorted([n for n, _ in failures] + stopped):
        what = " and ".join(
            f"{len(some)} {word}" for some, word in ((failures, "failed"), (stopped, "stopped")) if some
        )
        _say(f"to run the {what} again: {_again(args, again)}")
    if failed:
        return EXIT_FAILED
    return EXIT_OK


@contextlib.contextmanager
def _stopping(bar: ProgressBar) -> Iterator[None]:
    """The bar stops redrawing once the batch is over, however it ends (an error said after it
    is not drawn over)."""
    try:
        yield
    finally:
        bar.stop()


def _run_sessions(daemon: Daemon, run_id: str) -> list[str]:
    """The ids of the sessions of the run (a batch's: one a prompt); [] when they cannot be read."""
    try:
        return [s.id for s in daemon.sessions(run=run_id, include_closed=True)]
    except (SessiondError, ConnectionError):  # (the daemon went away: its failures say so)
        return []


def _batch_summary(
    results: Sequence[Reply | Exception], numbers: Sequence[int], ran: Sequence[str], run_id: str
) -> str:
    """Which sessions answered and which failed, as they did ("answered by s38, s40…s51; failed:
    prompts 2, 15 (s39, s52)"), and where to find them; `numbers`: each result's prompt's index in
    the file."""
    answered = [r.session for r in results if not isinstance(r, Exception)]
    failed = [numbers[i] + 1 for i, r in enumerate(results) if isinstance(r, Exception)]
    parts = [f"answered by {id_spans(answered)}"] if answered else []
    if failed:
        done = set(answered)
        lost = [sid for sid in ran if sid not in done]  # (the run's others: those that failed)
        prompts = f"prompt{'s' if len(failed) > 1 else ''} {names_text([str(n) for n in failed], 8)}"
        parts.append(f"failed: {prompts}" + (f" ({id_spans(lost)})" if lost else ""))
    return (
        f"{'; '.join(parts)}; closed: `sessiond ls --all --run {run_id}` lists them by prompt; "
        "`sessiond reopen S` to ask one more"
    )


# ---------------------------------------------------------------- merging


def cmd_merge(args: argparse.Namespace) -> int:
    if args.queue:
        if args.session:
            raise UsageError("give a SESSION to merge, or --queue to show the queue, not both")
        with _daemon(args) as daemon:
            entries = daemon.merges()
        if args.json:
            _emit_json(entries)
        elif entries:
            headers = ["SESSION", "STATUS", "POSITION", "BRANCH", "BASE", "GATE", "REASON"]
            rows = [
                [
                    e.session,
                    e.status,
                    "-" if e.position is None else str(e.position),
                    e.branch,
                    e.base,
                    e.gate or "-",
                    short(e.reason, 50),
                ]
                for e in entries
            ]
            _table(headers, rows)
        return EXIT_OK
    if not args.session:
        raise UsageError("give the SESSION to merge, or --queue to show the merge queue")

    def step(event: Event) -> None:
        data = event.data
        detail = data.get("command") or data.get("commit") or data.get("reason") or ""
        if data.get("position"):
            detail = f"position {data['position']}"
        _line(sys.stderr, f"merge {args.session}: {data.get('step')}{f' ({detail})' if detail else ''}")
        sys.stderr.flush()

    with _daemon(args) as daemon:
        entry = daemon.session(args.session).merge(
            strategy=args.strategy, gate=args.gate, keep=args.keep, hand_back=args.hand_back, on_step=step
        )
    if args.json:
        _emit_json([entry])
    else:
        for line in merge_outcome(entry):
            _line(sys.stdout, line)
    return EXIT_OK if entry.status == "merged" else EXIT_FAILED


# ---------------------------------------------------------------- side chats, tasks, trees


def cmd_side(args: argparse.Namespace) -> int:
    question = " ".join(args.question)
    if not question.strip():
        raise UsageError("the question is empty: nothing asked")
    with _daemon(args, start=True) as daemon:
        side = daemon.session(args.session).side(question, writable=args.writable)
        if args.close:
            side.close()
    if args.json:
        shown: dict[str, Any] = {"session": side.info.wire(), "forked": side.forked}
        if side.reply is not None:
            shown["reply"] = side.reply.wire()
        _emit_json([shown])
        return EXIT_OK
    reply = side.reply
    _line(sys.stdout, reply.text if reply is not None else "")
    how = "forked from" if side.forked else "given an account of"
    if args.close:
        _line(sys.stderr, f"side chat {side.id} ({how} {args.session}) closed")
    else:
        _line(
            sys.stderr,
            f"side chat {side.id} ({how} {args.session}); ask more with `sessiond send {side.id} ...`, "
            f"close it with `sessiond close {side.id}`",
        )
    return EXIT_OK if reply is None or reply.stop_reason == "end_turn" else EXIT_FAILED


def _task_rows(tasks: Sequence[TaskInfo]) -> list[list[str]]:
    return [
        [
            t.id,
            t.agent,
            t.status,
            t.from_session or "-",
            t.session or "-",
            short(t.title, 50),
        ]
        for t in tasks
    ]


def cmd_tasks(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        if args.action == "accept":
            tasks = [daemon.accept_task(args.task)]
        elif args.action == "dismiss":
            tasks = [daemon.dismiss_task(args.task, args.reason)]
        else:
            tasks = daemon.tasks(agent=args.agent, status=args.status)
    if args.json:
        _emit_json(tasks)
    elif args.action == "accept":
        task = tasks[0]
        where = f"in session {task.session}" if task.session else "queued until a running task ends"
        _line(sys.stdout, f"accepted {task.id} ({task.status}): {task.title}; {where}")
    elif args.action == "dismiss":
        _line(sys.stdout, f"dismissed {tasks[0].id}: {tasks[0].reason}")
    elif tasks:
        _table(["ID", "AGENT", "STATUS", "FROM", "SESSION", "TITLE"], _task_rows(tasks))
    elif args.agent is not None or args.status is not None:  # (on stderr, as `ls` says it)
        _say("no task matches; `sessiond tasks` alone lists every one")
    else:
        _say("no tasks yet; an agent suggests them as it works (its suggest_task tool)")
    return EXIT_OK


def _cost_reported(info: SessionInfo) -> bool:
    """Whether the session's agent reported a cost (codex sends none: not a cost of 0)."""
    return info.context is not None and info.context.cost is not None


def _tree_cost_reported(node: TreeNode) -> bool:
    return _cost_reported(node.session) or any(_tree_cost_reported(child) for child in node.children)


def cmd_tree(args: argparse.Namespace) -> int:
    with _daemon(args) as daemon:
        root = daemon.session(args.session).tree()
        suggested = [t for t in daemon.tasks(status=["suggested", "dismissed"]) if t.from_session is not None]
    if args.json:
        _emit_json([root])
        return EXIT_OK
    rows: list[list[str]] = []

    def walk(node: TreeNode, depth: int) -> None:
        info = node.session
        rows.append(
            [
                "  " * depth + info.id,
                info.kind,
                info.status.value,
                f"{node.tokens:,}" if node.tokens else "-",  # (none reported is not none used)
                money(node.cost) if _tree_cost_reported(node) else "-",
                short(info.title or info.recap, 50),
            ]
        )
        for task in suggested:
            if task.from_session == info.id:
                rows.append(
                    ["  " * (depth + 1) + task.id, "task", task.status, "-", "-", short(task.title, 50)]
                )
        for child in node.children:
            walk(child, depth + 1)

    walk(root, 0)
    _table(["SESSION", "KIND", "STATUS", "TOKENS", "COST", "TITLE"], rows)
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    from sessiond.client.watch import watch

    return watch(args.socket, agent=args.agent)


def cmd_acp(args: argparse.Namespace) -> int:
    from sessiond.client.acp_face import serve  # the ACP SDK loads with it, for this command alone

    return serve(agent=args.agent, placement=args.placement, root=args.root, socket=args.socket)


# ---------------------------------------------------------------- parsing


def build_parser(*, only_daemon: bool = False) -> argparse.ArgumentParser:
    """The command line; `only_daemon`: just `serve` and `stdio`, without loading the protocol's models."""
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
    serve.add_argument("--store", metavar="PATH", help="the SQLite store (default: in the state dir)")
    serve.add_argument(
        "--max-message",
        metavar="SIZE",
        help="the largest message a client may send once initialized, e.g. 16M (the default)",
    )
    serve.add_argument(
        "--keep-closed",
        metavar="AGE",
        help="remove the sessions closed longer ago than this (30d), now and every hour "
        "(default: $SESSIOND_KEEP_CLOSED, else keep them until `sessiond prune`)",
    )
    command("stdio", cmd_stdio, "relay stdin/stdout to the daemon (what editors spawn); starts one if needed")
    acp = command(
        "acp",
        cmd_acp,
        "speak ACP on stdin/stdout as an agent (what ACP editors spawn): every chat a daemon session",
    )
    acp.add_argument("--agent", default="demo", help="the daemon's agent behind it (default: demo)")
    acp.add_argument(
        "--placement", choices=PLACEMENTS, help="where new sessions' work lands (default: the agent's)"
    )
    acp.add_argument("--root", metavar="DIR", help="new sessions' directory (default: the editor's cwd)")
    if only_daemon:
        return parser
    from sessiond.protocol.enums import EventKind, SessionStatus

    command("status", cmd_status, "show the daemon's status", as_json)
    command("stop", cmd_stop, "stop the daemon (cancelling its turns) and wait until it has")
    command("agents", cmd_agents, "list agents", as_json)

    new = command("new", cmd_new, "open sessions and print their ids", as_json)
    new.add_argument("--agent", default="demo", help="agent name (default: demo)")
    new.add_argument("--root", metavar="DIR", help="the session's directory (default: the current one)")
    new.add_argument("--title", metavar="T")
    new.add_argument("--placement", choices=PLACEMENTS, help="where its work lands (default: the agent's)")
    new.add_argument(
        "--repository",
        metavar="URL",
        help="work in a worktree of this git repository, cloned where the agent runs (placement worktree)",
    )
    new.add_argument("-n", "--count", metavar="N", type=int, default=1, help="open N sessions alike")

    ls = command("ls", cmd_ls, "list sessions (open ones, unless --all)", as_json)
    ls.add_argument("--agent", metavar="A", help="only this agent's sessions")
    ls.add_argument(
        "--status",
        metavar="S",
        nargs="+",
        choices=[s.value for s in SessionStatus],
        help="only in these states",
    )
    ls.add_argument("--all", action="store_true", help="closed sessions too")
    ls.add_argument(
        "--kind",
        metavar="K",
        nargs="+",
        choices=["main", "side", "task", "thread"],
        help="only these kinds: main, side (side chats), task (accepted tasks), thread",
    )
    ls.add_argument("--run", metavar="ID", help="only the sessions of this run")

    show = command(
        "show", cmd_show, "show one session: plan, context, changed files, recap, transcript tail", as_json
    )
    show.add_argument("session", metavar="SESSION")
    show.add_argument("--lines", metavar="N", type=int, default=20, help="transcript lines (default 20)")

    rename = command(
        "rename", cmd_rename, "name a session: its first prompt and its agent name it no more", as_json
    )
    rename.add_argument("session", metavar="SESSION")
    rename.add_argument("title", metavar="TITLE", nargs="+", help="its new title (the words are joined)")
    mode = command("mode", cmd_mode, "list a session's modes, or choose one", as_json)
    mode.add_argument("session", metavar="SESSION")
    mode.add_argument("mode", metavar="MODE", nargs="?", help="the mode to choose (none: list them)")
    option = command(
        "option", cmd_option, "list a session's config options (the model, say), or set one", as_json
    )
    option.add_argument("session", metavar="SESSION")
    option.add_argument("config_id", metavar="ID", nargs="?", help="the option's id (none: list them)")
    option.add_argument("value", metavar="VALUE", nargs="?", help="its new value (true/false for a switch)")

    watch = command("watch", cmd_watch, "a live view of every session (q quits)")
    watch.add_argument("--agent", metavar="A", help="only this agent's sessions")

    trace = command(
        "trace",
        cmd_trace,
        "print the event log as JSON lines, from --since to the newest event, then exit; "
        "or draw it: --html FILE (a timeline page), --format perfetto",
    )
    trace.add_argument("--session", metavar="S", action="append", help="only this session's (repeatable)")
    trace.add_argument("--agent", metavar="A", action="append", help="only this agent's (repeatable)")
    trace.add_argument(
        "--kind",
        metavar="K",
        action="append",
        choices=[k.value for k in EventKind],
        help="only events of this kind (repeatable)",
    )
    trace.add_argument("--since", metavar="N", type=int, default=0, help="after this seq (default 0: all)")
    trace.add_argument("--run", metavar="ID", help="only the sessions of this run")
    trace.add_argument("--follow", action="store_true", help="keep printing new events until Ctrl-C")
    trace.add_argument(
        "--html", metavar="FILE", help="write the selection's timeline as one self-contained HTML page"
    )
    trace.add_argument(
        "--open", action="store_true", help="open the page in a browser (a temp file without --html)"
    )
    trace.add_argument(
        "--format",
        choices=["jsonl", "perfetto"],
        default="jsonl",
        help="jsonl (the default): one event a line; perfetto: Chrome trace-event JSON for ui.perfetto.dev",
    )
    trace.add_argument(
        "--output", metavar="FILE", help="with --format perfetto: write it here, not to stdout"
    )
    trace.add_argument(
        "--chunks", action="store_true", help="with --format perfetto: reply chunks as instant events"
    )
    trace.add_argument("--last", metavar="DURATION", help="only what happened in the last 90s, 15m, 1h, 2d")

    runs = command(
        "runs",
        cmd_runs,
        "list runs, or show one: wall time beside serial time; --html draws its timeline",
        as_json,
    )
    runs.add_argument("run", metavar="ID", nargs="?")
    runs.add_argument(
        "--html",
        metavar="FILE",
        help="write the run's timeline (the latest run's without ID) as one HTML page",
    )
    runs.add_argument(
        "--open", action="store_true", help="open the page in a browser (a temp file without --html)"
    )

    command("fleet", cmd_fleet, "every session at a glance: counts, attention, cost, time", as_json)

    batch = command(
        "batch",
        cmd_batch,
        "run one prompt per line (or JSON lines with a prompt), a session apiece; answers in order",
        as_json,
    )
    batch.add_argument("file", metavar="FILE", help="the prompts, or - for stdin")
    batch.add_argument("--agent", default="demo", help="agent name (default: demo)")
    batch.add_argument("--root", metavar="DIR", help="the sessions' directory (default: the current one)")
    batch.add_argument("--placement", choices=PLACEMENTS, help="where each session's work lands")
    batch.add_argument("--max-concurrency", metavar="N", type=int, help="turns at once (default: all)")
    batch.add_argument(
        "--suppress",
        action="store_true",
        help="exit 0 when prompts fail (each is printed in its place)",
    )
    batch.add_argument(
        "--only",
        metavar="N",
        help="run only these prompts, by number from 1: 2-5,9 (a batch that failed or was stopped "
        "prints the command that runs the rest again); --json keeps each one's index in the file",
    )

    merge = command(
        "merge", cmd_merge, "merge a worktree session into its base and wait for the outcome", as_json
    )
    merge.add_argument("session", metavar="SESSION", nargs="?")
    merge.add_argument("--queue", action="store_true", help="show the merge queue instead")
    merge.add_argument("--strategy", choices=["merge", "rebase"], default="merge")
    merge.add_argument("--gate", metavar="CMD", help="a shell command that must pass on the merged result")
    merge.add_argument("--keep", action="store_true", help="keep the worktree and branch after merging")
    merge.add_argument(
        "--hand-back", action="store_true", help="on a conflict or failed gate, send it to the session"
    )

    side = command("side", cmd_side, "ask a question beside a session, leaving it untouched", as_json)
    side.add_argument("session", metavar="SESSION")
    side.add_argument("question", metavar="QUESTION", nargs="+")
    side.add_argument("--writable", action="store_true", help="let the side chat write files")
    side.add_argument("--close", action="store_true", help="close the side chat after the answer")

    tasks = command("tasks", cmd_tasks, "suggested tasks: list, accept, dismiss", as_json)
    tasks.set_defaults(action=None)
    tasks.add_argument("--agent", metavar="A", help="only this agent's inbox")
    tasks.add_argument(
        "--status",
        metavar="S",
        nargs="+",
        choices=["suggested", "queued", "running", "done", "failed", "dismissed"],
        help="only in these states",
    )
    task_actions = tasks.add_subparsers(dest="action", metavar="ACTION")
    accept = task_actions.add_parser("accept", help="run a suggested task", parents=[common, as_json])
    accept.add_argument("task", metavar="ID")
    dismiss = task_actions.add_parser("dismiss", help="dismiss a suggested task", parents=[common, as_json])
    dismiss.add_argument("task", metavar="ID")
    dismiss.add_argument("--reason", metavar="R", required=True, help="why")

    tree = command("tree", cmd_tree, "a session with its side chats, tasks and threads", as_json)
    tree.add_argument("session", metavar="SESSION")

    send = command("send", cmd_send, "run a turn, printing the reply as it arrives", as_json)
    send.add_argument("session", metavar="SESSION")
    send.add_argument(
        "prompt",
        metavar="PROMPT",
        nargs="+",
        help="what to ask (the words are joined); - reads it from stdin: `sessiond send S - < prompt.txt`",
    )

    permissions = command(
        "permissions", cmd_permissions, "the agents' permission requests waiting for an answer", as_json
    )
    permissions.add_argument("session", metavar="SESSION", nargs="?", help="only this session's")
    for verb in ("allow", "reject"):
        answer = command(
            verb,
            cmd_answer,
            f"{verb} what an agent asks permission for (a request, or a session's one)",
            as_json,
        )
        answer.add_argument("target", metavar="PERMISSION|SESSION")
        answer.add_argument("--always", action="store_true", help=f"{verb} always (when the agent offers it)")

    prune = command(
        "prune",
        cmd_prune,
        "remove the sessions closed before a time from the store, with their transcripts",
        as_json,
    )
    prune.add_argument(
        "before",
        metavar="AGE|DATE",
        help="closed longer ago than this (30d, 12h, 2w) or before this date (2026-11-01)",
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    prune.add_argument("--yes", action="store_true", help="remove without asking (for scripts)")
    compact = command(
        "compact", cmd_compact, "give the store's free space back to the filesystem (with the daemon stopped)"
    )
    compact.add_argument("--store", metavar="PATH", help="the SQLite store (default: in the state dir)")

    for name, handler, text in [
        ("cancel", cmd_cancel, "stop a session's running and queued turns"),
        ("close", cmd_close, "close a session"),
        ("reopen", cmd_reopen, "open a closed session again, as it was; its agent restores the conversation"),
    ]:
        command(name, handler, text, as_json).add_argument("session", metavar="SESSION")
    return parser


# The ids a command line names, and what is said when one is given empty (`sessiond show ''`).
NEEDED_IDS = {
    "session": "a session id is needed",
    "target": "a permission id or a session id is needed",
    "task": "a task id is needed",
}


def _check_ids(args: argparse.Namespace) -> None:
    """An id given empty is said in the command line's words, before the daemon is asked."""
    for field, needed in NEEDED_IDS.items():
        given = getattr(args, field, None)
        values = given if isinstance(given, list) else [given]
        if any(value is not None and not value.strip() for value in values):
            raise UsageError(needed)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on a command line (the first word that is not an option or its value)."""
    words = iter(argv)
    for word in words:
        if word == "--socket":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(only_daemon=_command_of(argv) in ("serve", "stdio")).parse_args(argv)
    try:
        _check_ids(args)
        return int(args.handler(args))
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except (UsageError, InvalidParams, ValueError) as e:
        _say(str(e))
        return EXIT_USAGE
    except SessiondError as e:
        _say(sentence(e))
        return EXIT_FAILED
    except (DaemonNotRunning, DaemonStartFailed, ConnectionLost, ProtocolError) as e:
        _say(str(e))
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not worth a traceback, nor a
        # second one when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except FolderGone as e:
        _say(str(e))
        return EXIT_USAGE
    except OSError as e:  # the socket is there but refuses us (permissions, not a socket, ...)
        _say(f"cannot reach the daemon: {e}")
        return EXIT_FAILED
