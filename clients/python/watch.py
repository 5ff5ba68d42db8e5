"""``sessiond watch``: a live terminal view of every session.

One row per open session: status, plan progress, context fill, changed
files, and the last line it said, kept current from the event log (a
subscription with a snapshot, then its events), redrawn in place with curses.
Keys step between the sessions that are working now and open one (the view
of ``sessiond show``, kept current too), and answer what the selected one's
agent asks permission for (``a`` allow, ``r`` reject); ``q`` quits.

``WatchModel`` is the state and its event handling, with no terminal: the
tests drive it directly. ``watch`` runs it under curses.
"""

from __future__ import annotations

import asyncio
import contextlib
import curses
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from sessiond.client.aio import AsyncDaemon, AsyncEventStream, StrPath, aconnect
from sessiond.client.errors import ConnectionLost, SessiondError
from sessiond.client.wording import (
    LAST_LEAST,
    TITLE_LEAST,
    asked_text,
    cells,
    columns_that_fit,
    context_cell,
    files_cell,
    fleet_line,
    money,
    option_of,
    options_text,
    pad,
    plan_cell,
    resting_line,
    short,
    show_lines,
    title_cells,
    title_text,
)
from sessiond.protocol.models import (
    Attention,
    Changes,
    ContextFill,
    Event,
    EventKind,
    Fleet,
    PermissionRequestParams,
    Plan,
    SessionInfo,
    SessionStatus,
    SessionUsage,
    Snapshot,
    Transcript,
    TranscriptLine,
    tool_line,
)

KEYS = ("j/k move", "n/p next/prev working", "enter open", "esc back", "q quit")
KEYS_HELP = " · ".join(KEYS)
# On a narrow terminal the keys said go in this order: `q quit` stays.
KEYS_DROPPED_FIRST = ("n/p next/prev working", "esc back", "j/k move", "enter open")
# The keys that answer a permission request, and the kind of option each picks.
ANSWER_KEYS = {"a": "allow_once", "A": "allow_always", "r": "reject_once", "R": "reject_always"}
KEY_WORDS = {
    "allow_once": "allow",
    "allow_always": "always",
    "reject_once": "reject",
    "reject_always": "never",
}
REDRAW_INTERVAL = 0.1  # at most ten frames a second
NOTICE_SECONDS = 5.0  # what an answer key did stays this long on the bottom line (or until a key)
TRANSCRIPT_LINES = 200
TITLE_WIDTH = 18  # a longer title ends in "…" (with no terminal's width to fit)
# The list's columns after the marks, in order, with their cells (None: the title's, as wide as the
# terminal lets it be); LAST LINE comes after them and takes the rest of the line.
COLUMNS: dict[str, int | None] = {
    "SESSION": 8,
    "TITLE": None,
    "AGENT": 10,
    "STATUS": 9,
    "PLAN": 5,
    "CTX": 5,
    "FILES": 12,
}
RIGHT_ALIGNED = ("PLAN", "CTX", "FILES")
# What a narrow terminal does without first, in this order; the session, title, status and last
# line stay.
DROPPED_FIRST = ("FILES", "AGENT", "CTX", "PLAN")
MARK_CELLS = 2  # ">" when selected, "!" when it needs attention
AT_WORK = (SessionStatus.WORKING, SessionStatus.NEEDS_YOU)  # a turn of theirs is on

STATUS_LABELS = {
    SessionStatus.IDLE: "idle",
    SessionStatus.QUEUED: "queued",
    SessionStatus.WORKING: "working",
    SessionStatus.NEEDS_YOU: "NEEDS YOU",
    SessionStatus.FAILED: "failed",
    SessionStatus.STOPPED: "stopped",
    SessionStatus.CLOSED: "closed",
}


@dataclass(frozen=True)
class Layout:
    """The list's columns at a terminal's width: those shown, and the title's cells."""

    title: int = TITLE_WIDTH
    shown: tuple[str, ...] = tuple(COLUMNS)

    @classmethod
    def fit(cls, width: int, titles: Iterable[str]) -> Layout:
        """The columns for `width` cells: the least important go while the title and the last line
        would have too little room; the title takes what its longest needs, up to a third of what
        is left (the last line the rest)."""
        spaced = {name: size + 1 for name, size in COLUMNS.items() if size is not None}  # (a space after)
        least = MARK_CELLS + TITLE_LEAST + 1 + 1 + LAST_LEAST  # (two spaces before the last line)
        shown = columns_that_fit(spaced, width - least, DROPPED_FIRST)
        room = width - MARK_CELLS - sum(spaced[name] for name in shown) - 1 - 1
        longest = max((cells(title) for title in titles), default=0)
        title = title_cells(room, longest)
        shown.append("TITLE")
        return cls(max(title, len("TITLE")), tuple(name for name in COLUMNS if name in shown))

    def line(self, marks: str, texts: Mapping[str, str], last: str) -> str:
        """A row (or the header) in these columns: `texts` by column, then the last line."""
        shown = []
        for name in self.shown:
            text = texts[name]
            if name == "SESSION":  # (an id is never cut)
                shown.append(text.ljust(COLUMNS[name] or 0))
            else:
                shown.append(pad(text, COLUMNS[name] or self.title, right=name in RIGHT_ALIGNED))
        return f"{marks}{' '.join(shown)}  {last}"


def keys_help(width: int | None = None) -> str:
    """The keys, as many as fit in `width` cells: `q quit` always."""
    keys = list(KEYS)
    for key in KEYS_DROPPED_FIRST:
        if width is None or cells(" · ".join(keys)) <= width:
            break
        keys.remove(key)
    return " · ".join(keys)


def _resting_line(info: SessionInfo) -> str:
    return resting_line(info.status, info.last_error, info.recap)


def _this_turn(transcript: Transcript) -> list[TranscriptLine]:
    """The lines of a transcript's last turn: those after its last prompt (all of them when the
    prompt is further back than the lines read)."""
    prompts = [i for i, line in enumerate(transcript.lines) if line.role == "user"]
    return transcript.lines[prompts[-1] + 1 :] if prompts else transcript.lines


class WatchModel:
    """What the view shows: the open sessions in the order they were opened, the fleet,
    each session's last line, which one is selected, and whether one is open."""

    def __init__(self, agent: str | None = None) -> None:
        self.agent = agent
        self.sessions: dict[str, SessionInfo] = {}
        self.last_line: dict[str, str] = {}
        self.line_turn: dict[str, str | None] = {}  # the turn whose reply the last line is of
        # A working session's tool call under way, when it has said nothing since: "[edit] Write a.py".
        self.acting: dict[str, str] = {}
        self.acting_call: dict[str, str | None] = {}  # the tool call that line is of
        self.fleet: Fleet | None = None
        self.head = 0
        self.selected: str | None = None
        self.opened: str | None = None  # the session whose view is shown, if any
        self.transcript: Transcript | None = None
        self.scroll = 0  # first line shown of the open view
        self.missing: set[str] = set()  # sessions heard of and not yet read (session/get)
        # Those being read, and those of them an event came for meanwhile: the answer may have been
        # made before that event (a turn cancelled as it started read "working" for good), so they
        # are read again.
        self.reading: set[str] = set()
        self.heard_while_reading: set[str] = set()
        self.tails: set[str] = set()  # working sessions whose reply so far was said before we looked
        self.transcript_stale = False
        # The permission requests waiting, by session, oldest first (from permission/list, then
        # kept by events); read again after a resync. The answers chosen, for the loop to send.
        self.asks: dict[str, list[PermissionRequestParams]] = {}
        self.asks_stale = True
        self.answers: list[tuple[str, str]] = []  # (permission, option id)
        self.notice = ""  # what the last answer key did, until the next key or NOTICE_SECONDS
        self.notice_until = 0.0  # (time.monotonic)
        self.lost: str | None = None  # why the daemon is not there, while it is not (rows as it left them)
        self.changed = True

    # ------------------------------------------------------------ state

    def load(self, snapshot: Snapshot) -> None:
        """Start over from a snapshot (at subscription, or after a resync)."""
        self.sessions = {s.id: s for s in snapshot.sessions if s.status is not SessionStatus.CLOSED}
        self.fleet = snapshot.fleet
        self.head = snapshot.head
        # After a resync or a new daemon, each last line is what the daemon says now, never what was
        # shown before (a turn may have ended, and another begun, while nobody watched).
        self.line_turn = {}
        for session in self.sessions.values():
            if session.status in AT_WORK:
                self.last_line[session.id] = ""  # its recap is the last turn's: read its tail
                self.tails.add(session.id)
            else:
                self.last_line[session.id] = _resting_line(session)
        self._keep_selection()
        self.transcript_stale = self.opened is not None
        self.asks_stale = True
        self.notice = ""  # (of the daemon before, or before the resync)
        self.changed = True

    def waiting(self, asks: list[PermissionRequestParams]) -> None:
        """The requests waiting now (permission/list), replacing what was known."""
        self.asks_stale = False
        self.asks = {}
        for asked in asks:
            self.asks.setdefault(asked.session, []).append(asked)
        self.changed = True

    def read(self) -> set[str]:
        """The sessions to read now (those heard of by events alone); `done_reading` after."""
        self.reading, self.missing = self.missing, set()
        return set(self.reading)

    def done_reading(self) -> None:
        """What was read is added; a session an event came for meanwhile is read again."""
        self.missing |= self.heard_while_reading
        self.reading, self.heard_while_reading = set(), set()

    def add(self, info: SessionInfo) -> None:
        """A session read with session/get (after its ``session.opened``, or to catch up)."""
        self.missing.discard(info.id)
        if info.status is SessionStatus.CLOSED or (self.agent and info.agent != self.agent):
            return
        known = info.id in self.sessions
        self.sessions[info.id] = info
        if not known:
            self.sessions = dict(sorted(self.sessions.items(), key=lambda item: item[1].created_at))
        if not self.last_line.get(info.id):
            self.last_line[info.id] = _resting_line(info)
        self._keep_selection()
        self.changed = True

    def apply(self, event: Event) -> None:
        """Bring the state forward by one event."""
        self.head = max(self.head, event.seq)
        kind, data, sid = event.kind, event.data, event.session
        if kind is EventKind.FLEET:
            with contextlib.suppress(ValidationError):
                self.fleet = Fleet.model_validate(data)
                self.changed = True
            return
        if sid is None:
            return
        if kind is EventKind.SESSION_OPENED:
            if sid not in self.sessions and (self.agent is None or event.agent == self.agent):
                self.missing.add(sid)
            return
        if kind is EventKind.SESSION_REOPENED:
            with contextlib.suppress(ValidationError):
                self.add(SessionInfo.model_validate(data.get("info")))  # as it was, open again
            return
        if kind is EventKind.SESSION_CLOSED:
            self.sessions.pop(sid, None)
            self.last_line.pop(sid, None)
            self.line_turn.pop(sid, None)
            self._stop_acting(sid)
            self.asks.pop(sid, None)
            self._keep_selection()
            self.changed = True
            return
        info = self.sessions.get(sid)
        if info is None:
            if sid in self.reading:
                self.heard_while_reading.add(sid)
            return
        try:
            self._apply_to(info, event)
        except (ValidationError, ValueError, TypeError):
            self.missing.add(sid)  # something this client cannot read: read the session again
        if sid == self.opened and kind in (EventKind.TURN_CHUNK, EventKind.TURN_ENDED, EventKind.TURN_QUEUED):
            self.transcript_stale = True
        self.changed = True

    def tail(self, session: str, transcript: Transcript) -> None:
        """What a working session said or did before we looked: the last line of its transcript,
        and the tool call it made last if it said nothing after it."""
        self.tails.discard(session)
        lines = [line for line in _this_turn(transcript) if line.role in ("agent", "tool")]
        lines = [line for line in lines if line.text.strip()]
        said = [line for line in lines if line.role == "agent"]
        if said and not self.last_line.get(session):
            self.last_line[session] = said[-1].text
            self.line_turn[session] = said[-1].turn
            self.changed = True
        if lines and lines[-1].role == "tool" and session not in self.acting:
            self.acting[session] = lines[-1].text.strip()
            self.changed = True

    def _apply_to(self, info: SessionInfo, event: Event) -> None:
        kind, data, at, turn = event.kind, event.data, event.time, event.turn
        if kind is EventKind.SESSION_STATUS:
            status = SessionStatus(data["status"])
            if status is SessionStatus.CLOSED:
                self.sessions.pop(info.id, None)
                self._keep_selection()
                return
            info.status = status
            since = data.get("since")
            info.status_since = datetime.fromtimestamp(since, UTC) if isinstance(since, int | float) else at
        elif kind is EventKind.SESSION_TITLED:
            info.title = data.get("title") or info.title
        elif kind is EventKind.SESSION_PLAN:
            plan = data.get("plan")
            info.plan = Plan.model_validate(plan) if plan is not None else None
        elif kind is EventKind.SESSION_USAGE:
            if data.get("context") is not None:
                info.context = ContextFill.model_validate(data["context"])
            if data.get("usage") is not None:
                info.usage = SessionUsage.model_validate(data["usage"])
        elif kind is EventKind.SESSION_CHANGES:
            changes = data.get("changes")
            info.changes = Changes.model_validate(changes) if changes is not None else None
        elif kind is EventKind.SESSION_ATTENTION:
            info.attention = [Attention(a) for a in data.get("attention", [])]
        elif kind is EventKind.TURN_STARTED:
            self._new_line(info.id, turn)
            self._stop_acting(info.id)
            info.queued_turns = max(info.queued_turns - 1, 0)
        elif kind is EventKind.TURN_QUEUED:
            info.queued_turns += 1
        elif kind is EventKind.TURN_TOOL:
            # Its later updates retitle it: some agents name a call by its tool first ("Terminal").
            call = data.get("toolCallId")
            if data.get("title") and (data.get("first") or self.acting_call.get(info.id) == call):
                self.acting[info.id] = tool_line(data.get("toolKind"), str(data["title"]))
                self.acting_call[info.id] = call
        elif kind is EventKind.TURN_CHUNK:
            self._stop_acting(info.id)
            if self.line_turn.get(info.id) != turn:  # a turn whose start was not seen (before we looked)
                self._new_line(info.id, turn)
            text = self.last_line.get(info.id, "") + str(data.get("text", ""))
            self.last_line[info.id] = text[-2000:]
        elif kind is EventKind.TURN_ENDED:
            self._stop_acting(info.id)
            info.turns += 1
            if data.get("error"):
                self.last_line[info.id] = f"error: {data['error']}"
                info.last_error = str(data["error"])
            elif data.get("stopReason"):
                info.last_stop_reason = data["stopReason"]
            reply = self.last_line.get(info.id, "")
            first = next((line for line in reply.splitlines() if line.strip()), "")
            if first and not data.get("error"):
                info.recap = first
            elif not reply:
                self.missing.add(info.id)  # its reply was said before we looked: read its recap
        elif kind is EventKind.PERMISSION_ASKED:
            asked = PermissionRequestParams(
                permission=data["permission"],
                agent=info.agent,
                session=info.id,
                turn=data.get("turn"),
                tool_call=data.get("toolCall") or {},
                options=data.get("options") or [],
            )
            # Its row shows the question until it is answered, then what it was doing again (the
            # tool call asked about, under way once allowed).
            waiting = self.asks.setdefault(info.id, [])
            if all(a.permission != asked.permission for a in waiting):
                waiting.append(asked)
        elif kind is EventKind.PERMISSION_ANSWERED:
            waiting = [a for a in self.asks.get(info.id, []) if a.permission != data.get("permission")]
            if waiting:
                self.asks[info.id] = waiting
            else:
                self.asks.pop(info.id, None)

    def _new_line(self, session: str, turn: str | None) -> None:
        """A turn's reply starts the session's last line afresh."""
        self.last_line[session] = ""
        self.line_turn[session] = turn

    def _stop_acting(self, session: str) -> None:
        self.acting.pop(session, None)
        self.acting_call.pop(session, None)

    # ------------------------------------------------------------ answering

    def asked_here(self) -> PermissionRequestParams | None:
        """The oldest request of the session open, or else selected, if it waits on one."""
        waiting = self.asks.get(self.opened or self.selected or "")
        return waiting[0] if waiting else None

    def answer(self, kind: str) -> None:
        """Answer the request here with its option of `kind`; the notice says what happened."""
        asked = self.asked_here()
        if asked is None:
            self.say(f"{self.opened or self.selected or 'no session'} asks nothing now")
        elif (option := option_of(asked.options, kind)) is None:
            self.say(f"the agent offers no {kind} answer here: it offers {options_text(asked.options)}")
        else:
            self.answers.append((asked.permission, str(option.get("optionId"))))
            chosen = option.get("name") or option.get("optionId")
            self.say(f"{asked.session}: {chosen}: {asked_text(asked.tool_call)}")

    def say(self, notice: str, now: float | None = None) -> None:
        """Show `notice` on the bottom line for NOTICE_SECONDS (from `now`, a time.monotonic)."""
        self.notice = notice
        self.notice_until = (time.monotonic() if now is None else now) + NOTICE_SECONDS
        self.changed = True

    def expire(self, now: float) -> float | None:
        """Take the notice away once its time is up; the seconds it has left, None without one."""
        if self.notice and now >= self.notice_until:
            self.notice = ""
            self.changed = True
        return self.notice_until - now if self.notice else None

    def footer(self, width: int | None = None) -> str:
        """The bottom line: what the last answer key did, or the question here with the keys that
        answer it, or the keys that fit in `width` (after what the selected session's "!" stands
        for, when it has one)."""
        if self.notice:
            return self.notice
        asked = self.asked_here()
        if asked is None:
            info = self.sessions.get(self.selected or "")
            if info is not None and info.attention:
                flagged = f"{info.id} ! {', '.join(a.value for a in info.attention)} · "
                return flagged + keys_help(None if width is None else width - cells(flagged))
            return keys_help(width)
        offered = {str(o.get("kind")) for o in asked.options}
        keys = " · ".join(f"{key} {KEY_WORDS[kind]}" for key, kind in ANSWER_KEYS.items() if kind in offered)
        # The keys first: a long question (a whole shell command) runs off the edge, they do not.
        return f"{asked.session} asks ({keys or 'no option to pick here'}): {asked_text(asked.tool_call)}"

    # ------------------------------------------------------------ selection

    def rows(self) -> list[SessionInfo]:
        return list(self.sessions.values())

    def working(self) -> list[str]:
        """The sessions working now (or needing you), in the listing's order."""
        busy = (SessionStatus.WORKING, SessionStatus.NEEDS_YOU)
        return [s.id for s in self.sessions.values() if s.status in busy]

    def move(self, step: int) -> None:
        ids = list(self.sessions)
        if not ids:
            return
        index = ids.index(self.selected) if self.selected in ids else 0
        self.selected = ids[max(0, min(len(ids) - 1, index + step))]
        self.changed = True

    def step_working(self, step: int) -> None:
        """Select the next (or previous) working session after the selected one, wrapping."""
        ids = list(self.sessions)
        working = set(self.working())
        if not working:
            return
        start = ids.index(self.selected) if self.selected in ids else -1 if step > 0 else 0
        for offset in range(1, len(ids) + 1):
            candidate = ids[(start + step * offset) % len(ids)]
            if candidate in working:
                self.selected = candidate
                break
        if self.opened is not None:
            self.open()
        self.changed = True

    def open(self) -> None:
        if self.selected in self.sessions:
            self.opened = self.selected
            self.transcript = None
            self.transcript_stale = True
            self.scroll = 0
            self.changed = True

    def back(self) -> None:
        self.opened = None
        self.transcript = None
        self.changed = True

    def _keep_selection(self) -> None:
        if self.selected not in self.sessions:
            self.selected = next(iter(self.sessions), None)
        if self.opened is not None and self.opened not in self.sessions:
            self.back()

    # ------------------------------------------------------------ text

    def header(self) -> str:
        if self.lost is not None:
            return f"sessiond watch  {self.lost}"
        fleet = fleet_line(self.fleet) if self.fleet else f"{len(self.sessions)} open"
        if self.fleet is not None and self.fleet.cost:  # (0: none reported, or a cost of 0)
            fleet += f" · {money(self.fleet.cost)}"
        if self.agent is not None and self.fleet is not None:  # (the fleet is every agent's)
            fleet = f"agent {self.agent}: {len(self.sessions)} open · all agents: {fleet}"
        # Where the selected one is among those of its status, named as the fleet counts them
        # ("1 needs you" beside "[working 1 of 1]" read as a count disagreeing with itself).
        selected = self.sessions.get(self.selected or "")
        where = ""
        if selected is not None and selected.status in AT_WORK:
            alike = [s.id for s in self.sessions.values() if s.status is selected.status]
            label = STATUS_LABELS[selected.status].lower()
            where = f"  [{label} {alike.index(selected.id) + 1} of {len(alike)}]"
        return f"sessiond watch  {fleet}{where}"

    def empty_text(self) -> str:
        """What the list says with no session in it."""
        if self.agent is not None:
            return (
                f"no open sessions of agent {self.agent} (`sessiond agents` lists the agents; "
                "`sessiond watch` watches them all)"
            )
        return "no open sessions (open one with `sessiond new`)"

    def row(self, info: SessionInfo, layout: Layout | None = None) -> str:
        """A session's row, in `layout`'s columns (by default, each as wide as with no terminal)."""
        layout = layout or Layout()
        plan = plan_cell(info.plan.done, info.plan.total) if info.plan else "-"
        context = "-"
        if (fill := info.context) is not None:
            context = context_cell(fill.used, fill.size, fill.percent, estimated=fill.estimated)
        files = "-"
        if (changes := info.changes) is not None:
            files = files_cell(len(changes.files), changes.added, changes.removed)
        # A turn at work shows the tool call it is making, or what it has said (or its plan's
        # step), not the last turn's recap.
        at_work = info.status in AT_WORK
        said = (
            (at_work and self.acting.get(info.id))
            or self.last_line.get(info.id)
            or ("" if at_work else _resting_line(info))
        )
        if asks := self.asks.get(info.id):  # what it waits on comes first
            said = f"asks: {asked_text(asks[0].tool_call)}"
        lines = [line for line in said.splitlines() if line.strip()]
        last = " ".join((lines[-1] if lines else "").split())
        if not last and info.plan is not None and info.plan.current:
            last = f"({info.plan.current})"
        mark = ">" if info.id == self.selected else " "
        flags = "!" if info.attention else " "
        texts = {
            "SESSION": info.id,
            "TITLE": short(self._title(info), layout.title) or "-",
            "AGENT": info.agent,
            "STATUS": STATUS_LABELS.get(info.status, info.status.value),
            "PLAN": plan,
            "CTX": context,
            "FILES": files,
        }
        return layout.line(mark + flags, texts, last)

    @staticmethod
    def _title(info: SessionInfo) -> str:
        return title_text(info.title, info.kind, info.parent)

    def layout(self, width: int) -> Layout:
        """The list's columns at a terminal `width` cells wide, fit to the titles shown."""
        return Layout.fit(width, (self._title(info) for info in self.sessions.values()))

    @staticmethod
    def columns(layout: Layout | None = None) -> str:
        """The list's header line."""
        return (layout or Layout()).line(" " * MARK_CELLS, {name: name for name in COLUMNS}, "LAST LINE")

    def detail(self, height: int | None = None) -> list[str]:
        """The open session as ``sessiond show`` shows it; within ``height`` lines, the
        transcript keeps its newest lines (the rest can be scrolled to)."""
        info = self.sessions.get(self.opened or "")
        if info is None:
            return []
        transcript = self.transcript
        if height is not None and transcript is not None and transcript.lines:
            room = height - len(show_lines(info, None)) - 2  # a blank line and the title
            keep = max(room, 1)
            if keep < len(transcript.lines):
                transcript = transcript.model_copy(update={"lines": transcript.lines[-keep:]})
        return show_lines(info, transcript, self.asks.get(info.id, ()))


# ---------------------------------------------------------------- the terminal


class _Screen:
    """Draws the model with curses."""

    def __init__(self, window: Any) -> None:
        self.window = window
        self.bold = curses.A_BOLD
        self.reverse = curses.A_REVERSE
        self.warn = curses.A_BOLD
        self.dirty = True  # redraw even if nothing in the model changed (a new size)
        with contextlib.suppress(curses.error):
            curses.curs_set(0)
        with contextlib.suppress(curses.error):
            if curses.has_colors():
                curses.start_color()
                curses.use_default_colors()
                curses.init_pair(1, curses.COLOR_YELLOW, -1)
                curses.init_pair(2, curses.COLOR_RED, -1)
                curses.init_pair(3, curses.COLOR_GREEN, -1)
                self.warn = curses.color_pair(1) | curses.A_BOLD

    def resized(self) -> None:
        """Tell curses the terminal's size now."""
        with contextlib.suppress(OSError, curses.error):
            size = os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ else 1)
            if (size.lines, size.columns) != self.window.getmaxyx():
                curses.resizeterm(size.lines, size.columns)
                self.window.clear()  # the terminal may have cleared itself: repaint every cell
        self.dirty = True

    def draw(self, model: WatchModel) -> None:
        window = self.window
        window.erase()
        height, width = window.getmaxyx()
        self._put(0, model.header(), width, self.bold)
        if model.opened is not None:
            body = height - 2
            lines = model.detail(body)
            model.scroll = max(0, min(model.scroll, len(lines) - body))
            for y, line in enumerate(lines[model.scroll : model.scroll + body], start=1):
                self._put(y, line, width)
        else:
            layout = model.layout(width - 1)  # (the last cell of a line is left alone)
            self._put(1, model.columns(layout), width, self.bold)
            rows = model.rows()
            body = height - 3
            index = next((i for i, s in enumerate(rows) if s.id == model.selected), 0)
            top = max(0, index - body + 1)
            for y, info in enumerate(rows[top : top + body], start=2):
                attribute = 0
                if info.status is SessionStatus.NEEDS_YOU:
                    attribute = self.warn
                elif info.status is SessionStatus.WORKING:
                    attribute = self.bold
                if info.id == model.selected:
                    attribute |= self.reverse
                self._put(y, model.row(info, layout), width, attribute)
            if not rows:
                self._put(2, model.empty_text(), width)
        footer = model.footer(width - 1)
        self._put(height - 1, footer, width, curses.A_DIM if footer == keys_help(width - 1) else self.warn)
        window.noutrefresh()
        curses.doupdate()

    def _put(self, y: int, text: str, width: int, attribute: int = 0) -> None:
        height, _ = self.window.getmaxyx()
        if 0 <= y < height and width > 1:
            with contextlib.suppress(curses.error):  # the bottom-right cell cannot be written
                self.window.addstr(y, 0, pad(text, width - 1), attribute)


def handle_key(model: WatchModel, key: int) -> bool:
    """Apply a key press; False when it asks to quit.

    In the list, j/k (or the arrows) move and page keys move by ten; in an open
    session they scroll. n/Tab and p/Shift-Tab step between the working sessions,
    Enter opens the selected one, Esc goes back, q quits. a/A allow (once/always) and
    r/R reject (once/always) what the open or selected session's agent asks permission for.
    """
    if key in (ord("q"), ord("Q")):
        return False
    if model.notice:
        model.notice = ""
        model.changed = True
    answering = ANSWER_KEYS.get(chr(key)) if 0 <= key < 128 else None
    if answering is not None:
        model.answer(answering)
        return True
    steps = {
        ord("j"): 1,
        curses.KEY_DOWN: 1,
        ord("k"): -1,
        curses.KEY_UP: -1,
        curses.KEY_NPAGE: 10,
        ord(" "): 10,
        curses.KEY_PPAGE: -10,
    }
    if key in (27, curses.KEY_LEFT, curses.KEY_BACKSPACE, 127, ord("h")) and model.opened is not None:
        model.back()
    elif key in steps:
        if model.opened is not None:
            model.scroll = max(0, model.scroll + steps[key])
            model.changed = True
        else:
            model.move(steps[key])
    elif key in (ord("n"), ord("\t")):
        model.step_working(1)
    elif key in (ord("p"), curses.KEY_BTAB):
        model.step_working(-1)
    elif key in (ord("\n"), ord("\r"), curses.KEY_ENTER, ord("o"), ord("l"), curses.KEY_RIGHT):
        model.open()
    elif key == curses.KEY_RESIZE:
        model.changed = True
    return True


async def _run(window: Any, socket: StrPath | None, agent: str | None) -> None:
    model = WatchModel(agent)
    screen = _Screen(window)
    window.nodelay(True)
    window.keypad(True)
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    keys: list[int] = []

    def read_keys() -> None:
        while (key := window.getch()) != -1:
            keys.append(key)
        wake.set()

    # Python's handler replaces curses' own, so the new size is read here and told to curses.
    def resized() -> None:
        screen.resized()
        wake.set()

    watched = False  # (a daemon that was never there is said at once, on the way out)
    try:
        while True:
            try:
                async with aconnect(socket, start=False) as daemon:
                    stream = daemon.events(agents=[agent] if agent else None, snapshot=True)
                    async with stream:
                        model.lost = None
                        if stream.snapshot is not None:
                            model.load(stream.snapshot)
                        if not watched:
                            watched = True
                            loop.add_reader(sys.stdin.fileno(), read_keys)
                            loop.add_signal_handler(signal.SIGWINCH, resized)
                            screen.resized()  # the terminal may have changed size before the handler
                        reader = asyncio.create_task(_follow(stream, model, wake))
                        reader.add_done_callback(lambda _: wake.set())  # (its end: the connection's)
                        try:
                            await _frames(daemon, model, screen, keys, wake, reader)
                            return  # q
                        finally:
                            reader.cancel()
                            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                                await reader
            except ConnectionError:  # lost, or not there (again): what it last said stays shown
                if not watched:
                    raise
                model.lost = "the daemon is gone: its rows as it left them; back when one answers again"
                model.changed = True
                if not await _until_back(model, screen, keys, wake):
                    return  # q
    finally:
        if watched:
            loop.remove_reader(sys.stdin.fileno())
            loop.remove_signal_handler(signal.SIGWINCH)


async def _until_back(model: WatchModel, screen: _Screen, keys: list[int], wake: asyncio.Event) -> bool:
    """With no daemon: keys still work, the screen says so, and after a second the daemon is looked
    for again; False when asked to quit."""
    wake.clear()
    while keys:
        if not handle_key(model, keys.pop(0)):
            return False
    model.expire(time.monotonic())
    if model.changed or screen.dirty:
        model.changed = screen.dirty = False
        screen.draw(model)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), RECONNECT_EVERY)
    return True


RECONNECT_EVERY = 1.0  # seconds between looks for a daemon that went away


async def _follow(stream: AsyncEventStream, model: WatchModel, wake: asyncio.Event) -> None:
    snapshot = stream.snapshot
    async for event in stream:
        if stream.snapshot is not snapshot and stream.snapshot is not None:  # a resync: start over
            snapshot = stream.snapshot
            model.load(snapshot)
        model.apply(event)
        wake.set()


async def _frames(
    daemon: AsyncDaemon,
    model: WatchModel,
    screen: _Screen,
    keys: list[int],
    wake: asyncio.Event,
    reader: asyncio.Task[None],
) -> None:
    transcript_read_at = 0.0
    while True:
        wake.clear()  # before reading what woke it: a wake from here on is not lost
        while keys:
            if not handle_key(model, keys.pop(0)):
                return
        if reader.done():
            reader.result()  # the connection was lost: raise it
            raise ConnectionLost("the daemon ended its events")
        await _send_answers(daemon, model)
        if model.asks_stale:
            with contextlib.suppress(SessiondError):
                model.waiting(await daemon.permissions())
        if model.missing:
            await _read_missing(daemon, model)
        for sid in list(model.tails)[:50]:
            model.tails.discard(sid)
            with contextlib.suppress(Exception):
                model.tail(sid, await (await daemon.session(sid)).atranscript(limit=5))
        now = time.monotonic()
        if model.opened is not None and model.transcript_stale and now - transcript_read_at > 0.5:
            model.transcript_stale = False
            transcript_read_at = now
            with contextlib.suppress(Exception):
                model.transcript = await (await daemon.session(model.opened)).atranscript(
                    limit=TRANSCRIPT_LINES
                )
                model.changed = True
        notice_left = model.expire(now)
        if model.changed or screen.dirty:
            model.changed = screen.dirty = False
            screen.draw(model)
        waits = (0.5 if model.transcript_stale else None, notice_left)  # (None: until an event or a key)
        timeout = min((t for t in waits if t is not None), default=None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)
        await asyncio.sleep(REDRAW_INTERVAL)  # pace the frames: events in between are drawn together


async def _send_answers(daemon: AsyncDaemon, model: WatchModel) -> None:
    """Send the answers chosen; one that came too late (answered elsewhere, its turn ended) is
    said in the notice."""
    answers, model.answers = model.answers, []
    for permission, option in answers:
        try:
            await daemon.answer_permission(permission, option)
        except SessiondError as e:
            model.say(f"not answered: {e}")


async def _read_missing(daemon: AsyncDaemon, model: WatchModel) -> None:
    """Read the sessions heard of by events alone: one by one, or all at once when many."""
    missing = model.read()
    try:
        if len(missing) > 20:
            with contextlib.suppress(Exception):
                for session in await daemon.sessions(agent=model.agent):
                    if session.id in missing:
                        model.add(session.info)
            return
        for sid in missing:
            with contextlib.suppress(Exception):
                model.add((await daemon.session(sid)).info)
    finally:
        model.done_reading()


def watch(socket: StrPath | None = None, *, agent: str | None = None) -> int:
    """Run the live view until ``q``; its exit status."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "sessiond: watch needs a terminal; for a log, use `sessiond trace --follow`",
            file=sys.stderr,
        )
        return 2
    os.environ.setdefault("ESCDELAY", "25")  # Esc goes back at once, not after a second
    failure: list[BaseException] = []

    def main(window: Any) -> None:
        try:
            asyncio.run(_run(window, socket, agent))
        except BaseException as e:  # shown after curses has given the terminal back
            failure.append(e)

    curses.wrapper(main)
    if failure:
        raise failure[0]
    return 0
